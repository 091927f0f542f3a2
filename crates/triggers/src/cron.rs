//! Cron expressions: parsing and matching against a civil (wall-clock) date and time.
//!
//! Five fields (`minute hour day-of-month month day-of-week`) or six with seconds first, the
//! documented extension. Every Vixie form is accepted: `*`, numbers, ranges `a-b`, steps `*/n`,
//! `a-b/n` and `a/n` (from `a` to the field's maximum), lists `a,b,c`, month names `JAN`–`DEC`
//! and day names `SUN`–`SAT` (any case), day-of-week `0`–`7` (both 0 and 7 are Sunday), and the
//! macros `@yearly` `@annually` `@monthly` `@weekly` `@daily` `@midnight` `@hourly`.
//!
//! Day matching follows Vixie cron: when both day-of-month and day-of-week are restricted (neither
//! field begins with `*`), a day matches if EITHER matches; otherwise both must.
//!
//! This module knows nothing about time zones or instants: it answers "does this wall-clock time
//! match" and "which is the next matching wall-clock time before a bound". [`crate::Schedule`]
//! maps wall-clock times onto instants in a zone.

use jiff::civil::{DateTime, Weekday};
use std::fmt;
use std::str::FromStr;

/// Why a cron expression was refused. Every message names the field, the token and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error(
        "cron expression is empty; expected 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or a macro such as @daily"
    )]
    Empty,
    #[error(
        "cron expression {expr:?} has {found} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (second minute hour day-of-month month day-of-week)"
    )]
    FieldCount { expr: String, found: usize },
    #[error(
        "cron macro {name:?} is not supported; expected one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"
    )]
    UnknownMacro { name: String },
    #[error("cron field {field:?}: {value} is out of range {min}-{max}")]
    OutOfRange {
        field: &'static str,
        value: String,
        min: u8,
        max: u8,
    },
    #[error("cron field {field:?}: {token:?} is not allowed; use {allowed}")]
    Invalid {
        field: &'static str,
        token: String,
        allowed: String,
    },
    #[error("cron field {field:?}: range {token:?} is reversed; write the smaller bound first")]
    Reversed { field: &'static str, token: String },
    #[error("cron field {field:?}: step {token:?} must be a whole number from 1 to {max}")]
    BadStep {
        field: &'static str,
        token: String,
        max: u8,
    },
    #[error(
        "cron expression {expr:?} never fires: {reason}; name a day that at least one of its months has"
    )]
    NeverFires { expr: String, reason: String },
}

/// One field's description: its name in messages, its range and its names.
struct Spec {
    name: &'static str,
    min: u8,
    max: u8,
    names: &'static [&'static str],
    /// How the names read in a message ("a name JAN-DEC").
    names_hint: &'static str,
}

const SECOND: Spec = Spec {
    name: "second",
    min: 0,
    max: 59,
    names: &[],
    names_hint: "",
};
const MINUTE: Spec = Spec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    names_hint: "",
};
const HOUR: Spec = Spec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    names_hint: "",
};
const DOM: Spec = Spec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
    names_hint: "",
};
const MONTH: Spec = Spec {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
    names_hint: ", a name JAN-DEC",
};
/// Day of week: 0-7 where 7 is folded onto 0 (Sunday) after parsing.
const DOW: Spec = Spec {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
    names_hint: ", a name SUN-SAT",
};

impl Spec {
    fn allowed(&self) -> String {
        format!(
            "a number {}-{}{}, *, a range a-b, a step */n, a-b/n or a/n, or a list a,b,c",
            self.min, self.max, self.names_hint
        )
    }

    fn invalid(&self, token: &str) -> CronError {
        CronError::Invalid {
            field: self.name,
            token: token.to_string(),
            allowed: self.allowed(),
        }
    }

    /// A single value: a number in range or (where the field has them) a name.
    fn value(&self, token: &str) -> Result<u8, CronError> {
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            return match token.parse::<u8>() {
                Ok(v) if (self.min..=self.max).contains(&v) => Ok(v),
                // Overflowing numbers too; leading zeros dropped ("024" reads as 24).
                _ => Err(CronError::OutOfRange {
                    field: self.name,
                    value: normalize_digits(token),
                    min: self.min,
                    max: self.max,
                }),
            };
        }
        let upper = token.to_ascii_uppercase();
        match self.names.iter().position(|n| *n == upper) {
            // Months are numbered from 1, days from 0 (SUN).
            Some(i) => Ok(i as u8 + self.min),
            None => Err(self.invalid(token)),
        }
    }

    /// One list item (`*`, `a`, `a-b`, each optionally `/n`) as a bit set.
    fn item(&self, item: &str) -> Result<u64, CronError> {
        if item.is_empty() {
            return Err(self.invalid(item));
        }
        let (base, step) = match item.split_once('/') {
            Some((base, step)) => {
                let bad = || CronError::BadStep {
                    field: self.name,
                    token: step.to_string(),
                    max: self.max,
                };
                if step.is_empty() || !step.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                match step.parse::<u8>() {
                    Ok(n) if n >= 1 && n <= self.max => (base, n),
                    _ => return Err(bad()),
                }
            }
            None => (item, 1),
        };
        let stepped = step != 1 || item.contains('/');
        let (lo, hi) = if base == "*" {
            (self.min, self.max)
        } else if let Some((a, b)) = base.split_once('-') {
            let lo = self.value(a)?;
            let mut hi = self.value(b)?;
            // `FRI-SUN`: Sunday as the end of a range is day 7.
            if self.name == DOW.name && hi == 0 && lo > 0 {
                hi = 7;
            }
            if lo > hi {
                return Err(CronError::Reversed {
                    field: self.name,
                    token: base.to_string(),
                });
            }
            (lo, hi)
        } else {
            let a = self.value(base)?;
            // `a/n` runs from `a` to the field's maximum; a bare `a` is just `a`.
            if stepped { (a, self.max) } else { (a, a) }
        };
        let mut bits = 0u64;
        let mut v = lo;
        loop {
            bits |= 1 << v;
            match v.checked_add(step) {
                Some(next) if next <= hi => v = next,
                _ => break,
            }
        }
        Ok(bits)
    }

    /// A whole field: a comma-separated list of items.
    fn field(&self, text: &str) -> Result<u64, CronError> {
        let mut bits = 0;
        for item in text.split(',') {
            bits |= self.item(item)?;
        }
        Ok(bits)
    }
}

fn normalize_digits(token: &str) -> String {
    let trimmed = token.trim_start_matches('0');
    if trimmed.is_empty() {
        "0".to_string()
    } else {
        trimmed.to_string()
    }
}

/// A parsed cron expression: one bit set per field.
#[derive(Clone, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u64,
    /// Bits 1-31.
    days_of_month: u64,
    /// Bits 1-12.
    months: u64,
    /// Bits 0-6, Sunday = 0.
    days_of_week: u64,
    /// The field begins with `*` (Vixie's DOM_STAR / DOW_STAR).
    dom_star: bool,
    dow_star: bool,
    /// The second, minute or hour field begins with `*`: an interval schedule, which runs on the
    /// real wall clock through a repeated (fall-back) hour instead of once.
    interval: bool,
    has_seconds: bool,
    source: String,
}

impl Cron {
    /// Parses a cron expression (5 or 6 fields, or a macro). One that can
    /// never fire (`0 0 31 2 *`) is refused with the reason: it would be
    /// listed as active with no next fire and silently do nothing.
    pub fn parse(expr: &str) -> Result<Cron, CronError> {
        let cron = Cron::parse_unchecked(expr)?;
        match cron.never_fires() {
            Some(reason) => Err(CronError::NeverFires {
                expr: cron.source,
                reason,
            }),
            None => Ok(cron),
        }
    }

    /// [`Cron::parse`] without the never-fires check (the bounded searches
    /// are tested with impossible expressions).
    pub(crate) fn parse_unchecked(expr: &str) -> Result<Cron, CronError> {
        let trimmed = expr.trim();
        if trimmed.is_empty() {
            return Err(CronError::Empty);
        }
        let expanded = if let Some(name) = trimmed.strip_prefix('@') {
            match name.to_ascii_lowercase().as_str() {
                "yearly" | "annually" => "0 0 1 1 *",
                "monthly" => "0 0 1 * *",
                "weekly" => "0 0 * * 0",
                "daily" | "midnight" => "0 0 * * *",
                "hourly" => "0 * * * *",
                _ => {
                    return Err(CronError::UnknownMacro {
                        name: trimmed.to_string(),
                    });
                }
            }
        } else {
            trimmed
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (sec, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            found => {
                return Err(CronError::FieldCount {
                    expr: trimmed.to_string(),
                    found,
                });
            }
        };
        let dow = DOW.field(rest[4])?;
        // Day 7 is Sunday.
        let dow = (dow | (dow >> 7)) & 0x7f;
        Ok(Cron {
            seconds: SECOND.field(sec)?,
            minutes: MINUTE.field(rest[0])?,
            hours: HOUR.field(rest[1])?,
            days_of_month: DOM.field(rest[2])?,
            months: MONTH.field(rest[3])?,
            days_of_week: dow,
            dom_star: rest[2].starts_with('*'),
            dow_star: rest[4].starts_with('*'),
            interval: sec.starts_with('*') || rest[0].starts_with('*') || rest[1].starts_with('*'),
            has_seconds: fields.len() == 6,
            source: trimmed.to_string(),
        })
    }

    /// Why no date ever matches, if none does. Only one shape can: a
    /// restricted day-of-month with an unrestricted (`*`-led) day-of-week
    /// (both must match), where no month named has any day named. With a
    /// restricted day-of-week instead, any weekday recurs in every month;
    /// with both restricted, Vixie's OR rule lets the weekday alone match.
    /// Every (month, day) pair that exists at all (29 February included)
    /// falls on every weekday within the 400-year Gregorian cycle, so this
    /// is exact, not a guess.
    fn never_fires(&self) -> Option<String> {
        if self.dom_star || !self.dow_star || self.days_of_week == 0 {
            return None;
        }
        let months: Vec<i8> = (1..=12).filter(|m| bit(self.months, *m)).collect();
        let days: Vec<i8> = (1..=31).filter(|d| bit(self.days_of_month, *d)).collect();
        let longest = |m: i8| if m == 2 { 29 } else { days_in_month(2001, m) };
        let fits = months
            .iter()
            .any(|m| days.iter().any(|d| *d <= longest(*m)));
        if fits || months.is_empty() || days.is_empty() {
            return None;
        }
        const NAMES: [&str; 12] = [
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ];
        let named: Vec<String> = months
            .iter()
            .map(|m| NAMES[(*m - 1) as usize].to_owned())
            .collect();
        let ordinals: Vec<String> = days.iter().map(|d| ordinal(*d)).collect();
        let verb = if named.len() == 1 { "has" } else { "have" };
        Some(format!(
            "{} {verb} no {}",
            join(&named, "and"),
            join(&ordinals, "or")
        ))
    }

    /// The expression as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the expression has a seconds field.
    pub fn has_seconds(&self) -> bool {
        self.has_seconds
    }

    /// Whether the second, minute or hour field begins with `*` (`* * * * *`, `0 * * * *`,
    /// `*/15 9 * * *`): such a schedule fires at every real occurrence of a repeated wall-clock
    /// time, where a fixed-time one (`30 1 * * *`) fires only at the first.
    pub fn is_interval(&self) -> bool {
        self.interval
    }

    /// Whether the day (date part) matches: month, then day-of-month / day-of-week with the
    /// Vixie OR rule.
    pub fn matches_day(&self, year: i16, month: i8, day: i8) -> bool {
        if self.months & (1 << month) == 0 {
            return false;
        }
        let dom = self.days_of_month & (1 << day) != 0;
        let dow = self.days_of_week & (1 << weekday(year, month, day)) != 0;
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// Whether a wall-clock time (at whole-second resolution) matches.
    pub fn matches(&self, dt: DateTime) -> bool {
        self.matches_day(dt.year(), dt.month(), dt.day())
            && bit(self.hours, dt.hour())
            && bit(self.minutes, dt.minute())
            && bit(self.seconds, dt.second())
    }

    /// The first matching wall-clock time `t` with `from <= t < until` (sub-second parts of `from`
    /// round up to the next whole second). Bounded: it stops at `until`.
    pub fn next_local(&self, from: DateTime, until: DateTime) -> Option<DateTime> {
        let mut c = Cursor::from(from);
        if from.subsec_nanosecond() != 0 {
            c.bump_second();
        }
        loop {
            if c.year > until.year() || c.as_datetime_floor()? >= until {
                return None;
            }
            if !bit(self.months, c.month) {
                c.next_month();
                continue;
            }
            if c.day > days_in_month(c.year, c.month) {
                c.next_month();
                continue;
            }
            if !self.matches_day(c.year, c.month, c.day) {
                c.next_day();
                continue;
            }
            let Some(h) = next_bit(self.hours, c.hour) else {
                c.next_day();
                continue;
            };
            if h != c.hour {
                (c.hour, c.minute, c.second) = (h, 0, 0);
            }
            let Some(m) = next_bit(self.minutes, c.minute) else {
                c.next_hour();
                continue;
            };
            if m != c.minute {
                (c.minute, c.second) = (m, 0);
            }
            let Some(s) = next_bit(self.seconds, c.second) else {
                c.next_minute();
                continue;
            };
            c.second = s;
            let found = c.as_datetime_floor()?;
            return (found < until).then_some(found);
        }
    }
}

impl fmt::Debug for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cron({:?})", self.source)
    }
}

impl fmt::Display for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl FromStr for Cron {
    type Err = CronError;
    fn from_str(s: &str) -> Result<Cron, CronError> {
        Cron::parse(s)
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, … `31st`.
fn ordinal(d: i8) -> String {
    let suffix = match (d % 10, d % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{d}{suffix}")
}

/// `a`, `a and b`, `a, b and c`.
fn join(items: &[String], last: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., tail] => format!("{} {last} {tail}", init.join(", ")),
    }
}

fn bit(set: u64, v: i8) -> bool {
    (0..64).contains(&v) && set & (1 << v) != 0
}

/// The smallest set bit `>= from`, if any.
fn next_bit(set: u64, from: i8) -> Option<i8> {
    if !(0..64).contains(&from) {
        return None;
    }
    let rest = set >> from;
    (rest != 0).then(|| from + rest.trailing_zeros() as i8)
}

fn is_leap(year: i16) -> bool {
    let y = i32::from(year);
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(year: i16, month: i8) -> i8 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Day of week, Sunday = 0.
fn weekday(year: i16, month: i8, day: i8) -> i8 {
    match jiff::civil::Date::new(year, month, day) {
        Ok(d) => d.weekday().to_sunday_zero_offset(),
        // Only called with valid dates; a wrong answer here cannot loop.
        Err(_) => Weekday::Sunday.to_sunday_zero_offset(),
    }
}

/// A wall-clock position that may briefly hold out-of-range fields while advancing.
struct Cursor {
    year: i16,
    month: i8,
    day: i8,
    hour: i8,
    minute: i8,
    second: i8,
}

impl Cursor {
    fn from(dt: DateTime) -> Cursor {
        Cursor {
            year: dt.year(),
            month: dt.month(),
            day: dt.day(),
            hour: dt.hour(),
            minute: dt.minute(),
            second: dt.second(),
        }
    }

    /// `None` past the end of jiff's calendar (year 9999), which ends every search.
    fn as_datetime_floor(&self) -> Option<DateTime> {
        let day = self.day.min(days_in_month(self.year, self.month));
        DateTime::new(
            self.year,
            self.month,
            day,
            self.hour,
            self.minute,
            self.second,
            0,
        )
        .ok()
    }

    fn next_month(&mut self) {
        (self.day, self.hour, self.minute, self.second) = (1, 0, 0, 0);
        if self.month == 12 {
            self.month = 1;
            self.year = self.year.saturating_add(1);
        } else {
            self.month += 1;
        }
    }

    fn next_day(&mut self) {
        (self.hour, self.minute, self.second) = (0, 0, 0);
        if self.day >= days_in_month(self.year, self.month) {
            self.next_month();
        } else {
            self.day += 1;
        }
    }

    fn next_hour(&mut self) {
        (self.minute, self.second) = (0, 0);
        if self.hour == 23 {
            self.next_day()
        } else {
            self.hour += 1
        }
    }

    fn next_minute(&mut self) {
        self.second = 0;
        if self.minute == 59 {
            self.next_hour()
        } else {
            self.minute += 1
        }
    }

    fn bump_second(&mut self) {
        if self.second == 59 {
            self.next_minute()
        } else {
            self.second += 1
        }
    }
}
