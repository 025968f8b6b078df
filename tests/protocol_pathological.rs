//! The pathological inputs of issue 2: each must end in an error (or a sane result), never a
//! crash or a stack overflow. Their timing is measured in `benches/protocol.rs`, not here.

use tagloop::protocol::{TurnKind, parse_action, parse_report, read_turn};

const MIB: usize = 1 << 20;

#[test]
fn unbalanced_quotes_4mib() {
    let turn = format!("<action>write(content={}</action>", "\"".repeat(4 * MIB));
    let r = parse_report(&turn, &[]);
    assert_eq!(r.kind, "error");
    let turn = format!(
        "<action>write(content=\"{}</action>",
        "a\", \"".repeat(4 * MIB / 6)
    );
    assert_eq!(parse_report(&turn, &[]).kind, "error");
}

#[test]
fn nested_brackets_100k() {
    let text = format!("f(a={})", "[".repeat(100_000));
    let e = parse_action(&text).unwrap_err();
    assert!(e.message.contains("128"), "{e}");
    let text = format!("f(a={}{})", "[{\"k\":".repeat(50_000), "1");
    assert!(parse_action(&text).is_err());
}

#[test]
fn many_action_tags_50k() {
    let turn = "<action>".repeat(50_000);
    let r = parse_report(&turn, &[]);
    assert_eq!(r.kind, "error");
    let turn = "<action ".repeat(50_000);
    assert_eq!(read_turn(&turn).kind, TurnKind::None);
    let turn = "<think><thought><action".repeat(20_000);
    let _ = parse_report(&turn, &[]);
}

#[test]
fn backslashes_4mib() {
    let turn = format!("<action>f(a=\"{}</action>", "\\".repeat(4 * MIB));
    let r = parse_report(&turn, &[]);
    assert_eq!(r.kind, "error");
    // An even run of backslashes followed by a closing quote is a complete string.
    let text = format!("f(a=\"{}\")", "\\".repeat(4 * MIB));
    let call = parse_action(&text).unwrap();
    assert_eq!(call.args[0].value.as_str().map(str::len), Some(2 * MIB));
}

#[test]
fn large_action_1mib_parses() {
    let body = "fn main() { println!(\"hi\"); }\n".repeat(MIB / 30);
    let turn = format!(
        "<thought>write it</thought><action>write_file(path=\"a.rs\", content=\"\"\"{body}\"\"\")</action>"
    );
    let r = parse_report(&turn, &[]);
    assert_eq!(r.kind, "action");
    assert_eq!(
        r.action.unwrap().args[1].value.as_str(),
        Some(body.as_str())
    );
}
