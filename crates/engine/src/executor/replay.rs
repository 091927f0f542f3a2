//! Replay (`sessions replay ID`, CONTRACT §19): a run whose every model
//! answer and tool result comes from another session's journal.
//!
//! The journal is indexed by where each call was made — the node path and
//! the agent — in the order the calls came. A replayed run asks this index
//! instead of the provider and the tools: a model request is answered with
//! the next recorded answer of its node and agent, and must match the
//! recorded request part by part (the `digests` of its `llm_request`); a tool
//! call is answered with the recorded result of the same call id, and must
//! have the recorded arguments. Anything else is `replay-diverged`, naming
//! the node and the first part that differs: the run stops there, having
//! asked no model and run no tool.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use agentfile_llm::{ChatResponse, ContentBlock, StopReason, ToolCall, Usage};
use agentfile_session::events::Scope;
use agentfile_wire::events::{Event, EventBody};
use serde_json::Value;

use super::journal::legacy_path;

/// Why a replay stopped: `replay-diverged at NODE: …`, the run's error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Diverged(pub String);

/// Where a call was made: the node path and the agent.
type Place = (String, Option<String>);

/// A tool call's place and id.
type CallKey = (String, Option<String>, String);

struct Turn {
    digests: BTreeMap<String, String>,
    response: ChatResponse,
}

struct Call {
    tool: String,
    arguments: Value,
    content: String,
    is_error: bool,
}

/// Another session's model answers and tool results, by where they were
/// asked for.
pub struct ReplayJournal {
    session: String,
    turns: Mutex<HashMap<Place, VecDeque<Turn>>>,
    calls: Mutex<HashMap<CallKey, VecDeque<Call>>>,
    /// Each node's recorded output, by path (a command's or script's value).
    outputs: HashMap<String, Value>,
}

fn place_of(e: &Event) -> Option<Place> {
    Some((e.node.clone().or_else(|| legacy_path(e))?, e.agent.clone()))
}

/// The place of a scope, as its events will name it.
fn place_of_scope(scope: &Scope) -> String {
    if let Some(n) = &scope.node {
        return n.clone();
    }
    let step = scope.step.clone().unwrap_or_default();
    match (&scope.goal, scope.iteration) {
        (None, None) => step,
        (None, Some(i)) => format!("{step}#{i}"),
        (Some(g), None) => format!("{step}/{g}"),
        (Some(g), Some(i)) => format!("{step}#{i}/{g}"),
    }
}

fn response_of(body: &EventBody) -> Option<ChatResponse> {
    let EventBody::LlmResponse {
        model,
        input_tokens,
        output_tokens,
        cost_usd,
        stop_reason,
        text,
        tool_calls,
        ..
    } = body
    else {
        return None;
    };
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(ContentBlock::Text { text: text.clone() });
    }
    for c in tool_calls {
        content.push(ContentBlock::ToolCall(ToolCall {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
            signature: None,
        }));
    }
    Some(ChatResponse {
        content,
        stop_reason: if tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        },
        raw_stop_reason: Some(stop_reason.clone()),
        usage: Usage {
            input_tokens: *input_tokens,
            output_tokens: *output_tokens,
        },
        model: model.clone(),
        latency: Duration::ZERO,
        cost_usd: *cost_usd,
        attempts: 1,
    })
}

impl ReplayJournal {
    /// The index of `session`'s events.
    pub fn from_events(session: &str, events: &[Event]) -> ReplayJournal {
        let mut turns: HashMap<Place, VecDeque<Turn>> = HashMap::new();
        let mut asked: HashMap<Place, BTreeMap<String, String>> = HashMap::new();
        let mut calls: HashMap<(String, Option<String>, String), VecDeque<Call>> = HashMap::new();
        let mut pending: HashMap<(String, Option<String>, String), (String, Value)> =
            HashMap::new();
        let mut outputs = HashMap::new();
        for e in events {
            let Some(place) = place_of(e) else { continue };
            match &e.body {
                EventBody::NodeComplete { output, .. } => {
                    outputs.insert(place.0, output.clone());
                }
                EventBody::StepComplete {
                    output: Some(output),
                    ..
                } => {
                    outputs.insert(place.0, output.clone());
                }
                EventBody::LlmRequest { digests, .. } => {
                    asked.insert(place, digests.clone());
                }
                body @ EventBody::LlmResponse { .. } => {
                    if let Some(response) = response_of(body) {
                        let digests = asked.remove(&place).unwrap_or_default();
                        turns
                            .entry(place)
                            .or_default()
                            .push_back(Turn { digests, response });
                    }
                }
                EventBody::ToolCall {
                    id,
                    tool,
                    arguments,
                } => {
                    pending.insert(
                        (place.0, place.1, id.clone()),
                        (tool.clone(), arguments.clone()),
                    );
                }
                EventBody::ToolResult {
                    id,
                    content,
                    is_error,
                    ..
                } => {
                    let key = (place.0, place.1, id.clone());
                    if let Some((tool, arguments)) = pending.remove(&key) {
                        calls.entry(key).or_default().push_back(Call {
                            tool,
                            arguments,
                            content: content.clone(),
                            is_error: *is_error,
                        });
                    }
                }
                _ => {}
            }
        }
        ReplayJournal {
            session: session.to_owned(),
            turns: Mutex::new(turns),
            calls: Mutex::new(calls),
            outputs,
        }
    }

    /// The session replayed.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The recorded output of the node at `path` (a command tool's or a
    /// script's value, which its recorded result alone does not give back).
    pub(crate) fn output(&self, path: &str) -> Result<Value, Diverged> {
        self.outputs.get(path).cloned().ok_or_else(|| {
            Diverged(format!(
                "replay-diverged at `{path}`: session `{}` recorded no output for it",
                self.session
            ))
        })
    }

    /// The recorded answer to the model request `digests` describes, made
    /// at `scope`; `Err` is the `replay-diverged` message.
    pub(crate) fn answer(
        &self,
        scope: &Scope,
        digests: &BTreeMap<String, String>,
    ) -> Result<ChatResponse, Diverged> {
        let node = place_of_scope(scope);
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        let Some(turn) = turns
            .get_mut(&(node.clone(), scope.agent.clone()))
            .and_then(VecDeque::pop_front)
        else {
            return Err(Diverged(format!(
                "replay-diverged at `{node}`{}: it asks the model more than session `{}` did",
                agent_note(scope),
                self.session
            )));
        };
        // A session recorded before requests had digests is taken as it is.
        if !turn.digests.is_empty()
            && let Some(part) = first_changed(&turn.digests, digests)
        {
            return Err(Diverged(format!(
                "replay-diverged at `{node}`{}: the model request differs from session `{}`'s in `{part}`",
                agent_note(scope),
                self.session
            )));
        }
        Ok(turn.response)
    }

    /// The recorded result of the tool call `id` made at `scope`: its
    /// content and whether it was an error; `Err` is the `replay-diverged`
    /// message.
    pub(crate) fn result(
        &self,
        scope: &Scope,
        id: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<(String, bool), Diverged> {
        let node = place_of_scope(scope);
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let Some(call) = calls
            .get_mut(&(node.clone(), scope.agent.clone(), id.to_owned()))
            .and_then(VecDeque::pop_front)
        else {
            return Err(Diverged(format!(
                "replay-diverged at `{node}`{}: it calls `{tool}` (call `{id}`), which session `{}` did not",
                agent_note(scope),
                self.session
            )));
        };
        if call.tool != tool {
            return Err(Diverged(format!(
                "replay-diverged at `{node}`{}: call `{id}` is to `{tool}`, not `{}` as in session `{}`",
                agent_note(scope),
                call.tool,
                self.session
            )));
        }
        if let Some(at) = first_difference(&call.arguments, arguments, "arguments") {
            return Err(Diverged(format!(
                "replay-diverged at `{node}`{}: `{tool}` is called with other arguments than in session `{}` (at `{at}`)",
                agent_note(scope),
                self.session
            )));
        }
        Ok((call.content, call.is_error))
    }
}

fn agent_note(scope: &Scope) -> String {
    scope
        .agent
        .as_deref()
        .map(|a| format!(" (agent `{a}`)"))
        .unwrap_or_default()
}

/// The first part whose digest differs, in the order a reader would look.
fn first_changed(
    recorded: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Option<String> {
    let order = ["system", "messages", "tools", "max_tokens", "temperature"];
    let mut keys: Vec<&str> = order.to_vec();
    for k in recorded.keys().chain(now.keys()) {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .find(|k| recorded.get(*k) != now.get(*k))
        .map(str::to_owned)
}

/// Where two JSON values first differ, as a path (`arguments.path`).
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => first_difference(p, q, &format!("{at}.{k}")),
                _ => Some(format!("{at}.{k}")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{at}[{i}]"))),
        _ if a == b => None,
        _ => Some(at.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_paths_that_differ_are_named() {
        let a = BTreeMap::from([
            ("system".to_owned(), "1".to_owned()),
            ("messages".to_owned(), "2".to_owned()),
        ]);
        let mut b = a.clone();
        assert_eq!(first_changed(&a, &b), None);
        b.insert("messages".into(), "3".into());
        assert_eq!(first_changed(&a, &b).as_deref(), Some("messages"));
        let x = serde_json::json!({"path": "a", "n": [1, 2]});
        let y = serde_json::json!({"path": "a", "n": [1, 3]});
        assert_eq!(
            first_difference(&x, &y, "arguments").as_deref(),
            Some("arguments.n[1]")
        );
        assert_eq!(first_difference(&x, &x, "arguments"), None);
    }
}
