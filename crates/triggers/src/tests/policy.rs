//! Catch-up after downtime, overlap and quota decisions.

use crate::{
    CatchUp, Decision, FirePolicy, Overlap, Quota, Running, Schedule, Timestamp, UsedToday,
    catch_up,
};

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn hourly() -> Schedule {
    Schedule::parse("0 * * * *", "UTC").unwrap()
}

fn hours(fires: &[Timestamp]) -> Vec<String> {
    fires
        .iter()
        .map(|f| f.strftime("%H:%M").to_string())
        .collect()
}

// Last fired 10:00, back at 15:30: 11, 12, 13, 14 and 15 o'clock were missed.
const LAST: &str = "2026-05-04T10:00:00Z";
const NOW: &str = "2026-05-04T15:30:00Z";

#[test]
fn catch_up_latest_fires_exactly_the_most_recent() {
    let plan = catch_up(&hourly(), Some(ts(LAST)), ts(NOW), CatchUp::Latest);
    assert_eq!(hours(&plan.fire), ["15:00"]);
    assert_eq!((plan.dropped, plan.dropped_at_least), (4, false));
    assert_eq!(
        plan.dropped_reason(CatchUp::Latest).unwrap(),
        "4 missed fires not caught up (catch_up = \"latest\")"
    );
    assert_eq!(CatchUp::default(), CatchUp::Latest);
}

#[test]
fn catch_up_none_fires_nothing() {
    let plan = catch_up(&hourly(), Some(ts(LAST)), ts(NOW), CatchUp::None);
    assert!(plan.fire.is_empty());
    assert_eq!(plan.dropped, 5);
    assert_eq!(
        plan.dropped_reason(CatchUp::None).unwrap(),
        "5 missed fires not caught up (catch_up = \"none\")"
    );
}

#[test]
fn catch_up_all_fires_every_missed_one_oldest_first_up_to_the_bound() {
    let plan = catch_up(
        &hourly(),
        Some(ts(LAST)),
        ts(NOW),
        CatchUp::All { bound: 10 },
    );
    assert_eq!(
        hours(&plan.fire),
        ["11:00", "12:00", "13:00", "14:00", "15:00"]
    );
    assert_eq!(plan.dropped, 0);
    assert_eq!(plan.dropped_reason(CatchUp::All { bound: 10 }), None);
    let plan = catch_up(
        &hourly(),
        Some(ts(LAST)),
        ts(NOW),
        CatchUp::All { bound: 2 },
    );
    assert_eq!(hours(&plan.fire), ["14:00", "15:00"]);
    assert_eq!(plan.dropped, 3);
    assert_eq!(
        plan.dropped_reason(CatchUp::All { bound: 2 }).unwrap(),
        "3 missed fires not caught up (catch_up = \"all\" with a bound of 2)"
    );
}

#[test]
fn catch_up_with_nothing_missed() {
    let s = hourly();
    // Never fired: a new trigger does not backfill.
    assert_eq!(
        catch_up(&s, None, ts(NOW), CatchUp::All { bound: 10 }).fire,
        []
    );
    // Fired at 15:00, now 15:30.
    let plan = catch_up(
        &s,
        Some(ts("2026-05-04T15:00:00Z")),
        ts(NOW),
        CatchUp::Latest,
    );
    assert_eq!((plan.fire.len(), plan.dropped), (0, 0));
    // A clock behind the record.
    assert_eq!(
        catch_up(&s, Some(ts(NOW)), ts(LAST), CatchUp::Latest).fire,
        []
    );
    // A fire exactly at `now` is due: it counts.
    let plan = catch_up(
        &s,
        Some(ts(LAST)),
        ts("2026-05-04T11:00:00Z"),
        CatchUp::Latest,
    );
    assert_eq!(hours(&plan.fire), ["11:00"]);
    assert_eq!(plan.dropped_reason(CatchUp::Latest), None);
}

#[test]
fn catch_up_after_a_long_outage_of_a_dense_schedule_is_quick_and_capped() {
    let started = std::time::Instant::now();
    let s = Schedule::parse("* * * * * *", "Europe/Paris").unwrap();
    let (last, now) = (ts("2026-01-01T00:00:00Z"), ts("2026-02-01T00:00:00.5Z"));
    let plan = catch_up(&s, Some(last), now, CatchUp::All { bound: 3 });
    assert_eq!(
        plan.fire,
        [
            ts("2026-01-31T23:59:58Z"),
            ts("2026-01-31T23:59:59Z"),
            ts("2026-02-01T00:00:00Z")
        ]
    );
    assert!(plan.dropped_at_least);
    assert_eq!(
        plan.dropped_reason(CatchUp::All { bound: 3 }).unwrap(),
        "at least 10000 missed fires not caught up (catch_up = \"all\" with a bound of 3)"
    );
    // A sparse schedule with a fire long ago.
    let yearly = Schedule::parse("@yearly", "UTC").unwrap();
    let plan = catch_up(
        &yearly,
        Some(ts("2020-01-01T00:00:00Z")),
        ts("2026-05-04T00:00:00Z"),
        CatchUp::Latest,
    );
    assert_eq!(plan.fire, [ts("2026-01-01T00:00:00Z")]);
    assert_eq!(plan.dropped, 5);
    assert!(
        started.elapsed().as_secs() < 20,
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn catch_up_across_the_repeated_hour() {
    let s = Schedule::parse("30 2 * * *", "Europe/Paris").unwrap();
    let plan = catch_up(
        &s,
        Some(ts("2026-10-24T00:00:00Z")),
        ts("2026-10-27T00:00:00Z"),
        CatchUp::All { bound: 10 },
    );
    // 02:30 CEST, the first 02:30 of the 25th (not the second), then 02:30 CET.
    assert_eq!(
        plan.fire,
        [
            ts("2026-10-24T00:30:00Z"),
            ts("2026-10-25T00:30:00Z"),
            ts("2026-10-26T01:30:00Z")
        ]
    );
}

#[test]
fn policy_names_parse_and_unknown_ones_are_refused() {
    assert_eq!("none".parse(), Ok(CatchUp::None));
    assert_eq!("latest".parse(), Ok(CatchUp::Latest));
    assert_eq!(
        "all".parse(),
        Ok(CatchUp::All {
            bound: crate::policy::DEFAULT_CATCH_UP_BOUND
        })
    );
    assert_eq!("skip".parse(), Ok(Overlap::Skip));
    assert_eq!("queue".parse(), Ok(Overlap::Queue));
    assert_eq!("allow".parse(), Ok(Overlap::Allow));
    assert_eq!(Overlap::default(), Overlap::Skip);
    assert_eq!(
        "newest".parse::<CatchUp>().unwrap_err().to_string(),
        "catch_up = \"newest\" is not allowed; use \"none\", \"latest\" or \"all\""
    );
    assert_eq!(
        "parallel".parse::<Overlap>().unwrap_err().to_string(),
        "overlap = \"parallel\" is not allowed; use \"skip\", \"queue\" or \"allow\""
    );
}

const IDLE: Running = Running {
    running: 0,
    queued: 0,
};
const BUSY: Running = Running {
    running: 1,
    queued: 0,
};

fn policy(overlap: Overlap, runs: Option<u32>, cost: Option<f64>) -> FirePolicy {
    FirePolicy {
        overlap,
        quota: Quota {
            max_runs_per_day: runs,
            max_cost_usd_per_day: cost,
        },
    }
}

#[test]
fn overlap_decisions() {
    let none = UsedToday::default();
    assert_eq!(FirePolicy::default().decide(IDLE, none), Decision::Fire);
    assert_eq!(
        FirePolicy::default().decide(BUSY, none),
        Decision::Skip {
            reason: "a run of this trigger is still running (overlap = \"skip\")".into()
        }
    );
    assert_eq!(
        policy(Overlap::Allow, None, None).decide(
            Running {
                running: 3,
                queued: 0
            },
            none
        ),
        Decision::Fire
    );
    assert_eq!(
        policy(Overlap::Queue, None, None).decide(BUSY, none),
        Decision::Queue { reason: "a run of this trigger is still running; this fire waits for it (overlap = \"queue\")".into() }
    );
    assert_eq!(
        policy(Overlap::Queue, None, None).decide(Running { running: 2, queued: 1 }, none),
        Decision::Skip {
            reason: "2 runs of this trigger are still running and a fire is already queued behind it (overlap = \"queue\" holds one)".into()
        }
    );
}

#[test]
fn the_fourth_fire_past_a_three_per_day_quota_is_refused() {
    let p = policy(Overlap::Skip, Some(3), None);
    for runs in 0..3 {
        assert_eq!(
            p.decide(
                IDLE,
                UsedToday {
                    runs,
                    cost_usd: 0.0
                }
            ),
            Decision::Fire
        );
    }
    let d = p.decide(
        IDLE,
        UsedToday {
            runs: 3,
            cost_usd: 0.0,
        },
    );
    assert_eq!(
        d,
        Decision::Refuse {
            reason:
                "daily run quota reached: 3 of 3 runs already started today (max_runs_per_day = 3)"
                    .into()
        }
    );
    assert_eq!(
        d.to_string(),
        "refused: daily run quota reached: 3 of 3 runs already started today (max_runs_per_day = 3)"
    );
    // The quota wins over overlap: refused, not skipped.
    assert!(matches!(
        p.decide(
            BUSY,
            UsedToday {
                runs: 3,
                cost_usd: 0.0
            }
        ),
        Decision::Refuse { .. }
    ));
    assert!(matches!(
        p.decide(
            BUSY,
            UsedToday {
                runs: 2,
                cost_usd: 0.0
            }
        ),
        Decision::Skip { .. }
    ));
}

#[test]
fn cost_quota() {
    let p = policy(Overlap::Skip, None, Some(1.0));
    assert_eq!(
        p.decide(
            IDLE,
            UsedToday {
                runs: 50,
                cost_usd: 0.99
            }
        ),
        Decision::Fire
    );
    assert_eq!(
        p.decide(
            IDLE,
            UsedToday {
                runs: 50,
                cost_usd: 1.2
            }
        ),
        Decision::Refuse {
            reason:
                "daily cost quota reached: $1.20 spent of $1.00 today (max_cost_usd_per_day = 1)"
                    .into()
        }
    );
}
