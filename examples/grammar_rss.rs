//! Time and peak memory of turning one JSON Schema into turn grammars, as an agent does on its
//! first turn (issue 21: a small schema must not explode the grammar).
//!
//! `cargo run --example grammar_rss -- role|tool SCHEMA.json` builds, from the schema as a role's
//! output schema (`role`) or as one tool's input schema (`tool`), the four whole-turn grammars and
//! the two lazy decision grammars an agent builds, checks each with `parse_gbnf`, and prints the
//! largest GBNF text, its rule count, what was simplified (`Grammar::simplified`), the wall time and the process's peak
//! resident set size (`VmHWM` from `/proc/self/status`, Linux only). Run it under
//! `/usr/bin/time -v` for an outside measure.

use std::time::Instant;

use tagloop::protocol::{ToolShape, TurnShape, decision_grammar, parse_gbnf, turn_grammar};

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> anyhow::Result<()> {
    let mut argv = std::env::args().skip(1);
    let usage = "usage: grammar_rss role|tool SCHEMA.json";
    let kind = argv.next().ok_or_else(|| anyhow::anyhow!(usage))?;
    let path = argv.next().ok_or_else(|| anyhow::anyhow!(usage))?;
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let start = Instant::now();
    let (tools, output_schema) = match kind.as_str() {
        "role" => (vec![], Some(&schema)),
        "tool" => (
            vec![ToolShape {
                name: "t",
                parameters: &schema,
            }],
            None,
        ),
        _ => anyhow::bail!(usage),
    };
    let (mut largest, mut rules, mut simplified) = (0, 0, Vec::new());
    for final_only in [false, true] {
        for think in [false, true] {
            let shape = TurnShape {
                tools: tools.clone(),
                output_schema,
                final_only,
                opened_thought: false,
                think,
                ..TurnShape::default()
            };
            let whole = turn_grammar(&shape);
            if !final_only && !think {
                simplified = whole.simplified().to_vec();
            }
            let mut built = vec![whole];
            if think {
                built.push(decision_grammar(&TurnShape {
                    think: false,
                    ..shape.clone()
                }));
            }
            for g in built {
                let text = g.to_gbnf();
                parse_gbnf(&text)?;
                largest = largest.max(text.len());
                rules = rules.max(g.rule_count());
            }
        }
    }
    println!(
        "schema {} bytes: largest grammar {largest} bytes, {rules} rules, built and checked in {:.3} s, peak RSS {} KiB",
        schema.to_string().len(),
        start.elapsed().as_secs_f64(),
        peak_rss_kib().unwrap_or(0)
    );
    for part in simplified {
        println!("simplified: {part}");
    }
    Ok(())
}
