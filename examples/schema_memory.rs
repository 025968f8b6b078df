//! Peak memory and time of compiling one JSON Schema full of `pattern`s, the way `tagloop
//! serve` compiles a request's tool parameters (docs/security.md, "JSON Schemas from outside").
//!
//! ```sh
//! cargo run --release --example schema_memory -- bounded 64 '[a-z]{N}x'
//! cargo run --release --example schema_memory -- default 400 '(?=x)\w{100}yN'
//! ```
//!
//! The pattern's `N` is replaced by each property's number, so that no two are alike; `bounded`
//! compiles with `tagloop::schema::compile`, `default` with `jsonschema::validator_for`,
//! `regex:BYTES` with the linear-time engine and that size limit (to choose the bound). Prints
//! the outcome, the seconds and the process's peak resident memory (`VmHWM`), one line.

use std::time::Instant;

use serde_json::{Map, Value, json};

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, count, pattern) = match args.as_slice() {
        [m, c, p] => (m.clone(), c.parse::<usize>().unwrap_or(0), p.clone()),
        _ => {
            eprintln!("usage: schema_memory bounded|default|regex:BYTES COUNT PATTERN");
            std::process::exit(2);
        }
    };
    let props: Map<String, Value> = (0..count)
        .map(|i| {
            let p = pattern.replace('N', &i.to_string());
            (format!("p{i}"), json!({"type": "string", "pattern": p}))
        })
        .collect();
    let schema = json!({"type": "object", "properties": props});
    let bytes = schema.to_string().len();
    let before = peak_rss_kib();
    let started = Instant::now();
    let outcome = if mode == "default" {
        jsonschema::validator_for(&schema)
            .map(|_| "compiled".to_string())
            .unwrap_or_else(|e| format!("refused: {e}"))
    } else if let Some(limit) = mode.strip_prefix("regex:") {
        // The linear-time engine with another size limit, to choose the bound.
        let limit: usize = limit.parse().unwrap_or(0);
        jsonschema::options()
            .with_pattern_options(
                jsonschema::PatternOptions::regex()
                    .size_limit(limit)
                    .dfa_size_limit(limit),
            )
            .build(&schema)
            .map(|_| "compiled".to_string())
            .unwrap_or_else(|e| format!("refused: {e}"))
    } else {
        tagloop::schema::compile(&schema)
            .map(|_| "compiled".to_string())
            .unwrap_or_else(|e| format!("refused: {e}"))
    };
    let secs = started.elapsed().as_secs_f64();
    let peak = peak_rss_kib();
    let outcome: String = outcome.chars().take(100).collect();
    println!(
        "{mode} {count} patterns, schema {bytes} B: {outcome}; {secs:.2} s, peak RSS {} MiB (before {} MiB)",
        peak / 1024,
        before / 1024
    );
}
