//! Fuzz the action grammar: never panic, error offsets stay inside the text, and a signature-guided
//! parse never fails where the plain parse succeeds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagloop_protocol::{Signature, neutralise, parse_action, parse_action_with};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let plain = parse_action(text);
    if let Err(e) = &plain {
        assert!(e.offset <= text.len());
    }
    if let Ok(sig) = Signature::parse("write_file(path, content)") {
        let guided = parse_action_with(text, &|c| sig.accepts(c));
        assert_eq!(plain.is_ok(), guided.is_ok());
    }
    let n = neutralise(text);
    assert!(!n.to_ascii_lowercase().contains("<action"));
});
