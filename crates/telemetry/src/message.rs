//! Events to the seed's telemetry messages ([`TelemetryMessage`]).
//!
//! One event, one message. The conversation (`goal_started`, `llm_response`,
//! `tool_result`) becomes `type: "message"` with a role; every other event a
//! `type: "log"` line with a level. Content — goal outcomes, model answers, tool
//! arguments and results — is left out unless capture is on. Log lines never
//! carry model content, so they are the same either way.

use agentfile_wire::events::{Event, EventBody, ToolCallInfo, Usage};
use agentfile_wire::telemetry::{
    MessageData, MessageKind, TELEMETRY_SCHEMA_VERSION, TelemetryMessage, Tokens,
};

use super::RunInfo;

/// Builds messages for one run.
#[derive(Debug, Clone)]
pub struct Converter {
    pub agent_id: String,
    pub workflow_name: String,
    pub capture_content: bool,
}

impl Converter {
    pub fn new(info: &RunInfo, capture_content: bool) -> Converter {
        Converter {
            agent_id: info.agent_id.clone(),
            workflow_name: info.workflow.clone(),
            capture_content,
        }
    }

    /// The message for one event.
    pub fn message(&self, event: &Event) -> TelemetryMessage {
        let mut data = MessageData {
            event: event.kind().to_owned(),
            seq: event.seq,
            step: event.step.clone(),
            goal: event.goal.clone(),
            agent: event.agent.clone(),
            iteration: event.iteration,
            ..MessageData::default()
        };
        let content = |text: &str| self.capture_content.then(|| text.to_owned());
        let kind = match &event.body {
            EventBody::GoalStarted { outcome, .. } => {
                data.role = Some("user".into());
                data.content = content(outcome);
                MessageKind::Message
            }
            EventBody::LlmResponse {
                model,
                input_tokens,
                output_tokens,
                latency_ms,
                cost_usd,
                text,
                tool_calls,
                ..
            } => {
                data.role = Some("assistant".into());
                data.content = content(text);
                data.tool_calls = tool_calls
                    .iter()
                    .map(|c| ToolCallInfo {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: if self.capture_content {
                            c.arguments.clone()
                        } else {
                            serde_json::Value::Null
                        },
                    })
                    .collect();
                data.tokens = Some(Tokens {
                    input: *input_tokens,
                    output: *output_tokens,
                });
                data.latency = Some(*latency_ms);
                data.model = Some(model.clone());
                data.cost_usd = *cost_usd;
                MessageKind::Message
            }
            EventBody::ToolResult {
                id,
                tool,
                content: result,
                is_error,
                duration_ms,
            } => {
                data.role = Some("tool".into());
                data.content = content(result);
                data.tool = Some(tool.clone());
                data.tool_call_id = Some(id.clone());
                data.is_error = *is_error;
                data.latency = Some(*duration_ms);
                MessageKind::Message
            }
            other => {
                let (level, line) = log_line(other);
                data.level = Some(level.as_str().to_owned());
                data.content = Some(line);
                match other {
                    EventBody::RunStarted { model, .. } | EventBody::LlmRequest { model, .. } => {
                        data.model = Some(model.clone());
                    }
                    EventBody::ToolCall { id, tool, .. }
                    | EventBody::PolicyDenied { id, tool, .. } => {
                        data.tool = Some(tool.clone());
                        data.tool_call_id = Some(id.clone());
                        data.is_error = matches!(other, EventBody::PolicyDenied { .. });
                    }
                    EventBody::RunComplete { usage, .. }
                    | EventBody::RunFailed { usage, .. }
                    | EventBody::RunCancelled { usage } => {
                        data.tokens = Some(Tokens {
                            input: usage.input_tokens,
                            output: usage.output_tokens,
                        });
                        data.cost_usd = usage.cost_usd;
                    }
                    _ => {}
                }
                MessageKind::Log
            }
        };
        TelemetryMessage {
            schema_version: TELEMETRY_SCHEMA_VERSION,
            agent_id: self.agent_id.clone(),
            session_id: event.session_id.clone(),
            workflow_name: self.workflow_name.clone(),
            timestamp: event.ts.clone(),
            kind,
            data,
        }
    }
}

/// How much a log line matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// The level of an event as a log line.
pub fn level(body: &EventBody) -> Level {
    match body {
        EventBody::LlmRequest { .. } | EventBody::ToolCall { .. } => Level::Debug,
        EventBody::ToolResult { is_error: true, .. }
        | EventBody::PolicyDenied { .. }
        | EventBody::Warning { .. }
        | EventBody::RunCancelled { .. } => Level::Warn,
        EventBody::Error { .. } | EventBody::RunFailed { .. } => Level::Error,
        _ => Level::Info,
    }
}

/// A one-line, content-free description of an event, with its level.
pub fn log_line(body: &EventBody) -> (Level, String) {
    let line = match body {
        EventBody::RunStarted {
            workflow,
            provider,
            model,
            resumed_from_seq,
            ..
        } => format!(
            "run started: workflow `{workflow}` on {provider}/{model}{}",
            resumed_from_seq
                .map(|s| format!(", resumed after event {s}"))
                .unwrap_or_default()
        ),
        EventBody::StepStarted { kind, goals, limit } => format!(
            "step started: {kind} of {}{}",
            goals.join(", "),
            limit.map(|l| format!(" within {l}")).unwrap_or_default()
        ),
        EventBody::GoalStarted { agents, .. } => {
            format!("goal started with agents: {}", agents.join(", "))
        }
        EventBody::AgentStarted { role } => format!("agent `{role}` started"),
        EventBody::LlmRequest {
            model,
            turn,
            messages,
            tools,
            ..
        } => format!("model call {turn} to {model}: {messages} messages, {tools} tools"),
        EventBody::LlmDelta { turn, text, .. } => {
            format!("model call {turn}: {} more bytes", text.len())
        }
        EventBody::LlmResponse {
            model,
            turn,
            input_tokens,
            output_tokens,
            latency_ms,
            stop_reason,
            tool_calls,
            ..
        } => format!(
            "model answer {turn} from {model}: {input_tokens} in / {output_tokens} out tokens, {latency_ms} ms, {} tool calls, stop {stop_reason}",
            tool_calls.len()
        ),
        EventBody::ToolCall { id, tool, .. } => format!("tool call `{tool}` ({id})"),
        EventBody::ToolResult {
            id,
            tool,
            is_error,
            duration_ms,
            ..
        } => format!(
            "tool `{tool}` ({id}) {} in {duration_ms} ms",
            if *is_error { "failed" } else { "done" }
        ),
        EventBody::PolicyDenied {
            tool, rule, reason, ..
        } => format!("policy denied `{tool}` (rule {rule}): {reason}"),
        EventBody::ApprovalRequired { reason, .. } => format!("approval required: {reason}"),
        EventBody::ApprovalResolved { approved, note } => format!(
            "{}{}",
            if *approved { "approved" } else { "rejected" },
            note.as_deref()
                .map(|n| format!(": {n}"))
                .unwrap_or_default()
        ),
        EventBody::LoopIteration { limit } => format!("loop iteration (limit {limit})"),
        EventBody::GoalComplete {
            tool_calls,
            converged,
            ..
        } => format!(
            "goal complete after {tool_calls} tool calls{}",
            converged
                .map(|c| format!(", {}", c.as_str()))
                .unwrap_or_default()
        ),
        EventBody::StepComplete {
            iterations, stop, ..
        } => match (iterations, stop) {
            (Some(n), Some(s)) => format!("step complete after {n} iterations, {}", s.as_str()),
            (Some(n), None) => format!("step complete after {n} iterations"),
            (None, Some(s)) => format!("step complete, {}", s.as_str()),
            (None, None) => "step complete".to_owned(),
        },
        EventBody::Warning { message } => message.clone(),
        EventBody::Error { message } => message.clone(),
        EventBody::RunComplete { usage, .. } => format!("run complete: {}", usage_words(usage)),
        EventBody::RunFailed {
            error,
            termination_reason,
            usage,
        } => format!(
            "run failed ({termination_reason}): {error}; {}",
            usage_words(usage)
        ),
        EventBody::RunCancelled { usage } => format!("run cancelled: {}", usage_words(usage)),
        EventBody::RunSuspended { events, usage } => format!(
            "run suspended, waiting for {}: {}",
            events.join(", "),
            usage_words(usage)
        ),
        EventBody::NodeStarted { kind } => format!("{kind} step started"),
        EventBody::Artifact { path, bytes, .. } => format!("artifact {path} ({bytes} bytes)"),
        EventBody::NodeComplete { next, .. } => match next {
            Some(n) => format!("step complete; next: {n}"),
            None => "step complete".to_owned(),
        },
        EventBody::NodeFailed {
            attempt,
            retry_in_ms,
            ..
        } => match retry_in_ms {
            Some(ms) => format!("step failed (attempt {attempt}); retrying in {ms} ms"),
            None => format!("step failed (attempt {attempt})"),
        },
        EventBody::Suspended { events, .. } => format!("suspended until {}", events.join(" or ")),
        EventBody::Signal { event, .. } => format!("signal `{event}` delivered"),
        EventBody::Compensating { nodes, .. } => {
            format!("compensating: undoing {} step(s)", nodes.len())
        }
    };
    (level(body), line)
}

fn usage_words(u: &Usage) -> String {
    format!(
        "{} in / {} out tokens, {} model calls, {} tool calls{}",
        u.input_tokens,
        u.output_tokens,
        u.turns,
        u.tool_calls,
        u.cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(body: EventBody) -> Event {
        Event {
            schema_version: 1,
            session_id: "s1".into(),
            seq: 9,
            ts: "2026-11-22T10:00:00.123Z".into(),
            step: Some("main".into()),
            goal: Some("review".into()),
            agent: Some("critic".into()),
            iteration: Some(2),
            node: None,
            node_kind: None,
            replayed: false,
            body,
        }
    }

    fn converter(capture: bool) -> Converter {
        Converter {
            agent_id: "bot".into(),
            workflow_name: "wf".into(),
            capture_content: capture,
        }
    }

    fn answer() -> Event {
        event(EventBody::LlmResponse {
            model: "gpt-4o".into(),
            turn: 1,
            input_tokens: 812,
            output_tokens: 95,
            latency_ms: 640,
            cost_usd: Some(0.003),
            stop_reason: "tool_calls".into(),
            text: "Looking.".into(),
            tool_calls: vec![ToolCallInfo {
                id: "c1".into(),
                name: "read".into(),
                arguments: json!({"path": "secret-plan.md"}),
            }],
        })
    }

    #[test]
    fn a_model_answer_is_an_assistant_message_in_the_seed_shape() {
        let m = converter(true).message(&answer());
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({
                "schema_version": 1, "agent_id": "bot", "session_id": "s1",
                "workflow_name": "wf", "timestamp": "2026-11-22T10:00:00.123Z",
                "type": "message",
                "data": {
                    "event": "llm_response", "seq": 9, "step": "main", "goal": "review",
                    "role": "assistant", "agent": "critic", "content": "Looking.",
                    "tool_calls": [{"id": "c1", "name": "read", "arguments": {"path": "secret-plan.md"}}],
                    "tokens": {"input": 812, "output": 95}, "latency": 640, "model": "gpt-4o",
                    "iteration": 2, "cost_usd": 0.003
                }
            })
        );
    }

    #[test]
    fn without_capture_no_content_leaves() {
        let c = converter(false);
        let m = c.message(&answer());
        assert_eq!(m.data.content, None);
        assert_eq!(m.data.tool_calls[0].arguments, serde_json::Value::Null);
        assert_eq!(m.data.tool_calls[0].name, "read");
        let t = c.message(&event(EventBody::ToolResult {
            id: "c1".into(),
            tool: "read".into(),
            content: "the plan".into(),
            is_error: false,
            duration_ms: 3,
        }));
        assert_eq!(t.data.content, None);
        assert_eq!(t.data.role.as_deref(), Some("tool"));
        let g = c.message(&event(EventBody::GoalStarted {
            outcome: "Review the plan".into(),
            agents: vec!["critic".into()],
        }));
        assert_eq!(g.data.content, None);
        let text = serde_json::to_string(&[m, t, g]).unwrap();
        assert!(
            !text.contains("secret-plan") && !text.contains("the plan"),
            "{text}"
        );
    }

    #[test]
    fn other_events_are_log_lines_with_levels() {
        let c = converter(false);
        let denied = c.message(&event(EventBody::PolicyDenied {
            id: "c2".into(),
            tool: "bash".into(),
            rule: "bash.deny".into(),
            reason: "rm is denied".into(),
        }));
        assert_eq!(denied.kind, MessageKind::Log);
        assert_eq!(denied.data.level.as_deref(), Some("warn"));
        assert!(denied.data.is_error);
        assert_eq!(
            denied.data.content.as_deref(),
            Some("policy denied `bash` (rule bash.deny): rm is denied")
        );
        let done = c.message(&event(EventBody::RunComplete {
            outputs: Default::default(),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                cost_usd: None,
                turns: 2,
                tool_calls: 1,
            },
        }));
        assert_eq!(done.data.level.as_deref(), Some("info"));
        assert_eq!(
            done.data.tokens,
            Some(Tokens {
                input: 10,
                output: 5
            })
        );
        let failed = c.message(&event(EventBody::RunFailed {
            error: "boom".into(),
            termination_reason: agentfile_wire::events::TerminationReason::Error,
            usage: Usage::default(),
        }));
        assert_eq!(failed.data.level.as_deref(), Some("error"));
    }
}
