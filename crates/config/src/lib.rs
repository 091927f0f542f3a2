//! Runtime configuration: `agent.json` / `agent.toml`, overridden by the environment,
//! small text helpers for people ([`text`]), and which variable names are
//! shaped like a credential's ([`secret_names`]). It sits just above the wire
//! types, so every other crate can read the config; it runs nothing.
//!
//! What this crate is for: turning the files and variables a user wrote into one
//! [`Config`] value, with errors that name the file, the line and the key. What it is
//! deliberately not: a secrets store. A key is only ever the *name* of an environment
//! variable (`api_key_env`); the value is read from that variable at the moment a
//! provider is built, and never copied into this struct, a log line or an event.
//!
//! Lookup order (CONTRACT §4): `--config FILE`, else `./agent.json`, else
//! `./agent.toml`, else defaults. JSON and TOML share the same keys. Environment
//! variables (`AGENTFILE_PROVIDER`, `AGENTFILE_MODEL`, `AGENTFILE_BASE_URL`,
//! `AGENTFILE_MAX_TOKENS`, `AGENTFILE_API_KEY_ENV`, and `AGENTFILE_BASH_MAX_*` for
//! the keys of `[bash]`) win over the file.
//!
//! Unknown sections are kept out of the way rather than rejected, because real
//! configs written for the predecessor carry sections we do not use (`small_llm`,
//! `storage`); unknown keys *inside* the sections we own are rejected, since a typo
//! there (`max_token`) silently changes behaviour.

pub mod secret_names;
pub mod text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Every provider name the runtime understands (CONTRACT §4).
pub const PROVIDERS: &[&str] = &[
    "anthropic",
    "openai",
    "openrouter",
    "ollama",
    "gemini",
    "replay",
    "mcp-sampling",
    "fake",
];

/// A configuration problem, always tied to the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read config: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: invalid config: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: unsupported config extension; use .json or .toml")]
    Extension { path: PathBuf },
    #[error("environment variable {var}={value:?} is not valid: {reason}")]
    Env {
        var: &'static str,
        value: String,
        reason: String,
    },
    #[error(
        "unknown profile `{name}`{}; define it under `profiles.{name}` in the config",
        hint_list(known)
    )]
    UnknownProfile { name: String, known: Vec<String> },
}

fn hint_list(known: &[String]) -> String {
    if known.is_empty() {
        " (the config defines no profiles)".to_owned()
    } else {
        format!(" (defined: {})", known.join(", "))
    }
}

/// The whole configuration. Every section has a sensible default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Config {
    pub agent: AgentSection,
    pub llm: LlmConfig,
    /// Named LLM settings chosen by an agent's `REQUIRES "profile"`; each key
    /// overrides the matching key of `llm`.
    pub profiles: BTreeMap<String, LlmConfig>,
    pub web: WebSection,
    pub telemetry: TelemetrySection,
    pub session: SessionSection,
    /// Runs across machines (`serve`/`mcp`/`worker`; CONTRACT §13): flags and
    /// `AGENTFILE_NATS_URL` win over it.
    pub cluster: ClusterSection,
    pub mcp: McpSection,
    pub limits: LimitsSection,
    pub skills: SkillsSection,
    /// Resource limits of the bash tool's commands.
    pub bash: BashSection,
    /// Per-model prices in USD per million tokens, overriding the built-in table.
    pub pricing: BTreeMap<String, Price>,
    /// Tool ids a WORKFLOW.md may name, bound to an MCP tool, a command or
    /// another workflow (CONTRACT §9).
    pub tools: BTreeMap<String, ToolBinding>,
    /// `action:` references, each bound to a tool id.
    pub actions: BTreeMap<String, ActionBinding>,
    /// Workflows from OCI packages (CONTRACT §20): which signatures a
    /// package needs before it runs.
    pub packages: PackagesSection,
    /// Sections we do not own (written for other tools); kept so they are not errors.
    #[serde(flatten, skip_serializing)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// `[tools.<id>]`: what a workflow's `tool: <id>` runs. Exactly one of
/// `mcp`, `command`, `workflow` and `a2a`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ToolBinding {
    /// `server:tool`, a tool of a configured MCP server.
    pub mcp: Option<String>,
    /// A program and its arguments: JSON inputs on stdin, JSON output on
    /// stdout, run under the bash policy.
    pub command: Option<Vec<String>>,
    /// The id of a workflow under `.workflows/`.
    pub workflow: Option<String>,
    /// A remote A2A agent (CONTRACT §21): its base URL (the card at
    /// `/.well-known/agent-card.json` below it) or its card's URL (ending in
    /// `.json`). Offered to models, and callable from steps, as `<id>`.
    pub a2a: Option<String>,
    /// The A2A agent's skill a call names (`metadata.skill`); default: the
    /// card's only skill, else none (the agent chooses).
    pub skill: Option<String>,
    /// The *name* of the environment variable holding the A2A agent's bearer
    /// token (never the token itself).
    pub token_env: Option<String>,
    /// Longest one A2A call may take, remote task included (`"10m"`,
    /// `"90s"`); default 10 minutes. Past it the task is cancelled.
    #[serde(
        deserialize_with = "duration_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<String>,
    pub description: Option<String>,
}

/// `[actions."<ref>"]`: the tool an `action:` reference runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ActionBinding {
    pub tool: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSection {
    pub id: Option<String>,
    pub workspace: Option<PathBuf>,
}

/// How to reach one model. All fields optional so a profile can override a subset.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The *name* of the environment variable that holds the API key.
    pub api_key_env: Option<String>,
    pub max_tokens: Option<u32>,
    pub base_url: Option<String>,
    /// Sampling temperature, when the user wants one.
    pub temperature: Option<f32>,
    /// The cassette `provider = "replay"` answers from.
    pub cassette: Option<PathBuf>,
    /// The script `provider = "fake"` answers from (the fake model's JSON
    /// script; relative to the config's folder).
    pub script: Option<PathBuf>,
    /// Longest one model call may take, request to last byte (`"10m"`,
    /// `"90s"`); default 10 minutes.
    pub call_timeout: Option<String>,
}

impl LlmConfig {
    /// `self` with every field that `over` sets replaced.
    ///
    /// A profile that names a *different* provider does not inherit the base's
    /// `api_key_env` or `base_url`: sending one service's key to another, or
    /// OpenAI requests to Anthropic's URL, is never what was meant.
    pub fn merged(&self, over: &LlmConfig) -> LlmConfig {
        let switches = match (&over.provider, self.provider_name()) {
            (Some(new), Some(old)) => *new != old,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let inherit = |o: &Option<String>, base: &Option<String>| {
            o.clone()
                .or_else(|| if switches { None } else { base.clone() })
        };
        LlmConfig {
            provider: over.provider.clone().or_else(|| self.provider.clone()),
            model: over.model.clone().or_else(|| self.model.clone()),
            api_key_env: inherit(&over.api_key_env, &self.api_key_env),
            max_tokens: over.max_tokens.or(self.max_tokens),
            base_url: inherit(&over.base_url, &self.base_url),
            temperature: over.temperature.or(self.temperature),
            cassette: over.cassette.clone().or_else(|| self.cassette.clone()),
            script: over.script.clone().or_else(|| self.script.clone()),
            call_timeout: over
                .call_timeout
                .clone()
                .or_else(|| self.call_timeout.clone()),
        }
    }

    /// The provider to use: the configured one, else one inferred from the model
    /// name (configs written for the predecessor often give only a model).
    pub fn provider_name(&self) -> Option<String> {
        if let Some(p) = &self.provider {
            return Some(p.clone());
        }
        let model = self.model.as_deref()?;
        let inferred = if model.starts_with("claude") {
            "anthropic"
        } else if model.starts_with("gemini") {
            "gemini"
        } else if model.starts_with("gpt")
            || model.starts_with("o1")
            || model.starts_with("o3")
            || model.starts_with("o4")
        {
            "openai"
        } else {
            return None;
        };
        Some(inferred.to_owned())
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// USD per million input tokens.
    pub input: f64,
    /// USD per million output tokens.
    pub output: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct WebSection {
    pub gateway_url: Option<String>,
    pub gateway_token_env: Option<String>,
}

/// Where a run's telemetry goes (see the `agentfile-telemetry` crate).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySection {
    pub enabled: bool,
    /// `otlp`: the collector's base URL (`/v1/traces` and `/v1/logs` are
    /// appended); unset, the `OTEL_EXPORTER_OTLP_*` variables decide. `http`:
    /// the URL the messages are POSTed to (required).
    pub endpoint: Option<String>,
    /// `otlp` (the default when enabled), `http`, `file` or `noop`.
    pub protocol: Option<TelemetryProtocol>,
    /// Send message content (model answers, tool arguments and results, goal
    /// outcomes). Unset: on for `http` and `file`, whose messages are the
    /// transcript; off for `otlp`, as the GenAI conventions ask.
    pub capture_content: Option<bool>,
    /// Extra request headers for `otlp` and `http`: header name to the *name*
    /// of the environment variable holding its value (tokens never sit in files).
    pub headers_env: BTreeMap<String, String>,
    /// `file`: the folder of the per-session files (default
    /// `<workspace>/.agentfile/telemetry`).
    pub path: Option<PathBuf>,
}

/// The telemetry exporters (CONTRACT §4).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TelemetryProtocol {
    /// OpenTelemetry traces and logs over OTLP/HTTP (protobuf).
    #[default]
    Otlp,
    /// The seed's JSON messages, POSTed in batches.
    Http,
    /// The seed's JSON messages as JSON lines, one file per session.
    File,
    /// Nothing.
    Noop,
}

impl TelemetryProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            TelemetryProtocol::Otlp => "otlp",
            TelemetryProtocol::Http => "http",
            TelemetryProtocol::File => "file",
            TelemetryProtocol::Noop => "noop",
        }
    }
}

/// `[cluster]`: the NATS JetStream work queue of `serve --nats` and `worker`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSection {
    /// The NATS server URL (`--nats`, `AGENTFILE_NATS_URL`); unset: runs
    /// execute where they are submitted.
    pub nats: Option<String>,
    /// The JetStream stream runs are queued in (`--nats-stream`).
    pub stream: Option<String>,
    /// How long a worker may stay silent before its run goes to another
    /// (`--ack-wait`), e.g. `"30s"`.
    pub ack_wait: Option<String>,
    /// How long a worker keeps a run waiting at an approval before releasing
    /// it as `waiting_approval` (`--approval-hold`), e.g. `"5m"`.
    pub approval_hold: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SessionSection {
    /// `sqlite` (default), `file` or `postgres`.
    pub store: Option<String>,
    pub path: Option<PathBuf>,
    /// With `store = "postgres"`: the environment variable holding the
    /// connection URL (`AGENTFILE_DATABASE_URL` by default). The URL itself is
    /// never written in a config file, since it holds a password.
    pub url_env: Option<String>,
    /// What a commit waits for: `normal` (the default; survives any process
    /// crash) or `full` (also survives power loss, one disk flush per commit).
    /// SQLite only: the file store fsyncs every event and PostgreSQL commits
    /// durably whatever this says.
    pub durability: Option<Durability>,
}

/// What a session store's commit waits for (`session.durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// SQLite's `synchronous=NORMAL`: survives any process crash; power loss
    /// may lose the last commits. The default.
    #[default]
    Normal,
    /// SQLite's `synchronous=FULL`: every commit is flushed to the disk before
    /// it returns.
    Full,
}

impl Durability {
    /// The setting's value as written in the config.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Normal => "normal",
            Durability::Full => "full",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct McpSection {
    pub servers: BTreeMap<String, McpServer>,
    /// Browser origins `agentfile mcp --http` accepts besides its own
    /// (`http://localhost:PORT` and the like), each `scheme://host[:port]`
    /// such as `https://app.example.com`. A request carrying any other
    /// `Origin` is refused (403) before it runs.
    #[serde(deserialize_with = "origins", skip_serializing_if = "Vec::is_empty")]
    pub allowed_origins: Vec<String>,
    /// `agentfile mcp --http`: the most a client may take to send a request's
    /// headers, and again its body (a duration such as `10s`; default
    /// [`McpSection::READ_TIMEOUT`]). Past it the connection is closed (a
    /// body too slow gets 408 first). A kept-alive connection that sends no
    /// new request for that long is closed too.
    #[serde(
        deserialize_with = "duration_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub read_timeout: Option<String>,
    /// How long a finished MCP task's result stays readable (`tasks/get`,
    /// `tasks/result`) after it ended, a duration such as `1h` or `7d`. A
    /// client may ask for less (its `ttl`), never more. Unset: no expiry
    /// (unless the client asks for one). The session itself stays in the
    /// store either way.
    #[serde(
        deserialize_with = "duration_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub task_ttl: Option<String>,
    /// How often MCP task clients are asked to poll `tasks/get` (`pollInterval`),
    /// a duration such as `500ms`; default [`McpSection::TASK_POLL_INTERVAL`].
    #[serde(
        deserialize_with = "duration_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub task_poll_interval: Option<String>,
    /// `agentfile mcp --http`: how many `subscriptions/listen` streams one
    /// principal (a token; without tokens, every loopback client together)
    /// may hold open at once; past it a new one gets 429. A whole number
    /// from 1 to [`McpSection::MAX_STREAMS_CEILING`]; default
    /// [`McpSection::MAX_STREAMS`].
    #[serde(
        deserialize_with = "max_streams",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_streams: Option<usize>,
    /// `agentfile mcp --http` with tokens: the OAuth authorization servers
    /// (issuer URLs) that issue them, listed in the protected-resource
    /// metadata (RFC 9728, `/.well-known/oauth-protected-resource`) so
    /// clients learn where to get a token. Each an `http`/`https` URL.
    #[serde(deserialize_with = "web_urls", skip_serializing_if = "Vec::is_empty")]
    pub authorization_servers: Vec<String>,
    /// `agentfile mcp --http`: the endpoint's URL as clients reach it (behind
    /// a proxy, e.g. `https://mcp.example.com/mcp`), the `resource` of its
    /// protected-resource metadata; default `http://<Host>/mcp` from each
    /// request.
    #[serde(
        deserialize_with = "web_url_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub resource_url: Option<String>,
    /// The environment variable holding the key that seals multi-round-trip
    /// `requestState`s (at least 256 bits, e.g. `openssl rand -hex 32`), so
    /// that every replica given the same key (and this one after a restart)
    /// accepts a state another sealed. Unset: a key made when the process
    /// starts. Only the variable's name is kept here, never the key.
    #[serde(
        deserialize_with = "env_name_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub state_key_env: Option<String>,
    /// Rotation: the variables holding keys used before `state_key_env`'s
    /// (one name or a list). A state they sealed is still accepted; new ones
    /// are sealed with the current key. Remove them once the states sealed
    /// before the rotation are no longer answered.
    #[serde(deserialize_with = "env_names", skip_serializing_if = "Vec::is_empty")]
    pub state_key_previous_env: Vec<String>,
}

/// The name of an environment variable (`[mcp] state_key_env`): not empty,
/// no `=` or NUL.
fn env_name<E: serde::de::Error>(raw: String, what: &str) -> Result<String, E> {
    let name = raw.trim();
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(E::custom(format!(
            "`[mcp] {what}`: {raw:?} is not an environment variable's name; write e.g. \"AGENTFILE_MCP_STATE_KEY\""
        )));
    }
    Ok(name.to_owned())
}

/// `[mcp] state_key_env`: a variable's name.
fn env_name_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    env_name(String::deserialize(d)?, "state_key_env").map(Some)
}

/// `[mcp] state_key_previous_env`: one variable's name, or a list of them.
fn env_names<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    let names = match OneOrMany::deserialize(d)? {
        OneOrMany::One(n) => vec![n],
        OneOrMany::Many(ns) => ns,
    };
    names
        .into_iter()
        .map(|n| env_name(n, "state_key_previous_env"))
        .collect()
}

/// An `http`/`https` URL setting (`what` names it in the error).
fn web_url<E: serde::de::Error>(raw: String, what: &str) -> Result<String, E> {
    match url::Url::parse(&raw) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(raw),
        _ => Err(E::custom(format!(
            "`[mcp] {what}`: {raw:?} is not an http(s) URL; write e.g. \"https://auth.example.com\""
        ))),
    }
}

/// `[mcp] authorization_servers`: each an `http`/`https` URL.
fn web_urls<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Vec::<String>::deserialize(d)?
        .into_iter()
        .map(|u| web_url(u, "authorization_servers"))
        .collect()
}

/// `[mcp] resource_url`: an `http`/`https` URL.
fn web_url_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    web_url(String::deserialize(d)?, "resource_url").map(Some)
}

impl McpSection {
    /// `max_streams` when unset: a client needs one stream (it carries every
    /// list change it asked for); 64 leaves room for many windows of one
    /// editor while thousands of idle ones cannot pile up.
    pub const MAX_STREAMS: usize = 64;
    /// The most `max_streams` may be: every open stream holds a connection
    /// and a task of the server.
    pub const MAX_STREAMS_CEILING: usize = 4096;

    /// `max_streams`, or its default.
    pub fn max_streams(&self) -> usize {
        self.max_streams.unwrap_or(Self::MAX_STREAMS)
    }

    /// `read_timeout` when unset.
    pub const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
    /// `task_poll_interval` when unset.
    pub const TASK_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

    /// `read_timeout`, or its default.
    pub fn read_timeout(&self) -> std::time::Duration {
        self.read_timeout
            .as_deref()
            .and_then(|t| parse_duration(t).ok())
            .unwrap_or(Self::READ_TIMEOUT)
    }

    /// `task_ttl` (`None`: no expiry).
    pub fn task_ttl(&self) -> Option<std::time::Duration> {
        self.task_ttl
            .as_deref()
            .and_then(|t| parse_duration(t).ok())
    }

    /// `task_poll_interval`, or its default.
    pub fn task_poll_interval(&self) -> std::time::Duration {
        self.task_poll_interval
            .as_deref()
            .and_then(|t| parse_duration(t).ok())
            .unwrap_or(Self::TASK_POLL_INTERVAL)
    }
}

/// An optional duration setting, checked when the config is read (kept as
/// written).
fn duration_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let raw = String::deserialize(d)?;
    match parse_duration(&raw) {
        Ok(t) if t.is_zero() => Err(serde::de::Error::custom(format!(
            "`{raw}` is zero; write a positive duration like 500ms, 10s or 1h"
        ))),
        Ok(_) => Ok(Some(raw)),
        Err(e) => Err(serde::de::Error::custom(e)),
    }
}

/// `[mcp] max_streams`: a whole number from 1 to the ceiling.
fn max_streams<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let raw = i64::deserialize(d)?;
    match usize::try_from(raw) {
        Ok(n) if (1..=McpSection::MAX_STREAMS_CEILING).contains(&n) => Ok(Some(n)),
        _ => Err(serde::de::Error::custom(format!(
            "`[mcp] max_streams`: {raw} is out of range; write a whole number from 1 to {} \
             (default {})",
            McpSection::MAX_STREAMS_CEILING,
            McpSection::MAX_STREAMS
        ))),
    }
}

/// `[mcp] allowed_origins`: each entry a web origin, kept in its canonical
/// form (lower case, no default port), so it compares equal to what a browser
/// sends.
fn origins<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let raw = Vec::<String>::deserialize(d)?;
    raw.iter()
        .map(|o| parse_origin(o).map_err(serde::de::Error::custom))
        .collect()
}

/// An `[mcp] allowed_origins` entry that is not a web origin: the entry as
/// written, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`[mcp] allowed_origins`: {text:?} is not an origin ({why}); write scheme://host[:port], e.g. \"https://app.example.com\" or \"http://localhost:5173\""
)]
pub struct OriginError {
    pub text: String,
    pub why: String,
}

/// A web origin (`scheme://host[:port]`, http or https, nothing after the
/// authority) in its canonical form, as browsers send it in `Origin`.
pub fn parse_origin(text: &str) -> Result<String, OriginError> {
    let bad = |why: &str| OriginError {
        text: text.to_owned(),
        why: why.to_owned(),
    };
    let url = url::Url::parse(text.trim()).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if url.host().is_none() {
        return Err(bad("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("an origin has no user name or password"));
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(bad("an origin has no path, query or fragment"));
    }
    Ok(url.origin().ascii_serialization())
}

/// One MCP server: a command started with stdio (`command`, `args`, `env`), or
/// a streamable-HTTP endpoint (`url`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct McpServer {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// A streamable-HTTP MCP endpoint, used instead of `command` when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSection {
    pub max_turns: Option<u32>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    /// A duration such as `90s`, `10m`, `1h`.
    pub timeout: Option<String>,
    /// Most items one map step may run (default 100,000); a map over more
    /// is refused before its first item, and before the run's first step
    /// when its list comes from the inputs.
    pub max_map_items: Option<u64>,
}

/// Resource limits every command of the bash tool runs under (`[bash]`), set
/// with `setrlimit` in the child before bash starts, so they bind the command
/// and everything it starts. They cannot be raised from inside. `0` means no
/// limit of that kind. (The policy file has a `[bash]` section too; that one
/// says *which* commands may run, this one *how much* they may take.)
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BashSection {
    /// Largest file a command may write, in bytes (`RLIMIT_FSIZE`): an allowed
    /// `yes > out.txt` stops there instead of filling the disk.
    pub max_file_bytes: u64,
    /// CPU seconds each process may use (`RLIMIT_CPU`); the wall-clock timeout
    /// bounds the command itself, this bounds anything that escapes its group.
    pub max_cpu_seconds: u64,
    /// Processes the user may have at once while the command runs
    /// (`RLIMIT_NPROC`, which the kernel counts per user, not per command):
    /// stops a fork bomb.
    pub max_processes: u64,
    /// Address space of each process, in bytes (`RLIMIT_AS`). Off by default:
    /// runtimes such as the JVM, Go and Node reserve far more address space
    /// than they use and fail to start under a tight limit.
    pub max_memory_bytes: u64,
}

impl Default for BashSection {
    fn default() -> Self {
        BashSection {
            max_file_bytes: 1 << 30,
            max_cpu_seconds: 600,
            max_processes: 4096,
            max_memory_bytes: 0,
        }
    }
}

/// `[packages]`: what a workflow from an OCI package (`oci://REF`) must show
/// before it runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PackagesSection {
    /// Refuse a package that no key of `trusted_keys` signed.
    pub require_signature: bool,
    /// Public keys (PEM, as `cosign.pub`) whose signatures are trusted;
    /// relative to the config's folder.
    pub trusted_keys: Vec<PathBuf>,
    /// Speak plain HTTP to a registry on this machine (as `--plain-http`);
    /// a remote registry is always reached over HTTPS.
    pub plain_http: bool,
    /// Where pulled packages are kept (default: `AGENTFILE_CACHE_DIR`,
    /// else the user's cache folder); relative to the config's folder.
    pub cache: Option<PathBuf>,
    /// Packages (`HOST/REPO@sha256:…`) the daemon registers and `mcp`
    /// offers as tools, beside the workspace's workflow files: an upgrade
    /// is a new digest here.
    pub serve: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SkillsSection {
    /// Folders searched for `AGENT x FROM skill-name`.
    pub paths: Vec<PathBuf>,
}

/// A loaded configuration and where it came from (`None`: built-in defaults).
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub config: Config,
    pub source: Option<PathBuf>,
}

impl Config {
    /// Parse a config file, JSON or TOML by extension.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let mut config = Self::from_str_ext(&text, ext).map_err(|e| match e {
            ParseFailure::Message(message) => ConfigError::Parse {
                path: path.to_owned(),
                message,
            },
            ParseFailure::Extension => ConfigError::Extension {
                path: path.to_owned(),
            },
        })?;
        if let Some(dir) = path.parent() {
            config.rebase(dir);
        }
        Ok(config)
    }

    /// Make relative paths in the file relative to the file's folder, so a config
    /// means the same thing whichever folder the command runs from.
    fn rebase(&mut self, dir: &Path) {
        if dir.as_os_str().is_empty() {
            return;
        }
        let fix = |p: &mut PathBuf| {
            let s = p.to_string_lossy();
            if p.is_relative() && !s.starts_with('~') {
                *p = dir.join(&*p);
            }
        };
        if let Some(w) = self.agent.workspace.as_mut() {
            fix(w);
        }
        if let Some(c) = self.llm.cassette.as_mut() {
            fix(c);
        }
        if let Some(c) = self.llm.script.as_mut() {
            fix(c);
        }
        for p in self.profiles.values_mut() {
            if let Some(c) = p.cassette.as_mut() {
                fix(c);
            }
            if let Some(c) = p.script.as_mut() {
                fix(c);
            }
        }
        // `session.path` is left as written: a relative one is taken under
        // the workspace when the store opens (`agentfile_session::location`),
        // as `AGENTFILE_SESSION_PATH` is; joining it to this folder first
        // put it under the workspace twice over.
        if let Some(p) = self.telemetry.path.as_mut() {
            fix(p);
        }
        for p in &mut self.skills.paths {
            fix(p);
        }
        for p in &mut self.packages.trusted_keys {
            fix(p);
        }
        if let Some(p) = self.packages.cache.as_mut() {
            fix(p);
        }
    }

    fn from_str_ext(text: &str, ext: &str) -> Result<Config, ParseFailure> {
        match ext {
            "json" => serde_json::from_str(text).map_err(|e| ParseFailure::Message(e.to_string())),
            "toml" => toml::from_str(text).map_err(|e| {
                // toml's message already carries line, column and a caret excerpt.
                ParseFailure::Message(e.to_string().trim_end().to_owned())
            }),
            _ => Err(ParseFailure::Extension),
        }
    }

    /// Find and load the configuration the way the CLI does: an explicit file,
    /// else `agent.json` / `agent.toml` in `dir`, else defaults; then apply the
    /// environment.
    pub fn discover(explicit: Option<&Path>, dir: &Path) -> Result<Loaded, ConfigError> {
        let source = match explicit {
            Some(p) => Some(p.to_owned()),
            None => ["agent.json", "agent.toml"]
                .iter()
                .map(|n| dir.join(n))
                .find(|p| p.is_file()),
        };
        let mut config = match &source {
            Some(p) => Config::from_file(p)?,
            None => Config::default(),
        };
        config.apply_env(|k| std::env::var(k).ok())?;
        Ok(Loaded { config, source })
    }

    /// Apply `AGENTFILE_*` overrides, reading variables through `get` so tests can
    /// supply their own environment.
    pub fn apply_env(
        &mut self,
        get: impl Fn(&'static str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(v) = get("AGENTFILE_PROVIDER") {
            if self.llm.provider.as_deref() != Some(v.as_str()) {
                // As `--provider` does: the file's key variable belonged to the
                // provider it named, and must not be sent to another service.
                self.llm.api_key_env = None;
            }
            self.llm.provider = Some(v);
        }
        if let Some(v) = get("AGENTFILE_MODEL") {
            self.llm.model = Some(v);
        }
        if let Some(v) = get("AGENTFILE_BASE_URL") {
            self.llm.base_url = Some(v);
        }
        if let Some(v) = get("AGENTFILE_SCRIPT") {
            self.llm.script = Some(PathBuf::from(v));
        }
        if let Some(v) = get("AGENTFILE_API_KEY_ENV") {
            self.llm.api_key_env = Some(v);
        }
        if let Some(v) = get("AGENTFILE_MAX_TOKENS") {
            let n = v.parse::<u32>().map_err(|e| ConfigError::Env {
                var: "AGENTFILE_MAX_TOKENS",
                value: v.clone(),
                reason: e.to_string(),
            })?;
            self.llm.max_tokens = Some(n);
        }
        let bash = [
            (
                "AGENTFILE_BASH_MAX_FILE_BYTES",
                &mut self.bash.max_file_bytes,
            ),
            (
                "AGENTFILE_BASH_MAX_CPU_SECONDS",
                &mut self.bash.max_cpu_seconds,
            ),
            ("AGENTFILE_BASH_MAX_PROCESSES", &mut self.bash.max_processes),
            (
                "AGENTFILE_BASH_MAX_MEMORY_BYTES",
                &mut self.bash.max_memory_bytes,
            ),
        ];
        for (var, field) in bash {
            if let Some(v) = get(var) {
                *field = v.trim().parse::<u64>().map_err(|e| ConfigError::Env {
                    var,
                    value: v.clone(),
                    reason: format!("{e} (a whole number; 0 means no limit)"),
                })?;
            }
        }
        // The session store is often moved per deployment (a container's data
        // volume) rather than per project, so it can be set without a config file.
        if let Some(v) = get("AGENTFILE_SESSION_STORE") {
            if !matches!(v.as_str(), "sqlite" | "file" | "postgres") {
                return Err(ConfigError::Env {
                    var: "AGENTFILE_SESSION_STORE",
                    value: v,
                    reason: "use `sqlite`, `file` or `postgres`".into(),
                });
            }
            self.session.store = Some(v);
        }
        if let Some(v) = get("AGENTFILE_SESSION_PATH") {
            if v.is_empty() {
                return Err(ConfigError::Env {
                    var: "AGENTFILE_SESSION_PATH",
                    value: v,
                    reason: "give the session database's path (a folder for the `file` store), \
                             or unset it for the default under the workspace"
                        .into(),
                });
            }
            // Like `session.path`: a relative value is taken relative to the workspace.
            self.session.path = Some(PathBuf::from(v));
        }
        if let Some(v) = get("AGENTFILE_SESSION_DURABILITY") {
            self.session.durability = Some(match v.as_str() {
                "normal" => Durability::Normal,
                "full" => Durability::Full,
                _ => {
                    return Err(ConfigError::Env {
                        var: "AGENTFILE_SESSION_DURABILITY",
                        value: v,
                        reason: "use `normal` (survives a process crash) or `full` \
                                 (also survives power loss, slower)"
                            .into(),
                    });
                }
            });
        }
        Ok(())
    }

    /// The LLM settings for an agent: `llm`, overridden by the named profile.
    pub fn llm_for(&self, profile: Option<&str>) -> Result<LlmConfig, ConfigError> {
        match profile {
            None => Ok(self.llm.clone()),
            Some(name) => match self.profiles.get(name) {
                Some(p) => Ok(self.llm.merged(p)),
                None => Err(ConfigError::UnknownProfile {
                    name: name.to_owned(),
                    known: self.profiles.keys().cloned().collect(),
                }),
            },
        }
    }
}

enum ParseFailure {
    Message(String),
    Extension,
}

/// A duration as users write them in configs and flags: `90s`, `10m`, `1h30m`,
/// `250ms`, or a bare number of seconds. Never panics: a value too large to be
/// a duration is an error that says so.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, DurationError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DurationError::Empty);
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .map(std::time::Duration::from_secs)
            .map_err(|_| DurationError::TooLarge(t.to_owned()));
    }
    humantime::parse_duration(t).map_err(|source| DurationError::Invalid {
        text: t.to_owned(),
        source,
    })
}

/// A duration that [`parse_duration`] cannot read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration; write it like 90s, 10m or 1h")]
    Empty,
    #[error("`{0}` seconds is too large for a duration")]
    TooLarge(String),
    #[error("`{text}` is not a duration ({source}); write it like 90s, 10m or 1h")]
    Invalid {
        text: String,
        source: humantime::DurationError,
    },
}

/// The config file a workflow uses, if there is one: `explicit`, else
/// `agent.json` / `agent.toml` in `dir` (the current folder for the CLI, the
/// workspace for the servers), else one beside the workflow, else one in its
/// project. Environment overrides are applied.
pub fn find_for_workflow(
    explicit: Option<&Path>,
    workflow: &Path,
    dir: &Path,
) -> Result<Option<Config>, ConfigError> {
    if let Some(p) = explicit {
        return Ok(Some(Config::discover(Some(p), dir)?.config));
    }
    let here = Config::discover(None, dir)?;
    if here.source.is_some() {
        return Ok(Some(here.config));
    }
    let beside = if workflow.is_dir() {
        workflow.to_path_buf()
    } else {
        workflow.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    if beside.as_os_str().is_empty() {
        return Ok(None);
    }
    let found = Config::discover(None, &beside)?;
    if found.source.is_none()
        && let Some(project) = project_of(&beside)
    {
        let found = Config::discover(None, &project)?;
        return Ok(found.source.map(|_| found.config));
    }
    Ok(found.source.map(|_| found.config))
}

/// The project a workflow folder belongs to when it lies at
/// `<project>/.workflows/<id>/` (where its config and policy live).
pub fn project_of(workflow_dir: &Path) -> Option<PathBuf> {
    let parent = workflow_dir.parent()?;
    if parent.file_name()? == ".workflows" {
        parent.parent().map(Path::to_path_buf)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_toml_share_keys() {
        let json = r#"{"llm":{"provider":"openai","model":"gpt-4o","max_tokens":100},
                       "profiles":{"fast":{"model":"gpt-4o-mini"}}}"#;
        let toml = "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nmax_tokens = 100\n\
                    [profiles.fast]\nmodel = \"gpt-4o-mini\"\n";
        let a = Config::from_str_ext(json, "json").ok().unwrap();
        let b = Config::from_str_ext(toml, "toml").ok().unwrap();
        assert_eq!(a, b);
        let fast = a.llm_for(Some("fast")).unwrap();
        assert_eq!(fast.model.as_deref(), Some("gpt-4o-mini"));
        assert_eq!(fast.provider.as_deref(), Some("openai"));
        assert_eq!(fast.max_tokens, Some(100));
    }

    #[test]
    fn typo_inside_owned_section_is_rejected() {
        let err = Config::from_str_ext("[llm]\nmax_token = 5\n", "toml")
            .err()
            .unwrap();
        let ParseFailure::Message(m) = err else {
            panic!("expected a message")
        };
        assert!(m.contains("max_token"), "{m}");
    }

    #[test]
    fn mcp_durations_are_read_and_checked() {
        let c = Config::from_str_ext(
            "[mcp]\nread_timeout = \"2s\"\ntask_ttl = \"1h\"\ntask_poll_interval = \"250ms\"\n",
            "toml",
        )
        .ok()
        .unwrap();
        assert_eq!(c.mcp.read_timeout(), std::time::Duration::from_secs(2));
        assert_eq!(c.mcp.task_ttl(), Some(std::time::Duration::from_secs(3600)));
        assert_eq!(
            c.mcp.task_poll_interval(),
            std::time::Duration::from_millis(250)
        );
        let d = Config::default();
        assert_eq!(d.mcp.read_timeout(), McpSection::READ_TIMEOUT);
        assert_eq!(d.mcp.task_ttl(), None);
        assert_eq!(d.mcp.task_poll_interval(), McpSection::TASK_POLL_INTERVAL);
        for bad in ["soon", "0s", ""] {
            let text = format!("[mcp]\ntask_ttl = {bad:?}\n");
            assert!(Config::from_str_ext(&text, "toml").is_err(), "{bad}");
        }
    }

    #[test]
    fn mcp_authorization_servers_and_resource_url_are_web_urls() {
        let c = Config::from_str_ext(
            "[mcp]\nauthorization_servers = [\"https://auth.example.com\"]\nresource_url = \"https://mcp.example.com/mcp\"\n",
            "toml",
        )
        .ok()
        .unwrap();
        assert_eq!(c.mcp.authorization_servers, ["https://auth.example.com"]);
        assert_eq!(
            c.mcp.resource_url.as_deref(),
            Some("https://mcp.example.com/mcp")
        );
        for bad in [
            "authorization_servers = [\"auth.example.com\"]",
            "authorization_servers = [\"ftp://x\"]",
            "resource_url = \"/mcp\"",
        ] {
            let text = format!("[mcp]\n{bad}\n");
            assert!(Config::from_str_ext(&text, "toml").is_err(), "{bad}");
        }
    }

    #[test]
    fn mcp_state_key_settings_name_variables() {
        let c = Config::from_str_ext(
            "[mcp]\nstate_key_env = \"KEY_NOW\"\nstate_key_previous_env = \"KEY_THEN\"\n",
            "toml",
        )
        .ok()
        .unwrap();
        assert_eq!(c.mcp.state_key_env.as_deref(), Some("KEY_NOW"));
        assert_eq!(c.mcp.state_key_previous_env, ["KEY_THEN"]);
        let c = Config::from_str_ext(r#"{"mcp": {"state_key_previous_env": ["A", "B"]}}"#, "json")
            .ok()
            .unwrap();
        assert_eq!(c.mcp.state_key_env, None);
        assert_eq!(c.mcp.state_key_previous_env, ["A", "B"]);
        assert!(Config::default().mcp.state_key_previous_env.is_empty());
        for bad in [
            "state_key_env = \"\"",
            "state_key_env = \"A=B\"",
            "state_key_previous_env = [\" \"]",
            "state_key_env = 3",
        ] {
            let text = format!("[mcp]\n{bad}\n");
            assert!(Config::from_str_ext(&text, "toml").is_err(), "{bad}");
        }
    }

    #[test]
    fn mcp_max_streams_is_a_bounded_whole_number() {
        let read = |text: &str, ext: &str| {
            Config::from_str_ext(text, ext).map_err(|e| match e {
                ParseFailure::Message(m) => m,
                ParseFailure::Extension => panic!("{text}: not a config extension"),
            })
        };
        assert_eq!(
            read("[mcp]\nmax_streams = 8\n", "toml")
                .unwrap()
                .mcp
                .max_streams(),
            8
        );
        assert_eq!(
            read("[mcp]\nmax_streams = 4096\n", "toml")
                .unwrap()
                .mcp
                .max_streams(),
            McpSection::MAX_STREAMS_CEILING
        );
        assert_eq!(
            read(r#"{"mcp": {"max_streams": 2}}"#, "json")
                .unwrap()
                .mcp
                .max_streams(),
            2
        );
        assert_eq!(Config::default().mcp.max_streams(), 64);
        for bad in ["0", "-1", "4097", "\"64\"", "1.5", "99999999999999999"] {
            let text = format!("[mcp]\nmax_streams = {bad}\n");
            let err = read(&text, "toml").unwrap_err();
            assert!(err.contains("max_streams"), "{bad}: {err}");
        }
        let err = read("[mcp]\nmax_streams = 0\n", "toml").unwrap_err();
        assert!(err.contains("from 1 to 4096 (default 64)"), "{err}");
    }

    #[test]
    fn mcp_allowed_origins_are_origins_in_canonical_form() {
        let c = Config::from_str_ext(
            "[mcp]\nallowed_origins = [\"HTTPS://App.Example.com:443\", \"http://localhost:5173/\", \"http://[::1]:8080\"]\n",
            "toml",
        )
        .ok()
        .unwrap();
        assert_eq!(
            c.mcp.allowed_origins,
            [
                "https://app.example.com",
                "http://localhost:5173",
                "http://[::1]:8080"
            ]
        );
        for bad in [
            "app.example.com",
            "ftp://example.com",
            "https://example.com/app",
            "https://example.com?x=1",
            "https://user@example.com",
            "*",
        ] {
            let text = format!("[mcp]\nallowed_origins = [{bad:?}]\n");
            let Err(ParseFailure::Message(m)) = Config::from_str_ext(&text, "toml") else {
                panic!("{bad} was accepted")
            };
            assert!(
                m.contains("allowed_origins")
                    && m.contains("scheme://host[:port]")
                    && m.contains(bad),
                "{m}"
            );
            assert!(m.contains("line 2"), "{m}");
        }
    }

    #[test]
    fn foreign_sections_are_tolerated() {
        let c = Config::from_str_ext(
            "[small_llm]\nmodel = \"x\"\n[storage]\npath = \".\"\n",
            "toml",
        );
        assert!(c.is_ok());
    }

    #[test]
    fn env_overrides_file() {
        let mut c = Config::default();
        c.llm.model = Some("a".into());
        c.apply_env(|k| (k == "AGENTFILE_MODEL").then(|| "b".to_owned()))
            .unwrap();
        assert_eq!(c.llm.model.as_deref(), Some("b"));
        let err = c
            .apply_env(|k| (k == "AGENTFILE_MAX_TOKENS").then(|| "lots".to_owned()))
            .unwrap_err();
        assert!(err.to_string().contains("AGENTFILE_MAX_TOKENS"));
    }

    /// `AGENTFILE_PROVIDER` naming another provider drops the file's key
    /// variable, as `--provider` does: one service's key is never sent to
    /// another. `AGENTFILE_API_KEY_ENV` can name one for the new provider.
    #[test]
    fn env_provider_does_not_inherit_the_files_key_variable() {
        let mut c = Config::default();
        c.llm.provider = Some("anthropic".into());
        c.llm.api_key_env = Some("MY_ANTHROPIC_KEY".into());
        c.apply_env(|k| (k == "AGENTFILE_PROVIDER").then(|| "anthropic".to_owned()))
            .unwrap();
        assert_eq!(c.llm.api_key_env.as_deref(), Some("MY_ANTHROPIC_KEY"));
        c.apply_env(|k| (k == "AGENTFILE_PROVIDER").then(|| "openai".to_owned()))
            .unwrap();
        assert_eq!(c.llm.provider.as_deref(), Some("openai"));
        assert_eq!(c.llm.api_key_env, None);
        c.llm.provider = Some("anthropic".into());
        c.apply_env(|k| match k {
            "AGENTFILE_PROVIDER" => Some("openai".to_owned()),
            "AGENTFILE_API_KEY_ENV" => Some("MY_OPENAI_KEY".to_owned()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.llm.api_key_env.as_deref(), Some("MY_OPENAI_KEY"));
    }

    #[test]
    fn env_moves_the_session_store() {
        let mut c = Config::default();
        c.session.store = Some("sqlite".into());
        c.session.path = Some(PathBuf::from("/from/file.db"));
        c.apply_env(|k| match k {
            "AGENTFILE_SESSION_STORE" => Some("file".to_owned()),
            "AGENTFILE_SESSION_PATH" => Some("/data/sessions".to_owned()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.session.store.as_deref(), Some("file"));
        assert_eq!(c.session.path, Some(PathBuf::from("/data/sessions")));

        // Unset variables leave the file's settings alone.
        c.apply_env(|_| None).unwrap();
        assert_eq!(c.session.path, Some(PathBuf::from("/data/sessions")));

        let err = c
            .apply_env(|k| (k == "AGENTFILE_SESSION_STORE").then(|| "redis".to_owned()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("AGENTFILE_SESSION_STORE")
                && err.contains("`sqlite`, `file` or `postgres`"),
            "{err}"
        );
        let err = c
            .apply_env(|k| (k == "AGENTFILE_SESSION_PATH").then(String::new))
            .unwrap_err()
            .to_string();
        assert!(err.contains("AGENTFILE_SESSION_PATH"), "{err}");
    }

    #[test]
    fn unknown_profile_names_the_known_ones() {
        let mut c = Config::default();
        c.profiles.insert("fast".into(), LlmConfig::default());
        let e = c.llm_for(Some("slow")).unwrap_err().to_string();
        assert!(e.contains("`slow`") && e.contains("fast"), "{e}");
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let dir = std::env::temp_dir().join(format!("agentfile-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("agent.toml");
        std::fs::write(
            &f,
            "[agent]\nworkspace = \".\"\n[llm]\nprovider = \"replay\"\ncassette = \"demo.jsonl\"\n[session]\npath = \"/abs/s.db\"\n[telemetry]\npath = \"tele\"\n",
        )
        .unwrap();
        let c = Config::from_file(&f).unwrap();
        assert_eq!(c.telemetry.path, Some(dir.join("tele")));
        assert_eq!(c.agent.workspace, Some(dir.join(".")));
        assert_eq!(c.llm.cassette, Some(dir.join("demo.jsonl")));
        assert_eq!(c.session.path, Some(PathBuf::from("/abs/s.db")));
        // A relative session path stays relative: the store takes it under
        // the workspace, wherever the config file was found.
        std::fs::write(&f, "[session]\npath = \"state/s.db\"\n").unwrap();
        let c = Config::from_file(&f).unwrap();
        assert_eq!(c.session.path, Some(PathBuf::from("state/s.db")));
    }

    #[test]
    fn switching_provider_drops_key_and_url() {
        let base = LlmConfig {
            provider: Some("anthropic".into()),
            api_key_env: Some("ANTHROPIC_API_KEY".into()),
            base_url: Some("https://example.invalid".into()),
            ..Default::default()
        };
        let over = LlmConfig {
            provider: Some("openai".into()),
            ..Default::default()
        };
        let m = base.merged(&over);
        assert_eq!(m.api_key_env, None);
        assert_eq!(m.base_url, None);
        let same = base.merged(&LlmConfig {
            model: Some("claude-opus".into()),
            ..Default::default()
        });
        assert_eq!(same.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
    }

    #[test]
    fn telemetry_section() {
        let json = r#"{"telemetry":{"enabled":true,"protocol":"http","endpoint":"http://c/ingest",
                       "capture_content":false,"headers_env":{"Authorization":"TELEMETRY_TOKEN"}}}"#;
        let toml = "[telemetry]\nenabled = true\nprotocol = \"http\"\nendpoint = \"http://c/ingest\"\n\
                    capture_content = false\n[telemetry.headers_env]\nAuthorization = \"TELEMETRY_TOKEN\"\n";
        let a = Config::from_str_ext(json, "json").ok().unwrap();
        let b = Config::from_str_ext(toml, "toml").ok().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.telemetry.protocol, Some(TelemetryProtocol::Http));
        assert_eq!(a.telemetry.capture_content, Some(false));
        assert_eq!(a.telemetry.headers_env["Authorization"], "TELEMETRY_TOKEN");
        // The predecessor's `enabled = false` alone still reads.
        let old = Config::from_str_ext("[telemetry]\nenabled = false\n", "toml")
            .ok()
            .unwrap();
        assert_eq!(old.telemetry, TelemetrySection::default());
        let Err(ParseFailure::Message(m)) =
            Config::from_str_ext("[telemetry]\nprotocol = \"grpc\"\n", "toml")
        else {
            panic!("an unknown protocol must be refused")
        };
        assert!(m.contains("grpc") && m.contains("otlp"), "{m}");
    }

    #[test]
    fn bash_section_defaults_file_and_env() {
        let d = Config::default().bash;
        assert_eq!(d.max_file_bytes, 1 << 30);
        assert_eq!(d.max_memory_bytes, 0);
        let toml = "[bash]\nmax_file_bytes = 4096\nmax_cpu_seconds = 5\n";
        let json = r#"{"bash":{"max_file_bytes":4096,"max_cpu_seconds":5}}"#;
        let mut a = Config::from_str_ext(toml, "toml").ok().unwrap();
        let b = Config::from_str_ext(json, "json").ok().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.bash.max_file_bytes, 4096);
        assert_eq!(
            a.bash.max_processes, d.max_processes,
            "unset keys keep defaults"
        );
        assert!(Config::from_str_ext("[bash]\nmax_file_size = 1\n", "toml").is_err());
        a.apply_env(|k| (k == "AGENTFILE_BASH_MAX_PROCESSES").then(|| "64".to_owned()))
            .unwrap();
        assert_eq!(a.bash.max_processes, 64);
        let e = a
            .apply_env(|k| (k == "AGENTFILE_BASH_MAX_FILE_BYTES").then(|| "1G".to_owned()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("AGENTFILE_BASH_MAX_FILE_BYTES"), "{e}");
    }

    #[test]
    fn provider_is_inferred_from_model() {
        let l = LlmConfig {
            model: Some("claude-sonnet-4".into()),
            ..Default::default()
        };
        assert_eq!(l.provider_name().as_deref(), Some("anthropic"));
    }
}
