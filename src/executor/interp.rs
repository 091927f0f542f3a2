//! The node interpreter: one function per node kind, one wrapper for what every
//! node shares (the journal, approval classes, start/complete events, retry,
//! timeout, compensation bookkeeping).
//!
//! Values: each node's output is a JSON value that later nodes read as
//! `$steps.<id>`; the DSL's `$variables` are the same scope's `vars`. Parallel
//! branches and map items each get a child scope over a frozen parent (no copy),
//! and what they produced becomes visible after the join.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::journal::{Completed, Record};
use super::{Approval, ApprovalRequest, RunCx, Stop};
use crate::agentfile::template;
use crate::events::Scope;
use crate::plan::expr::{Expr, Lookup, Root, truthy};
use crate::plan::{
    ApprovalClass, GoalKind, Limit, LoopUntil, Next, Node, NodeKind, OnTimeout, Plan, Supervision,
};
use crate::protocol::events::{Event, EventBody, LoopStop};

/// The note an approval that timed out is recorded with.
const TIMED_OUT: &str = "timed out";

/// Items of a map in flight at once when it sets no `parallelism`.
pub const DEFAULT_MAP_WIDTH: usize = 16;
/// The most items of a map in flight at once, whatever it asks.
pub const MAX_MAP_WIDTH: usize = 256;

/// A value in scope, shared: a node's output is held once, by the scope that
/// reads it, the outcome that returns it and any snapshot a compensation
/// keeps (a map's list of a million results is not copied at each of them).
pub(crate) type Shared = Arc<Value>;

/// A scope of values: the run's inputs, node outputs and variables, over a
/// frozen parent. Cloning one is cheap (its own level's names and shared
/// values; the parent is shared): a compensation keeps the scope as it stood.
#[derive(Debug, Default, Clone)]
pub(crate) struct Env {
    parent: Option<Arc<Env>>,
    inputs: Shared,
    steps: HashMap<String, Shared>,
    /// The DSL's variables set by goals; the inputs are variables too (see
    /// [`Env::var`]), without being copied here.
    vars: HashMap<String, Shared>,
    item: Option<(Shared, usize)>,
}

impl Env {
    fn child(parent: &Arc<Env>) -> Env {
        Env {
            parent: Some(parent.clone()),
            inputs: parent.inputs.clone(),
            ..Env::default()
        }
    }

    fn step(&self, id: &str) -> Option<&Value> {
        match self.steps.get(id) {
            Some(v) => Some(v),
            None => self.parent.as_deref().and_then(|p| p.step(id)),
        }
    }

    /// A variable: one a goal set (here or in a parent), else the input of
    /// that name.
    pub(crate) fn var(&self, name: &str) -> Option<&Value> {
        self.set_var(name).or_else(|| self.inputs.get(name))
    }

    fn set_var(&self, name: &str) -> Option<&Value> {
        match self.vars.get(name) {
            Some(v) => Some(v),
            None => self.parent.as_deref().and_then(|p| p.set_var(name)),
        }
    }

    /// The shared value a path root names (an input, a step's output, a
    /// goal's variable, a map's item), to read from without copying it;
    /// `None` where there is none to share (`$index`, an input read as a
    /// variable).
    fn shared(&self, root: &Root) -> Option<Shared> {
        let mut at = Some(self);
        while let Some(env) = at {
            let found = match root {
                Root::Input => Some(&env.inputs),
                Root::Step(id) => env.steps.get(id),
                Root::Var(n) => env.vars.get(n),
                Root::Item => env.item.as_ref().map(|(v, _)| v),
                Root::Index => return None,
            };
            if let Some(v) = found {
                return Some(v.clone());
            }
            at = env.parent.as_deref();
        }
        None
    }

    /// A frozen scope back as an owned one: itself when nothing else holds
    /// it, else a (cheap) copy of its own level.
    fn thaw(frozen: Arc<Env>) -> Env {
        Arc::try_unwrap(frozen).unwrap_or_else(|a| (*a).clone())
    }

    fn item(&self) -> Option<&(Shared, usize)> {
        match &self.item {
            Some(i) => Some(i),
            None => self.parent.as_deref().and_then(Env::item),
        }
    }

    /// A variable as text, the way the DSL's templates show it.
    pub(crate) fn var_text(&self, name: &str) -> Option<String> {
        self.var(name).map(as_text)
    }

    pub(crate) fn has_var(&self, name: &str) -> bool {
        self.var(name).is_some()
    }

    /// Fill `$variables` in a DSL template.
    pub(crate) fn render(&self, text: &str) -> String {
        template::render(text, |n| self.var_text(n))
    }

    /// Take in what a child scope produced (after a join).
    fn absorb(&mut self, child: Env) {
        self.steps.extend(child.steps);
        self.vars.extend(child.vars);
    }
}

impl Lookup for Env {
    fn lookup(&self, root: &Root) -> Option<Cow<'_, Value>> {
        match root {
            Root::Input => Some(Cow::Borrowed(&*self.inputs)),
            Root::Step(id) => self.step(id).map(Cow::Borrowed),
            Root::Item => self.item().map(|(v, _)| Cow::Borrowed(&**v)),
            Root::Index => self.item().map(|(_, i)| Cow::Owned(json!(i))),
            Root::Var(n) => self.var(n).map(Cow::Borrowed),
        }
    }
}

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

pub(crate) fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
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

/// Refuse to resume a session whose plan changed since it started, unless
/// forced: say what changed and how to go on anyway.
pub fn check_resume(plan: &Plan, prior: &[Event]) -> Result<(), String> {
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
    let mut changes = crate::plan::describe_changes(digests, &plan.digests());
    if changes.is_empty() {
        changes.push("the workflow's settings changed".into());
    }
    Err(format!(
        "the workflow changed since this session started ({}); resuming could mix two versions of it. Restore the file, start a new run, or pass --force-changed to resume anyway",
        changes.join("; ")
    ))
}

/// Run the plan's graph (or finish a compensation walk a crash interrupted);
/// returns how it ended and the root scope (for the run's `result`).
pub(crate) async fn run_plan(
    cx: &RunCx<'_>,
    inputs: &BTreeMap<String, String>,
) -> (Result<Shared, Stop>, Env) {
    let input_obj: serde_json::Map<String, Value> = match &cx.plan.input_schema {
        Some(schema) => crate::workflow_md::typed_inputs(Some(schema), inputs),
        None => inputs
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    };
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

/// A map over more items than the run allows: refused before any item runs.
fn too_many_items(cx: &RunCx<'_>, path: &str, n: usize) -> Option<Stop> {
    let limit = cx.budget.limits().map_items();
    (n > limit).then(|| {
        Stop::Failed(format!(
            "map `{path}` has {n} items, more than the limit of {limit} items per map; raise `[limits] max_map_items` in agent.toml if the workflow needs more (every item is recorded in the session), or split the list"
        ))
    })
}

/// Maps whose list is known before the first step (it reads only the
/// workflow's inputs) are checked against the item limit then, so a run
/// that would be refused half way is refused before it does anything.
/// Subworkflows are left out (their `$input` is their own); maps over other
/// lists are checked when they are reached.
fn check_map_sizes(cx: &RunCx<'_>, env: &Env) -> Result<(), Stop> {
    fn visit(cx: &RunCx<'_>, env: &Env, nodes: Vec<&Node>, path: &str) -> Result<(), Stop> {
        for n in nodes {
            let p = join(path, &n.id);
            if let NodeKind::Map { over, .. } = &n.kind
                && over.paths().iter().all(|x| matches!(x.root, Root::Input))
            {
                let len = match over {
                    Expr::Path(x) => x
                        .within(&env.inputs)
                        .and_then(Value::as_array)
                        .map(Vec::len),
                    _ => over.eval(env).as_array().map(Vec::len),
                };
                if let Some(stop) = len.and_then(|len| too_many_items(cx, &p, len)) {
                    return Err(stop);
                }
            }
            if let Some(c) = &n.compensation {
                visit(cx, env, vec![&**c], &p)?;
            }
            let inner = match &n.kind {
                NodeKind::Subworkflow { .. } => Vec::new(),
                NodeKind::Map { body, .. } | NodeKind::Loop { body, .. } => match &body.kind {
                    NodeKind::Sequence { nodes, .. } => nodes.iter().collect(),
                    _ => vec![&**body],
                },
                _ => n.children(),
            };
            visit(cx, env, inner, &p)?;
        }
        Ok(())
    }
    let top = match &cx.plan.graph.kind {
        NodeKind::Sequence { nodes, .. } => nodes.iter().collect(),
        _ => vec![&cx.plan.graph],
    };
    visit(cx, env, top, "")
}

/// Failures that walk back completed work. A cancellation or a suspension is
/// not a failure; a run that cannot ask for an approval can be resumed.
fn compensable(stop: &Stop) -> bool {
    !matches!(
        stop,
        Stop::Cancelled | Stop::Suspended(_) | Stop::ApprovalUnavailable(_)
    )
}

fn describe(stop: &Stop) -> String {
    match stop {
        Stop::Failed(e)
        | Stop::ApprovalDenied(e)
        | Stop::ApprovalUnavailable(e)
        | Stop::LoopLimit(e)
        | Stop::Denied(e) => e.clone(),
        Stop::Budget(b) => format!("budget exhausted ({})", b.as_str()),
        Stop::Cancelled => "cancelled".into(),
        Stop::Suspended(_) => "suspended".into(),
    }
}

/// A step's evaluated arguments against its TOOL.md `inputs` schema.
fn check_args(node: &Node, path: &str, args: &Value) -> Result<(), Stop> {
    let Some(schema) = &node.input_schema else {
        return Ok(());
    };
    let args = if args.is_null() { &json!({}) } else { args };
    crate::workflow_md::schema::validate_value(schema, args).map_err(|problems| {
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

    async fn run_sequence(
        &self,
        f: Frame<'_>,
        nodes: &[Node],
        start: Option<&str>,
        path: &str,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let mut out = Outcome::default();
        let mut i = match start {
            Some(s) => match nodes.iter().position(|n| n.id == s) {
                Some(i) => i,
                None => return Err(Stop::Failed(format!("start step `{s}` does not exist"))),
            },
            None => 0,
        };
        // A checked graph routes backwards only through an approval (each pass
        // waits for a human; `max_steps` bounds the run); this bound makes sure
        // a plan built some other way still cannot spin here.
        let mut budget = nodes.len().saturating_mul(nodes.len()).max(1) + 1001;
        // A node run again gets its own path (`review@2`), so the journal
        // replays each visit's own result.
        let mut visits: HashMap<usize, u32> = HashMap::new();
        while let Some(node) = nodes.get(i) {
            budget -= 1;
            if budget == 0 {
                return Err(Stop::Failed(format!(
                    "the steps under `{path}` route in a cycle; repeat work with a loop step"
                )));
            }
            let child = Frame {
                depth: f.depth + 1,
                step: if f.depth == 0 {
                    Some(node.id.as_str())
                } else {
                    f.step
                },
                ..f
            };
            let visit = visits.entry(i).or_insert(0);
            *visit += 1;
            let seg = if *visit == 1 {
                join(path, &node.id)
            } else {
                join(path, &format!("{}@{visit}", node.id))
            };
            let r = self.run_node(child, node, seg, env).await?;
            out.tool_calls += r.tool_calls;
            out.texts.extend(r.texts);
            out.value = r.value;
            if r.done && f.in_loop {
                out.done = true;
                break;
            }
            match r.route.or_else(|| node.next.clone()) {
                None => i += 1,
                Some(Next::End) => break,
                Some(Next::Node(id)) => match nodes.iter().position(|n| n.id == id) {
                    Some(j) => i = j,
                    None => {
                        return Err(Stop::Failed(format!(
                            "`{}` routes to `{id}`, which is not a step here",
                            node.id
                        )));
                    }
                },
            }
        }
        Ok(out)
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

    /// A goal's effects on the DSL's variables: `$goal` is its text, each
    /// `-> field` its value.
    fn goal_effects(&self, plan: &Plan, goal: &str, c: &Completed, env: &mut Env) {
        env.vars
            .insert(goal.to_owned(), Arc::new(Value::String(c.output.clone())));
        if plan.goal(goal).is_some() {
            for (k, v) in &c.fields {
                env.vars.insert(k.clone(), Arc::new(v.clone()));
            }
        }
    }

    async fn run_goal(
        &self,
        f: Frame<'_>,
        g: &crate::plan::GoalNode,
        scope: &Scope,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let Some(goal) = f.plan.goal(&g.goal) else {
            return Err(Stop::Failed(format!(
                "plan names an unknown goal `{}`",
                g.goal
            )));
        };
        // Bound inputs are variables of this goal only.
        let frozen;
        let mut bound;
        let work_env: &Env = match &g.inputs {
            Some(inputs) => {
                let values = inputs.eval(&*env);
                frozen = Arc::new(std::mem::take(env));
                bound = Env::child(&frozen);
                if let Value::Object(o) = values {
                    bound
                        .vars
                        .extend(o.into_iter().map(|(k, v)| (k, Arc::new(v))));
                }
                &bound
            }
            None => {
                frozen = Arc::new(Env::default());
                bound = Env::default();
                let _ = (&frozen, &mut bound);
                &*env
            }
        };
        let outcome = work_env.render(&goal.outcome);
        self.emit(
            scope,
            EventBody::GoalStarted {
                outcome: outcome.clone(),
                agents: goal.agents.clone(),
            },
        );
        let answer = match goal.kind {
            GoalKind::Goal => {
                super::work::work_goal(
                    self, f.plan, work_env, scope, &g.context, goal, &outcome, None, f.in_loop,
                )
                .await
            }
            GoalKind::Converge => {
                super::work::converge(
                    self, f.plan, work_env, scope, &g.context, goal, &outcome, f.in_loop,
                )
                .await
            }
        };
        if g.inputs.is_some() {
            drop(bound);
            *env = Env::thaw(frozen);
        }
        let (answer, converged) = answer?;
        let c = Completed {
            output: answer.text.clone(),
            fields: answer.fields.clone(),
            tool_calls: answer.tool_calls,
            done: answer.done,
        };
        self.emit(
            scope,
            EventBody::GoalComplete {
                output: c.output.clone(),
                fields: c.fields.clone(),
                converged,
                tool_calls: c.tool_calls,
                done: c.done,
            },
        );
        self.goal_effects(f.plan, &g.goal, &c, env);
        Ok(Outcome {
            value: Arc::new(self.goal_value(f.plan, &g.goal, &c)),
            done: c.done,
            tool_calls: c.tool_calls,
            texts: vec![c.output],
            ..Outcome::default()
        })
    }

    fn goal_value(&self, plan: &Plan, goal: &str, c: &Completed) -> Value {
        match plan.goal(goal) {
            Some(g) if !g.outputs.is_empty() => {
                Value::Object(c.fields.clone().into_iter().collect())
            }
            _ => Value::String(c.output.clone()),
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

    /// Approval classes: ask before the node runs when its class says so.
    async fn gate(
        &self,
        f: Frame<'_>,
        node: &Node,
        path: &str,
        scope: &Scope,
        env: &Env,
    ) -> Result<(), Stop> {
        let goal = match &node.kind {
            NodeKind::Goal(g) => f.plan.goal(&g.goal),
            _ => None,
        };
        let human = match (node.approval, goal.and_then(|g| g.supervision)) {
            (_, Some(Supervision::SupervisedHuman)) | (Some(ApprovalClass::SupervisedHuman), _) => {
                Some(true)
            }
            (_, Some(Supervision::Supervised)) | (Some(ApprovalClass::Supervised), _) => {
                Some(false)
            }
            (Some(ApprovalClass::Always), _) => Some(true),
            (Some(ApprovalClass::OnMutate), _) if node.mutates() => Some(true),
            _ => None,
        };
        let Some(human) = human else {
            return Ok(());
        };
        let (what, outcome) = match goal {
            Some(g) => (
                format!("goal `{}` is supervised: approve it before it runs", g.name),
                env.render(&g.outcome),
            ),
            None => (
                format!(
                    "step `{path}` ({}) needs approval before it runs",
                    node.kind.name()
                ),
                node.name.clone().unwrap_or_else(|| node.id.clone()),
            ),
        };
        let label = match goal {
            Some(g) => format!("goal `{}`", g.name),
            None => format!("step `{path}`"),
        };
        match self
            .ask(f, node, path, scope, what, outcome, human, None)
            .await?
        {
            Decision::Approved(_) => Ok(()),
            Decision::Rejected(note) => Err(Stop::ApprovalDenied(format!(
                "{label} was not approved{}",
                note.map(|n| format!(": {n}")).unwrap_or_default()
            ))),
            Decision::TimedOut => Err(Stop::ApprovalDenied(format!(
                "{label} was not approved in time"
            ))),
        }
    }

    /// Ask for a decision (or take the one the journal holds).
    #[allow(clippy::too_many_arguments)]
    async fn ask(
        &self,
        f: Frame<'_>,
        node: &Node,
        path: &str,
        scope: &Scope,
        reason: String,
        outcome: String,
        human: bool,
        timeout_ms: Option<u64>,
    ) -> Result<Decision, Stop> {
        let known = self.journal().approvals.get(path).cloned();
        if let Some((approved, note)) = known {
            return Ok(match (approved, note) {
                (true, n) => Decision::Approved(n),
                (false, Some(n)) if n == TIMED_OUT => Decision::TimedOut,
                (false, n) => Decision::Rejected(n),
            });
        }
        let deadline = match self.journal().deadlines.get(path) {
            Some(d) => Some(*d),
            None => timeout_ms.map(|t| now_ms().saturating_add(t)),
        };
        self.emit(
            scope,
            EventBody::ApprovalRequired {
                reason,
                deadline_ms: deadline,
            },
        );
        // Stored before anyone is asked: a decision is recorded against it,
        // possibly by another process reading the store.
        self.svc.bus.flush();
        let req = ApprovalRequest {
            session_id: self.svc.bus.session_id().to_owned(),
            node: path.to_owned(),
            step: f.step.unwrap_or(path).to_owned(),
            // Empty for a step that is not a goal (an approval step, a
            // tool step of class `always`): the question names the step.
            goal: match &node.kind {
                NodeKind::Goal(g) => g.goal.clone(),
                _ => String::new(),
            },
            outcome,
            human,
        };
        let wait = async {
            match deadline {
                Some(d) => {
                    tokio::time::sleep(Duration::from_millis(d.saturating_sub(now_ms()))).await
                }
                None => std::future::pending().await,
            }
        };
        let decision = tokio::select! {
            d = self.svc.approver.decide(&req) => d,
            _ = self.cancel.cancelled() => return Err(self.stop_for_cancel()),
            _ = wait => {
                self.emit(scope, EventBody::ApprovalResolved { approved: false, note: Some(TIMED_OUT.into()) });
                return Ok(Decision::TimedOut);
            }
        };
        match decision {
            Approval::Approved(note) => {
                self.emit(
                    scope,
                    EventBody::ApprovalResolved {
                        approved: true,
                        note: note.clone(),
                    },
                );
                Ok(Decision::Approved(note))
            }
            Approval::Rejected(note) => {
                self.emit(
                    scope,
                    EventBody::ApprovalResolved {
                        approved: false,
                        note: note.clone(),
                    },
                );
                Ok(Decision::Rejected(note))
            }
            Approval::Unavailable(why) => Err(Stop::ApprovalUnavailable(format!(
                "{} needs approval, but {why}",
                match &node.kind {
                    NodeKind::Goal(g) => format!("goal `{}`", g.goal),
                    _ => format!("step `{path}`"),
                }
            ))),
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
                        crate::text::human_duration(Duration::from_millis(ms))
                    ))),
                },
                None => run.await,
            };
            // An output that breaks the step's schema fails the attempt, so a
            // retry policy applies to it.
            let r = r.and_then(|out| match &node.output_schema {
                Some(schema) => {
                    match crate::workflow_md::schema::validate_value(schema, &out.value) {
                        Ok(()) => Ok(out),
                        Err(problems) => Err(Stop::Failed(format!(
                            "step `{path}`: its output does not match its `outputs` schema: {}",
                            problems.join("; ")
                        ))),
                    }
                }
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
                NodeKind::Goal(g) => self.run_goal(f, g, scope, env).await,
                NodeKind::Tool { tool, args } => {
                    let args = args.eval(&*env);
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
                NodeKind::ReadFiles { paths } => {
                    self.check_store()?;
                    if self.cancel.is_cancelled() {
                        return Err(self.stop_for_cancel());
                    }
                    let text = super::artifacts::read(self.tools, &self.root, paths)
                        .map_err(|e| self.file_stop(scope, path, e))?;
                    Ok(Outcome {
                        value: Arc::new(Value::String(text)),
                        ..Outcome::default()
                    })
                }
                NodeKind::WriteFile {
                    path: file,
                    content,
                } => {
                    self.check_store()?;
                    if self.cancel.is_cancelled() {
                        return Err(self.stop_for_cancel());
                    }
                    let text = content.as_ref().map(|c| c.render(&*env));
                    let written = match text {
                        Some(t) if !file.ends_with('/') => {
                            super::artifacts::write(self.tools, &self.root, file, &t)
                                .map(|w| vec![w])
                        }
                        t => super::artifacts::folder(self.tools, &self.root, file, t.as_deref()),
                    }
                    .map_err(|e| self.file_stop(scope, path, e))?;
                    let files: Vec<Value> = written
                        .iter()
                        .map(|w| json!({"path": w.path, "bytes": w.bytes}))
                        .collect();
                    for w in written {
                        self.emit(
                            scope,
                            EventBody::Artifact {
                                path: w.path,
                                bytes: w.bytes,
                                sha256: w.sha256,
                            },
                        );
                    }
                    Ok(Outcome {
                        value: Arc::new(json!({"path": file, "files": files})),
                        ..Outcome::default()
                    })
                }
                NodeKind::Branch { arms, default } => {
                    let chosen = arms.iter().position(|a| truthy(&a.when.eval(&*env)));
                    let route = match chosen {
                        Some(i) => arms[i].next.clone(),
                        None => default.clone().unwrap_or(Next::End),
                    };
                    Ok(Outcome {
                        value: Arc::new(json!({
                            "arm": chosen,
                            "next": route.as_str(),
                        })),
                        route: Some(route),
                        ..Outcome::default()
                    })
                }
                NodeKind::Parallel { branches } => self.run_parallel(f, branches, path, env).await,
                NodeKind::Map {
                    over,
                    concurrency,
                    body,
                } => {
                    // The list is read where it lives (an input, a step's
                    // output), not copied: each item is copied as it starts.
                    let (root, at) = match over {
                        Expr::Path(p) => match env.shared(&p.root) {
                            Some(root) => (root, Some(p)),
                            None => (Arc::new(over.eval(&*env)), None),
                        },
                        _ => (Arc::new(over.eval(&*env)), None),
                    };
                    let list = match at {
                        Some(p) => p.within(&root).unwrap_or(&Value::Null),
                        None => &*root,
                    };
                    let items: &[Value] = match list {
                        Value::Array(a) => a,
                        Value::Null => &[],
                        other => {
                            return Err(Stop::Failed(format!(
                                "map `{path}`: `{over}` is {}, not a list",
                                kind_of(other)
                            )));
                        }
                    };
                    if let Some(stop) = too_many_items(self, path, items.len()) {
                        return Err(stop);
                    }
                    self.run_map(f, items, *concurrency, body, path, env).await
                }
                NodeKind::Loop { until, max, body } => {
                    let limit = resolve_limit(max, env);
                    self.run_loop(f, node, until, limit, body, path, scope, env)
                        .await
                }
                NodeKind::Approval(a) => {
                    let prompt = a.prompt.render(&*env);
                    let d = self
                        .ask(
                            f,
                            node,
                            path,
                            scope,
                            format!(
                                "step `{path}` asks for a decision: {}",
                                crate::text::truncate(&prompt, 500)
                            ),
                            prompt,
                            true,
                            a.timeout_ms,
                        )
                        .await?;
                    let (value, route) = match d {
                        Decision::Approved(note) => (
                            json!({"approved": true, "decision": "approve", "note": note}),
                            a.on_approve.clone(),
                        ),
                        Decision::Rejected(note) => {
                            let Some(to) = a.on_reject.clone() else {
                                return Err(Stop::ApprovalDenied(format!(
                                    "step `{path}` was rejected{}",
                                    note.map(|n| format!(": {n}")).unwrap_or_default()
                                )));
                            };
                            (
                                json!({"approved": false, "decision": "reject", "note": note}),
                                Some(to),
                            )
                        }
                        Decision::TimedOut => {
                            let route = self.on_timeout(&a.on_timeout, path, "approval")?;
                            (json!({"approved": false, "decision": "timeout"}), route)
                        }
                    };
                    Ok(Outcome {
                        value: Arc::new(value),
                        route,
                        ..Outcome::default()
                    })
                }
                NodeKind::Suspend {
                    events,
                    timeout_ms,
                    on_timeout,
                } => self.run_suspend(path, scope, events, *timeout_ms, on_timeout),
                NodeKind::Subworkflow { plan, inputs } => {
                    let given = inputs.eval(&*env);
                    let mut sub = Env::default();
                    let mut vars = serde_json::Map::new();
                    if let Value::Object(o) = given {
                        vars = o;
                    }
                    for i in &plan.inputs {
                        if !vars.contains_key(&i.name) {
                            match &i.default {
                                Some(d) => {
                                    vars.insert(i.name.clone(), Value::String(d.clone()));
                                }
                                None => {
                                    return Err(Stop::Failed(format!(
                                        "subworkflow `{path}` needs input `{}`, which is not mapped",
                                        i.name
                                    )));
                                }
                            }
                        }
                    }
                    // Its inputs are its variables too (see `Env::var`).
                    sub.inputs = Arc::new(Value::Object(vars));
                    let frame = Frame {
                        plan,
                        step: f.step,
                        iteration: f.iteration,
                        in_loop: false,
                        depth: f.depth,
                    };
                    let out = self
                        .run_body(frame, &plan.graph, path.to_owned(), &mut sub)
                        .await?;
                    let value = match &plan.result {
                        Some(r) => Arc::new(r.eval(&sub)),
                        None => out.value,
                    };
                    Ok(Outcome {
                        value,
                        tool_calls: out.tool_calls,
                        ..Outcome::default()
                    })
                }
            }
        })
    }

    fn on_timeout(&self, on: &OnTimeout, path: &str, what: &str) -> Result<Option<Next>, Stop> {
        match on {
            OnTimeout::Fail => Err(Stop::Failed(format!("{what} `{path}` timed out"))),
            OnTimeout::Cancel => Err(Stop::Cancelled),
            OnTimeout::Continue => Ok(None),
            OnTimeout::Goto(id) => Ok(Some(Next::Node(id.clone()))),
        }
    }

    fn run_suspend(
        &self,
        path: &str,
        scope: &Scope,
        events: &[String],
        timeout_ms: Option<u64>,
        on_timeout: &OnTimeout,
    ) -> Result<Outcome, Stop> {
        let mut j = self.journal();
        if let Some((name, payload)) = j.take_signal(path, events) {
            // The payload's own fields are the step's outputs (AIP-15's
            // examples read `$steps.<id>.chargeId`), beside `eventName` and
            // the whole `eventPayload`.
            let mut value = match &payload {
                Value::Object(o) => o.clone(),
                _ => serde_json::Map::new(),
            };
            value.insert("eventName".into(), json!(name));
            value.insert("eventPayload".into(), payload);
            return Ok(Outcome {
                value: Arc::new(Value::Object(value)),
                ..Outcome::default()
            });
        }
        let deadline = match j.deadlines.get(path) {
            Some(d) => Some(*d),
            None => timeout_ms.map(|t| now_ms().saturating_add(t)),
        };
        let waiting = j.suspended.contains_key(path);
        drop(j);
        if let Some(d) = deadline
            && now_ms() >= d
        {
            let route = self.on_timeout(on_timeout, path, "suspend")?;
            return Ok(Outcome {
                value: Arc::new(json!({"eventName": null, "timedOut": true})),
                route,
                ..Outcome::default()
            });
        }
        if !waiting {
            self.emit(
                scope,
                EventBody::Suspended {
                    events: events.to_vec(),
                    deadline_ms: deadline,
                },
            );
        }
        Err(Stop::Suspended(events.to_vec()))
    }

    async fn run_tool(
        &self,
        scope: &Scope,
        path: &str,
        tool: &str,
        args: Value,
    ) -> Result<Outcome, Stop> {
        let args = match args {
            Value::Object(_) => args,
            Value::Null => json!({}),
            other => {
                return Err(Stop::Failed(format!(
                    "step `{path}`: the arguments of `{tool}` must be an object, not {}",
                    kind_of(&other)
                )));
            }
        };
        let id = format!("node:{path}");
        let (output, denied) = self.gated_call(scope, &id, tool, args).await?;
        if let Some(d) = denied {
            return Err(Stop::Denied(format!(
                "step `{path}`: `{tool}` was denied by the policy ({}): {}",
                d.rule, d.reason
            )));
        }
        // A deterministic step's command that exits non-zero failed, even
        // though a model would just read the exit code.
        let command_failed = output.command.as_ref().is_some_and(|c| !c.succeeded());
        if output.is_error || command_failed {
            return Err(Stop::Failed(format!(
                "step `{path}`: `{tool}` failed: {}",
                crate::text::truncate(&output.content, 2000)
            )));
        }
        let value = match &output.command {
            Some(c) => command_value(c),
            None => parse_output(&output.content),
        };
        Ok(Outcome {
            value: Arc::new(value),
            tool_calls: 1,
            ..Outcome::default()
        })
    }

    async fn run_command(
        &self,
        scope: &Scope,
        path: &str,
        tool: &str,
        argv: &[String],
        args: Value,
    ) -> Result<Outcome, Stop> {
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        self.check_store()?;
        self.budget.record_tool_call();
        let id = format!("node:{path}");
        self.emit(
            scope,
            EventBody::ToolCall {
                id: id.clone(),
                tool: tool.to_owned(),
                arguments: args.clone(),
            },
        );
        let input = serde_json::to_vec(&args).unwrap_or_default();
        let r = self.tools.run_command(argv, input, &self.tool_cx).await;
        if let Some(d) = &r.denied {
            self.emit(
                scope,
                EventBody::PolicyDenied {
                    id: id.clone(),
                    tool: tool.to_owned(),
                    rule: d.rule.clone(),
                    reason: d.reason.clone(),
                },
            );
        }
        self.emit(
            scope,
            EventBody::ToolResult {
                id,
                tool: tool.to_owned(),
                content: r.output.content.clone(),
                is_error: r.output.is_error,
                duration_ms: r.duration.as_millis() as u64,
            },
        );
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        if let Some(d) = r.denied {
            return Err(Stop::Denied(format!(
                "step `{path}`: `{tool}` (`{}`) was denied by the policy ({}): {}",
                argv.join(" "),
                d.rule,
                d.reason
            )));
        }
        let Some(command) = r
            .output
            .command
            .as_ref()
            .filter(|c| c.succeeded() && !r.output.is_error)
        else {
            return Err(Stop::Failed(format!(
                "step `{path}`: `{tool}` failed: {}",
                crate::text::truncate(&r.output.content, 2000)
            )));
        };
        Ok(Outcome {
            value: Arc::new(command_value(command)),
            tool_calls: 1,
            ..Outcome::default()
        })
    }

    /// A file operation of a node stopped: a denial is recorded as a
    /// `policy_denied` event, like a model's denied call.
    fn file_stop(&self, scope: &Scope, path: &str, e: super::artifacts::FileError) -> Stop {
        if let super::artifacts::FileError::Denied {
            tool, rule, reason, ..
        } = &e
        {
            self.emit(
                scope,
                EventBody::PolicyDenied {
                    id: format!("node:{path}"),
                    tool: (*tool).to_owned(),
                    rule: rule.clone(),
                    reason: reason.clone(),
                },
            );
        }
        match e.into_stop() {
            Stop::Denied(m) => Stop::Denied(format!("step `{path}`: {m}")),
            Stop::Failed(m) => Stop::Failed(format!("step `{path}`: {m}")),
            other => other,
        }
    }

    async fn run_shell(
        &self,
        scope: &Scope,
        path: &str,
        script: &str,
        interpreter: &str,
        args: &[String],
        vars: &[(String, String)],
    ) -> Result<Outcome, Stop> {
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        self.check_store()?;
        let id = format!("node:{path}");
        let arguments = json!({"script": script, "args": args});
        self.emit(
            scope,
            EventBody::ToolCall {
                id: id.clone(),
                tool: "shell".into(),
                arguments,
            },
        );
        let file = self.root.join(script);
        let r = self
            .tools
            .run_script(
                crate::tools::Script {
                    path: &file,
                    interpreter,
                    args,
                    env: vars,
                },
                &self.tool_cx,
            )
            .await;
        self.emit(
            scope,
            EventBody::ToolResult {
                id,
                tool: "shell".into(),
                content: r.output.content.clone(),
                is_error: r.output.is_error,
                duration_ms: r.duration.as_millis() as u64,
            },
        );
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        let Some(command) = r
            .output
            .command
            .as_ref()
            .filter(|c| c.succeeded() && !r.output.is_error)
        else {
            return Err(Stop::Failed(format!(
                "step `{path}`: script `{script}` failed: {}",
                crate::text::truncate(&r.output.content, 2000)
            )));
        };
        // Like a tool's: JSON when the script printed JSON, else its text.
        Ok(Outcome {
            value: Arc::new(command_value(command)),
            ..Outcome::default()
        })
    }

    async fn run_parallel(
        &self,
        f: Frame<'_>,
        branches: &[Node],
        path: &str,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let frozen = Arc::new(std::mem::take(env));
        let runs = branches.iter().map(|b| {
            let mut child = Env::child(&frozen);
            let frame = Frame {
                depth: f.depth + 1,
                ..f
            };
            let p = join(path, &b.id);
            async move {
                let r = self.run_node(frame, b, p, &mut child).await;
                (r, child)
            }
        });
        let results = futures::future::join_all(runs).await;
        *env = Env::thaw(frozen);
        let mut out = Outcome::default();
        let mut values = serde_json::Map::new();
        let mut first_err: Option<Stop> = None;
        for (b, (r, child)) in branches.iter().zip(results) {
            env.absorb(child);
            match r {
                Ok(o) => {
                    out.tool_calls += o.tool_calls;
                    out.texts.extend(o.texts);
                    values.insert(b.id.clone(), Arc::unwrap_or_clone(o.value));
                }
                Err(e) => first_err = Some(worse(first_err, e)),
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        out.value = Arc::new(Value::Object(values));
        Ok(out)
    }

    async fn run_map(
        &self,
        f: Frame<'_>,
        items: &[Value],
        concurrency: u32,
        body: &Node,
        path: &str,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let n = items.len();
        // Items in flight: a map over 100,000 items must not start 100,000
        // tool processes or model calls at once.
        let width = match concurrency {
            0 => DEFAULT_MAP_WIDTH,
            c => (c as usize).min(MAX_MAP_WIDTH),
        };
        let frozen = Arc::new(std::mem::take(env));
        // Fail fast: once an item fails, items not yet started are skipped;
        // those in flight finish (their work is recorded either way).
        let abort = AtomicBool::new(false);
        // What an item leaves: its output, or why it stopped (`None`:
        // skipped, or a step that had not completed when scopes are rebuilt
        // after a crash). Results are taken in order as items finish, so
        // what is kept per item is its output and nothing more: no future,
        // scope or outcome outlives its item.
        let mut out = Outcome::default();
        let mut values = Vec::with_capacity(n);
        let mut first_err: Option<Stop> = None;
        let mut incomplete = false;
        {
            let abort = &abort;
            let frozen = &frozen;
            // By index: the stream starts an item's future (copying the
            // item) only when there is room for it.
            let mut results = futures::stream::iter(0..n)
                .map(|i| {
                    let frame = Frame { ..f };
                    let item = Arc::new(items[i].clone());
                    async move {
                        if abort.load(Ordering::Relaxed) {
                            return Err(None);
                        }
                        let mut child = Env::child(frozen);
                        child.item = Some((item, i));
                        let r = self
                            .run_body(frame, body, format!("{path}[{i}]"), &mut child)
                            .await;
                        // The item's scope goes before its output is taken,
                        // so the output is not copied (unless a compensation
                        // keeps the scope).
                        drop(child);
                        match r {
                            Ok(o) => Ok((Arc::unwrap_or_clone(o.value), o.tool_calls)),
                            Err(Stop::Failed(e)) if e.is_empty() => Err(None),
                            Err(e) => {
                                if matches!(
                                    e,
                                    Stop::Failed(_)
                                        | Stop::Denied(_)
                                        | Stop::LoopLimit(_)
                                        | Stop::ApprovalDenied(_)
                                ) {
                                    abort.store(true, Ordering::Relaxed);
                                }
                                Err(Some(e))
                            }
                        }
                    }
                })
                .buffered(width);
            while let Some(r) = results.next().await {
                match r {
                    Ok((value, tool_calls)) => {
                        out.tool_calls += tool_calls;
                        values.push(value);
                    }
                    Err(None) => incomplete = true,
                    Err(Some(e)) => first_err = Some(worse(first_err, e)),
                }
            }
        }
        *env = Env::thaw(frozen);
        if let Some(e) = first_err {
            return Err(e);
        }
        if incomplete {
            return Err(Stop::Failed(String::new()));
        }
        out.value = Arc::new(Value::Array(values));
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_loop(
        &self,
        f: Frame<'_>,
        node: &Node,
        until: &LoopUntil,
        limit: u32,
        body: &Node,
        path: &str,
        scope: &Scope,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let converging = matches!(until, LoopUntil::Converged);
        let mut previous: Option<Vec<String>> = None;
        let mut out = Outcome::default();
        for it in 1..=limit {
            if let LoopUntil::While { expr } = until {
                // Before the first round, a condition about the body's own
                // results cannot be judged yet: the body runs once.
                let reads_body = it == 1
                    && expr.paths().iter().any(|p| match &p.root {
                        Root::Step(id) => find_in(body, id),
                        _ => false,
                    });
                if !reads_body && !truthy(&expr.eval(&*env)) {
                    out.loop_end = Some((it - 1, LoopStop::Explicit));
                    return Ok(out);
                }
            }
            let iter_path = format!("{path}#{it}");
            if !self.journal().iterations.contains(&iter_path)
                && !self.replay_only.load(Ordering::Relaxed)
            {
                let mut s = scope.clone();
                s.iteration = Some(it);
                s.node = Some(iter_path.clone());
                s.goal = None;
                self.emit(&s, EventBody::LoopIteration { limit });
            }
            let frame = Frame {
                iteration: if f.depth == 1 || converging {
                    Some(it)
                } else {
                    f.iteration
                },
                in_loop: converging,
                ..f
            };
            let r = self.run_body(frame, body, iter_path, env).await?;
            out.tool_calls += r.tool_calls;
            out.value = r.value;
            if converging {
                let stop = if r.done {
                    Some(LoopStop::Explicit)
                } else if r.tool_calls == 0 {
                    Some(LoopStop::NoToolCalls)
                } else if previous.as_ref() == Some(&r.texts) {
                    Some(LoopStop::Unchanged)
                } else {
                    None
                };
                if let Some(stop) = stop {
                    out.loop_end = Some((it, stop));
                    return Ok(out);
                }
                previous = Some(r.texts);
            }
        }
        if let LoopUntil::While { expr } = until {
            if !truthy(&expr.eval(&*env)) {
                out.loop_end = Some((limit, LoopStop::Explicit));
                return Ok(out);
            }
            return Err(Stop::LoopLimit(format!(
                "loop `{path}` reached its maximum of {limit} iterations with `{expr}` still true"
            )));
        }
        let name = f.step.filter(|_| f.depth == 1).unwrap_or(&node.id);
        let msg =
            format!("loop `{name}` reached its limit of {limit} iterations without converging");
        let quiet = self.replay_only.load(Ordering::Relaxed);
        let mut s = scope.clone();
        s.node = Some(path.to_owned());
        if !quiet {
            self.emit(
                &s,
                EventBody::Warning {
                    message: msg.clone(),
                },
            );
        }
        out.loop_end = Some((limit, LoopStop::Limit));
        if self.budget.limits().strict_convergence {
            // The step still completes (its record says it hit the limit).
            if f.depth == 1 && !quiet {
                self.emit_complete(true, node, scope, &out);
            }
            return Err(Stop::LoopLimit(msg));
        }
        Ok(out)
    }

    /// Walk back: the compensations of completed nodes, newest first, each at
    /// most once per failure (a crash during the walk resumes it). Each runs
    /// in the scope its node completed in (the workflow's inputs, the steps
    /// before it, the node's own output), kept when the node completed or,
    /// for a completion replayed from the journal, rebuilt by the replay.
    async fn compensate(&self, stop: &Stop) {
        let mut list: Vec<super::Undo<'a>> =
            std::mem::take(&mut *self.completed.lock().unwrap_or_else(|p| p.into_inner()));
        if list.is_empty() {
            return;
        }
        // Completion order (concurrent branches and items complete in any
        // order; a replay walks them in plan order).
        list.sort_by_key(|u| u.rank);
        let error = describe(stop);
        if self.journal().compensating.is_none() {
            self.emit(
                &Scope::default(),
                EventBody::Compensating {
                    error: error.clone(),
                    nodes: list.iter().rev().map(|u| u.path.clone()).collect(),
                },
            );
        }
        for u in list.into_iter().rev() {
            let Some(comp) = u.node.compensation.as_deref() else {
                continue;
            };
            let path = u.path;
            let comp_path = format!("{path}~undo");
            if self.journal().done.contains_key(&comp_path) {
                continue;
            }
            let mut env = u.scope;
            let frame = Frame {
                plan: self.plan,
                step: path.split('/').next(),
                iteration: None,
                in_loop: false,
                depth: 2,
            };
            if let Err(e) = self
                .run_node(frame, comp, comp_path.clone(), &mut env)
                .await
            {
                let s = Scope {
                    node: Some(comp_path),
                    ..Scope::default()
                };
                self.emit(
                    &s,
                    EventBody::Error {
                        message: format!(
                            "the compensation of `{path}` failed; the walk-back goes on: {}",
                            describe(&e)
                        ),
                    },
                );
            }
        }
    }
}

/// The more serious of two failures (a failure beats a suspension).
fn worse(a: Option<Stop>, b: Stop) -> Stop {
    match a {
        None => b,
        Some(Stop::Suspended(_)) => b,
        Some(a) => a,
    }
}

enum Decision {
    Approved(Option<String>),
    Rejected(Option<String>),
    TimedOut,
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

/// Whether `id` names a node inside `body`.
fn find_in(body: &Node, id: &str) -> bool {
    let mut found = false;
    body.walk(&mut |n| found |= n.id == id);
    found
}

pub(crate) fn resolve_limit(l: &Limit, env: &Env) -> u32 {
    match l {
        Limit::Count { count } => *count,
        Limit::Input { input, default } => env
            .var_text(input)
            .and_then(|v| v.trim().parse().ok())
            .or(*default)
            .unwrap_or(1),
    }
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

/// What a command printed on stdout, as a value: JSON when it is JSON, else
/// the text without its final newlines.
fn command_value(c: &crate::tools::CommandOutcome) -> Value {
    parse_output(c.stdout.trim_end_matches('\n'))
}

/// A tool's text as a value: JSON when it is JSON, else the text.
fn parse_output(content: &str) -> Value {
    let t = content.trim_start();
    if t.starts_with(['{', '['])
        && let Ok(v) = serde_json::from_str(content)
    {
        return v;
    }
    Value::String(content.to_owned())
}
