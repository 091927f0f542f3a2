//! A session's full transcript, for people (`sessions export ID --format
//! markdown`) and for programs (`--format json`).
//!
//! Both are pure functions of a session's [`SessionMeta`] and its events, so an
//! export is the same from either store and can be snapshot-tested on a fixed
//! event list (`fixtures/session/`). What this module is not: a second source of
//! truth. It reads nothing but what it is given and never reorders what happened,
//! except that the events of agents running concurrently within one goal are
//! grouped per agent (in the order the agents first spoke), so that each agent's
//! conversation reads as one piece.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::SessionMeta;
use agentfile_wire::events::{Event, EventBody, Usage};

/// Tool arguments and results longer than this (in characters) are cut in the
/// Markdown transcript, with a note; the JSON export always has them in full.
pub const MARKDOWN_TOOL_LIMIT: usize = 2_000;

/// The session, every event as stored, and a derived transcript: one entry per
/// thing a reader cares about (prompts, model replies, tool calls and results,
/// denials, approvals, loop iterations, outputs, the result), plus the final
/// `outputs` and `usage` when the run ended.
pub fn json(meta: &SessionMeta, events: &[Event]) -> Value {
    let transcript: Vec<Value> = events.iter().filter_map(transcript_entry).collect();
    let mut outputs = BTreeMap::new();
    let mut usage = None;
    for e in events {
        match &e.body {
            EventBody::GoalComplete { output, fields, .. } => {
                if let Some(goal) = &e.goal {
                    let value = if fields.is_empty() {
                        Value::String(output.clone())
                    } else {
                        json!(fields)
                    };
                    outputs.insert(goal.clone(), value);
                }
            }
            EventBody::RunComplete {
                outputs: final_outputs,
                usage: u,
            } => {
                outputs = final_outputs.clone();
                usage = Some(u.clone());
            }
            EventBody::RunFailed { usage: u, .. } | EventBody::RunCancelled { usage: u } => {
                usage = Some(u.clone());
            }
            _ => {}
        }
    }
    json!({
        "session": meta,
        "outputs": outputs,
        "usage": usage,
        "transcript": transcript,
        "events": events,
    })
}

fn transcript_entry(e: &Event) -> Option<Value> {
    let (kind, fields) = transcript_fields(e)?;
    let mut entry = json!({ "seq": e.seq, "ts": e.ts, "kind": kind });
    for (key, value) in [("step", &e.step), ("goal", &e.goal), ("agent", &e.agent)] {
        if let Some(v) = value {
            entry[key] = Value::String(v.clone());
        }
    }
    if let Some(i) = e.iteration {
        entry["iteration"] = json!(i);
    }
    if let (Value::Object(entry), Value::Object(fields)) = (&mut entry, fields) {
        entry.extend(fields);
    }
    Some(entry)
}

/// An event's transcript kind and its own fields; `None` for events the
/// transcript leaves out.
fn transcript_fields(e: &Event) -> Option<(&'static str, Value)> {
    let (kind, fields) = match &e.body {
        EventBody::RunStarted {
            resumed_from_seq, ..
        } => match resumed_from_seq {
            Some(seq) => ("resumed", json!({ "after_seq": seq })),
            None => return None,
        },
        EventBody::GoalStarted { outcome, agents } => (
            "prompt",
            json!({ "role": "user", "text": outcome, "agents": agents }),
        ),
        // Never stored; the `llm_response` holds the whole text.
        EventBody::LlmDelta { .. } => return None,
        EventBody::LlmResponse {
            model,
            text,
            tool_calls,
            input_tokens,
            output_tokens,
            cost_usd,
            ..
        } => (
            "assistant",
            json!({
                "role": "assistant", "model": model, "text": text, "tool_calls": tool_calls,
                "input_tokens": input_tokens, "output_tokens": output_tokens, "cost_usd": cost_usd,
            }),
        ),
        EventBody::ToolCall {
            id,
            tool,
            arguments,
        } => (
            "tool_call",
            json!({ "id": id, "tool": tool, "arguments": arguments }),
        ),
        EventBody::ToolResult {
            id,
            tool,
            content,
            is_error,
            duration_ms,
        } => (
            "tool_result",
            json!({ "role": "tool", "id": id, "tool": tool, "content": content,
                    "is_error": is_error, "duration_ms": duration_ms }),
        ),
        EventBody::PolicyDenied {
            id,
            tool,
            rule,
            reason,
        } => (
            "denied",
            json!({ "id": id, "tool": tool, "rule": rule, "reason": reason }),
        ),
        EventBody::ApprovalRequired { reason, .. } => {
            ("approval_required", json!({ "reason": reason }))
        }
        EventBody::ApprovalResolved { approved, note } => (
            "approval_resolved",
            json!({ "approved": approved, "note": note }),
        ),
        EventBody::LoopIteration { limit } => (
            "loop_iteration",
            json!({ "iteration": e.iteration, "limit": limit }),
        ),
        EventBody::GoalComplete {
            output,
            fields,
            converged,
            ..
        } => (
            "output",
            json!({ "output": output, "fields": fields, "converged": converged.map(|c| c.as_str()) }),
        ),
        EventBody::StepComplete {
            iterations, stop, ..
        } => match (iterations, stop) {
            (None, None) => return None,
            _ => (
                "loop_stopped",
                json!({ "iterations": iterations, "stop": stop.map(|s| s.as_str()) }),
            ),
        },
        EventBody::Warning { message } => ("warning", json!({ "message": message })),
        EventBody::Error { message } => ("error", json!({ "message": message })),
        EventBody::RunComplete { .. } => ("result", json!({ "status": "completed" })),
        EventBody::RunFailed {
            error,
            termination_reason,
            ..
        } => (
            "result",
            json!({ "status": "failed", "error": error, "termination_reason": termination_reason }),
        ),
        EventBody::RunCancelled { .. } => ("result", json!({ "status": "cancelled" })),
        EventBody::RunSuspended { events, .. } => (
            "result",
            json!({ "status": "suspended", "waiting_for": events }),
        ),
        EventBody::Artifact {
            path,
            bytes,
            sha256,
        } => (
            "artifact",
            json!({ "node": e.node, "path": path, "bytes": bytes, "sha256": sha256 }),
        ),
        EventBody::NodeComplete { output, next } => (
            "node_output",
            json!({ "node": e.node, "output": output, "next": next }),
        ),
        EventBody::NodeFailed {
            error,
            attempt,
            retry_in_ms,
        } => (
            "node_failed",
            json!({ "node": e.node, "error": error, "attempt": attempt, "retry_in_ms": retry_in_ms }),
        ),
        EventBody::Suspended {
            events,
            deadline_ms,
        } => (
            "suspended",
            json!({ "node": e.node, "events": events, "deadline_ms": deadline_ms }),
        ),
        EventBody::Signal { event, payload } => {
            ("signal", json!({ "event": event, "payload": payload }))
        }
        EventBody::Compensating { error, nodes } => {
            ("compensating", json!({ "error": error, "nodes": nodes }))
        }
        EventBody::StepStarted { .. }
        | EventBody::NodeStarted { .. }
        | EventBody::AgentStarted { .. }
        | EventBody::LlmRequest { .. } => return None,
    };
    Some((kind, fields))
}

/// A readable transcript: the session's facts, then per step, goal and agent
/// the model's text, tool calls with their arguments and results (long ones
/// fenced and cut with a note), denials, approvals, loop iterations and why each
/// loop stopped, each goal's output, and the result with its usage.
pub fn markdown(meta: &SessionMeta, events: &[Event]) -> String {
    let mut out = String::new();
    header(&mut out, meta, events);
    let mut at = Context::default();
    for e in group_agents(events) {
        at.enter(&mut out, e);
        render(&mut out, e);
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

fn header(out: &mut String, meta: &SessionMeta, events: &[Event]) {
    let _ = writeln!(out, "# Session `{}`: {}\n", meta.id, meta.workflow);
    let _ = writeln!(out, "- Workflow: `{}`", meta.path);
    let _ = writeln!(out, "- Workspace: `{}`", meta.workspace);
    if let Some(EventBody::RunStarted {
        provider, model, ..
    }) = events
        .iter()
        .map(|e| &e.body)
        .find(|b| matches!(b, EventBody::RunStarted { .. }))
    {
        let _ = writeln!(out, "- Model: `{model}` ({provider})");
    }
    let _ = writeln!(out, "- Status: {}", meta.status);
    let _ = writeln!(out, "- Created: {}", meta.created_at);
    let _ = writeln!(out, "- Updated: {}", meta.updated_at);
    let _ = writeln!(out, "- Events: {}", meta.last_seq);
    if meta.inputs.is_empty() {
        let _ = writeln!(out, "- Inputs: none");
    } else {
        let _ = writeln!(out, "- Inputs:");
        for (k, v) in &meta.inputs {
            let _ = writeln!(out, "  - `{k}`: {}", one_line(v));
        }
    }
    out.push('\n');
}

/// Within each stretch of events of one goal (same step, goal and iteration),
/// put each agent's events together, agents in the order they first appear.
/// Events of the goal itself (no agent) stay where they are relative to the
/// agents: those before the first agent's first event first, the rest last.
fn group_agents(events: &[Event]) -> Vec<&Event> {
    let mut out = Vec::with_capacity(events.len());
    let mut i = 0;
    while i < events.len() {
        let key = (&events[i].step, &events[i].goal, events[i].iteration);
        let mut j = i + 1;
        while j < events.len()
            && events[i].goal.is_some()
            && (&events[j].step, &events[j].goal, events[j].iteration) == key
            && !matches!(events[j].body, EventBody::RunStarted { .. })
        {
            j += 1;
        }
        let stretch = &events[i..j];
        let mut agents: Vec<&str> = Vec::new();
        for e in stretch {
            if let Some(a) = &e.agent
                && !agents.contains(&a.as_str())
            {
                agents.push(a);
            }
        }
        let mut seen_agent = false;
        let mut keyed: Vec<(usize, &Event)> = stretch
            .iter()
            .map(|e| {
                let rank = match &e.agent {
                    Some(a) => {
                        seen_agent = true;
                        1 + agents.iter().position(|x| x == a).unwrap_or(0)
                    }
                    None if !seen_agent => 0,
                    None => usize::MAX,
                };
                (rank, e)
            })
            .collect();
        keyed.sort_by_key(|(rank, _)| *rank);
        out.extend(keyed.into_iter().map(|(_, e)| e));
        i = j;
    }
    out
}

/// Where the transcript is, so headings are written only when it moves.
#[derive(Default)]
struct Context {
    step: Option<String>,
    goal: Option<(Option<String>, Option<u32>)>,
    agent: Option<String>,
}

impl Context {
    fn enter(&mut self, out: &mut String, e: &Event) {
        if let EventBody::RunStarted { .. } = e.body {
            *self = Context::default();
            return;
        }
        if e.step.is_some() && e.step != self.step {
            self.step = e.step.clone();
            self.goal = None;
            self.agent = None;
            if !matches!(e.body, EventBody::StepStarted { .. })
                && let Some(step) = &e.step
            {
                let _ = writeln!(out, "## Step `{step}`\n");
            }
        }
        if e.goal.is_none() {
            return;
        }
        let goal = (e.goal.clone(), e.iteration);
        if self.goal.as_ref() != Some(&goal) {
            self.goal = Some(goal);
            self.agent = None;
            if !matches!(e.body, EventBody::GoalStarted { .. })
                && let Some(name) = &e.goal
            {
                let _ = writeln!(out, "### Goal `{name}`{}\n", iteration(e.iteration));
            }
        }
        if e.agent.is_some() && e.agent != self.agent {
            self.agent = e.agent.clone();
            if !matches!(e.body, EventBody::AgentStarted { .. })
                && let Some(agent) = &e.agent
            {
                let _ = writeln!(out, "#### Agent `{agent}`\n");
            }
        }
    }
}

fn iteration(i: Option<u32>) -> String {
    i.map(|i| format!(" (iteration {i})")).unwrap_or_default()
}

fn render(out: &mut String, e: &Event) {
    match &e.body {
        EventBody::RunStarted {
            resumed_from_seq: Some(seq),
            ..
        } => {
            let _ = writeln!(out, "---\n\n**Resumed** after event {seq}.\n");
        }
        EventBody::RunStarted { .. } => {}
        EventBody::StepStarted { .. } => step_started(out, e),
        EventBody::GoalStarted { outcome, agents } => {
            let name = e.goal.as_deref().unwrap_or("?");
            let _ = writeln!(out, "### Goal `{name}`{}\n", iteration(e.iteration));
            quote(out, outcome);
            if agents.len() > 1 {
                let _ = writeln!(out, "Agents: {}.\n", code_list(agents));
            }
        }
        EventBody::AgentStarted { role } => {
            let agent = e.agent.as_deref().unwrap_or(role);
            if role == "synthesis" && agent == "synthesis" {
                out.push_str("#### Synthesis\n\n");
            } else if role == "synthesis" {
                let _ = writeln!(out, "#### Synthesis (`{agent}`)\n");
            } else {
                let _ = writeln!(out, "#### Agent `{agent}`\n");
            }
        }
        EventBody::LlmRequest { .. } | EventBody::LlmDelta { .. } => {}
        EventBody::LlmResponse { .. } => llm_response(out, e),
        EventBody::ToolCall {
            id,
            tool,
            arguments,
        } => {
            let _ = writeln!(out, "**Tool call** `{tool}` (`{id}`):\n");
            let pretty =
                serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string());
            fenced(out, "json", &pretty);
        }
        EventBody::ToolResult { .. } => tool_result(out, e),
        EventBody::PolicyDenied {
            id,
            tool,
            rule,
            reason,
        } => {
            let _ = writeln!(
                out,
                "**Denied** `{tool}` (`{id}`) by rule `{rule}`: {}\n",
                one_line(reason)
            );
        }
        EventBody::ApprovalRequired { reason, .. } => {
            let _ = writeln!(out, "**Approval required:** {}\n", one_line(reason));
        }
        EventBody::ApprovalResolved { approved, note } => {
            let verdict = if *approved { "Approved" } else { "Rejected" };
            let note = note
                .as_deref()
                .map(|n| format!(": {}", one_line(n)))
                .unwrap_or_default();
            let _ = writeln!(out, "**{verdict}**{note}\n");
        }
        EventBody::LoopIteration { limit } => {
            let i = e
                .iteration
                .map(|i| i.to_string())
                .unwrap_or_else(|| "?".into());
            let _ = writeln!(out, "**Iteration {i} of {limit}**\n");
        }
        EventBody::GoalComplete { .. } => goal_complete(out, e),
        EventBody::StepComplete { .. } => step_complete(out, e),
        EventBody::Warning { message } => {
            let _ = writeln!(out, "**Warning:** {}\n", one_line(message));
        }
        EventBody::Error { message } => {
            let _ = writeln!(out, "**Error:** {}\n", one_line(message));
        }
        EventBody::RunComplete { .. } => run_complete(out, e),
        EventBody::RunFailed {
            error,
            termination_reason,
            usage,
        } => {
            let _ = writeln!(
                out,
                "## Result: failed ({termination_reason})\n\n{}\n",
                one_line(error)
            );
            usage_line(out, usage);
        }
        EventBody::RunCancelled { usage } => {
            out.push_str("## Result: cancelled\n\n");
            usage_line(out, usage);
        }
        EventBody::RunSuspended { events, usage } => {
            let _ = writeln!(
                out,
                "## Result: suspended\n\nWaiting for: {}\n",
                events.join(", ")
            );
            usage_line(out, usage);
        }
        EventBody::NodeStarted { .. } => {}
        EventBody::Artifact { path, bytes, .. } => {
            let _ = writeln!(out, "**Artifact** `{path}` ({bytes} bytes)\n");
        }
        EventBody::NodeComplete { .. } => node_complete(out, e),
        EventBody::NodeFailed { .. } => node_failed(out, e),
        EventBody::Suspended { events, .. } => {
            let name = e.node.as_deref().unwrap_or("?");
            let _ = writeln!(
                out,
                "Step `{name}` suspended the run, waiting for: {}.\n",
                events.join(", ")
            );
        }
        EventBody::Signal { event, .. } => {
            let _ = writeln!(out, "Signal `{event}` delivered.\n");
        }
        EventBody::Compensating { error, nodes } => {
            let _ = writeln!(
                out,
                "**Compensating** after: {}; undoing {}.\n",
                one_line(error),
                nodes.join(", ")
            );
        }
    }
}

/// A step's heading and what it runs.
fn step_started(out: &mut String, e: &Event) {
    let EventBody::StepStarted { kind, goals, limit } = &e.body else {
        return;
    };
    let name = e.step.as_deref().unwrap_or("?");
    let limit = limit
        .map(|l| format!(", at most {l} iterations"))
        .unwrap_or_default();
    // A step of a graph (a tool step, a branch) has no goals: its heading
    // says what it is, and its events what it did.
    if goals.is_empty() {
        let _ = writeln!(out, "## Step `{name}` ({kind}{limit})\n");
        return;
    }
    let goals = code_list(goals);
    let what = match kind.as_str() {
        "run" => format!("Runs {goals}"),
        "loop" => format!("Loops over {goals}"),
        "converge" => format!("Converges {goals}"),
        other => format!("{other}: {goals}"),
    };
    let _ = writeln!(out, "## Step `{name}`\n\n{what}{limit}.\n");
}

/// A model's reply: its usage, its text, the tools it asked for.
fn llm_response(out: &mut String, e: &Event) {
    let EventBody::LlmResponse {
        model,
        turn,
        input_tokens,
        output_tokens,
        latency_ms,
        cost_usd,
        stop_reason,
        text,
        tool_calls,
    } = &e.body
    else {
        return;
    };
    let cost = cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default();
    let _ = writeln!(
        out,
        "**Model** (`{model}`, turn {turn}, {input_tokens} in / {output_tokens} out, \
             {}{cost}, {stop_reason}):\n",
        millis(*latency_ms)
    );
    if text.trim().is_empty() {
        out.push_str("*(no text)*\n\n");
    } else {
        quote(out, text);
    }
    if !tool_calls.is_empty() {
        let names: Vec<String> = tool_calls.iter().map(|c| c.name.clone()).collect();
        let _ = writeln!(out, "Requested tools: {}.\n", code_list(&names));
    }
}

/// A tool's result (or error), fenced.
fn tool_result(out: &mut String, e: &Event) {
    let EventBody::ToolResult {
        id,
        tool,
        content,
        is_error,
        duration_ms,
    } = &e.body
    else {
        return;
    };
    let what = if *is_error {
        "Tool error"
    } else {
        "Tool result"
    };
    let _ = writeln!(
        out,
        "**{what}** `{tool}` (`{id}`, {}):\n",
        millis(*duration_ms)
    );
    fenced(out, "text", content);
}

/// A goal's output, with its fields and why a loop stopped.
fn goal_complete(out: &mut String, e: &Event) {
    let EventBody::GoalComplete {
        output,
        fields,
        converged,
        ..
    } = &e.body
    else {
        return;
    };
    let name = e.goal.as_deref().unwrap_or("?");
    let _ = writeln!(out, "**Output of `{name}`:**\n");
    quote(out, output);
    if !fields.is_empty() {
        let pretty = serde_json::to_string_pretty(fields).unwrap_or_default();
        fenced_full(out, "json", &pretty);
    }
    if let Some(stop) = converged {
        let _ = writeln!(out, "Loop: {}.\n", stop.as_str());
    }
}

/// Why a looping step stopped, if it did.
fn step_complete(out: &mut String, e: &Event) {
    let EventBody::StepComplete {
        iterations, stop, ..
    } = &e.body
    else {
        return;
    };
    let name = e.step.as_deref().unwrap_or("?");
    match (iterations, stop) {
        (None, None) => {}
        (n, stop) => {
            let n = n
                .map(|n| format!(" after {n} iteration{}", plural(n)))
                .unwrap_or_default();
            let why = stop
                .map(|s| format!(": {}", s.as_str()))
                .unwrap_or_default();
            let _ = writeln!(out, "Step `{name}` stopped{n}{why}.\n");
        }
    }
}

/// The run's result: each output.
fn run_complete(out: &mut String, e: &Event) {
    let EventBody::RunComplete { outputs, usage } = &e.body else {
        return;
    };
    out.push_str("## Result: completed\n\n");
    for (goal, value) in outputs {
        let _ = writeln!(out, "### Output `{goal}`\n");
        match value {
            Value::String(s) => quote(out, s),
            other => {
                let pretty = serde_json::to_string_pretty(other).unwrap_or_default();
                fenced_full(out, "json", &pretty);
            }
        }
    }
    usage_line(out, usage);
}

/// A node's output.
fn node_complete(out: &mut String, e: &Event) {
    let EventBody::NodeComplete { output, .. } = &e.body else {
        return;
    };
    let name = e.node.as_deref().unwrap_or("?");
    let _ = writeln!(out, "**Output of step `{name}`:**\n");
    match output {
        Value::String(s) => quote(out, s),
        other => {
            let pretty = serde_json::to_string_pretty(other).unwrap_or_default();
            fenced_full(out, "json", &pretty);
        }
    }
}

/// A node's failed attempt.
fn node_failed(out: &mut String, e: &Event) {
    let EventBody::NodeFailed {
        error,
        attempt,
        retry_in_ms,
    } = &e.body
    else {
        return;
    };
    let name = e.node.as_deref().unwrap_or("?");
    let retry = retry_in_ms
        .map(|ms| format!("; retrying in {ms} ms"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "**Step `{name}` failed (attempt {attempt}){retry}:** {}\n",
        one_line(error)
    );
}

fn usage_line(out: &mut String, u: &Usage) {
    let cost = u
        .cost_usd
        .map(|c| format!("${c:.4}"))
        .unwrap_or_else(|| "cost unknown".into());
    let _ = writeln!(
        out,
        "Usage: {} input tokens, {} output tokens, {} model call{}, {} tool call{}, {cost}.\n",
        u.input_tokens,
        u.output_tokens,
        u.turns,
        plural(u.turns),
        u.tool_calls,
        plural(u.tool_calls)
    );
}

fn plural(n: impl Into<u64>) -> &'static str {
    if n.into() == 1 { "" } else { "s" }
}

fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

fn code_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Text that must stay on one line of a list item or sentence.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Model text and outputs as a block quote, so their own headings and lists do
/// not break the transcript's structure.
fn quote(out: &mut String, text: &str) {
    for line in text.trim_end().lines() {
        if line.is_empty() {
            out.push_str(">\n");
        } else {
            let _ = writeln!(out, "> {line}");
        }
    }
    out.push('\n');
}

/// A fenced block, cut to [`MARKDOWN_TOOL_LIMIT`] characters with a note.
fn fenced(out: &mut String, lang: &str, text: &str) {
    let total = text.chars().count();
    if total <= MARKDOWN_TOOL_LIMIT {
        return fenced_full(out, lang, text);
    }
    let cut: String = text.chars().take(MARKDOWN_TOOL_LIMIT).collect();
    fenced_full(out, lang, &cut);
    let _ = writeln!(
        out,
        "*(cut: showing the first {MARKDOWN_TOOL_LIMIT} of {total} characters; \
         `sessions export --format json` has all of it)*\n"
    );
}

/// A fenced block whose fence is longer than any run of backticks inside it.
fn fenced_full(out: &mut String, lang: &str, text: &str) {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let body = text.trim_end_matches('\n');
    let _ = writeln!(out, "{fence}{lang}\n{body}\n{fence}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_without_goals_is_headed_by_its_kind_not_an_empty_list() {
        let e: Event = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "session_id": "s", "seq": 2,
            "ts": "2026-01-01T00:00:00.000Z", "step": "look",
            "type": "step_started", "data": {"kind": "tool", "goals": []}
        }))
        .unwrap();
        let mut s = String::new();
        step_started(&mut s, &e);
        assert_eq!(s, "## Step `look` (tool)\n\n");
    }

    #[test]
    fn fences_outgrow_backticks() {
        let mut s = String::new();
        fenced_full(&mut s, "text", "a ```` b");
        assert!(s.starts_with("`````text\n"), "{s}");
    }

    #[test]
    fn long_tool_output_is_cut_on_a_char_boundary() {
        let mut s = String::new();
        fenced(&mut s, "text", &"é".repeat(MARKDOWN_TOOL_LIMIT + 10));
        assert!(s.contains(&format!(
            "first {MARKDOWN_TOOL_LIMIT} of {}",
            MARKDOWN_TOOL_LIMIT + 10
        )));
    }
}
