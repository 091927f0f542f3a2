//! Every cron field form, the macros, the day OR rule and every error message.

use crate::{Cron, CronError};
use jiff::civil::{DateTime, date};

fn cron(expr: &str) -> Cron {
    Cron::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

fn err(expr: &str) -> String {
    Cron::parse(expr).expect_err(expr).to_string()
}

/// The minutes of 2026-05-04 (a Monday) 10:xx that match.
fn minutes(expr: &str) -> Vec<i8> {
    let c = cron(expr);
    (0..60)
        .filter(|m| c.matches(date(2026, 5, 4).at(10, *m, 0, 0)))
        .collect()
}

/// The hours of 2026-05-04 that match (at minute 0).
fn hours(expr: &str) -> Vec<i8> {
    let c = cron(expr);
    (0..24)
        .filter(|h| c.matches(date(2026, 5, 4).at(*h, 0, 0, 0)))
        .collect()
}

/// The days of May 2026 that match (May 1 is a Friday).
fn days(expr: &str) -> Vec<i8> {
    let c = cron(expr);
    (1..=31)
        .filter(|d| c.matches(date(2026, 5, *d).at(0, 0, 0, 0)))
        .collect()
}

/// The months of 2026 whose 1st matches.
fn months(expr: &str) -> Vec<i8> {
    let c = cron(expr);
    (1..=12)
        .filter(|m| c.matches(date(2026, *m, 1).at(0, 0, 0, 0)))
        .collect()
}

/// Weekdays (Sunday = 0) of the week of 2026-05-03 (a Sunday) that match.
fn weekdays(expr: &str) -> Vec<i8> {
    let c = cron(expr);
    (0..7)
        .filter(|i| c.matches(date(2026, 5, 3 + *i).at(0, 0, 0, 0)))
        .collect()
}

#[test]
fn star_number_range_step_and_list() {
    assert_eq!(minutes("* 10 * * *").len(), 60);
    assert_eq!(minutes("7 10 * * *"), [7]);
    assert_eq!(minutes("5-9 10 * * *"), [5, 6, 7, 8, 9]);
    assert_eq!(minutes("*/15 10 * * *"), [0, 15, 30, 45]);
    assert_eq!(minutes("10-30/10 10 * * *"), [10, 20, 30]);
    assert_eq!(minutes("50/3 10 * * *"), [50, 53, 56, 59]);
    assert_eq!(minutes("1,2,40 10 * * *"), [1, 2, 40]);
    assert_eq!(
        minutes("0,5-7,*/20,58/1 10 * * *"),
        [0, 5, 6, 7, 20, 40, 58, 59]
    );
    assert_eq!(minutes("0-59/30 10 * * *"), [0, 30]);
    assert_eq!(hours("0 */6 * * *"), [0, 6, 12, 18]);
    assert_eq!(hours("0 9-17/4 * * *"), [9, 13, 17]);
    assert_eq!(hours("0 23 * * *"), [23]);
    assert_eq!(days("0 0 1,15,31 * *"), [1, 15, 31]);
    assert_eq!(days("0 0 */10 * *"), [1, 11, 21, 31]);
    assert_eq!(months("0 0 1 */3 *"), [1, 4, 7, 10]);
    assert_eq!(months("0 0 1 2-4 *"), [2, 3, 4]);
}

#[test]
fn names_in_any_case() {
    assert_eq!(months("0 0 1 JAN-MAR *"), [1, 2, 3]);
    assert_eq!(months("0 0 1 jan,Jun,DEC *"), [1, 6, 12]);
    assert_eq!(months("0 0 1 feb-dec/5 *"), [2, 7, 12]);
    assert_eq!(weekdays("0 0 * * MON-FRI"), [1, 2, 3, 4, 5]);
    assert_eq!(weekdays("0 0 * * sun,Sat"), [0, 6]);
    assert_eq!(weekdays("0 0 * * FRI-SUN"), [0, 5, 6]);
}

#[test]
fn sunday_is_0_and_7() {
    assert_eq!(weekdays("0 0 * * 0"), [0]);
    assert_eq!(weekdays("0 0 * * 7"), [0]);
    assert_eq!(weekdays("0 0 * * 5-7"), [0, 5, 6]);
    assert_eq!(weekdays("0 0 * * *"), [0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(weekdays("0 0 * * */2"), [0, 2, 4, 6]);
}

#[test]
fn day_of_month_or_day_of_week_when_both_are_restricted() {
    // May 2026: Fridays are 1, 8, 15, 22, 29.
    assert_eq!(days("0 0 13 * FRI"), [1, 8, 13, 15, 22, 29]);
    assert_eq!(days("0 0 13 * *"), [13]);
    assert_eq!(days("0 0 * * FRI"), [1, 8, 15, 22, 29]);
    // A field that begins with `*` is not a restriction in Vixie's sense: both must match.
    assert_eq!(days("0 0 */2 * FRI"), [1, 15, 29]);
    assert_eq!(days("0 0 1-7 * */7"), [3]);
}

#[test]
fn seconds_field_is_first_of_six() {
    let c = cron("*/20 30 9 * * *");
    assert!(c.has_seconds());
    assert!(c.matches(date(2026, 5, 4).at(9, 30, 40, 0)));
    assert!(!c.matches(date(2026, 5, 4).at(9, 30, 41, 0)));
    let five = cron("30 9 * * *");
    assert!(!five.has_seconds());
    assert!(five.matches(date(2026, 5, 4).at(9, 30, 0, 0)));
    assert!(!five.matches(date(2026, 5, 4).at(9, 30, 1, 0)));
}

#[test]
fn macros_equal_their_expansions() {
    for (name, expansion) in [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ] {
        let (a, b) = (cron(name), cron(expansion));
        let mut t = date(2026, 1, 1).at(0, 0, 0, 0);
        let end = date(2028, 1, 1).at(0, 0, 0, 0);
        for _ in 0..30 {
            let (na, nb) = (a.next_local(t, end), b.next_local(t, end));
            assert_eq!(na, nb, "{name}");
            let Some(n) = na else { break };
            t = n.checked_add(jiff::SignedDuration::from_secs(1)).unwrap();
        }
        assert_eq!(a.as_str(), name);
    }
    assert_eq!(
        cron("@weekly").next_local(date(2026, 5, 4).at(0, 0, 0, 0), DateTime::MAX),
        Some(date(2026, 5, 10).at(0, 0, 0, 0))
    );
    assert!(cron("@hourly").is_interval());
    assert!(!cron("@daily").is_interval());
}

#[test]
fn interval_or_fixed_time() {
    assert!(cron("* * * * *").is_interval());
    assert!(cron("*/10 1 * * *").is_interval());
    assert!(cron("0 * * * *").is_interval());
    assert!(cron("* 0 1 * * *").is_interval());
    assert!(!cron("30 1 * * *").is_interval());
    assert!(!cron("0,30 1-3 * * *").is_interval());
}

#[test]
fn next_local_is_bounded_and_inclusive() {
    let c = cron("0 12 * * *");
    let noon = date(2026, 5, 4).at(12, 0, 0, 0);
    assert_eq!(c.next_local(noon, DateTime::MAX), Some(noon));
    assert_eq!(
        c.next_local(date(2026, 5, 4).at(12, 0, 0, 1), DateTime::MAX),
        Some(date(2026, 5, 5).at(12, 0, 0, 0))
    );
    assert_eq!(c.next_local(date(2026, 5, 4).at(0, 0, 0, 0), noon), None);
    // Month ends, year ends.
    assert_eq!(
        cron("0 0 31 * *").next_local(date(2026, 4, 1).at(0, 0, 0, 0), DateTime::MAX),
        Some(date(2026, 5, 31).at(0, 0, 0, 0))
    );
    assert_eq!(
        cron("59 23 31 12 *").next_local(date(2026, 12, 31).at(23, 59, 0, 1), DateTime::MAX),
        Some(date(2027, 12, 31).at(23, 59, 0, 0))
    );
    assert_eq!(
        Cron::parse_unchecked("0 0 30 2 *").unwrap().next_local(
            date(2026, 1, 1).at(0, 0, 0, 0),
            date(2500, 1, 1).at(0, 0, 0, 0)
        ),
        None
    );
}

#[test]
fn error_messages_name_the_field_the_token_and_what_is_allowed() {
    assert_eq!(
        err("0 24 * * *"),
        "cron field \"hour\": 24 is out of range 0-23"
    );
    assert_eq!(
        err("60 * * * *"),
        "cron field \"minute\": 60 is out of range 0-59"
    );
    assert_eq!(
        err("61 * * * * *"),
        "cron field \"second\": 61 is out of range 0-59"
    );
    assert_eq!(
        err("* * 0 * *"),
        "cron field \"day-of-month\": 0 is out of range 1-31"
    );
    assert_eq!(
        err("* * 32 * *"),
        "cron field \"day-of-month\": 32 is out of range 1-31"
    );
    assert_eq!(
        err("* * * 13 *"),
        "cron field \"month\": 13 is out of range 1-12"
    );
    assert_eq!(
        err("* * * * 8"),
        "cron field \"day-of-week\": 8 is out of range 0-7"
    );
    assert_eq!(
        err("99999999999 * * * *"),
        "cron field \"minute\": 99999999999 is out of range 0-59"
    );
    assert_eq!(
        err("0 0-024 * * *"),
        "cron field \"hour\": 24 is out of range 0-23"
    );
    assert_eq!(
        err("* * * FOO *"),
        "cron field \"month\": \"FOO\" is not allowed; use a number 1-12, a name JAN-DEC, *, a range a-b, a step */n, a-b/n or a/n, or a list a,b,c"
    );
    assert_eq!(
        err("* * * * MONDAY"),
        "cron field \"day-of-week\": \"MONDAY\" is not allowed; use a number 0-7, a name SUN-SAT, *, a range a-b, a step */n, a-b/n or a/n, or a list a,b,c"
    );
    assert_eq!(
        err("* * JAN * *"),
        "cron field \"day-of-month\": \"JAN\" is not allowed; use a number 1-31, *, a range a-b, a step */n, a-b/n or a/n, or a list a,b,c"
    );
    assert_eq!(
        err("1,,2 * * * *"),
        "cron field \"minute\": \"\" is not allowed; use a number 0-59, *, a range a-b, a step */n, a-b/n or a/n, or a list a,b,c"
    );
    assert_eq!(
        err("-5 * * * *"),
        "cron field \"minute\": \"\" is not allowed; use a number 0-59, *, a range a-b, a step */n, a-b/n or a/n, or a list a,b,c"
    );
    assert_eq!(
        err("30-10 * * * *"),
        "cron field \"minute\": range \"30-10\" is reversed; write the smaller bound first"
    );
    assert_eq!(
        err("* * * DEC-JAN *"),
        "cron field \"month\": range \"DEC-JAN\" is reversed; write the smaller bound first"
    );
    assert_eq!(
        err("*/0 * * * *"),
        "cron field \"minute\": step \"0\" must be a whole number from 1 to 59"
    );
    assert_eq!(
        err("*/60 * * * *"),
        "cron field \"minute\": step \"60\" must be a whole number from 1 to 59"
    );
    assert_eq!(
        err("0 */x * * *"),
        "cron field \"hour\": step \"x\" must be a whole number from 1 to 23"
    );
    assert_eq!(
        err("0 1/ * * *"),
        "cron field \"hour\": step \"\" must be a whole number from 1 to 23"
    );
    assert_eq!(
        err("* * * *"),
        "cron expression \"* * * *\" has 4 fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (second minute hour day-of-month month day-of-week)"
    );
    assert_eq!(
        err("0 0 0 * * * *").split(';').next().unwrap(),
        "cron expression \"0 0 0 * * * *\" has 7 fields"
    );
    assert_eq!(
        err("  "),
        "cron expression is empty; expected 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or a macro such as @daily"
    );
    assert_eq!(
        err("@reboot"),
        "cron macro \"@reboot\" is not supported; expected one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"
    );
    assert!(matches!(
        Cron::parse("0 24 * * *"),
        Err(CronError::OutOfRange { field: "hour", .. })
    ));
}
