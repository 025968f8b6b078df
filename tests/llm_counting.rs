//! Counting runaways in constrained turns (`tagloop::llm::RepeatGuard`, `src/llm/wordless.rs`):
//! a line that runs on without a word — 128 bytes in a thought or a free answer, 256 in an
//! action's arguments — ends the turn, keeping its first items; tables of numbers, long numbers,
//! JSON answers and free (unconstrained) turns are left alone. The runaways are the lab's
//! (docs/experiments.md, issue 31 item 5).

use tagloop::llm::{RepeatGuard, Repetition, RepetitionKind, TurnRequest};

/// Feed `text` in pieces of `piece` bytes (a token or so), as a stream arrives; the text so far
/// and what the guard found.
fn feed(guard: &mut RepeatGuard, text: &str, piece: usize) -> Option<(String, Repetition)> {
    let mut so_far = String::new();
    for chunk in text.as_bytes().chunks(piece) {
        so_far.push_str(std::str::from_utf8(chunk).expect("ASCII pieces"));
        if let Some(r) = guard.check(&so_far) {
            return Some((so_far, r));
        }
    }
    None
}

/// The guard of a constrained turn whose strict phase ends at `until` (the agent's choice: the
/// decision's tags for a whole turn, `<action>` alone when the answer is free text).
fn constrained(until: &[&str]) -> RepeatGuard {
    let req = TurnRequest {
        strict_repeats_until: until.iter().map(|s| s.to_string()).collect(),
        cut_counting: true,
        ..Default::default()
    };
    RepeatGuard::for_request(&req, true).expect("a guard")
}

/// A whole turn of an agent whose answer is free text.
fn whole_turn() -> RepeatGuard {
    constrained(&["<action>"])
}

/// SmolLM2's first thought on `ledger-manager-twice` (main, 2026-11-27): it began
/// `<thought>\nThe answer is: 2022-01-01 2022-01-02 2022-01-03 …` and counted to
/// `… 2022-01-92 202` at 1,024 tokens, in two turns of the run.
fn dates() -> String {
    let mut t = String::from("<thought>\nThe answer is:");
    for day in 1..=92 {
        t.push_str(&format!(" 2022-01-{day:02}"));
    }
    t
}

#[test]
fn a_thought_counting_dates_is_cut_after_its_first_dates() {
    let text = dates();
    let (seen, r) = feed(&mut whole_turn(), &text, 3).expect("a counting runaway");
    assert_eq!(r.kind, RepetitionKind::Wordless);
    // Found within a check (64 bytes) of the bound, not at 1,024 tokens.
    let run = seen.len() - r.start;
    assert!((129..=128 + 64).contains(&run), "{run}");
    assert_eq!(
        &seen[..r.cut],
        "<thought>\nThe answer is: 2022-01-01 2022-01-02 "
    );
    // Ten dates (a real list) are a line of 110 bytes: left alone.
    let ten = &text[..text.find(" 2022-01-11").expect("ten dates")];
    assert_eq!(feed(&mut whole_turn(), ten, 3), None);
}

/// gemma's thought on `csv-apples` (h/smolpath, 2026-11-27): `inventory.csv: 1000000…`, one
/// token a digit.
#[test]
fn a_long_run_of_one_digit_is_cut() {
    let text = format!("<thought>inventory.csv: 1{}", "0".repeat(400));
    let (seen, r) = feed(&mut whole_turn(), &text, 1).expect("a counting runaway");
    assert!(seen.len() < 24 + 128 + 64, "{}", seen.len());
    assert_eq!(
        &seen[..r.cut],
        "<thought>inventory.csv: 100000000000000000000000000000"
    );
    // A long number in an answer (2^100, 31 digits) is far from the bound.
    let answer =
        "<thought>I know it.</thought>\n<final_answer>2^100 = 1267650600228229401496703205376";
    assert_eq!(feed(&mut whole_turn(), answer, 1), None);
}

/// SmolLM2's `write_file` on `read-port` under a grammar that refused `"""` after `path=`
/// (h/smolpath): `path=", 1, 2, 3, …` up to the path's bound, then the count went on inside
/// `content="""…`. In an action's arguments the bound is one line of 256 bytes.
#[test]
fn a_count_in_an_actions_arguments_is_cut_on_its_line() {
    let mut count = String::from("<thought>I write it.</thought>\n<action>write_file(path=\"");
    for n in 1..=300 {
        count.push_str(&format!(", {n}"));
    }
    let (seen, r) = feed(&mut whole_turn(), &count, 2).expect("a counting runaway");
    assert_eq!(r.kind, RepetitionKind::Wordless);
    let run = seen.len() - r.start;
    assert!((257..=256 + 64).contains(&run), "{run}");
    assert!(seen[..r.cut].ends_with("write_file(path=\", 1, 2, 3, 4, 5, 6, 7, 8, 9, "));
    // The same count inside a triple-quoted content, after a path.
    let content = format!(
        "<action>write_file(path=\"\"\"notes.txt\"\"\", content=\"\"\"{}",
        (257..400)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(feed(&mut whole_turn(), &content, 2).is_some());
}

/// A CSV of numbers being written is many short lines: never a runaway, however long.
#[test]
fn a_table_of_numbers_in_an_argument_is_left_alone() {
    let mut rows = String::new();
    for i in 0..300 {
        rows.push_str(&format!("{i},{},{}\n", i * i, i * 7 % 13));
    }
    assert!(rows.len() > 3000);
    let call = format!(
        "<thought>I write the table.</thought>\n<action>write_file(path=\"t.csv\", content=\"\"\"{rows}\"\"\")</action>"
    );
    assert_eq!(feed(&mut whole_turn(), &call, 4), None);
    // One line of 200 bytes of numbers (a list argument) is under the action's bound.
    let list = (1..=50)
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let call = format!("<action>sum(numbers=[{list}])</action>");
    assert!(list.len() > 128);
    assert_eq!(feed(&mut whole_turn(), &call, 4), None);
}

/// A JSON answer (the strict phase ends at `<final_answer>` too) is left to the ordinary guard,
/// and so is every turn of a free run: the same count passes.
#[test]
fn json_answers_and_free_turns_are_not_read_for_counts() {
    let list = (1..=200)
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let json = format!("<thought>All of them.</thought>\n<final_answer>{{\"ids\": [{list}]}}");
    let mut guard = constrained(&["<action>", "<final_answer>"]);
    assert_eq!(feed(&mut guard, &json, 4), None);
    let req = TurnRequest {
        strict_repeats_until: vec!["<action>".into()],
        cut_counting: true,
        ..Default::default()
    };
    let mut free = RepeatGuard::for_request(&req, false).expect("a guard");
    assert_eq!(feed(&mut free, &dates(), 3), None);
    let off = TurnRequest {
        keep_repetitions: true,
        ..req
    };
    assert!(RepeatGuard::for_request(&off, true).is_none());
}

/// `tagloop serve` does not ask for the count cut (`cut_counting` off): a client's call may hold
/// a long list of numbers on one line, and such a call, 300 numbers in one argument, is read
/// whole under serve's constrained turn, where the agent's turn cuts it.
#[test]
fn a_long_list_of_numbers_in_a_call_is_cut_only_where_the_request_asks() {
    let list = (1..=300)
        .map(|n| format!("{n}.5"))
        .collect::<Vec<_>>()
        .join(", ");
    let call = format!("<action>stats(data=[{list}])</action>");
    assert!(list.len() > 1500);
    let serve = TurnRequest::default();
    let mut guard = RepeatGuard::for_request(&serve, true).expect("a guard");
    assert_eq!(feed(&mut guard, &call, 4), None);
    assert!(feed(&mut constrained(&["<action>"]), &call, 4).is_some());
}
