//! The degeneration guard (`tagloop::llm::RepeatGuard`): a tail that repeats one unit is cut
//! after its first unit; ordinary text, lists and code are never cut.

use tagloop::llm::{RepeatGuard, Repetition, RepetitionKind};

fn feed(
    guard: &mut RepeatGuard,
    pieces: impl IntoIterator<Item = String>,
) -> Option<(String, Repetition)> {
    let mut text = String::new();
    for p in pieces {
        text.push_str(&p);
        if let Some(r) = guard.check(&text) {
            return Some((text, r));
        }
    }
    None
}

#[test]
fn a_repeated_line_is_cut_after_its_first_copy() {
    let line = "I will now read the file notes.txt to see what it says.\n";
    let mut g = RepeatGuard::default();
    let head = "<thought>Let me think.\n".to_string();
    let (text, r) = feed(
        &mut g,
        std::iter::once(head.clone()).chain(std::iter::repeat_n(line.to_string(), 100)),
    )
    .expect("a loop is found");
    assert_eq!(r.period % line.len(), 0);
    assert!(r.repeats >= 8, "{r:?}");
    // Found within a few units of the threshold, not at the end of the stream.
    assert!(text.len() < head.len() + line.len() * 14, "{}", text.len());
    // The cut keeps exactly one copy after the text before the loop (the loop may be
    // recognised starting inside the head when the head ends like the line does).
    let kept = &text[..r.cut];
    assert!(kept.starts_with(&head));
    assert_eq!(kept.matches("notes.txt").count(), 1, "{kept}");
}

#[test]
fn short_units_need_a_long_span() {
    let mut g = RepeatGuard::default();
    let r = feed(&mut g, std::iter::repeat_n("the ".to_string(), 400))
        .unwrap()
        .1;
    assert_eq!(r.period, 4);
    assert!(r.repeats * 4 >= 512);
    // 100 repeats (400 bytes) are not enough.
    let mut g = RepeatGuard::default();
    assert_eq!(
        feed(&mut g, std::iter::repeat_n("the ".to_string(), 100)),
        None
    );
}

#[test]
fn ordinary_and_structured_text_is_left_alone() {
    let mut g = RepeatGuard::default();
    // Distinct numbered lines, a separator of 80 dashes, a short numbered list, a table of
    // numbers.
    let mut text = String::from("<thought>A plan.</thought>\n");
    text.push_str(&"-".repeat(80));
    text.push('\n');
    let words = [
        "apples", "pears", "plums", "figs", "dates", "limes", "kiwis",
    ];
    for i in 0..200 {
        text.push_str(&format!(
            "{i}: {} then {}\n",
            words[i % 7],
            words[i * i % 5]
        ));
    }
    for i in 0..12 {
        text.push_str(&format!("{i}: item number {i} is like the others\n"));
    }
    for i in 0..100 {
        text.push_str(&format!("| {i} | {} | {} |\n", i * i, i * 7 % 13));
    }
    let mut grown = String::new();
    for c in text.chars() {
        grown.push(c);
        assert_eq!(g.check(&grown), None, "{grown}");
    }
    assert_eq!(g.find(&text), None);
}

#[test]
fn alternating_lines_and_multibyte_text_are_found_with_a_char_boundary_cut() {
    let mut g = RepeatGuard::default();
    let unit = "Ответ: не знаю.\nПопробую ещё раз.\n";
    let (text, r) = feed(&mut g, std::iter::repeat_n(unit.to_string(), 40)).unwrap();
    assert_eq!(r.period, unit.len());
    assert!(text.is_char_boundary(r.cut));
}

#[test]
fn a_loop_that_counts_is_found_and_cut_after_its_first_line() {
    // What gemma-3-270m wrote at temperature 0, copying the prompt's example observation.
    let mut text = String::from("\n1: first line\n2: second line\n3: third line\n");
    let mut g = RepeatGuard::default();
    let mut found = None;
    for i in 4..200 {
        text.push_str(&format!("{i}: thirty-th line\n"));
        if let Some(r) = g.check(&text) {
            found = Some(r);
            break;
        }
    }
    let r = found.expect("the counting loop is found");
    assert!(r.repeats >= 16, "{r:?}");
    // One copy is kept (the unit may be recognised starting inside the line before it,
    // which ends like the repeated line does).
    let kept = &text[..r.cut];
    assert!(
        kept.starts_with("\n1: first line\n2: second line\n3: third"),
        "{kept}"
    );
    assert!(
        kept.contains("4: thirty-th") && !kept.contains("5: thirty"),
        "{kept}"
    );
    // Found soon after the threshold (512 bytes of repetition), not at the end.
    assert!(text.len() < 700, "{}", text.len());
}

#[test]
fn a_loop_needs_enough_whole_units() {
    // A paragraph of distinct words written three times is over 512 bytes but 3 units only.
    let para: String = (0..60u8)
        .map(|i| {
            format!(
                "w{}{} ",
                char::from(b'a' + i % 26),
                char::from(b'a' + i / 26)
            )
        })
        .collect();
    let g = RepeatGuard::default();
    let three = para.repeat(3);
    assert!(three.len() > 512);
    assert_eq!(g.find(&three), None);
    let r = g.find(&para.repeat(8)).unwrap();
    assert_eq!(
        (r.period, r.repeats, r.start, r.cut),
        (para.len(), 8, 0, para.len())
    );
}

fn strict_guard(until: &[&str]) -> RepeatGuard {
    let req = tagloop::llm::TurnRequest {
        strict_repeats_until: until.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    RepeatGuard::for_request(&req, true).expect("a guard")
}

/// A grammar-held thought is one line: a sentence said three times there is a loop, cut after
/// its first copy long before the ordinary thresholds.
#[test]
fn a_thought_is_cut_after_three_copies_until_the_decision_starts() {
    let sentence = "I need the population of Paris. ";
    let pieces = || {
        std::iter::once("<thought>".to_string())
            .chain(std::iter::repeat_n(sentence.to_string(), 40))
    };
    let (text, r) = feed(&mut strict_guard(&["<action>"]), pieces()).expect("cut in the thought");
    assert!(text.len() < 9 + sentence.len() * 7, "{}", text.len());
    assert_eq!(text[..r.cut].matches("Paris").count(), 1);
    // The ordinary guard lets the same 40 copies run for far longer.
    let (text, _) = feed(&mut RepeatGuard::default(), pieces()).expect("cut at last");
    assert!(text.len() > 512, "{}", text.len());
    // Once the decision's tag has come (even split across two pieces), the strict thresholds
    // are gone: an action's content may repeat as much as the ordinary guard allows.
    // (The first piece is longer than the guard's check interval, so the tag really is split
    // between two checks.)
    let head = format!(
        "<thought>{}</thought>\n<act",
        "one short thought; ".repeat(3)
    );
    assert!(head.len() > 64);
    let after = [head, "ion>write(text=\"".to_string()]
        .into_iter()
        .chain(std::iter::repeat_n(sentence.to_string(), 12));
    assert_eq!(feed(&mut strict_guard(&["<action>"]), after), None);
    // No strings: the ordinary guard, whatever was asked.
    assert_eq!(
        feed(
            &mut strict_guard(&[]),
            std::iter::repeat_n(sentence.to_string(), 12)
        ),
        None
    );
    // A turn whose grammar was not sent (the server refused it) is not held to one line: the
    // ordinary guard.
    let req = tagloop::llm::TurnRequest {
        strict_repeats_until: vec!["<action>".into()],
        ..Default::default()
    };
    let mut free = RepeatGuard::for_request(&req, false).expect("a guard");
    assert_eq!(
        feed(&mut free, std::iter::repeat_n(sentence.to_string(), 12)),
        None
    );
    // keep_repetitions turns every guard off.
    let req = tagloop::llm::TurnRequest {
        keep_repetitions: true,
        strict_repeats_until: vec!["<action>".into()],
        ..Default::default()
    };
    assert!(RepeatGuard::for_request(&req, true).is_none());
}

/// With `<action>` alone as the end of the strict phase (a free-text answer, see
/// `TurnRequest::strict_repeats_until`), an answer that says its sentence again and again is
/// cut after three copies, as SmolLM2's "You can't do it.\n\n" was not until 150 tokens.
#[test]
fn a_free_answer_said_again_is_cut_after_three_copies() {
    let answer = "You can't do it anymore.\n\n";
    let pieces = || {
        ["<thought>I know it.</thought>\n<final_answer>".to_string()]
            .into_iter()
            .chain(std::iter::repeat_n(answer.to_string(), 40))
    };
    let (text, r) = feed(&mut strict_guard(&["<action>"]), pieces()).expect("cut in the answer");
    assert!(text.len() < 48 + answer.len() * 7, "{}", text.len());
    assert_eq!(text[..r.cut].matches("anymore").count(), 1);
    // Ended by `<final_answer>` as well (an answer in JSON), the strict phase is over at the
    // answer and the ordinary guard waits for 512 bytes.
    let (text, _) =
        feed(&mut strict_guard(&["<action>", "<final_answer>"]), pieces()).expect("cut at last");
    assert!(text.len() > 512, "{}", text.len());
}

/// The strict thresholds are for sentences said again: a unit with no words in it (a ruler of
/// dashes, a table's rule line) repeats legitimately and is left to the ordinary guard. (One
/// ruler line longer than 128 bytes is a counting runaway: see `llm_counting.rs`.)
#[test]
fn the_strict_guard_leaves_a_ruler_to_the_ordinary_thresholds() {
    let head = "<final_answer>Totals\n".to_string();
    let line = format!("{}\n", "-=".repeat(30));
    let ruler = || std::iter::once(head.clone()).chain(std::iter::repeat_n(line.clone(), 40));
    let mut strict = strict_guard(&["<action>"]);
    let (text, r) = feed(&mut strict, ruler()).expect("the ordinary guard still cuts it");
    assert!(text.len() > head.len() + 512, "{}", text.len());
    assert_eq!(r.period, line.len());
    assert_eq!(r.kind, RepetitionKind::Unit);
    // Sixty pairs on one line (120 bytes, past the strict span) pass.
    let short = std::iter::once(head.clone()).chain(std::iter::repeat_n("-=".to_string(), 60));
    assert_eq!(feed(&mut strict_guard(&["<action>"]), short), None);
}
