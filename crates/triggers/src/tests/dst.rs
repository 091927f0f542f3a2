//! Next-fire computation in real zones, across their DST changes.

use crate::{Schedule, ScheduleError, Timestamp};
use jiff::SignedDuration;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// `n` fires after `from`, each written with the zone's offset at that instant.
fn next_n(expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let s = Schedule::parse(expr, zone).unwrap();
    let mut cur = ts(from);
    let mut out = Vec::new();
    for _ in 0..n {
        let Some(next) = s.next_after(cur) else { break };
        assert!(next > cur, "{expr}: {next} is not after {cur}");
        out.push(
            next.display_with_offset(s.time_zone().to_offset(next))
                .to_string(),
        );
        cur = next;
    }
    out
}

/// How many fires a local day holds.
fn fires_on(expr: &str, zone: &str, day: &str) -> usize {
    let s = Schedule::parse(expr, zone).unwrap();
    let (start, end) = s.day_span(day.parse().unwrap()).unwrap();
    let before = start.checked_sub(SignedDuration::from_nanos(1)).unwrap();
    let end = end.checked_sub(SignedDuration::from_nanos(1)).unwrap();
    s.fires_between(before, end, 100_000).len()
}

// Europe/Paris 2026: 02:00 CET -> 03:00 CEST on 29 March; 03:00 CEST -> 02:00 CET on 25 October.

#[test]
fn paris_daily_at_0230_in_the_skipped_hour_fires_once_at_0300() {
    assert_eq!(
        next_n("30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00+01:00", 3),
        [
            "2026-03-29T03:00:00+02:00",
            "2026-03-30T02:30:00+02:00",
            "2026-03-31T02:30:00+02:00"
        ]
    );
}

#[test]
fn paris_daily_at_0230_in_the_repeated_hour_fires_once_at_the_first() {
    assert_eq!(
        next_n("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00+02:00", 2),
        ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]
    );
    // Asked from inside the repeated hour, after the first 02:30: not again at the second.
    assert_eq!(
        next_n("30 2 * * *", "Europe/Paris", "2026-10-25T02:10:00+01:00", 1),
        ["2026-10-26T02:30:00+01:00"]
    );
}

#[test]
fn paris_hourly_across_both_changes() {
    assert_eq!(
        next_n("0 * * * *", "Europe/Paris", "2026-03-29T00:30:00+01:00", 3),
        [
            "2026-03-29T01:00:00+01:00",
            "2026-03-29T03:00:00+02:00",
            "2026-03-29T04:00:00+02:00"
        ]
    );
    // An interval schedule keeps its interval through the repeated hour.
    assert_eq!(
        next_n("0 * * * *", "Europe/Paris", "2026-10-25T01:30:00+02:00", 3),
        [
            "2026-10-25T02:00:00+02:00",
            "2026-10-25T02:00:00+01:00",
            "2026-10-25T03:00:00+01:00"
        ]
    );
    assert_eq!(fires_on("0 * * * *", "Europe/Paris", "2026-03-29"), 23);
    assert_eq!(fires_on("0 * * * *", "Europe/Paris", "2026-10-25"), 25);
}

#[test]
fn paris_every_minute_across_both_changes() {
    assert_eq!(
        next_n("* * * * *", "Europe/Paris", "2026-03-29T01:58:00+01:00", 3),
        [
            "2026-03-29T01:59:00+01:00",
            "2026-03-29T03:00:00+02:00",
            "2026-03-29T03:01:00+02:00"
        ]
    );
    assert_eq!(
        next_n("* * * * *", "Europe/Paris", "2026-10-25T02:58:00+02:00", 3),
        [
            "2026-10-25T02:59:00+02:00",
            "2026-10-25T02:00:00+01:00",
            "2026-10-25T02:01:00+01:00"
        ]
    );
    assert_eq!(fires_on("* * * * *", "Europe/Paris", "2026-03-29"), 23 * 60);
    assert_eq!(fires_on("* * * * *", "Europe/Paris", "2026-10-25"), 25 * 60);
    assert_eq!(fires_on("* * * * *", "Europe/Paris", "2026-10-26"), 24 * 60);
}

// America/New_York 2026: 02:00 EST -> 03:00 EDT on 8 March; 02:00 EDT -> 01:00 EST on 1 November.

#[test]
fn new_york_daily_at_0230_in_the_skipped_hour_fires_once_at_0300() {
    assert_eq!(
        next_n(
            "30 2 * * *",
            "America/New_York",
            "2026-03-07T12:00:00-05:00",
            3
        ),
        [
            "2026-03-08T03:00:00-04:00",
            "2026-03-09T02:30:00-04:00",
            "2026-03-10T02:30:00-04:00"
        ]
    );
    // On the fall-back day 02:30 happens once (after the repeated hour).
    assert_eq!(
        next_n(
            "30 2 * * *",
            "America/New_York",
            "2026-10-31T12:00:00-04:00",
            2
        ),
        ["2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"]
    );
}

#[test]
fn new_york_fixed_times_in_the_repeated_hour_fire_once() {
    assert_eq!(
        next_n(
            "30 1 * * *",
            "America/New_York",
            "2026-10-31T12:00:00-04:00",
            2
        ),
        ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]
    );
    assert_eq!(
        next_n(
            "0,30 1 * * *",
            "America/New_York",
            "2026-11-01T00:00:00-04:00",
            3
        ),
        [
            "2026-11-01T01:00:00-04:00",
            "2026-11-01T01:30:00-04:00",
            "2026-11-02T01:00:00-05:00"
        ]
    );
    // A skipped list fires once at the end of the gap.
    assert_eq!(
        next_n(
            "0,15,45 2 * * *",
            "America/New_York",
            "2026-03-08T00:00:00-05:00",
            2
        ),
        ["2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00"]
    );
}

#[test]
fn new_york_hourly_and_every_minute_across_both_changes() {
    assert_eq!(
        next_n(
            "0 * * * *",
            "America/New_York",
            "2026-03-08T00:30:00-05:00",
            3
        ),
        [
            "2026-03-08T01:00:00-05:00",
            "2026-03-08T03:00:00-04:00",
            "2026-03-08T04:00:00-04:00"
        ]
    );
    assert_eq!(
        next_n(
            "0 * * * *",
            "America/New_York",
            "2026-11-01T00:30:00-04:00",
            3
        ),
        [
            "2026-11-01T01:00:00-04:00",
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T02:00:00-05:00"
        ]
    );
    assert_eq!(
        next_n(
            "* * * * *",
            "America/New_York",
            "2026-03-08T01:58:30-05:00",
            2
        ),
        ["2026-03-08T01:59:00-05:00", "2026-03-08T03:00:00-04:00"]
    );
    assert_eq!(
        next_n(
            "* * * * *",
            "America/New_York",
            "2026-11-01T01:59:00-04:00",
            2
        ),
        ["2026-11-01T01:00:00-05:00", "2026-11-01T01:01:00-05:00"]
    );
    assert_eq!(
        fires_on("* * * * *", "America/New_York", "2026-03-08"),
        23 * 60
    );
    assert_eq!(
        fires_on("* * * * *", "America/New_York", "2026-11-01"),
        25 * 60
    );
    assert_eq!(fires_on("30 2 * * *", "America/New_York", "2026-03-08"), 1);
    assert_eq!(fires_on("30 1 * * *", "America/New_York", "2026-11-01"), 1);
}

// Australia/Lord_Howe: a 30-minute change. 2026-04-05 02:00 (+11) -> 01:30 (+10:30);
// 2026-10-04 02:00 (+10:30) -> 02:30 (+11).

#[test]
fn lord_howe_half_hour_changes_terminate_and_fire_once() {
    assert_eq!(
        next_n(
            "15 2 * * *",
            "Australia/Lord_Howe",
            "2026-10-03T12:00:00+10:30",
            2
        ),
        ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"]
    );
    assert_eq!(
        next_n(
            "45 1 * * *",
            "Australia/Lord_Howe",
            "2026-04-04T12:00:00+11:00",
            2
        ),
        ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"]
    );
    assert_eq!(
        next_n(
            "0 * * * *",
            "Australia/Lord_Howe",
            "2026-10-04T00:30:00+10:30",
            3
        ),
        [
            "2026-10-04T01:00:00+10:30",
            "2026-10-04T02:30:00+11:00",
            "2026-10-04T03:00:00+11:00"
        ]
    );
    assert_eq!(
        fires_on("* * * * *", "Australia/Lord_Howe", "2026-10-04"),
        24 * 60 - 30
    );
    assert_eq!(
        fires_on("* * * * *", "Australia/Lord_Howe", "2026-04-05"),
        24 * 60 + 30
    );
}

#[test]
fn fires_strictly_increase_through_a_year_of_changes() {
    for zone in ["Europe/Paris", "America/New_York", "Australia/Lord_Howe"] {
        for expr in [
            "*/30 * * * *",
            "30 2 * * *",
            "0 1-3 * * *",
            "*/20 1,2 * * *",
        ] {
            let s = Schedule::parse(expr, zone).unwrap();
            let fires = s.fires_between(
                ts("2026-01-01T00:00:00Z"),
                ts("2027-01-01T00:00:00Z"),
                100_000,
            );
            assert!(fires.len() > 300, "{expr} in {zone}: {}", fires.len());
            assert!(fires.windows(2).all(|w| w[0] < w[1]), "{expr} in {zone}");
        }
    }
}

#[test]
fn seconds_field_fires_every_matching_second() {
    assert_eq!(
        next_n("*/20 * * * * *", "UTC", "2026-05-01T10:00:00.5Z", 4),
        [
            "2026-05-01T10:00:20+00:00",
            "2026-05-01T10:00:40+00:00",
            "2026-05-01T10:01:00+00:00",
            "2026-05-01T10:01:20+00:00"
        ]
    );
    assert_eq!(
        next_n(
            "30 0 12 * * *",
            "Europe/Paris",
            "2026-05-01T12:00:30+02:00",
            1
        ),
        ["2026-05-02T12:00:30+02:00"]
    );
    // A fraction of a second before a match still reaches it.
    assert_eq!(
        next_n("* * * * * *", "UTC", "2026-05-01T10:00:00.999Z", 1),
        ["2026-05-01T10:00:01+00:00"]
    );
}

#[test]
fn next_after_is_strictly_after() {
    assert_eq!(
        next_n("0 9 * * *", "UTC", "2026-05-01T09:00:00Z", 1),
        ["2026-05-02T09:00:00+00:00"]
    );
}

#[test]
fn leap_day_fires_in_the_next_leap_year() {
    assert_eq!(
        next_n("0 0 29 2 *", "UTC", "2027-01-01T00:00:00Z", 2),
        ["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"]
    );
    assert_eq!(
        next_n("0 0 29 2 *", "Europe/Paris", "2027-01-01T00:00:00Z", 1),
        ["2028-02-29T00:00:00+01:00"]
    );
    // 2100 is not a leap year.
    assert_eq!(
        next_n("0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", 1),
        ["2104-02-29T00:00:00+00:00"]
    );
}

/// A schedule that never fires, made past `parse`'s refusal.
fn impossible(expr: &str, zone: &str) -> Schedule {
    let cron = crate::Cron::parse_unchecked(expr).unwrap();
    let tz = jiff::tz::TimeZone::get(zone).unwrap();
    Schedule::new(cron, tz, zone)
}

#[test]
fn impossible_schedules_are_refused_with_the_reason() {
    for (expr, reason) in [
        ("0 0 31 2 *", "never fires: February has no 31st"),
        ("0 0 30,31 2 *", "February has no 30th or 31st"),
        (
            "0 0 31 4,6,9,11 *",
            "April, June, September and November have no 31st",
        ),
        ("0 0 0 31 FEB *", "February has no 31st"),
    ] {
        let e = Schedule::parse(expr, "UTC").unwrap_err().to_string();
        assert!(e.contains(reason), "{expr}: {e}");
    }
    // Possible, if rarely: leap days, a day some month has, the OR rule.
    for expr in ["0 0 29 2 *", "0 0 31 2,3 *", "0 0 31 2 MON", "0 0 */31 2 *"] {
        assert!(Schedule::parse(expr, "UTC").is_ok(), "{expr}");
    }
}

#[test]
fn impossible_schedules_say_none_at_once() {
    let started = std::time::Instant::now();
    for zone in ["UTC", "Europe/Paris", "Australia/Lord_Howe"] {
        for expr in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"] {
            // Refused by `parse`; the search must still end if one got in.
            let s = impossible(expr, zone);
            assert_eq!(
                s.next_after(ts("2026-01-01T00:00:00Z")),
                None,
                "{expr} in {zone}"
            );
        }
    }
    // Near the end of the calendar, too.
    let s = impossible("0 0 30 2 *", "UTC");
    assert_eq!(s.next_after(ts("9999-06-01T00:00:00Z")), None);
    let s = Schedule::parse("* * * * *", "UTC").unwrap();
    assert_eq!(s.next_after(Timestamp::MAX), None);
    assert!(s.next_after(ts("9999-12-30T12:00:00Z")).is_some());
    assert!(
        started.elapsed().as_secs() < 20,
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn unknown_time_zone_is_refused_by_name() {
    let err = Schedule::parse("0 9 * * *", "Mars/Olympus").unwrap_err();
    assert!(matches!(err, ScheduleError::TimeZone { .. }));
    let msg = err.to_string();
    assert!(
        msg.starts_with("time zone \"Mars/Olympus\" is not known ("),
        "{msg}"
    );
    assert!(
        msg.ends_with("use an IANA name such as \"Europe/Paris\", \"America/New_York\" or \"UTC\""),
        "{msg}"
    );
    let err = Schedule::parse("0 25 * * *", "UTC").unwrap_err();
    assert_eq!(
        err.to_string(),
        "cron field \"hour\": 25 is out of range 0-23"
    );
}

#[test]
fn local_day_and_its_span() {
    let s = Schedule::parse("@daily", "Europe/Paris").unwrap();
    assert_eq!(
        s.local_day(ts("2026-03-28T23:30:00Z")).to_string(),
        "2026-03-29"
    );
    let (a, b) = s.day_span("2026-03-29".parse().unwrap()).unwrap();
    assert_eq!(b.duration_since(a), SignedDuration::from_hours(23));
    let (a, b) = s.day_span("2026-10-25".parse().unwrap()).unwrap();
    assert_eq!(b.duration_since(a), SignedDuration::from_hours(25));
}

#[test]
fn fires_between_and_last_fires_agree() {
    let s = Schedule::parse("*/7 * * * *", "America/New_York").unwrap();
    let (from, to) = (
        ts("2026-11-01T00:00:00-04:00"),
        ts("2026-11-01T06:00:00-05:00"),
    );
    let all = s.fires_between(from, to, 10_000);
    assert_eq!(s.fires_between(from, to, 5), all[..5]);
    assert_eq!(s.last_fires(from, to, 3), all[all.len() - 3..]);
    assert_eq!(s.last_fires(from, to, 10_000), all);
    assert_eq!(s.count_between(from, to, 10_000), (all.len() as u64, false));
    assert_eq!(s.count_between(from, to, 4), (4, true));
}
