//! Telemetry messages: what the `http` and `file` exporters ship (the seed's
//! "Telemetry Schema").
//!
//! Every event of a run becomes one message. The conversation itself — the goal
//! put to the agents, each model answer, each tool result — is `type: "message"`
//! with a `role`; everything else (a run starting, a step ending, a policy
//! denial, a warning) is `type: "log"` with a `level` and a one-line `content`.
//! `data.event` and `data.seq` name the event the message came from, so a
//! consumer can fetch the full event from the session store.
//!
//! ```json
//! {"schema_version":1,"agent_id":"default","session_id":"…","workflow_name":"review",
//!  "timestamp":"2026-11-22T10:00:00.123Z","type":"message",
//!  "data":{"event":"llm_response","seq":9,"step":"main","goal":"review","agent":"critic",
//!          "role":"assistant","content":"…","tokens":{"input":812,"output":95},
//!          "latency":640,"model":"gpt-4o","cost_usd":0.003}}
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::events::ToolCallInfo;

pub const TELEMETRY_SCHEMA_VERSION: u32 = 1;

/// One telemetry message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TelemetryMessage {
    pub schema_version: u32,
    /// `agent.id` from the config (`default` when unset).
    pub agent_id: String,
    pub session_id: String,
    pub workflow_name: String,
    /// RFC 3339 UTC with milliseconds: the event's time.
    pub timestamp: String,
    #[serde(rename = "type")]
    pub kind: MessageKind,
    pub data: MessageData,
}

/// `message` for the conversation, `log` for everything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    Message,
    Log,
}

/// What the message says. Fields that do not apply are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MessageData {
    /// The event type this message came from (`llm_response`, `run_started`, …).
    pub event: String,
    /// The event's `seq` in its session.
    pub seq: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub step: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub goal: Option<String>,
    /// For messages: `user` (the goal put to the agent), `assistant` (a model
    /// answer) or `tool` (a tool result).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub role: Option<String>,
    /// The agent (persona) of a multi-agent goal; `synthesis` for the call that
    /// reconciles them.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent: Option<String>,
    /// Message text, or the log line. Left out of messages when content capture
    /// is off (`telemetry.capture_content = false`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub content: Option<String>,
    /// The tool calls of an assistant message (arguments only with content capture).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub tool_calls: Vec<ToolCallInfo>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tokens: Option<Tokens>,
    /// Milliseconds: a model call's latency, or a tool call's duration.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<String>,
    /// Loop or CONVERGE iteration, 1-based.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub iteration: Option<u32>,
    /// Logs: `debug`, `info`, `warn` or `error`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub level: Option<String>,
    /// A model call's estimated cost in USD, when its price is known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cost_usd: Option<f64>,
    /// A tool message's tool name.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool: Option<String>,
    /// A tool message's call id (matches an entry of the assistant's `tool_calls`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool_call_id: Option<String>,
    /// A tool message's result was an error (or a policy denial).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub is_error: bool,
}

/// Token counts of one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
}
