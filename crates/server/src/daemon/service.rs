//! The trigger methods of `serve` and `mcp` (CONTRACT §15): `triggers`,
//! `trigger_history`, `fire`, `emit`, answered by a [`Daemon`] over the
//! server's own [`Gateway`], built on the first call. Runs they start are the
//! gateway's runs, followed with `event`, `approve` and `cancel` like any run.
//! The server does not fire schedules or listen for webhooks: that is
//! `agentfile daemon`; these methods show and fire by hand.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;

use super::{Daemon, DaemonError, FireResult};
use crate::gateway::Gateway;
use agentfile_session::{FireKind, FireRecord};
use agentfile_wire::rpc::{
    EmitParams, EmitResult, FireHistory, FireInfo, FireOutcome, FireParams, FireReport, RpcError,
    TriggerHistoryParams, TriggerInfo, TriggerList, TriggerState, TriggersParams, code,
};

/// How many fires `trigger_history` answers when the call names no `limit`.
pub const DEFAULT_HISTORY: usize = 50;

/// The trigger methods of one server (one per gateway).
pub struct TriggerService {
    gateway: Arc<Gateway>,
    daemon: OnceCell<Arc<Daemon>>,
}

fn outcome(o: agentfile_session::FireOutcome) -> FireOutcome {
    match o {
        agentfile_session::FireOutcome::Fired => FireOutcome::Fired,
        agentfile_session::FireOutcome::Skipped => FireOutcome::Skipped,
        agentfile_session::FireOutcome::Refused => FireOutcome::Refused,
    }
}

fn report(r: FireResult) -> FireReport {
    FireReport {
        trigger: r.trigger,
        session_id: r.session_id,
        outcome: outcome(r.outcome),
        reason: r.reason,
    }
}

fn info(f: FireRecord) -> FireInfo {
    FireInfo {
        trigger: f.trigger,
        kind: f.kind.as_str().to_owned(),
        scheduled_for: f.scheduled_for,
        fired_at: f.fired_at,
        outcome: outcome(f.outcome),
        reason: f.reason,
        session_id: f.session_id,
    }
}

/// A fire that could not be recorded (the store failed).
fn fire_error(e: DaemonError) -> RpcError {
    RpcError::new(code::STORE, e.to_string())
}

fn joined<T>(r: Result<T, tokio::task::JoinError>) -> Result<T, RpcError> {
    r.map_err(|e| RpcError::internal(format!("internal error: {e}")))
}

impl TriggerService {
    pub fn new(gateway: Arc<Gateway>) -> TriggerService {
        TriggerService {
            gateway,
            daemon: OnceCell::new(),
        }
    }

    /// The daemon, its registrations read again from the workspace (so a
    /// workflow saved a moment ago is there).
    async fn daemon(&self) -> Result<Arc<Daemon>, RpcError> {
        let mut fresh = false;
        let d = self
            .daemon
            .get_or_try_init(|| async {
                fresh = true;
                let gateway = self.gateway.clone();
                joined(
                    tokio::task::spawn_blocking(move || {
                        Daemon::with_engine(gateway, Vec::new(), Duration::ZERO)
                    })
                    .await,
                )?
                .map_err(|e| {
                    RpcError::new(
                        code::RUN_REJECTED,
                        format!("cannot read the workspace's triggers: {e}"),
                    )
                })
            })
            .await?
            .clone();
        if !fresh {
            let again = d.clone();
            joined(tokio::task::spawn_blocking(move || again.rescan()).await)?;
        }
        Ok(d)
    }

    /// `triggers`: every registered trigger, its next fire and quota use.
    pub async fn triggers(&self, _p: TriggersParams) -> Result<TriggerList, RpcError> {
        let d = self.daemon().await?;
        let rows = joined(tokio::task::spawn_blocking(move || d.list()).await)?;
        Ok(TriggerList {
            triggers: rows
                .into_iter()
                .map(|r| TriggerInfo {
                    id: r.id,
                    workflow: r.workflow,
                    kind: r.kind.to_owned(),
                    state: if r.state == "active" {
                        TriggerState::Active
                    } else {
                        TriggerState::Refused
                    },
                    reason: r.reason,
                    next_fire: r.next_fire,
                    quota: r.quota,
                })
                .collect(),
        })
    }

    /// `trigger_history`: fires, newest first.
    pub async fn history(&self, p: TriggerHistoryParams) -> Result<FireHistory, RpcError> {
        let d = self.daemon().await?;
        let limit = p.limit.unwrap_or(DEFAULT_HISTORY);
        let fires = joined(
            tokio::task::spawn_blocking(move || d.store().fires(p.trigger.as_deref(), limit)).await,
        )?
        .map_err(|e| RpcError::new(code::STORE, format!("cannot read the fires: {e}")))?;
        Ok(FireHistory {
            fires: fires.into_iter().map(info).collect(),
        })
    }

    /// `fire`: fire one trigger now, as `agentfile triggers fire` does; the
    /// answer comes once its run has started, not when it ends.
    pub async fn fire(&self, p: FireParams) -> Result<FireReport, RpcError> {
        let d = self.daemon().await?;
        let Some(reg) = d.triggers().remove(&p.trigger) else {
            let known: Vec<String> = d.triggers().into_keys().collect();
            return Err(RpcError::new(
                code::UNKNOWN_TRIGGER,
                if known.is_empty() {
                    format!("no trigger `{}`: the workspace has no triggers", p.trigger)
                } else {
                    format!(
                        "no trigger `{}`; the triggers are {} (see `triggers`)",
                        p.trigger,
                        known.join(", ")
                    )
                },
            ));
        };
        if let Some(why) = &reg.refused {
            return Err(RpcError::new(
                code::RUN_REJECTED,
                format!("trigger `{}` is refused: {why}", p.trigger),
            ));
        }
        let key = format!("manual-{}", agentfile_session::new_session_id());
        d.fire(&p.trigger, FireKind::Manual, key, None, Default::default())
            .await
            .map(report)
            .map_err(fire_error)
    }

    /// `emit`: fire every workflow subscribed to the event once for its id.
    /// An event no active trigger subscribes to is an error, as `agentfile
    /// emit` exits non-zero for it.
    pub async fn emit(&self, p: EmitParams) -> Result<EmitResult, RpcError> {
        let d = self.daemon().await?;
        let id =
            p.id.filter(|i| !i.is_empty())
                .unwrap_or_else(|| format!("event-{}", agentfile_session::new_session_id()));
        super::inputs_of(p.payload.clone())
            .map_err(|e| RpcError::invalid_params(format!("emit: `payload`: {e}")))?;
        let fires = d
            .emit(&p.name, &id, p.payload)
            .await
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
        if fires.is_empty() {
            return Err(RpcError::new(
                code::UNKNOWN_TRIGGER,
                format!(
                    "no workflow subscribes to event `{}` (a trigger `kind: event, name: {}`); nothing fired",
                    p.name, p.name
                ),
            ));
        }
        let mut fired = Vec::new();
        let mut already_fired = Vec::new();
        for f in fires {
            let f = f.map_err(fire_error)?;
            if f.claimed {
                fired.push(report(f));
            } else {
                already_fired.push(report(f));
            }
        }
        Ok(EmitResult {
            event: p.name,
            id,
            fired,
            already_fired,
        })
    }
}
