//! Building the configured provider, with every configuration problem reported
//! before any work starts.
//!
//! The factory is the only place that reads an API key, and it reads it only from
//! the environment variable the config names (`api_key_env`, else the provider's
//! conventional one, e.g. `ANTHROPIC_API_KEY`), through a lookup function so tests
//! can give their own environment. A profile (`REQUIRES "profile"`) is just another
//! [`LlmConfig`], merged by `Config::llm_for`, built here the same way.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::LlmError;
use crate::http::{HttpOptions, HttpProvider, ProviderSettings};
use crate::pricing::Pricing;
use crate::replay::{Recorder, ReplayProvider};
use crate::{Provider, anthropic, gemini, openai};
use agentfile_config::{Config, LlmConfig, PROVIDERS, Price};

/// Choices that come from the command line rather than the config file.
#[derive(Clone, Default)]
pub struct ProviderOptions {
    /// Timeouts and retries for HTTP providers.
    pub http: HttpOptions,
    /// The cassette `--provider replay` answers from (`--cassette FILE`).
    pub cassette: Option<PathBuf>,
    /// The script `--provider fake` answers from (`--script FILE`); the
    /// config's `llm.script` when not given.
    pub script: Option<PathBuf>,
    /// Record every exchange to this cassette (`--record FILE`).
    pub record: Option<PathBuf>,
    /// The host's model when running under `agentfile mcp` (`--provider
    /// mcp-sampling`); the MCP server plugs its sampling client in here.
    pub sampling: Option<Arc<dyn Provider>>,
}

impl std::fmt::Debug for ProviderOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderOptions")
            .field("http", &self.http)
            .field("cassette", &self.cassette)
            .field("script", &self.script)
            .field("record", &self.record)
            .field(
                "sampling",
                &self.sampling.as_ref().map(|p| p.name().to_owned()),
            )
            .finish()
    }
}

/// The provider `llm` describes, with default options. See [`provider_from_config_with`].
pub fn provider_from_config(
    llm: &LlmConfig,
    pricing: &BTreeMap<String, Price>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, LlmError> {
    provider_from_config_with(llm, pricing, env, &ProviderOptions::default())
}

/// The provider `llm` describes. `pricing` is the config's price overrides; `env`
/// looks up environment variables (pass `&|k| std::env::var(k).ok()`).
///
/// Fails, naming the fix, when the provider is unknown, the model is missing, the
/// key variable is unset (except for Ollama, which needs none), the base URL is
/// not a URL, `replay` has no cassette, or `mcp-sampling` is asked for outside
/// `agentfile mcp`.
pub fn provider_from_config_with(
    llm: &LlmConfig,
    pricing: &BTreeMap<String, Price>,
    env: &dyn Fn(&str) -> Option<String>,
    options: &ProviderOptions,
) -> Result<Arc<dyn Provider>, LlmError> {
    let name = llm.provider_name().ok_or_else(|| LlmError::NoProvider {
        known: PROVIDERS.join(", "),
    })?;
    let provider: Arc<dyn Provider> = match name.as_str() {
        "anthropic" | "openai" | "openrouter" | "ollama" | "gemini" => {
            Arc::new(http_provider(&name, llm, pricing, env, options)?)
        }
        "replay" => {
            let path = options.cassette.as_ref().ok_or_else(|| LlmError::Config {
                provider: name.clone(),
                message: "replay needs a cassette; pass --cassette FILE (one recorded with --record FILE)"
                    .to_owned(),
            })?;
            Arc::new(ReplayProvider::open(path)?)
        }
        "fake" => Arc::new(fake_provider(llm, options)?),
        "mcp-sampling" => options.sampling.clone().ok_or_else(|| LlmError::Unavailable {
            provider: name.clone(),
            message: "only available when running under `agentfile mcp`, where the MCP host's own model answers through sampling; choose another provider for `agentfile run`"
                .to_owned(),
        })?,
        _ => {
            return Err(LlmError::UnknownProvider {
                name,
                known: PROVIDERS.join(", "),
            });
        }
    };
    match &options.record {
        Some(path) => Ok(Arc::new(Recorder::create(provider, path)?)),
        None => Ok(provider),
    }
}

/// The provider for an agent: the config's `llm`, overridden by `profile` (an
/// agent's `REQUIRES "profile"`), with the config's price overrides. An unknown
/// profile is an error that lists the defined ones.
pub fn provider_for(
    config: &Config,
    profile: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    options: &ProviderOptions,
) -> Result<Arc<dyn Provider>, LlmError> {
    let mut llm = config.llm_for(profile).map_err(|e| LlmError::Config {
        provider: "llm".to_owned(),
        message: e.to_string(),
    })?;
    // A profile that switches provider must not inherit the base provider's
    // endpoint or key variable: that would send one service's key to another.
    if let Some(own) = profile.and_then(|name| config.profiles.get(name))
        && llm.provider_name() != config.llm.provider_name()
    {
        llm.base_url = own.base_url.clone();
        llm.api_key_env = own.api_key_env.clone();
    }
    provider_from_config_with(&llm, &config.pricing, env, options)
}

/// Per-provider defaults: (base URL, key variable, example model).
fn defaults(name: &str) -> (&'static str, Option<&'static str>, &'static str) {
    match name {
        "anthropic" => (
            anthropic::DEFAULT_BASE_URL,
            Some("ANTHROPIC_API_KEY"),
            "claude-sonnet-4-5",
        ),
        "openai" => (openai::DEFAULT_BASE_URL, Some("OPENAI_API_KEY"), "gpt-4.1"),
        "openrouter" => (
            openai::OPENROUTER_BASE_URL,
            Some("OPENROUTER_API_KEY"),
            "anthropic/claude-sonnet-4.5",
        ),
        "gemini" => (
            gemini::DEFAULT_BASE_URL,
            Some("GEMINI_API_KEY"),
            "gemini-2.5-flash",
        ),
        // Ollama runs locally without a key.
        _ => (openai::OLLAMA_BASE_URL, None, "llama3.1"),
    }
}

/// `--provider fake`: the fake model (see [`crate::fake`]) answering from a
/// JSON script, on loopback in this process, spoken to in OpenAI's wire format
/// like any compatible server. Needs no key and no model (it reports
/// `fake`); what it answers is the script's.
fn fake_provider(llm: &LlmConfig, options: &ProviderOptions) -> Result<ScriptedModel, LlmError> {
    let config = |message: String| LlmError::Config {
        provider: "fake".to_owned(),
        message,
    };
    let path = options
        .script
        .as_ref()
        .or(llm.script.as_ref())
        .ok_or_else(|| {
            config(
                "the fake model needs a script; pass --script FILE (or set llm.script): a JSON \
             array of replies such as [{\"text\": \"done\"}]"
                    .to_owned(),
            )
        })?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| config(format!("cannot read the script {}: {e}", path.display())))?;
    let script = crate::fake::FakeScript::from_json(&text)
        .map_err(|e| config(format!("{}: not a fake-model script: {e}", path.display())))?;
    let server = crate::fake::FakeThread::start(script)
        .map_err(|e| config(format!("cannot start the fake model on loopback: {e}")))?;
    let settings = ProviderSettings {
        name: "fake".to_owned(),
        model: llm
            .model
            .clone()
            .filter(|m| !m.trim().is_empty())
            .unwrap_or_else(|| "fake".to_owned()),
        api_key: None,
        base_url: server.base_url().to_owned(),
        max_tokens: llm.max_tokens,
        temperature: llm.temperature,
        pricing: Pricing::free(BTreeMap::new()),
        options: options.http,
    };
    let wire = crate::openai::OpenAi::for_provider("openai");
    Ok(ScriptedModel {
        inner: HttpProvider::new(settings, Box::new(wire))?,
        script: path.clone(),
        _server: server,
    })
}

/// The fake model's provider: HTTP to its loopback server, which lives as
/// long as this does.
struct ScriptedModel {
    inner: HttpProvider,
    script: PathBuf,
    _server: crate::fake::FakeThread,
}

impl Provider for ScriptedModel {
    fn name(&self) -> &str {
        "fake"
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn endpoint(&self) -> Option<String> {
        Some(format!("script {}", self.script.display()))
    }

    fn chat(
        &self,
        request: crate::ChatRequest,
        cancel: crate::CancellationToken,
    ) -> futures::future::BoxFuture<'_, Result<crate::ChatResponse, LlmError>> {
        self.inner.chat(request, cancel)
    }

    fn stream(
        &self,
        request: crate::ChatRequest,
        cancel: crate::CancellationToken,
    ) -> futures::stream::BoxStream<'_, Result<crate::StreamEvent, LlmError>> {
        self.inner.stream(request, cancel)
    }
}

fn http_provider(
    name: &str,
    llm: &LlmConfig,
    pricing: &BTreeMap<String, Price>,
    env: &dyn Fn(&str) -> Option<String>,
    options: &ProviderOptions,
) -> Result<HttpProvider, LlmError> {
    let (base_url, default_key_var, example) = defaults(name);
    let mut http = options.http;
    if let Some(t) = &llm.call_timeout {
        http.call_timeout = agentfile_config::parse_duration(t).map_err(|e| LlmError::Config {
            provider: name.to_owned(),
            message: format!("llm.call_timeout: {e}"),
        })?;
    }
    let model = llm
        .model
        .clone()
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| LlmError::Config {
            provider: name.to_owned(),
            message: format!("no model configured; set llm.model (for example \"{example}\")"),
        })?;
    // An explicitly named variable must be set, even for Ollama (it may sit behind
    // an authenticating proxy); the conventional one only where a key is required.
    let key_var = llm.api_key_env.as_deref().or(default_key_var);
    let api_key = match key_var {
        Some(var) => Some(
            env(var)
                .filter(|k| !k.trim().is_empty())
                .map(|k| k.trim().to_owned())
                .ok_or_else(|| LlmError::MissingKey {
                    provider: name.to_owned(),
                    var: var.to_owned(),
                })?,
        ),
        None => None,
    };
    let pricing = if name == "ollama" {
        Pricing::free(pricing.clone())
    } else {
        Pricing::new(pricing.clone())
    };
    let settings = ProviderSettings {
        name: name.to_owned(),
        model,
        api_key,
        base_url: llm.base_url.clone().unwrap_or_else(|| base_url.to_owned()),
        max_tokens: llm.max_tokens,
        temperature: llm.temperature,
        pricing,
        options: http,
    };
    match name {
        "anthropic" => HttpProvider::new(settings, Box::new(crate::anthropic::Anthropic)),
        "gemini" => HttpProvider::new(settings, Box::new(crate::gemini::Gemini)),
        // OpenAI Chat Completions, or a compatible server (OpenRouter,
        // Ollama, …).
        _ => {
            let wire = crate::openai::OpenAi::for_provider(&settings.name);
            HttpProvider::new(settings, Box::new(wire))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llm(provider: &str, model: Option<&str>) -> LlmConfig {
        LlmConfig {
            provider: Some(provider.to_owned()),
            model: model.map(str::to_owned),
            ..Default::default()
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn build(
        c: &LlmConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<dyn Provider>, LlmError> {
        provider_from_config(c, &BTreeMap::new(), env)
    }

    #[test]
    fn unknown_provider_lists_the_valid_ones() {
        let e = build(&llm("claude", Some("x")), &no_env).err().unwrap();
        let m = e.to_string();
        assert!(m.contains("`claude`"), "{m}");
        for p in PROVIDERS {
            assert!(m.contains(p), "{m}");
        }
    }

    #[test]
    fn missing_key_names_the_variable_and_says_to_export_it() {
        let e = build(&llm("anthropic", Some("claude-sonnet-4-5")), &no_env)
            .err()
            .unwrap();
        assert!(matches!(e, LlmError::MissingKey { .. }));
        let m = e.to_string();
        assert!(m.contains("export ANTHROPIC_API_KEY"), "{m}");

        let mut c = llm("openai", Some("gpt-4o"));
        c.api_key_env = Some("MY_KEY".into());
        let m = build(&c, &|k| (k == "OPENAI_API_KEY").then(|| "x".into()))
            .err()
            .unwrap()
            .to_string();
        assert!(m.contains("export MY_KEY"), "{m}");
        // An empty variable is as good as none.
        assert!(build(&c, &|_| Some("  ".into())).is_err());
    }

    #[test]
    fn key_is_read_from_the_named_variable_only() {
        let mut c = llm("gemini", Some("gemini-2.5-flash"));
        c.api_key_env = Some("GKEY".into());
        let p = build(&c, &|k| (k == "GKEY").then(|| "secret-value".into())).unwrap();
        assert_eq!(p.name(), "gemini");
        assert_eq!(p.model(), "gemini-2.5-flash");
    }

    #[test]
    fn ollama_needs_no_key_and_openrouter_has_its_own_variable() {
        assert!(build(&llm("ollama", Some("llama3.1")), &no_env).is_ok());
        let e = build(&llm("openrouter", Some("openai/gpt-4o")), &no_env)
            .err()
            .unwrap();
        assert!(e.to_string().contains("OPENROUTER_API_KEY"), "{e}");
    }

    #[test]
    fn provider_is_inferred_from_the_model() {
        let c = LlmConfig {
            model: Some("claude-haiku-4-5".into()),
            ..Default::default()
        };
        let p = build(&c, &|_| Some("k".into())).unwrap();
        assert_eq!(p.name(), "anthropic");
        let e = build(&LlmConfig::default(), &no_env).err().unwrap();
        assert!(e.to_string().contains("set llm.provider"), "{e}");
    }

    #[test]
    fn missing_model_and_bad_base_url_are_config_errors() {
        let e = build(&llm("openai", None), &|_| Some("k".into()))
            .err()
            .unwrap();
        assert!(e.to_string().contains("set llm.model"), "{e}");
        let mut c = llm("openai", Some("gpt-4o"));
        c.base_url = Some("not a url".into());
        let e = build(&c, &|_| Some("k".into())).err().unwrap();
        assert!(e.to_string().contains("base_url"), "{e}");
    }

    #[test]
    fn replay_needs_a_cassette_and_sampling_needs_mcp() {
        let e = build(&llm("replay", None), &no_env).err().unwrap();
        assert!(e.to_string().contains("--cassette"), "{e}");
        let e = build(&llm("mcp-sampling", None), &no_env).err().unwrap();
        assert!(matches!(e, LlmError::Unavailable { .. }));
        assert!(e.to_string().contains("agentfile mcp"), "{e}");
    }

    #[test]
    fn profiles_pick_another_model_or_provider() {
        let mut config = Config {
            llm: LlmConfig {
                api_key_env: Some("ANTHROPIC_API_KEY".into()),
                base_url: Some("https://anthropic-proxy.example".into()),
                ..llm("anthropic", Some("claude-sonnet-4-5"))
            },
            ..Default::default()
        };
        config.profiles.insert(
            "local".into(),
            LlmConfig {
                provider: Some("ollama".into()),
                model: Some("qwen3".into()),
                ..Default::default()
            },
        );
        let env = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "k".to_owned());
        let o = ProviderOptions::default();
        assert_eq!(
            provider_for(&config, None, &env, &o).unwrap().name(),
            "anthropic"
        );
        // Ollama needs no key: had the Anthropic key variable been inherited, the
        // key would go to the local server (and to the proxy's URL).
        let local = provider_for(&config, Some("local"), &|_| None, &o).unwrap();
        assert_eq!((local.name(), local.model()), ("ollama", "qwen3"));
        let e = provider_for(&config, Some("fast"), &env, &o).err().unwrap();
        assert!(
            e.to_string().contains("`fast`") && e.to_string().contains("local"),
            "{e}"
        );
    }

    #[test]
    fn sampling_seam_accepts_a_provider() {
        let inner = build(&llm("ollama", Some("llama3.1")), &no_env).unwrap();
        let options = ProviderOptions {
            sampling: Some(inner),
            ..Default::default()
        };
        let p = provider_from_config_with(
            &llm("mcp-sampling", None),
            &BTreeMap::new(),
            &no_env,
            &options,
        )
        .unwrap();
        assert_eq!(p.model(), "llama3.1");
    }
}
