//! A child's environment: tagloop's own minus every key tagloop knows of (rule 1 of the
//! [module docs](super)).

use std::ffi::{OsStr, OsString};

/// The environment variable that marks a child with the job (command or MCP server) it belongs to.
pub const JOB_VAR: &str = "TAGLOOP_JOB";

/// Variables that are always removed from a child's environment.
pub const ALWAYS_REMOVED: [&str; 3] = ["OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "TAGLOOP_QUEUE"];

/// Secrets shorter than this are only matched against whole values (a 3-character "key" would
/// otherwise remove half the environment).
const MIN_SUBSTRING_SECRET: usize = 8;

/// The environment of a child process: tagloop's own minus every key tagloop knows of, plus what
/// the user passes explicitly.
#[derive(Clone, Default)]
pub struct ChildEnv {
    remove: Vec<String>,
    secrets: Vec<String>,
    set: Vec<(String, String)>,
}

impl std::fmt::Debug for ChildEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets or the explicit values themselves.
        f.debug_struct("ChildEnv")
            .field("remove", &self.remove)
            .field("secrets", &self.secrets.len())
            .field(
                "set",
                &self.set.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl ChildEnv {
    /// The default rules: the always-removed names and secret-looking `TAGLOOP_*` variables.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also remove the variable `name` (e.g. a provider's `api_key_env`).
    pub fn remove(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        if !name.is_empty() {
            self.remove.push(name);
        }
        self
    }

    /// Also remove every variable whose value contains `secret` (empty secrets are ignored).
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        let secret = secret.into();
        if !secret.is_empty() {
            self.secrets.push(secret);
        }
        self
    }

    /// Give the child `name=value` even if the rules above would remove it: the user's explicit
    /// choice (e.g. `--mcp-env NAME`).
    pub fn set(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.set.push((name.into(), value.into()));
        self
    }

    /// Whether a variable of tagloop's environment must not reach a child.
    pub fn is_removed(&self, name: &OsStr, value: &OsStr) -> bool {
        let name = name.to_string_lossy();
        if ALWAYS_REMOVED.contains(&name.as_ref()) || self.remove.iter().any(|r| *r == name) {
            return true;
        }
        if let Some(rest) = name.strip_prefix("TAGLOOP_") {
            let upper = rest.to_ascii_uppercase();
            if ["KEY", "TOKEN", "SECRET", "PASSWORD"]
                .iter()
                .any(|w| upper.contains(w))
            {
                return true;
            }
        }
        let value = value.as_encoded_bytes();
        self.secrets.iter().any(|s| {
            let s = s.as_bytes();
            if s.len() < MIN_SUBSTRING_SECRET {
                value == s
            } else {
                memchr::memmem::find(value, s).is_some()
            }
        })
    }

    /// The names of tagloop's current variables that a child does not get.
    pub fn removed_names(&self) -> Vec<OsString> {
        std::env::vars_os()
            .filter(|(k, v)| self.is_removed(k, v))
            .map(|(k, _)| k)
            .collect()
    }

    /// Apply the rules to a command about to be spawned (removals first, then explicit values).
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        for name in self.removed_names() {
            cmd.env_remove(name);
        }
        cmd.env_remove(JOB_VAR);
        for (k, v) in &self.set {
            cmd.env(k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_known_names_secret_names_and_values_holding_a_secret() {
        let env = ChildEnv::new()
            .remove("OTHER_PROVIDER_KEY")
            .secret("sk-abcdefgh12345");
        let gone = |k: &str, v: &str| env.is_removed(OsStr::new(k), OsStr::new(v));
        assert!(gone("OPENAI_API_KEY", "x"));
        assert!(gone("OPENAI_ADMIN_KEY", "x"));
        assert!(gone("OTHER_PROVIDER_KEY", "x"));
        assert!(gone("TAGLOOP_TEST_TOKEN", "x"));
        assert!(gone("COPY", "prefix sk-abcdefgh12345 suffix"));
        assert!(!gone("PATH", "/usr/bin"));
        assert!(!gone("TAGLOOP_MODEL", "m"));
        assert!(!gone("COPY", "sk-abcdefgh"));
        // A short secret only matches a whole value.
        let short = ChildEnv::new().secret("abc");
        assert!(short.is_removed(OsStr::new("X"), OsStr::new("abc")));
        assert!(!short.is_removed(OsStr::new("X"), OsStr::new("xabcx")));
    }

    #[test]
    fn debug_never_shows_secrets_or_values() {
        let env = ChildEnv::new()
            .secret("sk-hidden-000000")
            .set("TOKEN", "tok-v");
        let shown = format!("{env:?}");
        assert!(
            !shown.contains("sk-hidden") && !shown.contains("tok-v"),
            "{shown}"
        );
    }
}
