//! The executor: runs a [`Plan`] to its outputs.
//!
//! It talks to the world only through small traits — [`Models`] (which provider
//! serves an agent), [`ToolSet`] (the policy-gated tools), [`Approver`] (human
//! approval) and the [`EventBus`] (events, stored before anyone sees them) — so
//! tests drive it with fakes and the CLI and servers stay thin adapters.
//!
//! Semantics (CONTRACT §2):
//! - RUN: goals in order. LOOP: the goal list runs as one body per iteration until
//!   converged — a `signal_done` call (explicit), an iteration without tool calls,
//!   or outputs equal to the previous iteration's — or until WITHIN; every loop
//!   records why it stopped.
//! - CONVERGE: the goal refines its own output, seeing its history, until it
//!   replies exactly `CONVERGED` or its output stops changing (and, once it has
//!   used tools, an iteration without tool calls); the limit is never shown to
//!   the model.
//! - GOAL … USING a, b: one conversation per agent, concurrently, then one
//!   synthesis that is the goal's output.
//!
//! Resume: the event log is the journal. Given a session's earlier events, goals
//! that completed are not run again (their outputs come from `goal_complete`),
//! loops continue at the iteration they reached, and the interrupted goal restarts
//! from its beginning.

pub mod budget;
pub mod goal;
mod prompt;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use budget::{BudgetKind, Limits, parse_duration};
use goal::{Answer, Conversation};

use crate::agentfile::template;
use crate::events::{EventBus, Scope};
use crate::llm::{Provider, ToolDef};
use crate::plan::{GoalDef, GoalKind, Limit, Plan, StepDef, StepKind, Supervision};
use crate::protocol::events::{Event, EventBody, LoopStop, RunResult, Usage};
use crate::tools::{ToolContext, ToolSet};

/// Exit codes (CONTRACT §3).
pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const POLICY: i32 = 3;
    pub const BUDGET: i32 = 4;
    pub const LOOP_LIMIT: i32 = 5;
    pub const CANCELLED: i32 = 130;
}

/// Which model serves an agent: the config's `llm`, or the profile an agent
/// `REQUIRES`.
pub trait Models: Send + Sync {
    fn provider(&self, profile: Option<&str>) -> Result<Arc<dyn Provider>, String>;
}

/// A request for a human decision before a supervised goal.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub session_id: String,
    pub step: String,
    pub goal: String,
    pub outcome: String,
    pub human: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    Approved(Option<String>),
    Rejected(Option<String>),
    /// Nobody can be asked (not a terminal, no `--approve-all`): the run stops.
    Unavailable(String),
}

pub trait Approver: Send + Sync {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval>;
}

/// Approves everything (`--approve-all`).
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn decide<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async { Approval::Approved(Some("with --approve-all".into())) })
    }
}

/// What to run.
pub struct RunSpec {
    pub plan: Arc<Plan>,
    /// Bound inputs (see [`bind_inputs`]).
    pub inputs: BTreeMap<String, String>,
    pub workspace: PathBuf,
    pub agent_id: String,
    pub limits: Limits,
    /// Provider and model names for `run_started`.
    pub provider_label: (String, String),
    /// Where the default provider's calls go, for `run_started`.
    pub endpoint: Option<String>,
    /// Earlier events of this session when resuming (empty for a new run).
    pub prior_events: Vec<Event>,
    /// Problems found while setting up (a policy section ignored, an MCP server
    /// that did not start), emitted as `warning` events after `run_started`.
    pub warnings: Vec<String>,
}

/// Everything the executor talks to.
pub struct Services<'a> {
    pub models: &'a dyn Models,
    pub tools: &'a dyn ToolSet,
    pub approver: &'a dyn Approver,
    pub bus: &'a EventBus,
}

/// Why a run stopped early.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stop {
    Failed(String),
    Budget(BudgetKind),
    Cancelled,
    ApprovalDenied(String),
    ApprovalUnavailable(String),
    LoopLimit(String),
}

/// The state one run shares between its goals and conversations.
pub(crate) struct RunCx<'a> {
    pub plan: &'a Plan,
    pub svc: &'a Services<'a>,
    pub tools: &'a dyn ToolSet,
    pub tool_defs: Vec<ToolDef>,
    pub tool_cx: ToolContext,
    pub budget: Arc<budget::Budget>,
    pub cancel: CancellationToken,
}

impl RunCx<'_> {
    pub(crate) fn emit(&self, scope: &Scope, body: EventBody) {
        self.svc.bus.emit(scope, body);
    }

    /// Once the session store has failed (a full disk), nothing more can be
    /// recorded: the run stops before its next model call or tool call rather
    /// than doing work nobody could resume.
    pub(crate) fn check_store(&self) -> Result<(), Stop> {
        match self.svc.bus.store_error() {
            Some(e) => Err(Stop::Failed(format!("the session store failed: {e}"))),
            None => Ok(()),
        }
    }

    /// Cancellation has two causes: a budget (which says which) or the user.
    pub(crate) fn stop_for_cancel(&self) -> Stop {
        match self.budget.exhausted() {
            Some(r) => Stop::Budget(r),
            None => Stop::Cancelled,
        }
    }
}

/// Check inputs against the plan: unknown names and missing required inputs are
/// errors (before any model call); defaults fill the rest; loop-limit inputs must
/// be positive whole numbers.
pub fn bind_inputs(
    plan: &Plan,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let known: Vec<&str> = plan.inputs.iter().map(|i| i.name.as_str()).collect();
    for k in given.keys() {
        if !known.contains(&k.as_str()) {
            let hint = match crate::diag::suggest(k, known.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None if known.is_empty() => "the workflow takes no inputs".to_owned(),
                None => format!("the workflow's inputs are: {}", known.join(", ")),
            };
            return Err(format!("unknown input `{k}`; {hint}"));
        }
    }
    let mut out = BTreeMap::new();
    let mut missing = Vec::new();
    for i in &plan.inputs {
        match given.get(&i.name).or(i.default.as_ref()) {
            Some(v) => {
                out.insert(i.name.clone(), v.clone());
            }
            None => missing.push(i.name.as_str()),
        }
    }
    if !missing.is_empty() {
        let flags: Vec<String> = missing.iter().map(|m| format!("--input {m}=…")).collect();
        return Err(format!(
            "missing required input{} {}; pass {}",
            if missing.len() == 1 { "" } else { "s" },
            missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", "),
            flags.join(" ")
        ));
    }
    let limits = plan
        .steps
        .iter()
        .filter_map(|s| s.within.as_ref())
        .chain(plan.goals.iter().filter_map(|g| g.within.as_ref()));
    for l in limits {
        if let Limit::Input { input, .. } = l
            && let Some(v) = out.get(input)
            && !v.trim().parse::<u32>().is_ok_and(|n| n > 0)
        {
            return Err(format!(
                "input `{input}` is a loop limit and must be a positive whole number, not `{v}`"
            ));
        }
    }
    Ok(out)
}

/// Completed work found in a session's earlier events.
#[derive(Default)]
struct Journal {
    /// (step, goal, iteration) → completed runs of that goal, in order.
    goals: HashMap<(String, String, Option<u32>), VecDeque<Completed>>,
    /// Steps that finished, with their goal results in order (to restore vars).
    steps: HashMap<String, Vec<(String, Completed)>>,
    started_steps: HashSet<String>,
    iterations: HashSet<(String, u32)>,
    approvals: HashMap<(String, String, Option<u32>), bool>,
    usage: Usage,
    last_seq: u64,
}

#[derive(Debug, Clone)]
struct Completed {
    output: String,
    fields: BTreeMap<String, Value>,
    tool_calls: u64,
    done: bool,
}

impl Journal {
    fn from_events(events: &[Event]) -> Journal {
        let mut j = Journal::default();
        let mut step_goals: HashMap<String, Vec<(String, Completed)>> = HashMap::new();
        for e in events {
            j.last_seq = e.seq;
            let step = e.step.clone().unwrap_or_default();
            match &e.body {
                EventBody::StepStarted { .. } => {
                    j.started_steps.insert(step);
                }
                EventBody::LoopIteration { .. } if e.goal.is_none() => {
                    if let Some(i) = e.iteration {
                        j.iterations.insert((step, i));
                    }
                }
                EventBody::GoalComplete {
                    output,
                    fields,
                    tool_calls,
                    done,
                    ..
                } if e.agent.is_none() => {
                    let goal = e.goal.clone().unwrap_or_default();
                    let c = Completed {
                        output: output.clone(),
                        fields: fields.clone(),
                        tool_calls: *tool_calls,
                        done: *done,
                    };
                    step_goals
                        .entry(step.clone())
                        .or_default()
                        .push((goal.clone(), c.clone()));
                    j.goals
                        .entry((step, goal, e.iteration))
                        .or_default()
                        .push_back(c);
                }
                EventBody::StepComplete { .. } => {
                    let done = step_goals.remove(&step).unwrap_or_default();
                    j.steps.insert(step, done);
                }
                EventBody::ApprovalResolved { approved, .. } => {
                    let goal = e.goal.clone().unwrap_or_default();
                    j.approvals.insert((step, goal, e.iteration), *approved);
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
}

/// The mutable state of a run: bound variables and goal outputs.
struct State {
    vars: HashMap<String, String>,
    outputs: BTreeMap<String, Value>,
    journal: Journal,
}

impl State {
    fn record(&mut self, goal: &GoalDef, c: &Completed) {
        self.vars.insert(goal.name.clone(), c.output.clone());
        for (k, v) in &c.fields {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            self.vars.insert(k.clone(), text);
        }
        let value = if goal.outputs.is_empty() {
            Value::String(c.output.clone())
        } else {
            Value::Object(c.fields.clone().into_iter().collect())
        };
        self.outputs.insert(goal.name.clone(), value);
    }

    fn render(&self, text: &str) -> String {
        template::render(text, |n| self.vars.get(n).cloned())
    }
}

/// Run a plan to its end and say how it ended. Never panics on anything a model
/// or tool does; every ending is a [`RunResult`] with its exit code.
pub async fn execute(spec: RunSpec, svc: &Services<'_>, cancel: CancellationToken) -> RunResult {
    let journal = Journal::from_events(&spec.prior_events);
    let resumed_from = (!spec.prior_events.is_empty()).then_some(journal.last_seq);
    let budget = Arc::new(budget::Budget::new(
        spec.limits.clone(),
        cancel.clone(),
        journal.usage.clone(),
    ));
    let timer = budget.deadline().map(|deadline| {
        let b = budget.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline.into()).await;
            b.time_out();
        })
    });
    let cx = RunCx {
        plan: &spec.plan,
        svc,
        tools: svc.tools,
        tool_defs: svc.tools.definitions(),
        tool_cx: ToolContext {
            workspace: spec.workspace.clone(),
            agent_id: spec.agent_id.clone(),
            cancel: cancel.clone(),
        },
        budget: budget.clone(),
        cancel: cancel.clone(),
    };
    cx.emit(
        &Scope::default(),
        EventBody::RunStarted {
            workflow: spec.plan.name.clone(),
            path: spec.plan.path.clone(),
            inputs: spec.inputs.clone(),
            provider: spec.provider_label.0.clone(),
            model: spec.provider_label.1.clone(),
            endpoint: spec.endpoint.clone(),
            workspace: spec.workspace.display().to_string(),
            resumed_from_seq: resumed_from,
        },
    );
    let mut state = State {
        vars: spec
            .inputs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        outputs: BTreeMap::new(),
        journal,
    };
    let outcome = run_steps(&cx, &mut state).await;
    if let Some(t) = timer {
        t.abort();
    }
    let outcome = match (outcome, svc.bus.store_error()) {
        (Ok(()), Some(e)) => Err(Stop::Failed(format!("the session store failed: {e}"))),
        (o, _) => o,
    };
    let usage = budget.usage();
    let session_id = svc.bus.session_id().to_owned();
    let (status, reason, error, code) = match &outcome {
        Ok(()) => ("completed", "completed".to_owned(), None, exit::OK),
        Err(Stop::Cancelled) => ("cancelled", "cancelled".to_owned(), None, exit::CANCELLED),
        Err(Stop::Failed(e)) => ("failed", "error".to_owned(), Some(e.clone()), exit::FAILED),
        Err(Stop::Budget(b)) => (
            "failed",
            b.as_str().to_owned(),
            Some(format!("budget exhausted: {}", b.describe(&spec.limits))),
            exit::BUDGET,
        ),
        Err(Stop::ApprovalDenied(e)) => (
            "failed",
            "approval_denied".to_owned(),
            Some(e.clone()),
            exit::POLICY,
        ),
        Err(Stop::ApprovalUnavailable(e)) => (
            "failed",
            "approval_unavailable".to_owned(),
            Some(e.clone()),
            exit::POLICY,
        ),
        Err(Stop::LoopLimit(e)) => (
            "failed",
            "loop_limit".to_owned(),
            Some(e.clone()),
            exit::LOOP_LIMIT,
        ),
    };
    let body = match &outcome {
        Ok(()) => EventBody::RunComplete {
            outputs: state.outputs.clone(),
            usage: usage.clone(),
        },
        Err(Stop::Cancelled) => EventBody::RunCancelled {
            usage: usage.clone(),
        },
        Err(_) => EventBody::RunFailed {
            error: error.clone().unwrap_or_default(),
            termination_reason: reason.clone(),
            usage: usage.clone(),
        },
    };
    cx.emit(&Scope::default(), body);
    RunResult {
        kind: "result".into(),
        session_id,
        status: status.into(),
        outputs: state.outputs,
        usage,
        termination_reason: reason,
        error,
        exit_code: code,
    }
}

async fn run_steps(cx: &RunCx<'_>, state: &mut State) -> Result<(), Stop> {
    for step in &cx.plan.steps {
        if cx.cancel.is_cancelled() {
            return Err(cx.stop_for_cancel());
        }
        cx.check_store()?;
        // A step that finished before a crash: restore its outputs, skip it.
        if let Some(done) = state.journal.steps.remove(&step.name) {
            for (goal, c) in done {
                if let Some(g) = cx.plan.goal(&goal) {
                    state.record(g, &c);
                }
            }
            continue;
        }
        let scope = Scope::step(&step.name);
        let limit = step.within.as_ref().map(|l| resolve_limit(l, state));
        if !state.journal.started_steps.contains(&step.name) {
            cx.emit(
                &scope,
                EventBody::StepStarted {
                    kind: match step.kind {
                        StepKind::Run => "run".into(),
                        StepKind::Loop => "loop".into(),
                    },
                    goals: step.goals.clone(),
                    limit,
                },
            );
        }
        match step.kind {
            StepKind::Run => {
                for g in &step.goals {
                    run_goal(cx, state, step, g, None).await?;
                }
                cx.emit(
                    &scope,
                    EventBody::StepComplete {
                        iterations: None,
                        stop: None,
                    },
                );
            }
            StepKind::Loop => run_loop(cx, state, step, limit.unwrap_or(1)).await?,
        }
    }
    Ok(())
}

fn resolve_limit(l: &Limit, state: &State) -> u32 {
    match l {
        Limit::Count { count } => *count,
        Limit::Input { input, default } => state
            .vars
            .get(input)
            .and_then(|v| v.trim().parse().ok())
            .or(*default)
            .unwrap_or(1),
    }
}

async fn run_loop(
    cx: &RunCx<'_>,
    state: &mut State,
    step: &StepDef,
    limit: u32,
) -> Result<(), Stop> {
    let scope = Scope::step(&step.name);
    let mut previous: Option<Vec<String>> = None;
    for it in 1..=limit {
        if !state.journal.iterations.contains(&(step.name.clone(), it)) {
            cx.emit(
                &scope.with_iteration(it),
                EventBody::LoopIteration { limit },
            );
        }
        let mut tool_calls = 0;
        let mut explicit = false;
        let mut outputs = Vec::with_capacity(step.goals.len());
        for g in &step.goals {
            let c = run_goal(cx, state, step, g, Some(it)).await?;
            tool_calls += c.tool_calls;
            outputs.push(c.output);
            if c.done {
                explicit = true;
                break;
            }
        }
        let stop = if explicit {
            Some(LoopStop::Explicit)
        } else if tool_calls == 0 {
            Some(LoopStop::NoToolCalls)
        } else if previous.as_ref() == Some(&outputs) {
            Some(LoopStop::Unchanged)
        } else {
            None
        };
        if let Some(stop) = stop {
            cx.emit(
                &scope,
                EventBody::StepComplete {
                    iterations: Some(it),
                    stop: Some(stop),
                },
            );
            return Ok(());
        }
        previous = Some(outputs);
    }
    let msg = format!(
        "loop `{}` reached its limit of {limit} iterations without converging",
        step.name
    );
    cx.emit(
        &scope,
        EventBody::Warning {
            message: msg.clone(),
        },
    );
    cx.emit(
        &scope,
        EventBody::StepComplete {
            iterations: Some(limit),
            stop: Some(LoopStop::Limit),
        },
    );
    if cx.budget.limits().strict_convergence {
        return Err(Stop::LoopLimit(msg));
    }
    Ok(())
}

/// Run one goal (or take its result from the journal), record its outputs.
async fn run_goal(
    cx: &RunCx<'_>,
    state: &mut State,
    step: &StepDef,
    name: &str,
    iteration: Option<u32>,
) -> Result<Completed, Stop> {
    let Some(goal) = cx.plan.goal(name) else {
        return Err(Stop::Failed(format!("plan names an unknown goal `{name}`")));
    };
    let key = (step.name.clone(), name.to_owned(), iteration);
    if let Some(c) = state
        .journal
        .goals
        .get_mut(&key)
        .and_then(VecDeque::pop_front)
    {
        state.record(goal, &c);
        return Ok(c);
    }
    if cx.cancel.is_cancelled() {
        return Err(cx.stop_for_cancel());
    }
    let mut scope = Scope::step(&step.name).with_goal(name);
    scope.iteration = iteration;
    let outcome = state.render(&goal.outcome);

    if let Some(sup) = goal.supervision
        && sup != Supervision::Unsupervised
        && state.journal.approvals.get(&key) != Some(&true)
    {
        approve(
            cx,
            &scope,
            step,
            goal,
            &outcome,
            sup == Supervision::SupervisedHuman,
        )
        .await?;
    }

    cx.emit(
        &scope,
        EventBody::GoalStarted {
            outcome: outcome.clone(),
            agents: goal.agents.clone(),
        },
    );
    let in_loop = step.kind == StepKind::Loop;
    let answer = match goal.kind {
        GoalKind::Goal => work_goal(cx, state, &scope, step, goal, &outcome, None, in_loop).await?,
        GoalKind::Converge => converge(cx, state, &scope, step, goal, &outcome, in_loop).await?,
    };
    let c = Completed {
        output: answer.0.text.clone(),
        fields: answer.0.fields.clone(),
        tool_calls: answer.0.tool_calls,
        done: answer.0.done,
    };
    cx.emit(
        &scope,
        EventBody::GoalComplete {
            output: c.output.clone(),
            fields: c.fields.clone(),
            converged: answer.1,
            tool_calls: c.tool_calls,
            done: c.done,
        },
    );
    state.record(goal, &c);
    Ok(c)
}

async fn approve(
    cx: &RunCx<'_>,
    scope: &Scope,
    step: &StepDef,
    goal: &GoalDef,
    outcome: &str,
    human: bool,
) -> Result<(), Stop> {
    cx.emit(
        scope,
        EventBody::ApprovalRequired {
            reason: format!(
                "goal `{}` is supervised: approve it before it runs",
                goal.name
            ),
        },
    );
    let req = ApprovalRequest {
        session_id: cx.svc.bus.session_id().to_owned(),
        step: step.name.clone(),
        goal: goal.name.clone(),
        outcome: outcome.to_owned(),
        human,
    };
    let decision = tokio::select! {
        d = cx.svc.approver.decide(&req) => d,
        _ = cx.cancel.cancelled() => return Err(cx.stop_for_cancel()),
    };
    match decision {
        Approval::Approved(note) => {
            cx.emit(
                scope,
                EventBody::ApprovalResolved {
                    approved: true,
                    note,
                },
            );
            Ok(())
        }
        Approval::Rejected(note) => {
            cx.emit(
                scope,
                EventBody::ApprovalResolved {
                    approved: false,
                    note: note.clone(),
                },
            );
            Err(Stop::ApprovalDenied(format!(
                "goal `{}` was not approved{}",
                goal.name,
                note.map(|n| format!(": {n}")).unwrap_or_default()
            )))
        }
        Approval::Unavailable(why) => Err(Stop::ApprovalUnavailable(format!(
            "goal `{}` needs approval, but {why}",
            goal.name
        ))),
    }
}

/// The goal's conversation(s): one with no agents or one agent, else one per
/// agent concurrently and a synthesis.
#[allow(clippy::too_many_arguments)]
async fn work_goal(
    cx: &RunCx<'_>,
    state: &State,
    scope: &Scope,
    step: &StepDef,
    goal: &GoalDef,
    outcome: &str,
    history: Option<&[String]>,
    in_loop: bool,
) -> Result<(Answer, Option<LoopStop>), Stop> {
    let context = prompt::context(cx.plan, state, step, goal);
    let user = prompt::user(outcome, &context, history, goal.kind == GoalKind::Converge);
    // Only rounds that were told about `CONVERGED` may answer with it.
    let accept_converged =
        goal.kind == GoalKind::Converge && history.is_some_and(|h| !h.is_empty());
    let provider_for =
        |profile: Option<&str>| cx.svc.models.provider(profile).map_err(Stop::Failed);
    if goal.agents.len() <= 1 {
        let (persona, profile, agent_scope) =
            match goal.agents.first().and_then(|a| cx.plan.agent(a)) {
                Some(a) => (
                    Some(state.render(&a.prompt)),
                    a.profile.as_deref(),
                    scope.with_agent(&a.name),
                ),
                None => (None, None, scope.clone()),
            };
        if let Some(a) = &agent_scope.agent {
            cx.emit(&agent_scope, EventBody::AgentStarted { role: a.clone() });
        }
        let answer = cx
            .converse(Conversation {
                scope: agent_scope,
                provider: provider_for(profile)?,
                system: prompt::system(cx, persona.as_deref(), goal, in_loop),
                user,
                use_tools: true,
                outputs: &goal.outputs,
                can_signal_done: in_loop,
                accept_converged,
            })
            .await?;
        return Ok((answer, None));
    }

    // Several agents: each works the goal with its own persona, concurrently.
    let mut convs = Vec::with_capacity(goal.agents.len());
    for name in &goal.agents {
        let Some(agent) = cx.plan.agent(name) else {
            return Err(Stop::Failed(format!(
                "plan names an unknown agent `{name}`"
            )));
        };
        let agent_scope = scope.with_agent(name);
        cx.emit(&agent_scope, EventBody::AgentStarted { role: name.clone() });
        let persona = state.render(&agent.prompt);
        let conv = Conversation {
            scope: agent_scope,
            provider: provider_for(agent.profile.as_deref())?,
            system: prompt::system(cx, Some(&persona), goal, in_loop),
            user: user.clone(),
            use_tools: true,
            outputs: &agent.outputs,
            can_signal_done: in_loop,
            accept_converged,
        };
        convs.push(cx.converse(conv));
    }
    // One agent failing (its provider down, its turns used up) does not sink
    // the others: its failure is an `error` event and the synthesis works
    // from the rest. A budget or a cancellation stops everything.
    let mut answers = Vec::with_capacity(convs.len());
    let mut names = Vec::with_capacity(convs.len());
    let mut first_failure = None;
    for (name, outcome) in goal
        .agents
        .iter()
        .zip(futures::future::join_all(convs).await)
    {
        match outcome {
            Ok(a) => {
                answers.push(a);
                names.push(name.clone());
            }
            Err(Stop::Failed(why)) => {
                cx.emit(
                    &scope.with_agent(name),
                    EventBody::Error {
                        message: format!(
                            "agent `{name}` failed; the goal goes on with the other agents: {why}"
                        ),
                    },
                );
                first_failure.get_or_insert(Stop::Failed(format!("agent `{name}`: {why}")));
            }
            Err(other) => return Err(other),
        }
    }
    if answers.is_empty() {
        return Err(first_failure
            .unwrap_or_else(|| Stop::Failed(format!("goal `{}` has no agents", goal.name))));
    }
    if accept_converged && answers.iter().all(|a| a.converged) {
        // Every agent is satisfied with the last round: nothing to reconcile.
        return Ok((
            Answer {
                converged: true,
                tool_calls: answers.iter().map(|a| a.tool_calls).sum(),
                done: answers.iter().any(|a| a.done),
                ..Answer::default()
            },
            None,
        ));
    }
    for (name, a) in names.iter().zip(&answers) {
        cx.emit(
            &scope.with_agent(name),
            EventBody::GoalComplete {
                output: a.text.clone(),
                fields: a.fields.clone(),
                converged: None,
                tool_calls: a.tool_calls,
                done: a.done,
            },
        );
    }

    // The synthesis reconciles them; it is the goal's output.
    let synth_scope = scope.with_agent("synthesis");
    cx.emit(
        &synth_scope,
        EventBody::AgentStarted {
            role: "synthesis".into(),
        },
    );
    let mut synthesis = cx
        .converse(Conversation {
            scope: synth_scope,
            provider: provider_for(None)?,
            system: prompt::synthesis_system(cx.plan, goal),
            user: prompt::synthesis_user(outcome, &names, &answers),
            use_tools: false,
            outputs: &goal.outputs,
            can_signal_done: false,
            accept_converged,
        })
        .await?;
    synthesis.tool_calls = answers.iter().map(|a| a.tool_calls).sum();
    synthesis.done = answers.iter().any(|a| a.done);
    Ok((synthesis, None))
}

/// CONVERGE: refine until `CONVERGED`, unchanged output, or (after tools were
/// used) an iteration without tool calls; the limit is never shown to the model.
async fn converge(
    cx: &RunCx<'_>,
    state: &State,
    scope: &Scope,
    step: &StepDef,
    goal: &GoalDef,
    outcome: &str,
    in_loop: bool,
) -> Result<(Answer, Option<LoopStop>), Stop> {
    let limit = goal
        .within
        .as_ref()
        .map(|l| resolve_limit(l, state))
        .unwrap_or(1);
    let mut history: Vec<String> = Vec::new();
    let mut last: Option<Answer> = None;
    let mut total_tools = 0;
    let mut used_tools = false;
    for it in 1..=limit {
        // Inside a LOOP the events keep the loop's iteration; on its own, a
        // CONVERGE goal numbers its rounds.
        let iter_scope = if scope.iteration.is_some() {
            scope.clone()
        } else {
            let s = scope.with_iteration(it);
            cx.emit(&s, EventBody::LoopIteration { limit });
            s
        };
        let (answer, _) = work_goal(
            cx,
            state,
            &iter_scope,
            step,
            goal,
            outcome,
            Some(&history),
            in_loop,
        )
        .await?;
        total_tools += answer.tool_calls;
        let said_converged = answer.converged || goal::says_converged(&answer.text);
        let stop = if said_converged {
            Some(LoopStop::Explicit)
        } else if history.last() == Some(&answer.text) {
            Some(LoopStop::Unchanged)
        } else if used_tools && answer.tool_calls == 0 {
            Some(LoopStop::NoToolCalls)
        } else {
            None
        };
        used_tools |= answer.tool_calls > 0;
        if said_converged {
            // The output is the last substantive iteration, not the signal.
            let mut a = last.unwrap_or_default();
            a.tool_calls = total_tools;
            a.done |= answer.done;
            return Ok((a, stop));
        }
        if stop.is_some() {
            let mut a = answer;
            a.tool_calls = total_tools;
            return Ok((a, stop));
        }
        history.push(answer.text.clone());
        last = Some(answer);
    }
    cx.emit(
        scope,
        EventBody::Warning {
            message: format!(
                "goal `{}` did not converge within {limit} iterations",
                goal.name
            ),
        },
    );
    let mut a = last.unwrap_or_default();
    a.tool_calls = total_tools;
    if cx.budget.limits().strict_convergence {
        return Err(Stop::LoopLimit(format!(
            "goal `{}` did not converge within {limit} iterations",
            goal.name
        )));
    }
    Ok((a, Some(LoopStop::Limit)))
}
