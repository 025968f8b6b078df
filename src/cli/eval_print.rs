//! How `tagloop eval` prints its report when `--json` is not given: the table of runs, and
//! `--compare-grammar`'s side-by-side lines.

use std::io::Write;

use super::{Comparison, Report};
use crate::cli::live::one_line;

/// The report as a table, one line per run and a summary line. Written through
/// `output::stdout`, so a reader that went away ends the command quietly (`output`).
pub(super) fn print_table(out: &mut dyn Write, r: &Report) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<24} {:>3}  {:<16} {:<6} {:>5} {:>5} {:>4} {:>4} {:>7} {:>7}  reason",
        "id", "run", "status", "passed", "steps", "turns", "fmt", "fit", "tokens", "seconds"
    )?;
    for x in &r.results {
        writeln!(
            out,
            "{:<24} {:>3}  {:<16} {:<6} {:>5} {:>5} {:>4} {:>4} {:>7} {:>7.1}  {}",
            one_line(&x.id),
            x.run,
            x.status.as_str(),
            if x.passed { "yes" } else { "no" },
            x.steps,
            x.turns,
            x.format_corrections,
            x.context_fits,
            x.tokens,
            x.seconds,
            one_line(x.reason.as_deref().unwrap_or(""))
        )?;
    }
    let per_run = |v: u64| v as f64 / r.tasks.max(1) as f64;
    writeln!(
        out,
        "{} runs · {} passed ({:.0}%) · readable turns {:.0}% ({} turns, {:.0}% constrained) · \
         {:.1} steps/run · {:.2} s/turn · {:.0} tokens/run · {:.1} completion tokens/turn · {:.1} s",
        r.tasks,
        r.passed,
        100.0 * r.pass_rate,
        100.0 * r.readable_turn_rate,
        r.turns,
        100.0 * r.constrained_turn_rate,
        per_run(r.steps),
        r.seconds_per_turn,
        per_run(r.tokens),
        r.completion_tokens_per_turn,
        r.seconds
    )
}

/// `--compare-grammar`'s last lines: the figures a grammar moves, free and constrained side by
/// side, with the ratio.
pub(super) fn print_comparison(
    out: &mut dyn Write,
    a: &Report,
    b: &Report,
    cmp: &Comparison,
) -> std::io::Result<()> {
    writeln!(
        out,
        "\n{:<28} {:>10} {:>10} {:>7}",
        "", "free", "grammar", "ratio"
    )?;
    let row = |out: &mut dyn Write, what: &str, x: f64, y: f64, r: Option<f64>| {
        let r = r.map_or(String::new(), |r| format!("{r:.2}x"));
        writeln!(out, "{what:<28} {x:>10.2} {y:>10.2} {r:>7}")
    };
    row(
        out,
        "completion tokens per turn",
        a.completion_tokens_per_turn,
        b.completion_tokens_per_turn,
        Some(cmp.completion_tokens_per_turn),
    )?;
    row(
        out,
        "seconds per turn",
        a.seconds_per_turn,
        b.seconds_per_turn,
        Some(cmp.seconds_per_turn),
    )?;
    row(
        out,
        "readable turns (%)",
        100.0 * a.readable_turn_rate,
        100.0 * b.readable_turn_rate,
        None,
    )?;
    row(
        out,
        "pass rate (%)",
        100.0 * a.pass_rate,
        100.0 * b.pass_rate,
        None,
    )
}
