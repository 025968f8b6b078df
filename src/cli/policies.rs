//! The steering rules' switches on the command line and in `tagloop.toml`, and
//! `tagloop policies`, which lists them (the rules themselves: `src/policy/mod.rs`).
//!
//! ```toml
//! [policies]
//! off = ["guess", "counting"]   # or ["all"]
//! ```
//!
//! `--policy-off NAME` (repeatable, or a comma list) switches more off: the command line adds to
//! the file's list. `all` switches every rule off; `none` names none (on `continue`, it replaces
//! the run's recorded list with nothing, so that every rule is on again). A switch only takes a
//! rule away, so `./tagloop.toml` (a project file a run can write, `config.rs`) can change
//! decisions with it, never reach a key or the machine.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use serde::Deserialize;
use tagloop::policy::{Policies, Policy};

use super::output::stdout;
use super::usage::usage;

/// The `[policies]` section of `tagloop.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoliciesSection {
    /// The rules switched off, by name (`all` for every one).
    #[serde(default)]
    pub off: Vec<String>,
}

/// The set on after switching off the names the flag gives and those of the file (`file` is
/// `None` when a continued run's recorded list stands for both). An unknown name is a usage
/// error naming where it came from and every valid name.
pub fn resolve(flag: &[String], file: Option<&[String]>) -> anyhow::Result<Policies> {
    let from_flag = switch_off(Policies::all(), flag, "--policy-off")?;
    switch_off(from_flag, file.unwrap_or_default(), "[policies] off")
}

/// Rules that were deleted because they did not pay (docs/configuration.md): a config file or
/// a recorded run that switches one off asks for what every run now does, so the name is
/// accepted and says so in the log (a transcript from before the deletion still continues).
const DELETED: [&str; 8] = [
    "closing-line",
    "unnamed-tool",
    "same-result",
    "echo",
    "given",
    "runaway",
    "call-odds",
    "choice-odds",
];

fn switch_off(mut set: Policies, names: &[String], whence: &str) -> anyhow::Result<Policies> {
    for name in names.iter().map(|n| n.trim()) {
        set = match name.to_ascii_lowercase().replace('_', "-").as_str() {
            "" | "none" => set,
            gone if DELETED.contains(&gone) => {
                tracing::warn!(
                    "{whence}: the rule {gone} was deleted (it did not pay); switching it off \
                     changes nothing"
                );
                set
            }
            "all" => Policy::ALL.into_iter().fold(set, Policies::without),
            _ => set.without(name.parse().map_err(|e| {
                usage(format!(
                    "{whence}: {e} (or all, or none; `tagloop policies` says what each decides)"
                ))
            })?),
        };
    }
    Ok(set)
}

/// `tagloop policies`.
#[derive(Debug, Args)]
pub struct PoliciesArgs {}

/// Print one line per policy: its name, what it decides, where it acts.
pub fn list(_: PoliciesArgs) -> anyhow::Result<ExitCode> {
    let width = Policy::ALL
        .iter()
        .map(|p| p.name().len())
        .max()
        .unwrap_or(0);
    let mut out = stdout();
    for p in Policy::ALL {
        writeln!(
            out,
            "{:<width$}  {} ({})",
            p.name(),
            p.description(),
            p.place()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::super::usage::UsageError;
    use super::*;

    /// A usage error's text.
    fn said(e: anyhow::Error) -> String {
        e.downcast::<UsageError>().map(|u| u.0).unwrap_or_default()
    }

    fn names(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_flag_adds_to_the_file_and_all_and_none_are_words() {
        let set = resolve(&names(&["guess"]), Some(&names(&["repeat"]))).unwrap();
        assert_eq!(set.off_names(), ["guess", "repeat"]);
        let all = resolve(&names(&["all"]), None).unwrap();
        assert!(Policy::ALL.into_iter().all(|p| !all.on(p)));
        assert_eq!(resolve(&names(&["none"]), None).unwrap(), Policies::all());
    }

    #[test]
    fn an_unknown_name_says_where_it_came_from_and_lists_the_valid_ones() {
        let e = said(resolve(&[], Some(&names(&["gues"]))).unwrap_err());
        assert!(
            e.starts_with("[policies] off: unknown policy 'gues'"),
            "{e}"
        );
        assert!(
            e.contains("grounding") && e.contains("or all, or none"),
            "{e}"
        );
        let e = said(resolve(&names(&["x"]), None).unwrap_err());
        assert!(e.starts_with("--policy-off: unknown policy 'x'"), "{e}");
    }

    #[test]
    fn a_deleted_rule_switched_off_changes_nothing() {
        let set = resolve(&names(&["closing_line"]), Some(&names(&["guess"]))).unwrap();
        assert_eq!(set, Policies::all().without(Policy::Guess));
        let set = resolve(&names(&["closing-line"]), Some(&names(&["guess"]))).unwrap();
        assert_eq!(set, Policies::all().without(Policy::Guess));
        assert!(resolve(&names(&["closing-lines"]), None).is_err());
        let set = resolve(&names(&["unnamed_tool", "same-result"]), None).unwrap();
        assert_eq!(set, Policies::all());
        // Deleted after the ablation of the four guards: a recorded run's list, or a config
        // file's beside a rule that still is, keeps only the rules that are.
        let set = resolve(&names(&["Echo"]), Some(&names(&["given", "counting"]))).unwrap();
        assert_eq!(set, Policies::all().without(Policy::Counting));
        // Deleted after serve's ablation on all eight categories.
        let set = resolve(&names(&["runaway", "guess"]), None).unwrap();
        assert_eq!(set, Policies::all().without(Policy::Guess));
        // On main for a few hours before its validation row: a config written then still loads.
        let set = resolve(&names(&["call_odds"]), None).unwrap();
        assert_eq!(set, Policies::all());
        assert!(resolve(&names(&["echoes"]), None).is_err());
    }

    #[test]
    fn the_section_refuses_an_unknown_key() {
        let ok: PoliciesSection = toml::from_str("off = [\"guess\"]").unwrap();
        assert_eq!(ok.off, ["guess"]);
        assert!(toml::from_str::<PoliciesSection>("on = [\"guess\"]").is_err());
    }
}
