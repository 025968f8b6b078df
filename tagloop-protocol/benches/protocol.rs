//! Criterion benchmarks for the protocol core (issue 2), side by side with a naive regex baseline
//! (`<action>(.*?)</action>` then `(\w+)\((.*)\)`, the approach of the original blog post).
//!
//! Run: `cargo bench -p tagloop-protocol --bench protocol -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use regex::Regex;
use tagloop_protocol::{Signature, parse_report};

const MIB: usize = 1 << 20;

fn typical() -> String {
    let thought = "I need to read the configuration file first to see which port the server uses, \
        then I can check whether the service is listening there. The README mentions a default of \
        8080 but the deployment notes say it may be overridden by an environment variable, so the \
        file itself is the source of truth. ";
    let action = r#"write_file(path="notes/port-check.md", content="Port: see config.toml\nChecked: yes\n<b>bold</b> and \"quoted\" text", mode="append", retries=3)"#;
    format!("<thought>{thought}</thought>\n<action>{action}</action>")
}

fn one_mib() -> String {
    let line = "    let x = compute(&items, |a, b| a.partial_cmp(b)); // \"quoted\" <tag>\n";
    let body = line.repeat(MIB / line.len());
    format!(
        "<thought>Write the file.</thought>\n<action>write_file(path=\"src/big.rs\", content=\"{}\")</action>",
        body.replace('"', "\\\"")
    )
}

fn inputs() -> Vec<(&'static str, String)> {
    vec![
        ("typical", typical()),
        ("1MiB_action", one_mib()),
        (
            "quotes_4MiB",
            format!("<action>write(content={}</action>", "\"".repeat(4 * MIB)),
        ),
        (
            "brackets_100k",
            format!("<action>f(a={})</action>", "[".repeat(100_000)),
        ),
        ("action_tags_50k", "<action>".repeat(50_000)),
        (
            "backslashes_4MiB",
            format!("<action>f(a=\"{}</action>", "\\".repeat(4 * MIB)),
        ),
        (
            "quote_commas_4MiB",
            format!("<action>f(a=\"{}</action>", "a\", \"".repeat(4 * MIB / 6)),
        ),
    ]
}

/// The naive baseline: regex out the action block, then the call, then split arguments on `,`.
struct Naive {
    block: Regex,
    call: Regex,
}

impl Naive {
    fn new() -> Naive {
        Naive {
            block: Regex::new(r"(?s)<action>(.*?)</action>").expect("regex"),
            call: Regex::new(r"(?s)(\w+)\((.*)\)").expect("regex"),
        }
    }

    fn parse(&self, text: &str) -> Option<(String, Vec<String>)> {
        let body = self.block.captures(text)?.get(1)?.as_str();
        let c = self.call.captures(body)?;
        let args = c
            .get(2)?
            .as_str()
            .split(',')
            .map(|a| a.trim().to_string())
            .collect();
        Some((c.get(1)?.as_str().to_string(), args))
    }
}

fn bench(c: &mut Criterion) {
    let naive = Naive::new();
    let sigs = [Signature::parse("write_file(path, content, mode?, retries?)").expect("sig")];
    let mut g = c.benchmark_group("protocol");
    for (name, input) in inputs() {
        g.throughput(Throughput::Bytes(input.len() as u64));
        g.bench_with_input(BenchmarkId::new("tagloop", name), &input, |b, i| {
            b.iter(|| parse_report(black_box(i), &[]))
        });
        g.bench_with_input(BenchmarkId::new("regex_baseline", name), &input, |b, i| {
            b.iter(|| naive.parse(black_box(i)))
        });
        if name == "typical" {
            // What the agent loop does per turn: read the turn, parse its action (no report).
            g.bench_with_input(
                BenchmarkId::new("tagloop_read_and_parse", name),
                &input,
                |b, i| {
                    b.iter(|| {
                        let turn = tagloop_protocol::read_turn(black_box(i));
                        tagloop_protocol::parse_action(turn.action.as_deref().unwrap_or_default())
                    })
                },
            );
            g.bench_with_input(
                BenchmarkId::new("tagloop_with_signature", name),
                &input,
                |b, i| b.iter(|| parse_report(black_box(i), &sigs)),
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
