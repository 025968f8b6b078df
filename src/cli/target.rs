//! Where the model lives: its name, its server and the key that may be sent there, resolved
//! from the flags and the configuration [`Sources`] under the key rule.

use anyhow::{Context, Result, bail};

use super::config::{Origin, Provider, Sources, user_config_path};

/// Where the model lives, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTarget {
    /// The model name sent to the server, or `scripted:PATH`; empty when no name was given
    /// but a server was ([`ModelTarget::ask_server`]).
    pub model: String,
    /// No model was named anywhere, but a base URL is known: the model is the one the server
    /// serves, asked for before the first turn (`setup`).
    pub ask_server: bool,
    /// The server, for real models.
    pub base_url: Option<String>,
    /// The key sent to the server (never printed).
    pub api_key: Option<String>,
    /// `chat` or `completions`, when the provider says.
    pub api: Option<String>,
    /// The provider's grammar mode, server kind and reasoning flag, when it says.
    pub grammar: Option<String>,
    /// See [`Provider::grammar_syntax`].
    pub grammar_syntax: Option<String>,
    /// See [`Provider::server`].
    pub server: Option<String>,
    /// See [`Provider::reasoning`].
    pub reasoning: Option<bool>,
    /// See [`Provider::context`].
    pub context: Option<u64>,
    /// See [`Provider::stream`].
    pub stream: Option<bool>,
    /// Every key the sources hold, sent or not, so they can all be redacted.
    pub known_keys: Vec<String>,
    /// Why a key that was configured is not sent (the base URL comes from a project file), with
    /// what the user can do; the CLI prints it on stderr.
    pub withheld: Option<String>,
}

/// Resolve the model from the flags, the sources and the role's name: the name (a flag,
/// `TAGLOOP_MODEL`, the role's override, `default_model`), its alias's provider, the base URL and
/// the key the key rule allows for it ([`choose_key`]). With no name but a base URL, the target
/// says to ask the server ([`ModelTarget::ask_server`]); with neither, it is an error.
pub fn resolve_model(
    sources: &Sources,
    flag_model: Option<&str>,
    flag_base_url: Option<&str>,
    flag_key: Option<&str>,
    role_name: Option<&str>,
) -> Result<ModelTarget> {
    let (model, provider) = model_and_provider(sources, flag_model, role_name)?;
    let ask_server = model.is_none();
    let (base_url, url_origin) = match (flag_base_url, &provider.base_url) {
        (Some(u), _) => (Some(u.to_string()), Origin::Flag),
        (None, Some(u)) => (Some(u.clone()), sources.file_origin),
        (None, None) => match sources.var_with_origin("OPENAI_BASE_URL") {
            Some((u, o)) => (Some(u), o),
            None => (None, Origin::Flag),
        },
    };
    let candidates = key_candidates(sources, &provider, flag_key);
    let choice = choose_key(&candidates, base_url.as_deref(), url_origin);
    let mut known_keys: Vec<String> = Vec::new();
    for (k, _) in candidates {
        if !known_keys.contains(&k) {
            known_keys.push(k);
        }
    }
    if ask_server && base_url.is_none() {
        bail!(
            "no model given: pass --model NAME (or scripted:PATH), set TAGLOOP_MODEL, or set default_model in tagloop.toml; with --base-url alone, the server's one model is used"
        );
    }
    Ok(ModelTarget {
        model: model.unwrap_or_default(),
        ask_server,
        base_url,
        api_key: choice.key,
        api: provider.api,
        grammar: provider.grammar,
        grammar_syntax: provider.grammar_syntax,
        server: provider.server,
        reasoning: provider.reasoning,
        context: provider.context.map(std::num::NonZeroU64::get),
        stream: provider.stream,
        known_keys,
        withheld: choice.withheld,
    })
}

/// The model's name and its provider (an alias's, or none): the name comes from the flag,
/// `TAGLOOP_MODEL`, the role's override or `default_model`, in that order; `None` when none
/// of them gives one.
fn model_and_provider(
    sources: &Sources,
    flag_model: Option<&str>,
    role_name: Option<&str>,
) -> Result<(Option<String>, Provider)> {
    let from_role = role_name
        .and_then(|r| sources.file.roles.get(r))
        .map(|o| o.model.clone());
    let name = flag_model
        .map(str::to_string)
        .or_else(|| sources.var("TAGLOOP_MODEL"))
        .or(from_role)
        .or_else(|| sources.file.default_model.clone());
    let Some(name) = name else {
        return Ok((None, Provider::default()));
    };
    let Some(alias) = sources.file.models.get(&name) else {
        return Ok((Some(name), Provider::default()));
    };
    let provider = match &alias.provider {
        Some(p) => sources.file.providers.get(p).cloned().with_context(|| {
            format!("model alias `{name}` names provider `{p}`, which tagloop.toml does not define")
        })?,
        None => Provider::default(),
    };
    Ok((Some(alias.model.clone()), provider))
}

/// Every key the sources hold for this model, in order of precedence, with its origin. A
/// provider's URL and key go together: the environment's `OPENAI_*` only fill what the alias's
/// provider leaves unset.
fn key_candidates(
    sources: &Sources,
    provider: &Provider,
    flag_key: Option<&str>,
) -> Vec<(String, Origin)> {
    let mut candidates: Vec<(String, Origin)> = Vec::new();
    if let Some(k) = flag_key.filter(|k| !k.is_empty()) {
        candidates.push((k.to_string(), Origin::Flag));
    }
    if let Some(k) = provider.api_key.as_ref().filter(|k| !k.is_empty()) {
        candidates.push((k.clone(), sources.file_origin));
    }
    if let Some(v) = provider.api_key_env.as_deref() {
        // A variable the user set in the environment is the user's key, whatever file names it.
        candidates.extend(sources.var_all(v));
    }
    // Both values of OPENAI_API_KEY: `.env`'s goes with `.env`'s base URL even when the
    // environment also has one.
    candidates.extend(sources.var_all("OPENAI_API_KEY"));
    candidates
}

/// The key sent, and why one was withheld.
struct KeyChoice {
    key: Option<String>,
    withheld: Option<String>,
}

/// The key rule (docs/security.md, "Where a key may go"): a key goes only to a base URL
/// from the same origin as the key, or from an origin the user controls (a flag, the
/// environment, the user's config, `--config FILE`). A base URL from a project file
/// (`./tagloop.toml`, `./.env`, which a run with `--allow-write` can write) gets only a key from
/// that same file. The first allowed candidate wins; when none is allowed but one exists, the
/// reason says what the user can do.
fn choose_key(
    candidates: &[(String, Origin)],
    base_url: Option<&str>,
    url_origin: Origin,
) -> KeyChoice {
    let allowed = |key_origin: Origin| {
        base_url.is_none() || url_origin.user_controlled() || key_origin == url_origin
    };
    let key = candidates
        .iter()
        .find(|(_, o)| allowed(*o))
        .map(|(k, _)| k.clone());
    let withheld = match (&key, candidates.iter().find(|(_, o)| !allowed(*o))) {
        (None, Some((_, key_origin))) => Some(format!(
            "not sending the API key from {key} to {url} (a base URL from {from}): a run with \
             --allow-write can write project files, so they never receive a key from elsewhere. \
             If you trust this server, pass --base-url {url} (or set OPENAI_BASE_URL), put the \
             provider in {user} or pass --config FILE naming the file; or put the key in {from} itself",
            key = key_origin.describe(),
            url = base_url.unwrap_or_default(),
            from = url_origin.describe(),
            user = user_config_path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "your user config file".into()),
        )),
        _ => None,
    };
    KeyChoice { key, withheld }
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
        // No name but a server: its model will be asked for.
        let t = resolve_model(&s, None, Some("http://127.0.0.1:8080/v1"), None, None).unwrap();
        assert!(t.ask_server && t.model.is_empty());
        let t = resolve_model(&s, Some("m"), Some("http://127.0.0.1:8080/v1"), None, None).unwrap();
        assert!(!t.ask_server);
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

    #[test]
    fn a_providers_context_window_comes_with_its_alias() {
        let file = "[providers.local]\nbase_url = \"http://127.0.0.1:8080/v1\"\ncontext = 2048\n[models.small]\nprovider = \"local\"\nmodel = \"qwen\"\n";
        let s = sources(&[], &[], file);
        let t = resolve_model(&s, Some("small"), None, None, None).unwrap();
        assert_eq!(t.context, Some(2048));
        // A model named directly has no provider, so no stated window.
        let t = resolve_model(&s, Some("qwen"), Some("http://h/v1"), None, None).unwrap();
        assert_eq!(t.context, None);
        for bad in ["context = 0", "context = \"big\"", "context = -1"] {
            let file = file.replace("context = 2048", bad);
            assert!(
                toml::from_str::<super::super::config::ConfigFile>(&file).is_err(),
                "{bad}"
            );
        }
    }
}
