//! Configuration: flag > environment > `.env` in the working directory > config file > default,
//! resolved without touching the process environment.
//!
//! Every value keeps its [`Origin`], because the files in the working directory (`./.env`,
//! `./tagloop.toml`) are *project* files that a run with `--allow-write` can write: a model could
//! plant a base URL there and have the next run send the user's key to it. So a key is sent only
//! to a base URL that comes from the same origin as the key, or from an origin the user controls
//! (a flag, the process environment, the user's config dir, a `--config FILE`). A base URL from a
//! project file never receives a key from elsewhere; tagloop sends no key and says so on stderr.
//!
//! The config file is `tagloop.toml` in the working directory, else `<user config dir>/tagloop/tagloop.toml`
//! (or the file named by `--config`):
//!
//! ```toml
//! default_model = "local"            # an alias below, or a model name
//!
//! [providers.ollama]
//! base_url = "http://127.0.0.1:11434/v1"
//! api = "chat"                       # or "completions"
//! context = 8192                     # the context window in tokens, instead of asking the server
//! # stream = false                   # whole answers only (a server behind a buffering proxy)
//! # api_key = "…"  or  api_key_env = "OLLAMA_API_KEY"
//!
//! [models.local]
//! provider = "ollama"
//! model = "qwen2.5:7b-instruct"
//!
//! [roles.planner]                    # per-role model override (by the role's name)
//! model = "local"
//!
//! [policies]                         # steering rules switched off (`tagloop policies`)
//! off = ["counting"]
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// A provider: where a server is and how to authenticate.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub api_key_env: Option<String>,
    pub api: Option<String>,
    /// `auto`, `on` or `off`: constrain turns with a grammar.
    pub grammar: Option<String>,
    /// `gbnf` or `llguidance`: the grammar syntax sent to llama.cpp (llguidance only for a
    /// build with it, which a build without it aborts on).
    pub grammar_syntax: Option<String>,
    /// The server's kind (`llama.cpp`, `vllm`, `sglang`, `ollama`, `openai`, `other`), instead
    /// of detecting it.
    pub server: Option<String>,
    /// The provider's models reason before they answer.
    pub reasoning: Option<bool>,
    /// The context window of the provider's models in tokens, instead of learning it from the
    /// server (`--context-window` wins); 0 or a non-number is an error when the file is read.
    pub context: Option<std::num::NonZeroU64>,
    /// `false`: ask the provider's server for whole answers, never streamed (a server behind a
    /// proxy that buffers or refuses streams; `--no-stream` does the same).
    pub stream: Option<bool>,
}

/// A `[models.NAME]` entry of `tagloop.toml`: the model name `NAME` (from `--model`,
/// `TAGLOOP_MODEL`, a role or `default_model`) becomes `model`, sent to the `[providers]` entry
/// named `provider` (the default provider when none is named; an undefined one is an error).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelAlias {
    pub provider: Option<String>,
    pub model: String,
}

/// A per-role override.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleOverride {
    pub model: String,
}

/// A `tagloop.toml` as read (the user's, `./tagloop.toml`, or the one `--config` names); an unknown
/// key is an error.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub default_model: Option<String>,
    #[serde(default)]
    pub providers: HashMap<String, Provider>,
    #[serde(default)]
    pub models: HashMap<String, ModelAlias>,
    #[serde(default)]
    pub roles: HashMap<String, RoleOverride>,
    /// `tagloop serve`'s tuning knobs (`serve_config.rs`).
    pub serve: Option<super::serve_config::ServeSection>,
    /// The steering rules switched off, for runs and serve alike (`policies.rs`).
    pub policies: Option<super::policies::PoliciesSection>,
}

/// Where a value was configured. The first four are under the user's own control; the project
/// files in the working directory are not (a run can write them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    /// A command-line flag.
    Flag,
    /// The process environment.
    Env,
    /// `<user config dir>/tagloop/tagloop.toml`.
    #[default]
    UserConfig,
    /// The file named by `--config`.
    ExplicitConfig,
    /// `./.env`.
    ProjectDotenv,
    /// `./tagloop.toml`.
    ProjectConfig,
}

impl Origin {
    /// Whether the user controls this origin (a run cannot write it through the file tools'
    /// default workspace).
    pub fn user_controlled(self) -> bool {
        matches!(
            self,
            Origin::Flag | Origin::Env | Origin::UserConfig | Origin::ExplicitConfig
        )
    }

    /// The origin in words, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Origin::Flag => "the command line",
            Origin::Env => "the environment",
            Origin::UserConfig => "the user config file",
            Origin::ExplicitConfig => "the --config file",
            Origin::ProjectDotenv => "./.env",
            Origin::ProjectConfig => "./tagloop.toml",
        }
    }
}

/// Where values come from, in order of precedence (after flags).
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The process environment (only the variables tagloop reads).
    pub env: HashMap<String, String>,
    /// `.env` in the working directory.
    pub dotenv: HashMap<String, String>,
    /// The config file, if any.
    pub file: ConfigFile,
    /// Where the config file came from.
    pub file_origin: Origin,
}

/// The environment variables tagloop reads.
pub const VARIABLES: &[&str] = &[
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "TAGLOOP_MODEL",
    "TAGLOOP_API",
    "TAGLOOP_SESSION_DIR",
];

impl Sources {
    /// Read the environment, `.env` and the config file.
    pub fn load(explicit_config: Option<&Path>) -> Result<Self> {
        let mut env = HashMap::new();
        for v in VARIABLES {
            if let Ok(val) = std::env::var(v) {
                env.insert(v.to_string(), val);
            }
        }
        // Keys named by providers' api_key_env are read lazily via `var`.
        let dotenv = read_dotenv(Path::new(".env"))?;
        let (file, file_origin) = match explicit_config {
            Some(p) => (read_config(p)?, Origin::ExplicitConfig),
            None => {
                let candidates = [
                    Some((PathBuf::from("tagloop.toml"), Origin::ProjectConfig)),
                    user_config_path().map(|p| (p, Origin::UserConfig)),
                ];
                match candidates.into_iter().flatten().find(|(p, _)| p.is_file()) {
                    Some((p, origin)) => (read_config(&p)?, origin),
                    None => (ConfigFile::default(), Origin::UserConfig),
                }
            }
        };
        Ok(Sources {
            env,
            dotenv,
            file,
            file_origin,
        })
    }

    /// A variable from the environment, else from `.env`.
    pub fn var(&self, name: &str) -> Option<String> {
        self.var_with_origin(name).map(|(v, _)| v)
    }

    /// Every value of a variable, with where it was found: the environment's first, then `.env`'s.
    pub fn var_all(&self, name: &str) -> Vec<(String, Origin)> {
        let mut all: Vec<(String, Origin)> = Vec::new();
        if let Some((v, Origin::Env)) = self.var_with_origin(name) {
            all.push((v, Origin::Env));
        }
        if let Some(v) = self.dotenv.get(name).filter(|v| !v.is_empty()) {
            all.push((v.clone(), Origin::ProjectDotenv));
        }
        all
    }

    /// A variable from the environment, else from `.env`, with where it was found.
    pub fn var_with_origin(&self, name: &str) -> Option<(String, Origin)> {
        let from_env = self
            .env
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .filter(|v| !v.is_empty());
        match from_env {
            Some(v) => Some((v, Origin::Env)),
            None => self
                .dotenv
                .get(name)
                .filter(|v| !v.is_empty())
                .map(|v| (v.clone(), Origin::ProjectDotenv)),
        }
    }
}

/// `<user config dir>/tagloop/tagloop.toml`.
pub fn user_config_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("tagloop").join("tagloop.toml"))
}

fn read_dotenv(path: &Path) -> Result<HashMap<String, String>> {
    let mut map = HashMap::new();
    let iter = match dotenvy::from_path_iter(path) {
        Ok(it) => it,
        Err(dotenvy::Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(map),
        Err(e) => bail!("cannot read {}: {e}", path.display()),
    };
    for item in iter {
        let (k, v) = item.with_context(|| format!("{} has a malformed line", path.display()))?;
        map.insert(k, v);
    }
    Ok(map)
}

fn read_config(path: &Path) -> Result<ConfigFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("config file {} is not valid", path.display()))
}
