//! `tagloop parse [--json] [--tool SIGNATURE]... [FILE]` (SPEC §2.1).

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};
use tagloop::protocol::{ParseReport, Signature, Tag, parse_report};

/// Arguments of `tagloop parse`.
#[derive(Debug, Clone, clap::Args)]
pub struct ParseArgs {
    /// Print exactly one JSON object (the SPEC §2.1 shape) instead of an explanation.
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

/// Exit code for unreadable input or a bad signature.
const EXIT_USAGE: u8 = 2;

fn usage_error(msg: &str) -> ExitCode {
    let mut err = anstream::stderr();
    let red = Style::new().fg_color(Some(AnsiColor::Red.into())).bold();
    let _ = writeln!(err, "{red}error:{red:#} {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// Run `tagloop parse`.
pub fn run(args: &ParseArgs) -> anyhow::Result<ExitCode> {
    let mut sigs = Vec::new();
    for t in &args.tool {
        match Signature::parse(t) {
            Ok(s) => sigs.push(s),
            Err(e) => return Ok(usage_error(&e.to_string())),
        }
    }
    let bytes = match &args.file {
        Some(p) if p.as_os_str() != "-" => match std::fs::read(p) {
            Ok(b) => b,
            Err(e) => return Ok(usage_error(&format!("cannot read {}: {e}", p.display()))),
        },
        _ => {
            let mut b = Vec::new();
            if let Err(e) = std::io::stdin().lock().read_to_end(&mut b) {
                return Ok(usage_error(&format!("cannot read stdin: {e}")));
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
            return Ok(usage_error(&format!(
                "{from} is not UTF-8 text (invalid byte at offset {at})"
            )));
        }
    };
    let report = parse_report(&text, &sigs);
    let mut out = anstream::stdout();
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

/// The readable explanation: what was found, where (byte spans), which leniencies fired.
fn explain(w: &mut dyn Write, r: &ParseReport, text: &str, color: bool) -> std::io::Result<()> {
    let paint = |s: Style| if color { s } else { Style::new() };
    let head = paint(Style::new().bold());
    let good = paint(Style::new().fg_color(Some(AnsiColor::Green.into())).bold());
    let bad = paint(Style::new().fg_color(Some(AnsiColor::Red.into())).bold());
    let dim = paint(Style::new().dimmed());
    let warn = paint(Style::new().fg_color(Some(AnsiColor::Yellow.into())));
    let kind_style = match r.kind {
        "action" | "final" => good,
        "error" => bad,
        _ => warn,
    };
    writeln!(
        w,
        "{head}kind:{head:#} {kind_style}{}{kind_style:#}  {dim}({} bytes read){dim:#}",
        r.kind,
        text.len()
    )?;
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
    if let Some(t) = &r.thought {
        writeln!(w, "{head}thought:{head:#} {}", short(t, 200))?;
    }
    if let Some(a) = &r.action {
        writeln!(w, "{head}tool:{head:#} {good}{}{good:#}", a.tool)?;
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
            writeln!(w, "  {name} = {shown}")?;
        }
    }
    if let Some(f) = &r.final_text {
        writeln!(w, "{head}final answer:{head:#} {}", short(f, 400))?;
    }
    if let Some(e) = &r.error {
        let at = r.turn.action_offset.unwrap_or(0) + e.offset;
        writeln!(
            w,
            "{head}error:{head:#} {bad}{}{bad:#} at offset {} of the action (byte {at} of the turn)",
            e.message, e.offset
        )?;
        if let Some(body) = &r.turn.action {
            let b = body.as_bytes();
            let lo = e.offset.saturating_sub(30);
            let lo = (0..=lo)
                .rev()
                .find(|&i| body.is_char_boundary(i))
                .unwrap_or(0);
            let hi = (e.offset.min(b.len())..=b.len())
                .find(|&i| body.is_char_boundary(i))
                .unwrap_or(b.len());
            let mid = (e.offset.min(b.len())..=b.len())
                .find(|&i| body.is_char_boundary(i))
                .unwrap_or(b.len());
            let after = (mid + 30).min(b.len());
            let after = (after..=b.len())
                .find(|&i| body.is_char_boundary(i))
                .unwrap_or(b.len());
            writeln!(
                w,
                "  {dim}near:{dim:#} {}{bad}⟂{bad:#}{}",
                short(&body[lo..hi], 40),
                short(&body[mid..after], 40)
            )?;
        }
        if r.action_error.as_ref().is_some_and(|e| e.open_string) {
            writeln!(
                w,
                "  {dim}the text ended inside an open string: a stop string may have cut it{dim:#}"
            )?;
        }
    }
    if let Some(d) = &r.discarded {
        writeln!(w, "{head}discarded:{head:#} {}", short(d, 200))?;
    }
    if let Some(rs) = &r.reasoning {
        writeln!(w, "{head}reasoning:{head:#} {}", short(rs, 200))?;
    }
    if r.warnings.is_empty() {
        writeln!(w, "{head}leniencies:{head:#} {dim}none{dim:#}")?;
    } else {
        writeln!(w, "{head}leniencies:{head:#}")?;
        for x in &r.warnings {
            writeln!(w, "  {warn}- {x}{warn:#}")?;
        }
    }
    writeln!(
        w,
        "{dim}history keeps bytes 0..{}{}{dim:#}",
        r.turn.history_end,
        if r.kind != "none" && !r.turn.deciding_closed {
            " (the closing tag is put back)"
        } else {
            ""
        }
    )?;
    Ok(())
}
