//! `tagloop sessions` and `tagloop replay`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use tagloop::agent::Event;
use tagloop::session;

use super::live::{self, one_line};
use super::output::stdout;
use super::replay_html::render_html;
use super::usage::usage;
use tagloop::shown::terminal_safe;

/// `tagloop sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Where transcripts are [default: the user's data dir] [env: TAGLOOP_SESSION_DIR]
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Print a JSON array
    #[arg(long)]
    pub json: bool,
}

/// `tagloop replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The session: its id, the start of its id, `last` (the newest), or its transcript file
    pub session: String,
    /// Where transcripts are [default: the user's data dir] [env: TAGLOOP_SESSION_DIR]
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Write the run as one self-contained HTML page
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

fn dir(d: &Option<PathBuf>) -> PathBuf {
    super::session_dir::session_dir(d.as_deref())
}

pub fn sessions(args: SessionsArgs) -> Result<ExitCode> {
    let list = session::list(&dir(&args.session_dir))?;
    let mut out = stdout();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&list)?)?;
    } else if list.is_empty() {
        eprintln!("no sessions in {}", dir(&args.session_dir).display());
    } else {
        writeln!(
            out,
            "{:<28} {:<20} {:<14} {:>5}  task",
            "id", "started", "status", "steps"
        )?;
        for s in list {
            let task: String = s
                .task
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect();
            writeln!(
                out,
                "{:<28} {:<20} {:<14} {:>5}  {}",
                one_line(&s.id),
                one_line(&s.started),
                one_line(&s.status),
                s.steps,
                terminal_safe(&task)
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let path = session::resolve(&dir(&args.session_dir), &args.session).map_err(usage)?;
    let loaded = session::load(&path)?;
    for w in &loaded.warnings {
        eprintln!("warning: {}", terminal_safe(w));
    }
    let events: Vec<Event> = loaded
        .records
        .iter()
        .filter_map(|r| serde_json::from_value::<Event>(r.clone()).ok())
        .collect();
    if let Some(html) = &args.html {
        let page = render_html(&args.session, &events).context("cannot build the HTML page")?;
        std::fs::write(html, page).with_context(|| format!("cannot write {}", html.display()))?;
        eprintln!("wrote {}", html.display());
        return Ok(ExitCode::SUCCESS);
    }
    // The replay is the command's output: on stdout, as the live view showed the run.
    let mut out = stdout();
    live::replay(&mut out, &events)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
