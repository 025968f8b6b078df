//! The stop scanner (`tagloop::llm::StopScanner`): stops cut across chunk boundaries, held
//! partial stops, and the text before the first stop, through the public API.

use tagloop::llm::StopScanner;

fn stops() -> Vec<String> {
    vec![
        "</action>".into(),
        "<observation>".into(),
        "</final_answer>".into(),
    ]
}

fn run(chunks: &[&str], stops: &[String]) -> (String, String, Option<String>) {
    let mut s = StopScanner::new(stops);
    let mut out = String::new();
    for c in chunks {
        out.push_str(s.push(c));
    }
    out.push_str(s.finish());
    (out, s.text().to_owned(), s.stopped().map(str::to_owned))
}

#[test]
fn cuts_at_stop_across_chunks() {
    let (out, text, stop) = run(&["<action>f(a=1)</ac", "tion> more"], &stops());
    assert_eq!(out, "<action>f(a=1)");
    assert_eq!(text, out);
    assert_eq!(stop.as_deref(), Some("</action>"));
}

#[test]
fn never_emits_partial_stop() {
    let mut s = StopScanner::new(stops());
    assert_eq!(s.push("abc</"), "abc");
    assert_eq!(s.held(), "</");
    assert_eq!(s.push("act"), "");
    assert_eq!(s.push("x"), "</actx");
    assert!(!s.is_stopped());
}

#[test]
fn finish_drops_trailing_partial() {
    let mut s = StopScanner::new(stops());
    let mut out = s.push("answer <observ").to_owned();
    out.push_str(s.finish());
    assert_eq!(out, "answer ");
    assert_eq!(s.text(), "answer ");
    assert_eq!(s.dropped_tail(), "<observ".len());
    assert_eq!(s.stopped(), None);
}

#[test]
fn earliest_end_wins() {
    let st: Vec<String> = vec!["abcd".into(), "bc".into()];
    let (out, _, stop) = run(&["abcd"], &st);
    assert_eq!(out, "a");
    assert_eq!(stop.as_deref(), Some("bc"));
    let st: Vec<String> = vec!["ab".into(), "xab".into()];
    let (out, _, stop) = run(&["zxab"], &st);
    assert_eq!(out, "z");
    assert_eq!(stop.as_deref(), Some("xab"));
}

#[test]
fn utf8_is_kept_whole() {
    let st: Vec<String> = vec!["é</a>".into()];
    let (out, _, stop) = run(&["ééé", "</a", ">"], &st);
    assert_eq!(out, "éé");
    assert_eq!(stop.as_deref(), Some("é</a>"));
    let (out, _, _) = run(&["日本語</", "b>"], &stops());
    assert_eq!(out, "日本語</b>");
}

#[test]
fn many_stops_use_finder_path() {
    let st: Vec<String> = ["a1", "b2", "c3", "d4", "e5"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (out, _, stop) = run(&["xxd", "4yy"], &st);
    assert_eq!(out, "xx");
    assert_eq!(stop.as_deref(), Some("d4"));
    let (out, _, stop) = run(&["xxd"], &st);
    assert_eq!(out, "xx");
    assert_eq!(stop, None);
}

#[test]
fn no_stops_passes_everything() {
    let (out, _, stop) = run(&["a", "b</action>"], &[]);
    assert_eq!(out, "ab</action>");
    assert_eq!(stop, None);
}

#[test]
fn cut_whole_text() {
    let st = stops();
    assert_eq!(StopScanner::cut("x<observation>y", &st), ("x", Some(1)));
    assert_eq!(StopScanner::cut("plain", &st), ("plain", None));
}

/// The result of scanning `text` in one piece, by brute force (reference model).
fn reference(text: &str, stops: &[String]) -> (String, Option<String>) {
    // Earliest end, then earliest start.
    let mut best: Option<(usize, usize, &String)> = None;
    for s in stops.iter().filter(|s| !s.is_empty()) {
        if let Some(p) = text.find(s.as_str()) {
            let e = p + s.len();
            if best.is_none_or(|(be, bs, _)| e < be || (e == be && p < bs)) {
                best = Some((e, p, s));
            }
        }
    }
    match best {
        Some((_, p, s)) => (text[..p].to_owned(), Some(s.clone())),
        None => {
            let mut t = text;
            // strip the longest suffix that is a proper prefix of a stop
            let mut cut = t.len();
            for p in 0..t.len() {
                if !t.is_char_boundary(p) {
                    continue;
                }
                let rest = &t[p..];
                if stops
                    .iter()
                    .any(|s| s.len() > rest.len() && s.starts_with(rest))
                {
                    cut = p;
                    break;
                }
            }
            t = &t[..cut];
            (t.to_owned(), None)
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
    #[test]
    fn chunking_does_not_matter(
        text in "(<|/|>|a|c|t|i|o|n|é|日| |x){0,60}",
        cuts in proptest::collection::vec(0usize..80, 0..12),
        which in 0usize..3,
    ) {
        let stops: Vec<String> = match which {
            0 => vec!["</action>".into(), "<observation>".into(), "</final_answer>".into()],
            1 => vec!["</a".into(), "ac".into(), "é<".into(), "日".into(), "on>".into()],
            _ => vec!["<".into(), "<<a".into()],
        };
        let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len()))
            .filter(|&c| text.is_char_boundary(c)).collect();
        points.sort_unstable();
        points.dedup();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points { chunks.push(&text[last..p]); last = p; }
        chunks.push(&text[last..]);
        let (out, txt, stop) = run(&chunks, &stops);
        let (want, want_stop) = reference(&text, &stops);
        proptest::prop_assert_eq!(&out, &want);
        proptest::prop_assert_eq!(&txt, &want);
        proptest::prop_assert_eq!(stop, want_stop);
    }
}

#[test]
fn ignores_after_stop() {
    let mut s = StopScanner::new(stops());
    assert_eq!(s.push("a</action>b"), "a");
    assert_eq!(s.push("c"), "");
    assert_eq!(s.finish(), "");
    assert_eq!(s.into_text(), "a");
}
