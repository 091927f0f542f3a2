//! What to do with a fire: catch-up after downtime, overlap with a run still going, daily quotas.
//!
//! Pure decisions over numbers the daemon hands in (the last fired instant, now, how many runs are
//! going, what today used); the daemon records each outcome with the reason given here, in words a
//! user reads in `triggers history`.

use crate::schedule::Schedule;
use jiff::Timestamp;
use std::fmt;
use std::str::FromStr;

/// How many missed fires `all` replays when no bound is given.
pub const DEFAULT_CATCH_UP_BOUND: u32 = 100;

/// Missed fires counted for a message stop here (a 1-second schedule down for a month would
/// otherwise be counted one by one).
pub const MISSED_COUNT_CAP: u64 = 10_000;

/// Which fires missed while the daemon was down are fired when it comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CatchUp {
    /// Nothing missed is fired; the schedule resumes at its next instant.
    None,
    /// Exactly the most recent missed fire (the default).
    #[default]
    Latest,
    /// Every missed fire, oldest first, but no more than `bound`: past it, the newest `bound`.
    All { bound: u32 },
}

impl CatchUp {
    /// The setting's name as written in configuration.
    pub fn name(self) -> &'static str {
        match self {
            CatchUp::None => "none",
            CatchUp::Latest => "latest",
            CatchUp::All { .. } => "all",
        }
    }
}

impl FromStr for CatchUp {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<CatchUp, PolicyError> {
        match s {
            "none" => Ok(CatchUp::None),
            "latest" => Ok(CatchUp::Latest),
            "all" => Ok(CatchUp::All {
                bound: DEFAULT_CATCH_UP_BOUND,
            }),
            _ => Err(PolicyError {
                setting: "catch_up",
                value: s.to_string(),
                allowed: "\"none\", \"latest\" or \"all\"",
            }),
        }
    }
}

/// A policy value that is not one of its names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting} = {value:?} is not allowed; use {allowed}")]
pub struct PolicyError {
    pub setting: &'static str,
    pub value: String,
    pub allowed: &'static str,
}

/// The fires to start now after downtime, and how many missed ones are let go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatchUpPlan {
    /// Oldest first.
    pub fire: Vec<Timestamp>,
    /// Missed fires not fired (counted up to [`MISSED_COUNT_CAP`]).
    pub dropped: u64,
    /// `dropped` stopped at the cap: there were at least that many.
    pub dropped_at_least: bool,
}

impl CatchUpPlan {
    /// A sentence for the history when fires were let go, e.g. `"3 missed fires not caught up
    /// (catch_up = \"latest\")"`; `None` when nothing was dropped.
    pub fn dropped_reason(&self, policy: CatchUp) -> Option<String> {
        if self.dropped == 0 {
            return None;
        }
        let more = if self.dropped_at_least {
            "at least "
        } else {
            ""
        };
        let noun = if self.dropped == 1 && !self.dropped_at_least {
            "fire"
        } else {
            "fires"
        };
        let setting = match policy {
            CatchUp::All { bound } => format!("catch_up = \"all\" with a bound of {bound}"),
            other => format!("catch_up = \"{}\"", other.name()),
        };
        Some(format!(
            "{more}{} missed {noun} not caught up ({setting})",
            self.dropped
        ))
    }
}

/// Missed fires are those `f` with `last_fired < f <= now`. A trigger that never fired
/// (`last_fired` is `None`) missed nothing: a new schedule does not backfill.
pub fn catch_up(
    schedule: &Schedule,
    last_fired: Option<Timestamp>,
    now: Timestamp,
    policy: CatchUp,
) -> CatchUpPlan {
    let Some(last) = last_fired.filter(|l| *l < now) else {
        return CatchUpPlan::default();
    };
    let keep = match policy {
        CatchUp::None => 0,
        CatchUp::Latest => 1,
        CatchUp::All { bound } => bound as usize,
    };
    let fire = schedule.last_fires(last, now, keep);
    // What is dropped lies before the oldest kept fire (or anywhere, when none is kept).
    let (dropped, dropped_at_least) = match fire.first() {
        Some(first) => {
            let before = first
                .checked_sub(jiff::SignedDuration::from_nanos(1))
                .unwrap_or(*first);
            schedule.count_between(last, before, MISSED_COUNT_CAP)
        }
        None => schedule.count_between(last, now, MISSED_COUNT_CAP),
    };
    CatchUpPlan {
        fire,
        dropped,
        dropped_at_least,
    }
}

/// What happens to a fire while an earlier run of the same trigger is still going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// The fire is skipped and recorded (the default).
    #[default]
    Skip,
    /// The fire waits for the running one to finish; at most one waits, later ones are skipped.
    Queue,
    /// The fire starts beside the running one.
    Allow,
}

impl Overlap {
    pub fn name(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
            Overlap::Allow => "allow",
        }
    }
}

impl FromStr for Overlap {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Overlap, PolicyError> {
        match s {
            "skip" => Ok(Overlap::Skip),
            "queue" => Ok(Overlap::Queue),
            "allow" => Ok(Overlap::Allow),
            _ => Err(PolicyError {
                setting: "overlap",
                value: s.to_string(),
                allowed: "\"skip\", \"queue\" or \"allow\"",
            }),
        }
    }
}

/// Daily limits of one trigger; the day is the local day in the trigger's zone
/// ([`Schedule::local_day`], [`Schedule::day_span`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Quota {
    pub max_runs_per_day: Option<u32>,
    pub max_cost_usd_per_day: Option<f64>,
}

/// What the trigger's runs used so far on the fire's day.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct UsedToday {
    /// Runs started (fired and queued-then-started), not skipped or refused fires.
    pub runs: u32,
    pub cost_usd: f64,
}

/// How busy the trigger is at the moment of a fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Running {
    /// Runs of this trigger not yet finished.
    pub running: u32,
    /// Fires waiting behind them (overlap = "queue").
    pub queued: u32,
}

/// The outcome of one fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start a run now.
    Fire,
    /// Start a run when the running one finishes (then decide again: the quota may have filled).
    Queue { reason: String },
    /// Not started because of overlap; recorded as `skipped`.
    Skip { reason: String },
    /// Not started because of a quota; recorded as `refused`.
    Refuse { reason: String },
}

/// A trigger's overlap and quota settings.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FirePolicy {
    pub overlap: Overlap,
    pub quota: Quota,
}

impl FirePolicy {
    /// Decides one fire. The quota is checked first (a refused fire is refused whatever is
    /// running), then overlap. A queued fire is decided again when it leaves the queue.
    pub fn decide(&self, now: Running, used: UsedToday) -> Decision {
        if let Some(max) = self.quota.max_runs_per_day
            && used.runs >= max
        {
            let runs = if max == 1 { "run" } else { "runs" };
            return Decision::Refuse {
                reason: format!(
                    "daily run quota reached: {} of {max} {runs} already started today (max_runs_per_day = {max})",
                    used.runs
                ),
            };
        }
        if let Some(max) = self.quota.max_cost_usd_per_day
            && used.cost_usd >= max
        {
            return Decision::Refuse {
                reason: format!(
                    "daily cost quota reached: ${:.2} spent of ${max:.2} today (max_cost_usd_per_day = {max})",
                    used.cost_usd
                ),
            };
        }
        if now.running == 0 {
            return Decision::Fire;
        }
        let going = if now.running == 1 {
            "a run of this trigger is still running".to_string()
        } else {
            format!("{} runs of this trigger are still running", now.running)
        };
        match self.overlap {
            Overlap::Allow => Decision::Fire,
            Overlap::Skip => Decision::Skip {
                reason: format!("{going} (overlap = \"skip\")"),
            },
            Overlap::Queue if now.queued == 0 => Decision::Queue {
                reason: format!("{going}; this fire waits for it (overlap = \"queue\")"),
            },
            Overlap::Queue => Decision::Skip {
                reason: format!(
                    "{going} and a fire is already queued behind it (overlap = \"queue\" holds one)"
                ),
            },
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Fire => f.write_str("fire"),
            Decision::Queue { reason } => write!(f, "queued: {reason}"),
            Decision::Skip { reason } => write!(f, "skipped: {reason}"),
            Decision::Refuse { reason } => write!(f, "refused: {reason}"),
        }
    }
}
