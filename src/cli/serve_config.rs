//! The `[serve]` section of `tagloop.toml`: `tagloop serve`'s tuning knobs, so that the command
//! line keeps the few settings a user changes (where the upstream is, where to listen, the keys).
//!
//! ```toml
//! [serve]
//! grammar = "auto"          # auto, on, off
//! grammar_syntax = "gbnf"   # gbnf, llguidance
//! context_window = 8192     # tokens; default: learned from the upstream
//! tool_format = "protocol"  # protocol, native, auto
//! thought = "none"          # none, free
//! repairs = 1
//! max_body = 4194304        # bytes
//! timeout = 300             # seconds per request
//! guess_timeout = 30        # seconds; default: only the request's timeout
//! concurrency = 16
//! max_connections = 512
//! passthrough = true        # false: 404 for what serve does not answer (--no-passthrough)
//! stream = true             # false: whole answers from the upstream (--no-stream)
//! ```
//!
//! A flag wins over the file, the file over the default. The section names no upstream and no key:
//! `./tagloop.toml` is a project file a run with `--allow-write` can write (`config.rs`), and a
//! knob is the most such a file can change here.

use std::str::FromStr;

use serde::Deserialize;

/// `tagloop serve`'s knobs as the config file gives them; every field optional, an unknown one an
/// error when the file is read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeSection {
    pub grammar: Option<String>,
    pub grammar_syntax: Option<String>,
    pub context_window: Option<u64>,
    pub tool_format: Option<String>,
    pub thought: Option<String>,
    pub repairs: Option<u32>,
    pub max_body: Option<usize>,
    pub timeout: Option<u64>,
    pub guess_timeout: Option<u64>,
    pub concurrency: Option<usize>,
    pub max_connections: Option<usize>,
    pub passthrough: Option<bool>,
    pub stream: Option<bool>,
}

/// The value of a knob written as a word (`grammar = "auto"`): the flag's, else the file's (parsed,
/// named in the error when it does not parse), else the default. A number needs no parsing:
/// `flag.or(file).unwrap_or(default)`.
pub fn pick<T: FromStr>(
    flag: Option<T>,
    file: Option<&str>,
    name: &str,
    default: T,
) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    if let Some(v) = flag {
        return Ok(v);
    }
    match file {
        Some(text) => text
            .parse()
            .map_err(|e| format!("[serve] {name} = {text:?} in the config file: {e}")),
        None => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_wins_over_the_file_and_the_file_over_the_default() {
        assert_eq!(pick(Some(3u32), Some("5"), "x", 1), Ok(3));
        assert_eq!(pick(None, Some("5"), "x", 1u32), Ok(5));
        assert_eq!(pick(None::<u32>, None, "x", 1), Ok(1));
    }

    #[test]
    fn a_value_that_does_not_parse_names_its_knob() {
        let err = pick(None::<u32>, Some("many"), "thought", 1).unwrap_err();
        assert!(err.contains("[serve] thought = \"many\""), "{err}");
    }

    #[test]
    fn the_section_refuses_an_unknown_knob_and_any_upstream() {
        let ok: ServeSection = toml::from_str("thought = \"free\"\nconcurrency = 4").unwrap();
        assert_eq!(ok.thought.as_deref(), Some("free"));
        assert_eq!(ok.concurrency, Some(4));
        assert!(toml::from_str::<ServeSection>("upstream = \"http://x\"").is_err());
        assert!(toml::from_str::<ServeSection>("upstream_key = \"sk\"").is_err());
    }
}
