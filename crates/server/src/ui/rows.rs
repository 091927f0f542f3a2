//! An event as a row of the page's log: the line `sessions show` prints, or a
//! short description for the events it leaves out. The snapshot ([`super::api`])
//! and the live stream ([`super::sse`]) both send rows, so they read the same.

use agentfile_wire::events::{Event, EventBody};
use serde::Serialize;

/// A stored event as a line of the log; the whole event is fetched when a
/// person opens it.
#[derive(Serialize)]
pub(super) struct EventRow {
    pub seq: u64,
    pub ts: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub node: Option<String>,
    pub agent: Option<String>,
    pub line: String,
}

/// The line of the log for an event: what `sessions show` prints, or a
/// short description for the events it leaves out.
pub(super) fn event_row(e: &Event, printer: &crate::printer::Progress) -> EventRow {
    let line = printer
        .line(e)
        .map(|l| l.trim().to_owned())
        .unwrap_or_else(|| describe(&e.body));
    EventRow {
        seq: e.seq,
        ts: e.ts.clone(),
        kind: e.kind(),
        node: e.node.clone(),
        agent: e.agent.clone(),
        line: cut(&line, 400),
    }
}

fn describe(b: &EventBody) -> String {
    match b {
        EventBody::LlmRequest {
            model,
            turn,
            messages,
            tools,
            ..
        } => {
            format!("turn {turn}: {model}, {messages} messages, {tools} tools")
        }
        EventBody::LlmResponse {
            turn,
            input_tokens,
            output_tokens,
            text,
            tool_calls,
            ..
        } => {
            let calls: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
            let calls = if calls.is_empty() {
                String::new()
            } else {
                format!(" → {}", calls.join(", "))
            };
            format!("turn {turn}: {input_tokens} in / {output_tokens} out{calls}: {text}")
        }
        EventBody::ToolResult {
            tool,
            content,
            is_error,
            duration_ms,
            ..
        } => {
            let how = if *is_error { "failed" } else { "returned" };
            format!("{tool} {how} in {duration_ms} ms: {content}")
        }
        EventBody::AgentStarted { role } => format!("agent started ({role})"),
        EventBody::NodeStarted { kind } => format!("{kind} started"),
        EventBody::NodeComplete { .. } => "complete".to_owned(),
        EventBody::ApprovalRequired { reason, .. } => format!("waits for approval: {reason}"),
        EventBody::ApprovalResolved { approved, note } => format!(
            "{}{}",
            if *approved { "approved" } else { "rejected" },
            note.as_deref()
                .map(|n| format!(": {n}"))
                .unwrap_or_default()
        ),
        EventBody::Signal { event, .. } => format!("signal {event}"),
        EventBody::Suspended { events, .. } => format!("waits for {}", events.join(" | ")),
        EventBody::RunSuspended { events, .. } => format!("suspended until {}", events.join(" | ")),
        EventBody::Artifact { path, bytes, .. } => format!("artifact {path} ({bytes} bytes)"),
        EventBody::NodeFailed { error, attempt, .. } => {
            format!("attempt {attempt} failed: {error}")
        }
        EventBody::Compensating { error, .. } => format!("compensating: {error}"),
        other => other.kind().replace('_', " "),
    }
}

/// `s` cut to at most `max` characters, with an ellipsis when cut.
fn cut(s: &str, max: usize) -> String {
    let one_line: String = s.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max).collect();
    out.push('…');
    out
}
