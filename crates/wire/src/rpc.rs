//! Requests, results and errors of the server methods (CONTRACT §6 and §7).
//!
//! `agentfile serve` (JSON-RPC 2.0) and `agentfile mcp` (MCP tools) offer the same
//! operations with the same parameter and result shapes: these types. Parameters
//! refuse unknown fields, so a misspelt `input` is an error that names it rather
//! than an input silently dropped.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::sessions::{SessionMeta, SessionStatus};
use crate::events::Event;

/// `run`: start (or resume) a workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// The workflow file (or a folder holding an Agentfile). A relative path is
    /// taken from the server's workspace.
    #[serde(default)]
    pub path: String,
    /// The workflow's INPUTs by name. Each binds as the workflow's inputs
    /// schema declares it (a list or object where it declares one); an input
    /// read as text takes a string, number or boolean. Inputs with a default
    /// may be left out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, serde_json::Value>,
    /// A config file (agent.json / agent.toml) instead of the server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// Wait for the run to finish and return its outputs (default), or return the
    /// session id at once (`false`) and follow it with `event`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
    /// Continue this interrupted, cancelled or approved session instead of
    /// starting a new one; `path` and `inputs` then come from the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
    /// Override the configured provider (`anthropic`, `openai`, `replay`, `mcp-sampling`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Override the configured model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Budget: model turns over the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
    /// Budget: input plus output tokens over the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Budget: estimated cost in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Budget: wall-clock time such as `90s`, `10m` or `1h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Run a workflow.yaml whose tolerable problems (unknown fields, a
    /// list-valued `input`, `{placeholder}` text) are only warnings.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lenient: bool,
    /// agentrc: `core` checks core conformance (a directive of an optional
    /// profile is an error unless `extensions` names its profile); `all`, the
    /// default, accepts every profile agentfile reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ConformanceProfile>,
    /// agentrc, with `profile: core`: the optional profiles to accept
    /// (capability, instruction, security, placement, observability,
    /// experimental, or all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// Which agentrc profiles a check accepts (`--profile`).
// A conformance profile of the format that has them; the published schemas
// keep the name they were first published under.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(rename = "AgentrcProfile")]
pub enum ConformanceProfile {
    /// Every profile agentfile reads (the default).
    #[default]
    All,
    /// Core conformance: a directive of an optional profile is an error
    /// unless `extensions` names its profile.
    Core,
}

/// `ping`: no params; answered `{}` at once, even while the connection is at a
/// limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PingParams {}

/// The answer to `ping`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Pong {}

/// `run` with `wait: false`, and `cancel` / `approve`: where a session stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunStatus {
    pub session_id: String,
    pub status: SessionStatus,
}

/// `event`: read a session's events after a `seq`, or wait for the next ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventParams {
    pub session_id: String,
    /// Return events with a greater `seq` (default 0: from the start).
    #[serde(default)]
    pub after_seq: u64,
    /// When there is nothing newer yet, wait up to this long for it (long poll,
    /// at most 60000). Default 0: answer at once.
    #[serde(default)]
    pub wait_ms: u64,
    /// At most this many events per answer (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// The answer to `event`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventPage {
    pub events: Vec<Event>,
    /// True when the run has ended and every event was returned: nothing more will come.
    pub done: bool,
    pub status: SessionStatus,
    /// The highest `seq` stored so far; ask again with `after_seq` set to the last
    /// returned event's `seq`.
    pub last_seq: u64,
}

/// `cancel`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelParams {
    pub session_id: String,
}

/// `approve`: decide a supervised goal that waits for a human.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveParams {
    pub session_id: String,
    /// true to let the goal run, false to reject it (the run then fails).
    pub approve: bool,
    /// Recorded with the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `fork`: a new session from a stored session's journal, run live from
/// one node (CONTRACT §19): every node that completed before `at` is taken
/// over, `at` and all after it run again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkParams {
    /// The session to fork; it is left as it is.
    pub session_id: String,
    /// The node to run live from, by its path as events name it
    /// (`main/report`, `flow/each[3]/triage`).
    pub at: String,
    /// The workflow to run instead of the session's own (an edited copy);
    /// what the fork takes over must be unchanged in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Inputs replacing the session's, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, serde_json::Value>,
    /// Provider for the live part, instead of the session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model for the live part, instead of the session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Wait for the new run to end (default true), as `run` does; with
    /// false the answer is its session id at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
}

/// `replay`: a stored session run again from its own journal in a new
/// session (CONTRACT §19): every model answer and tool result as recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayParams {
    /// The session to replay; it is left as it is.
    pub session_id: String,
    /// The workflow to replay instead of the session's own (an edited
    /// copy): the replay stops where a request first differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Wait for the replay to end (default true); with false the answer is
    /// its session id at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
}

/// `signal`: deliver an event to a suspended session, which then resumes
/// (CONTRACT §9).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalParams {
    pub session_id: String,
    /// The event's name: one the session's suspend step waits for.
    pub event: String,
    /// The event's payload: the suspend step's `eventPayload`, and when it is
    /// an object its fields are the step's outputs too (beside `eventName`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub payload: serde_json::Value,
}

/// `validate`: check workflow files, like `agentfile validate --format json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateParams {
    /// One workflow file (or use `paths`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Several workflow files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Check text instead of a file: the workflow's source as it would be saved
    /// at `path` (default `Agentfile` in the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// workflow.yaml: tolerable problems (unknown fields, a list-valued
    /// `input`, `{placeholder}` text) are only warnings.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lenient: bool,
    /// agentrc: `core` checks core conformance (a directive of an optional
    /// profile is an error unless `extensions` names its profile); `all`, the
    /// default, accepts every profile agentfile reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ConformanceProfile>,
    /// agentrc, with `profile: core`: the optional profiles to accept
    /// (capability, instruction, security, placement, observability,
    /// experimental, or all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// How `inspect` renders a plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InspectFormat {
    #[default]
    Json,
    Text,
    Mermaid,
}

/// `inspect`: a workflow's plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InspectParams {
    pub path: String,
    #[serde(default)]
    pub format: InspectFormat,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// workflow.yaml: tolerable problems (unknown fields, a list-valued
    /// `input`, `{placeholder}` text) are only warnings.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lenient: bool,
    /// agentrc: `core` checks core conformance (a directive of an optional
    /// profile is an error unless `extensions` names its profile); `all`, the
    /// default, accepts every profile agentfile reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ConformanceProfile>,
    /// agentrc, with `profile: core`: the optional profiles to accept
    /// (capability, instruction, security, placement, observability,
    /// experimental, or all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// `inspect` with format `text` or `mermaid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InspectText {
    pub format: InspectFormat,
    pub text: String,
}

/// `list`: discover workflows under a folder.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Folder to search (default: the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
}

/// `create` (MCP): generate a workflow.yaml workflow with the built-in
/// generator into `artifacts/<name>/<run-id>/` (CONTRACT §10).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    /// What the workflow should do, in plain words.
    pub description: String,
    /// Its name, lowercase and hyphenated (default: from the description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Override the configured provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Override the configured model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `promote` (MCP): a validated generation run to `workflows/<name>/`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteParams {
    /// The run's folder, `artifacts/<name>/<run-id>`, relative to the workspace.
    pub run: String,
}

/// `sessions`: stored sessions, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SessionStatus>,
    /// Default 50 (at most 500 with `workflow`, `search` or `before`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only sessions of the workflow with exactly this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Only sessions whose id, workflow name or an input value contains this
    /// text (ASCII letters in any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    /// The `next` of the page before: the sessions older than its last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
}

/// The answer to `sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionMeta>,
    /// When the page is full: pass it as `before` for the next, older page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `triggers`: the daemon's triggers under the server's workspace (CONTRACT
/// §15), as `agentfile triggers list --format json` prints them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggersParams {}

/// The answer to `triggers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TriggerList {
    pub triggers: Vec<TriggerInfo>,
}

/// One registered trigger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TriggerInfo {
    /// `<workflow-id>#<index>`, e.g. `nightly#0`: what `fire` and
    /// `trigger_history` take.
    pub id: String,
    /// The workflow's id.
    pub workflow: String,
    /// `schedule`, `webhook`, `event`, …
    pub kind: String,
    /// `active`, or `refused` (the daemon cannot serve it; `reason` says why).
    pub state: TriggerState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A schedule's next instant, in its time zone (RFC 3339 with offset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire: Option<String>,
    /// Its daily limits and what today used of them: `max_runs_per_day`,
    /// `max_cost_usd_per_day`, `runs_today`, `cost_usd_today`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<serde_json::Value>,
}

/// Whether the daemon serves a trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TriggerState {
    Active,
    Refused,
}

/// `trigger_history`: fires, newest first, as `agentfile triggers history
/// --format json` prints them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerHistoryParams {
    /// Only this trigger's fires (an id from `triggers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// At most this many (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// The answer to `trigger_history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FireHistory {
    pub fires: Vec<FireInfo>,
}

/// One recorded fire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FireInfo {
    pub trigger: String,
    /// What fired it: `schedule`, `webhook`, `event` or `manual`.
    pub kind: String,
    /// The instant a schedule meant (RFC 3339); absent for other kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_for: Option<String>,
    /// When it fired (RFC 3339).
    pub fired_at: String,
    pub outcome: FireOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The session the fire started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// What became of a fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FireOutcome {
    /// A run was started for it.
    Fired,
    /// Deliberately not run (overlap `skip`, a catch-up that dropped it).
    Skipped,
    /// Not run because a limit or a capability said no (quota, a run that
    /// could not start).
    Refused,
}

/// `fire`: fire a trigger now, by hand (as `agentfile triggers fire ID`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FireParams {
    /// The trigger's id, from `triggers` (e.g. `nightly#0`).
    pub trigger: String,
}

/// What one fire did: the answer to `fire`, and each item of `emit`'s.
/// A fire that ran has `outcome: fired` and the `session_id` of its run,
/// which `event`, `cancel` and `approve` follow like any run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FireReport {
    pub trigger: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub outcome: FireOutcome,
    /// Why it did not run (quota, overlap, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `emit`: publish an event; every workflow with a trigger `kind: event,
/// name: NAME` runs once per event id, with the payload as its inputs (as
/// `agentfile emit`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmitParams {
    /// The event's name.
    pub name: String,
    /// A JSON object whose fields are the workflows' inputs.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub payload: serde_json::Value,
    /// The event's id: a second `emit` with the same id fires nothing
    /// (default: a fresh id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// The answer to `emit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EmitResult {
    /// The event's name.
    pub event: String,
    /// The event's id (the one given, or the fresh one).
    pub id: String,
    /// What this event fired now: one item per subscribed trigger.
    pub fired: Vec<FireReport>,
    /// Triggers that had fired for this event id already (an `emit` repeated
    /// with the same id): nothing ran again; the earlier fire's outcome and
    /// session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub already_fired: Vec<FireReport>,
}

/// Totals for a finished run, as `run` returns them; the same object as the
/// `result` line of `--output stream-json`.
pub type RunOutcome = crate::events::RunResult;

/// Error codes of our own, beside JSON-RPC's (-32700 parse error, -32600 invalid
/// request, -32601 method not found, -32602 invalid params, -32603 internal).
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    /// The run cannot start: the workflow is invalid, an input is missing, the
    /// config or provider is wrong (`data.exit_code` is the CLI's exit code).
    pub const RUN_REJECTED: i64 = -32001;
    /// No session with that id in this server's session store.
    pub const UNKNOWN_SESSION: i64 = -32002;
    /// The session is not in a state that allows this (nothing to approve,
    /// already finished, running in another process).
    pub const SESSION_STATE: i64 = -32003;
    /// The server is shutting down and accepts no new runs.
    pub const SHUTTING_DOWN: i64 = -32004;
    /// The session store failed (disk full, database locked too long, …).
    pub const STORE: i64 = -32005;
    /// A workflow or folder named in the request cannot be read.
    pub const NOT_FOUND: i64 = -32006;
    /// A bound of the server was reached (requests in flight, their bytes, the
    /// size of a reply, the size of a workflow source); the request was not
    /// run. `data.limit` names the bound and `data.max` is its value.
    pub const LIMIT: i64 = -32007;
    /// No trigger with that id in the server's workspace, or no workflow
    /// subscribes to the emitted event's name.
    pub const UNKNOWN_TRIGGER: i64 = -32008;
}

/// An error object: JSON-RPC's `error` member, and the text of an MCP tool error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: serde_json::Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }

    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INTERNAL, message)
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RpcError {}

/// Decode a method's params, or say which field is wrong (`-32602`).
///
/// Absent params (`None`) decode as an empty object, so methods whose fields
/// are all optional can be called without any.
pub fn params<T: serde::de::DeserializeOwned>(
    method: &str,
    value: Option<serde_json::Value>,
) -> Result<T, RpcError> {
    let value = match value {
        None | Some(serde_json::Value::Null) => serde_json::Value::Object(Default::default()),
        Some(v @ serde_json::Value::Object(_)) => v,
        Some(serde_json::Value::Array(_)) => {
            return Err(RpcError::invalid_params(format!(
                "{method}: params must be an object of named fields, not an array"
            )));
        }
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "{method}: params must be an object, not {}",
                json_kind(&other)
            )));
        }
    };
    // serde names missing and unknown fields itself; the path names the field
    // whose value has the wrong type ("after_seq: invalid type: string …").
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            RpcError::invalid_params(format!("{method}: invalid params: {inner}"))
        } else {
            RpcError::invalid_params(format!("{method}: invalid params: `{path}`: {inner}"))
        }
    })
}

/// "a string", "a number", … for messages about JSON values.
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_params_name_the_field() {
        let e = params::<RunParams>("run", Some(serde_json::json!({"path": "a", "input": {}})))
            .unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
        assert!(e.message.contains("`input`"), "{}", e.message);
        let e = params::<EventParams>("event", Some(serde_json::json!({}))).unwrap_err();
        assert!(e.message.contains("`session_id`"), "{}", e.message);
        let e = params::<EventParams>(
            "event",
            Some(serde_json::json!({"session_id": "s", "after_seq": "x"})),
        )
        .unwrap_err();
        assert!(
            e.message.contains("`after_seq`: invalid type"),
            "{}",
            e.message
        );
        let e = params::<RunParams>("run", Some(serde_json::json!([1]))).unwrap_err();
        assert!(e.message.contains("object"), "{}", e.message);
        let p: SessionsParams = params("sessions", None).unwrap();
        assert_eq!(p, SessionsParams::default());
    }
}
