//! `agentfile daemon`: workflows that start themselves (CONTRACT §15).
//!
//! - [`registry`]: every non-manual trigger under the workspace folders,
//!   rescanned on an interval; an invalid file keeps its last good
//!   registration; a trigger the daemon cannot serve is `refused`.
//! - [`Daemon::fire`]: the one fire path every kind goes through (schedule,
//!   webhook, event, manual). It claims the fire record in the session store
//!   *before* anything runs — only the process whose claim inserted it goes
//!   on, so two daemons on one store fire each instant, delivery and event
//!   once — then decides with [`FirePolicy::decide`] (quota over the
//!   trigger's local day, overlap with its runs still going), records the
//!   outcome and starts the run through the same [`Gateway`] as `serve`.
//! - Schedules: one task per schedule trigger sleeps until its next instant;
//!   on start it fires what [`catch_up`] says was missed since the last
//!   recorded fire. The key of a scheduled fire is the instant, written as
//!   jiff writes a UTC [`Timestamp`].
//! - [`Deliveries`]: what the webhook listener asks of the daemon.
//!
//! The pure decisions live in `agentfile_triggers`; the records in
//! `agentfile_session::fires`; nothing here decides when a cron matches.

mod error;
pub mod nats;
pub mod registry;
pub mod service;
pub mod webhook;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::gateway::{Gateway, GatewayOptions, LiveRun, RunHooks};
use agentfile_plan::trigger::TriggerKind;
use agentfile_session::{FireKind, FireOutcome, FireRecord, SessionStatus, SessionStore};
use agentfile_triggers::{Decision, Overlap, Running, Schedule, Timestamp, UsedToday, catch_up};
use agentfile_wire::events::RunTrigger;
use agentfile_wire::rpc::{RpcError, RunParams};

pub use error::{DaemonError, NotAnObject, Unfit};
pub use registry::{InvalidFile, Registered, Registry};
pub use webhook::{Delivered, Deliveries, Undelivered, WebhookRoute};

/// How often the workspaces are scanned again when nothing says otherwise.
pub const DEFAULT_RESCAN: Duration = Duration::from_secs(2);

/// How many of a trigger's newest fire records the overlap check reads
/// from the store (see `Daemon::running_elsewhere`).
const STORE_FIRES_LOOKED_AT: usize = 256;
/// How many of those with outcome `fired` it looks up the session of.
const STORE_RUNS_LOOKED_AT: usize = 4;
/// A `fired` record without a session this recent is a run another process
/// is starting; older, its claimer died before the run started.
const UNLINKED_FIRE_WINDOW: Duration = Duration::from_secs(30);

/// How often a queued fire looks at the store again while a run another
/// process started is going.
const QUEUE_POLL: Duration = Duration::from_millis(250);

/// The daemon's settings.
#[derive(Clone, Default)]
pub struct DaemonOptions {
    /// The folders scanned for workflows (the first is also the gateway's
    /// workspace: sessions and fire records are stored there). Empty: `.`.
    pub workspaces: Vec<PathBuf>,
    /// How runs are executed (config, policy, provider, limits, cluster).
    pub gateway: GatewayOptions,
    /// How often workflows are scanned again ([`DEFAULT_RESCAN`] when zero).
    pub rescan: Duration,
}

/// What one call of [`Daemon::fire`] did (read back by `emit --nats` from
/// a daemon's answer).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct FireResult {
    pub trigger: String,
    pub key: String,
    /// `false`: another fire (this process or another) already had the key;
    /// the other fields are that record's.
    pub claimed: bool,
    pub outcome: FireOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// One row of `triggers list`.
#[derive(Debug, Clone, Serialize)]
pub struct TriggerRow {
    pub id: String,
    pub workflow: String,
    pub kind: &'static str,
    /// `active` or `refused`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The next scheduled instant, in the trigger's zone (RFC 3339 with offset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_fire: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<Value>,
}

/// The daemon: a registry, the schedules it drives, and the fire path.
pub struct Daemon {
    gateway: Arc<Gateway>,
    store: Arc<dyn SessionStore>,
    registry: Mutex<Registry>,
    triggers: Mutex<BTreeMap<String, Registered>>,
    /// Bumped each time `triggers` is replaced: the schedule loop syncs its
    /// tasks when it moved, whoever rescanned.
    generation: AtomicU64,
    /// Runs started by each trigger in this process, not known finished.
    running: Mutex<HashMap<String, Vec<Arc<LiveRun>>>>,
    /// Fires waiting behind a running run (overlap = "queue"), per trigger.
    queued: Mutex<HashMap<String, u32>>,
    rescan: Duration,
    /// Set when the daemon stops taking fires.
    closing: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An instant as every fire record writes it (the store compares keys as text).
pub fn instant_text(t: Timestamp) -> String {
    t.to_string()
}

impl Daemon {
    /// Open the gateway and store and register what the workspaces hold.
    pub fn new(options: DaemonOptions) -> Result<Arc<Daemon>, DaemonError> {
        let mut roots = options.workspaces.clone();
        if roots.is_empty() {
            roots.push(PathBuf::from("."));
        }
        let roots: Vec<PathBuf> = roots
            .into_iter()
            .map(|r| {
                r.canonicalize()
                    .map_err(|source| DaemonError::Workspace { path: r, source })
            })
            .collect::<Result<_, _>>()?;
        let mut eopts = options.gateway.clone();
        eopts.workspace = Some(roots[0].clone());
        let gateway = Gateway::new(eopts).map_err(DaemonError::Gateway)?;
        Daemon::with_engine(gateway, roots, options.rescan)
    }

    /// A daemon over a gateway that exists already (`serve` and `mcp` answer
    /// the trigger methods with one): it registers what `workspaces` hold
    /// (the gateway's workspace when empty), keeps fire records in the
    /// gateway's session store, and starts runs in that gateway. Nothing fires
    /// on its own until [`Daemon::run`].
    pub fn with_engine(
        gateway: Arc<Gateway>,
        workspaces: Vec<PathBuf>,
        rescan: Duration,
    ) -> Result<Arc<Daemon>, DaemonError> {
        let roots = if workspaces.is_empty() {
            vec![gateway.root().to_path_buf()]
        } else {
            workspaces
        };
        let config = gateway.default_config().map_err(DaemonError::Gateway)?;
        let store = gateway.store().map_err(DaemonError::Gateway)?;
        let mut registry = Registry::try_new(roots, config)?;
        let triggers = registry.scan();
        Ok(Arc::new(Daemon {
            gateway,
            store,
            registry: Mutex::new(registry),
            triggers: Mutex::new(triggers),
            generation: AtomicU64::new(0),
            running: Mutex::new(HashMap::new()),
            queued: Mutex::new(HashMap::new()),
            rescan: if rescan.is_zero() {
                DEFAULT_RESCAN
            } else {
                rescan
            },
            closing: CancellationToken::new(),
        }))
    }

    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The triggers registered now, by id.
    pub fn triggers(&self) -> BTreeMap<String, Registered> {
        lock(&self.triggers).clone()
    }

    fn registered(&self, id: &str) -> Option<Registered> {
        lock(&self.triggers).get(id).cloned()
    }

    /// Scan the workspaces again; whether what is registered may have
    /// changed (a file was read again, appeared or went). Nothing is copied
    /// when not: an idle daemon's rescan is its `stat`s.
    pub fn rescan(&self) -> bool {
        let mut registry = lock(&self.registry);
        if !registry.refresh() {
            return false;
        }
        let found = registry.registered();
        drop(registry);
        *lock(&self.triggers) = found;
        self.generation.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// The workflow files under the workspaces that do not validate now: a
    /// trigger they declare is not registered, or (when this daemon saw the
    /// file valid before) is served as it was then.
    pub fn invalid_files(&self) -> Vec<InvalidFile> {
        lock(&self.registry).invalid_files()
    }

    /// `triggers list`: every registered trigger, its next fire and quota use.
    pub fn list(&self) -> Vec<TriggerRow> {
        let now = Timestamp::now();
        self.triggers()
            .into_values()
            .map(|r| {
                let next_fire = r.schedule.as_ref().and_then(|s| {
                    let t = s.next_after(now)?;
                    Some(local_text(s, t))
                });
                let q = r.policy.quota;
                let quota = (q.max_runs_per_day.is_some() || q.max_cost_usd_per_day.is_some())
                    .then(|| {
                        let used = self.used_today(&r, now);
                        serde_json::json!({
                            "max_runs_per_day": q.max_runs_per_day,
                            "max_cost_usd_per_day": q.max_cost_usd_per_day,
                            "runs_today": used.runs,
                            "cost_usd_today": used.cost_usd,
                        })
                    });
                TriggerRow {
                    id: r.decl.id.clone(),
                    workflow: r.workflow.clone(),
                    kind: r.decl.kind.name(),
                    state: if r.is_active() { "active" } else { "refused" },
                    reason: r.refused.clone(),
                    next_fire,
                    quota,
                }
            })
            .collect()
    }

    /// What the trigger's runs used on `at`'s local day (its zone; UTC for
    /// kinds without one).
    fn used_today(&self, r: &Registered, at: Timestamp) -> UsedToday {
        let zone = r
            .schedule
            .clone()
            .unwrap_or_else(|| Schedule::parse("0 0 * * *", "UTC").expect("a valid schedule"));
        let Some((from, to)) = zone.day_span(zone.local_day(at)) else {
            return UsedToday::default();
        };
        let sys = |t: Timestamp| {
            std::time::UNIX_EPOCH + Duration::from_millis(t.as_millisecond().max(0) as u64)
        };
        match self.store.fired_between(&r.decl.id, sys(from), sys(to)) {
            Ok((runs, cost_usd)) => UsedToday {
                runs: u32::try_from(runs).unwrap_or(u32::MAX),
                cost_usd,
            },
            Err(e) => {
                tracing::warn!(trigger = %r.decl.id, error = %e, "cannot read today's fires; quota counted as unused");
                UsedToday::default()
            }
        }
    }

    /// How busy `trigger` is for the fire with `key`: this process's runs
    /// of it not finished, plus those the store shows another process
    /// running ([`Daemon::running_elsewhere`]) unless its overlap is
    /// `allow`, which never asks.
    fn running_now(&self, trigger: &str, key: &str, overlap: Overlap) -> Running {
        let local: Vec<String> = {
            let mut running = lock(&self.running);
            let list = running.entry(trigger.to_owned()).or_default();
            list.retain(|l| {
                !matches!(
                    l.status(),
                    SessionStatus::Completed
                        | SessionStatus::Failed
                        | SessionStatus::Cancelled
                        | SessionStatus::Interrupted
                )
            });
            list.iter().map(|l| l.session_id().to_owned()).collect()
        };
        let elsewhere = if overlap == Overlap::Allow {
            0
        } else {
            self.running_elsewhere(trigger, key, &local)
        };
        Running {
            running: u32::try_from(local.len() + elsewhere).unwrap_or(u32::MAX),
            queued: lock(&self.queued).get(trigger).copied().unwrap_or(0),
        }
    }

    /// Runs of `trigger` the store shows going that are not among `local`
    /// (this process's): another daemon on the same store started them.
    /// Among the trigger's newest [`STORE_FIRES_LOOKED_AT`] fire records,
    /// the newest [`STORE_RUNS_LOOKED_AT`] with outcome `fired` are looked
    /// at — while overlap is `skip` or `queue` a run still going is the
    /// newest fired one, since none starts beside it. Such a record counts
    /// when its session is queued, running, waiting for approval or
    /// suspended (not `interrupted`: no process runs it, and a crashed
    /// daemon must not hold its triggers forever), or when it has no
    /// session yet, was claimed in the last [`UNLINKED_FIRE_WINDOW`] and
    /// before the fire deciding now (`key`): another process is starting
    /// it, and of two fires deciding at once only the later one yields.
    fn running_elsewhere(&self, trigger: &str, key: &str, local: &[String]) -> usize {
        let fires = match self.store.fires(Some(trigger), STORE_FIRES_LOOKED_AT) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(trigger, error = %e, "cannot read the trigger's fires; only this process's runs are counted for overlap");
                return 0;
            }
        };
        // This fire's own record, just claimed, is among the newest.
        let mine_at = fires
            .iter()
            .find(|f| f.key == key)
            .map(|f| f.fired_at.clone())
            .unwrap_or_else(|| instant_text(Timestamp::now()));
        self.count_elsewhere(&fires, key, &mine_at, local)
    }

    fn count_elsewhere(
        &self,
        fires: &[FireRecord],
        key: &str,
        mine_at: &str,
        local: &[String],
    ) -> usize {
        let mine_ms = agentfile_session::fires::instant_ms(mine_at).unwrap_or(i64::MAX);
        let window = UNLINKED_FIRE_WINDOW.as_millis() as i64;
        fires
            .iter()
            .filter(|f| f.outcome == FireOutcome::Fired && f.key != key)
            .take(STORE_RUNS_LOOKED_AT)
            .filter(|f| match &f.session_id {
                Some(id) if local.contains(id) => false,
                Some(id) => self.store.get(id).is_ok_and(|m| {
                    matches!(
                        m.status,
                        SessionStatus::Queued
                            | SessionStatus::Running
                            | SessionStatus::WaitingApproval
                            | SessionStatus::Suspended
                    )
                }),
                None => agentfile_session::fires::instant_ms(&f.fired_at).is_some_and(|at| {
                    at > mine_ms.saturating_sub(window) && (at, f.key.as_str()) < (mine_ms, key)
                }),
            })
            .count()
    }

    /// Fire `trigger` once for `key` (a schedule's instant, a delivery id,
    /// an event id, a manual fire's fresh id): claim the record, decide, and
    /// start the run with `inputs`. A fire whose key is taken does nothing
    /// and reports the record that took it (`claimed: false`).
    pub async fn fire(
        self: &Arc<Self>,
        trigger: &str,
        kind: FireKind,
        key: String,
        scheduled_for: Option<Timestamp>,
        inputs: BTreeMap<String, Value>,
    ) -> Result<FireResult, DaemonError> {
        let Some(reg) = self.registered(trigger) else {
            return Err(DaemonError::UnknownTrigger(trigger.to_owned()));
        };
        if let Some(why) = &reg.refused {
            return Err(DaemonError::Refused {
                trigger: trigger.to_owned(),
                why: why.clone(),
            });
        }
        if self.closing.is_cancelled() {
            return Err(DaemonError::ShuttingDown);
        }
        let now = Timestamp::now();
        let record = FireRecord {
            trigger: trigger.to_owned(),
            kind,
            key: key.clone(),
            scheduled_for: scheduled_for.map(instant_text),
            fired_at: instant_text(now),
            outcome: FireOutcome::Fired,
            reason: None,
            session_id: None,
            cost_usd: None,
        };
        let claimed = self
            .store
            .claim_fire(&record)
            .map_err(DaemonError::Record)?;
        if !claimed {
            let prior = self.store.fire(trigger, &key).ok().flatten();
            return Ok(FireResult {
                trigger: trigger.to_owned(),
                key,
                claimed: false,
                outcome: prior.as_ref().map_or(FireOutcome::Fired, |p| p.outcome),
                reason: prior.as_ref().and_then(|p| p.reason.clone()),
                session_id: prior.and_then(|p| p.session_id),
            });
        }
        let mut used = self.used_today(&reg, now);
        // The record just claimed counts as fired already.
        used.runs = used.runs.saturating_sub(1);
        let mut decision = reg
            .policy
            .decide(self.running_now(trigger, &key, reg.policy.overlap), used);
        if let Decision::Queue { reason } = &decision {
            tracing::info!(trigger, %reason, "fire queued");
            *lock(&self.queued).entry(trigger.to_owned()).or_default() += 1;
            let waiting: Vec<Arc<LiveRun>> = lock(&self.running)
                .get(trigger)
                .cloned()
                .unwrap_or_default();
            for l in waiting {
                tokio::select! {
                    _ = l.finished() => {}
                    _ = self.closing.cancelled() => {}
                }
            }
            // A run another daemon started is not ours to await: look again
            // until the store shows it ended.
            while !self.closing.is_cancelled()
                && self.running_now(trigger, &key, reg.policy.overlap).running > 0
            {
                tokio::select! {
                    _ = tokio::time::sleep(QUEUE_POLL) => {}
                    _ = self.closing.cancelled() => {}
                }
            }
            if let Some(q) = lock(&self.queued).get_mut(trigger) {
                *q = q.saturating_sub(1);
            }
            let mut used = self.used_today(&reg, Timestamp::now());
            used.runs = used.runs.saturating_sub(1);
            decision = reg
                .policy
                .decide(self.running_now(trigger, &key, reg.policy.overlap), used);
            if self.closing.is_cancelled() {
                decision = Decision::Skip {
                    reason: "the daemon stopped while this fire was queued".into(),
                };
            }
        }
        let (outcome, reason) = match decision {
            Decision::Fire => (FireOutcome::Fired, None),
            Decision::Skip { reason } | Decision::Queue { reason } => {
                (FireOutcome::Skipped, Some(reason))
            }
            Decision::Refuse { reason } => (FireOutcome::Refused, Some(reason)),
        };
        let result = |outcome, reason: Option<String>, session_id| FireResult {
            trigger: trigger.to_owned(),
            key: key.clone(),
            claimed: true,
            outcome,
            reason,
            session_id,
        };
        if outcome != FireOutcome::Fired {
            self.finish(trigger, &key, outcome, reason.as_deref());
            tracing::info!(trigger, key = %key, outcome = outcome.as_str(), reason = reason.as_deref().unwrap_or(""), "fire not run");
            return Ok(result(outcome, reason, None));
        }
        let params = RunParams {
            path: reg.path.display().to_string(),
            inputs,
            ..Default::default()
        };
        let started_by = run_trigger(trigger, kind, &key, now, scheduled_for);
        match self
            .gateway
            .submit_with_trigger(params, RunHooks::default(), Some(started_by))
            .await
        {
            Ok(live) => {
                let id = live.session_id().to_owned();
                if let Err(e) = self.store.set_fire_session(trigger, &key, &id) {
                    tracing::warn!(trigger, key = %key, error = %e, "cannot link the fire to its session");
                }
                lock(&self.running)
                    .entry(trigger.to_owned())
                    .or_default()
                    .push(live.clone());
                let store = self.store.clone();
                let (t, k) = (trigger.to_owned(), key.clone());
                tokio::spawn(async move {
                    let r = live.finished().await;
                    if let Some(c) = r.usage.cost_usd.filter(|c| *c > 0.0) {
                        let _ = store.set_fire_cost(&t, &k, c);
                    }
                });
                tracing::info!(trigger, key = %key, session = %id, "fired");
                Ok(result(FireOutcome::Fired, None, Some(id)))
            }
            Err(e) => {
                let why = format!("the run could not start: {}", e.message);
                self.finish(trigger, &key, FireOutcome::Refused, Some(&why));
                self.link_refused(trigger, &key, &e);
                tracing::warn!(trigger, key = %key, reason = %why, "fire refused");
                Ok(result(FireOutcome::Refused, Some(why), None))
            }
        }
    }

    /// A session made before the run was refused (the daemon began to stop
    /// meanwhile: it is left interrupted, to resume) stays linked to the
    /// fire that made it.
    fn link_refused(&self, trigger: &str, key: &str, e: &RpcError) {
        if let Some(id) = e
            .data
            .as_ref()
            .and_then(|d| d.get("session_id"))
            .and_then(|v| v.as_str())
            && let Err(e) = self.store.set_fire_session(trigger, key, id)
        {
            tracing::warn!(trigger, key = %key, error = %e, "cannot link the fire to its session");
        }
    }

    /// Do `inputs` fit `trigger`'s workflow (its declared inputs, required
    /// ones, its input schema)? Checked before a webhook delivery or an
    /// event is recorded, so a body that does not fit leaves no fire record
    /// and a corrected redelivery with the same id still runs.
    pub fn check_inputs(
        &self,
        trigger: &str,
        inputs: &BTreeMap<String, Value>,
    ) -> Result<(), DaemonError> {
        let Some(reg) = self.registered(trigger) else {
            return Err(DaemonError::UnknownTrigger(trigger.to_owned()));
        };
        let secrets = self
            .gateway
            .default_config()
            .map(|c| agentfile_tools::secrets::Secrets::from_config(&c))
            .unwrap_or_default();
        let unfit = |why: Unfit| DaemonError::Unfit {
            workflow: reg.workflow.clone(),
            path: reg.path.clone(),
            why,
        };
        if let Some((k, v)) = inputs.iter().find(|(k, v)| {
            !(v.is_string() || v.is_number() || v.is_boolean())
                && agentfile_engine::executor::inputs::reads_as_text(&reg.plan, k)
        }) {
            return Err(unfit(Unfit::NotText {
                key: k.clone(),
                kind: agentfile_wire::rpc::json_kind(v),
            }));
        }
        agentfile_engine::executor::bind_inputs_with(&reg.plan, inputs, &secrets)
            .map(|_| ())
            .map_err(|e| unfit(Unfit::Bind(e)))
    }

    fn finish(&self, trigger: &str, key: &str, outcome: FireOutcome, reason: Option<&str>) {
        if let Err(e) = self.store.finish_fire(trigger, key, outcome, reason) {
            tracing::warn!(trigger, key, error = %e, "cannot record the fire's outcome");
        }
    }

    /// `agentfile emit`: fire every active `kind: event` trigger named
    /// `name` once for event `id`, with `payload` (an object) as inputs.
    /// Empty when no trigger subscribes to `name`.
    pub async fn emit(
        self: &Arc<Self>,
        name: &str,
        id: &str,
        payload: Value,
    ) -> Result<Vec<Result<FireResult, DaemonError>>, DaemonError> {
        let inputs = inputs_of(payload)?;
        let subscribed: Vec<String> = self
            .triggers()
            .into_values()
            .filter(|r| {
                r.is_active()
                    && r.decl.kind == TriggerKind::Event
                    && r.decl.event.as_ref().is_some_and(|e| e.name == name)
            })
            .map(|r| r.decl.id)
            .collect();
        let mut out = Vec::new();
        for t in subscribed {
            // A payload that does not fit is refused before anything is
            // recorded: the same event id, corrected, can still fire.
            if let Err(e) = self.check_inputs(&t, &inputs) {
                out.push(Err(DaemonError::Trigger {
                    trigger: t,
                    source: Box::new(e),
                }));
                continue;
            }
            out.push(
                self.fire(&t, FireKind::Event, id.to_owned(), None, inputs.clone())
                    .await,
            );
        }
        Ok(out)
    }

    /// Wait for every run this daemon started to end.
    pub async fn wait_runs(&self) {
        let all: Vec<Arc<LiveRun>> = lock(&self.running).values().flatten().cloned().collect();
        for l in all {
            l.finished().await;
        }
    }

    /// Start the webhook listener where `[daemon] webhooks = "ADDR"` says
    /// (until `stop`), and answer the address it is bound to; `None` when
    /// webhooks are not enabled (webhook triggers are then refused).
    pub async fn listen_webhooks(
        self: &Arc<Self>,
        stop: CancellationToken,
    ) -> Result<Option<std::net::SocketAddr>, DaemonError> {
        let config = self
            .gateway
            .default_config()
            .map_err(DaemonError::Gateway)?;
        let Some(addr) = config
            .other
            .get("daemon")
            .and_then(|d| d.get("webhooks"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|a| !a.is_empty())
        else {
            return Ok(None);
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| DaemonError::Listen {
                addr: addr.to_owned(),
                source,
            })?;
        let bound = listener.local_addr().map_err(DaemonError::Bound)?;
        let deliveries: Arc<dyn Deliveries> = Arc::new(self.clone());
        let tokens = std::env::var(crate::auth::TOKEN_VAR)
            .map(|v| crate::auth::parse_tokens(&v))
            .unwrap_or_default();
        // The web view rides along, under §14's rule: loopback, or a token
        // (one hard enough to guess off loopback; webhooks are signed and
        // need none, so a weak token only keeps the web view off).
        let strength = crate::auth::check_token_strength(&tokens, bound, "agentfile daemon");
        if let Ok(Some(warning)) = &strength {
            eprintln!("{warning}");
        }
        let ui = if tokens.is_empty() && !bound.ip().is_loopback() {
            tracing::warn!(
                "the web view is not served on {bound}: set {} or listen on loopback",
                crate::auth::TOKEN_VAR
            );
            None
        } else if let Err(refusal) = strength {
            eprintln!("{refusal}; the web view is not served on this listener");
            None
        } else {
            let options = crate::ui::UiOptions {
                tokens: crate::auth::Tokens::new(&tokens),
                allowed_origins: config.mcp.allowed_origins.clone(),
                local: bound,
                stop: stop.child_token(),
                read_timeout: config.mcp.read_timeout(),
                rule: crate::access::Rule::of_config(&config),
            };
            crate::ui::Ui::new(self.gateway.clone(), options).ok()
        };
        // The A2A agent rides along under the same rule as the web view.
        let a2a = ui.as_ref().map(|_| {
            crate::a2a::A2a::on_listener(&self.gateway, &tokens, &config, bound, stop.child_token())
        });
        let mounts = webhook::Mounts { ui, a2a };
        tokio::spawn(webhook::serve_webhooks(
            listener,
            deliveries,
            webhook::WebhookOptions::default(),
            mounts,
            stop,
        ));
        Ok(Some(bound))
    }

    /// With a cluster (`--nats`): `kind: event` triggers also fire on the
    /// NATS subject of their event, kept in a JetStream stream for
    /// `[daemon] event_retention` (see [`nats`]), until `stop`. `false`
    /// without a cluster.
    pub async fn listen_nats_events(
        self: &Arc<Self>,
        stop: CancellationToken,
    ) -> Result<bool, DaemonError> {
        let Some(cluster) = self.gateway.options().cluster.clone() else {
            return Ok(false);
        };
        let config = self
            .gateway
            .default_config()
            .map_err(DaemonError::Gateway)?;
        let retention = nats::event_retention(&config)?;
        nats::serve_events(self.clone(), cluster, retention, stop).await?;
        Ok(true)
    }

    /// Serve until `stop`: schedules fire, the workspaces are rescanned.
    /// Then no more fires are taken and runs in flight are interrupted,
    /// resumable (as `serve` does on a signal).
    pub async fn run(self: &Arc<Self>, stop: CancellationToken) {
        let reaper = self.gateway.clone();
        let _ = tokio::task::spawn_blocking(move || reaper.reap_orphans()).await;
        let mut tasks: HashMap<String, (String, CancellationToken)> = HashMap::new();
        let mut synced = None;
        loop {
            // Read before the sync: a rescan during it is seen next time.
            let generation = self.generation.load(Ordering::Acquire);
            if synced != Some(generation) {
                self.sync_schedules(&mut tasks);
                synced = Some(generation);
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(self.rescan) => {}
            }
            let me = self.clone();
            let _ = tokio::task::spawn_blocking(move || me.rescan()).await;
        }
        self.closing.cancel();
        for (_, (_, t)) in tasks.drain() {
            t.cancel();
        }
        self.gateway.interrupt(Duration::from_secs(5)).await;
    }

    /// Start a task for each new or changed schedule, stop those gone.
    fn sync_schedules(self: &Arc<Self>, tasks: &mut HashMap<String, (String, CancellationToken)>) {
        let now: HashMap<String, String> = self
            .triggers()
            .into_values()
            .filter(|r| r.is_active() && r.schedule.is_some())
            .filter_map(|r| Some((r.decl.id.clone(), r.schedule_fingerprint()?)))
            .collect();
        tasks.retain(|id, (fp, token)| {
            let keep = now.get(id) == Some(fp);
            if !keep {
                token.cancel();
            }
            keep
        });
        for (id, fp) in now {
            if tasks.contains_key(&id) {
                continue;
            }
            let token = self.closing.child_token();
            tasks.insert(id.clone(), (fp, token.clone()));
            let me = self.clone();
            tokio::spawn(async move { me.schedule_loop(id, token).await });
        }
    }

    /// One schedule: catch up, then fire at each instant until stopped.
    async fn schedule_loop(self: Arc<Self>, id: String, stop: CancellationToken) {
        let Some(reg) = self.registered(&id) else {
            return;
        };
        let Some(schedule) = reg.schedule.clone() else {
            return;
        };
        let now = Timestamp::now();
        let last = match self.store.last_fire(&id) {
            Ok(r) => r
                .and_then(|r| r.scheduled_ms())
                .and_then(|ms| Timestamp::from_millisecond(ms).ok()),
            Err(e) => {
                tracing::warn!(trigger = %id, error = %e, "cannot read the last fire; no catch-up");
                None
            }
        };
        let plan = catch_up(&schedule, last, now, reg.catch_up);
        let dropped = plan.dropped_reason(reg.catch_up);
        if let Some(why) = &dropped {
            tracing::info!(trigger = %id, "{why}");
        }
        for at in plan.fire {
            if stop.is_cancelled() {
                return;
            }
            // A caught-up fire says so in the history: it ran late on purpose.
            let mut note = "a catch-up after downtime".to_owned();
            if let Some(why) = &dropped {
                note.push_str(&format!("; {why}"));
            }
            if let Some(r) = self.fire_scheduled(&id, at).await
                && r.claimed
                && r.outcome == FireOutcome::Fired
            {
                self.finish(&id, &r.key, FireOutcome::Fired, Some(&note));
            }
        }
        let mut cursor = now;
        loop {
            let Some(next) = schedule.next_after(cursor) else {
                tracing::info!(trigger = %id, "the schedule has no further instant");
                return;
            };
            let wait = next.duration_since(Timestamp::now());
            let wait = Duration::try_from(wait).unwrap_or(Duration::ZERO);
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            // A fire runs beside the loop so a queued or slow start does not
            // hold the next instant back.
            let me = self.clone();
            let t = id.clone();
            tokio::spawn(async move {
                me.fire_scheduled(&t, next).await;
            });
            cursor = next;
        }
    }

    async fn fire_scheduled(self: &Arc<Self>, id: &str, at: Timestamp) -> Option<FireResult> {
        // Boxed: a fire's future is large (starting a run), and every
        // schedule's task holds this one inline for its catch-up, waiting
        // or not: 12.7 KB a schedule, 12.7 MB of an idle daemon's 1,000.
        let fire = Box::pin(self.fire(
            id,
            FireKind::Schedule,
            instant_text(at),
            Some(at),
            BTreeMap::new(),
        ));
        match fire.await {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(trigger = %id, at = %at, error = %e, "fire failed");
                None
            }
        }
    }
}

/// What a run started by a fire records in its `run_started`: the trigger,
/// its kind, when it fired, and the key of its kind (the scheduled instant,
/// the delivery id, the event id).
fn run_trigger(
    trigger: &str,
    kind: FireKind,
    key: &str,
    fired_at: Timestamp,
    scheduled_for: Option<Timestamp>,
) -> RunTrigger {
    RunTrigger {
        id: trigger.to_owned(),
        kind: kind.as_str().to_owned(),
        fired_at: instant_text(fired_at),
        scheduled_for: scheduled_for.map(instant_text),
        delivery_id: (kind == FireKind::Webhook).then(|| key.to_owned()),
        event_id: (kind == FireKind::Event).then(|| key.to_owned()),
    }
}

/// `t` as RFC 3339 in the schedule's zone (`2026-03-29T03:00:00+02:00`).
pub fn local_text(s: &Schedule, t: Timestamp) -> String {
    let secs = s.time_zone().to_offset(t).seconds();
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.unsigned_abs();
    format!(
        "{}{sign}{:02}:{:02}",
        s.time_zone().to_datetime(t).strftime("%Y-%m-%dT%H:%M:%S"),
        a / 3600,
        a % 3600 / 60
    )
}

/// A JSON payload as a workflow's inputs: an object (or null, for none).
pub fn inputs_of(payload: Value) -> Result<BTreeMap<String, Value>, NotAnObject> {
    match payload {
        Value::Null => Ok(BTreeMap::new()),
        Value::Object(m) => Ok(m.into_iter().collect()),
        other => Err(NotAnObject {
            kind: match other {
                Value::Array(_) => "a list",
                Value::String(_) => "text",
                Value::Number(_) => "a number",
                _ => "a boolean",
            },
        }),
    }
}

impl Deliveries for Arc<Daemon> {
    fn route(&self, path: &str) -> Option<WebhookRoute> {
        let want = format!("/{}", path.trim_start_matches('/'));
        self.triggers().into_values().find_map(|r| {
            let w = r.decl.webhook.as_ref()?;
            (r.is_active() && w.path == want).then(|| WebhookRoute {
                trigger: r.decl.id.clone(),
                secret_env: w.secret_env.clone(),
            })
        })
    }

    fn deliver(
        &self,
        trigger: &str,
        delivery_id: String,
        body: Value,
    ) -> Pin<Box<dyn Future<Output = Result<Delivered, Undelivered>> + Send>> {
        let me = self.clone();
        let trigger = trigger.to_owned();
        let undelivered = |e: DaemonError| Undelivered(e.to_string());
        Box::pin(async move {
            let inputs = inputs_of(body)
                .map_err(DaemonError::from)
                .map_err(undelivered)?;
            // Before the fire is recorded: a body that does not fit leaves
            // no record, so a corrected redelivery with the same id runs.
            me.check_inputs(&trigger, &inputs).map_err(undelivered)?;
            let r = me
                .fire(&trigger, FireKind::Webhook, delivery_id, None, inputs)
                .await
                .map_err(undelivered)?;
            Ok(match (r.claimed, r.outcome, r.session_id) {
                (false, _, session_id) => Delivered::Duplicate { session_id },
                (true, FireOutcome::Fired, Some(session_id)) => Delivered::Started { session_id },
                (true, outcome, _) => Delivered::NotStarted {
                    outcome: outcome.as_str().to_owned(),
                    reason: r.reason.unwrap_or_default(),
                },
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_objects_or_nothing() {
        assert!(inputs_of(Value::Null).unwrap().is_empty());
        let m = inputs_of(serde_json::json!({"a": 1})).unwrap();
        assert_eq!(m["a"], 1);
        let e = inputs_of(serde_json::json!([1])).unwrap_err().to_string();
        assert!(e.contains("a list"), "{e}");
    }

    #[test]
    fn next_fires_are_shown_in_the_zone() {
        let s = Schedule::parse("0 9 * * *", "Europe/Paris").unwrap();
        let t: Timestamp = "2026-07-01T07:00:00Z".parse().unwrap();
        assert_eq!(local_text(&s, t), "2026-07-01T09:00:00+02:00");
        let s = Schedule::parse("0 9 * * *", "America/New_York").unwrap();
        let t: Timestamp = "2026-01-01T14:00:00Z".parse().unwrap();
        assert_eq!(local_text(&s, t), "2026-01-01T09:00:00-05:00");
    }

    #[test]
    fn instants_are_written_one_way() {
        let t: Timestamp = "2026-03-29T01:00:00+00:00".parse().unwrap();
        assert_eq!(instant_text(t), "2026-03-29T01:00:00Z");
    }
}
