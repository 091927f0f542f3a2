//! Run budgets: turns, tokens, cost and wall time, enforced while the run goes.
//!
//! Every model call is counted as it completes; a budget that runs out cancels the
//! run's token at once (so tools and in-flight calls stop too) and records which
//! budget it was, for `termination_reason` and exit code 4.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use agentfile_wire::events::Usage;

/// Limits for one run. `None` means unlimited.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    pub max_turns: Option<u64>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub timeout: Option<Duration>,
    /// Model turns allowed in one conversation before the goal fails.
    pub goal_turns: Option<u32>,
    /// Exit 5 when a loop hits its limit without converging.
    pub strict_convergence: bool,
    /// Most items one map step may run (`None`: [`DEFAULT_MAX_MAP_ITEMS`]).
    pub max_map_items: Option<usize>,
    /// The limits above that came from the config's `[limits]` rather than a
    /// flag or request (for messages that say where to change them).
    pub from_config: Vec<BudgetKind>,
}

/// Default cap on the items of one map step (`[limits] max_map_items`): every
/// item is recorded in the session (two events, about 380 bytes of database)
/// and its result kept until the map ends, so 100,000 items is a session of
/// tens of megabytes and a few seconds of bookkeeping, while a million is
/// one a user should ask for.
pub const DEFAULT_MAX_MAP_ITEMS: usize = 100_000;

/// Default cap on model turns in one conversation.
pub const DEFAULT_GOAL_TURNS: u32 = 40;

/// Which budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BudgetKind {
    MaxTurns,
    MaxTokens,
    MaxCost,
    Timeout,
}

impl Limits {
    /// Most items one map step may run.
    pub fn map_items(&self) -> usize {
        self.max_map_items.unwrap_or(DEFAULT_MAX_MAP_ITEMS)
    }
}

impl BudgetKind {
    /// The `termination_reason` of a run this budget stopped.
    pub fn reason(self) -> agentfile_wire::events::TerminationReason {
        use agentfile_wire::events::TerminationReason as R;
        match self {
            BudgetKind::MaxTurns => R::MaxTurns,
            BudgetKind::MaxTokens => R::MaxTokens,
            BudgetKind::MaxCost => R::MaxCost,
            BudgetKind::Timeout => R::Timeout,
        }
    }

    /// The `termination_reason` on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::MaxTurns => "max_turns",
            BudgetKind::MaxTokens => "max_tokens",
            BudgetKind::MaxCost => "max_cost",
            BudgetKind::Timeout => "timeout",
        }
    }

    /// Where the limit is set: the flag, or the config key.
    fn setting(self, from_config: bool) -> &'static str {
        match (self, from_config) {
            (BudgetKind::MaxTurns, false) => "--max-turns",
            (BudgetKind::MaxTurns, true) => "[limits] max_turns",
            (BudgetKind::MaxTokens, false) => "--max-tokens",
            (BudgetKind::MaxTokens, true) => "[limits] max_tokens",
            (BudgetKind::MaxCost, false) => "--max-cost-usd",
            (BudgetKind::MaxCost, true) => "[limits] max_cost_usd",
            (BudgetKind::Timeout, false) => "--timeout",
            (BudgetKind::Timeout, true) => "[limits] timeout",
        }
    }

    /// What ran out, in words, naming where the limit was set.
    pub fn describe(self, l: &Limits) -> String {
        let from = self.setting(l.from_config.contains(&self));
        match self {
            BudgetKind::MaxTurns => format!(
                "the run used its {} model turns ({from})",
                l.max_turns.unwrap_or(0)
            ),
            BudgetKind::MaxTokens => format!(
                "the run used more than {} tokens ({from})",
                l.max_tokens.unwrap_or(0)
            ),
            BudgetKind::MaxCost => format!(
                "the run cost more than ${:.4} ({from})",
                l.max_cost_usd.unwrap_or(0.0)
            ),
            BudgetKind::Timeout => format!(
                "the run took longer than {} ({from})",
                agentfile_config::text::human_duration(l.timeout.unwrap_or_default())
            ),
        }
    }
}

/// The shared counters of one run.
pub struct Budget {
    limits: Limits,
    started: Instant,
    state: Mutex<State>,
    cancel: CancellationToken,
}

#[derive(Default)]
struct State {
    usage: Usage,
    unpriced: bool,
    exhausted: Option<BudgetKind>,
}

impl Budget {
    pub fn new(limits: Limits, cancel: CancellationToken, prior: Usage) -> Budget {
        Budget {
            limits,
            started: Instant::now(),
            state: Mutex::new(State {
                unpriced: prior.turns > 0 && prior.cost_usd.is_none(),
                usage: prior,
                exhausted: None,
            }),
            cancel,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// When the run must end, if it has a timeout.
    pub fn deadline(&self) -> Option<Instant> {
        self.limits.timeout.map(|t| self.started + t)
    }

    /// Which budget ran out, if one did.
    pub fn exhausted(&self) -> Option<BudgetKind> {
        self.lock().exhausted
    }

    pub fn usage(&self) -> Usage {
        let st = self.lock();
        let mut u = st.usage.clone();
        if st.unpriced {
            u.cost_usd = None;
        }
        u
    }

    /// Called before a model call: is there room for one more turn?
    pub fn check_turn(&self) -> Result<(), BudgetKind> {
        let mut st = self.lock();
        if let Some(r) = st.exhausted {
            return Err(r);
        }
        let over = if self.limits.max_turns.is_some_and(|m| st.usage.turns >= m) {
            Some(BudgetKind::MaxTurns)
        } else if self.deadline().is_some_and(|d| Instant::now() >= d) {
            Some(BudgetKind::Timeout)
        } else {
            None
        };
        if let Some(r) = over {
            st.exhausted = Some(r);
            self.cancel.cancel();
            return Err(r);
        }
        Ok(())
    }

    /// Count one model call's usage; cancels the run if a budget is now spent.
    pub fn record_turn(&self, input_tokens: u64, output_tokens: u64, cost: Option<f64>) {
        let mut st = self.lock();
        st.usage.turns += 1;
        st.usage.input_tokens += input_tokens;
        st.usage.output_tokens += output_tokens;
        match cost {
            Some(c) => st.usage.cost_usd = Some(st.usage.cost_usd.unwrap_or(0.0) + c),
            None => st.unpriced = true,
        }
        let tokens = st.usage.input_tokens + st.usage.output_tokens;
        let over = if self.limits.max_tokens.is_some_and(|m| tokens > m) {
            Some(BudgetKind::MaxTokens)
        } else if self
            .limits
            .max_cost_usd
            .is_some_and(|m| st.usage.cost_usd.unwrap_or(0.0) > m)
        {
            Some(BudgetKind::MaxCost)
        } else {
            None
        };
        if let Some(r) = over
            && st.exhausted.is_none()
        {
            st.exhausted = Some(r);
            self.cancel.cancel();
        }
    }

    pub fn record_tool_call(&self) {
        self.lock().usage.tool_calls += 1;
    }

    /// Mark the wall-clock budget as spent (the run's timer fired).
    pub fn time_out(&self) {
        let mut st = self.lock();
        if st.exhausted.is_none() {
            st.exhausted = Some(BudgetKind::Timeout);
        }
        self.cancel.cancel();
    }
}

/// A duration [`parse_duration`] cannot read; each names the text given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    /// A plain number that is negative or not finite.
    #[error("`{0}` is not a duration")]
    NotADuration(String),
    /// A part whose number does not parse.
    #[error("`{0}` is not a duration (like 90s, 10m, 1h30m)")]
    BadNumber(String),
    #[error("`{text}`: unknown unit `{unit}` (use ms, s, m or h)")]
    UnknownUnit { text: String, unit: String },
    /// A number at the end without a unit (`1h30`).
    #[error("`{0}`: a number needs a unit (ms, s, m or h)")]
    NoUnit(String),
    /// More than a [`Duration`] holds.
    #[error("`{0}` is too long a duration to represent; give at most a few years (like 8760h)")]
    TooLong(String),
}

/// Parse a duration such as `90s`, `10m`, `1h30m`, `500ms` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let too_long = || DurationError::TooLong(s.to_owned());
    if let Ok(secs) = s.parse::<f64>() {
        return if secs.is_finite() && secs >= 0.0 {
            Duration::try_from_secs_f64(secs).map_err(|_| too_long())
        } else {
            Err(DurationError::NotADuration(s.to_owned()))
        };
    }
    let mut total = Duration::ZERO;
    let mut num = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let mut unit = c.to_string();
        while let Some(&n) = chars.peek() {
            if n.is_ascii_alphabetic() {
                unit.push(n);
                chars.next();
            } else {
                break;
            }
        }
        let v: f64 = num
            .parse()
            .map_err(|_| DurationError::BadNumber(s.to_owned()))?;
        num.clear();
        let secs = match unit.as_str() {
            "ms" => v / 1000.0,
            "s" => v,
            "m" => v * 60.0,
            "h" => v * 3600.0,
            _ => {
                return Err(DurationError::UnknownUnit {
                    text: s.to_owned(),
                    unit,
                });
            }
        };
        // Checked: a number from the user can exceed what a Duration holds,
        // and the unchecked conversion and `+=` panic there.
        let part = Duration::try_from_secs_f64(secs).map_err(|_| too_long())?;
        total = total.checked_add(part).ok_or_else(too_long)?;
    }
    if !num.is_empty() {
        return Err(DurationError::NoUnit(s.to_owned()));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("10").is_ok());
        assert!(parse_duration("3x").is_err());
        // Past what a Duration holds: an error, not a panic.
        for huge in [
            "18446744073709551616s",
            "18446744073709551616",
            "1e300",
            "99999999999999999999999999h",
            "18446744073709551615s18446744073709551615s",
        ] {
            let e = parse_duration(huge).unwrap_err().to_string();
            assert!(e.contains("too long"), "{huge}: {e}");
        }
    }

    #[test]
    fn duration_error_text() {
        let text = |s: &str| parse_duration(s).unwrap_err().to_string();
        assert_eq!(text(" "), "empty duration");
        assert_eq!(text("-3"), "`-3` is not a duration");
        assert_eq!(
            text("1..2s"),
            "`1..2s` is not a duration (like 90s, 10m, 1h30m)"
        );
        assert_eq!(text("3x"), "`3x`: unknown unit `x` (use ms, s, m or h)");
        assert_eq!(
            text("1h30"),
            "`1h30`: a number needs a unit (ms, s, m or h)"
        );
        assert_eq!(
            text("1e300"),
            "`1e300` is too long a duration to represent; give at most a few years (like 8760h)"
        );
    }

    #[test]
    fn token_budget_cancels() {
        let cancel = CancellationToken::new();
        let b = Budget::new(
            Limits {
                max_tokens: Some(100),
                ..Limits::default()
            },
            cancel.clone(),
            Usage::default(),
        );
        b.record_turn(50, 40, Some(0.1));
        assert!(!cancel.is_cancelled());
        b.record_turn(20, 0, None);
        assert!(cancel.is_cancelled());
        assert_eq!(b.exhausted(), Some(BudgetKind::MaxTokens));
        assert_eq!(b.usage().cost_usd, None);
    }

    #[test]
    fn budget_messages_name_where_the_limit_was_set() {
        let mut l = Limits {
            max_cost_usd: Some(0.5),
            ..Limits::default()
        };
        assert!(
            BudgetKind::MaxCost
                .describe(&l)
                .ends_with("(--max-cost-usd)")
        );
        l.from_config = vec![BudgetKind::MaxCost];
        let m = BudgetKind::MaxCost.describe(&l);
        assert!(m.ends_with("([limits] max_cost_usd)"), "{m}");
    }
}
