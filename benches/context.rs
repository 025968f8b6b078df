//! The CPU cost of fitting one request into the context window (issue 23): a 40-step history
//! whose observations are 4 KB file reads, fitted (a) a little (the oldest observations cut) and
//! (b) hard (every old observation cut and most steps summarised), and the estimate a request
//! that needs no fitting pays. The target is under 1 ms per turn.
//!
//! cargo bench --bench context

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};

use tagloop::agent::context::{TokenEstimator, fit_messages, prompt_bytes};
use tagloop::llm::{Message, Prompt, Role};

/// System prompt, task, then 40 steps: a read_file turn and its 4 KB observation.
fn history() -> Vec<Message> {
    let mut m = vec![
        Message::new(Role::System, "You are a helpful assistant. ".repeat(60)),
        Message::new(Role::User, "<question>\nRead the files.\n</question>"),
    ];
    for i in 0..40 {
        m.push(Message::new(
            Role::Assistant,
            format!(
                "<thought>Read file {i}.</thought>\n<action>read_file(path=\"src/file_{i}.rs\", start_line=1)</action>"
            ),
        ));
        let body = (1..=100)
            .map(|l| format!("file {i} line {l:03}: some words of the file"))
            .collect::<Vec<_>>()
            .join("\n");
        m.push(Message::new(
            Role::User,
            format!("<observation>\n{body}\n</observation>"),
        ));
    }
    m
}

fn bench(c: &mut Criterion) {
    let h = history();
    let total: usize = h.iter().map(|m| m.content.len()).sum();
    let mut e = TokenEstimator::new();
    e.observe(total as u64, total as u64 / 4);
    let mut g = c.benchmark_group("context_fit_40_steps_4k");
    g.bench_function("estimate_only", |b| {
        b.iter(|| {
            let p = Prompt::Chat(black_box(&h).clone());
            black_box(e.estimate(prompt_bytes(&p)))
        })
    });
    g.bench_function("fit_a_little", |b| {
        b.iter(|| black_box(fit_messages(black_box(&h), 8 * 1024, 1)))
    });
    g.bench_function("fit_hard", |b| {
        b.iter(|| black_box(fit_messages(black_box(&h), total - 12 * 1024, 1)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
