//! The run service: the one way a run starts, whichever door it comes in by
//! (the CLI, `serve`, `mcp` on stdio or HTTP, the web view, the daemon's
//! fires, a NATS worker). A door turns its wire into a [`RunParams`] (or, for
//! the CLI, a [`RunRequest`]) and the service's events back into its wire;
//! everything between is here: stored settings for a resume, the checks
//! before any work ([`run::prepare`]), the session's record, the queue of
//! `max_runs` slots, the run itself ([`run::start_in`]), and the operations on
//! runs in flight and stored sessions (`event`, `cancel`, `approve`,
//! `signal`, resume).
//!
//! A run is prepared (every check that can fail before work starts, so a bad
//! request is an error reply, not a failed session), recorded as `queued`,
//! and spawned; it waits for one of `max_runs` slots, then goes through
//! [`run::start_in`]. Its events are read back from the session store — the
//! store is the only copy, so `event` serves a run started here, one that
//! finished long ago, or one another process is running, the same way.
//!
//! The service knows no format and no transport: the front ends reach it
//! through a [`Reader`], a cluster through a [`Remote`], a transport through
//! the [`RunHooks`] it attaches to a run.
//!
//! Shutdown: [`RunService::drain`] (stdin closed) lets every accepted run
//! finish, because a client that pipes one request and closes its end still
//! wants the answer; [`RunService::interrupt`] (a signal) stops them and marks
//! each session `interrupted`, so `sessions resume` continues it.

mod holder;
mod live;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::executor::{Approval, Approver, exit};
use crate::run::{self, RunError, SessionChoice, Stores};
use agentfile_config::Config;
use agentfile_llm::{HttpOptions, Provider};
use agentfile_plan::{Plan, ReadOptions};
use agentfile_session::events::EventSink;
use agentfile_session::{self as session, SessionMeta, SessionStatus, SessionStore, StoreError};
use agentfile_wire::events::{Event, EventBody, RunResult, Usage};
use agentfile_wire::rpc::{
    ApproveParams, CancelParams, ConformanceProfile, EventPage, EventParams, RpcError, RunParams,
    RunStatus, SignalParams, code,
};

pub use crate::run::{LoadError, RunRequest};
pub use live::{LiveRun, RunHooks, failed_result, result_of};
use live::{LiveState, Pending, ServiceApprover, lock, nobody_to_approve};

/// The longest `event` long poll.
pub const MAX_WAIT_MS: u64 = 60_000;
/// How often `event` reads the store again while it waits on a store's
/// watch of a run in another process, in case a wake-up was lost.
const WATCH_REREAD: Duration = Duration::from_secs(1);
/// Events per `event` answer when the caller sets no limit.
pub const DEFAULT_EVENT_LIMIT: usize = 1000;
/// How long a cancel handed to another process waits for the end to be stored.
const SETTLE_WAIT: Duration = Duration::from_secs(10);
/// Runs at once when `max_runs` is not given.
pub const DEFAULT_MAX_RUNS: usize = 16;

/// How the service reads workflows: the front ends' registry, which the
/// caller supplies (the engine knows no format).
pub trait Reader: Send + Sync {
    /// The request's workflow as a plan, under the config it runs with.
    fn load(&self, req: &RunRequest, config: &Config) -> Result<Plan, LoadError>;
    /// Refuse a workflow too large to parse inline (a folder: the workflow
    /// file in it), before it is read.
    fn check_source(&self, path: &Path) -> Result<(), RpcError>;
    /// The names a request's `extensions` may hold.
    fn extension_names(&self) -> Vec<&'static str>;
}

/// Where runs go when another process executes them (`serve --nats`): the
/// run is recorded and admitted here, queued there, and its events relayed
/// back into the [`LiveRun`].
pub trait Remote: Send + Sync {
    /// Queue `work` and relay its events to `live` and the hooks' sinks until
    /// the run ends, in a task of [`RunService::track`]; the error says why
    /// it could not be queued.
    fn start<'a>(
        &'a self,
        service: &'a Arc<RunService>,
        live: &'a Arc<LiveRun>,
        work: RemoteWork,
        hooks: RunHooks,
    ) -> BoxFuture<'a, Result<(), NotQueued>>;
    /// Hand `request` for session `id`, which this process does not hold, to
    /// the process that runs it (a worker, whichever server queued it): the
    /// holder's answer, or `None` when nobody holds the run now.
    fn forward<'a>(
        &'a self,
        id: &'a str,
        request: Forward,
    ) -> BoxFuture<'a, Option<Result<RunStatus, RpcError>>>;
}

/// A request about a run that another process holds, for [`Remote::forward`].
#[derive(Debug, Clone)]
pub enum Forward {
    Approve(ApproveParams),
    Cancel,
}

/// Why a run could not be queued for another process (its text is the
/// reply's message).
pub type NotQueued = Box<dyn std::error::Error + Send + Sync>;

/// A run queued for another process: it resumes the session from the shared
/// store after `from_seq`, with the caller's parameters.
pub struct RemoteWork {
    pub session_id: String,
    pub from_seq: u64,
    /// The caller's parameters, the workflow and inputs left out (the
    /// session holds them) and the config path made absolute.
    pub params: RunParams,
    pub trigger: Option<agentfile_wire::events::RunTrigger>,
}

/// A run asked for whole: the CLI's, whose flags reach further than the
/// wire's parameters (a workflow's text, `--allow`, a cassette, a recording).
#[derive(Default)]
pub struct Submission {
    pub request: RunRequest,
    /// The session to continue (its inputs and workspace in `request`).
    pub resume: Option<String>,
    /// What a new session records for whoever resumes it; `None`: what
    /// `request` sets ([`run::RunSettings::of`]).
    pub settings: Option<run::RunSettings>,
    pub trigger: Option<agentfile_wire::events::RunTrigger>,
    /// Nobody can call `approve` while the run waits (a run on the command
    /// line): the hooks' approver answers alone, and when it cannot, the run
    /// ends as `waiting_approval`.
    pub unattended: bool,
    /// Start a new session from another's journal: every node that completed
    /// before `at` is taken from it, and `at` and all after run live.
    pub fork: Option<ForkFrom>,
    /// Replay this session in a new one: every model answer and tool result
    /// from its journal, nothing asked or run (`sessions replay`).
    pub replay: Option<String>,
}

/// The session a fork starts from and the node it runs live from.
#[derive(Debug, Clone, Default)]
pub struct ForkFrom {
    pub session: String,
    /// A node path, as events name it (`main/report`, `flow/each[3]/triage`).
    pub at: String,
}

/// Service-wide settings, from the `serve` / `mcp` / `daemon` command line.
#[derive(Clone)]
pub struct ServiceOptions {
    /// Canonical workspace: where tools work, relative request paths start,
    /// and sessions are stored.
    pub root: PathBuf,
    /// Whether the workspace was chosen (`--workspace`): it then wins over a
    /// workflow's config's `agent.workspace`.
    pub workspace_chosen: bool,
    /// `--config`: used for every request that names none (absolute).
    pub config: Option<PathBuf>,
    /// `--policy`, else `policy.toml` beside each workflow (absolute).
    pub policy: Option<PathBuf>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// `--base-url`: the provider's endpoint for every run (a local server).
    pub base_url: Option<String>,
    /// `--script`: what `--provider fake` answers, for every run (absolute).
    pub script: Option<PathBuf>,
    /// Runs executing at once; more wait as `queued`. 0 means the default.
    pub max_runs: usize,
    pub http: Option<HttpOptions>,
    /// The MCP host's model (`--provider mcp-sampling`).
    pub sampling: Option<Arc<dyn Provider>>,
    /// Said after "the API key is not set": where this server's host passes
    /// environment variables.
    pub key_hint: Option<String>,
    pub reader: Arc<dyn Reader>,
    /// Queue runs for other processes instead of executing them here.
    pub remote: Option<Arc<dyn Remote>>,
}

/// Runs in flight and the operations on sessions.
pub struct RunService {
    options: ServiceOptions,
    slots: Arc<Semaphore>,
    runs: Mutex<HashMap<String, Arc<LiveRun>>>,
    /// Stores by location, opened once and shared by every run that uses them.
    stores: Mutex<HashMap<PathBuf, Stores>>,
    closing: AtomicBool,
    tasks: TaskTracker,
    /// The stores (by location) whose requests to runs are heard here.
    heard: Mutex<std::collections::HashSet<PathBuf>>,
}

impl RunService {
    pub fn new(options: ServiceOptions) -> Arc<RunService> {
        let max = if options.max_runs == 0 {
            DEFAULT_MAX_RUNS
        } else {
            options.max_runs
        };
        Arc::new(RunService {
            options,
            slots: Arc::new(Semaphore::new(max)),
            runs: Mutex::new(HashMap::new()),
            stores: Mutex::new(HashMap::new()),
            closing: AtomicBool::new(false),
            tasks: TaskTracker::new(),
            heard: Mutex::default(),
        })
    }

    pub fn options(&self) -> &ServiceOptions {
        &self.options
    }

    /// The folder relative paths start from.
    pub fn root(&self) -> &Path {
        &self.options.root
    }

    /// Run `work` as a task [`RunService::drain`] and
    /// [`RunService::interrupt`] wait for.
    pub fn track(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(work);
    }

    /// Count `id` no more among the runs in flight here.
    pub fn forget(&self, id: &str) {
        lock(&self.runs).remove(id);
    }

    /// Mark sessions left `queued` or `running` by a process that is gone
    /// (killed, crashed) as `interrupted`, so `sessions` and resume see them as
    /// they are. Called once when a server starts; only a store that already
    /// exists is opened. Returns the sessions marked.
    pub fn reap_orphans(&self) -> Vec<String> {
        let Ok(config) = self.default_config() else {
            return Vec::new();
        };
        match session::location(&config, &self.options.root) {
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

    /// The config of the service's workspace (its `--config`, else one
    /// found there, else the defaults).
    pub fn default_config(&self) -> Result<Config, RpcError> {
        match self.find_config(None, &self.options.root)? {
            Some(c) => Ok(c),
            None => run::default_config().map_err(|e| RpcError::new(code::RUN_REJECTED, e.message)),
        }
    }

    /// Runs accepted and not finished.
    pub fn live_count(&self) -> usize {
        lock(&self.runs).len()
    }

    fn path(&self, p: &str) -> PathBuf {
        // A package (`oci://REF`) is not a file of the workspace.
        if p.starts_with("oci://") {
            return PathBuf::from(p);
        }
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_owned()
        } else {
            self.options.root.join(p)
        }
    }

    pub fn config_path(&self, request: Option<&str>) -> Option<PathBuf> {
        request
            .map(|c| self.path(c))
            .or_else(|| self.options.config.as_ref().map(|c| self.path_buf(c)))
    }

    /// How a request's workflow is read: its `lenient`, and `profile` and
    /// `extensions` checked against the optional profiles the reader names (the CLI's
    /// `--lenient`, `--profile` and `--extensions`).
    pub fn read_options(
        &self,
        method: &str,
        lenient: bool,
        profile: Option<ConformanceProfile>,
        extensions: &[String],
    ) -> Result<ReadOptions, RpcError> {
        let known = self.options.reader.extension_names();
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
            self.options.root.join(p)
        }
    }

    /// The config a workflow at `workflow` runs with: `explicit` (relative
    /// to the workspace), else the service's `--config`, else one found in
    /// the workspace or beside the workflow.
    pub fn find_config(
        &self,
        explicit: Option<&str>,
        workflow: &Path,
    ) -> Result<Option<Config>, RpcError> {
        run::find_config(
            self.config_path(explicit).as_deref(),
            workflow,
            &self.options.root,
        )
        .map_err(|e| RpcError::new(code::RUN_REJECTED, e.message))
    }

    fn stores_for(&self, config: &Config, workspace: &Path) -> Result<Stores, RpcError> {
        Ok(self.stores_at(config, workspace)?.1)
    }

    /// The stores of `config` and `workspace`, and where the session store
    /// is ([`session::location`]).
    fn stores_at(&self, config: &Config, workspace: &Path) -> Result<(PathBuf, Stores), RpcError> {
        let key = match session::location(config, workspace) {
            Ok((_, p)) => p,
            Err(e) => return Err(RpcError::new(code::STORE, e.to_string())),
        };
        let mut stores = lock(&self.stores);
        if let Some(s) = stores.get(&key) {
            return Ok((key, s.clone()));
        }
        let opened = run::open_stores(config, workspace)
            .map_err(|e| RpcError::new(code::STORE, e.message))?;
        stores.insert(key.clone(), opened.clone());
        Ok((key, opened))
    }

    /// The store sessions are looked up in when no live run names one: the
    /// server's config and workspace.
    fn default_store(&self) -> Result<Arc<dyn SessionStore>, RpcError> {
        let config = match self.find_config(None, &self.options.root)? {
            Some(c) => c,
            None => {
                run::default_config().map_err(|e| RpcError::new(code::RUN_REJECTED, e.message))?
            }
        };
        Ok(self.stores_for(&config, &self.options.root)?.sessions)
    }

    /// The session store of the server's config and workspace.
    pub fn store(&self) -> Result<Arc<dyn SessionStore>, RpcError> {
        self.default_store()
    }

    fn live(&self, id: &str) -> Option<Arc<LiveRun>> {
        lock(&self.runs).get(id).cloned()
    }

    /// Wait for a run of the session that has stored its last event (it
    /// completed, failed, or stopped at a suspend or an approval) but whose
    /// task is still closing, so that a signal, decision or resume sent the
    /// moment that event arrives finds the session at rest, not "running".
    async fn settle(&self, id: &str) {
        let Some(live) = self.live(id) else {
            return;
        };
        if live.state.borrow().ended {
            live.finished().await;
        }
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
            .map(|e| result_of(id, e).0))
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

    /// [`RunService::submit`] for a run a trigger started (the daemon's fires):
    /// its `run_started` carries `trigger`. Not reachable from the wire, so
    /// no client can claim a trigger started its run.
    pub async fn submit_with_trigger(
        self: &Arc<Self>,
        params: RunParams,
        hooks: RunHooks,
        trigger: Option<agentfile_wire::events::RunTrigger>,
    ) -> Result<Arc<LiveRun>, RpcError> {
        self.check_open()?;
        let params = self.with_stored_settings(params)?;
        let (request, resume) = self.request(&params)?;
        // A new session records its caller's own choices (not the server's
        // defaults), for whoever resumes it.
        let settings = self.settings_of(&params);
        let prepared = self.prepare(&request, Some(settings), trigger)?;
        structured_inputs(&params, &prepared.plan)?;
        let forward = self.options.remote.is_some().then_some(params);
        self.accept(prepared, resume, hooks, forward, false).await
    }

    /// Accept a run asked for whole, as the CLI's flags describe it (a
    /// resume's stored inputs, workspace and settings already filled in):
    /// the same checks, record, queue and run as [`RunService::submit`].
    pub async fn submit_request(
        self: &Arc<Self>,
        sub: Submission,
        hooks: RunHooks,
    ) -> Result<Arc<LiveRun>, RpcError> {
        self.check_open()?;
        let mut sub = sub;
        let journal = match &sub.replay {
            Some(source) => {
                // Nothing is asked of a model: the replay provider, over no
                // exchanges, stands in for the session's so that no key is
                // needed; the journal answers every request.
                sub.request.provider = Some("replay".into());
                sub.request.cassette = Some(empty_cassette()?);
                sub.request.model = None;
                Some(Arc::new(self.replay_journal(&sub.request, source)?))
            }
            None => None,
        };
        let mut prepared = self.prepare(&sub.request, sub.settings, sub.trigger)?;
        prepared.replay = journal;
        match sub.fork {
            None => {
                self.accept(prepared, sub.resume, hooks, None, sub.unattended)
                    .await
            }
            Some(fork) => {
                let kept = self.fork_events(&prepared, &fork)?;
                prepared.forked_from = Some(agentfile_wire::events::ForkedFrom {
                    session: fork.session.clone(),
                    node: fork.at.trim_matches('/').to_owned(),
                });
                self.accept_fork(prepared, kept, hooks, sub.unattended)
                    .await
            }
        }
    }

    /// A fork asked for over the wire (JSON-RPC `fork`, the MCP tool): the
    /// session's workflow, inputs and settings, with the caller's changes on
    /// top, run live from `p.at` in a new session.
    pub async fn fork(
        self: &Arc<Self>,
        p: agentfile_wire::rpc::ForkParams,
        hooks: RunHooks,
    ) -> Result<Arc<LiveRun>, RpcError> {
        self.check_open()?;
        if !session::is_valid_id(&p.session_id) {
            return Err(RpcError::invalid_params(format!(
                "fork: invalid params: `session_id`: `{}` is not a session id",
                p.session_id
            )));
        }
        if p.at.trim_matches('/').is_empty() {
            return Err(RpcError::invalid_params(
                "fork: invalid params: `at`: name the node to run live from (`main/report`)",
            ));
        }
        let store = self.default_store()?;
        let meta = self.meta(&store, &p.session_id)?;
        // The session's own settings, as a resume of it would take them.
        let mut params = self.with_stored_settings(RunParams {
            path: p.workflow.clone().unwrap_or_else(|| meta.path.clone()),
            provider: p.provider.clone(),
            model: p.model.clone(),
            resume: Some(p.session_id.clone()),
            ..RunParams::default()
        })?;
        params.resume = None;
        let mut inputs = crate::executor::inputs::inputs_from_text(&meta.inputs);
        inputs.extend(p.inputs.clone());
        params.inputs = inputs;
        let (request, _) = self.request(&params)?;
        let settings = self.settings_of(&params);
        let mut prepared = self.prepare(&request, Some(settings), None)?;
        structured_inputs(&params, &prepared.plan)?;
        let fork = ForkFrom {
            session: p.session_id.clone(),
            at: p.at.clone(),
        };
        let kept = self.fork_events(&prepared, &fork)?;
        prepared.forked_from = Some(agentfile_wire::events::ForkedFrom {
            session: fork.session,
            node: fork.at.trim_matches('/').to_owned(),
        });
        self.accept_fork(prepared, kept, hooks, false).await
    }

    /// The journal of the session a replay answers from.
    fn replay_journal(
        &self,
        request: &RunRequest,
        source: &str,
    ) -> Result<crate::executor::replay::ReplayJournal, RpcError> {
        let config = match self.find_config(
            request.config.as_deref().and_then(Path::to_str),
            &request.path,
        )? {
            Some(c) => c,
            None => {
                run::default_config().map_err(|e| RpcError::new(code::RUN_REJECTED, e.message))?
            }
        };
        let workspace = request
            .workspace
            .clone()
            .unwrap_or_else(|| self.options.root.clone());
        let stores = self.stores_for(&config, &workspace)?;
        self.meta(&stores.sessions, source)?;
        let events = stores
            .sessions
            .events(source, 0)
            .map_err(|e| RpcError::new(code::STORE, e.to_string()))?;
        Ok(crate::executor::replay::ReplayJournal::from_events(
            source, &events,
        ))
    }

    /// A replay asked for over the wire (JSON-RPC `replay`, the MCP tool):
    /// the session's workflow (or `p.workflow`), inputs and settings, run in a
    /// new session from the session's journal.
    pub async fn replay(
        self: &Arc<Self>,
        p: agentfile_wire::rpc::ReplayParams,
        hooks: RunHooks,
    ) -> Result<Arc<LiveRun>, RpcError> {
        self.check_open()?;
        if !session::is_valid_id(&p.session_id) {
            return Err(RpcError::invalid_params(format!(
                "replay: invalid params: `session_id`: `{}` is not a session id",
                p.session_id
            )));
        }
        let store = self.default_store()?;
        let meta = self.meta(&store, &p.session_id)?;
        let mut params = self.with_stored_settings(RunParams {
            path: p.workflow.clone().unwrap_or_else(|| meta.path.clone()),
            resume: Some(p.session_id.clone()),
            ..RunParams::default()
        })?;
        params.resume = None;
        params.inputs = crate::executor::inputs::inputs_from_text(&meta.inputs);
        let (request, _) = self.request(&params)?;
        let settings = self.settings_of(&params);
        let sub = Submission {
            request,
            settings: Some(settings),
            replay: Some(p.session_id),
            ..Submission::default()
        };
        self.submit_request(sub, hooks).await
    }

    /// The events a fork of `fork.session` at `fork.at` takes over, checked
    /// against the plan it will run: refused when the workflow changed in
    /// what it keeps.
    fn fork_events(
        &self,
        prepared: &run::Prepared,
        fork: &ForkFrom,
    ) -> Result<Vec<agentfile_wire::events::Event>, RpcError> {
        use crate::executor::fork;
        let stores = self.stores_for(&prepared.config, &prepared.workspace)?;
        let meta = self.meta(&stores.sessions, &fork.session)?;
        if matches!(meta.status, SessionStatus::Running | SessionStatus::Queued)
            && self.live(&fork.session).is_some()
        {
            return Err(RpcError::new(
                code::SESSION_STATE,
                format!(
                    "session `{}` is still running here; fork it once it has settled",
                    fork.session
                ),
            ));
        }
        let source = stores
            .sessions
            .events(&fork.session, 0)
            .map_err(|e| RpcError::new(code::STORE, e.to_string()))?;
        let kept = fork::events_before(&fork.session, &source, &fork.at)
            .map_err(|e| self.rejected(RunError::usage(e.to_string())))?;
        fork::check_unchanged(&fork.session, &source, &kept, &fork.at, &prepared.plan)
            .map_err(|e| self.rejected(RunError::usage(e.to_string())))?;
        Ok(kept)
    }

    /// A fork's session: created, the kept events written into it (renumbered
    /// from 1, marked `replayed`), then run as a resume of it.
    async fn accept_fork(
        self: &Arc<Self>,
        prepared: run::Prepared,
        kept: Vec<agentfile_wire::events::Event>,
        hooks: RunHooks,
        unattended: bool,
    ) -> Result<Arc<LiveRun>, RpcError> {
        let stores = self.stores_for(&prepared.config, &prepared.workspace)?;
        let id = run::create_session(stores.sessions.as_ref(), &prepared, SessionStatus::Queued)
            .map_err(|e| RpcError::new(code::STORE, format!("cannot record the session: {e}")))?;
        // The new session is its caller's, as a new run's is (the resume
        // below keeps an owner and never records one).
        if let Some(owner) = &hooks.owner
            && let Err(e) = stores.sessions.set_principal(&id, owner.as_str())
        {
            let _ = stores.sessions.set_status(&id, SessionStatus::Failed);
            return Err(RpcError::new(
                code::STORE,
                format!("cannot record the session's owner: {e}"),
            ));
        }
        let copied: Vec<_> = kept
            .into_iter()
            .enumerate()
            .map(|(i, mut e)| {
                e.session_id = id.clone();
                e.seq = i as u64 + 1;
                e
            })
            .collect();
        if let Err(e) = stores.sessions.append_batch(&copied) {
            let _ = stores.sessions.set_status(&id, SessionStatus::Failed);
            return Err(RpcError::new(
                code::STORE,
                format!("cannot copy the journal into session `{id}`: {e}"),
            ));
        }
        let _ = stores.sessions.set_status(&id, SessionStatus::Interrupted);
        self.accept(prepared, Some(id), hooks, None, unattended)
            .await
    }

    fn check_open(&self) -> Result<(), RpcError> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(RpcError::new(
                code::SHUTTING_DOWN,
                "the server is shutting down and accepts no new runs",
            ));
        }
        Ok(())
    }

    /// Every check before work starts ([`run::prepare`]); `settings`, when
    /// given, is what a new session records instead of what `req` sets.
    fn prepare(
        &self,
        req: &RunRequest,
        settings: Option<run::RunSettings>,
        trigger: Option<agentfile_wire::events::RunTrigger>,
    ) -> Result<run::Prepared, RpcError> {
        let reader = self.options.reader.clone();
        let mut prepared =
            run::prepare(req, &|r, c| reader.load(r, c)).map_err(|e| self.rejected(e))?;
        if let Some(s) = settings {
            prepared.settings = s;
        }
        prepared.trigger = trigger;
        Ok(prepared)
    }

    /// Record the run's session (a new one as `queued`), count it among the
    /// live runs, and start it: here when a slot is free, or on the remote
    /// with `forward` as its parameters.
    async fn accept(
        self: &Arc<Self>,
        mut prepared: run::Prepared,
        resume: Option<String>,
        hooks: RunHooks,
        forward: Option<RunParams>,
        unattended: bool,
    ) -> Result<Arc<LiveRun>, RpcError> {
        let (stored_at, stores) = self.stores_at(&prepared.config, &prepared.workspace)?;
        let store = stores.sessions.clone();
        self.hear_requests(&stored_at, &store);
        if let Some(id) = &resume {
            self.settle(id).await;
        }
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
            stored_at,
            workspace: prepared.workspace.clone(),
            plan: prepared.plan.clone(),
            cancel: CancellationToken::new(),
            state,
            pending: Mutex::new(Pending::Nothing),
            interrupted: AtomicBool::new(false),
            orphaned: AtomicBool::new(unattended),
            unattended,
            setup_error: Mutex::new(None),
        });
        self.admit(&live, &choice)?;
        match (self.options.remote.clone(), forward) {
            (Some(remote), Some(params)) => {
                let trigger = prepared.trigger.take();
                self.queue(
                    remote.as_ref(),
                    &live,
                    &choice,
                    last_seq,
                    params,
                    hooks,
                    trigger,
                )
                .await?;
            }
            _ => self.spawn_run(&live, prepared, stores, choice, hooks),
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
                // A workflow changed since the session started is refused
                // here, before the session is touched, not as a failed run.
                if !prepared.force_changed {
                    let prior = store
                        .events(&id, 0)
                        .map_err(|e| RpcError::new(code::STORE, e.to_string()))?;
                    if let Err(e) = crate::executor::check_resume(&prepared.plan, &prior) {
                        return Err(self.rejected(RunError::usage(format!("session `{id}`: {e}"))));
                    }
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
            )
            .with_data(serde_json::json!({ "session_id": id })));
        }
        runs.insert(id.clone(), live.clone());
        Ok(())
    }

    /// With a cluster: queue the run for a worker, which resumes the session
    /// from the shared store (and writes `run_started`, with the trigger).
    #[allow(clippy::too_many_arguments)]
    async fn queue(
        self: &Arc<Self>,
        remote: &dyn Remote,
        live: &Arc<LiveRun>,
        choice: &SessionChoice,
        last_seq: u64,
        params: RunParams,
        hooks: RunHooks,
        trigger: Option<agentfile_wire::events::RunTrigger>,
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
        let work = RemoteWork {
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
        if let Err(e) = remote.start(self, live, work, hooks).await {
            lock(&self.runs).remove(id);
            if matches!(choice, SessionChoice::Created(_)) {
                let _ = store.set_status(id, SessionStatus::Failed);
            }
            return Err(RpcError::new(code::RUN_REJECTED, e.to_string()));
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
                        panic_message(p.as_ref())
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
            r.termination_reason = agentfile_wire::events::TerminationReason::Cancelled;
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
        // Unattended, the caller's approver answers alone; otherwise it is
        // asked first and the `approve` method may answer instead.
        let approver: Arc<dyn Approver> = match hooks.approver {
            Some(first) if live.unattended => first,
            first => Arc::new(ServiceApprover {
                live: live.clone(),
                first,
            }),
        };
        match run::start_in(
            prepared,
            stores,
            choice,
            sinks,
            approver.as_ref(),
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
                *lock(&live.setup_error) = Some(e);
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
                .and_then(|t| crate::executor::parse_duration(t).ok())
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
            Some(t) => Some(crate::executor::parse_duration(t).map_err(|e| {
                RpcError::invalid_params(format!("run: invalid params: `timeout`: {e}"))
            })?),
            None => None,
        };
        // JSON values bind as they are: the plan's declared types read them
        // (`crate::executor::inputs`), not a string made here.
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
                inputs = crate::executor::inputs::inputs_from_text(&meta.inputs);
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
        // A package (`oci://REF`) is pulled and checked when it is read.
        let package = path.to_str().is_some_and(|p| p.starts_with("oci://"));
        if !package && !path.exists() {
            return Err(RpcError::new(
                code::NOT_FOUND,
                format!("{}: no such workflow file or folder", path.display()),
            ));
        }
        // Preparing a run parses the workflow inline: a huge file is refused
        // before it is read.
        if !package {
            self.options.reader.check_source(&path)?;
        }
        let loaded = match self.find_config(p.config.as_deref(), &path)? {
            Some(c) => c,
            None => {
                run::default_config().map_err(|e| RpcError::new(code::RUN_REJECTED, e.message))?
            }
        };
        let read = self.read_options("run", p.lenient, p.profile, &p.extensions)?;
        let req = RunRequest {
            path,
            source: None,
            allow: Vec::new(),
            inputs,
            config: None,
            policy: self.options.policy.clone(),
            // The server's --workspace wins; else the workflow's config says, else
            // the server's folder.
            workspace: Some(
                match (self.options.workspace_chosen, &loaded.agent.workspace) {
                    (false, Some(ws)) => ws.clone(),
                    _ => self.options.root.clone(),
                },
            ),
            provider: p.provider.clone().or_else(|| self.options.provider.clone()),
            model: p.model.clone().or_else(|| self.options.model.clone()),
            base_url: self.options.base_url.clone(),
            cassette: None,
            script: self.options.script.clone(),
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
                    self.options.root.display()
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
        // Not running here: the store may hear another process's appends
        // (PostgreSQL). Watched before the first read, so none is missed.
        let mut watch = match rx {
            None if !wait.is_zero() => store.watch(&p.session_id),
            _ => None,
        };
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
            // One more than the page, to tell whether the page is all.
            let mut events = store
                .events_page(&p.session_id, p.after_seq, limit + 1)
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
            match (&mut rx, &mut watch) {
                (Some(rx), _) => {
                    let _ = tokio::time::timeout(deadline - now, rx.changed()).await;
                }
                // Running in another process: woken by the store, and read
                // again now and then in case a wake-up was lost.
                (None, Some(watch)) => {
                    let _ =
                        tokio::time::timeout((deadline - now).min(WATCH_REREAD), watch.changed())
                            .await;
                }
                // Running in another process, a store that cannot tell: poll.
                (None, None) => {
                    tokio::time::sleep((deadline - now).min(Duration::from_millis(100))).await
                }
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
        if !meta.status.is_terminal()
            && let Some(remote) = &self.options.remote
            && let Some(answer) = remote.forward(&p.session_id, Forward::Cancel).await
        {
            // Its holder took the request: wait a little for the end to be stored.
            answer?;
            return Ok(RunStatus {
                status: self.settled_status(&store, &p.session_id).await,
                session_id: p.session_id,
            });
        }
        if !meta.status.is_terminal()
            && let Some(holder) = self
                .ask_holder(&store, &p.session_id, session::RunAction::Cancel)
                .await
        {
            // Another server on the store runs it in process.
            let status = self.settled_status(&store, &p.session_id).await;
            if !status.is_terminal() {
                return Err(holder::not_taken(&p.session_id, &holder, "cancel"));
            }
            return Ok(RunStatus {
                session_id: p.session_id,
                status,
            });
        }
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

    /// The status of session `id` once a cancel handed to its holder is
    /// stored: read until it is terminal, at most [`SETTLE_WAIT`].
    async fn settled_status(&self, store: &Arc<dyn SessionStore>, id: &str) -> SessionStatus {
        let deadline = Instant::now() + SETTLE_WAIT;
        loop {
            let (store, sid) = (store.clone(), id.to_owned());
            let status = tokio::task::spawn_blocking(move || store.get(&sid))
                .await
                .ok()
                .and_then(Result::ok)
                .map_or(SessionStatus::Running, |m| m.status);
            if status.is_terminal() || Instant::now() >= deadline {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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
        self.settle(&p.session_id).await;
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
        self.settle(&p.session_id).await;
        if let Some(remote) = &self.options.remote
            && let Some(live) = self.live(&p.session_id)
        {
            // The run waits on the worker that holds it.
            if live.status() != SessionStatus::WaitingApproval {
                return Err(not_waiting(&p.session_id, live.status()));
            }
            if let Some(answer) = remote
                .forward(&p.session_id, Forward::Approve(p.clone()))
                .await
            {
                return answer;
            }
            // No worker holds it: its worker released it at the approval
            // hold (or stopped), and the relay ends with the run. The
            // decision is then recorded and the run queued again, below.
            if tokio::time::timeout(SETTLE_WAIT, live.finished())
                .await
                .is_err()
            {
                return Err(RpcError::new(
                    code::SESSION_STATE,
                    format!(
                        "no worker holds session `{}` now; if its worker stopped, another resumes the run and asks again: approve it then",
                        p.session_id
                    ),
                ));
            }
        } else if let Some(answer) = self.approve_live(&p).await {
            return answer;
        }
        let store = self.default_store()?;
        let meta = self.meta(&store, &p.session_id)?;
        if matches!(
            meta.status,
            SessionStatus::Running | SessionStatus::WaitingApproval
        ) && let Some(remote) = &self.options.remote
        {
            let asked = store.pending_approval(&p.session_id).ok().flatten();
            if let Some(answer) = remote
                .forward(&p.session_id, Forward::Approve(p.clone()))
                .await
            {
                // A worker holds the run and took the decision: answer once it
                // is stored, so that nobody reading the store after this
                // answer is asked the same question again.
                let answer = answer?;
                self.settled_approval(&store, &p.session_id, asked).await;
                return Ok(answer);
            }
        }
        if meta.status == SessionStatus::WaitingApproval {
            // Another server on the store holds the run, waiting in process.
            let asked = store.pending_approval(&p.session_id).ok().flatten();
            let action = session::RunAction::Approve {
                approve: p.approve,
                note: p.note.clone(),
            };
            if let Some(holder) = self.ask_holder(&store, &p.session_id, action).await {
                if self.settled_approval(&store, &p.session_id, asked).await {
                    return Ok(RunStatus {
                        session_id: p.session_id,
                        status: SessionStatus::Running,
                    });
                }
                return Err(holder::not_taken(&p.session_id, &holder, "decision"));
            }
        }
        if meta.status == SessionStatus::Running {
            return Err(RpcError::new(
                code::SESSION_STATE,
                format!(
                    "session `{}` is running in another process; approve it there or with `agentfile sessions approve`",
                    p.session_id
                ),
            ));
        }
        record_approval_in(&store, &meta, &p)?;
        deliver_recorded(&store, &p.session_id, meta.last_seq, &hooks);
        self.resume_here(p.session_id, hooks).await
    }

    /// Deliver a decision to the run this process holds in process: `None`
    /// when it holds none for session `id` (a worker's control request, or a
    /// holder's, then finds the run gone, and its sender goes on from the
    /// store instead of this process resuming a run it no longer holds).
    pub async fn approve_live(&self, p: &ApproveParams) -> Option<Result<RunStatus, RpcError>> {
        // A run that is ending is waited for: it holds no approval then.
        self.settle(&p.session_id).await;
        let live = self.live(&p.session_id)?;
        let decision = if p.approve {
            Approval::Approved(p.note.clone())
        } else {
            Approval::Rejected(p.note.clone())
        };
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
                return Some(Err(not_waiting(&p.session_id, live.status())));
            }
        }
        Some(Ok(RunStatus {
            session_id: p.session_id.clone(),
            status: SessionStatus::Running,
        }))
    }

    // ---- validate, inspect, list, sessions ----

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
/// Record decision `p` for a stored session that waits at an approval, and
/// leave it there (`agentfile sessions approve`, in a process that holds no
/// run; [`RunService::approve`] records and resumes). Refused, with the
/// reason, while a live process waits at that approval: a decision recorded
/// beside a waiting run would run the session twice. Returns the goal the
/// approval was for (empty for a step's approval).
pub fn record_approval(
    store: &Arc<dyn SessionStore>,
    p: &ApproveParams,
) -> Result<String, RpcError> {
    let meta = store.get(&p.session_id).map_err(|e| match e {
        StoreError::NotFound(_) | StoreError::InvalidId(_) => RpcError::new(
            code::UNKNOWN_SESSION,
            format!(
                "no session `{}`; `agentfile sessions list` shows them",
                p.session_id
            ),
        ),
        other => RpcError::new(code::STORE, other.to_string()),
    })?;
    record_approval_in(store, &meta, p)
}

fn record_approval_in(
    store: &Arc<dyn SessionStore>,
    meta: &SessionMeta,
    p: &ApproveParams,
) -> Result<String, RpcError> {
    if let Some(holder) = waiting_elsewhere(store, meta)? {
        return Err(RpcError::new(
            code::SESSION_STATE,
            format!(
                "session `{}` waits for its approval in process {} on {}; approve it there \
                 (a decision recorded here would run it twice)",
                p.session_id, holder.pid, holder.host
            ),
        ));
    }
    run::record_decision(store, &p.session_id, p.approve, p.note.clone())
        .map_err(|e| RpcError::new(code::SESSION_STATE, e.message))
}

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
        .find(|(k, v)| !scalar(v) && crate::executor::inputs::reads_as_text(plan, k))
    {
        Some((k, v)) => Err(RpcError::invalid_params(format!(
            "run: invalid params: `inputs.{k}`: expected a string, number or boolean, not {}",
            agentfile_wire::rpc::json_kind(v)
        ))),
        None => Ok(()),
    }
}

/// A panic's message, for the report of a run that panicked.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// An empty cassette for a replay's stand-in provider (never asked).
fn empty_cassette() -> Result<PathBuf, RpcError> {
    let path = std::env::temp_dir().join("agentfile-replay-empty.cassette.jsonl");
    if !path.is_file() {
        std::fs::write(&path, "").map_err(|e| {
            RpcError::new(
                code::RUN_REJECTED,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
    }
    Ok(path)
}

/// The refusal of a decision for session `id`, which waits at no approval.
fn not_waiting(id: &str, status: SessionStatus) -> RpcError {
    RpcError::new(
        code::SESSION_STATE,
        format!(
            "session `{id}` is not waiting for an approval (it is {})",
            status.as_str()
        ),
    )
}
