//! A cron expression in an IANA time zone: the instants it fires at.
//!
//! Wall-clock times map onto instants with these rules across offset changes (DST):
//! - A wall-clock time skipped by a forward change (the gap) fires once, at the instant of the
//!   change: `30 2 * * *` on the Europe/Paris spring-forward day fires at 03:00 local. Several
//!   skipped matches (every minute of the gap) collapse into that one fire.
//! - A wall-clock time repeated by a backward change (the fold) fires once, at its first
//!   occurrence, for a fixed-time schedule (`30 1 * * *`). An interval schedule — one whose
//!   second, minute or hour field begins with `*` (`* * * * *`, `0 * * * *`, `*/10 1 * * *`) —
//!   keeps its interval and fires at every real occurrence, as Vixie cron and OCPS 1.4 do; an
//!   every-minute schedule does not stop for an hour each autumn.
//!
//! Every search is bounded: a schedule with no match in 400 years of wall-clock time (the
//! Gregorian calendar repeats every 400 years) has none ever, and [`Schedule::next_after`] says
//! `None` — `0 0 30 2 *` answers at once instead of hanging.
//!
//! No clock is read here: every function takes the instants it needs.

use crate::cron::{Cron, CronError};
use jiff::civil::{Date, DateTime};
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use std::collections::VecDeque;
use std::fmt;

/// How far ahead a search looks, in years of wall-clock time.
const HORIZON_YEARS: i16 = 401;

/// Why a schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(transparent)]
    Cron(#[from] CronError),
    #[error(
        "time zone {name:?} is not known ({reason}); use an IANA name such as \"Europe/Paris\", \"America/New_York\" or \"UTC\""
    )]
    TimeZone { name: String, reason: String },
}

/// A cron expression bound to a time zone.
#[derive(Clone)]
pub struct Schedule {
    cron: Cron,
    tz: TimeZone,
    zone: String,
}

impl Schedule {
    /// Parses `expr` (see [`Cron::parse`]) in the IANA zone `tz` (`"UTC"` for UTC).
    pub fn parse(expr: &str, tz: &str) -> Result<Schedule, ScheduleError> {
        let cron = Cron::parse(expr)?;
        let zone = TimeZone::get(tz.trim()).map_err(|e| ScheduleError::TimeZone {
            name: tz.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Schedule {
            cron,
            tz: zone,
            zone: tz.trim().to_string(),
        })
    }

    /// A schedule from parts already made; `zone` is the name shown in messages.
    pub fn new(cron: Cron, tz: TimeZone, zone: impl Into<String>) -> Schedule {
        Schedule {
            cron,
            tz,
            zone: zone.into(),
        }
    }

    pub fn cron(&self) -> &Cron {
        &self.cron
    }

    pub fn time_zone(&self) -> &TimeZone {
        &self.tz
    }

    /// The zone's name as given.
    pub fn zone_name(&self) -> &str {
        &self.zone
    }

    /// The first fire strictly after `t`, or `None` if there is none within the search horizon.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        self.next_within(t, None)
    }

    /// [`Schedule::next_after`], looking no further than about `until` when given (the answer may
    /// still lie a little past it: callers compare).
    fn next_within(&self, t: Timestamp, until: Option<Timestamp>) -> Option<Timestamp> {
        let start_year = self.tz.to_datetime(t).year();
        let mut horizon = match start_year.checked_add(HORIZON_YEARS) {
            Some(y) if y <= 9999 => DateTime::new(y, 1, 1, 0, 0, 0, 0).ok()?,
            _ => DateTime::MAX,
        };
        if let Some(until) = until {
            // Two days past it covers any offset a zone can have.
            let near = self
                .tz
                .to_datetime(until)
                .checked_add(SignedDuration::from_hours(48));
            horizon = horizon.min(near.unwrap_or(DateTime::MAX));
        }
        let mut cur = t;
        // Whether a match exactly at `cur` counts (only after stepping onto a transition).
        let mut inclusive = false;
        loop {
            let off = self.tz.to_offset(cur);
            let change = self
                .tz
                .following(cur)
                .find(|tr| tr.offset() != off)
                .map(|tr| (tr.timestamp(), tr.offset()));
            let mut from = off.to_datetime(cur);
            if !inclusive {
                from = from.with().subsec_nanosecond(0).build().ok()?;
                from = from.checked_add(SignedDuration::from_secs(1)).ok()?;
            }
            let until = match change {
                Some((at, _)) => off.to_datetime(at).min(horizon),
                None => horizon,
            };
            if let Some(local) = self.cron.next_local(from, until) {
                let at = off.to_timestamp(local).ok()?;
                if !self.cron.is_interval() && self.is_second_occurrence(local, off) {
                    // A fixed-time schedule already fired at the first occurrence.
                    (cur, inclusive) = (at, false);
                    continue;
                }
                return Some(at);
            }
            let (at, new_off) = change?;
            if until >= horizon {
                return None;
            }
            if new_off > off {
                // Clocks jump forward at `at`: a match in the skipped wall-clock span fires once,
                // at the first valid instant.
                let (gap_from, gap_to) = (off.to_datetime(at), new_off.to_datetime(at));
                if self.cron.next_local(gap_from, gap_to).is_some() {
                    return Some(at);
                }
            }
            (cur, inclusive) = (at, true);
        }
    }

    /// Whether `local`, read at offset `off`, is the later of two occurrences of a repeated time.
    fn is_second_occurrence(&self, local: DateTime, off: Offset) -> bool {
        matches!(
            self.tz.to_ambiguous_timestamp(local).offset(),
            AmbiguousOffset::Fold { before, after } if after == off && before != off
        )
    }

    /// Fires `f` with `from < f <= to`, oldest first, at most `limit` of them.
    pub fn fires_between(&self, from: Timestamp, to: Timestamp, limit: usize) -> Vec<Timestamp> {
        let mut out = Vec::new();
        let mut cur = from;
        while out.len() < limit {
            match self.next_within(cur, Some(to)) {
                Some(f) if f <= to => {
                    out.push(f);
                    cur = f;
                }
                _ => break,
            }
        }
        out
    }

    /// How many fires `f` with `from < f <= to` there are, counting at most `cap`; the flag says
    /// the count stopped at the cap.
    pub fn count_between(&self, from: Timestamp, to: Timestamp, cap: u64) -> (u64, bool) {
        let mut n = 0;
        let mut cur = from;
        while let Some(f) = self.next_within(cur, Some(to)).filter(|f| *f <= to) {
            if n == cap {
                return (n, true);
            }
            n += 1;
            cur = f;
        }
        (n, false)
    }

    /// The newest `n` fires `f` with `after < f <= upto`, oldest first. Searches backwards from
    /// `upto` in growing windows, so a long gap costs about as much as the fires it returns.
    pub fn last_fires(&self, after: Timestamp, upto: Timestamp, n: usize) -> Vec<Timestamp> {
        if n == 0 || upto <= after {
            return Vec::new();
        }
        let mut window = SignedDuration::from_mins(1);
        loop {
            let start = upto
                .checked_sub(window)
                .ok()
                .filter(|s| *s > after)
                .unwrap_or(after);
            let mut newest = VecDeque::with_capacity(n);
            let mut cur = start;
            while let Some(f) = self.next_within(cur, Some(upto)).filter(|f| *f <= upto) {
                if newest.len() == n {
                    newest.pop_front();
                }
                newest.push_back(f);
                cur = f;
            }
            if newest.len() == n || start == after {
                return newest.into();
            }
            window = window.checked_mul(4).unwrap_or(SignedDuration::MAX);
        }
    }

    /// The local date of `t` in this schedule's zone (the day a daily quota counts in).
    pub fn local_day(&self, t: Timestamp) -> Date {
        self.tz.to_datetime(t).date()
    }

    /// The instants a local day spans: `[start, end)`. A day that starts inside a gap starts at
    /// the first valid instant.
    pub fn day_span(&self, day: Date) -> Option<(Timestamp, Timestamp)> {
        let start = self
            .tz
            .to_ambiguous_timestamp(day.to_datetime(jiff::civil::Time::midnight()));
        let next = day
            .tomorrow()
            .ok()?
            .to_datetime(jiff::civil::Time::midnight());
        let end = self.tz.to_ambiguous_timestamp(next);
        Some((start.compatible().ok()?, end.compatible().ok()?))
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schedule({:?} in {})", self.cron.as_str(), self.zone)
    }
}
