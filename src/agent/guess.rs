//! The model's own guess at the function a question needs, asked without any tool: the request
//! both `tagloop serve` (`src/serve/ahead.rs`, a first call's tool judged by it) and a run's
//! decision step (`first_call.rs`) send.
//!
//! The request is the question alone: "Which single Python function would you call to answer
//! this question? Reply with its snake_case name only.", under a grammar of one snake_case name
//! where the server takes one, at most [`MAX_TOKENS`] tokens, temperature 0. Its answer is read
//! in the decision room (`crate::policy::words`: the name, its content words, a loop).

use crate::llm::{Api, Message, Prompt, Role, TurnGrammar, TurnRequest};
use crate::policy::MAX_NAME;

/// The guess's token budget: a name of up to [`MAX_NAME`] characters.
pub(crate) const MAX_TOKENS: u32 = 16;
/// The guess's instructions (the first line of its prompt in either API).
pub(crate) const INSTRUCTIONS: &str = "You name Python functions.";

/// The guess's request: the question alone, one snake_case name.
pub(crate) fn request(question: &str, api: Api, grammar: bool) -> TurnRequest {
    let ask = format!(
        "Question: {}\n\nWhich single Python function would you call to answer this question? \
         Reply with its snake_case name only.",
        question.trim()
    );
    let prompt = match api {
        Api::Chat => Prompt::Chat(vec![
            Message::new(Role::System, INSTRUCTIONS),
            Message::new(Role::User, ask),
        ]),
        Api::Completions => Prompt::Text(format!("{INSTRUCTIONS}\n\n{ask}\nFunction name: ")),
    };
    TurnRequest {
        prompt,
        stop: vec!["\n".into()],
        temperature: Some(0.0),
        max_tokens: Some(MAX_TOKENS),
        grammar: grammar.then(|| {
            std::sync::Arc::new(TurnGrammar {
                gbnf: format!("root ::= [a-z] [a-z0-9_]{{2,{}}}\n", MAX_NAME - 1),
                lark: None,
                lazy: None,
            })
        }),
        ..TurnRequest::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Prompt;

    #[test]
    fn the_request_is_the_question_alone_bounded_and_constrained_where_it_can_be() {
        let r = request("  Area of a triangle?\n", Api::Chat, true);
        let Prompt::Chat(messages) = &r.prompt else {
            panic!("not chat")
        };
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].content, INSTRUCTIONS);
        assert!(
            messages[1]
                .content
                .starts_with("Question: Area of a triangle?\n\n")
        );
        assert_eq!(r.max_tokens, Some(MAX_TOKENS));
        assert_eq!(r.temperature, Some(0.0));
        assert!(
            r.grammar
                .is_some_and(|g| g.gbnf.starts_with("root ::= [a-z]"))
        );
        assert!(request("q", Api::Chat, false).grammar.is_none());
        let Prompt::Text(text) = request("q", Api::Completions, false).prompt else {
            panic!("not text")
        };
        assert!(text.starts_with(INSTRUCTIONS) && text.ends_with("Function name: "));
    }
}
