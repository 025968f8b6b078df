//! The scripted model: file format, stop semantics, streaming, running out of turns.

use std::sync::Arc;

use tagloop::llm::{Enforcer, Finish, LlmError, Message, Model, Prompt, Role, TurnRequest};
use tagloop::llm::{Script, ScriptedModel};

const SCRIPT: &str = "\
A demo script. This text is a comment.
# so is this line, because it is before the first separator
=== turn ===
<thought>I should read the file.</thought>
<action>read_file(path=\"notes.txt\")</action>
<observation>a model that keeps going</observation>
=== turn ignore-stops ===
# not a comment: part of the turn
<final_answer>42</final_answer>
<observation>invented</observation>
=== turn ===
no stop here, just text ✓
=== turn ===
ends with a partial </act
";

fn request() -> TurnRequest {
    TurnRequest {
        prompt: Prompt::Chat(vec![
            Message::new(Role::System, "sys"),
            Message::new(Role::User, "<question>q</question>"),
        ]),
        stop: vec![
            "</action>".into(),
            "<observation>".into(),
            "</final_answer>".into(),
        ],
        ..Default::default()
    }
}

#[tokio::test]
async fn replays_turns_with_server_like_stops() {
    let script = Arc::new(Script::parse(SCRIPT).expect("parse"));
    assert_eq!(script.len(), 4);
    let model = ScriptedModel::new(script);
    let req = request();

    let mut deltas: Vec<String> = Vec::new();
    let r = model
        .turn(&req, &mut |d: &str| deltas.push(d.to_owned()))
        .await
        .expect("turn 1");
    assert_eq!(
        r.text,
        "<thought>I should read the file.</thought>\n<action>read_file(path=\"notes.txt\")"
    );
    assert_eq!(r.finish, Finish::Stop("</action>".into()));
    assert_eq!(r.enforced_by, Some(Enforcer::Server));
    assert!(deltas.len() > 3, "streamed in small chunks: {deltas:?}");
    assert_eq!(deltas.concat(), r.text);
    assert_eq!(r.usage.completion_tokens, (r.text.len() as u64).div_ceil(4));
    assert_eq!(
        r.usage.prompt_tokens,
        ("sys".len() as u64 + "<question>q</question>".len() as u64).div_ceil(4)
    );

    let r = model.turn(&req, &mut |_| {}).await.expect("turn 2");
    assert_eq!(
        r.text,
        "# not a comment: part of the turn\n<final_answer>42"
    );
    assert_eq!(r.finish, Finish::Stop("</final_answer>".into()));
    assert_eq!(
        r.enforced_by,
        Some(Enforcer::Client),
        "ignore-stops: the client scanner cuts it"
    );

    let r = model.turn(&req, &mut |_| {}).await.expect("turn 3");
    assert_eq!(r.text, "no stop here, just text ✓");
    assert_eq!(r.finish, Finish::End);
    assert_eq!(r.enforced_by, None);

    let mut seen = String::new();
    let r = model
        .turn(&req, &mut |d: &str| seen.push_str(d))
        .await
        .expect("turn 4");
    assert_eq!(r.text, "ends with a partial ");
    assert_eq!(seen, r.text, "the partial stop never reaches the sink");

    let e = model
        .turn(&req, &mut |_| {})
        .await
        .expect_err("out of turns");
    assert!(
        matches!(
            e,
            LlmError::OutOfTurns {
                turns: 4,
                asked: 5,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("has only 4 turns"), "{e}");
}

#[tokio::test]
async fn starting_at_continues_a_run() {
    let script = Arc::new(Script::parse(SCRIPT).expect("parse"));
    let model = ScriptedModel::starting_at(script, 2);
    let r = model.turn(&request(), &mut |_| {}).await.expect("turn");
    assert_eq!(r.text, "no stop here, just text ✓");
    assert_eq!(model.position(), 3);
    assert!(model.supports_prefill());
}

#[tokio::test]
async fn without_stops_everything_is_sent() {
    let script = Arc::new(Script::parse(SCRIPT).expect("parse"));
    let model = ScriptedModel::new(script);
    let req = TurnRequest {
        prompt: Prompt::Text("p".into()),
        ..Default::default()
    };
    let r = model.turn(&req, &mut |_| {}).await.expect("turn");
    assert!(
        r.text
            .ends_with("<observation>a model that keeps going</observation>")
    );
    assert_eq!(r.finish, Finish::End);
}

#[test]
fn load_from_file_and_describe() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("demo.script");
    std::fs::write(&path, "=== turn ===\r\n<final_answer>hi</final_answer>\r\n").expect("write");
    let script = Script::load(&path).expect("load");
    assert_eq!(script.turns[0].text, "<final_answer>hi</final_answer>");
    let model = ScriptedModel::new(script);
    assert_eq!(model.describe(), format!("scripted:{}", path.display()));

    let e = Script::load(dir.path().join("missing.script")).expect_err("missing");
    assert!(e.to_string().starts_with("cannot read script"), "{e}");
}

// The script format, line by line.

#[test]
fn parses_turns_and_flags() {
    let s = Script::parse("comment\n# also comment\n=== turn ===\n# not a comment\n\nline\n\n=== turn ignore-stops ===\r\nb\r\n=== turn ===\n").unwrap();
    assert_eq!(s.len(), 3);
    assert_eq!(s.turns[0].text, "# not a comment\n\nline\n");
    assert!(!s.turns[0].ignore_stops);
    assert_eq!(s.turns[0].line, 3);
    assert_eq!(s.turns[1].text, "b");
    assert!(s.turns[1].ignore_stops);
    assert_eq!(s.turns[2].text, "");
}

#[test]
fn last_turn_without_newline() {
    let s = Script::parse("=== turn ===\nabc").unwrap();
    assert_eq!(s.turns[0].text, "abc");
    let s = Script::parse("no turns at all\n").unwrap();
    assert!(s.is_empty());
}

#[test]
fn near_separators_are_text() {
    let s = Script::parse("=== turn ===\n=== turn===\n === turn ===\n=== turns ===\n").unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s.turns[0].text, "=== turn===\n === turn ===\n=== turns ===");
}

#[test]
fn unknown_flag_is_an_error() {
    let e = Script::parse("x\n=== turn fast ===\n").unwrap_err();
    assert!(e.to_string().contains("line 2"), "{e}");
    assert!(e.to_string().contains("'fast'"), "{e}");
}
