//! The resume journal: what a session's earlier events say was done.
//!
//! The event log is the journal. Every completed node left a completion event
//! under its path (`goal_complete`, `step_complete`, `node_complete`), so a
//! resumed run walks the graph again and takes each completed node's output
//! from here instead of running it; only what was in flight runs again.
//! Events written before node paths existed (no `node` field) get the path the
//! Agentfile DSL's lowering gives them, so older sessions resume too.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use agentfile_wire::events::{Event, EventBody, Usage};

/// A goal's completion, as `goal_complete` records it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Completed {
    pub output: String,
    pub fields: BTreeMap<String, Value>,
    pub tool_calls: u64,
    pub done: bool,
}

/// A node's recorded completion, with the `seq` of the event that recorded
/// it (the completion order, for the compensation walk).
#[derive(Debug, Clone)]
pub(crate) enum Record {
    Goal(Completed, u64),
    Node {
        output: Arc<Value>,
        next: Option<String>,
        seq: u64,
    },
}

impl Record {
    pub fn seq(&self) -> u64 {
        match self {
            Record::Goal(_, seq) | Record::Node { seq, .. } => *seq,
        }
    }
}

#[derive(Default)]
pub(crate) struct Journal {
    pub done: HashMap<String, Record>,
    /// Paths of nodes whose start was recorded.
    pub started: HashSet<String>,
    /// Paths of loop iterations (`refine#2`) whose start was recorded.
    pub iterations: HashSet<String>,
    pub approvals: HashMap<String, (bool, Option<String>)>,
    /// Approval and suspend deadlines by path (Unix ms).
    pub deadlines: HashMap<String, u64>,
    /// Suspends recorded, by path: the seq of their `suspended` event.
    pub suspended: HashMap<String, u64>,
    /// Signals delivered, in order: (seq, event, payload).
    pub signals: Vec<(u64, String, Value)>,
    /// A compensation walk that began: the failure that caused it.
    pub compensating: Option<String>,
    pub usage: Usage,
    pub last_seq: u64,
}

/// The path the DSL lowering gives an event without one.
pub(super) fn legacy_path(e: &Event) -> Option<String> {
    let step = e.step.as_deref()?;
    Some(match (&e.goal, e.iteration) {
        (None, None) => step.to_owned(),
        (None, Some(i)) => format!("{step}#{i}"),
        (Some(g), None) => format!("{step}/{g}"),
        (Some(g), Some(i)) => format!("{step}#{i}/{g}"),
    })
}

impl Journal {
    pub fn from_events(events: &[Event]) -> Journal {
        let mut j = Journal::default();
        for e in events {
            j.last_seq = e.seq;
            let path = e.node.clone().or_else(|| legacy_path(e));
            match &e.body {
                EventBody::RunStarted { .. } => {}
                EventBody::StepStarted { .. } | EventBody::NodeStarted { .. } => {
                    if let Some(p) = path {
                        j.started.insert(p);
                    }
                }
                EventBody::GoalStarted { .. } if e.agent.is_none() => {
                    if let Some(p) = path {
                        j.started.insert(p);
                    }
                }
                EventBody::LoopIteration { .. } if e.goal.is_none() => {
                    // A loop's iteration: the path of its body that round.
                    if let (Some(p), Some(_)) = (path, e.iteration) {
                        j.iterations.insert(p);
                    }
                }
                EventBody::GoalComplete {
                    output,
                    fields,
                    tool_calls,
                    done,
                    ..
                } if e.agent.is_none() => {
                    if let Some(p) = path {
                        let c = Completed {
                            output: output.clone(),
                            fields: fields.clone(),
                            tool_calls: *tool_calls,
                            done: *done,
                        };
                        j.done.insert(p, Record::Goal(c, e.seq));
                    }
                }
                EventBody::StepComplete { output, next, .. } => {
                    // A goal step's own completion carries no output: its
                    // goal's (recorded just before, at the same path) stands.
                    if let Some(p) = path
                        && !(output.is_none() && j.done.contains_key(&p))
                    {
                        let output = output.clone().unwrap_or(Value::Null);
                        j.done.insert(
                            p,
                            Record::Node {
                                output: Arc::new(output),
                                next: next.clone(),
                                seq: e.seq,
                            },
                        );
                    }
                }
                EventBody::NodeComplete { output, next } => {
                    if let Some(p) = path {
                        j.done.insert(
                            p,
                            Record::Node {
                                output: Arc::new(output.clone()),
                                next: next.clone(),
                                seq: e.seq,
                            },
                        );
                    }
                }
                EventBody::ApprovalRequired {
                    deadline_ms: Some(d),
                    ..
                } => {
                    if let Some(p) = path {
                        j.deadlines.insert(p, *d);
                    }
                }
                EventBody::ApprovalResolved { approved, note } => {
                    if let Some(p) = path {
                        j.approvals.insert(p, (*approved, note.clone()));
                    }
                }
                EventBody::Suspended { deadline_ms, .. } => {
                    if let Some(p) = path {
                        if let Some(d) = deadline_ms {
                            j.deadlines.insert(p.clone(), *d);
                        }
                        j.suspended.insert(p, e.seq);
                    }
                }
                EventBody::Signal { event, payload } => {
                    j.signals.push((e.seq, event.clone(), payload.clone()));
                }
                EventBody::Compensating { error, .. } => {
                    j.compensating = Some(error.clone());
                }
                EventBody::LlmResponse {
                    input_tokens,
                    output_tokens,
                    cost_usd,
                    ..
                } => {
                    j.usage.turns += 1;
                    j.usage.input_tokens += input_tokens;
                    j.usage.output_tokens += output_tokens;
                    j.usage.cost_usd = match (j.usage.cost_usd, cost_usd) {
                        (a, Some(c)) => Some(a.unwrap_or(0.0) + c),
                        (a, None) => a,
                    };
                }
                EventBody::ToolCall { .. } => j.usage.tool_calls += 1,
                _ => {}
            }
        }
        j
    }

    /// The first signal delivered after the suspend at `path` that it waits
    /// for; each signal is taken once.
    pub fn take_signal(&mut self, path: &str, events: &[String]) -> Option<(String, Value)> {
        let since = *self.suspended.get(path)?;
        let i = self
            .signals
            .iter()
            .position(|(seq, name, _)| *seq > since && events.iter().any(|e| e == name))?;
        let (_, name, payload) = self.signals.remove(i);
        Some((name, payload))
    }
}
