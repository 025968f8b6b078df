//! `tagloop parse [--json] [--tool SIGNATURE]... [FILE]` (docs/protocol.md §2.1).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};
use tagloop::protocol::{ParseReport, ReportKind, Signature, Tag, parse_report};

use super::usage::usage;
use tagloop::shown::terminal_safe;

/// Arguments of `tagloop parse`.
#[derive(Debug, Clone, clap::Args)]
pub struct ParseArgs {
    /// Print exactly one JSON object (the docs/protocol.md §2.1 shape) instead of an explanation.
    #[arg(long)]
    pub json: bool,
    /// Declare a tool's parameters, e.g. 'write_file(path, content)' (repeatable); used to choose
    /// between readings of unescaped quotes. A trailing `?` marks an optional parameter.
    #[arg(long = "tool", value_name = "SIGNATURE")]
    pub tool: Vec<String>,
    /// The file holding one model turn; stdin when absent or `-`.
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// Run `tagloop parse`.
pub fn run(args: &ParseArgs) -> anyhow::Result<ExitCode> {
    let mut sigs = Vec::new();
    for t in &args.tool {
        match Signature::parse(t) {
            Ok(s) => sigs.push(s),
            Err(e) => return Err(usage(e)),
        }
    }
    let bytes = match &args.file {
        Some(p) if p.as_os_str() != "-" => match std::fs::read(p) {
            Ok(b) => b,
            Err(e) => return Err(usage(format!("cannot read {}: {e}", p.display()))),
        },
        _ => {
            let mut b = Vec::new();
            if let Err(e) = std::io::stdin().lock().read_to_end(&mut b) {
                return Err(usage(format!("cannot read stdin: {e}")));
            }
            b
        }
    };
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let from = args
                .file
                .as_ref()
                .map_or("stdin".to_string(), |p| p.display().to_string());
            return Err(usage(format!(
                "{from} is not UTF-8 text (invalid byte at offset {at})"
            )));
        }
    };
    let report = parse_report(&text, &sigs);
    let mut out = super::output::stdout();
    if args.json {
        let json = serde_json::to_string_pretty(&report)?;
        writeln!(out, "{json}")?;
    } else {
        let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        explain(&mut out, &report, &text, color)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn short(s: &str, max: usize) -> String {
    let mut t: String = s.chars().take(max).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    format!("{t:?}")
}

/// The styles of the explanation; all plain when colour is off.
struct Palette {
    head: Style,
    good: Style,
    bad: Style,
    dim: Style,
    warn: Style,
}

impl Palette {
    fn new(color: bool) -> Self {
        let paint = |s: Style| if color { s } else { Style::new() };
        Palette {
            head: paint(Style::new().bold()),
            good: paint(Style::new().fg_color(Some(AnsiColor::Green.into())).bold()),
            bad: paint(Style::new().fg_color(Some(AnsiColor::Red.into())).bold()),
            dim: paint(Style::new().dimmed()),
            warn: paint(Style::new().fg_color(Some(AnsiColor::Yellow.into()))),
        }
    }
}

/// The readable explanation: what was found, where (byte spans), which leniencies fired. One
/// helper per part of the report, in the order they are printed.
fn explain(w: &mut dyn Write, r: &ParseReport, text: &str, color: bool) -> std::io::Result<()> {
    let p = Palette::new(color);
    kind(w, &p, r, text)?;
    blocks(w, &p, r)?;
    free_text(w, &p, "thought", &r.thought, 200)?;
    action(w, &p, r)?;
    free_text(w, &p, "final answer", &r.final_text, 400)?;
    error(w, &p, r)?;
    free_text(w, &p, "discarded", &r.discarded, 200)?;
    free_text(w, &p, "reasoning", &r.reasoning, 200)?;
    leniencies(w, &p, r)?;
    history(w, &p, r)
}

/// What the turn decided, and how many bytes were read.
fn kind(w: &mut dyn Write, p: &Palette, r: &ParseReport, text: &str) -> std::io::Result<()> {
    let Palette { head, dim, .. } = *p;
    let style = match r.kind {
        ReportKind::Action | ReportKind::Final => p.good,
        ReportKind::Error => p.bad,
        ReportKind::None => p.warn,
    };
    writeln!(
        w,
        "{head}kind:{head:#} {style}{}{style:#}  {dim}({} bytes read){dim:#}",
        r.kind,
        text.len()
    )
}

/// Every protocol block with its byte spans.
fn blocks(w: &mut dyn Write, p: &Palette, r: &ParseReport) -> std::io::Result<()> {
    let Palette { head, dim, .. } = *p;
    writeln!(w, "{head}blocks:{head:#}")?;
    if r.turn.blocks.is_empty() {
        writeln!(w, "  {dim}(no protocol tags found){dim:#}")?;
    }
    for b in &r.turn.blocks {
        let name = match b.tag {
            Tag::Think => "think (reasoning, removed)",
            Tag::Thought => "thought",
            Tag::Action => "action",
            Tag::FinalAnswer => "final_answer",
            Tag::Observation => "observation (written by the model: the turn ends here)",
            Tag::Question => "question (written by the model: the turn ends here)",
        };
        let closed = if b.closed { "closed" } else { "not closed" };
        writeln!(
            w,
            "  {name:<12} bytes {}..{}, content {}..{}, {closed}",
            b.span.start, b.span.end, b.body.start, b.body.end
        )?;
    }
    Ok(())
}

/// One free text of the turn (thought, final answer, discarded text, reasoning), quoted and cut.
fn free_text(
    w: &mut dyn Write,
    p: &Palette,
    label: &str,
    text: &Option<String>,
    max: usize,
) -> std::io::Result<()> {
    let head = p.head;
    match text {
        Some(t) => writeln!(w, "{head}{label}:{head:#} {}", short(t, max)),
        None => Ok(()),
    }
}

/// The tool called and its arguments as JSON (long values cut).
fn action(w: &mut dyn Write, p: &Palette, r: &ParseReport) -> std::io::Result<()> {
    let Palette {
        head, good, dim, ..
    } = *p;
    let Some(a) = &r.action else { return Ok(()) };
    writeln!(
        w,
        "{head}tool:{head:#} {good}{}{good:#}",
        terminal_safe(&a.tool)
    )?;
    if a.args.is_empty() {
        writeln!(w, "  {dim}(no arguments){dim:#}")?;
    }
    for (i, arg) in a.args.iter().enumerate() {
        let name = arg
            .name
            .clone()
            .unwrap_or_else(|| format!("#{} (positional)", i + 1));
        let v = serde_json::to_string(&arg.value).unwrap_or_default();
        let shown = if v.chars().count() > 200 {
            let cut: String = v.chars().take(200).collect();
            format!("{cut}… ({} bytes)", v.len())
        } else {
            v
        };
        writeln!(w, "  {} = {}", terminal_safe(&name), terminal_safe(&shown))?;
    }
    Ok(())
}

/// The action's parse error, where it is, and the text around that place.
fn error(w: &mut dyn Write, p: &Palette, r: &ParseReport) -> std::io::Result<()> {
    let Palette { head, bad, dim, .. } = *p;
    let Some(e) = &r.error else { return Ok(()) };
    let at = r.turn.action_offset.unwrap_or(0) + e.offset;
    writeln!(
        w,
        "{head}error:{head:#} {bad}{}{bad:#} at offset {} of the action (byte {at} of the turn)",
        terminal_safe(&e.message),
        e.offset
    )?;
    if let Some(body) = &r.turn.action {
        let (before, after) = around(body, e.offset, 30);
        writeln!(
            w,
            "  {dim}near:{dim:#} {}{bad}⟂{bad:#}{}",
            short(before, 40),
            short(after, 40)
        )?;
    }
    // Only a turn whose action block is left open can have been cut by a stop string (the
    // server drops the stop, `</action>` included); a block the model closed was not cut.
    if !r.turn.deciding_closed && r.action_error.as_ref().is_some_and(|e| e.open_string) {
        writeln!(
            w,
            "  {dim}the text ended inside an open string: a stop string may have cut it{dim:#}"
        )?;
    }
    Ok(())
}

/// Up to `reach` bytes of `body` before and after `offset`, cut on character boundaries.
fn around(body: &str, offset: usize, reach: usize) -> (&str, &str) {
    let boundary_down = |i: usize| {
        (0..=i)
            .rev()
            .find(|&i| body.is_char_boundary(i))
            .unwrap_or(0)
    };
    let boundary_up = |i: usize| {
        (i.min(body.len())..=body.len())
            .find(|&i| body.is_char_boundary(i))
            .unwrap_or(body.len())
    };
    let mid = boundary_up(offset);
    let lo = boundary_down(offset.saturating_sub(reach).min(mid));
    let hi = boundary_up(mid + reach);
    (&body[lo..mid], &body[mid..hi])
}

/// The leniencies the parser used to read the turn.
fn leniencies(w: &mut dyn Write, p: &Palette, r: &ParseReport) -> std::io::Result<()> {
    let Palette {
        head, dim, warn, ..
    } = *p;
    if r.warnings.is_empty() {
        return writeln!(w, "{head}leniencies:{head:#} {dim}none{dim:#}");
    }
    writeln!(w, "{head}leniencies:{head:#}")?;
    for x in &r.warnings {
        writeln!(w, "  {warn}- {}{warn:#}", terminal_safe(x))?;
    }
    Ok(())
}

/// How much of the turn the history keeps.
fn history(w: &mut dyn Write, p: &Palette, r: &ParseReport) -> std::io::Result<()> {
    let dim = p.dim;
    writeln!(
        w,
        "{dim}history keeps bytes 0..{}{}{dim:#}",
        r.turn.history_end,
        if r.kind != ReportKind::None && !r.turn.deciding_closed {
            " (the closing tag is put back)"
        } else {
            ""
        }
    )
}
