//! The servers' door to the run service: what `serve`, `mcp`, the web view,
//! the daemon and workers share on top of [`agentfile_engine::service`].
//! Runs go to the [`RunService`] as they come (their wire is already
//! [`RunParams`]); what stays here is what only a server does: judging the
//! paths a client names ([`Gateway::request_path`]), the analyses (`validate`,
//! `inspect`, `list`, `sessions`) within the connection's bounds, and the
//! cluster a `--nats` server queues runs on ([`remote`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::limits::{self, Limits};
use agentfile_config::Config;
use agentfile_engine::service::{self, LoadError, Reader, RunRequest, RunService, ServiceOptions};
use agentfile_frontend as frontend;
use agentfile_frontend::{discover, inspect};
use agentfile_llm::{HttpOptions, Provider};
use agentfile_session::{SessionStore, StoreError};
use agentfile_wire::diagnostics::ValidateReport;
use agentfile_wire::events::RunResult;
use agentfile_wire::rpc::{
    ApproveParams, CancelParams, EventPage, EventParams, InspectFormat, InspectParams, InspectText,
    ListParams, RpcError, RunParams, RunStatus, SessionList, SessionsParams, SignalParams,
    ValidateParams, code,
};
use agentfile_wire::workflows::WorkflowList;

pub use agentfile_engine::service::{
    DEFAULT_EVENT_LIMIT, DEFAULT_MAX_RUNS, LiveRun, MAX_WAIT_MS, failed_result, result_of,
};

mod remote;
mod resume;

/// Server-wide settings, from the `serve` / `mcp` command line.
#[derive(Clone, Default)]
pub struct GatewayOptions {
    /// `--config`: used for every request that names none.
    pub config: Option<PathBuf>,
    /// `--workspace`: where tools work, relative request paths start, and
    /// sessions are stored (default: the current folder).
    pub workspace: Option<PathBuf>,
    /// `--policy`, else `policy.toml` beside each workflow.
    pub policy: Option<PathBuf>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// `--base-url`: the provider's endpoint for every run.
    pub base_url: Option<String>,
    /// `--script`: what `--provider fake` answers, for every run.
    pub script: Option<PathBuf>,
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

/// What a transport attaches to one run.
#[derive(Clone, Default)]
pub struct RunHooks {
    /// Receive every event after it is stored (JSON-RPC notifications, MCP progress).
    pub sinks: Vec<Arc<dyn agentfile_session::events::EventSink>>,
    /// Asked first at a supervised goal (MCP elicitation); when it answers
    /// `Unavailable` the run waits for the `approve` method instead.
    pub approver: Option<Arc<dyn agentfile_engine::executor::Approver>>,
    /// The principal a new session belongs to ([`crate::access`]): recorded
    /// with the session before the run starts, and never changed after. The
    /// door that knows who asks sets it (an MCP task; a run over HTTP with a
    /// bearer token); it is not a wire parameter, so no caller names another
    /// owner. A resume leaves the session's owner as it is.
    pub owner: Option<crate::access::Principal>,
}

impl RunHooks {
    /// The service's hooks: the owner as the store records it.
    fn into_service(self) -> service::RunHooks {
        service::RunHooks {
            sinks: self.sinks,
            approver: self.approver,
            owner: self.owner.map(|o| o.as_str().to_owned()),
        }
    }
}

/// The servers' gateway: the run service, and what a server adds to it.
pub struct Gateway {
    options: GatewayOptions,
    /// Canonical workspace: relative request paths start here.
    root: PathBuf,
    runs: Arc<RunService>,
    /// Bytes of workflow source being analysed (validate, inspect, list), so
    /// that concurrent analyses cannot take more memory than a few big files.
    analysis: Arc<Semaphore>,
}

/// How the service reads a server's workflows: the front ends' registry,
/// within `--max-source-bytes`.
struct Workflows {
    max_source: usize,
}

impl Reader for Workflows {
    fn load(&self, req: &RunRequest, config: &Config) -> Result<agentfile_plan::Plan, LoadError> {
        let options = frontend::Options {
            packages: None,
            config: Some(config),
            dialect: None,
            read: req.read.clone(),
        };
        frontend::Analysis::load_for_run(&req.path, req.source.as_deref(), options)
            .map_err(Into::into)
    }

    fn check_source(&self, path: &Path) -> Result<(), RpcError> {
        source_size(path, self.max_source).map(|_| ())
    }

    fn extension_names(&self) -> Vec<&'static str> {
        frontend::extension_names()
    }
}

/// The size of the workflow source at `path` (a folder: the workflow file
/// in it), refused past `--max-source-bytes`. Unreadable files weigh 0:
/// the analysis reports them.
fn source_size(path: &Path, max: usize) -> Result<u64, RpcError> {
    let file = if path.is_dir() {
        frontend::registry::file_in(path)
    } else {
        Some(path.to_owned())
    };
    let size = file
        .and_then(|f| std::fs::metadata(f).ok())
        .map_or(0, |m| m.len());
    if size > max as u64 {
        return Err(limits::source_too_large(
            &path.display().to_string(),
            size,
            max,
        ));
    }
    Ok(size)
}

impl Gateway {
    pub fn new(options: GatewayOptions) -> Result<Arc<Gateway>, RpcError> {
        let ws = options
            .workspace
            .clone()
            .unwrap_or_else(|| PathBuf::from("."));
        let root = ws.canonicalize().map_err(|e| {
            RpcError::new(code::NOT_FOUND, format!("workspace {}: {e}", ws.display()))
        })?;
        let budget = options
            .limits
            .analysis_budget()
            .min(Semaphore::MAX_PERMITS)
            .min(u32::MAX as usize);
        let absolute = |p: &PathBuf| {
            if p.is_absolute() {
                p.clone()
            } else {
                root.join(p)
            }
        };
        let runs = RunService::new(ServiceOptions {
            root: root.clone(),
            workspace_chosen: options.workspace.is_some(),
            config: options.config.as_ref().map(absolute),
            policy: options.policy.as_ref().map(absolute),
            provider: options.provider.clone(),
            model: options.model.clone(),
            base_url: options.base_url.clone(),
            // As given on the command line: from the folder it was started in.
            script: options
                .script
                .as_ref()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
            max_runs: options.max_runs,
            http: options.http,
            sampling: options.sampling.clone(),
            key_hint: options.key_hint.clone(),
            reader: Arc::new(Workflows {
                max_source: options.limits.max_source(),
            }),
            remote: options
                .cluster
                .clone()
                .map(|c| Arc::new(remote::Cluster(c)) as Arc<dyn service::Remote>),
        });
        Ok(Arc::new(Gateway {
            options,
            root,
            runs,
            analysis: Arc::new(Semaphore::new(budget)),
        }))
    }

    /// The run service every run of this server goes through.
    pub fn runs(&self) -> &Arc<RunService> {
        &self.runs
    }

    /// Mark sessions left `queued` or `running` by a process that is gone
    /// (killed, crashed) as `interrupted`: see [`RunService::reap_orphans`].
    pub fn reap_orphans(&self) -> Vec<String> {
        self.runs.reap_orphans()
    }

    pub(crate) fn default_config(&self) -> Result<Config, RpcError> {
        self.runs.default_config()
    }

    /// The folder relative paths start from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn options(&self) -> &GatewayOptions {
        &self.options
    }

    /// Runs accepted and not finished.
    pub fn live_count(&self) -> usize {
        self.runs.live_count()
    }

    fn path(&self, p: &str) -> PathBuf {
        // A package (`oci://REF`) is not a file of the workspace.
        if frontend::package::is_package(Path::new(p)) {
            return PathBuf::from(p);
        }
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
        // A package is read from its registry and checked against its
        // digests (and, under `[packages] require_signature`, its
        // signature), never from the workspace.
        if frontend::package::is_package(Path::new(raw)) {
            return Ok(self.path(raw));
        }
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
    /// [`Gateway::request_path`]. Runs a worker takes from the cluster were
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
        self.runs.find_config(explicit, workflow)
    }

    /// The session store of the server's config and workspace.
    pub fn store(&self) -> Result<Arc<dyn SessionStore>, RpcError> {
        self.runs.store()
    }

    /// Whether this process runs the session now.
    pub fn is_live_here(&self, id: &str) -> bool {
        self.runs.is_live_here(id)
    }

    /// The result a run of the session returned (or would have), from its
    /// stored terminal event; `None` while it has none.
    pub fn stored_result(&self, id: &str) -> Result<Option<RunResult>, RpcError> {
        self.runs.stored_result(id)
    }

    // ---- runs: the service's ----

    /// Accept a run: see [`RunService::submit`].
    pub async fn submit(
        self: &Arc<Self>,
        params: RunParams,
        hooks: RunHooks,
    ) -> Result<Arc<LiveRun>, RpcError> {
        self.runs.submit(params, hooks.into_service()).await
    }

    /// [`Gateway::submit`] for a run a trigger started (the daemon's fires).
    pub async fn submit_with_trigger(
        self: &Arc<Self>,
        params: RunParams,
        hooks: RunHooks,
        trigger: Option<agentfile_wire::events::RunTrigger>,
    ) -> Result<Arc<LiveRun>, RpcError> {
        self.runs
            .submit_with_trigger(params, hooks.into_service(), trigger)
            .await
    }

    /// A session's events after `after_seq`: see [`RunService::events`].
    pub async fn events(&self, p: EventParams) -> Result<EventPage, RpcError> {
        self.runs.events(p).await
    }

    pub async fn cancel(&self, p: CancelParams) -> Result<RunStatus, RpcError> {
        self.runs.cancel(p).await
    }

    /// Resume a stored session here: see [`RunService::resume`].
    pub async fn resume(
        self: &Arc<Self>,
        session_id: String,
        hooks: RunHooks,
    ) -> Result<RunStatus, RpcError> {
        self.runs.resume(session_id, hooks.into_service()).await
    }

    /// A new session from a stored one's journal, run live from one node:
    /// see [`RunService::fork`].
    pub async fn fork(
        self: &Arc<Self>,
        p: agentfile_wire::rpc::ForkParams,
        hooks: RunHooks,
    ) -> Result<Arc<LiveRun>, RpcError> {
        if let Some(w) = &p.workflow {
            self.request_path(w)?;
        }
        self.runs.fork(p, hooks.into_service()).await
    }

    /// A stored session run again from its own journal: see
    /// [`RunService::replay`].
    pub async fn replay(
        self: &Arc<Self>,
        p: agentfile_wire::rpc::ReplayParams,
        hooks: RunHooks,
    ) -> Result<Arc<LiveRun>, RpcError> {
        if let Some(w) = &p.workflow {
            self.request_path(w)?;
        }
        self.runs.replay(p, hooks.into_service()).await
    }

    /// Deliver a signal to a suspended session and resume it here.
    pub async fn signal(
        self: &Arc<Self>,
        p: SignalParams,
        hooks: RunHooks,
    ) -> Result<RunStatus, RpcError> {
        self.runs.signal(p, hooks.into_service()).await
    }

    /// End the wait of a run at an approval without a decision: see
    /// [`RunService::release_approval`].
    pub fn release_approval(&self, session_id: &str, reason: String) -> bool {
        self.runs.release_approval(session_id, reason)
    }

    /// Whether the approval a live run waits on has its decision already.
    pub fn approval_answered(&self, id: &str) -> bool {
        self.runs.approval_answered(id)
    }

    pub async fn approve(
        self: &Arc<Self>,
        p: ApproveParams,
        hooks: RunHooks,
    ) -> Result<RunStatus, RpcError> {
        self.runs.approve(p, hooks.into_service()).await
    }

    /// Deliver a decision to the run this process holds: `None` when it holds
    /// none for the session. See [`RunService::approve_live`].
    pub async fn approve_live(&self, p: &ApproveParams) -> Option<Result<RunStatus, RpcError>> {
        self.runs.approve_live(p).await
    }

    /// Accept no new runs and wait for every accepted one to finish: see
    /// [`RunService::drain`].
    pub async fn drain(&self) {
        self.runs.drain().await
    }

    /// Accept no new runs, stop the ones in flight and leave their sessions
    /// `interrupted`: see [`RunService::interrupt`].
    pub async fn interrupt(&self, grace: Duration) {
        self.runs.interrupt(grace).await
    }

    // ---- validate, inspect, list, sessions ----

    /// The size of the workflow source at `path` (a folder: the workflow file
    /// in it), refused past `--max-source-bytes`. Unreadable files weigh 0:
    /// the analysis reports them.
    fn source_size(&self, path: &Path) -> Result<u64, RpcError> {
        source_size(path, self.options.limits.max_source())
    }

    /// Run `work` on the blocking pool once `weight` bytes of the analysis
    /// budget are free, so that analyses in flight stay within it; a panic
    /// in it is an internal error, not a lost reply.
    async fn analyse<T: Send + 'static>(
        self: &Arc<Self>,
        weight: u64,
        work: impl FnOnce(&Gateway) -> Result<T, RpcError> + Send + 'static,
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
        let gateway = self.clone();
        let out = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work(&gateway)
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

    /// [`Gateway::validate`] within the source-size and analysis bounds, off the
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

    /// [`Gateway::inspect`] within the same bounds as validation.
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

    /// [`Gateway::list`] analyses every workflow under a folder: it takes the
    /// whole analysis budget, one listing at a time and nothing beside it.
    pub async fn list_bounded(self: &Arc<Self>, p: ListParams) -> Result<WorkflowList, RpcError> {
        let all = self.analysis_budget() as u64;
        self.analyse(all, move |e| e.list(p)).await
    }

    /// [`Gateway::sessions`] off the async threads.
    pub async fn sessions_bounded(
        self: &Arc<Self>,
        p: SessionsParams,
    ) -> Result<SessionList, RpcError> {
        let gateway = self.clone();
        match tokio::task::spawn_blocking(move || gateway.sessions(p)).await {
            Ok(r) => r,
            Err(e) => Err(RpcError::internal(format!(
                "internal error: the request handler failed ({e}); please report it"
            ))),
        }
    }

    pub fn validate(&self, p: ValidateParams) -> Result<ValidateReport, RpcError> {
        let read = self
            .runs
            .read_options("validate", p.lenient, p.profile, &p.extensions)?;
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
                    packages: None,
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
                        packages: None,
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
        let read = self
            .runs
            .read_options("inspect", p.lenient, p.profile, &p.extensions)?;
        let path = self.request_path(&p.path)?;
        if let Some(c) = &p.config {
            self.request_path(c)?;
        }
        let config = self.find_config(p.config.as_deref(), &path)?;
        let a = frontend::analyze(
            &path,
            frontend::Options {
                packages: None,
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
        let store = self.runs.store()?;
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
}

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
