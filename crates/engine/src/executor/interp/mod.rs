//! The node interpreter: one function per node kind, one wrapper for what every
//! node shares (the journal, approval classes, start/complete events, retry,
//! timeout, compensation bookkeeping).
//!
//! Values: each node's output is a JSON value that later nodes read as
//! `$steps.<id>`; the DSL's `$variables` are the same scope's `vars` (the
//! scope, [`Env`], lives in [`super::env`]). Parallel
//! branches and map items each get a child scope over a frozen parent (no copy),
//! and what they produced becomes visible after the join.
//!
//! # Layout
//!
//! This file holds what every node shares (`run_node`:
//! the journal, approval classes, start/complete events, retry, timeout) and
//! `run_kind`, which hands each node to the file of its kind:
//! [`sequence`], [`goal`], [`tool`] (tool and bound-command nodes),
//! [`shell`], [`files`] (`read_files`, `write_file`), [`branch`],
//! [`parallel`], [`map`], [`loops`], [`approval`], [`suspend`],
//! [`subworkflow`]; [`compensate`] walks back completed work on failure.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::env::{Env, Shared, resolve_limit};
use super::journal::{Completed, Record};
use super::{Approval, ApprovalRequest, RunCx, Stop};
use agentfile_plan::expr::{Expr, Root, truthy};
use agentfile_plan::{
    ApprovalClass, GoalKind, LoopUntil, Next, Node, NodeKind, OnTimeout, Plan, Supervision,
};
use agentfile_session::events::Scope;
use agentfile_wire::events::{Event, EventBody, LoopStop};

mod approval;
mod branch;
mod compensate;
mod files;
mod goal;
mod loops;
mod map;
mod parallel;
mod sequence;
mod shell;
mod subworkflow;
mod suspend;
mod tool;

use compensate::{compensable, worse};
use map::check_map_sizes;
use tool::command_value;

/// The note an approval that timed out is recorded with.
const TIMED_OUT: &str = "timed out";

/// Items of a map in flight at once when it sets no `parallelism`.
pub const DEFAULT_MAP_WIDTH: usize = 16;
/// The most items of a map in flight at once, whatever it asks.
pub const MAX_MAP_WIDTH: usize = 256;

/// Give back the spare capacity of every list in `v`.
fn shrink(v: &mut Value) {
    match v {
        Value::Array(a) => {
            a.shrink_to_fit();
            a.iter_mut().for_each(shrink);
        }
        Value::Object(o) => o.values_mut().for_each(shrink),
        _ => {}
    }
}

/// Where a node runs: its plan (a subworkflow's differs), the DSL scope fields
/// its events carry, and its depth (1: a top-level step).
#[derive(Clone, Copy)]
pub(crate) struct Frame<'a> {
    pub plan: &'a Plan,
    pub step: Option<&'a str>,
    pub iteration: Option<u32>,
    /// Inside a loop that stops when converged (goals may `signal_done`).
    pub in_loop: bool,
    pub depth: usize,
}

/// What running a node produced.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub value: Shared,
    /// Where the enclosing sequence goes next, when the node decides.
    pub route: Option<Next>,
    /// A goal called `signal_done`: the loop iteration ends here.
    pub done: bool,
    pub tool_calls: u64,
    /// Goal outputs, in order (a converging loop compares them).
    pub texts: Vec<String>,
    /// A loop's iterations and why it stopped.
    pub loop_end: Option<(u32, LoopStop)>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn join(parent: &str, id: &str) -> String {
    if parent.is_empty() {
        id.to_owned()
    } else {
        format!("{parent}/{id}")
    }
}

/// A session that cannot resume against the plan it is given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// The plan's fingerprint differs from the one the session started with;
    /// `changes` says how (never empty).
    #[error(
        "the workflow changed since this session started ({}); resuming could mix two versions of it. Restore the file, start a new run, or pass --force-changed to resume anyway",
        .changes.join("; ")
    )]
    Changed { changes: Vec<String> },
}

/// Refuse to resume a session whose plan changed since it started, unless
/// forced: say what changed and how to go on anyway.
pub fn check_resume(plan: &Plan, prior: &[Event]) -> Result<(), ResumeError> {
    let Some((old, digests)) = prior.iter().find_map(|e| match &e.body {
        EventBody::RunStarted {
            fingerprint: Some(f),
            digests,
            ..
        } => Some((f, digests)),
        _ => None,
    }) else {
        // Sessions from before fingerprints: nothing to compare.
        return Ok(());
    };
    if *old == plan.fingerprint {
        return Ok(());
    }
    let mut changes = agentfile_plan::describe_changes(digests, &plan.digests());
    if changes.is_empty() {
        changes.push("the workflow's settings changed".into());
    }
    Err(ResumeError::Changed { changes })
}

/// Run the plan's graph (or finish a compensation walk a crash interrupted);
/// returns how it ended and the root scope (for the run's `result`).
pub(crate) async fn run_plan(
    cx: &RunCx<'_>,
    inputs: &super::Inputs,
) -> (Result<Shared, Stop>, Env) {
    // Without a schema every input is its text.
    let input_obj = super::inputs::typed_inputs(cx.plan.input_schema.as_ref(), inputs);
    let mut inputs = Value::Object(input_obj);
    // Parsed lists hold spare room from growing; the inputs live all run.
    shrink(&mut inputs);
    let mut env = Env {
        inputs: Arc::new(inputs),
        ..Env::default()
    };
    let frame = Frame {
        plan: cx.plan,
        step: None,
        iteration: None,
        in_loop: false,
        depth: 0,
    };
    let interrupted_walk = cx.journal().compensating.clone();
    let outcome = match interrupted_walk {
        Some(error) => {
            // Walk what completed again, running nothing, so that each
            // completed step's scope is rebuilt for its compensation.
            cx.replay_only.store(true, Ordering::Relaxed);
            let _ = cx
                .run_body(frame, &cx.plan.graph, String::new(), &mut env)
                .await;
            cx.replay_only.store(false, Ordering::Relaxed);
            Err(Stop::Failed(error))
        }
        None => match check_map_sizes(cx, &env) {
            Err(stop) => Err(stop),
            Ok(()) => cx
                .run_body(frame, &cx.plan.graph, String::new(), &mut env)
                .await
                .map(|o| o.value),
        },
    };
    if let Err(stop) = &outcome
        && compensable(stop)
    {
        cx.compensate(stop).await;
    }
    (outcome, env)
}

/// A step's evaluated arguments against its TOOL.md `inputs` schema.
fn check_args(node: &Node, path: &str, args: &Value) -> Result<(), Stop> {
    let Some(schema) = &node.input_schema else {
        return Ok(());
    };
    let args = if args.is_null() { &json!({}) } else { args };
    agentfile_plan::values::validate_value(schema, args).map_err(|problems| {
        Stop::Failed(format!(
            "step `{path}`: its inputs do not match the tool's `inputs` schema: {}",
            problems.join("; ")
        ))
    })
}

/// The node at a path of the static graph (`m[3]` and `l#2` name the map or
/// loop `m`/`l`; their body's children follow).
fn find_static<'a>(root: &'a Node, path: &str) -> Option<&'a Node> {
    let mut level: Vec<&'a Node> = root.children();
    let mut found = None;
    for seg in path.split('/') {
        let id = seg.split(['[', '#', '@']).next().unwrap_or(seg);
        let node = *level.iter().find(|n| n.id == id)?;
        found = Some(node);
        level = match &node.kind {
            NodeKind::Map { body, .. } | NodeKind::Loop { body, .. } => match &body.kind {
                NodeKind::Sequence { nodes, .. } => nodes.iter().collect(),
                _ => vec![&**body],
            },
            NodeKind::Subworkflow { plan, .. } => plan.graph.children(),
            _ => node.children(),
        };
    }
    found
}

impl<'a> RunCx<'a> {
    fn scope(&self, f: Frame<'_>, node: &Node, path: &str) -> Scope {
        Scope {
            step: f.step.map(str::to_owned),
            goal: match &node.kind {
                NodeKind::Goal(g) => Some(g.goal.clone()),
                _ => None,
            },
            agent: None,
            iteration: f.iteration,
            node: Some(path.to_owned()),
            node_kind: Some(node.kind.name()),
        }
    }

    /// A body (the root, a map item, a loop iteration): a sequence's children
    /// run at `path` itself; any other node runs as the body's one child.
    fn run_body<'s>(
        &'s self,
        f: Frame<'s>,
        body: &'s Node,
        path: String,
        env: &'s mut Env,
    ) -> BoxFuture<'s, Result<Outcome, Stop>> {
        Box::pin(async move {
            match &body.kind {
                NodeKind::Sequence { nodes, start } => {
                    self.run_sequence(f, nodes, start.as_deref(), &path, env)
                        .await
                }
                _ => {
                    let child = Frame {
                        depth: f.depth + 1,
                        ..f
                    };
                    let p = join(&path, &body.id);
                    self.run_node(child, body, p, env).await
                }
            }
        })
    }

    /// One node: journal, approval, events, retry and timeout around its kind.
    fn run_node<'s>(
        &'s self,
        f: Frame<'s>,
        node: &'s Node,
        path: String,
        env: &'s mut Env,
    ) -> BoxFuture<'s, Result<Outcome, Stop>> {
        Box::pin(async move {
            let scope = self.scope(f, node, &path);
            let top = f.depth == 1;
            let record = self.journal().done.get(&path).cloned();
            let container = matches!(
                node.kind,
                NodeKind::Sequence { .. }
                    | NodeKind::Parallel { .. }
                    | NodeKind::Map { .. }
                    | NodeKind::Loop { .. }
                    | NodeKind::Subworkflow { .. }
            );
            // A completed leaf: its recorded output, no work. A completed
            // container is walked again so its children's outputs come back
            // into scope (from the journal, without running).
            let rank = record.as_ref().map(Record::seq);
            match (&record, &node.kind) {
                (Some(Record::Goal(c, seq)), NodeKind::Goal(g)) => {
                    let value = Arc::new(self.goal_value(f.plan, &g.goal, c));
                    self.goal_effects(f.plan, &g.goal, c, env);
                    self.finish(node, env, value.clone(), &path, Some(*seq));
                    return Ok(Outcome {
                        value,
                        done: c.done,
                        tool_calls: c.tool_calls,
                        texts: vec![c.output.clone()],
                        ..Outcome::default()
                    });
                }
                (Some(Record::Node { output, next, seq }), _) if !container => {
                    self.finish(node, env, output.clone(), &path, Some(*seq));
                    return Ok(Outcome {
                        value: output.clone(),
                        route: next.as_deref().map(Next::parse),
                        ..Outcome::default()
                    });
                }
                // Rebuilding scopes after a crash in a compensation walk: a
                // step that did not complete ends this line of the walk.
                (None, _) if !container && self.replay_only.load(Ordering::Relaxed) => {
                    return Err(Stop::Failed(String::new()));
                }
                _ => {}
            }
            // A completed container walked again, or any container while
            // scopes are rebuilt: nothing is started, asked or recorded.
            let replaying = record.is_some() || self.replay_only.load(Ordering::Relaxed);
            if !replaying {
                if self.cancel.is_cancelled() {
                    return Err(self.stop_for_cancel());
                }
                self.check_store()?;
                let n = self.started.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(max) = f.plan.max_steps
                    && n > max
                {
                    return Err(Stop::Failed(format!(
                        "the run started more than max_steps = {max} steps; raise `max_steps` if the workflow really needs more"
                    )));
                }
                self.gate(f, node, &path, &scope, env).await?;
                if !self.journal().started.contains(&path) {
                    self.emit_started(f, node, &scope, env);
                }
            }
            let out = self.attempts(f, node, &path, &scope, env).await?;
            if !replaying {
                self.emit_complete(top, node, &scope, &out);
            }
            self.finish(node, env, out.value.clone(), &path, rank);
            Ok(out)
        })
    }

    /// Record a completed node's output in scope, the run's outputs and the
    /// compensation list. `rank`: the journal's position of a completion
    /// replayed from it; `None` for work done now.
    fn finish(&self, node: &Node, env: &mut Env, value: Shared, path: &str, rank: Option<u64>) {
        if let Some(name) = &node.publish {
            self.outputs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name.clone(), value.clone());
        }
        env.steps.insert(node.id.clone(), value);
        if node.compensation.is_some() {
            // Only nodes of the root plan: a subworkflow's compensations are
            // its own business (and its nodes are not borrowed for 'a).
            if let Some(n) = find_static(&self.plan.graph, path)
                && std::ptr::eq(n, node)
            {
                // The compensation sees the scope as it stands now (this
                // node's output included), whether the node ran now or its
                // completion is replayed from the journal on a resume: the
                // same walk rebuilds the same scope.
                let rank = rank.unwrap_or_else(|| self.live_rank.fetch_add(1, Ordering::Relaxed));
                self.completed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(super::Undo {
                        path: path.to_owned(),
                        node: n,
                        scope: env.clone(),
                        rank,
                    });
            }
        }
    }

    fn emit_started(&self, f: Frame<'_>, node: &Node, scope: &Scope, env: &Env) {
        let top = f.depth == 1;
        match (&node.kind, top) {
            // A goal's own start event carries its rendered outcome.
            (NodeKind::Goal(_), false) => {}
            (_, true) => {
                let (kind, goals, limit) = match &node.kind {
                    NodeKind::Sequence { nodes, .. } => ("run".to_owned(), goal_names(nodes), None),
                    NodeKind::Loop {
                        until: LoopUntil::Converged,
                        max,
                        body,
                    } => (
                        "loop".to_owned(),
                        match &body.kind {
                            NodeKind::Sequence { nodes, .. } => goal_names(nodes),
                            _ => Vec::new(),
                        },
                        Some(resolve_limit(max, env)),
                    ),
                    NodeKind::Loop { max, .. } => {
                        ("loop".to_owned(), Vec::new(), Some(resolve_limit(max, env)))
                    }
                    other => (other.name().to_owned(), Vec::new(), None),
                };
                self.emit(scope, EventBody::StepStarted { kind, goals, limit });
            }
            (kind, false) => self.emit(
                scope,
                EventBody::NodeStarted {
                    kind: kind.name().to_owned(),
                },
            ),
        }
    }

    fn emit_complete(&self, top: bool, node: &Node, scope: &Scope, out: &Outcome) {
        let container = matches!(
            node.kind,
            NodeKind::Sequence { .. }
                | NodeKind::Parallel { .. }
                | NodeKind::Map { .. }
                | NodeKind::Loop { .. }
                | NodeKind::Subworkflow { .. }
        );
        // Containers are walked again on resume; only leaves record output.
        let output = (!container).then(|| (*out.value).clone());
        let next = out.route.as_ref().map(|n| n.as_str().to_owned());
        if top {
            let (iterations, stop) = match out.loop_end {
                Some((n, s)) => (Some(n), Some(s)),
                None => (None, None),
            };
            // A goal's own completion event is its journal record.
            let output = if matches!(node.kind, NodeKind::Goal(_)) {
                None
            } else {
                output
            };
            self.emit(
                scope,
                EventBody::StepComplete {
                    iterations,
                    stop,
                    output,
                    next,
                },
            );
        } else if !matches!(node.kind, NodeKind::Goal(_)) {
            self.emit(
                scope,
                EventBody::NodeComplete {
                    output: output.unwrap_or(Value::Null),
                    next,
                },
            );
        }
    }

    /// The node's kind, attempted as its retry policy allows, each attempt
    /// within its timeout.
    async fn attempts(
        &self,
        f: Frame<'_>,
        node: &Node,
        path: &str,
        scope: &Scope,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let max = node.retry.as_ref().map_or(1, |r| r.max_attempts.max(1));
        let mut attempt = 1;
        loop {
            let run = self.run_kind(f, node, path, scope, env);
            let r = match node.timeout_ms {
                Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), run).await {
                    Ok(r) => r,
                    Err(_) => Err(Stop::Failed(format!(
                        "step `{path}` timed out after {}",
                        agentfile_config::text::human_duration(Duration::from_millis(ms))
                    ))),
                },
                None => run.await,
            };
            // An output that breaks the step's schema fails the attempt, so a
            // retry policy applies to it.
            let r = r.and_then(|out| match &node.output_schema {
                Some(schema) => match agentfile_plan::values::validate_value(schema, &out.value) {
                    Ok(()) => Ok(out),
                    Err(problems) => Err(Stop::Failed(format!(
                        "step `{path}`: its output does not match its `outputs` schema: {}",
                        problems.join("; ")
                    ))),
                },
                None => Ok(out),
            });
            match r {
                Err(Stop::Failed(error)) if node.retry.is_some() => {
                    let retry_in = (attempt < max).then(|| {
                        node.retry
                            .as_ref()
                            .map(|r| r.delay_before(attempt + 1))
                            .unwrap_or_default()
                    });
                    self.emit(
                        scope,
                        EventBody::NodeFailed {
                            error: error.clone(),
                            attempt,
                            retry_in_ms: retry_in.map(|d| d.as_millis() as u64),
                        },
                    );
                    let Some(delay) = retry_in else {
                        return Err(Stop::Failed(format!(
                            "{error} (after {attempt} attempt{})",
                            if attempt == 1 { "" } else { "s" }
                        )));
                    };
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.cancel.cancelled() => return Err(self.stop_for_cancel()),
                    }
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// What a node of this kind does, once its shared wrapper (journal,
    /// approval class, retry, timeout) has let it run: one method per kind.
    fn run_kind<'s>(
        &'s self,
        f: Frame<'s>,
        node: &'s Node,
        path: &'s str,
        scope: &'s Scope,
        env: &'s mut Env,
    ) -> BoxFuture<'s, Result<Outcome, Stop>> {
        Box::pin(async move {
            match &node.kind {
                NodeKind::Sequence { nodes, start } => {
                    self.run_sequence(f, nodes, start.as_deref(), path, env)
                        .await
                }
                NodeKind::Goal(g) => {
                    self.run_goal(f, g, node.output_schema.as_ref(), scope, env)
                        .await
                }
                NodeKind::Tool { tool, args } => {
                    // A shell tool's command gets each value as one quoted
                    // word, never as code (`raw(…)` is the explicit splice).
                    let args = agentfile_plan::shell::eval_tool_args(tool, args, &*env)
                        .map_err(|e| Stop::Failed(format!("step `{path}`: {e}")))?;
                    check_args(node, path, &args)?;
                    self.run_tool(scope, path, tool, args).await
                }
                NodeKind::Command {
                    tool, argv, args, ..
                } => {
                    let args = args.eval(&*env);
                    check_args(node, path, &args)?;
                    self.run_command(scope, path, tool, argv, args).await
                }
                NodeKind::Shell {
                    script,
                    args,
                    interpreter,
                    env: vars,
                } => {
                    let args: Vec<String> = args.iter().map(|a| a.render(&*env)).collect();
                    let vars: Vec<(String, String)> = vars
                        .iter()
                        .map(|(k, t)| (k.clone(), t.render(&*env)))
                        .collect();
                    let interpreter = interpreter.as_deref().unwrap_or("bash");
                    self.run_shell(scope, path, script, interpreter, &args, &vars)
                        .await
                }
                NodeKind::ReadFiles { paths } => self.run_read_files(scope, path, paths),
                NodeKind::WriteFile {
                    path: file,
                    content,
                } => self.run_write_file(scope, path, file, content.as_ref(), env),
                NodeKind::Branch { arms, default } => self.run_branch(arms, default.as_ref(), env),
                NodeKind::Parallel { branches } => self.run_parallel(f, branches, path, env).await,
                NodeKind::Map {
                    over,
                    concurrency,
                    body,
                } => {
                    self.run_map_node(f, over, *concurrency, body, path, env)
                        .await
                }
                NodeKind::Loop { until, max, body } => {
                    let limit = resolve_limit(max, env);
                    self.run_loop(f, node, until, limit, body, path, scope, env)
                        .await
                }
                NodeKind::Approval(a) => self.run_approval(f, node, a, path, scope, env).await,
                NodeKind::Suspend {
                    events,
                    timeout_ms,
                    on_timeout,
                } => self.run_suspend(path, scope, events, *timeout_ms, on_timeout),
                NodeKind::Subworkflow { plan, inputs } => {
                    self.run_subworkflow(f, plan, inputs, path, env).await
                }
            }
        })
    }
}

fn goal_names(nodes: &[Node]) -> Vec<String> {
    nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::Goal(g) => Some(g.goal.clone()),
            _ => None,
        })
        .collect()
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
