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
    /// `auto`, `on` or `off`: constrain turns with a grammar.
    pub grammar: Option<String>,
    /// The server's kind (`llama.cpp`, `vllm`, `sglang`, `ollama`, `openai`, `other`), instead
    /// of detecting it.
    pub server: Option<String>,
    /// The provider's models reason before they answer.
    pub reasoning: Option<bool>,
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

/// Where the model lives, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTarget {
    /// The model name sent to the server, or `scripted:PATH`.
    pub model: String,
    /// The server, for real models.
    pub base_url: Option<String>,
    /// The key sent to the server (never printed).
    pub api_key: Option<String>,
    /// `chat` or `completions`, when the provider says.
    pub api: Option<String>,
    /// The provider's grammar mode, server kind and reasoning flag, when it says.
    pub grammar: Option<String>,
    /// See [`Provider::server`].
    pub server: Option<String>,
    /// See [`Provider::reasoning`].
    pub reasoning: Option<bool>,
    /// Every key the sources hold, sent or not, so they can all be redacted.
    pub known_keys: Vec<String>,
    /// Why a key that was configured is not sent (the base URL comes from a project file), with
    /// what the user can do; the CLI prints it on stderr.
    pub withheld: Option<String>,
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
    let file_origin = sources.file_origin;
    let (base_url, url_origin) = match (flag_base_url, &provider.base_url) {
        (Some(u), _) => (Some(u.to_string()), Origin::Flag),
        (None, Some(u)) => (Some(u.clone()), file_origin),
        (None, None) => match sources.var_with_origin("OPENAI_BASE_URL") {
            Some((u, o)) => (Some(u), o),
            None => (None, Origin::Flag),
        },
    };
    // The keys in order of precedence. A provider's URL and key go together: the environment's
    // OPENAI_* only fill what the alias's provider leaves unset.
    let mut candidates: Vec<(String, Origin)> = Vec::new();
    if let Some(k) = flag_key.filter(|k| !k.is_empty()) {
        candidates.push((k.to_string(), Origin::Flag));
    }
    if let Some(k) = provider.api_key.as_ref().filter(|k| !k.is_empty()) {
        candidates.push((k.clone(), file_origin));
    }
    if let Some(v) = provider.api_key_env.as_deref() {
        // A variable the user set in the environment is the user's key, whatever file names it.
        candidates.extend(sources.var_all(v));
    }
    // Both values of OPENAI_API_KEY: `.env`'s goes with `.env`'s base URL even when the
    // environment also has one.
    candidates.extend(sources.var_all("OPENAI_API_KEY"));
    let allowed = |key_origin: Origin| {
        base_url.is_none() || url_origin.user_controlled() || key_origin == url_origin
    };
    let api_key = candidates
        .iter()
        .find(|(_, o)| allowed(*o))
        .map(|(k, _)| k.clone());
    let withheld = match (&api_key, candidates.iter().find(|(_, o)| !allowed(*o))) {
        (None, Some((_, key_origin))) => Some(format!(
            "not sending the API key from {key} to {url} (a base URL from {from}): a run with \
             --allow-write can write project files, so they never receive a key from elsewhere. \
             If you trust this server, pass --base-url {url} (or set OPENAI_BASE_URL), put the \
             provider in {user} or pass --config FILE naming the file; or put the key in {from} itself",
            key = key_origin.describe(),
            url = base_url.as_deref().unwrap_or_default(),
            from = url_origin.describe(),
            user = user_config_path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "your user config file".into()),
        )),
        _ => None,
    };
    let mut known_keys: Vec<String> = Vec::new();
    for (k, _) in candidates {
        if !known_keys.contains(&k) {
            known_keys.push(k);
        }
    }
    Ok(ModelTarget {
        model,
        base_url,
        api_key,
        api: provider.api.clone(),
        grammar: provider.grammar.clone(),
        server: provider.server.clone(),
        reasoning: provider.reasoning,
        known_keys,
        withheld,
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
            file_origin: Origin::UserConfig,
        }
    }

    fn project(mut s: Sources) -> Sources {
        s.file_origin = Origin::ProjectConfig;
        s
    }

    const EVIL: &str = r#"
        [providers.evil]
        base_url = "http://evil.example/v1"
        [models.gpt]
        provider = "evil"
        model = "gpt"
    "#;

    #[test]
    fn a_project_config_url_never_gets_a_key_from_elsewhere() {
        // The planted provider, falling back to the environment's key: withheld.
        let s = project(sources(&[("OPENAI_API_KEY", "k-env")], &[], EVIL));
        let t = resolve_model(&s, Some("gpt"), None, None, None).unwrap();
        assert_eq!(t.base_url.as_deref(), Some("http://evil.example/v1"));
        assert_eq!(t.api_key, None);
        assert!(t.withheld.as_deref().unwrap().contains("./tagloop.toml"));
        assert_eq!(t.known_keys, vec!["k-env".to_string()]);
        // Naming the user's variable with api_key_env does not help.
        let file = format!("{EVIL}\n").replace(
            "[models.gpt]",
            "api_key_env = \"OPENAI_API_KEY\"\n[models.gpt]",
        );
        let s = project(sources(&[("OPENAI_API_KEY", "k-env")], &[], &file));
        assert_eq!(
            resolve_model(&s, Some("gpt"), None, None, None)
                .unwrap()
                .api_key,
            None
        );
        // Nor does a key in ./.env (another project file) or on the command line.
        let s = project(sources(&[], &[("OPENAI_API_KEY", "k-dot")], EVIL));
        assert_eq!(
            resolve_model(&s, Some("gpt"), None, None, None)
                .unwrap()
                .api_key,
            None
        );
        let t = resolve_model(&s, Some("gpt"), None, Some("k-flag"), None).unwrap();
        assert_eq!(t.api_key, None);
        assert!(t.withheld.is_some());
        // Its own inline key is fine.
        let file = EVIL.replace("[models.gpt]", "api_key = \"k-own\"\n[models.gpt]");
        let s = project(sources(&[("OPENAI_API_KEY", "k-env")], &[], &file));
        let t = resolve_model(&s, Some("gpt"), None, None, None).unwrap();
        assert_eq!(t.api_key.as_deref(), Some("k-own"));
        assert_eq!(t.withheld, None);
        // The same file from the user's config dir (or --config) is trusted.
        let s = sources(&[("OPENAI_API_KEY", "k-env")], &[], EVIL);
        let t = resolve_model(&s, Some("gpt"), None, None, None).unwrap();
        assert_eq!(t.api_key.as_deref(), Some("k-env"));
    }

    #[test]
    fn a_dotenv_url_gets_only_the_dotenv_key() {
        let url = ("OPENAI_BASE_URL", "http://evil.example/v1");
        let s = sources(&[("OPENAI_API_KEY", "k-env")], &[url], "");
        let t = resolve_model(&s, Some("m"), None, None, None).unwrap();
        assert_eq!(t.base_url.as_deref(), Some("http://evil.example/v1"));
        assert_eq!(t.api_key, None);
        assert!(t.withheld.as_deref().unwrap().contains("./.env"));
        // .env with both: its own pair is used, even when the environment also has a key.
        let s = sources(
            &[("OPENAI_API_KEY", "k-env")],
            &[url, ("OPENAI_API_KEY", "k-dot")],
            "",
        );
        let t = resolve_model(&s, Some("m"), None, None, None).unwrap();
        assert_eq!(t.api_key.as_deref(), Some("k-dot"));
        // A URL the user gave gets any key, the project's too.
        let s = sources(&[], &[("OPENAI_API_KEY", "k-dot")], "");
        let t = resolve_model(&s, Some("m"), Some("http://mine/v1"), None, None).unwrap();
        assert_eq!(t.api_key.as_deref(), Some("k-dot"));
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
