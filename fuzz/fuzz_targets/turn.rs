//! Fuzz the turn reader and the whole `parse` pipeline: never panic, spans stay inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagloop_protocol::{parse_report, read_turn};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let turn = read_turn(text);
    assert!(turn.history_end <= text.len());
    for b in &turn.blocks {
        assert!(b.span.start <= b.span.end && b.span.end <= text.len());
        assert!(b.body.start <= b.body.end && b.body.end <= text.len());
    }
    let report = parse_report(text, &[]);
    let _ = serde_json::to_string(&report);
});
