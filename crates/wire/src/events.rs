//! Run events (CONTRACT §5): one ordered stream per session.
//!
//! The same objects appear in `--output stream-json`, JSON-RPC `event`
//! notifications, MCP progress notifications, the session store and telemetry.
//! `seq` is dense and increasing per session, so a consumer that saw `seq` N can
//! ask for everything after N.
//!
//! ```json
//! {"schema_version":1,"session_id":"…","seq":7,"ts":"2026-11-22T10:00:00.123Z","type":"tool_call",
//!  "step":"implementation","goal":"fix","agent":"creative","iteration":2,"data":{…}}
//! ```

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const EVENT_SCHEMA_VERSION: u32 = 1;

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    pub schema_version: u32,
    pub session_id: String,
    /// Dense, increasing per session, starting at 1.
    pub seq: u64,
    /// RFC 3339 UTC with milliseconds.
    pub ts: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub step: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub goal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent: Option<String>,
    /// Loop or CONVERGE iteration, 1-based.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub iteration: Option<u32>,
    /// The plan node this event belongs to, as a path from the root
    /// (`review/fixes[3]/apply`, `refine#2/evaluate`): stable across runs of
    /// one plan, so resume finds completed work by it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub node: Option<String>,
    /// That node's kind (`goal`, `tool`, `map`, …).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub node_kind: Option<String>,
    /// Copied from another session's journal by a fork (`sessions fork`), not
    /// produced by this run: its node completed there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
    #[serde(flatten)]
    pub body: EventBody,
}

impl Event {
    /// The `type` field, as written on the wire.
    pub fn kind(&self) -> &'static str {
        self.body.kind()
    }
}

/// Token and cost totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Estimated; `None` while any call's model had no known price.
    pub cost_usd: Option<f64>,
    /// Model calls made.
    pub turns: u64,
    pub tool_calls: u64,
}

/// Why a loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoopStop {
    /// The model signalled completion (the `signal_done` tool, or `CONVERGED`).
    Explicit,
    /// An iteration made no tool calls.
    NoToolCalls,
    /// An iteration's outputs equalled the previous iteration's.
    Unchanged,
    /// WITHIN was reached without converging.
    Limit,
}

impl LoopStop {
    pub fn as_str(self) -> &'static str {
        match self {
            LoopStop::Explicit => "converged: explicit",
            LoopStop::NoToolCalls => "converged: no_tool_calls",
            LoopStop::Unchanged => "converged: unchanged",
            LoopStop::Limit => "limit",
        }
    }
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallInfo {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
}

/// The trigger that started a run (`run_started.trigger`, CONTRACT §15).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunTrigger {
    /// The trigger's id, `<workflow-id>#<index>`.
    pub id: String,
    /// `schedule`, `webhook`, `event` or `manual`.
    pub kind: String,
    /// When the daemon fired it (RFC 3339 UTC).
    pub fired_at: String,
    /// The scheduled instant a schedule fired for (RFC 3339 UTC).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scheduled_for: Option<String>,
    /// The webhook delivery's id.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivery_id: Option<String>,
    /// The event's id.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub event_id: Option<String>,
}

/// The session and node a forked run comes from (`run_started.forked_from`,
/// CONTRACT §19).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ForkedFrom {
    /// The session whose journal the completed nodes were copied from.
    pub session: String,
    /// The node (by node path) this run runs live from.
    pub node: String,
}

/// The OCI package a run's workflow came from (`run_started.package`,
/// CONTRACT §20).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PackageRef {
    /// The reference as given (`HOST/REPO:TAG`, or with `@sha256:…`).
    #[serde(rename = "ref")]
    pub reference: String,
    /// The manifest digest that ran (`sha256:…`): an upgrade of the
    /// workflow is another digest.
    pub digest: String,
    /// The trusted key whose signature was checked before the run, when
    /// one was required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

/// What the kernel sandbox of a run's programs enforces (CONTRACT §16).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SandboxInfo {
    /// Whether programs run in the sandbox.
    pub enforced: bool,
    /// How files are held: `landlock (ABI 7)`, or `none`.
    pub fs: String,
    /// How the network is held: `none` (no network), `proxy ([web_fetch]
    /// hosts)`, with `, loopback ports …` when some are forwarded; `host`
    /// when not held.
    pub net: String,
    /// Why it is not enforced.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
}

/// What happened, by type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum EventBody {
    /// The run began: the workflow, its inputs, the provider and model, the
    /// workspace, and what the sandbox enforces. Always the first event of a run
    /// (and of each resume).
    RunStarted {
        workflow: String,
        path: String,
        inputs: BTreeMap<String, String>,
        provider: String,
        model: String,
        /// Where model calls go (the provider's base URL), when known.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        endpoint: Option<String>,
        workspace: String,
        /// Set when this run continues an earlier, interrupted one.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        resumed_from_seq: Option<u64>,
        /// The plan's fingerprint: a resume against a plan with another one is
        /// refused unless forced.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        fingerprint: Option<String>,
        /// A digest per top-level step, goal and agent, to say what changed.
        #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
        digests: BTreeMap<String, String>,
        /// The trigger that started the run, for runs the daemon starts.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        trigger: Option<Box<RunTrigger>>,
        /// What the kernel sandbox of the run's programs enforces.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        sandbox: Option<Box<SandboxInfo>>,
        /// Set when this run is a fork: the session it was forked from and the
        /// node it runs live from.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        forked_from: Option<Box<ForkedFrom>>,
        /// Set when this run replays another session (`sessions replay`):
        /// every model answer and tool result comes from that session's journal.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        replay_of: Option<String>,
        /// Set when the workflow came from an OCI package: its reference and
        /// the digest that ran.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        package: Option<Box<PackageRef>>,
    },
    /// A top-level step (`RUN`, `LOOP`, a workflow step) began.
    StepStarted {
        kind: String,
        goals: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        limit: Option<u32>,
    },
    /// A goal began, with its outcome filled in and the agents that pursue it.
    GoalStarted {
        /// The outcome with variables filled in.
        outcome: String,
        agents: Vec<String>,
    },
    /// An agent began its part of a goal (or the synthesis of several).
    AgentStarted {
        /// `synthesis` for the call that reconciles several agents.
        role: String,
    },
    /// A request to the model: its turn, the messages and the tools offered.
    LlmRequest {
        model: String,
        turn: u32,
        messages: usize,
        tools: usize,
        /// A digest of each part of the request (`system`, `messages`,
        /// `tools`, and `max_tokens`/`temperature` when set): a replay
        /// compares them to say which part of a request changed.
        #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
        digests: BTreeMap<String, String>,
    },
    /// A piece of the model's answer as it streams in. Transient: sent to live
    /// consumers (stream-json, JSON-RPC notifications, MCP progress, the
    /// terminal) but never stored, so it carries the `seq` of the last stored
    /// event and is not returned by `event` or replayed on resume; the stored
    /// `llm_response` holds the whole text.
    LlmDelta {
        turn: u32,
        text: String,
        /// The call is being retried: discard this turn's earlier deltas.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        restart: bool,
    },
    /// The model's answer to one request: tokens, latency, cost, why it stopped.
    LlmResponse {
        model: String,
        turn: u32,
        input_tokens: u64,
        output_tokens: u64,
        latency_ms: u64,
        cost_usd: Option<f64>,
        stop_reason: String,
        text: String,
        tool_calls: Vec<ToolCallInfo>,
    },
    /// The model (or a tool step) called a tool, after the policy allowed it.
    ToolCall {
        id: String,
        tool: String,
        arguments: serde_json::Value,
    },
    /// A tool call's result: what it returned, whether it was an error, how long it took.
    ToolResult {
        id: String,
        tool: String,
        content: String,
        is_error: bool,
        duration_ms: u64,
    },
    /// The policy refused a tool call, naming the rule; the call did not run.
    PolicyDenied {
        id: String,
        tool: String,
        rule: String,
        reason: String,
    },
    /// The run waits for a human decision (`approve`, `sessions approve`).
    ApprovalRequired {
        reason: String,
        /// When an unanswered request times out (Unix milliseconds); it holds
        /// across restarts.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        deadline_ms: Option<u64>,
    },
    /// The decision on the approval the run waited for.
    ApprovalResolved {
        approved: bool,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        note: Option<String>,
    },
    /// A `LOOP` or `CONVERGE` began another iteration (`iteration` on the event).
    LoopIteration { limit: u32 },
    /// A goal finished, with its output and structured fields.
    GoalComplete {
        output: String,
        /// Structured fields (`-> a, b`), when the goal declares them.
        #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
        fields: BTreeMap<String, serde_json::Value>,
        /// For CONVERGE goals: why the refinement stopped.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        converged: Option<LoopStop>,
        /// Tool calls the goal made (convergence of loops, and resume, use it).
        #[serde(default)]
        tool_calls: u64,
        /// The model called `signal_done` during this goal.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        done: bool,
    },
    /// A top-level step finished: its iterations, why a loop stopped, its output.
    StepComplete {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        iterations: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        stop: Option<LoopStop>,
        /// The step's output, for steps that are not DSL RUN/LOOP steps.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        output: Option<serde_json::Value>,
        /// Where the run went next, when the step routed (branch, approval).
        #[serde(skip_serializing_if = "Option::is_none", default)]
        next: Option<String>,
    },
    /// A plan node below the top level began (goals have `goal_started`).
    NodeStarted { kind: String },
    /// A plan node below the top level finished; its output is what later
    /// nodes read as `$steps.<id>`.
    NodeComplete {
        output: serde_json::Value,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        next: Option<String>,
    },
    /// A file a node wrote for the run's user (workflow.yaml's `produces`),
    /// or found in the folder a goal was to fill.
    Artifact {
        /// Relative to the run's root (the workflow's folder).
        path: String,
        bytes: u64,
        /// SHA-256 of the contents, hex.
        sha256: String,
    },
    /// An attempt of a node failed; it is retried after `retry_in_ms`, or
    /// (when absent) the failure stands.
    NodeFailed {
        error: String,
        attempt: u32,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        retry_in_ms: Option<u64>,
    },
    /// A suspend node is waiting for one of `events` (CONTRACT §9).
    Suspended {
        events: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        deadline_ms: Option<u64>,
    },
    /// A signal was delivered to the session (`sessions signal`, JSON-RPC or
    /// MCP `signal`); a suspend node waiting for `event` takes it.
    Signal {
        event: String,
        #[serde(skip_serializing_if = "serde_json::Value::is_null", default)]
        payload: serde_json::Value,
    },
    /// A node failed for good: the completed nodes' compensations run, in
    /// reverse completion order, before the run fails.
    Compensating { error: String, nodes: Vec<String> },
    /// Something the user should know that did not stop the run.
    Warning { message: String },
    /// An error the run went on after (an exporter that failed, a tripwire that undid a change).
    Error { message: String },
    /// The run finished: the workflow's outputs and the usage totals. Terminal.
    RunComplete {
        outputs: BTreeMap<String, serde_json::Value>,
        usage: Usage,
    },
    /// The run failed: the error, why it ended, the usage totals. Terminal.
    RunFailed {
        error: String,
        termination_reason: TerminationReason,
        usage: Usage,
    },
    /// The run was cancelled (`cancel`, Ctrl-C). Terminal.
    RunCancelled { usage: Usage },
    /// The run waits at a suspend node; a signal resumes it.
    RunSuspended { events: Vec<String>, usage: Usage },
}

impl EventBody {
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::RunStarted { .. } => "run_started",
            EventBody::StepStarted { .. } => "step_started",
            EventBody::GoalStarted { .. } => "goal_started",
            EventBody::AgentStarted { .. } => "agent_started",
            EventBody::LlmRequest { .. } => "llm_request",
            EventBody::LlmDelta { .. } => "llm_delta",
            EventBody::LlmResponse { .. } => "llm_response",
            EventBody::ToolCall { .. } => "tool_call",
            EventBody::ToolResult { .. } => "tool_result",
            EventBody::PolicyDenied { .. } => "policy_denied",
            EventBody::ApprovalRequired { .. } => "approval_required",
            EventBody::ApprovalResolved { .. } => "approval_resolved",
            EventBody::LoopIteration { .. } => "loop_iteration",
            EventBody::GoalComplete { .. } => "goal_complete",
            EventBody::StepComplete { .. } => "step_complete",
            EventBody::NodeStarted { .. } => "node_started",
            EventBody::NodeComplete { .. } => "node_complete",
            EventBody::Artifact { .. } => "artifact",
            EventBody::NodeFailed { .. } => "node_failed",
            EventBody::Suspended { .. } => "suspended",
            EventBody::Signal { .. } => "signal",
            EventBody::Compensating { .. } => "compensating",
            EventBody::Warning { .. } => "warning",
            EventBody::Error { .. } => "error",
            EventBody::RunComplete { .. } => "run_complete",
            EventBody::RunFailed { .. } => "run_failed",
            EventBody::RunCancelled { .. } => "run_cancelled",
            EventBody::RunSuspended { .. } => "run_suspended",
        }
    }

    /// True for events that are never stored (`llm_delta`).
    pub fn is_transient(&self) -> bool {
        matches!(self, EventBody::LlmDelta { .. })
    }

    /// True for the three events that end a run.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            EventBody::RunComplete { .. }
                | EventBody::RunFailed { .. }
                | EventBody::RunCancelled { .. }
                | EventBody::RunSuspended { .. }
        )
    }
}

/// Why a run ended, as `run_failed` and every result say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TerminationReason {
    Completed,
    Cancelled,
    /// A step or goal failed.
    Error,
    MaxTurns,
    MaxTokens,
    MaxCost,
    Timeout,
    ApprovalDenied,
    /// Nobody could be asked for an approval; the session waits for one.
    ApprovalUnavailable,
    /// A tool step's call was refused by the policy.
    PolicyDenied,
    LoopLimit,
    /// The run waits at a suspend step for a signal.
    Suspended,
}

impl TerminationReason {
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationReason::Completed => "completed",
            TerminationReason::Cancelled => "cancelled",
            TerminationReason::Error => "error",
            TerminationReason::MaxTurns => "max_turns",
            TerminationReason::MaxTokens => "max_tokens",
            TerminationReason::MaxCost => "max_cost",
            TerminationReason::Timeout => "timeout",
            TerminationReason::ApprovalDenied => "approval_denied",
            TerminationReason::ApprovalUnavailable => "approval_unavailable",
            TerminationReason::PolicyDenied => "policy_denied",
            TerminationReason::LoopLimit => "loop_limit",
            TerminationReason::Suspended => "suspended",
        }
    }

    /// The process exit code a run that ended this way has (CONTRACT §3).
    pub fn exit_code(self) -> i32 {
        use super::exit;
        match self {
            TerminationReason::Completed => exit::OK,
            TerminationReason::Cancelled => exit::CANCELLED,
            TerminationReason::Error => exit::FAILED,
            TerminationReason::MaxTurns
            | TerminationReason::MaxTokens
            | TerminationReason::MaxCost
            | TerminationReason::Timeout => exit::BUDGET,
            TerminationReason::ApprovalDenied
            | TerminationReason::ApprovalUnavailable
            | TerminationReason::PolicyDenied => exit::POLICY,
            TerminationReason::LoopLimit => exit::LOOP_LIMIT,
            TerminationReason::Suspended => exit::SUSPENDED,
        }
    }
}

impl std::fmt::Display for TerminationReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The final result of a run (`--output json`, the last line of `stream-json`,
/// JSON-RPC `run`'s result).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunResult {
    #[serde(rename = "type")]
    pub kind: String,
    pub session_id: String,
    /// `completed`, `failed` or `cancelled`.
    pub status: String,
    /// Each goal's output: its text, or an object of its `-> fields`.
    pub outputs: BTreeMap<String, serde_json::Value>,
    pub usage: Usage,
    pub termination_reason: TerminationReason,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// The process exit code the CLI uses for this result (CONTRACT §3).
    pub exit_code: i32,
    /// A suspended run: the events it waits for (`signal` one to resume it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<String>,
}

/// Format a time as RFC 3339 UTC with milliseconds (`2026-11-22T10:00:00.123Z`).
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let millis = d.subsec_millis();
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_341_600_123);
        assert_eq!(rfc3339(t), "2026-11-22T10:00:00.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn wire_shape() {
        let e = Event {
            schema_version: 1,
            session_id: "s".into(),
            seq: 7,
            ts: "t".into(),
            step: Some("impl".into()),
            goal: Some("fix".into()),
            agent: None,
            iteration: Some(2),
            node: None,
            node_kind: None,
            replayed: false,
            body: EventBody::ToolCall {
                id: "c1".into(),
                tool: "bash".into(),
                arguments: serde_json::json!({"command": "ls"}),
            },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "tool_call");
        assert_eq!(v["data"]["tool"], "bash");
        assert_eq!(v["iteration"], 2);
        assert!(v.get("agent").is_none());
        assert!(v.get("replayed").is_none(), "only when true");
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);

        // A fork's copied event says so; read back, it still does.
        let copied = Event {
            replayed: true,
            ..e
        };
        let v = serde_json::to_value(&copied).unwrap();
        assert_eq!(v["replayed"], true);
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, copied);
    }
}
