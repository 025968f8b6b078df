//! Configuration: flag > environment > `.env` in the working directory > config file > default,
//! resolved without touching the process environment.
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
//! # api_key = "…"  or  api_key_env = "OLLAMA_API_KEY"
//!
//! [models.local]
//! provider = "ollama"
//! model = "qwen2.5:7b-instruct"
//!
//! [roles.planner]                    # per-role model override (by the role's name)
//! model = "local"
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
}

/// A model alias.
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

/// The config file.
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
        let file = match explicit_config {
            Some(p) => read_config(p)?,
            None => {
                let candidates = [
                    Some(PathBuf::from("tagloop.toml")),
                    dirs::config_dir().map(|d| d.join("tagloop").join("tagloop.toml")),
                ];
                match candidates.into_iter().flatten().find(|p| p.is_file()) {
                    Some(p) => read_config(&p)?,
                    None => ConfigFile::default(),
                }
            }
        };
        Ok(Sources { env, dotenv, file })
    }

    /// A variable from the environment, else from `.env`.
    pub fn var(&self, name: &str) -> Option<String> {
        self.env
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .or_else(|| self.dotenv.get(name).cloned())
            .filter(|v| !v.is_empty())
    }
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

/// Where the model lives, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTarget {
    /// The model name sent to the server, or `scripted:PATH`.
    pub model: String,
    /// The server, for real models.
    pub base_url: Option<String>,
    /// The key (never printed).
    pub api_key: Option<String>,
    /// `chat` or `completions`, when the provider says.
    pub api: Option<String>,
}

/// Resolve the model from the flags, the sources and the role's name.
pub fn resolve_model(
    sources: &Sources,
    flag_model: Option<&str>,
    flag_base_url: Option<&str>,
    flag_key: Option<&str>,
    role_name: Option<&str>,
) -> Result<ModelTarget> {
    let from_role = role_name
        .and_then(|r| sources.file.roles.get(r))
        .map(|o| o.model.clone());
    let name = flag_model
        .map(str::to_string)
        .or_else(|| sources.var("TAGLOOP_MODEL"))
        .or(from_role)
        .or_else(|| sources.file.default_model.clone());
    let Some(name) = name else {
        bail!(
            "no model given: pass --model NAME (or scripted:PATH), set TAGLOOP_MODEL, or set default_model in tagloop.toml"
        );
    };
    let (model, provider) = match sources.file.models.get(&name) {
        Some(alias) => {
            let provider = match &alias.provider {
                Some(p) => Some(
                    sources
                        .file
                        .providers
                        .get(p)
                        .with_context(|| format!("model alias `{name}` names provider `{p}`, which tagloop.toml does not define"))?
                        .clone(),
                ),
                None => None,
            };
            (alias.model.clone(), provider)
        }
        None => (name, None),
    };
    let provider = provider.unwrap_or_default();
    let provider_key = provider
        .api_key
        .clone()
        .or_else(|| provider.api_key_env.as_deref().and_then(|v| sources.var(v)));
    // A provider's URL and key go together: the environment's OPENAI_* only fill what the alias's
    // provider leaves unset, so one provider's key is never sent to another's server.
    let base_url = flag_base_url
        .map(str::to_string)
        .or(provider.base_url.clone())
        .or_else(|| sources.var("OPENAI_BASE_URL"));
    let api_key = flag_key
        .map(str::to_string)
        .or(provider_key)
        .or_else(|| sources.var("OPENAI_API_KEY"));
    Ok(ModelTarget {
        model,
        base_url,
        api_key,
        api: provider.api.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(env: &[(&str, &str)], dotenv: &[(&str, &str)], toml: &str) -> Sources {
        Sources {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            dotenv: dotenv
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            file: toml::from_str(toml).unwrap(),
        }
    }

    #[test]
    fn flag_beats_env_beats_dotenv_beats_file() {
        let file = "default_model = \"m-file\"\n";
        let s = sources(
            &[("TAGLOOP_MODEL", "m-env")],
            &[("TAGLOOP_MODEL", "m-dot")],
            file,
        );
        assert_eq!(
            resolve_model(&s, Some("m-flag"), None, None, None)
                .unwrap()
                .model,
            "m-flag"
        );
        assert_eq!(
            resolve_model(&s, None, None, None, None).unwrap().model,
            "m-env"
        );
        let s = sources(&[], &[("TAGLOOP_MODEL", "m-dot")], file);
        assert_eq!(
            resolve_model(&s, None, None, None, None).unwrap().model,
            "m-dot"
        );
        let s = sources(&[], &[], file);
        assert_eq!(
            resolve_model(&s, None, None, None, None).unwrap().model,
            "m-file"
        );
        let s = sources(&[], &[], "");
        assert!(
            resolve_model(&s, None, None, None, None)
                .unwrap_err()
                .to_string()
                .contains("no model given")
        );
    }

    #[test]
    fn aliases_bring_their_provider() {
        let file = r#"
            [providers.local]
            base_url = "http://127.0.0.1:8080/v1"
            api_key = "k-file"
            api = "completions"
            [models.small]
            provider = "local"
            model = "qwen"
            [roles.critic]
            model = "small"
        "#;
        let s = sources(&[], &[], file);
        let t = resolve_model(&s, None, None, None, Some("critic")).unwrap();
        assert_eq!(t.model, "qwen");
        assert_eq!(t.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        assert_eq!(t.api_key.as_deref(), Some("k-file"));
        assert_eq!(t.api.as_deref(), Some("completions"));
        // The environment's key and URL are not sent to the alias's provider.
        let s = sources(
            &[
                ("OPENAI_API_KEY", "k-env"),
                ("OPENAI_BASE_URL", "http://elsewhere/v1"),
            ],
            &[],
            file,
        );
        let t = resolve_model(&s, Some("small"), None, None, None).unwrap();
        assert_eq!(t.api_key.as_deref(), Some("k-file"));
        assert_eq!(t.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        // The flag's key wins over the provider's.
        let t = resolve_model(&s, Some("small"), None, Some("k-flag"), None).unwrap();
        assert_eq!(t.api_key.as_deref(), Some("k-flag"));
        let s = sources(&[], &[], "[models.x]\nprovider = \"nope\"\nmodel = \"y\"\n");
        assert!(resolve_model(&s, Some("x"), None, None, None).is_err());
    }
}
