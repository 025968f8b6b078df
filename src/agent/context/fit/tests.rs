use crate::llm::{Message, Role};

use super::*;

/// A history: system, task, then one step per `(action, observation body)`.
fn history(steps: &[(&str, String)]) -> Vec<Message> {
    let mut m = vec![
        Message::new(Role::System, "SYSTEM PROMPT"),
        Message::new(Role::User, "THE TASK"),
    ];
    for (action, body) in steps {
        m.push(Message::new(
            Role::Assistant,
            format!("<thought>I look.</thought>\n<action>{action}</action>"),
        ));
        m.push(Message::new(
            Role::User,
            format!("<observation>\n{body}\n</observation>"),
        ));
    }
    m
}

/// `n` numbered lines of about 40 bytes each.
fn lines(n: usize) -> String {
    (1..=n)
        .map(|i| format!("line {i:04} of the file, some words here"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn bytes(m: &[Message]) -> usize {
    m.iter().map(|m| m.content.len()).sum()
}

#[test]
fn nothing_asked_nothing_cut() {
    let h = history(&[(r#"read_file(path="a.txt")"#, lines(200))]);
    let f = fit_messages(&h, 0, 1);
    assert_eq!(f.messages, h);
    assert!(f.report.is_empty());
}

#[test]
fn old_observation_keeps_head_and_tail_with_a_read_file_marker() {
    let h = history(&[
        (r#"read_file(path="src/a.rs", start_line=11)"#, lines(200)),
        (r#"read_file(path="b.txt")"#, lines(200)),
    ]);
    let f = fit_messages(&h, 1000, 1);
    assert_eq!(f.report.observations_cut, 1);
    assert_eq!(f.report.steps_summarised, 0);
    let cut = &f.messages[3].content;
    assert!(cut.starts_with("<observation>\nline 0001"), "{cut}");
    assert!(cut.ends_with("line 0200 of the file, some words here\n</observation>"));
    // The marker names the file's own line numbers (the read began at line 11) and the call
    // that shows them again.
    let marker = cut.lines().find(|l| l.starts_with("[…")).expect("a marker");
    let first: usize = marker
        .split(": lines ")
        .nth(1)
        .and_then(|s| s.split('-').next())
        .and_then(|n| n.parse().ok())
        .expect("a first line");
    assert!(marker.contains(&format!(
        r#"read_file(path="src/a.rs", start_line={first})"#
    )));
    // The first cut line is the body's line after the head's last one.
    let head_lines = cut
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("line "))
        .count();
    assert_eq!(first, 10 + head_lines + 1, "{marker}");
    assert_eq!(f.saved, bytes(&h) - bytes(&f.messages));
    // The last step, the system prompt and the task are whole.
    assert_eq!(f.messages[..2], h[..2]);
    assert_eq!(f.messages[4..], h[4..]);
}

#[test]
fn searches_say_run_the_search_again() {
    let h = history(&[
        (r#"search_files(pattern="fn main")"#, lines(100)),
        ("echo(text=\"x\")", "short".into()),
    ]);
    let f = fit_messages(&h, 10, 1);
    assert!(f.messages[3].content.contains("run the same search again"));
}

#[test]
fn steps_are_summarised_oldest_first_after_every_observation_is_cut() {
    let h = history(&[
        (r#"read_file(path="a")"#, lines(100)),
        (r#"read_file(path="b")"#, lines(100)),
        (r#"read_file(path="c")"#, lines(100)),
    ]);
    let f = fit_messages(&h, usize::MAX, 1);
    // Two old observations cut, both old steps summarised, then the last one's observation cut.
    assert_eq!(f.report.observations_cut, 3);
    assert_eq!(f.report.steps_summarised, 2);
    assert_eq!(
        f.messages[2].content,
        r#"<action>read_file(path="a")</action>"#
    );
    let obs = &f.messages[3].content;
    assert!(
        obs.contains("[result of 3899 bytes, 100 lines left out"),
        "{obs}"
    );
    assert!(obs.contains("call read_file again"));
    assert_eq!(f.messages[6], h[6], "the last turn is whole");
    assert!(
        f.messages[7]
            .content
            .contains(r#"To see them: read_file(path="c", start_line="#),
        "the last observation, cut last: {}",
        f.messages[7].content
    );
    assert!(f.saved < usize::MAX);
}

#[test]
fn only_as_much_as_asked_is_left_out() {
    let h = history(&[
        (r#"read_file(path="a")"#, lines(100)),
        (r#"read_file(path="b")"#, lines(100)),
        (r#"read_file(path="c")"#, lines(100)),
    ]);
    let f = fit_messages(&h, 100, 1);
    assert_eq!(f.report.observations_cut, 1);
    assert_eq!(f.messages[5], h[5], "the second step was not needed");
}

#[test]
fn kept_steps_and_text_after_an_observation_stay() {
    let mut h = history(&[
        (r#"read_file(path="a")"#, lines(100)),
        (r#"read_file(path="b")"#, lines(100)),
        (r#"read_file(path="c")"#, lines(100)),
    ]);
    h[3].content.push_str("\n\nA FOLLOW-UP QUESTION");
    let f = fit_messages(&h, usize::MAX, 2);
    assert_eq!(f.report.steps_summarised, 1);
    assert!(f.messages[3].content.ends_with("\n\nA FOLLOW-UP QUESTION"));
    assert_eq!(
        (&f.messages[4], &f.messages[6]),
        (&h[4], &h[6]),
        "kept turns"
    );
}

#[test]
fn the_kept_steps_observations_are_cut_only_when_nothing_else_is_left() {
    let h = history(&[
        (r#"read_file(path="a")"#, lines(100)),
        (r#"read_file(path="b")"#, lines(100)),
    ]);
    // Enough for the old step's cut and summary: the last step stays whole.
    let f = fit_messages(&h, 1000, 1);
    assert_eq!(f.messages[4..], h[4..]);
    // More than the old step can give: the last observation is cut too, its turn kept.
    // (The old step can give at most its own bytes.)
    let old = bytes(&h[2..4]);
    let f = fit_messages(&h, old + 1000, 1);
    assert_eq!(f.messages[4], h[4]);
    assert!(f.messages[5].content.len() < h[5].content.len());
    assert!(f.saved >= old + 1000, "{} < {}", f.saved, old + 1000);
}

#[test]
fn a_single_step_keeps_its_turn_and_gives_up_only_its_long_observation() {
    let h = history(&[(r#"read_file(path="a")"#, lines(500))]);
    let f = fit_messages(&h, usize::MAX, 1);
    assert_eq!(f.messages[..3], h[..3]);
    assert_eq!(f.report.observations_cut, 1);
    let short = history(&[(r#"read_file(path="a")"#, lines(5))]);
    let f = fit_messages(&short, usize::MAX, 1);
    assert_eq!((f.messages, f.saved), (short, 0), "nothing short is cut");
}

#[test]
fn multibyte_text_is_cut_on_char_boundaries() {
    let body = "é".repeat(3000);
    let h = history(&[(r#"run_command(command="x")"#, body), ("x()", "y".into())]);
    let f = fit_messages(&h, 10, 1);
    assert_eq!(f.report.observations_cut, 1);
    assert!(f.messages[3].content.contains("call run_command again"));
}

#[test]
fn the_last_observation_is_cut_as_deep_as_asked_keeping_its_tail() {
    // One read of a ~4 KB file, and more asked than the usual head and tail would save.
    let h = history(&[(r#"read_file(path="app.log")"#, lines(100))]);
    let body = h[3].content.len();
    let f = fit_messages(&h, 3300, 1);
    assert!(f.saved >= 3300, "saved {} of {body}", f.saved);
    assert_eq!(f.saved, bytes(&h) - bytes(&f.messages));
    let cut = &f.messages[3].content;
    // Head and tail both kept, the tail with the file's last line; the marker says how to read
    // the rest.
    assert!(cut.starts_with("<observation>\nline 0001"), "{cut}");
    assert!(cut.contains("line 0100 of the file"), "{cut}");
    assert!(cut.contains(r#"To see them: read_file(path="app.log", start_line="#));
    assert_eq!(f.messages[..3], h[..3], "the turn is whole");
}

#[test]
fn the_last_cut_stops_at_the_shortest_form_and_at_what_it_is_asked() {
    let h = history(&[(r#"read_file(path="app.log")"#, lines(100))]);
    // Everything asked: a short head and tail remain, not nothing.
    let f = fit_messages(&h, usize::MAX, 1);
    let cut = &f.messages[3].content;
    let kept: usize = cut.lines().filter(|l| l.starts_with("line ")).count();
    assert!((4..=12).contains(&kept), "{kept} lines kept: {cut}");
    assert!(cut.contains("line 0100 of the file"), "{cut}");
    // The old steps asked for much, the last observation for little: it gives little.
    let f = fit_messages_within(&h, usize::MAX, 500, 1);
    assert!(
        (500..1000).contains(&f.saved),
        "{} saved for 500 asked",
        f.saved
    );
    assert!(f.messages[3].content.contains("line 0100 of the file"));
    // Nothing asked of it: whole.
    let f = fit_messages_within(&h, usize::MAX, 0, 1);
    assert_eq!(f.messages, h);
}

/// The marker's numbers for a cut observation as the runtime writes it (a header above the
/// tool's lines, a runtime notice and the steps left below): the file's own lines, exactly
/// the ones missing, never the header or the notes.
fn assert_marker_names_the_missing_lines(cut: &str) {
    let kept: Vec<usize> = cut
        .lines()
        .filter_map(|l| l.strip_prefix("line ")?.get(..4)?.parse().ok())
        .collect();
    let marker = cut.lines().find(|l| l.starts_with("[…")).expect("a marker");
    let range = marker
        .split(": lines ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .expect("a range");
    let (a, b) = range.split_once('-').expect("a-b");
    let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
    let head_last = kept.iter().copied().filter(|&n| n < a).max().unwrap_or(0);
    let tail_first = kept.iter().copied().find(|&n| n > b).unwrap_or(101);
    assert_eq!((head_last + 1, tail_first - 1), (a, b), "{cut}");
    assert!(
        marker.contains(&format!(r#"read_file(path="app.log", start_line={a})"#)),
        "{marker}"
    );
}

#[test]
fn a_cut_under_the_observations_header_names_the_files_lines() {
    let args = serde_json::json!({"path": "app.log"});
    let result = format!(
        "{}\n\nThe question also names b.log, which no call has used yet.",
        crate::policy::tool_result(
            "read_file",
            args.as_object().expect("an object"),
            &lines(100),
        ),
    );
    let notice = "This is the third time in a row you make exactly this call; it was not run again. \
                  Its result was:";
    for body in [
        format!("{result}\n\n[5 steps left]"),
        format!("{notice}\n{result}\nUse that result.\n\n[3 steps left]"),
    ] {
        let h = history(&[(r#"read_file(path="app.log")"#, body)]);
        for asked in [1000, 3300, usize::MAX] {
            let f = fit_messages(&h, asked, 1);
            assert_marker_names_the_missing_lines(&f.messages[3].content);
        }
    }
}
