//! The model's own guess at the function a question needs, asked without the tools: serve's
//! check that a first call's tool is about what the question asks.
//!
//! Asked something no declared tool does, Qwen2.5-Coder-0.5B calls the tool that is there and
//! fills it with the question's own numbers (`determine_body_mass_index(weight=10, height=5)`
//! for a triangle of base 10 and height 5), which the grounding rule (`grounding.rs`) cannot tell
//! from a right call. Yet asked, without any tool, which function it would call, the same model
//! names one about the question (`triangle_area`). So to judge a first call, serve asks one
//! short request of its own, sent with the turn (`serve/ahead.rs`): the question alone, "Which single Python function
//! would you call to answer this question? Reply with its snake_case name only.", under a
//! grammar of one snake_case name where the server takes one, at most `MAX_TOKENS` tokens,
//! temperature 0 (see *Time* below). When the guessed
//! name shares no content word with the turn's called tools (their names, descriptions, and
//! their parameters' names and descriptions), the turn is declined and answered in text
//! (`serve/answer.rs`), as an ungrounded call is.
//!
//! The request is `src/agent/guess.rs`'s and the reading of its answer and the content words
//! are `words.rs`'s; this file's verdict is serve's and a run's decision step's alike
//! (`decide.rs`), who asked being an input ([`Asker`]). Calibrated on BFCL cases 10–19
//! (experiments.md, "Serve's decision").
//!
//! A guess that cannot be had keeps the call: an upstream that fails the request, an answer
//! with no name in it (logged), or a name that says one word three times or more (a loop, not
//! a guess: `christian_christian_christian_…`, read in `words.rs`). So does a guess
//! that shares no content word with the question itself: it is about nothing the question says (SmolLM2-135M's guesses), so it tells nothing
//! about the called tool. Each judgement, kept or declined, goes to the transcript
//! (`judgement.rs`).
//!
//! **Time.** The guess is part of answering the request: by default it has what is left of the
//! request's own time limit (`--timeout`), as the turn beside it has, so an upstream slow to
//! answer (a queue of workers ahead of it, a loaded server) delays the check but does not skip
//! it; should the request's limit run out during the guess, the client gets the 504 any slow
//! upstream request gets, and the transcript a judgement saying the guess had not answered. A
//! bound of its own (`--guess-timeout SECS`, [`ServeConfig::guess_timeout`]) trades the check
//! for time: counted from the end of the turn (the guess runs beside the turn, and on a
//! one-slot server waits for it), past it the call goes out unchecked, and the transcript says
//! the guess timed out (`serve/ahead.rs`).
//!
//! [`ServeConfig::guess_timeout`]: super::ServeConfig::guess_timeout

use super::Decision;
use super::Judgement;
use super::words::{Reading, content_words, reading, tool_words};
use super::{Choice, Entry, ToolSpec, View};

/// The guess's verdict on the called tools: kept or declined, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The guessed name shares a content word with a called tool, or says nothing: why.
    Keep(String),
    /// The guessed name shares none: why.
    Decline(String),
}

/// The called tools a turn is judged on: under `tool_choice: auto`, a turn of calls right after
/// a user message (after results, a call is the conversation's doing); `None` when the turn is
/// not judged.
pub(crate) fn judged<'a>(view: &View<'a>, decision: &Decision) -> Option<Vec<&'a ToolSpec>> {
    let Decision::Calls(calls) = decision else {
        return None;
    };
    let Some(Entry::Question(_)) = view.conversation.last() else {
        return None;
    };
    if view.choice != Choice::Auto {
        return None;
    }
    let mut called: Vec<&ToolSpec> = Vec::new();
    for (name, _) in calls {
        if let Some(tool) = view.tool(name)
            && !called.iter().any(|t| t.name == tool.name)
        {
            called.push(tool);
        }
    }
    (!called.is_empty()).then_some(called)
}

/// What asking for the guess gave, before any call is judged by it (`serve/ahead.rs` asks it
/// beside the turn, so the answer may come before the turn's call does).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Guessed {
    /// The function the model named.
    Named(String),
    /// An answer with no function name in it.
    NoName,
    /// The request failed (with the upstream's HTTP status, when it gave one).
    Failed(Option<u16>),
    /// No answer within the guess's own bound (`--guess-timeout`), in seconds.
    TimedOut(f64),
    /// The model client's own time limit ran out, which in serve is the request's
    /// (`--timeout`, `clients.rs`, in seconds): the request is over, as any slow upstream request
    /// ends it.
    OutOfTime(u64),
}

/// The judgement of `called` by what asking for the guess gave: only a named guess can
/// decline; any other outcome keeps the call, unchecked, and says why.
pub(crate) fn judgement(guessed: &Guessed, question: &str, called: &[&ToolSpec]) -> Judgement {
    let kept = |why: String| Judgement::guess(called, None, false, why);
    match guessed {
        Guessed::Named(name) => {
            let (declined, why) = match verdict(question, name, called) {
                Verdict::Keep(why) => (false, why),
                Verdict::Decline(why) => (true, why),
            };
            Judgement::guess(called, Some(name.clone()), declined, why)
        }
        Guessed::NoName => kept("the model named no function for the question".into()),
        Guessed::Failed(status) => {
            let status = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
            kept(format!(
                "the guess's request failed{status}: the call is kept unchecked"
            ))
        }
        // The request ends with it (`serve/ahead.rs` returns its 504); kept, should anything read it.
        Guessed::OutOfTime(_) => Judgement::unfinished(called),
        Guessed::TimedOut(seconds) => Judgement {
            timed_out: true,
            ..kept(format!(
                "the guess did not answer within its {seconds} s (--guess-timeout): the call is kept unchecked"
            ))
        },
    }
}

/// The verdict on `called` given the name guessed for `question`. A guess that shares no word
/// with the question itself says nothing about it (SmolLM2-135M names functions unrelated to
/// the question, and judged by those lost right calls): such a guess keeps the call.
pub(crate) fn verdict(question: &str, guessed: &str, called: &[&ToolSpec]) -> Verdict {
    verdict_for(Asker::Serve, question, guessed, called)
}

/// Who asked for the guess: the one thing that differs between serve's verdict and a run's
/// decision step (`decide.rs`), an input rather than a second copy of the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asker {
    /// Serve: a client's tools are whatever it declared, so a guess that shares no word with the
    /// question says nothing about them and keeps the call.
    Serve,
    /// A run: its tools are the workspace's, and a question that names the workspace was kept
    /// before any guess (`decide.rs`), so every guess with words judges.
    Run,
}

/// The verdict on `called` given the name guessed for `question`, for `asker`.
pub(crate) fn verdict_for(
    asker: Asker,
    question: &str,
    guessed: &str,
    called: &[&ToolSpec],
) -> Verdict {
    let names: Vec<&str> = called.iter().map(|t| t.name.as_str()).collect();
    let names = names.join(", ");
    let guess = match reading(guessed) {
        Reading::Words(words) => words,
        // A name of stop words only (`get_value`) names nothing.
        Reading::Nothing => {
            return Verdict::Keep(format!(
                "the model's own function, {guessed}, names nothing"
            ));
        }
        Reading::Repeats(word) => {
            tracing::debug!(guessed, "the guess repeats one word; the call is kept");
            return Verdict::Keep(format!(
                "the model's own function, {guessed}, repeats the word {word}: no guess, the call is kept"
            ));
        }
    };
    if asker == Asker::Serve && guess.is_disjoint(&content_words(question)) {
        tracing::debug!(
            guessed,
            "the guess names nothing the question says; the call is kept"
        );
        return Verdict::Keep(format!(
            "the model's own function, {guessed}, names nothing the question says"
        ));
    }
    if called
        .iter()
        .any(|t| !guess.is_disjoint(&tool_words(&t.name, &t.description, &t.parameters)))
    {
        return Verdict::Keep(format!(
            "the model's own function for the question, {guessed}, is about {names}"
        ));
    }
    Verdict::Decline(match asker {
        Asker::Serve => format!(
            "declined: asked without the tools, the model would call {guessed}, which shares no word with {names}"
        ),
        Asker::Run => format!(
            "the question names no file, and asked without the tools the model would call {guessed}, which shares no word with {names}"
        ),
    })
}

#[cfg(all(test, feature = "serve"))]
mod tests {
    use super::*;
    use crate::serve::{Ask, parse_json};
    use serde_json::Value;

    fn tool(name: &str, description: &str, params: Value) -> Ask {
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": "q"}],
            "tools": [{"type": "function", "function": {"name": name, "description": description,
                "parameters": {"type": "object", "properties": params}}}]
        });
        Ask::read(&parse_json(body.to_string().as_bytes()).unwrap()).unwrap()
    }

    /// The verdict for a question that names what the guess names (the guess is about it).
    fn kept(guess: &str, ask: &Ask) -> bool {
        let called: Vec<&ToolSpec> = ask.tools.iter().collect();
        matches!(
            verdict(&guess.replace('_', " "), guess, &called),
            Verdict::Keep(_)
        )
    }

    #[test]
    fn a_guess_about_nothing_in_the_question_keeps_the_call() {
        let bmi = tool(
            "determine_body_mass_index",
            "Calculate body mass index given weight and height.",
            serde_json::json!({}),
        );
        let called: Vec<&ToolSpec> = bmi.tools.iter().collect();
        let q =
            "Calculate the area of a triangle given the base is 10 meters and height is 5 meters.";
        assert!(matches!(
            verdict(q, "triangle_area", &called),
            Verdict::Decline(_)
        ));
        assert_eq!(
            verdict(q, "process_data", &called),
            Verdict::Keep(
                "the model's own function, process_data, names nothing the question says".into()
            )
        );
        assert!(matches!(
            verdict(q, "my_function", &called),
            Verdict::Keep(_)
        ));
    }

    #[test]
    fn a_guess_about_another_thing_declines_and_one_about_the_tool_keeps() {
        // BFCL irrelevance 0 and simple_python 11 (calibration slice, 10-19, has the same kind).
        let bmi = tool(
            "determine_body_mass_index",
            "Calculate body mass index given weight and height.",
            serde_json::json!({"weight": {"description": "Weight in kilograms."},
                               "height": {"description": "Height in meters."}}),
        );
        assert!(!kept("triangle_area", &bmi));
        assert!(!kept("calculate_area_of_triangle", &bmi));
        assert!(kept("body_mass_index", &bmi));
        // A parameter's description is the tool's too.
        assert!(kept("kilograms_to_pounds", &bmi));
        let area = tool(
            "calculate_triangle_area",
            "Area of a triangle.",
            serde_json::json!({}),
        );
        assert!(kept("triangle_area", &area));
    }

    #[test]
    fn words_are_stemmed_split_at_case_and_digits_and_stop_words_do_not_count() {
        let integrate = tool(
            "integrate",
            "Integration of a function.",
            serde_json::json!({}),
        );
        assert!(kept("integration_of_x", &integrate));
        let solar = tool("solarFarm_potential", "", serde_json::json!({}));
        assert!(kept("solar_panel_area", &solar));
        let gcd = tool("math_gcd", "", serde_json::json!({}));
        assert!(kept("gcd4050", &gcd));
        // `get` and `calculate` are every function's verbs: they match nothing.
        let weather = tool("get_current_weather", "", serde_json::json!({}));
        assert!(!kept("get_votes", &weather));
        assert!(!kept("calculate_velocity", &weather));
        // A name of stop words only says nothing: kept.
        assert!(kept("get_value", &weather));
    }
}
