//! The engine both servers share: runs in flight on one connection, and the
//! operations on them (`run`, `event`, `cancel`, `approve`, `validate`,
//! `inspect`, `list`, `sessions`) with the wire shapes of [`agentfile_protocol::rpc`].
//!
//! A run is prepared (every check that can fail before work starts, so a bad
//! request is an error reply, not a failed session), recorded as `queued`,
//! and spawned; it waits for one of `max_runs` slots, then goes through
//! [`run::start_in`] like a CLI run. Its events are read back from the session
//! store — the store is the only copy, so `event` serves a run started here,
//! one that finished long ago, or one another process is running, the same way.
//!
//! What it is not: a transport. It knows nothing of JSON-RPC framing or MCP;
//! those adapters turn requests into these calls and events into their
//! notifications (the [`RunHooks`] they pass in).
//!
//! Shutdown: [`Engine::drain`] (stdin closed) lets every accepted run finish,
//! because a client that pipes one request and closes its end still wants the
//! answer; [`Engine::interrupt`] (a signal) stops them and marks each session
//! `interrupted`, so `sessions resume` continues it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::limits::{self, Limits};
use agentfile_config::Config;
use agentfile_engine::executor::{Approval, ApprovalRequest, Approver, exit};
use agentfile_engine::run::{self, RunError, RunRequest, SessionChoice, Stores};
use agentfile_frontend as frontend;
use agentfile_frontend::{discover, inspect};
use agentfile_llm::{HttpOptions, Provider};
use agentfile_plan::ReadOptions;
use agentfile_protocol::diagnostics::ValidateReport;
use agentfile_protocol::events::{Event, EventBody, RunResult, Usage};
use agentfile_protocol::rpc::{
    ApproveParams, CancelParams, ConformanceProfile, EventPage, EventParams, InspectFormat,
    InspectParams, InspectText, ListParams, RpcError, RunParams, RunStatus, SessionList,
    SessionsParams, SignalParams, ValidateParams, code,
};
use agentfile_protocol::workflows::WorkflowList;
use agentfile_session::events::EventSink;
use agentfile_session::{self as session, SessionMeta, SessionStatus, SessionStore, StoreError};

mod remote;

/// The longest `event` long poll.
pub const MAX_WAIT_MS: u64 = 60_000;
/// Events per `event` answer when the caller sets no limit.
pub const DEFAULT_EVENT_LIMIT: usize = 1000;

/// Server-wide settings, from the `serve` / `mcp` command line.
#[derive(Clone, Default)]
pub struct EngineOptions {
    /// `--config`: used for every request that names none.
    pub config: Option<PathBuf>,
    /// `--workspace`: where tools work, relative request paths start, and
    /// sessions are stored (default: the current folder).
    pub workspace: Option<PathBuf>,
    /// `--policy`, else `policy.toml` beside each workflow.
    pub policy: Option<PathBuf>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// Runs executing at once; more wait as `queued`. 0 means the default.
    pub max_runs: usize,
    pub http: Option<HttpOptions>,
    /// The MCP host's model (`--provider mcp-sampling`).
    pub sampling: Option<Arc<dyn Provider>>,
    /// Said after "the API key is not set": where this server's host passes
    /// environment variables.
    pub key_hint: Option<String>,
    /// The connection's bounds (requests in flight, reply and source sizes).
    pub limits: Limits,
    /// `--nats`: queue runs for `agentfile worker`s instead of executing them
    /// here, and relay their events back (see [`crate::cluster`]).
    pub cluster: Option<crate::cluster::Cluster>,
}

/// Runs at once when `--max-runs` is not given.
pub const DEFAULT_MAX_RUNS: usize = 16;

/// What a transport attaches to one run.
#[derive(Clone, Default)]
pub struct RunHooks {
    /// Receive every event after it is stored (JSON-RPC notifications, MCP progress).
    pub sinks: Vec<Arc<dyn EventSink>>,
    /// Asked first at a supervised goal (MCP elicitation); when it answers
    /// `Unavailable` the run waits for the `approve` method instead.
    pub approver: Option<Arc<dyn Approver>>,
    /// The principal a new session belongs to ([`crate::access`]): recorded
    /// with the session before the run starts, and never changed after. The
    /// door that knows who asks sets it (an MCP task; a run over HTTP with a
    /// bearer token); it is not a wire parameter, so no caller names another
    /// owner. A resume leaves the session's owner as it is.
    pub owner: Option<crate::access::Principal>,
}

#[derive(Debug, Clone)]
struct LiveState {
    status: SessionStatus,
    last_seq: u64,
    /// The run's last event (complete, failed, cancelled) is stored: nothing
    /// more will be appended, even before `result` is set.
    ended: bool,
    result: Option<Arc<RunResult>>,
    /// The `seq` of the `approval_required` the run waits at (delivered, and
    /// no `approval_resolved` after it yet).
    approval: Option<u64>,
}

impl LiveState {
    /// Take in one delivered event (`ended` is the caller's to set: a relayed
    /// `run_cancelled` may be an interruption that another worker resumes).
    fn observe(&mut self, e: &Event) {
        self.last_seq = e.seq;
        if let Some(st) = session::status_after(&e.body) {
            self.status = st;
        }
        match e.body {
            EventBody::ApprovalRequired { .. } => self.approval = Some(e.seq),
            EventBody::ApprovalResolved { .. } => self.approval = None,
            _ if e.body.is_terminal() => self.approval = None,
            _ => {}
        }
    }
}

/// A run accepted by this engine and not yet finished.
pub struct LiveRun {
    session_id: String,
    store: Arc<dyn SessionStore>,
    cancel: CancellationToken,
    state: watch::Sender<LiveState>,
    /// The decision a supervised goal waits for.
    pending: Mutex<Pending>,
    /// Stopped by a shutdown rather than a `cancel`: the session is left resumable.
    interrupted: AtomicBool,
    /// Nobody is left to call `approve` (the client is gone): an approval this
    /// run waits for, or comes to, ends it as `waiting_approval`.
    orphaned: AtomicBool,
}

impl LiveRun {
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn status(&self) -> SessionStatus {
        self.state.borrow().status
    }

    /// Ask the run to stop (as the `cancel` method does).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Wait for the run's result.
    pub async fn finished(&self) -> Arc<RunResult> {
        let mut rx = self.state.subscribe();
        loop {
            if let Some(r) = rx.borrow_and_update().result.clone() {
                return r;
            }
            if rx.changed().await.is_err() {
                // The sender lives as long as `self`; unreachable in practice.
                let st = rx.borrow().clone();
                return Arc::new(failed_result(
                    &self.session_id,
                    "the run vanished",
                    st.status,
                ));
            }
        }
    }

    fn update(&self, f: impl FnOnce(&mut LiveState)) {
        self.state.send_modify(f);
    }
}

/// Where a run's approval stands. A client that sees `approval_required` may
/// answer before the executor starts waiting; the decision is then kept.
#[derive(Default)]
enum Pending {
    #[default]
    Nothing,
    Waiting(oneshot::Sender<Approval>),
    Decided(Approval),
    /// The approval asked at this `seq` has its decision, whose
    /// `approval_resolved` may not be delivered yet: a second `approve` is
    /// refused, never kept for the run's next approval.
    Answered(u64),
}

/// Runs in flight and the operations on sessions, for one connection.
pub struct Engine {
    options: EngineOptions,
    /// Canonical workspace: relative request paths start here.
    root: PathBuf,
    slots: Arc<Semaphore>,
    /// Bytes of workflow source being analysed (validate, inspect, list), so
    /// that concurrent analyses cannot take more memory than a few big files.
    analysis: Arc<Semaphore>,
    runs: Mutex<HashMap<String, Arc<LiveRun>>>,
    /// Stores by location, opened once and shared by every run that uses them.
    stores: Mutex<HashMap<PathBuf, Stores>>,
    closing: AtomicBool,
    tasks: TaskTracker,
}

impl Engine {
    pub fn new(options: EngineOptions) -> Result<Arc<Engine>, RpcError> {
        let ws = options
            .workspace
            .clone()
            .unwrap_or_else(|| PathBuf::from("."));
        let root = ws.canonicalize().map_err(|e| {
            RpcError::new(code::NOT_FOUND, format!("workspace {}: {e}", ws.display()))
        })?;
        let max = if options.max_runs == 0 {
            DEFAULT_MAX_RUNS
        } else {
            options.max_runs
        };
        let budget = options
            .limits
            .analysis_budget()
            .min(Semaphore::MAX_PERMITS)
            .min(u32::MAX as usize);
        Ok(Arc::new(Engine {
            options,
            root,
            slots: Arc::new(Semaphore::new(max)),
            analysis: Arc::new(Semaphore::new(budget)),
            runs: Mutex::new(HashMap::new()),
            stores: Mutex::new(HashMap::new()),
            closing: AtomicBool::new(false),
            tasks: TaskTracker::new(),
        }))
    }

    /// Mark sessions left `queued` or `running` by a process that is gone
    /// (killed, crashed) as `interrupted`, so `sessions` and resume see them as
    /// they are. Called once when a server starts; only a store that already
    /// exists is opened. Returns the sessions marked.
    pub fn reap_orphans(&self) -> Vec<String> {
        let Ok(config) = self.default_config() else {
            return Vec::new();
        };
        match session::location(&config, &self.root) {
            // A database server: always there to look at.
            Ok((session::Backend::Postgres, _)) => {}
            Ok((_, path)) if path.exists() => {}
            _ => return Vec::new(),
        }
        match self.default_store().and_then(|s| {
            s.reap_orphans()
                .map_err(|e| RpcError::new(code::STORE, e.to_string()))
        }) {
            Ok(ids) => {
                if !ids.is_empty() {
                    tracing::info!(
                        count = ids.len(),
                        "sessions of processes that are gone marked interrupted"
                    );
                }
                ids
            }
            Err(e) => {
                tracing::warn!(error = %e.message, "could not check for interrupted sessions");
                Vec::new()
            }
        }
    }

    pub(crate) fn default_config(&self) -> Result<Config, RpcError> {
        match self.find_config(None, &self.root)? {
            Some(c) => Ok(c),
            None => run::default_config().map_err(|e| RpcError::new(code::RUN_REJECTED, e.message)),
        }
    }

    /// The folder relative paths start from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// Runs accepted and not finished.
    pub fn live_count(&self) -> usize {
        lock(&self.runs).len()
    }

    fn path(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_owned()
        } else {
            self.root.join(p)
        }
    }

    /// A path a client names, once the server may read it: inside the
    /// workspace once `..` and symlinks are resolved, outside the session
    /// store, and matched by no `read` deny rule of the server's policy
    /// (`--policy`, else `policy.toml` in the workspace, else the safe
    /// default): see [`agentfile_tools::policy::Gate::workspace_readable`].
    /// Refused, with nothing read, otherwise. Returns the path joined to the
    /// workspace as written (symlinks kept), as the diagnostics name it.
    pub fn request_path(&self, raw: &str) -> Result<PathBuf, RpcError> {
        use agentfile_tools::policy::Policy;
        let home = std::env::home_dir();
        let explicit = self.options.policy.as_ref().map(|p| self.path_buf(p));
        let gate = Policy::load(explicit.as_deref(), &self.root)
            .ok()
            .and_then(|p| p.bind(&self.root, home.as_deref()).ok())
            .map_or_else(
                || Policy::safe_default().bind(&self.root, home.as_deref()),
                Ok,
            )
            .map_err(|e| RpcError::internal(format!("the workspace policy: {e}")))?;
        match gate.workspace_readable(raw) {
            Ok(_) => Ok(self.path(raw)),
            Err(d) => {
                let message = if d.rule == "read: outside the workspace" {
                    format!(
                        "{}: this server reads only files inside its workspace; name a path in it",
                        d.reason
                    )
                } else {
                    format!("`{raw}` may not be read: {} ({})", d.reason, d.rule)
                };
                Err(RpcError::new(code::NOT_FOUND, message)
                    .with_data(serde_json::json!({ "rule": d.rule })))
            }
        }
    }

    /// The paths of a client's `run` (the workflow, a config), judged by
    /// [`Engine::request_path`]. Runs a worker takes from the cluster were
    /// judged where they were submitted.
    pub fn check_run_paths(&self, p: &RunParams) -> Result<(), RpcError> {
        if !p.path.trim().is_empty() {
            self.request_path(&p.path)?;
        }
        if let Some(c) = &p.config {
            self.request_path(c)?;
        }
        Ok(())
    }

    fn config_path(&self, request: Option<&str>) -> Option<PathBuf> {
        request
            .map(|c| self.path(c))
            .or_else(|| self.options.config.as_ref().map(|c| self.path_buf(c)))
    }

    /// How a request's workflow is read: its `lenient`, and `profile` and
    /// `extensions` checked against agentrc's optional profiles (the CLI's
    /// `--lenient`, `--profile` and `--extensions`).
    fn read_options(
        method: &str,
        lenient: bool,
        profile: Option<ConformanceProfile>,
        extensions: &[String],
    ) -> Result<ReadOptions, RpcError> {
        let known = agentfile_frontend::extension_names();
        if let Some(bad) = extensions.iter().find(|e| !known.contains(&e.as_str())) {
            return Err(RpcError::invalid_params(format!(
                "{method}: invalid params: `extensions` names `{bad}`, which is not an optional agentrc profile; they are {}",
                known.join(", ")
            )));
        }
        Ok(ReadOptions {
            lenient,
            core_only: profile == Some(ConformanceProfile::Core),
            extensions: extensions.to_vec(),
        })
    }

    fn path_buf(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_owned()
        } else {
            self.root.join(p)
        }
    }

    fn find_config(
        &self,
        explicit: Option<&str>,
        workflow: &Path,
    ) -> Result<Option<Config>, RpcError> {
        run::find_config(self.config_path(explicit).as_deref(), workflow, &self.root)
            .map_err(|e| RpcError::new(code::RUN_REJECTED, e.message))
    }

    fn stores_for(&self, config: &Config, workspace: &Path) -> Result<Stores, RpcError> {
        let key = match session::location(config, workspace) {
            Ok((_, p)) => p,
            Err(e) => return Err(RpcError::new(code::STORE, e.to_string())),
        };
        let mut stores = lock(&self.stores);
        if let Some(s) = stores.get(&key) {
            return Ok(s.clone());
        }
        let opened = run::open_stores(config, workspace)
            .map_err(|e| RpcError::new(code::STORE, e.message))?;
        stores.insert(key, opened.clone());
        Ok(opened)
    }

    /// The store sessions are looked up in when no live run names one: the
    /// server's config and workspace.
    fn default_store(&self) -> Result<Arc<dyn SessionStore>, RpcError> {
        let config = match self.find_config(None, &self.root)? {
            Some(c) => c,
            None => {
                run::default_config().map_err(|e| RpcError::new(code::RUN_REJECTED, e.message))?
            }
        };
        Ok(self.stores_for(&config, &self.root)?.sessions)
    }

    /// The session store of the server's config and workspace.
    pub fn store(&self) -> Result<Arc<dyn SessionStore>, RpcError> {
        self.default_store()
    }

    fn live(&self, id: &str) -> Option<Arc<LiveRun>> {
        lock(&self.runs).get(id).cloned()
    }

    /// Whether this process runs the session now.
    pub fn is_live_here(&self, id: &str) -> bool {
        self.live(id).is_some()
    }

    /// The result a run of the session returned (or would have), from its
    /// stored terminal event; `None` while it has none.
    pub fn stored_result(&self, id: &str) -> Result<Option<RunResult>, RpcError> {
        let store = self.default_store()?;
        let meta = self.meta(&store, id)?;
        let events = store
            .events(id, meta.last_seq.saturating_sub(1))
            .map_err(|e| RpcError::new(code::STORE, format!("cannot read the session: {e}")))?;
        Ok(events
            .last()
            .filter(|e| e.body.is_terminal())
            .map(|e| remote::result_of(id, e).0))
    }

    // ---- run ----

    /// Accept a run: prepare it, record its session as `queued`, and start it
    /// when a slot is free. Errors here mean nothing was recorded.
    pub async fn submit(
        self: &Arc<Self>,
        params: RunParams,
        hooks: RunHooks,
    ) -> Result<Arc<LiveRun>, RpcError> {
        self.submit_with_trigger(params, hooks, None).await
    }

    /// [`Engine::submit`] for a run a trigger started (the daemon's fires):
    /// its `run_started` carries `trigger`. Not reachable from the wire, so
    /// no client can claim a trigger started its run.
    pub async fn submit_with_trigger(
        self: &Arc<Self>,
        params: RunParams,
        hooks: RunHooks,
        trigger: Option<agentfile_protocol::events::RunTrigger>,
    ) -> Result<Arc<LiveRun>, RpcError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(RpcError::new(
                code::SHUTTING_DOWN,
                "the server is shutting down and accepts no new runs",
            ));
        }
        let params = self.with_stored_settings(params)?;
        let (req, resume) = self.request(&params)?;
        let mut prepared = run::prepare(&req, &load_plan).map_err(|e| self.rejected(e))?;
        // A new session records its caller's own choices (not the server's
        // defaults), for whoever resumes it.
        prepared.settings = self.settings_of(&params);
        prepared.trigger = trigger;
        structured_inputs(&params, &prepared.plan)?;
        let stores = self.stores_for(&prepared.config, &prepared.workspace)?;
        let store = stores.sessions.clone();
        let (id, choice) = self.choose_session(&store, &prepared, resume)?;
        if let (SessionChoice::Created(_), Some(owner)) = (&choice, &hooks.owner)
            && let Err(e) = store.set_principal(&id, owner.as_str())
        {
            // Never run a session its owner's rule cannot keep.
            let _ = store.set_status(&id, SessionStatus::Failed);
            return Err(RpcError::new(
                code::STORE,
                format!("cannot record the session's owner: {e}"),
            ));
        }
        let last_seq = store.get(&id).map(|m| m.last_seq).unwrap_or(0);
        let (state, _) = watch::channel(LiveState {
            status: SessionStatus::Queued,
            last_seq,
            ended: false,
            result: None,
            approval: None,
        });
        let live = Arc::new(LiveRun {
            session_id: id.clone(),
            store: store.clone(),
            cancel: CancellationToken::new(),
            state,
            pending: Mutex::new(Pending::Nothing),
            interrupted: AtomicBool::new(false),
            orphaned: AtomicBool::new(false),
        });
        self.admit(&live, &choice)?;
        if let Some(cluster) = self.options.cluster.clone() {
            let trigger = prepared.trigger.take();
            self.queue(&cluster, &live, &choice, last_seq, params, hooks, trigger)
                .await?;
        } else {
            self.spawn_run(&live, prepared, stores, choice, hooks);
        }
        Ok(live)
    }

    /// The session a run records into: the one it resumes (not running
    /// here, not completed), else a new one.
    fn choose_session(
        &self,
        store: &Arc<dyn SessionStore>,
        prepared: &run::Prepared,
        resume: Option<String>,
    ) -> Result<(String, SessionChoice), RpcError> {
        match resume {
            Some(id) => {
                if self.live(&id).is_some() {
                    return Err(RpcError::new(
                        code::SESSION_STATE,
                        format!("session `{id}` is already running in this server"),
                    ));
                }
                let meta = self.meta(store, &id)?;
                if meta.status == SessionStatus::Completed {
                    return Err(RpcError::new(
                        code::SESSION_STATE,
                        format!("session `{id}` already completed; nothing to resume"),
                    ));
                }
                Ok((id.clone(), SessionChoice::Resume(id)))
            }
            None => {
                let id = run::create_session(store.as_ref(), prepared, SessionStatus::Queued)
                    .map_err(|e| {
                        RpcError::new(code::STORE, format!("cannot record the session: {e}"))
                    })?;
                Ok((id.clone(), SessionChoice::Created(id)))
            }
        }
    }

    /// Count the run among the live ones, unless the server began to close
    /// meanwhile.
    fn admit(&self, live: &Arc<LiveRun>, choice: &SessionChoice) -> Result<(), RpcError> {
        let id = &live.session_id;
        // Checked again under the lock `interrupt` and `drain` collect runs
        // under: a run prepared while they began must not escape them.
        let mut runs = lock(&self.runs);
        if self.closing.load(Ordering::SeqCst) {
            drop(runs);
            if matches!(choice, SessionChoice::Created(_)) {
                let _ = live.store.set_status(id, SessionStatus::Interrupted);
            }
            return Err(RpcError::new(
                code::SHUTTING_DOWN,
                format!(
                    "the server is shutting down; session `{id}` did not start (continue it later with `run` and `resume`)"
                ),
            ));
        }
        runs.insert(id.clone(), live.clone());
        Ok(())
    }

    /// With a cluster: queue the run for a worker, which resumes the session
    /// from the shared store (and writes `run_started`, with the trigger).
    #[allow(clippy::too_many_arguments)]
    async fn queue(
        self: &Arc<Self>,
        cluster: &crate::cluster::Cluster,
        live: &Arc<LiveRun>,
        choice: &SessionChoice,
        last_seq: u64,
        params: RunParams,
        hooks: RunHooks,
        trigger: Option<agentfile_protocol::events::RunTrigger>,
    ) -> Result<(), RpcError> {
        let id = &live.session_id;
        let store = &live.store;
        // A resumed session (after an approval, a signal, an interruption)
        // is queued again: a worker runs only queued or interrupted ones.
        if matches!(choice, SessionChoice::Resume(_))
            && let Err(e) = store.set_status(id, SessionStatus::Queued)
        {
            lock(&self.runs).remove(id);
            return Err(RpcError::new(
                code::STORE,
                format!("cannot queue session `{id}` again: {e}"),
            ));
        }
        let work = crate::cluster::Work {
            session_id: id.clone(),
            from_seq: last_seq,
            params: RunParams {
                path: String::new(),
                inputs: Default::default(),
                resume: None,
                wait: None,
                config: self
                    .config_path(params.config.as_deref())
                    .map(|p| p.display().to_string()),
                ..params
            },
            trigger,
        };
        if let Err(e) = remote::start(self, cluster, live, work, hooks).await {
            lock(&self.runs).remove(id);
            if matches!(choice, SessionChoice::Created(_)) {
                let _ = store.set_status(id, SessionStatus::Failed);
            }
            return Err(RpcError::new(code::RUN_REJECTED, e.0));
        }
        Ok(())
    }

    /// Without a cluster: run it in this process, as a task the server
    /// drains, that ends the live run however the run ends.
    fn spawn_run(
        self: &Arc<Self>,
        live: &Arc<LiveRun>,
        prepared: run::Prepared,
        stores: Stores,
        choice: SessionChoice,
        hooks: RunHooks,
    ) {
        let engine = self.clone();
        let task_live = live.clone();
        self.tasks.spawn(async move {
            let live = task_live;
            // A panic inside a run must still end it: its caller waits for a
            // result and the server must stay able to drain and exit.
            let result = match std::panic::AssertUnwindSafe(
                engine.execute(&live, prepared, stores, choice, hooks),
            )
            .catch_unwind()
            .await
            {
                Ok(r) => r,
                Err(p) => {
                    let message = format!(
                        "internal error: the run panicked ({}); please report it",
                        limits::panic_message(p.as_ref())
                    );
                    eprintln!("agentfile: session {}: {message}", live.session_id);
                    let _ = live
                        .store
                        .set_status(&live.session_id, SessionStatus::Failed);
                    failed_result(&live.session_id, &message, SessionStatus::Failed)
                }
            };
            let status = if live.interrupted.load(Ordering::SeqCst) {
                let _ = live
                    .store
                    .set_status(&live.session_id, SessionStatus::Interrupted);
                SessionStatus::Interrupted
            } else {
                live.store
                    .get(&live.session_id)
                    .map(|m| m.status)
                    .unwrap_or(SessionStatus::Failed)
            };
            lock(&engine.runs).remove(&live.session_id);
            live.update(|s| {
                s.status = status;
                s.ended = true;
                s.result = Some(Arc::new(result));
            });
        });
    }

    async fn execute(
        &self,
        live: &Arc<LiveRun>,
        prepared: run::Prepared,
        stores: Stores,
        choice: SessionChoice,
        hooks: RunHooks,
    ) -> RunResult {
        let id = live.session_id.clone();
        if matches!(choice, SessionChoice::Resume(_)) {
            let _ = live.store.set_status(&id, SessionStatus::Queued);
        }
        let permit = tokio::select! {
            p = self.slots.clone().acquire_owned() => p.ok(),
            _ = live.cancel.cancelled() => None,
        };
        let Some(_permit) = permit else {
            // Cancelled (or interrupted) before it started: nothing ran.
            let status = if live.interrupted.load(Ordering::SeqCst) {
                SessionStatus::Interrupted
            } else {
                SessionStatus::Cancelled
            };
            let _ = live.store.set_status(&id, status);
            let mut r = failed_result(&id, "cancelled before it started", status);
            r.status = "cancelled".into();
            r.termination_reason = agentfile_protocol::events::TerminationReason::Cancelled;
            r.exit_code = exit::CANCELLED;
            return r;
        };
        live.update(|s| s.status = SessionStatus::Running);
        let tracker: Arc<dyn EventSink> = {
            let live = live.clone();
            Arc::new(move |e: &Event| {
                live.update(|s| {
                    s.observe(e);
                    s.ended |= e.body.is_terminal();
                })
            })
        };
        let mut sinks = vec![tracker];
        sinks.extend(hooks.sinks);
        let approver = EngineApprover {
            live: live.clone(),
            first: hooks.approver,
        };
        match run::start_in(
            prepared,
            stores,
            choice,
            sinks,
            &approver,
            live.cancel.clone(),
        )
        .await
        {
            Ok(r) => r,
            Err(e) => {
                // Set-up after the session was recorded failed (policy, tools):
                // the session says so too.
                let _ = live.store.set_status(&id, SessionStatus::Failed);
                let mut r = failed_result(&id, &e.message, SessionStatus::Failed);
                r.exit_code = e.exit_code;
                r
            }
        }
    }

    /// `p`, for a resume, with the settings its session was started with
    /// where `p` leaves them out: the resumer's own choices win.
    fn with_stored_settings(&self, mut p: RunParams) -> Result<RunParams, RpcError> {
        let Some(id) = p.resume.clone().filter(|id| session::is_valid_id(id)) else {
            return Ok(p);
        };
        let store = self.default_store()?;
        let stored = run::RunSettings::stored(store.as_ref(), &id);
        if stored.is_empty() {
            return Ok(p);
        }
        fn or<T: Clone>(mine: &mut Option<T>, theirs: &Option<T>) {
            if mine.is_none() {
                mine.clone_from(theirs);
            }
        }
        or(&mut p.provider, &stored.provider);
        or(&mut p.model, &stored.model);
        or(&mut p.max_turns, &stored.max_turns);
        or(&mut p.max_tokens, &stored.max_tokens);
        or(&mut p.max_cost_usd, &stored.max_cost_usd);
        or(&mut p.config, &stored.config);
        if p.timeout.is_none() {
            p.timeout = stored.timeout_secs.map(|s| s.to_string());
        }
        if !p.lenient && p.profile.is_none() && p.extensions.is_empty() {
            p.lenient = stored.read.lenient;
            if stored.read.core_only {
                p.profile = Some(ConformanceProfile::Core);
            }
            p.extensions = stored.read.extensions;
        }
        Ok(p)
    }

    /// The settings a run's caller chose in `p`, recorded with a new session.
    fn settings_of(&self, p: &RunParams) -> run::RunSettings {
        run::RunSettings {
            provider: p.provider.clone(),
            model: p.model.clone(),
            max_turns: p.max_turns,
            max_tokens: p.max_tokens,
            max_cost_usd: p.max_cost_usd,
            timeout_secs: p
                .timeout
                .as_deref()
                .and_then(|t| agentfile_engine::executor::parse_duration(t).ok())
                .map(|d| d.as_secs_f64()),
            config: p
                .config
                .as_deref()
                .map(|c| self.path(c).display().to_string()),
            read: ReadOptions {
                lenient: p.lenient,
                core_only: p.profile == Some(ConformanceProfile::Core),
                extensions: p.extensions.clone(),
            },
            ..run::RunSettings::default()
        }
    }

    /// A [`RunRequest`] from wire params, and the session to resume if any.
    fn request(&self, p: &RunParams) -> Result<(RunRequest, Option<String>), RpcError> {
        let timeout = match &p.timeout {
            Some(t) => Some(agentfile_engine::executor::parse_duration(t).map_err(|e| {
                RpcError::invalid_params(format!("run: invalid params: `timeout`: {e}"))
            })?),
            None => None,
        };
        // JSON values bind as they are: the plan's declared types read them
        // (`agentfile_engine::executor::inputs`), not a string made here.
        // A list, object or null is checked once the plan is read
        // ([`structured_inputs`]).
        let mut inputs = p.inputs.clone();
        let mut resume = None;
        let path = match &p.resume {
            Some(id) => {
                if !session::is_valid_id(id) {
                    return Err(RpcError::invalid_params(format!(
                        "run: invalid params: `resume`: `{id}` is not a session id"
                    )));
                }
                if !inputs.is_empty() {
                    return Err(RpcError::invalid_params(
                        "run: invalid params: `inputs`: a resumed run keeps the inputs it started with; leave them out",
                    ));
                }
                let store = self.default_store()?;
                let meta = self.meta(&store, id)?;
                inputs = agentfile_engine::executor::inputs::inputs_from_text(&meta.inputs);
                resume = Some(id.clone());
                if p.path.is_empty() {
                    PathBuf::from(&meta.path)
                } else {
                    self.path(&p.path)
                }
            }
            None => {
                if p.path.trim().is_empty() {
                    return Err(RpcError::invalid_params(
                        "run: invalid params: missing field `path` (the workflow file to run)",
                    ));
                }
                self.path(&p.path)
            }
        };
        if !path.exists() {
            return Err(RpcError::new(
                code::NOT_FOUND,
                format!("{}: no such workflow file or folder", path.display()),
            ));
        }
        // Preparing a run parses the workflow inline: a huge file is refused
        // before it is read.
        self.source_size(&path)?;
        let loaded = match self.find_config(p.config.as_deref(), &path)? {
            Some(c) => c,
            None => {
                run::default_config().map_err(|e| RpcError::new(code::RUN_REJECTED, e.message))?
            }
        };
        let read = Self::read_options("run", p.lenient, p.profile, &p.extensions)?;
        let req = RunRequest {
            path,
            source: None,
            allow: Vec::new(),
            inputs,
            config: None,
            policy: self.options.policy.as_ref().map(|p| self.path_buf(p)),
            // The server's --workspace wins; else the workflow's config says, else
            // the server's folder.
            workspace: Some(match (&self.options.workspace, &loaded.agent.workspace) {
                (None, Some(ws)) => ws.clone(),
                _ => self.root.clone(),
            }),
            provider: p.provider.clone().or_else(|| self.options.provider.clone()),
            model: p.model.clone().or_else(|| self.options.model.clone()),
            base_url: None,
            cassette: None,
            record: None,
            max_turns: p.max_turns,
            max_tokens: p.max_tokens,
            max_cost_usd: p.max_cost_usd,
            timeout,
            strict_convergence: false,
            force_changed: false,
            read,
            http: self.options.http,
            sampling: self.options.sampling.clone(),
            loaded_config: Some(loaded),
        };
        Ok((req, resume))
    }

    fn rejected(&self, e: RunError) -> RpcError {
        let mut message = e.message;
        if let Some(hint) = &self.options.key_hint
            && e.cause == run::Cause::MissingApiKey
        {
            message.push_str("\n  = hint: ");
            message.push_str(hint);
        }
        RpcError::new(code::RUN_REJECTED, message)
            .with_data(serde_json::json!({"exit_code": e.exit_code}))
    }

    fn meta(&self, store: &Arc<dyn SessionStore>, id: &str) -> Result<SessionMeta, RpcError> {
        store.get(id).map_err(|e| match e {
            StoreError::NotFound(_) | StoreError::InvalidId(_) => RpcError::new(
                code::UNKNOWN_SESSION,
                format!(
                    "no session `{id}` in the session store of {}; `sessions` lists them",
                    self.root.display()
                ),
            ),
            other => RpcError::new(code::STORE, other.to_string()),
        })
    }

    // ---- event ----

    /// A session's events after `after_seq`, waiting up to `wait_ms` for the
    /// first new one.
    pub async fn events(&self, p: EventParams) -> Result<EventPage, RpcError> {
        let wait = Duration::from_millis(p.wait_ms.min(MAX_WAIT_MS));
        let limit = p.limit.unwrap_or(DEFAULT_EVENT_LIMIT).clamp(1, 10_000);
        let deadline = Instant::now() + wait;
        let live = self.live(&p.session_id);
        let store = match &live {
            Some(l) => l.store.clone(),
            None => self.default_store()?,
        };
        let mut rx = live.as_ref().map(|l| l.state.subscribe());
        loop {
            // Whether the run had ended is read before its events: every event of
            // an ended run is stored, so `done` never hides a last event.
            let (ended, live_status) = match &rx {
                Some(rx) => {
                    let st = rx.borrow();
                    (Some(st.ended || st.result.is_some()), Some(st.status))
                }
                None => (None, None),
            };
            let meta = self.meta(&store, &p.session_id)?;
            let mut events = store
                .events(&p.session_id, p.after_seq)
                .map_err(|e| RpcError::new(code::STORE, e.to_string()))?;
            let complete = events.len() <= limit;
            events.truncate(limit);
            let finished = ended.unwrap_or(!matches!(
                meta.status,
                SessionStatus::Running | SessionStatus::Queued
            ));
            let status = live_status.unwrap_or(meta.status);
            let last_seq = meta.last_seq.max(events.last().map_or(0, |e| e.seq));
            let done = finished && complete;
            let now = Instant::now();
            if !events.is_empty() || done || now >= deadline {
                return Ok(EventPage {
                    events,
                    done,
                    status,
                    last_seq,
                });
            }
            match &mut rx {
                Some(rx) => {
                    let _ = tokio::time::timeout(deadline - now, rx.changed()).await;
                }
                // Running in another process: poll the store.
                None => tokio::time::sleep((deadline - now).min(Duration::from_millis(100))).await,
            }
        }
    }

    // ---- cancel ----

    pub async fn cancel(&self, p: CancelParams) -> Result<RunStatus, RpcError> {
        if let Some(live) = self.live(&p.session_id) {
            live.cancel.cancel();
            // Cancellation reaches model calls and tools at once; give it a moment
            // to be recorded so the answer says `cancelled`.
            let _ = tokio::time::timeout(Duration::from_secs(10), live.finished()).await;
            return Ok(RunStatus {
                session_id: p.session_id,
                status: live.status(),
            });
        }
        let store = self.default_store()?;
        let meta = self.meta(&store, &p.session_id)?;
        let status = match meta.status {
            s if s.is_terminal() => s,
            SessionStatus::Running => {
                return Err(RpcError::new(
                    code::SESSION_STATE,
                    format!(
                        "session `{}` is running in another process; cancel it there",
                        p.session_id
                    ),
                ));
            }
            // Waiting for an approval, interrupted or queued by a process that
            // is gone: record the end so it is not resumed by mistake.
            _ => {
                let bus = agentfile_session::events::EventBus::new(
                    &p.session_id,
                    meta.last_seq,
                    Some(store.clone()),
                );
                bus.emit(
                    &agentfile_session::events::Scope::default(),
                    EventBody::RunCancelled {
                        usage: Usage::default(),
                    },
                );
                if let Some(e) = bus.store_error() {
                    return Err(RpcError::new(code::STORE, e));
                }
                SessionStatus::Cancelled
            }
        };
        Ok(RunStatus {
            session_id: p.session_id,
            status,
        })
    }

    // ---- approve ----

    /// Resume a stored session here, as `sessions resume` does: one that
    /// was interrupted, failed, or waits with its decision or signal already
    /// recorded. A session this process runs, or one completed, is refused.
    pub async fn resume(
        self: &Arc<Self>,
        session_id: String,
        hooks: RunHooks,
    ) -> Result<RunStatus, RpcError> {
        self.resume_here(session_id, hooks).await
    }

    /// Resume a stored session on this connection (after a decision or a
    /// signal was recorded for it).
    async fn resume_here(
        self: &Arc<Self>,
        session_id: String,
        hooks: RunHooks,
    ) -> Result<RunStatus, RpcError> {
        let resumed = self
            .submit(
                RunParams {
                    resume: Some(session_id.clone()),
                    ..RunParams::default()
                },
                hooks,
            )
            .await?;
        Ok(RunStatus {
            session_id,
            status: resumed.status(),
        })
    }

    /// Deliver a signal to a suspended session and resume it here.
    pub async fn signal(
        self: &Arc<Self>,
        p: SignalParams,
        hooks: RunHooks,
    ) -> Result<RunStatus, RpcError> {
        if let Some(live) = self.live(&p.session_id)
            && matches!(
                live.status(),
                SessionStatus::Running | SessionStatus::Queued | SessionStatus::WaitingApproval
            )
        {
            return Err(RpcError::new(
                code::SESSION_STATE,
                format!(
                    "session `{}` is {}, not suspended; signal it once it waits at a suspend step",
                    p.session_id,
                    live.status().as_str()
                ),
            ));
        }
        let store = self.default_store()?;
        let meta = self.meta(&store, &p.session_id)?;
        if meta.status == SessionStatus::Running {
            return Err(RpcError::new(
                code::SESSION_STATE,
                format!(
                    "session `{}` is running in another process; signal it once it is suspended",
                    p.session_id
                ),
            ));
        }
        run::record_signal(&store, &p.session_id, &p.event, p.payload.clone())
            .map_err(|e| RpcError::new(code::SESSION_STATE, e.message))?;
        deliver_recorded(&store, &p.session_id, meta.last_seq, &hooks);
        self.resume_here(p.session_id, hooks).await
    }

    /// End the wait of a run at an approval without a decision: the run ends
    /// as `waiting_approval` (`reason` says why), to be approved and resumed
    /// later. Returns false when the run does not wait at one.
    pub fn release_approval(&self, session_id: &str, reason: String) -> bool {
        let Some(live) = self.live(session_id) else {
            return false;
        };
        let mut pending = lock(&live.pending);
        match std::mem::take(&mut *pending) {
            Pending::Waiting(tx) => tx.send(Approval::Unavailable(reason)).is_ok(),
            other => {
                *pending = other;
                false
            }
        }
    }

    /// Whether the approval a live run waits on has its decision already,
    /// the run not yet past it (its `approval_resolved` still to come).
    pub fn approval_answered(&self, id: &str) -> bool {
        let Some(live) = self.live(id) else {
            return false;
        };
        let asked = live.state.borrow().approval;
        match &*lock(&live.pending) {
            Pending::Answered(seq) => asked.is_none_or(|a| a <= *seq),
            Pending::Decided(_) => true,
            _ => false,
        }
    }

    pub async fn approve(
        self: &Arc<Self>,
        p: ApproveParams,
        hooks: RunHooks,
    ) -> Result<RunStatus, RpcError> {
        if let Some(cluster) = &self.options.cluster
            && let Some(live) = self.live(&p.session_id)
        {
            // The run waits on the worker that holds it.
            return remote::approve(cluster, &live, p).await;
        }
        let decision = if p.approve {
            Approval::Approved(p.note.clone())
        } else {
            Approval::Rejected(p.note.clone())
        };
        if let Some(live) = self.live(&p.session_id) {
            let mut pending = lock(&live.pending);
            let asked = live.state.borrow().approval;
            match (std::mem::take(&mut *pending), asked) {
                (Pending::Waiting(tx), asked) => {
                    let _ = tx.send(decision);
                    *pending = Pending::Answered(asked.unwrap_or(0));
                }
                (Pending::Answered(seq), Some(asked)) if asked > seq => {
                    *pending = Pending::Decided(decision);
                }
                (Pending::Nothing, Some(_)) => {
                    *pending = Pending::Decided(decision);
                }
                (other, _) => {
                    *pending = other;
                    return Err(RpcError::new(
                        code::SESSION_STATE,
                        format!(
                            "session `{}` is not waiting for an approval (it is {})",
                            p.session_id,
                            live.status().as_str()
                        ),
                    ));
                }
            }
            drop(pending);
            return Ok(RunStatus {
                session_id: p.session_id,
                status: SessionStatus::Running,
            });
        }
        let store = self.default_store()?;
        let meta = self.meta(&store, &p.session_id)?;
        if meta.status == SessionStatus::Running {
            return Err(RpcError::new(
                code::SESSION_STATE,
                format!(
                    "session `{}` is running in another process; approve it there or with `agentfile sessions approve`",
                    p.session_id
                ),
            ));
        }
        if let Some(holder) = waiting_elsewhere(&store, &meta)? {
            return Err(RpcError::new(
                code::SESSION_STATE,
                format!(
                    "session `{}` waits for its approval in process {} on {}; approve it there \
                     (a decision recorded here would run it twice)",
                    p.session_id, holder.pid, holder.host
                ),
            ));
        }
        run::record_decision(&store, &p.session_id, p.approve, p.note.clone())
            .map_err(|e| RpcError::new(code::SESSION_STATE, e.message))?;
        deliver_recorded(&store, &p.session_id, meta.last_seq, &hooks);
        self.resume_here(p.session_id, hooks).await
    }

    // ---- validate, inspect, list, sessions ----

    /// The size of the workflow source at `path` (a folder: the workflow file
    /// in it), refused past `--max-source-bytes`. Unreadable files weigh 0:
    /// the analysis reports them.
    fn source_size(&self, path: &Path) -> Result<u64, RpcError> {
        let file = if path.is_dir() {
            agentfile_frontend::registry::file_in(path)
        } else {
            Some(path.to_owned())
        };
        let size = file
            .and_then(|f| std::fs::metadata(f).ok())
            .map_or(0, |m| m.len());
        let max = self.options.limits.max_source();
        if size > max as u64 {
            return Err(limits::source_too_large(
                &path.display().to_string(),
                size,
                max,
            ));
        }
        Ok(size)
    }

    /// Run `work` on the blocking pool once `weight` bytes of the analysis
    /// budget are free, so that analyses in flight stay within it; a panic
    /// in it is an internal error, not a lost reply.
    async fn analyse<T: Send + 'static>(
        self: &Arc<Self>,
        weight: u64,
        work: impl FnOnce(&Engine) -> Result<T, RpcError> + Send + 'static,
    ) -> Result<T, RpcError> {
        let budget = self.analysis_budget();
        // At most ANALYSES_AT_ONCE at a time whatever their size: a small file
        // can still take far more than its size (a diagnostic per line).
        let least = (budget / ANALYSES_AT_ONCE).max(1) as u64;
        let weight = weight.clamp(least, budget as u64) as u32;
        let permit = self
            .analysis
            .clone()
            .acquire_many_owned(weight)
            .await
            .map_err(|_| RpcError::internal("the analysis budget was closed"))?;
        let engine = self.clone();
        let out = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work(&engine)
        })
        .await;
        match out {
            Ok(r) => r,
            Err(e) if e.is_panic() => Err(RpcError::internal(format!(
                "internal error: the request handler panicked ({}); please report it",
                limits::panic_message(e.into_panic().as_ref())
            ))),
            Err(e) => Err(RpcError::internal(format!("the request was dropped: {e}"))),
        }
    }

    fn analysis_budget(&self) -> usize {
        self.options
            .limits
            .analysis_budget()
            .min(Semaphore::MAX_PERMITS)
            .min(u32::MAX as usize)
    }

    /// [`Engine::validate`] within the source-size and analysis bounds, off the
    /// async threads.
    pub async fn validate_bounded(
        self: &Arc<Self>,
        p: ValidateParams,
    ) -> Result<ValidateReport, RpcError> {
        let max = self.options.limits.max_source();
        let weight = match &p.source {
            Some(src) => {
                if src.len() > max {
                    return Err(limits::source_too_large("`source`", src.len() as u64, max));
                }
                src.len() as u64
            }
            None => {
                let mut total = 0u64;
                for x in p.path.iter().chain(&p.paths) {
                    total = total.saturating_add(self.source_size(&self.request_path(x)?)?);
                }
                total
            }
        };
        self.analyse(weight, move |e| e.validate(p)).await
    }

    /// [`Engine::inspect`] within the same bounds as validation.
    pub async fn inspect_bounded(
        self: &Arc<Self>,
        p: InspectParams,
    ) -> Result<serde_json::Value, RpcError> {
        let weight = if p.path.trim().is_empty() {
            0
        } else {
            self.source_size(&self.request_path(&p.path)?)?
        };
        self.analyse(weight, move |e| e.inspect(p)).await
    }

    /// [`Engine::list`] analyses every workflow under a folder: it takes the
    /// whole analysis budget, one listing at a time and nothing beside it.
    pub async fn list_bounded(self: &Arc<Self>, p: ListParams) -> Result<WorkflowList, RpcError> {
        let all = self.analysis_budget() as u64;
        self.analyse(all, move |e| e.list(p)).await
    }

    /// [`Engine::sessions`] off the async threads.
    pub async fn sessions_bounded(
        self: &Arc<Self>,
        p: SessionsParams,
    ) -> Result<SessionList, RpcError> {
        let engine = self.clone();
        match tokio::task::spawn_blocking(move || engine.sessions(p)).await {
            Ok(r) => r,
            Err(e) => Err(RpcError::internal(format!(
                "internal error: the request handler failed ({e}); please report it"
            ))),
        }
    }

    pub fn validate(&self, p: ValidateParams) -> Result<ValidateReport, RpcError> {
        let read = Self::read_options("validate", p.lenient, p.profile, &p.extensions)?;
        let mut paths: Vec<PathBuf> = p
            .paths
            .iter()
            .map(|x| self.request_path(x))
            .collect::<Result<_, _>>()?;
        if let Some(x) = &p.path {
            paths.insert(0, self.request_path(x)?);
        }
        if let Some(c) = &p.config {
            self.request_path(c)?;
        }
        let mut analyses = Vec::new();
        if let Some(source) = p.source {
            if paths.len() > 1 {
                return Err(RpcError::invalid_params(
                    "validate: invalid params: `source` checks one workflow; give at most one `path`",
                ));
            }
            // Without a `path` the text is not a file: its diagnostics say
            // `<source>`, while FROM files still resolve from the workspace.
            let (at, label) = match paths.pop() {
                Some(at) => (at, None),
                None => (self.root.join(SOURCE_LABEL), Some(SOURCE_LABEL)),
            };
            let config = self.find_config(p.config.as_deref(), &at)?;
            let analysis = frontend::analyze_bytes(
                at.clone(),
                source.into_bytes(),
                frontend::Options {
                    config: config.as_ref(),
                    dialect: None,
                    read: read.clone(),
                },
            );
            let mut report =
                agentfile_frontend::report::validate_report(std::slice::from_ref(&analysis));
            if let Some(label) = label {
                relabel(&mut report, &at.display().to_string(), label);
            }
            return Ok(report);
        } else {
            if paths.is_empty() {
                return Err(RpcError::invalid_params(
                    "validate: invalid params: missing field `path` (or `paths`, or `source`)",
                ));
            }
            for path in paths {
                let config = self.find_config(p.config.as_deref(), &path)?;
                let mut a = frontend::analyze(
                    &path,
                    frontend::Options {
                        config: config.as_ref(),
                        dialect: None,
                        read: read.clone(),
                    },
                );
                frontend::check_policy(&mut a, None);
                analyses.push(a);
            }
        }
        Ok(agentfile_frontend::report::validate_report(&analyses))
    }

    /// The plan as JSON (format `json`), or rendered text.
    pub fn inspect(&self, p: InspectParams) -> Result<serde_json::Value, RpcError> {
        if p.path.trim().is_empty() {
            return Err(RpcError::invalid_params(
                "inspect: invalid params: missing field `path`",
            ));
        }
        let read = Self::read_options("inspect", p.lenient, p.profile, &p.extensions)?;
        let path = self.request_path(&p.path)?;
        if let Some(c) = &p.config {
            self.request_path(c)?;
        }
        let config = self.find_config(p.config.as_deref(), &path)?;
        let a = frontend::analyze(
            &path,
            frontend::Options {
                config: config.as_ref(),
                dialect: None,
                read: read.clone(),
            },
        );
        let Some(plan) = &a.plan else {
            let report = agentfile_frontend::report::validate_report(std::slice::from_ref(&a));
            return Err(RpcError::new(
                code::RUN_REJECTED,
                format!(
                    "{}: invalid — {} error(s); `validate` lists them",
                    a.path.display(),
                    a.errors()
                ),
            )
            .with_data(serde_json::to_value(report).unwrap_or_default()));
        };
        let text = match p.format {
            InspectFormat::Json => {
                return serde_json::to_value(plan).map_err(|e| RpcError::internal(e.to_string()));
            }
            InspectFormat::Text => inspect::text(plan),
            InspectFormat::Mermaid => inspect::mermaid(plan),
        };
        serde_json::to_value(InspectText {
            format: p.format,
            text,
        })
        .map_err(|e| RpcError::internal(e.to_string()))
    }

    pub fn list(&self, p: ListParams) -> Result<WorkflowList, RpcError> {
        let dir = match p.dir {
            Some(d) => self.request_path(&d)?,
            None => self.root.clone(),
        };
        if !dir.is_dir() {
            return Err(RpcError::new(
                code::NOT_FOUND,
                format!("{}: not a folder", dir.display()),
            ));
        }
        let config = self.find_config(None, &dir.join("Agentfile"))?;
        Ok(discover::list(&dir, config.as_ref()))
    }

    pub fn sessions(&self, p: SessionsParams) -> Result<SessionList, RpcError> {
        use agentfile_session::{Cursor, SessionQuery};
        let store = self.default_store()?;
        let mut limit = p.limit.unwrap_or(50).max(1);
        let read = |e: StoreError| RpcError::new(code::STORE, e.to_string());
        let sessions = if p.workflow.is_none() && p.search.is_none() && p.before.is_none() {
            store.list(p.status, limit).map_err(read)?
        } else {
            let before = match p.before.as_deref() {
                Some(token) => Some(Cursor::decode(token).ok_or_else(|| {
                    RpcError::invalid_params(
                        "`before` is not a cursor: pass the `next` of the page before",
                    )
                })?),
                None => None,
            };
            let query = SessionQuery {
                status: p.status,
                workflow: p.workflow,
                search: p.search,
                before,
                limit,
            };
            limit = query.limit();
            store.page(&query).map_err(read)?
        };
        let next = match sessions.last() {
            Some(last) if sessions.len() == limit => Some(Cursor::after(last).encode()),
            _ => None,
        };
        Ok(SessionList { sessions, next })
    }

    // ---- shutdown ----

    /// Accept no new runs and wait for every accepted one to finish. The client
    /// is gone, so a run that waits for the `approve` method (now or later)
    /// stops there as `waiting_approval`, to be approved with `agentfile
    /// sessions approve` and resumed; otherwise draining would never end.
    pub async fn drain(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let live: Vec<Arc<LiveRun>> = lock(&self.runs).values().cloned().collect();
        for l in live {
            // Set before taking the lock, which `EngineApprover` checks it under.
            l.orphaned.store(true, Ordering::SeqCst);
            let mut pending = lock(&l.pending);
            match std::mem::take(&mut *pending) {
                Pending::Waiting(tx) => {
                    let _ = tx.send(Approval::Unavailable(nobody_to_approve(&l.session_id)));
                }
                other => *pending = other,
            }
        }
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Accept no new runs, stop the ones in flight and leave their sessions
    /// `interrupted` (resumable); waits up to `grace` for them to stop.
    pub async fn interrupt(&self, grace: Duration) {
        self.closing.store(true, Ordering::SeqCst);
        let live: Vec<Arc<LiveRun>> = lock(&self.runs).values().cloned().collect();
        for l in live {
            l.interrupted.store(true, Ordering::SeqCst);
            l.cancel.cancel();
        }
        self.tasks.close();
        let _ = tokio::time::timeout(grace, self.tasks.wait()).await;
    }
}

/// The live process, other than this one, that still waits inside a run of
/// the session for an approval: its last event is the request (a run that
/// stopped waiting ended with a terminal event) and its owner is alive on
/// this machine.
fn waiting_elsewhere(
    store: &Arc<dyn SessionStore>,
    meta: &SessionMeta,
) -> Result<Option<agentfile_session::Owner>, RpcError> {
    if meta.status != SessionStatus::WaitingApproval {
        return Ok(None);
    }
    let read = |e: StoreError| RpcError::new(code::STORE, e.to_string());
    let last = store
        .events(&meta.id, meta.last_seq.saturating_sub(1))
        .map_err(read)?;
    if !last
        .last()
        .is_some_and(|e| matches!(e.body, EventBody::ApprovalRequired { .. }))
    {
        return Ok(None);
    }
    Ok(store.owner(&meta.id).map_err(read)?.and_then(|o| {
        (o.owner != *agentfile_session::Owner::current() && o.owner.is_alive_here() == Some(true))
            .then_some(o.owner)
    }))
}

/// Hand the events appended to a session after `after` (a recorded signal or
/// decision, before its run is resumed) to the caller's sinks: its
/// notifications stay dense, as if the run had recorded them itself.
fn deliver_recorded(store: &Arc<dyn SessionStore>, id: &str, after: u64, hooks: &RunHooks) {
    if hooks.sinks.is_empty() {
        return;
    }
    let Ok(events) = store.events(id, after) else {
        return;
    };
    for e in &events {
        for sink in &hooks.sinks {
            sink.send(e);
        }
    }
}

/// Waits for the `approve` method, after asking the transport's own approver
/// (MCP elicitation) if there is one.
struct EngineApprover {
    live: Arc<LiveRun>,
    first: Option<Arc<dyn Approver>>,
}

impl Approver for EngineApprover {
    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            {
                let mut pending = lock(&self.live.pending);
                if let Pending::Decided(d) = std::mem::take(&mut *pending) {
                    *pending = Pending::Answered(self.live.state.borrow().approval.unwrap_or(0));
                    return d;
                }
                if self.live.orphaned.load(Ordering::SeqCst) {
                    return Approval::Unavailable(nobody_to_approve(&self.live.session_id));
                }
                *pending = Pending::Waiting(tx);
            }
            let answer = async {
                rx.await.unwrap_or_else(|_| {
                    Approval::Unavailable("the approval request was dropped".into())
                })
            };
            let decision = match &self.first {
                Some(first) => {
                    tokio::pin!(answer);
                    tokio::select! {
                        d = first.decide(req) => match d {
                            Approval::Unavailable(_) => answer.await,
                            decided => decided,
                        },
                        d = &mut answer => d,
                    }
                }
                None => answer.await,
            };
            // Decided here, by the transport's approver (MCP elicitation) or
            // given up: whichever way, no later `approve` may stand for this
            // approval, only for a later one.
            let seq = self.live.state.borrow().approval.unwrap_or(0);
            *lock(&self.live.pending) = Pending::Answered(seq);
            decision
        })
    }
}

/// Analyses (validate, inspect, list) running at once on one connection.
pub const ANALYSES_AT_ONCE: usize = 2;

/// What the diagnostics of `validate {source}` without a `path` name as their file.
pub const SOURCE_LABEL: &str = "<source>";

/// Name `from` as `to` wherever the report mentions it.
fn relabel(report: &mut ValidateReport, from: &str, to: &str) {
    let swap = |p: &mut String| {
        if p == from {
            *p = to.to_owned();
        }
    };
    for f in &mut report.files {
        swap(&mut f.path);
        for d in &mut f.diagnostics {
            swap(&mut d.path);
            for n in &mut d.notes {
                swap(&mut n.path);
            }
        }
    }
}

/// Why a run stops at an approval once its client is gone (after "goal `g`
/// needs approval, but").
fn nobody_to_approve(id: &str) -> String {
    format!(
        "the client that started it is gone; approve it with `agentfile sessions approve {id}`, then continue with `agentfile sessions resume {id}`"
    )
}

fn failed_result(id: &str, message: &str, status: SessionStatus) -> RunResult {
    RunResult {
        kind: "result".into(),
        session_id: id.to_owned(),
        status: match status {
            SessionStatus::Completed => "completed",
            SessionStatus::Cancelled | SessionStatus::Interrupted => "cancelled",
            _ => "failed",
        }
        .into(),
        outputs: Default::default(),
        usage: Usage::default(),
        termination_reason: agentfile_protocol::events::TerminationReason::Error,
        error: Some(message.to_owned()),
        exit_code: exit::FAILED,
        waiting_for: Vec::new(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Parse the run's workflow. Parsing, config and provider set-up read a few
/// small files: done inline, because a burst of runs on the blocking pool
/// meant hundreds of threads (and their malloc arenas) for work of a
/// millisecond each.
/// A list, object or `null` given over the wire binds only to an input the
/// plan declares a JSON type for (its `inputs` schema); an input read as text
/// takes a string, number or boolean, as it always has.
fn structured_inputs(p: &RunParams, plan: &agentfile_plan::Plan) -> Result<(), RpcError> {
    let scalar = |v: &serde_json::Value| v.is_string() || v.is_number() || v.is_boolean();
    match p
        .inputs
        .iter()
        .find(|(k, v)| !scalar(v) && agentfile_engine::executor::inputs::reads_as_text(plan, k))
    {
        Some((k, v)) => Err(RpcError::invalid_params(format!(
            "run: invalid params: `inputs.{k}`: expected a string, number or boolean, not {}",
            agentfile_protocol::rpc::json_kind(v)
        ))),
        None => Ok(()),
    }
}

fn load_plan(req: &RunRequest, config: &Config) -> Result<agentfile_plan::Plan, run::LoadError> {
    let options = agentfile_frontend::Options {
        config: Some(config),
        dialect: None,
        read: req.read.clone(),
    };
    agentfile_frontend::Analysis::load_for_run(&req.path, req.source.as_deref(), options)
        .map_err(Into::into)
}
