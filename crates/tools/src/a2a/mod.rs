//! Remote A2A agents as tools: `[tools.<id>] a2a = "URL"` (CONTRACT §21).
//!
//! One call is one A2A message: the arguments are the skill's inputs, sent
//! as a data part with `metadata.skill`; the reply's artifacts (a data part
//! as its JSON, text parts as text) are the result. A task not finished at
//! once is followed — through `SendStreamingMessage` when the card says the
//! agent streams, else by polling `GetTask` — within the tool's `timeout`;
//! past it (or when the run is cancelled, or the step's own timeout drops
//! the call) `CancelTask` is sent. A failed or rejected task is a tool error
//! naming the remote's message; one that wants input or authentication is a
//! tool error naming the task. A 0.3 agent (its card says `protocolVersion`
//! 0.3) is spoken to with `message/send` and `tasks/get` instead.
//!
//! The agent card is fetched at most once per toolbox (one run): before the
//! first model call when the policy allows the host ([`A2aHub::prefetch`]),
//! else at the first call. Its skills (or the configured `skill`) are the
//! tool's description, the skill's input schema its parameters.
//!
//! Policy: the toolbox asks the gate about the configured URL as it would a
//! `web_fetch` of it before a call; every URL this module contacts (the
//! card, the endpoint the card names) is judged again by the web rules and
//! its resolved addresses before a byte is sent ([`http::open`]). The
//! bearer token is read from the variable `token_env` names when the
//! toolbox is built, sent only to the configured URL's host, and never
//! printed (the variable is a secret to every program the runtime starts:
//! [`crate::secrets`]).
//!
//! What this is not: an A2A server, or a conversation — a task that asks
//! for more input is reported, not answered.

mod card;
mod http;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::policy::Gate;
use crate::{Denial, ToolOutput};
use agentfile_config::ToolBinding;
use agentfile_llm::ToolDef;
use agentfile_wire::a2a::{self as wire, TaskState, v0_3};

pub use card::Generation;
pub use http::CallError;
use http::{Failure, Http, Token};

/// The timeout of a call when the binding sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// How long `CancelTask` may take once a call gave up.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// One remote agent bound as a tool.
#[derive(Debug)]
pub struct A2aTool {
    /// The tool id, as workflows and the model name it.
    pub id: String,
    /// As configured.
    pub url: Url,
    card_url: Url,
    skill: Option<String>,
    token: Option<Token>,
    timeout: Duration,
    description: Option<String>,
    card: OnceCell<Arc<Resolved>>,
}

/// A fetched card and what the tool takes from it.
#[derive(Debug)]
struct Resolved {
    card: wire::AgentCard,
    endpoint: Option<(Url, Generation)>,
}

/// The remote agents of one toolbox.
#[derive(Debug, Default)]
pub struct A2aHub {
    tools: Vec<Arc<A2aTool>>,
    warnings: Mutex<Vec<String>>,
}

impl A2aHub {
    /// The `[tools.<id>]` entries with `a2a`; tokens read from
    /// `environment`. A binding that cannot be used is a warning.
    pub fn from_config(
        bindings: &BTreeMap<String, ToolBinding>,
        environment: &[(String, String)],
    ) -> A2aHub {
        let mut tools = Vec::new();
        let mut warnings = Vec::new();
        for (id, b) in bindings {
            let Some(raw) = &b.a2a else { continue };
            match tool_of(id, raw, b, environment, &mut warnings) {
                Ok(t) => tools.push(Arc::new(t)),
                Err(why) => warnings.push(format!("tools.{id}: {why}; the tool is not offered")),
            }
        }
        A2aHub {
            tools,
            warnings: Mutex::new(warnings),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The remote agent bound under `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<A2aTool>> {
        self.tools.iter().find(|t| t.id == name)
    }

    pub fn tools(&self) -> &[Arc<A2aTool>] {
        &self.tools
    }

    /// Problems with bindings and cards, for the run's warnings.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().map(|w| w.clone()).unwrap_or_default()
    }

    /// Fetch the cards of the agents `allowed` says the policy lets the run
    /// reach, all at once, waiting at most `deadline`; one that fails is a
    /// warning and is asked for again at the first call.
    pub async fn prefetch(
        &self,
        gate: &Gate,
        allowed: impl Fn(&A2aTool) -> bool,
        deadline: Duration,
    ) {
        let fetches = self
            .tools
            .iter()
            .filter(|t| allowed(t))
            .map(|t| async move {
                if let Err(e) = t.resolved(gate).await {
                    let why = match e {
                        Failure::Denied(d) => {
                            format!("denied by policy ({}): {}", d.rule, d.reason)
                        }
                        Failure::Error(e) => e.to_string(),
                    };
                    if let Ok(mut w) = self.warnings.lock() {
                        w.push(format!("tools.{}: cannot read the agent card: {why}", t.id));
                    }
                }
            });
        let _ = tokio::time::timeout(deadline, futures::future::join_all(fetches)).await;
    }
}

/// Why a `[tools.<id>] a2a` binding is not offered.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    #[error("`a2a` is set beside `mcp`, `command` or `workflow`, which win")]
    Shadowed,
    #[error(
        "`{0}` cannot name a remote agent's tool: use letters, digits, `_` and `-` (at most 64), not a built-in tool's name or `mcp_…`"
    )]
    Name(String),
    #[error("a2a = {raw:?} is not a URL: {source}")]
    Url {
        raw: String,
        source: url::ParseError,
    },
    #[error("a2a = {0:?} is not an http(s) URL")]
    Scheme(String),
    #[error("timeout: {0}")]
    Timeout(#[from] agentfile_config::DurationError),
}

/// Check one binding and read its token.
fn tool_of(
    id: &str,
    raw: &str,
    b: &ToolBinding,
    environment: &[(String, String)],
    warnings: &mut Vec<String>,
) -> Result<A2aTool, BindingError> {
    if b.mcp.is_some() || b.command.is_some() || b.workflow.is_some() {
        return Err(BindingError::Shadowed);
    }
    let valid_name = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name || id.starts_with("mcp_") || agentfile_plan::tool::Tool::from_name(id).is_some()
    {
        return Err(BindingError::Name(id.to_owned()));
    }
    let url = Url::parse(raw.trim()).map_err(|source| BindingError::Url {
        raw: raw.to_owned(),
        source,
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(BindingError::Scheme(raw.to_owned()));
    }
    let timeout = match &b.timeout {
        Some(t) => agentfile_config::parse_duration(t)?,
        None => DEFAULT_TIMEOUT,
    };
    let token = b.token_env.as_deref().and_then(|name| {
        let v = environment
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_owned())
            .filter(|v| !v.is_empty());
        if v.is_none() {
            warnings.push(format!(
                "tools.{id}.token_env names {name}, which is not set; the agent is called without a token"
            ));
        }
        v.map(Token)
    });
    Ok(A2aTool {
        id: id.to_owned(),
        card_url: card::card_url(&url),
        url,
        skill: b.skill.clone().filter(|s| !s.trim().is_empty()),
        token,
        timeout,
        description: b.description.clone().filter(|d| !d.trim().is_empty()),
        card: OnceCell::new(),
    })
}

impl A2aTool {
    /// How the model is offered the tool: from the card when it has been
    /// read, else from the binding alone.
    pub fn definition(&self) -> ToolDef {
        let (mut description, parameters) = match self.card.get() {
            Some(r) => (
                card::description(&r.card, self.skill.as_deref(), &self.url),
                card::parameters(&r.card, self.skill.as_deref()),
            ),
            None => (
                format!(
                    "Ask the remote A2A agent at {}{}. The arguments are its inputs.",
                    self.url,
                    self.skill
                        .as_deref()
                        .map(|s| format!(" (skill `{s}`)"))
                        .unwrap_or_default()
                ),
                card::free_object(),
            ),
        };
        if let Some(d) = &self.description {
            description = format!("{d}\n\n{description}");
        }
        ToolDef {
            name: self.id.clone(),
            description,
            parameters,
        }
    }

    /// The token, for a URL on the configured URL's host only: a card
    /// naming an endpoint elsewhere does not get it.
    fn token_for(&self, url: &Url) -> Option<Token> {
        (url.host_str() == self.url.host_str() && url.scheme() == self.url.scheme())
            .then(|| self.token.clone())
            .flatten()
    }

    /// The card, fetched once (a failure is not kept: the next call asks again).
    async fn resolved(&self, gate: &Gate) -> Result<Arc<Resolved>, Failure> {
        self.card
            .get_or_try_init(|| async {
                let http = http::open(
                    gate,
                    &self.card_url,
                    wire::PROTOCOL_VERSION,
                    self.token_for(&self.card_url),
                    self.timeout,
                )
                .await?;
                let value = tokio::time::timeout(self.timeout, http.get_json("the agent card"))
                    .await
                    .map_err(|_| {
                        CallError::Remote(format!(
                            "the agent card {} did not come within {}",
                            self.card_url,
                            agentfile_config::text::human_duration(self.timeout)
                        ))
                    })??;
                let card: wire::AgentCard = serde_json::from_value(value).map_err(|e| {
                    CallError::Remote(format!("the agent card {} is not one: {e}", self.card_url))
                })?;
                let endpoint = card::endpoint(&card, &self.url);
                Ok(Arc::new(Resolved { card, endpoint }))
            })
            .await
            .cloned()
    }
}

/// Call ids of JSON-RPC requests, unique in the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn message_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("agentfile-{}-{nanos:x}-{}", std::process::id(), next_id())
}

/// The task a call is waiting on, for `CancelTask` if the call gives up.
#[derive(Default)]
struct Pending {
    slot: Mutex<Option<(Http, Generation, String)>>,
}

impl Pending {
    fn set(&self, http: &Http, generation: Generation, task: &str) {
        if let Ok(mut s) = self.slot.lock() {
            *s = Some((http.clone(), generation, task.to_owned()));
        }
    }

    fn clear(&self) {
        if let Ok(mut s) = self.slot.lock() {
            *s = None;
        }
    }

    fn take(&self) -> Option<(Http, Generation, String)> {
        self.slot.lock().ok().and_then(|mut s| s.take())
    }
}

/// Sends `CancelTask` for a task still pending when the call is dropped
/// (a step's timeout drops the call's future).
struct CancelOnDrop(Arc<Pending>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some((http, generation, task)) = self.0.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                let _ =
                    tokio::time::timeout(CANCEL_WAIT, send_cancel(&http, generation, &task)).await;
            });
        }
    }
}

async fn send_cancel(http: &Http, generation: Generation, task: &str) -> Result<Value, CallError> {
    let (method, params) = match generation {
        Generation::V1 => (
            wire::method::CANCEL_TASK,
            json!(wire::CancelTaskRequest {
                id: task.to_owned(),
                ..Default::default()
            }),
        ),
        Generation::V03 => (
            v0_3::method::CANCEL_TASK,
            json!(v0_3::TaskIdParams {
                id: task.to_owned(),
                ..Default::default()
            }),
        ),
    };
    http.call(method, params, next_id()).await
}

/// Call `tool` with `args` (the toolbox has asked the gate about its URL).
/// A URL the policy refuses on the way (the card's, the endpoint's, an
/// address) is a [`Denial`]; everything else is the output.
pub async fn call(
    tool: &A2aTool,
    gate: &Gate,
    args: Value,
    cancel: &CancellationToken,
) -> Result<ToolOutput, Denial> {
    let pending = Arc::new(Pending::default());
    let guard = CancelOnDrop(pending.clone());
    let work = exchange(tool, gate, args, &pending);
    let outcome = tokio::select! {
        r = tokio::time::timeout(tool.timeout, work) => match r {
            Ok(r) => r,
            Err(_) => {
                let said = cancel_now(&pending).await;
                Err(Failure::Error(CallError::Remote(format!(
                    "the remote agent did not finish within {}{said}",
                    agentfile_config::text::human_duration(tool.timeout)
                ))))
            }
        },
        _ = cancel.cancelled() => {
            let said = cancel_now(&pending).await;
            Err(Failure::Error(CallError::Remote(format!("cancelled{said}"))))
        }
    };
    drop(guard);
    match outcome {
        Ok(out) => Ok(out),
        Err(Failure::Denied(d)) => Err(Denial {
            tool: tool.id.clone(),
            rule: d.rule,
            reason: format!("{} (A2A agent {})", d.reason, tool.url),
        }),
        Err(Failure::Error(e)) => Ok(ToolOutput::error(format!("{}: {e}", tool.id))),
    }
}

/// Send `CancelTask` for the pending task, if any; what to say about it.
async fn cancel_now(pending: &Pending) -> String {
    let Some((http, generation, task)) = pending.take() else {
        return String::new();
    };
    match tokio::time::timeout(CANCEL_WAIT, send_cancel(&http, generation, &task)).await {
        Ok(Ok(_)) => format!("; its task {task} was cancelled (CancelTask sent)"),
        Ok(Err(e)) => format!("; cancelling its task {task} failed: {e}"),
        Err(_) => format!("; cancelling its task {task} got no answer"),
    }
}

/// The whole exchange: card, message, following the task, the result.
async fn exchange(
    tool: &A2aTool,
    gate: &Gate,
    args: Value,
    pending: &Pending,
) -> Result<ToolOutput, Failure> {
    let Value::Object(mut inputs) = args else {
        return Err(CallError::Remote("the arguments must be a JSON object".to_owned()).into());
    };
    let resolved = tool.resolved(gate).await?;
    let Some((endpoint, generation)) = resolved.endpoint.clone() else {
        return Err(CallError::Remote(format!(
            "the agent card {} names no JSON-RPC interface this client speaks",
            tool.card_url
        ))
        .into());
    };
    let skill = match &tool.skill {
        Some(s) => Some(s.clone()),
        None if resolved.card.skills.len() == 1 => Some(resolved.card.skills[0].id.clone()),
        None => match inputs.get("skill").and_then(Value::as_str) {
            Some(s) if resolved.card.skills.iter().any(|k| k.id == s) => {
                let s = s.to_owned();
                inputs.remove("skill");
                Some(s)
            }
            _ => None,
        },
    };
    let token = tool.token_for(&endpoint);
    let http = http::open(gate, &endpoint, generation.header(), token, tool.timeout).await?;
    let progress = match generation {
        Generation::V1 => {
            let streams = resolved.card.capabilities.streaming == Some(true);
            follow_v1(&http, Value::Object(inputs), skill, streams, pending).await?
        }
        Generation::V03 => follow_v03(&http, Value::Object(inputs), skill, pending).await?,
    };
    pending.clear();
    progress.outcome().map_err(Failure::Error)
}

/// Where a task stands as far as the call has heard.
#[derive(Debug, Default)]
struct Progress {
    task: Option<String>,
    state: TaskState,
    status: Option<wire::Message>,
    artifacts: Vec<wire::Artifact>,
    /// A message the agent answered with instead of a task.
    reply: Option<wire::Message>,
}

impl Progress {
    fn done(&self) -> bool {
        self.reply.is_some() || self.state.is_terminal() || self.state.is_interrupted()
    }

    fn task(&mut self, t: wire::Task) {
        self.task = Some(t.id);
        self.state = t.status.state;
        self.status = t.status.message;
        if !t.artifacts.is_empty() {
            self.artifacts = t.artifacts;
        }
    }

    fn event(&mut self, e: wire::StreamResponse) {
        match e {
            wire::StreamResponse::Task(t) => self.task(t),
            wire::StreamResponse::Message(m) => self.reply = Some(m),
            wire::StreamResponse::StatusUpdate(s) => {
                if self.task.is_none() && !s.task_id.is_empty() {
                    self.task = Some(s.task_id);
                }
                self.state = s.status.state;
                self.status = s.status.message;
            }
            wire::StreamResponse::ArtifactUpdate(a) => {
                if self.task.is_none() && !a.task_id.is_empty() {
                    self.task = Some(a.task_id);
                }
                let same = self
                    .artifacts
                    .iter_mut()
                    .find(|x| x.artifact_id == a.artifact.artifact_id);
                match same {
                    Some(x) if a.append => x.parts.extend(a.artifact.parts),
                    Some(x) => *x = a.artifact,
                    None => self.artifacts.push(a.artifact),
                }
            }
        }
    }

    /// The result, or why the task did not give one.
    fn outcome(self) -> Result<ToolOutput, CallError> {
        let task = self.task.clone().unwrap_or_default();
        let said = self
            .status
            .as_ref()
            .map(|m| texts(&m.parts))
            .filter(|t| !t.is_empty());
        let because = said
            .as_deref()
            .map(|s| format!(": {s}"))
            .unwrap_or_default();
        match self.state {
            TaskState::Failed => Err(CallError::Remote(format!(
                "the remote agent's task {task} failed{because}"
            ))),
            TaskState::Rejected => Err(CallError::Remote(format!(
                "the remote agent rejected the task {task}{because}"
            ))),
            TaskState::Canceled => Err(CallError::Remote(format!(
                "the remote agent cancelled the task {task}{because}"
            ))),
            TaskState::InputRequired | TaskState::AuthRequired => {
                let what = if self.state == TaskState::AuthRequired {
                    "authentication"
                } else {
                    "input"
                };
                Err(CallError::Remote(format!(
                    "the remote agent needs {what} to go on with task {task} ({}){because}; this tool sends one message and cannot answer",
                    self.state.name()
                )))
            }
            _ if self.reply.is_some() => Ok(ToolOutput::ok(render(
                self.reply.iter().flat_map(|m| m.parts.iter()),
            ))),
            TaskState::Completed => {
                let parts: Vec<&wire::Part> =
                    self.artifacts.iter().flat_map(|a| a.parts.iter()).collect();
                if parts.is_empty() {
                    return Ok(ToolOutput::ok(said.unwrap_or_else(|| {
                        "the remote agent finished with no output".into()
                    })));
                }
                Ok(ToolOutput::ok(render(parts.into_iter())))
            }
            other => Err(CallError::Remote(format!(
                "the remote agent left task {task} in state {} without finishing it",
                other.name()
            ))),
        }
    }
}

/// The text parts, joined.
fn texts(parts: &[wire::Part]) -> String {
    parts
        .iter()
        .filter_map(|p| p.text.as_deref())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the parts say as a tool result: one data part is its JSON (text
/// parts beside it are taken as its rendering); no data part, the texts
/// (and file references); several, a JSON array of all parts.
fn render<'a>(parts: impl Iterator<Item = &'a wire::Part>) -> String {
    let parts: Vec<&wire::Part> = parts.collect();
    let data: Vec<&Value> = parts.iter().filter_map(|p| p.data.as_ref()).collect();
    let file = |p: &wire::Part| {
        let name = p.filename.as_deref().unwrap_or("a file");
        match (&p.url, &p.raw) {
            (Some(u), _) => Some(format!("[{name}: {u}]")),
            (None, Some(raw)) => Some(format!("[{name}: {} bytes, base64]", raw.len())),
            _ => None,
        }
    };
    match data.len() {
        1 => data[0].to_string(),
        0 => parts
            .iter()
            .filter_map(|p| p.text.clone().or_else(|| file(p)))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => Value::Array(
            parts
                .iter()
                .filter_map(|p| {
                    p.data
                        .clone()
                        .or_else(|| p.text.clone().map(Value::String))
                        .or_else(|| file(p).map(Value::String))
                })
                .collect(),
        )
        .to_string(),
    }
}

fn metadata(skill: Option<String>) -> Option<Map<String, Value>> {
    skill.map(|s| Map::from_iter([("skill".to_owned(), Value::String(s))]))
}

fn decode<T: serde::de::DeserializeOwned>(method: &str, v: Value) -> Result<T, CallError> {
    serde_json::from_value(v).map_err(|e| {
        CallError::Remote(format!(
            "the remote agent's answer to {method} is not what A2A sends: {e}"
        ))
    })
}

/// 1.0: stream or send-and-poll until the task is over or interrupted.
async fn follow_v1(
    http: &Http,
    inputs: Value,
    skill: Option<String>,
    streams: bool,
    pending: &Pending,
) -> Result<Progress, CallError> {
    let message = wire::Message {
        message_id: message_id(),
        role: wire::Role::User,
        parts: vec![wire::Part::data(inputs)],
        metadata: metadata(skill),
        ..Default::default()
    };
    let mut progress = Progress::default();
    if streams {
        let params = json!(wire::SendMessageRequest {
            message,
            ..Default::default()
        });
        let mut bad = None;
        let method = wire::method::SEND_STREAMING_MESSAGE;
        http.stream(method, params, next_id(), |v| {
            match decode::<wire::StreamResponse>(method, v) {
                Ok(e) => progress.event(e),
                Err(e) => {
                    bad = Some(e);
                    return false;
                }
            }
            if let Some(t) = &progress.task {
                pending.set(http, Generation::V1, t);
            }
            !progress.done()
        })
        .await?;
        if let Some(e) = bad {
            return Err(e);
        }
    } else {
        let params = json!(wire::SendMessageRequest {
            message,
            configuration: Some(wire::SendMessageConfiguration {
                return_immediately: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        });
        let method = wire::method::SEND_MESSAGE;
        match decode(method, http.call(method, params, next_id()).await?)? {
            wire::SendMessageResponse::Task(t) => progress.task(t),
            wire::SendMessageResponse::Message(m) => progress.reply = Some(m),
        }
    }
    poll(http, Generation::V1, progress, pending).await
}

/// Ask for the task until it is over or interrupted, a little less often
/// each time (100 ms growing to 2 s).
async fn poll(
    http: &Http,
    generation: Generation,
    mut progress: Progress,
    pending: &Pending,
) -> Result<Progress, CallError> {
    let mut wait = Duration::from_millis(100);
    while !progress.done() {
        let Some(task) = progress.task.clone() else {
            return Err(CallError::Remote(
                "the remote agent's answer names no task to follow".to_owned(),
            ));
        };
        pending.set(http, generation, &task);
        tokio::time::sleep(wait).await;
        wait = (wait * 3 / 2).min(Duration::from_secs(2));
        let t = match generation {
            Generation::V1 => {
                let method = wire::method::GET_TASK;
                let params = json!(wire::GetTaskRequest {
                    id: task,
                    ..Default::default()
                });
                decode::<wire::Task>(method, http.call(method, params, next_id()).await?)?
            }
            Generation::V03 => {
                let method = v0_3::method::GET_TASK;
                let params = json!(v0_3::TaskQueryParams {
                    id: task,
                    ..Default::default()
                });
                task_of_v03(decode(method, http.call(method, params, next_id()).await?)?)
            }
        };
        progress.task(t);
    }
    Ok(progress)
}

/// 0.3: `message/send` (not blocking), then `tasks/get`.
async fn follow_v03(
    http: &Http,
    inputs: Value,
    skill: Option<String>,
    pending: &Pending,
) -> Result<Progress, CallError> {
    let params = json!(v0_3::MessageSendParams {
        message: v0_3::Message {
            kind: "message".to_owned(),
            message_id: message_id(),
            role: v0_3::Role::User,
            parts: vec![v0_3::Part::data(inputs)],
            metadata: metadata(skill),
            ..Default::default()
        },
        configuration: Some(v0_3::MessageSendConfiguration {
            blocking: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    });
    let method = v0_3::method::SEND_MESSAGE;
    let result = http.call(method, params, next_id()).await?;
    let mut progress = Progress::default();
    if result.get("kind").and_then(Value::as_str) == Some("message") {
        progress.reply = Some(message_of_v03(decode(method, result)?));
    } else {
        progress.task(task_of_v03(decode(method, result)?));
    }
    poll(http, Generation::V03, progress, pending).await
}

fn message_of_v03(m: v0_3::Message) -> wire::Message {
    wire::Message {
        message_id: m.message_id,
        context_id: m.context_id,
        task_id: m.task_id,
        role: match m.role {
            v0_3::Role::User => wire::Role::User,
            v0_3::Role::Agent => wire::Role::Agent,
        },
        parts: m.parts.iter().map(v0_3::Part::current).collect(),
        metadata: m.metadata,
        ..Default::default()
    }
}

fn task_of_v03(t: v0_3::Task) -> wire::Task {
    wire::Task {
        id: t.id,
        context_id: t.context_id,
        status: wire::TaskStatus {
            state: t.status.state.current(),
            message: t.status.message.map(message_of_v03),
            timestamp: t.status.timestamp,
        },
        artifacts: t
            .artifacts
            .into_iter()
            .map(|a| wire::Artifact {
                artifact_id: a.artifact_id,
                name: a.name,
                description: a.description,
                parts: a.parts.iter().map(v0_3::Part::current).collect(),
                metadata: a.metadata,
                ..Default::default()
            })
            .collect(),
        metadata: t.metadata,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(v: Value) -> wire::Part {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn one_data_part_is_its_json_and_texts_are_text() {
        let d = part(json!({"data": {"n": 1}}));
        let t = part(json!({"text": "one"}));
        assert_eq!(render([&d, &t].into_iter()), r#"{"n":1}"#);
        assert_eq!(render([&t, &t].into_iter()), "one\none");
        assert_eq!(
            render([&d, &t, &d].into_iter()),
            r#"[{"n":1},"one",{"n":1}]"#
        );
    }

    #[test]
    fn appended_chunks_join_their_artifact() {
        let mut p = Progress::default();
        let upd = |append: bool, text: &str| {
            wire::StreamResponse::ArtifactUpdate(wire::TaskArtifactUpdateEvent {
                task_id: "t".into(),
                append,
                artifact: wire::Artifact {
                    artifact_id: "a".into(),
                    parts: vec![wire::Part::text(text)],
                    ..Default::default()
                },
                ..Default::default()
            })
        };
        p.event(upd(false, "x"));
        p.event(upd(true, "y"));
        p.state = TaskState::Completed;
        assert_eq!(p.outcome().unwrap().content, "x\ny");
    }

    #[test]
    fn a_task_that_wants_input_names_itself() {
        let p = Progress {
            task: Some("t-9".into()),
            state: TaskState::InputRequired,
            ..Default::default()
        };
        let e = p.outcome().unwrap_err().to_string();
        assert!(e.contains("needs input") && e.contains("t-9"), "{e}");
    }
}
