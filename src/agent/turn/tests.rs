//! The engine's rules, each with a seat that answers from a list and writes down what it was
//! asked: when a turn goes on, under which stage, and when it ends.

use std::convert::Infallible;

use super::test_seat::ListSeat;
use super::*;
use crate::llm::{Constraint, Finish};

const RULES: Rules = Rules {
    max_continuations: 2,
    close_thought: CloseThought::Constrained,
};

fn answer(text: &str, finish: Finish) -> Result<TurnResult, LlmError> {
    Ok(TurnResult::new(text, finish))
}

fn constrained(text: &str, finish: Finish) -> Result<TurnResult, LlmError> {
    let mut result = TurnResult::new(text, finish);
    result.constraint = Constraint::Grammar;
    Ok(result)
}

/// A 400 with the server's words.
fn refused(message: &str) -> Result<TurnResult, LlmError> {
    let (status, url) = (400, "http://upstream".into());
    let message = message.into();
    Err(LlmError::Http {
        status,
        url,
        message,
    })
}

fn too_long() -> Result<TurnResult, LlmError> {
    refused("maximum context length is 2048 tokens. However, you requested 3000 tokens.")
}

async fn turn_of(seat: &mut ListSeat, rules: Rules) -> Result<ModelTurn, TurnFailure<Infallible>> {
    ask_turn(seat, rules, String::new(), Some(())).await
}

#[tokio::test]
async fn a_whole_turn_is_one_request() {
    let mut seat = ListSeat::new(vec![answer("<final_answer>4</final_answer>", Finish::End)]);
    let turn = turn_of(&mut seat, RULES).await.unwrap();
    assert_eq!(turn.text, "<final_answer>4</final_answer>");
    assert_eq!(seat.asked, vec![(Stage::Whole, String::new())]);
    assert!(seat.fitted.is_empty(), "the first request came fitted");
}

#[tokio::test]
async fn a_constrained_turn_cut_in_its_thought_is_closed_once_and_asked_for_its_decision() {
    let mut seat = ListSeat::new(vec![
        constrained("<thought>I think and think", Finish::Length),
        constrained("<final_answer>4</final_answer>", Finish::End),
    ]);
    let turn = turn_of(&mut seat, RULES).await.unwrap();
    assert_eq!(seat.closed, vec!["<thought>I think and think".to_string()]);
    assert_eq!(seat.asked[1].0, Stage::Decision);
    assert_eq!(seat.asked[1].1, "<thought>I think and think\n</thought>\n");
    assert_eq!(seat.asked.len(), 2);
    assert!(
        turn.text
            .ends_with("</thought>\n<final_answer>4</final_answer>")
    );
}

#[tokio::test]
async fn a_thought_is_closed_only_where_the_rules_say() {
    // Unconstrained: a run leaves it to the correction.
    let mut seat = ListSeat::new(vec![answer("<thought>on and on", Finish::Length)]);
    let turn = turn_of(&mut seat, RULES).await.unwrap();
    assert_eq!((seat.asked.len(), turn.finish), (1, Finish::Length));
    // Serve closes any turn's thought, but once a request (`Never` after that).
    let any = Rules {
        close_thought: CloseThought::Any,
        ..RULES
    };
    let mut seat = ListSeat::new(vec![
        answer("<thought>on and on", Finish::Length),
        answer("<final_answer>done</final_answer>", Finish::End),
    ]);
    turn_of(&mut seat, any).await.unwrap();
    assert_eq!((seat.asked.len(), seat.closed.len()), (2, 1));
    let never = Rules {
        close_thought: CloseThought::Never,
        ..RULES
    };
    let mut seat = ListSeat::new(vec![constrained("<thought>on and on", Finish::Length)]);
    turn_of(&mut seat, never).await.unwrap();
    assert_eq!((seat.asked.len(), seat.closed.len()), (1, 0));
}

#[tokio::test]
async fn a_stop_inside_an_argument_string_is_put_back_up_to_the_limit() {
    let open = "<action>write(text=\"a <observation>";
    let mut seat = ListSeat::new(vec![
        answer(
            "<action>write(text=\"a ",
            Finish::Stop("<observation>".into()),
        ),
        answer(" b ", Finish::Stop("<observation>".into())),
        answer(" c ", Finish::Stop("<observation>".into())),
    ]);
    let turn = turn_of(&mut seat, RULES).await.unwrap();
    // Two continuations allowed: the third stop ends the turn.
    assert_eq!(seat.asked.len(), 3);
    assert_eq!(seat.asked[1], (Stage::Continuation, open.to_string()));
    assert!(turn.action_start.is_some());
    assert_eq!(turn.finish, Finish::Stop("<observation>".into()));
    let none = Rules {
        max_continuations: 0,
        ..RULES
    };
    let mut seat = ListSeat::new(vec![answer(
        "<action>write(text=\"a ",
        Finish::Stop("<observation>".into()),
    )]);
    turn_of(&mut seat, none).await.unwrap();
    assert_eq!(seat.asked.len(), 1);
}

#[tokio::test]
async fn a_prompt_refused_as_too_long_is_fitted_harder_once_a_turn() {
    let mut seat = ListSeat::new(vec![
        too_long(),
        answer("<final_answer>x</final_answer>", Finish::End),
    ]);
    let turn = turn_of(&mut seat, RULES).await.unwrap();
    assert_eq!(turn.text, "<final_answer>x</final_answer>");
    assert_eq!(seat.fitted, vec![true]);
    assert_eq!(
        seat.asked[1].0,
        Stage::Whole,
        "the retry asks for the whole turn again"
    );

    let mut seat = ListSeat::new(vec![too_long(), too_long()]);
    match turn_of(&mut seat, RULES).await {
        Err(TurnFailure::Context { final_fits, why }) => {
            assert!(!final_fits);
            assert!(why.contains("again, after fitting"), "{why}");
        }
        other => panic!("expected the context failure, got {other:?}"),
    }
}

#[tokio::test]
async fn no_room_for_a_continuation_ends_the_turn_as_cut() {
    let mut seat = ListSeat::new(vec![answer(
        "<action>write(text=\"a ",
        Finish::Stop("<observation>".into()),
    )]);
    seat.fitted.push(false); // the first request's own fitting, as a run does it
    seat.full_after_first = true;
    let turn = turn_of(&mut seat, RULES).await.unwrap();
    assert_eq!(turn.finish, Finish::Length);
    assert_eq!(turn.text, "<action>write(text=\"a <observation>");
}

fn prefill_refused() -> Result<TurnResult, LlmError> {
    refused("assistant prefill is not supported")
}

#[tokio::test]
async fn a_chat_server_that_will_not_continue_ends_the_turn_before_the_continuation() {
    let stopped = || {
        answer(
            "<action>write(text=\"a ",
            Finish::Stop("<observation>".into()),
        )
    };
    let mut seat = ListSeat::new(vec![stopped(), prefill_refused()]);
    let turn = turn_of(&mut seat, RULES).await.unwrap();
    assert_eq!(seat.asked.len(), 2, "the continuation was asked");
    assert_eq!(turn.text, "<action>write(text=\"a ");
    assert_eq!(turn.finish, Finish::Stop("<observation>".into()));
    assert!(turn.action_start.is_none());

    // Completions continue by themselves: a failure there is the model's.
    let mut seat = ListSeat::new(vec![stopped(), prefill_refused()]);
    seat.api = Api::Completions;
    assert!(matches!(
        turn_of(&mut seat, RULES).await,
        Err(TurnFailure::Model(_))
    ));
}

#[tokio::test]
async fn a_turn_may_begin_in_the_callers_words() {
    let mut seat = ListSeat::new(vec![answer(
        "rest.</thought>\n<final_answer>no</final_answer>",
        Finish::End,
    )]);
    let turn = ask_turn(&mut seat, RULES, "<thought>Begun: ".into(), None)
        .await
        .unwrap();
    assert_eq!(
        seat.asked,
        vec![(Stage::Whole, "<thought>Begun: ".to_string())]
    );
    assert_eq!(
        seat.fitted,
        vec![false],
        "fitted with the start in the prompt"
    );
    assert!(turn.text.starts_with("<thought>Begun: rest."));
}

#[tokio::test]
async fn a_cut_turn_that_called_in_another_dialect_is_not_closed() {
    let call = "<thought>Paris.</thought>\n<get_weather><city>Paris</city></get_weather>";
    let mut seat = ListSeat::new(vec![constrained(call, Finish::Length)]);
    turn_of(&mut seat, RULES).await.unwrap();
    assert_eq!((seat.asked.len(), seat.closed.len()), (1, 0));
}

#[tokio::test]
async fn a_closed_thought_the_server_will_not_continue_ends_where_it_was_cut() {
    let mut seat = ListSeat::new(vec![
        constrained("<thought>on and on  ", Finish::Length),
        prefill_refused(),
    ]);
    let turn = turn_of(&mut seat, RULES).await.unwrap();
    assert_eq!(turn.text, "<thought>on and on");
    assert_eq!(turn.finish, Finish::Length);
}
