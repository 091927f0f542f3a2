//! The executor: interprets a plan's step graph to its outputs.
//!
//! It talks to the world only through small traits — [`Models`] (which provider
//! serves an agent), [`ToolSet`] (the policy-gated tools), [`Approver`] (human
//! approval) and the [`EventBus`] (events, stored before anyone sees them) — so
//! tests drive it with fakes and the CLI and servers stay thin adapters.
//!
//! One interpreter ([`interp`]) runs every node kind of the graph
//! (CONTRACT §8). The Agentfile DSL's semantics (CONTRACT §2) live in how it
//! lowers and in the goal and loop nodes:
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
//! Resume: the event log is the journal ([`journal`]). Every completed node is
//! recorded under its path; a resumed run walks the graph again, takes completed
//! nodes' outputs from the journal at any depth (parallel branches, map items,
//! loop iterations) and runs again only what was in flight.

mod abilities;
mod artifacts;
pub mod budget;
mod env;
mod files;
pub mod fork;
pub mod goal;
pub mod inputs;
mod interp;
mod journal;
mod prompt;
pub mod replay;
mod scripted;
mod work;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use budget::{BudgetKind, DurationError, Limits, parse_duration};
pub use files::root as scratch_root;
pub use inputs::{BindError, Inputs, bind_inputs, bind_inputs_with};
pub use interp::{ResumeError, check_resume};

use agentfile_llm::{Provider, ToolDef};
use agentfile_plan::{Node, Plan};
use agentfile_session::events::{EventBus, Scope};
use agentfile_tools::{ToolContext, ToolSet};
use agentfile_wire::events::{EventBody, RunResult};

/// Exit codes (CONTRACT §3), defined with the wire types.
pub use agentfile_wire::exit;

/// Which model serves an agent: the config's `llm`, or the profile an agent
/// `REQUIRES`.
pub trait Models: Send + Sync {
    fn provider(&self, profile: Option<&str>) -> Result<Arc<dyn Provider>, ModelError>;
}

/// Why no model serves an agent: the profile it asked for, if any, and the
/// reason (`profile `fast`: …`). The run fails with this message.
#[derive(Debug, thiserror::Error)]
#[error("{}{reason}", profile.as_ref().map(|p| format!("profile `{p}`: ")).unwrap_or_default())]
pub struct ModelError {
    pub profile: Option<String>,
    pub reason: Box<dyn std::error::Error + Send + Sync>,
}

impl From<&str> for ModelError {
    /// A reason of no particular profile.
    fn from(reason: &str) -> ModelError {
        ModelError {
            profile: None,
            reason: reason.into(),
        }
    }
}

/// A request for a human decision before a supervised goal.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub session_id: String,
    /// The path of the node the approval gates.
    pub node: String,
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
    pub inputs: Inputs,
    pub workspace: PathBuf,
    pub agent_id: String,
    pub limits: Limits,
    /// Provider and model names for `run_started`.
    pub provider_label: (String, String),
    /// Where the default provider's calls go, for `run_started`.
    pub endpoint: Option<String>,
    /// Earlier events of this session when resuming (empty for a new run).
    pub prior_events: Vec<agentfile_wire::events::Event>,
    /// Problems found while setting up (a policy section ignored, an MCP server
    /// that did not start), emitted as `warning` events after `run_started`.
    pub warnings: Vec<String>,
    /// The trigger that started the run (the daemon's runs), for `run_started`.
    pub trigger: Option<agentfile_wire::events::RunTrigger>,
    /// The session and node this run is a fork of, for `run_started`.
    pub forked_from: Option<agentfile_wire::events::ForkedFrom>,
    /// Answer every model request and tool call from this journal instead
    /// (`sessions replay`).
    pub replay: Option<Arc<replay::ReplayJournal>>,
}

/// Everything the executor talks to.
pub struct Services<'a> {
    pub models: &'a dyn Models,
    pub tools: &'a dyn ToolSet,
    pub approver: &'a dyn Approver,
    pub bus: &'a EventBus,
}

/// Why a run (or a node) stopped early.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stop {
    Failed(String),
    Budget(BudgetKind),
    Cancelled,
    ApprovalDenied(String),
    ApprovalUnavailable(String),
    LoopLimit(String),
    /// A tool node's call was refused by the policy.
    Denied(String),
    /// A suspend node waits for one of these events.
    Suspended(Vec<String>),
}

/// A completed node with a compensation: what the walk-back runs, and in
/// which scope.
pub(crate) struct Undo<'a> {
    pub path: String,
    pub node: &'a Node,
    /// The scope as it stood when the node completed, its output included.
    pub scope: env::Env,
    /// Completion order: the `seq` of its journal record, or a number after
    /// the journal's for work done in this process.
    pub rank: u64,
}

/// The state one run shares between its nodes, goals and conversations.
pub(crate) struct RunCx<'a> {
    pub plan: &'a Plan,
    pub svc: &'a Services<'a>,
    pub tools: &'a dyn ToolSet,
    pub tool_defs: Vec<ToolDef>,
    pub tool_cx: ToolContext,
    pub budget: Arc<budget::Budget>,
    pub cancel: CancellationToken,
    pub(crate) journal: Mutex<journal::Journal>,
    /// Published node outputs: the run's outputs.
    pub(crate) outputs: Mutex<BTreeMap<String, env::Shared>>,
    /// Nodes with a compensation that completed (in this process, or before
    /// it as the journal's replay finds them).
    pub(crate) completed: Mutex<Vec<Undo<'a>>>,
    /// The next completion rank for work done in this process.
    pub(crate) live_rank: AtomicU64,
    /// The graph is walked only to rebuild completed nodes' scopes (after a
    /// crash during a compensation walk): nothing runs.
    pub(crate) replay_only: AtomicBool,
    /// Nodes started in this process (for `max_steps`).
    pub(crate) started: AtomicU32,
    /// Events held back to share the next event's commit (see [`RunCx::defer`]).
    pub(crate) deferred: Mutex<Vec<(Scope, EventBody, String)>>,
    /// What the plan's file paths (read_files, write_file, shell) are
    /// relative to: the plan's [`agentfile_plan::RunRoot`], else the workspace.
    pub(crate) root: PathBuf,
    /// A replay's journal: every model request and tool call is answered
    /// from it (see [`replay`]).
    pub(crate) replay: Option<Arc<replay::ReplayJournal>>,
}

impl RunCx<'_> {
    pub(crate) fn emit(&self, scope: &Scope, body: EventBody) {
        let mut held = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        if held.is_empty() {
            drop(held);
            self.svc.bus.post(scope, body);
            return;
        }
        let mut items = std::mem::take(&mut *held);
        items.push((
            scope.clone(),
            body,
            agentfile_wire::events::rfc3339(std::time::SystemTime::now()),
        ));
        self.svc.bus.post_timed(items);
    }

    /// Hold an event back until the next [`RunCx::emit`], which stores both in
    /// one commit (group commit: most of what storing an event costs is its
    /// commit). Only for events the run's next step follows at once, without
    /// waiting on the world — a model's answer before its first tool call, a
    /// tool's result before the next call or model request — so nobody waits
    /// on a held event. Held events are seen by no one until stored (as every
    /// event): a crash in between loses only what nobody was told about, and
    /// the goal that produced it runs again on resume. The run's last event
    /// always flushes them.
    pub(crate) fn defer(&self, scope: &Scope, body: EventBody) {
        self.deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((
                scope.clone(),
                body,
                agentfile_wire::events::rfc3339(std::time::SystemTime::now()),
            ));
    }

    /// Once the session store has failed (a full disk), nothing more can be
    /// recorded: the run stops before its next model call or tool call rather
    /// than doing work nobody could resume. Asked as of now: a pipelined bus
    /// (see [`agentfile_session::events::EventBus::pipelined`]) may still be committing
    /// the last events, and a failure there stops the run at the step after.
    pub(crate) fn check_store(&self) -> Result<(), Stop> {
        match self.svc.bus.known_store_error() {
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

    pub(crate) fn journal(&self) -> std::sync::MutexGuard<'_, journal::Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Run a plan to its end and say how it ended. Never panics on anything a model
/// or tool does; every ending is a [`RunResult`] with its exit code.
pub async fn execute(
    mut spec: RunSpec,
    svc: &Services<'_>,
    cancel: CancellationToken,
) -> RunResult {
    // The journal is all a resume needs of the earlier events.
    let prior = std::mem::take(&mut spec.prior_events);
    let journal = journal::Journal::from_events(&prior);
    let resumed_from = (!prior.is_empty()).then_some(journal.last_seq);
    drop(prior);
    let limits = run_limits(&spec);
    let cx = run_cx(&spec, svc, &cancel, &limits, journal);
    let timer = cx.budget.deadline().map(|deadline| {
        let b = cx.budget.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline.into()).await;
            b.time_out();
        })
    });
    // The file contract's scratch folder is the session's, given to steps
    // as `_workflowFsRoot` (whatever the caller passed for it).
    let session = svc.bus.session_id().to_owned();
    let fs_root = files::root(&spec.workspace, &session);
    let mut inputs = spec.inputs.clone();
    if !spec.plan.files.is_empty() {
        inputs.insert(
            agentfile_plan::FS_ROOT_INPUT.to_owned(),
            Value::String(fs_root.display().to_string()),
        );
    }
    announce(&cx, &spec, &inputs, resumed_from);
    let (outcome, env) = run_with_files(&cx, &inputs, &fs_root, &session).await;
    // Without a `result`, a WORKFLOW.md run's output is its last step's.
    let (outcome, last) = match outcome {
        Ok(v) => (Ok(()), Some(v)),
        Err(e) => (Err(e), None),
    };
    if let Some(t) = timer {
        t.abort();
    }
    let outcome = match (outcome, svc.bus.store_error()) {
        (Ok(()), Some(e)) => Err(Stop::Failed(format!("the session store failed: {e}"))),
        (o, _) => o,
    };
    let usage = cx.budget.usage();
    let session_id = svc.bus.session_id().to_owned();
    let outputs = run_outputs(&cx, last, env);
    let (status, reason, error) = ending(&outcome, &limits);
    let outputs = close(&cx, &outcome, outputs, &usage, reason, &error);
    RunResult {
        kind: "result".into(),
        session_id,
        status: status.into(),
        outputs,
        usage,
        termination_reason: reason,
        error,
        exit_code: reason.exit_code(),
        waiting_for: match outcome {
            Err(Stop::Suspended(events)) => events,
            _ => Vec::new(),
        },
    }
}

/// The run's limits: the caller's, with the plan's own timeout when shorter.
fn run_limits(spec: &RunSpec) -> Limits {
    let mut limits = spec.limits.clone();
    if let Some(ms) = spec.plan.timeout_ms {
        let t = std::time::Duration::from_millis(ms);
        limits.timeout = Some(limits.timeout.map_or(t, |l| l.min(t)));
    }
    limits
}

/// The state the run's nodes share, its journal rebuilt from earlier events.
fn run_cx<'a>(
    spec: &'a RunSpec,
    svc: &'a Services<'a>,
    cancel: &CancellationToken,
    limits: &Limits,
    journal: journal::Journal,
) -> RunCx<'a> {
    let live_rank = AtomicU64::new(journal.last_seq + 1);
    let budget = Arc::new(budget::Budget::new(
        limits.clone(),
        cancel.clone(),
        journal.usage.clone(),
    ));
    let root = spec
        .plan
        .root
        .input()
        .and_then(|k| spec.inputs.get(k))
        .map(|root| PathBuf::from(inputs::input_text(root)))
        .unwrap_or_else(|| spec.workspace.clone());
    RunCx {
        root,
        plan: &spec.plan,
        svc,
        tools: svc.tools,
        tool_defs: svc.tools.definitions(),
        tool_cx: ToolContext {
            workspace: spec.workspace.clone(),
            agent_id: spec.agent_id.clone(),
            cancel: cancel.clone(),
        },
        budget,
        cancel: cancel.clone(),
        journal: Mutex::new(journal),
        outputs: Mutex::new(BTreeMap::new()),
        completed: Mutex::new(Vec::new()),
        live_rank,
        replay_only: AtomicBool::new(false),
        started: AtomicU32::new(0),
        deferred: Mutex::new(Vec::new()),
        replay: spec.replay.clone(),
    }
}

/// The run's first events: `run_started`, then the warnings found while
/// setting up.
fn announce(cx: &RunCx<'_>, spec: &RunSpec, inputs: &Inputs, resumed_from: Option<u64>) {
    cx.emit(
        &Scope::default(),
        EventBody::RunStarted {
            workflow: spec.plan.name.clone(),
            path: spec.plan.path.clone(),
            inputs: inputs::inputs_text(inputs),
            provider: spec.provider_label.0.clone(),
            model: spec.provider_label.1.clone(),
            endpoint: spec.endpoint.clone(),
            workspace: spec.workspace.display().to_string(),
            resumed_from_seq: resumed_from,
            fingerprint: (!spec.plan.fingerprint.is_empty()).then(|| spec.plan.fingerprint.clone()),
            digests: spec.plan.digests(),
            trigger: spec.trigger.clone().map(Box::new),
            sandbox: cx.tools.sandbox().map(Box::new),
            forked_from: spec.forked_from.clone().map(Box::new),
            replay_of: spec.replay.as_ref().map(|r| r.session().to_owned()),
            package: spec.plan.package.clone().map(Box::new),
        },
    );
    for w in &spec.warnings {
        cx.emit(&Scope::default(), EventBody::Warning { message: w.clone() });
    }
}

/// Run the graph inside the file contract: its files staged into the scratch
/// folder first, and synced back out (then the folder cleaned) once it
/// succeeds.
async fn run_with_files(
    cx: &RunCx<'_>,
    inputs: &Inputs,
    fs_root: &std::path::Path,
    session: &str,
) -> (Result<env::Shared, Stop>, env::Env) {
    let plan = cx.plan;
    let staged = if plan.files.is_empty() {
        Ok(())
    } else {
        files::stage(plan, cx.svc.tools, fs_root)
    };
    let (mut outcome, env) = match staged {
        Ok(()) => interp::run_plan(cx, inputs).await,
        Err(stop) => (Err(stop), env::Env::default()),
    };
    if outcome.is_ok() && !plan.files.is_empty() {
        let now = agentfile_wire::events::rfc3339(std::time::SystemTime::now());
        let tokens = files::Tokens {
            run_id: session,
            workflow_id: plan.id.as_deref().unwrap_or(&plan.name),
            iso_date: now.get(..10).unwrap_or(&now),
        };
        match files::sync(plan, cx.svc.tools, fs_root, &tokens) {
            Ok(warnings) => {
                for message in warnings {
                    cx.emit(&Scope::default(), EventBody::Warning { message });
                }
                files::clean(fs_root);
            }
            Err(stop) => outcome = Err(stop),
        }
    }
    (outcome, env)
}

/// The run's outputs: the nodes' published outputs, unless the plan shapes
/// one (its `result`, or its last step's) — checked against the `outputs`
/// schema, with a warning when it does not match.
fn run_outputs(
    cx: &RunCx<'_>,
    last: Option<env::Shared>,
    env: env::Env,
) -> BTreeMap<String, Value> {
    let plan = cx.plan;
    let published = std::mem::take(&mut *cx.outputs.lock().unwrap_or_else(|p| p.into_inner()));
    let shaped = match (&plan.result, last) {
        (Some(result), Some(_)) => Some(result.eval(&env)),
        (None, Some(v)) if plan.unmapped == agentfile_plan::Unmapped::LastStep => {
            // The last step's value, taken rather than copied once the
            // scope that also holds it is gone (a map's list can be large).
            drop(env);
            Some(Arc::unwrap_or_clone(v))
        }
        _ => None,
    };
    let Some(v) = shaped else {
        return published
            .into_iter()
            .map(|(k, v)| (k, Arc::unwrap_or_clone(v)))
            .collect();
    };
    if let Some(schema) = &plan.output_schema
        && let Err(problems) = agentfile_plan::values::validate_value(schema, &v)
    {
        cx.emit(
            &Scope::default(),
            EventBody::Warning {
                message: format!(
                    "the run's output does not match the workflow's `outputs` schema: {}",
                    problems.join("; ")
                ),
            },
        );
    }
    match v {
        Value::Object(o) => o.into_iter().collect(),
        other => BTreeMap::from([("result".to_owned(), other)]),
    }
}

/// How the run ended: its status word, termination reason and error text.
fn ending(
    outcome: &Result<(), Stop>,
    limits: &Limits,
) -> (
    &'static str,
    agentfile_wire::events::TerminationReason,
    Option<String>,
) {
    use agentfile_wire::events::TerminationReason as R;
    match outcome {
        Ok(()) => ("completed", R::Completed, None),
        Err(Stop::Cancelled) => ("cancelled", R::Cancelled, None),
        Err(Stop::Failed(e)) => ("failed", R::Error, Some(e.clone())),
        Err(Stop::Budget(b)) => (
            "failed",
            b.reason(),
            Some(format!("budget exhausted: {}", b.describe(limits))),
        ),
        Err(Stop::ApprovalDenied(e)) => ("failed", R::ApprovalDenied, Some(e.clone())),
        Err(Stop::ApprovalUnavailable(e)) => ("failed", R::ApprovalUnavailable, Some(e.clone())),
        Err(Stop::Denied(e)) => ("failed", R::PolicyDenied, Some(e.clone())),
        Err(Stop::LoopLimit(e)) => ("failed", R::LoopLimit, Some(e.clone())),
        Err(Stop::Suspended(_)) => ("suspended", R::Suspended, None),
    }
}

/// Emit the run's last event and wait until the log holds it; gives back the
/// outputs for the run's result.
fn close(
    cx: &RunCx<'_>,
    outcome: &Result<(), Stop>,
    mut outputs: BTreeMap<String, Value>,
    usage: &agentfile_wire::events::Usage,
    reason: agentfile_wire::events::TerminationReason,
    error: &Option<String>,
) -> BTreeMap<String, Value> {
    // The outputs go into the run's last event and into its result, but are
    // held once: the event takes them, and the result reads them back from
    // their text once the event is stored (a map's million results are not
    // held twice; as text they are a tenth of their size as values). Values
    // nested deeper than a parser reads back are copied instead.
    let mut as_text: Option<String> = None;
    let body = match outcome {
        Ok(()) => EventBody::RunComplete {
            outputs: if outputs.values().any(|v| nested_deeper(v, 100)) {
                outputs.clone()
            } else {
                as_text = serde_json::to_string(&outputs).ok();
                match as_text {
                    Some(_) => std::mem::take(&mut outputs),
                    None => outputs.clone(),
                }
            },
            usage: usage.clone(),
        },
        Err(Stop::Cancelled) => EventBody::RunCancelled {
            usage: usage.clone(),
        },
        Err(Stop::Suspended(events)) => EventBody::RunSuspended {
            events: events.clone(),
            usage: usage.clone(),
        },
        Err(_) => EventBody::RunFailed {
            error: error.clone().unwrap_or_default(),
            termination_reason: reason,
            usage: usage.clone(),
        },
    };
    cx.emit(&Scope::default(), body);
    // The result is reported once the log holds the whole run.
    cx.svc.bus.flush();
    if let Some(text) = as_text {
        outputs = serde_json::from_str(&text).unwrap_or_default();
    }
    outputs
}

/// Whether `v` nests more than `limit` arrays and objects deep.
fn nested_deeper(v: &Value, limit: usize) -> bool {
    match v {
        Value::Array(_) | Value::Object(_) if limit == 0 => true,
        Value::Array(a) => a.iter().any(|x| nested_deeper(x, limit - 1)),
        Value::Object(o) => o.values().any(|x| nested_deeper(x, limit - 1)),
        _ => false,
    }
}
