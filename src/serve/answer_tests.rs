//! Unit tests of `answer.rs`: how a committed answer ends, and call ids.

use super::*;

fn finish(read: Result<Read, Refusal>, server: Option<&str>) -> Vec<ServeEvent> {
    let sent = Sent {
        reasoning: "Known.".into(),
        content: "Hello".into(),
    };
    let mut events = Vec::new();
    finish_committed(
        read,
        &sent,
        server.map(str::to_owned),
        Usage::default(),
        &mut |e| events.push(e),
    );
    events
}

#[test]
fn a_committed_answer_gets_only_what_the_whole_reading_adds() {
    let read = Ok(Read {
        thought: Some("Known.".into()),
        decision: Decision::Answer {
            text: "Hello world".into(),
            cut: false,
        },
    });
    assert_eq!(
        finish(read, Some("Server side.")),
        vec![
            ServeEvent::Reasoning("\n\nServer side.".into()),
            ServeEvent::Content(" world".into()),
            ServeEvent::Done {
                finish_reason: FinishReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

#[test]
fn a_committed_answer_refused_whole_ends_as_sent() {
    // A repetition cut by the guard: the client has part of the answer; it is not
    // corrected but ended, as cut.
    let refused = Err(Refusal {
        message: "You repeated yourself.".into(),
        kept: String::new(),
        answer_next: false,
    });
    assert_eq!(
        finish(refused, None),
        vec![ServeEvent::Done {
            finish_reason: FinishReason::Length,
            usage: Usage::default()
        }]
    );
}

#[test]
fn call_ids_differ() {
    let a = super::call_id();
    let b = super::call_id();
    assert!(a.starts_with("call_") && a.len() == 5 + 32, "{a}");
    assert_ne!(a, b);
}
