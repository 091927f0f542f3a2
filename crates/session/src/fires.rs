//! The fire record: the durable note that a trigger fired (or declined to)
//! for one scheduled instant, webhook delivery, event or manual request.
//!
//! It is what makes the daemon fire each of them exactly once across processes
//! sharing one store (CONTRACT §15): a daemon writes the record with
//! [`SessionStore::claim_fire`](super::SessionStore::claim_fire) *before* it
//! starts the run, and only the process whose claim inserted the record runs
//! it. The record is keyed by `(trigger, key)`, the key being the fire's
//! idempotency key (see [`FireRecord::key`]). After the run starts the record
//! is linked to its session, and its outcome and cost are brought up to date.
//! A crash between the claim and the run leaves a record without a session: it
//! is neither lost (history shows it) nor fired again (the key is taken).
//!
//! Times are RFC 3339 strings as the caller wrote them; every backend also
//! orders and compares them as instants (milliseconds since the epoch), so
//! `…T10:00:00Z` and `…T10:00:00.000Z` and `…T12:00:00+02:00` are one time.

use std::cmp::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::StoreError;

/// What made a trigger fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FireKind {
    Schedule,
    Webhook,
    Event,
    Manual,
}

impl FireKind {
    pub const ALL: [FireKind; 4] = [
        FireKind::Schedule,
        FireKind::Webhook,
        FireKind::Event,
        FireKind::Manual,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FireKind::Schedule => "schedule",
            FireKind::Webhook => "webhook",
            FireKind::Event => "event",
            FireKind::Manual => "manual",
        }
    }

    pub fn parse(s: &str) -> Option<FireKind> {
        FireKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// What became of a fire (`triggers history`'s `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FireOutcome {
    /// A run was started (or is being started) for it.
    Fired,
    /// Deliberately not run (overlap `skip`, a catch-up that dropped it).
    Skipped,
    /// Not run because a limit or a capability said no (quota, refused kind).
    Refused,
}

impl FireOutcome {
    pub const ALL: [FireOutcome; 3] = [
        FireOutcome::Fired,
        FireOutcome::Skipped,
        FireOutcome::Refused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FireOutcome::Fired => "fired",
            FireOutcome::Skipped => "skipped",
            FireOutcome::Refused => "refused",
        }
    }

    pub fn parse(s: &str) -> Option<FireOutcome> {
        FireOutcome::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One fire of one trigger (`triggers history`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FireRecord {
    /// The trigger's id, `<workflow-id>#<index>` (e.g. `nightly#0`).
    pub trigger: String,
    pub kind: FireKind,
    /// The idempotency key, unique per trigger: the scheduled instant (RFC
    /// 3339) for a schedule, the delivery id for a webhook, the event id for an
    /// event, a fresh id for a manual fire.
    pub key: String,
    /// The instant a schedule meant (RFC 3339); absent for other kinds.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scheduled_for: Option<String>,
    /// When the daemon fired it (RFC 3339).
    pub fired_at: String,
    pub outcome: FireOutcome,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    /// The session the fire started, once it has one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session_id: Option<String>,
    /// What the run cost, once known (counts towards `max_cost_usd_per_day`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cost_usd: Option<f64>,
}

impl FireRecord {
    /// `fired_at` in milliseconds since the epoch.
    pub fn fired_ms(&self) -> Option<i64> {
        instant_ms(&self.fired_at)
    }

    /// `scheduled_for` in milliseconds since the epoch.
    pub fn scheduled_ms(&self) -> Option<i64> {
        self.scheduled_for.as_deref().and_then(instant_ms)
    }

    /// Check what every store requires before writing the record: a trigger
    /// and a key, readable times, a finite cost. Returns `(fired_ms,
    /// scheduled_ms)`.
    pub(crate) fn validate(&self) -> Result<(i64, Option<i64>), StoreError> {
        let bad = |why: String| {
            Err(StoreError::InvalidFire {
                trigger: self.trigger.clone(),
                key: self.key.clone(),
                message: why,
            })
        };
        if self.trigger.is_empty() || self.key.is_empty() {
            return bad("the trigger and the key must not be empty".into());
        }
        let Some(fired) = self.fired_ms() else {
            return bad(format!(
                "fired_at `{}` is not an RFC 3339 time",
                self.fired_at
            ));
        };
        let scheduled = match &self.scheduled_for {
            None => None,
            Some(s) => match instant_ms(s) {
                Some(ms) => Some(ms),
                None => return bad(format!("scheduled_for `{s}` is not an RFC 3339 time")),
            },
        };
        if self.cost_usd.is_some_and(|c| !c.is_finite()) {
            return bad("cost_usd must be a finite number".into());
        }
        Ok((fired, scheduled))
    }
}

/// History order, newest first: by `fired_at`, then `scheduled_for` (absent
/// last), then trigger and key, all descending. Every backend sorts so.
pub(crate) fn newest_first(a: &FireRecord, b: &FireRecord) -> Ordering {
    let sched = |r: &FireRecord| r.scheduled_ms().unwrap_or(i64::MIN);
    b.fired_ms()
        .cmp(&a.fired_ms())
        .then_with(|| sched(b).cmp(&sched(a)))
        .then_with(|| b.trigger.cmp(&a.trigger))
        .then_with(|| b.key.cmp(&a.key))
}

/// Milliseconds since the epoch of a time given as a [`SystemTime`] (before
/// the epoch counts as negative).
pub(crate) fn system_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// Milliseconds since the epoch of an RFC 3339 time
/// (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `t`, `z` and a space for `T`
/// accepted), or `None` when it is not one. Fractions beyond milliseconds are
/// truncated.
pub fn instant_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0i64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let (h, m, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in[(month - 1) as usize]
        || h > 23
        || m > 59
        || sec > 60
    {
        return None;
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..3 {
            millis *= 10;
        }
    }
    let offset_min = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let (oh, om) = (num(i + 1, 2)?, num(i + 4, 2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 60 + om;
            if *sign == b'-' { -o } else { o }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + m * 60 + sec - offset_min * 60;
    Some(secs * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_wire::events::rfc3339;
    use std::time::Duration;

    #[test]
    fn instants_read_back_as_the_stores_write_them() {
        for ms in [
            0u64,
            1,
            999,
            1_795_341_600_123,
            951_782_400_000,
            4_102_444_800_000,
        ] {
            let t = UNIX_EPOCH + Duration::from_millis(ms);
            assert_eq!(instant_ms(&rfc3339(t)), Some(ms as i64), "{}", rfc3339(t));
        }
    }

    #[test]
    fn offsets_and_precisions_name_one_instant() {
        let base = instant_ms("2026-11-22T10:00:00Z").unwrap();
        assert_eq!(instant_ms("2026-11-22T10:00:00.000Z"), Some(base));
        assert_eq!(instant_ms("2026-11-22T12:00:00+02:00"), Some(base));
        assert_eq!(instant_ms("2026-11-22T05:30:00-04:30"), Some(base));
        assert_eq!(instant_ms("2026-11-22t10:00:00z"), Some(base));
        assert_eq!(instant_ms("2026-11-22T10:00:00.5Z"), Some(base + 500));
        assert_eq!(
            instant_ms("2026-11-22T10:00:00.123456789Z"),
            Some(base + 123)
        );
        assert_eq!(
            instant_ms("1969-12-31T23:59:59Z"),
            Some(-1000),
            "before the epoch"
        );
    }

    #[test]
    fn what_is_not_rfc_3339_is_refused() {
        for bad in [
            "",
            "2026-11-22",
            "2026-11-22T10:00:00",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-22T24:00:00Z",
            "2026-11-22T10:00:00.Z",
            "2026-11-22T10:00:00+0200",
            "2026-11-22T10:00:00Zjunk",
            "20261122T100000Z",
        ] {
            assert_eq!(instant_ms(bad), None, "{bad:?}");
        }
        assert!(instant_ms("2024-02-29T00:00:00Z").is_some());
    }

    #[test]
    fn kinds_and_outcomes_round_trip() {
        for k in FireKind::ALL {
            assert_eq!(FireKind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        for o in FireOutcome::ALL {
            assert_eq!(FireOutcome::parse(o.as_str()), Some(o));
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
        }
    }
}
