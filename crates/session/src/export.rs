//! A session's full transcript, for people (`sessions export ID --format
//! markdown`) and for programs (`--format json`).
//!
//! Both are pure functions of a session's [`SessionMeta`] and its events, so an
//! export is the same from either store and can be snapshot-tested on a fixed
//! event list (`fixtures/session/`). What this module is not: a second source of
//! truth. It reads nothing but what it is given and never reorders what happened,
//! except that the Markdown groups the events of what ran at once — the agents
//! of one goal, the branches of a parallel step, the items of a map — each in
//! the order it first appeared, so that each step, goal and agent has one
//! section and each conversation reads as one piece.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::SessionMeta;
use agentfile_wire::events::{Event, EventBody, Usage};

/// The provider `run_started` names for a run that asks no model.
const NO_MODEL: &str = "none";

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
    for e in transcript_order(events) {
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
    // A run of tools alone asks no model: its provider is `none`.
    if let Some(EventBody::RunStarted {
        provider, model, ..
    }) = events
        .iter()
        .map(|e| &e.body)
        .find(|b| matches!(b, EventBody::RunStarted { .. }))
        && provider != NO_MODEL
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

/// The events in the transcript's order: what ran at once (the agents of one
/// goal, the branches of a parallel step, the items of a map) each read as
/// one piece, so that a heading is written once. Every event has a place in
/// the run's tree ([`place`]); at each level, an event of the level itself
/// stays where it happened and each part below it is written whole where
/// it first appeared. Things that ran one after another come out as they
/// were; a resumed run's events stay after the resumption.
fn transcript_order(events: &[Event]) -> Vec<&Event> {
    let mut out = Vec::with_capacity(events.len());
    let mut run: Vec<(&Event, Vec<String>)> = Vec::new();
    for e in events {
        if matches!(e.body, EventBody::RunStarted { .. }) && !run.is_empty() {
            nest(std::mem::take(&mut run), 0, &mut out);
        }
        run.push((e, place(e)));
    }
    nest(run, 0, &mut out);
    out
}

/// Where an event is in the run's tree, from the top: its step, the node
/// path below the step in a graph (`fan/left/look`, `each[0]/say`,
/// `again#1/relook`), its goal with the iteration, its agent. Empty for the
/// run's own events.
fn place(e: &Event) -> Vec<String> {
    let Some(step) = &e.step else {
        return Vec::new();
    };
    let mut at = vec![format!("step {step}")];
    if let Some(node) = &e.node {
        let mut parts = node.split('/').peekable();
        // A top-level node's path starts with its step's id.
        parts.next_if(|p| p == step);
        at.extend(parts.map(|p| format!("node {p}")));
    }
    if let Some(goal) = &e.goal {
        at.push(format!("goal {goal} {:?}", e.iteration));
    }
    if let Some(agent) = &e.agent {
        at.push(format!("agent {agent}"));
    }
    at
}

/// Write `events` (all below the same place, `depth` levels down) in the
/// transcript's order: those of this level where they are, each part one
/// level down whole where it first appeared.
fn nest<'a>(events: Vec<(&'a Event, Vec<String>)>, depth: usize, out: &mut Vec<&'a Event>) {
    enum Item<'a> {
        Here(&'a Event),
        Below(Vec<(&'a Event, Vec<String>)>),
    }
    let mut items: Vec<Item<'a>> = Vec::new();
    let mut below: BTreeMap<String, usize> = BTreeMap::new();
    for (e, at) in events {
        let Some(key) = at.get(depth).cloned() else {
            items.push(Item::Here(e));
            continue;
        };
        match below.get(&key) {
            Some(&i) => {
                if let Item::Below(part) = &mut items[i] {
                    part.push((e, at));
                }
            }
            None => {
                below.insert(key, items.len());
                items.push(Item::Below(vec![(e, at)]));
            }
        }
    }
    for item in items {
        match item {
            Item::Here(e) => out.push(e),
            Item::Below(part) => nest(part, depth + 1, out),
        }
    }
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
            let _ = writeln!(out, "**Tool call** `{tool}`{}:\n", call_id(id));
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
            let rule = if rule.is_empty() {
                String::new()
            } else {
                format!(" by rule `{rule}`")
            };
            let _ = writeln!(
                out,
                "**Denied** `{tool}`{}{rule}: {}\n",
                call_id(id),
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
            out.push_str("## Result: suspended\n\n");
            if !events.is_empty() {
                let _ = writeln!(out, "Waiting for: {}\n", events.join(", "));
            }
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
            let waiting = if events.is_empty() {
                String::new()
            } else {
                format!(", waiting for: {}", events.join(", "))
            };
            let _ = writeln!(out, "Step `{name}` suspended the run{waiting}.\n");
        }
        EventBody::Signal { event, .. } => {
            let _ = writeln!(out, "Signal `{event}` delivered.\n");
        }
        EventBody::Compensating { error, nodes } => {
            let undoing = if nodes.is_empty() {
                String::new()
            } else {
                format!("; undoing {}", nodes.join(", "))
            };
            let _ = writeln!(
                out,
                "**Compensating** after: {}{undoing}.\n",
                one_line(error)
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
    let stop = if stop_reason.is_empty() {
        String::new()
    } else {
        format!(", {stop_reason}")
    };
    let _ = writeln!(
        out,
        "**Model** (`{model}`, turn {turn}, {input_tokens} in / {output_tokens} out, \
             {}{cost}{stop}):\n",
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
    let id = if id.is_empty() {
        String::new()
    } else {
        format!("`{id}`, ")
    };
    let _ = writeln!(out, "**{what}** `{tool}` ({id}{}):\n", millis(*duration_ms));
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

/// A node's output; nothing for a node without one (a branch, a sequence).
fn node_complete(out: &mut String, e: &Event) {
    let EventBody::NodeComplete { output, .. } = &e.body else {
        return;
    };
    let name = e.node.as_deref().unwrap_or("?");
    match output {
        Value::Null => return,
        Value::String(s) if s.trim().is_empty() => {
            let _ = writeln!(out, "**Output of step `{name}`:** *(empty)*\n");
            return;
        }
        _ => {}
    }
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

/// A call's id in parentheses, or nothing when it has none.
fn call_id(id: &str) -> String {
    if id.is_empty() {
        String::new()
    } else {
        format!(" (`{id}`)")
    }
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

    /// An event at `(step, node, goal)` of type `kind` with `data`; `seq`
    /// is its place in the list.
    fn event(seq: u64, at: (&str, Option<&str>, Option<&str>), kind: &str, data: Value) -> Event {
        let mut v = json!({
            "schema_version": 1, "session_id": "s", "seq": seq,
            "ts": "2026-01-01T00:00:00.000Z", "step": at.0, "type": kind, "data": data,
        });
        if let Some(n) = at.1 {
            v["node"] = json!(n);
        }
        if let Some(g) = at.2 {
            v["goal"] = json!(g);
        }
        serde_json::from_value(v).unwrap()
    }

    fn session(events: &mut Vec<Event>, provider: &str) -> SessionMeta {
        let run = json!({"workflow": "par", "path": "par.md", "inputs": {},
            "provider": provider, "model": provider, "workspace": "/w"});
        events.insert(
            0,
            serde_json::from_value(json!({
                "schema_version": 1, "session_id": "s", "seq": 0,
                "ts": "2026-01-01T00:00:00.000Z", "type": "run_started", "data": run,
            }))
            .unwrap(),
        );
        serde_json::from_value(json!({
            "id": "s", "workflow": "par", "path": "/w/par.md", "workspace": "/w",
            "inputs": {}, "status": "completed", "created_at": "2026-01-01T00:00:00.000Z",
            "updated_at": "2026-01-01T00:00:01.000Z", "last_seq": events.len(),
        }))
        .unwrap()
    }

    fn reply(text: &str, turn: u32) -> Value {
        json!({"model": "fake", "turn": turn, "input_tokens": 10, "output_tokens": 2,
            "latency_ms": 5, "cost_usd": null, "stop_reason": "stop", "text": text,
            "tool_calls": []})
    }

    /// Two agent steps in parallel branches whose events interleave: each
    /// goal's section is written once, its events under it, in the order the
    /// goals first appeared — not a heading each time the events switch.
    #[test]
    fn interleaved_branches_each_get_one_section() {
        let l = ("fan", Some("fan/left/look"), Some("agent:fan/left/look"));
        let r = ("fan", Some("fan/right/look"), Some("agent:fan/right/look"));
        let (left, right) = (
            ("fan", Some("fan/left"), None),
            ("fan", Some("fan/right"), None),
        );
        let step = ("fan", Some("fan"), None);
        let call = |id: &str| json!({"id": id, "tool": "ls", "arguments": {"path": "."}});
        let result = |id: &str, says: &str| json!({"id": id, "tool": "ls", "content": says, "is_error": false, "duration_ms": 1});
        let mut events = vec![
            event(
                1,
                step,
                "step_started",
                json!({"kind": "parallel", "goals": []}),
            ),
            event(2, left, "node_started", json!({"kind": "sequence"})),
            event(
                3,
                l,
                "goal_started",
                json!({"outcome": "Look left", "agents": []}),
            ),
            event(4, right, "node_started", json!({"kind": "sequence"})),
            event(
                5,
                r,
                "goal_started",
                json!({"outcome": "Look right", "agents": []}),
            ),
            event(6, l, "tool_call", call("c1")),
            event(7, r, "tool_call", call("c2")),
            event(8, l, "tool_result", result("c1", "left files")),
            event(9, r, "tool_result", result("c2", "right files")),
            event(10, r, "llm_response", reply("right done", 2)),
            event(11, l, "llm_response", reply("left done", 2)),
            event(12, r, "goal_complete", json!({"output": "right done"})),
            event(13, right, "node_complete", json!({"output": null})),
            event(14, l, "goal_complete", json!({"output": "left done"})),
            event(15, left, "node_complete", json!({"output": null})),
            event(16, step, "step_complete", json!({})),
        ];
        let meta = session(&mut events, "fake");
        let md = markdown(&meta, &events);
        for heading in [
            "## Step `fan`",
            "### Goal `agent:fan/left/look`",
            "### Goal `agent:fan/right/look`",
        ] {
            assert_eq!(md.matches(heading).count(), 1, "{heading}:\n{md}");
        }
        let at = |text: &str| md.find(text).unwrap_or_else(|| panic!("{text}:\n{md}"));
        // Left first (it started first), each goal's events together.
        assert!(at("> Look left") < at("`c1`"), "{md}");
        assert!(at("`c1`, 1 ms") < at("> left done"), "{md}");
        assert!(
            at("Output of `agent:fan/left/look`") < at("> Look right"),
            "{md}"
        );
        assert!(at("> Look right") < at("`c2`"), "{md}");
        assert!(at("`c2`, 1 ms") < at("> right done"), "{md}");
        // A branch has no output of its own: nothing is written for it.
        assert!(!md.contains("`fan/left`"), "{md}");
        assert!(!md.contains("null"), "{md}");
    }

    /// Map items whose tool calls overlap: each item's call, result and
    /// output read together, items in the order they started; what ran
    /// one after another (the loop's iterations) keeps its order.
    #[test]
    fn map_items_are_grouped_and_iterations_keep_their_order() {
        let item = |i: usize| ("each", Some(["each[0]/say", "each[1]/say"][i]), None);
        let turn = |i: u32| ("again", Some(["again#1", "again#2"][i as usize - 1]), None);
        let relook = |i: u32| {
            (
                "again",
                Some(["again#1/relook", "again#2/relook"][i as usize - 1]),
                None,
            )
        };
        let call = |id: &str| json!({"id": id, "tool": "bash", "arguments": {"command": "echo"}});
        let result = |id: &str| json!({"id": id, "tool": "bash", "content": "ok", "is_error": false, "duration_ms": 1});
        let mut events = vec![
            event(
                1,
                ("each", Some("each"), None),
                "step_started",
                json!({"kind": "map", "goals": []}),
            ),
            event(2, item(0), "node_started", json!({"kind": "tool"})),
            event(3, item(0), "tool_call", call("m0")),
            event(4, item(1), "node_started", json!({"kind": "tool"})),
            event(5, item(1), "tool_call", call("m1")),
            event(6, item(1), "tool_result", result("m1")),
            event(7, item(1), "node_complete", json!({"output": "one"})),
            event(8, item(0), "tool_result", result("m0")),
            event(9, item(0), "node_complete", json!({"output": ""})),
            event(10, ("each", Some("each"), None), "step_complete", json!({})),
            event(
                11,
                ("again", Some("again"), None),
                "step_started",
                json!({"kind": "loop", "goals": [], "limit": 2}),
            ),
            event(12, turn(1), "loop_iteration", json!({"limit": 2})),
            event(13, relook(1), "tool_call", call("r1")),
            event(14, relook(1), "tool_result", result("r1")),
            event(15, turn(2), "loop_iteration", json!({"limit": 2})),
            event(16, relook(2), "tool_call", call("r2")),
            event(17, relook(2), "tool_result", result("r2")),
        ];
        let meta = session(&mut events, NO_MODEL);
        let order: Vec<u64> = transcript_order(&events).iter().map(|e| e.seq).collect();
        assert_eq!(
            order,
            [0, 1, 2, 3, 8, 9, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16, 17]
        );
        let md = markdown(&meta, &events);
        assert!(
            md.contains("**Output of step `each[0]/say`:** *(empty)*"),
            "{md}"
        );
        // A run of tools alone asked no model: no `Model: none (none)`.
        assert!(!md.contains("Model"), "{md}");
    }

    #[test]
    fn fields_without_a_value_are_left_out() {
        let at = ("s", None, Some("g"));
        let mut events = vec![
            event(
                1,
                at,
                "tool_call",
                json!({"id": "", "tool": "read", "arguments": {}}),
            ),
            event(
                2,
                at,
                "policy_denied",
                json!({"id": "", "tool": "read", "rule": "", "reason": "no"}),
            ),
        ];
        let meta = session(&mut events, "fake");
        let md = markdown(&meta, &events);
        assert!(md.contains("**Tool call** `read`:"), "{md}");
        assert!(md.contains("**Denied** `read`: no"), "{md}");
        assert!(!md.contains("(``)") && !md.contains("rule ``"), "{md}");
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
