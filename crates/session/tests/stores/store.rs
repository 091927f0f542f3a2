//! The session stores against the contract of `SessionStore`: one conformance
//! suite run against both backends, then what is particular to each (SQLite's
//! migrations, blobs, derived tables and concurrency; the file store's torn
//! writes), and a real multi-process test.
//!
//! Concurrency tests check outcomes (every event stored once, dense seqs, a
//! sound database), never timings, so a loaded machine only makes them slower.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use agentfile_config::Config;
use agentfile_session::postgres::{Options as PgOptions, PgStore};
use agentfile_session::{
    self as session, FireKind, FireOutcome, FireRecord, Owner, OwnerRecord, SessionStatus,
    SessionStore, SqliteStore, StoreError, new_session_id,
};
use agentfile_wire::events::{Event, EventBody};
use serde_json::json;

/// Declares one `#[test]` per conformance case for each backend.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod sqlite_backend {
            $( #[test] fn $case() { super::$case(super::Kind::Sqlite) } )*
        }
        mod file_backend {
            $( #[test] fn $case() { super::$case(super::Kind::File) } )*
        }
        mod postgres_backend {
            $( #[test] fn $case() {
                if super::pg::available() {
                    super::$case(super::Kind::Postgres)
                }
            } )*
        }
    };
}

conformance!(
    create_get_and_list,
    events_read_back_exactly,
    events_after_a_seq,
    event_pages_are_the_start_of_the_events,
    out_of_order_writes_nothing,
    status_follows_events,
    set_status_sticks_until_the_next_status_event,
    batches_are_all_or_nothing,
    approvals_first_decision_wins,
    reopen_sees_everything,
    racing_writers_of_one_session,
    threads_on_many_sessions,
    a_session_whose_owner_died_reads_interrupted,
    owners_elsewhere_are_judged_by_their_heartbeat,
    reap_orphans_writes_interrupted_down,
    heartbeat_refreshes_only_our_own_sessions,
    task_owners_are_durable,
    a_sessions_principal_is_durable_and_fixed,
    run_settings_are_durable,
    a_fire_is_claimed_once,
    fire_history_is_newest_first,
    last_fire_is_the_latest_fired_or_skipped_instant,
    quota_counts_fired_only,
    racing_claims_each_fire_once,
    one_claimer_of_many_takes_an_interrupted_session,
    pages_walk_newest_first_without_gaps,
    pages_fill_past_rows_the_rules_refuse,
    summaries_read_trigger_end_and_usage,
    replayed_events_read_back_as_written,
);

fn running(id: &str) -> session::SessionMeta {
    session::SessionMeta {
        status: SessionStatus::Running,
        ..meta(id)
    }
}

fn a_session_whose_owner_died_reads_interrupted(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    // Created running by this (live) process: it owns it.
    store.create(&running("live")).unwrap();
    let me = store.owner("live").unwrap().unwrap();
    assert_eq!(me.owner, *agentfile_session::Owner::current());
    assert_eq!(store.get("live").unwrap().status, SessionStatus::Running);

    for (id, status) in [
        ("dead", SessionStatus::Running),
        ("dead-queued", SessionStatus::Queued),
        ("dead-done", SessionStatus::Completed),
        ("dead-waiting", SessionStatus::WaitingApproval),
    ] {
        store
            .create(&session::SessionMeta { status, ..meta(id) })
            .unwrap();
        store
            .record_owner(id, &dead_owner(&ago(Duration::ZERO)))
            .unwrap();
    }
    // On this machine the pid decides at once, however fresh the heartbeat.
    assert_eq!(
        store.get("dead").unwrap().status,
        SessionStatus::Interrupted
    );
    assert_eq!(
        store.get("dead-queued").unwrap().status,
        SessionStatus::Interrupted
    );
    // Only queued and running sessions are held by a process.
    assert_eq!(
        store.get("dead-done").unwrap().status,
        SessionStatus::Completed
    );
    assert_eq!(
        store.get("dead-waiting").unwrap().status,
        SessionStatus::WaitingApproval
    );
    let ids =
        |v: Vec<session::SessionMeta>| v.into_iter().map(|m| m.id).collect::<BTreeSet<String>>();
    assert_eq!(
        ids(store.list(Some(SessionStatus::Interrupted), 10).unwrap()),
        BTreeSet::from(["dead".to_owned(), "dead-queued".to_owned()])
    );
    assert_eq!(
        ids(store.list(Some(SessionStatus::Running), 10).unwrap()),
        BTreeSet::from(["live".to_owned()])
    );
    let all = store.list(None, 10).unwrap();
    let dead = all.iter().find(|m| m.id == "dead").unwrap();
    assert_eq!(dead.status, SessionStatus::Interrupted);

    // A run that resumes it (appending `run_started`) owns it again.
    store.append(&Log::new("dead").push(run_started())).unwrap();
    assert_eq!(store.get("dead").unwrap().status, SessionStatus::Running);
    assert_eq!(store.owner("dead").unwrap().unwrap().owner, me.owner);
}

fn owners_elsewhere_are_judged_by_their_heartbeat(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    let stale = ago(session::owner::STALE_AFTER + Duration::from_secs(5));
    let fresh = ago(Duration::from_secs(1));
    for id in ["fresh", "stale"] {
        store
            .create(&session::SessionMeta {
                created_at: stale.clone(),
                updated_at: stale.clone(),
                ..running(id)
            })
            .unwrap();
    }
    store.record_owner("fresh", &remote_owner(&fresh)).unwrap();
    store.record_owner("stale", &remote_owner(&stale)).unwrap();
    assert_eq!(store.get("fresh").unwrap().status, SessionStatus::Running);
    assert_eq!(
        store.get("stale").unwrap().status,
        SessionStatus::Interrupted
    );
    // Its events count as signs of life too.
    let mut log = Log::new("stale");
    let mut e = log.push(EventBody::Warning {
        message: "still here".into(),
    });
    e.ts = fresh.clone();
    store.append(&e).unwrap();
    assert_eq!(store.get("stale").unwrap().status, SessionStatus::Running);
}

fn reap_orphans_writes_interrupted_down(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&running("live")).unwrap();
    store.create(&running("orphan")).unwrap();
    store.create(&meta("orphan-queued")).unwrap();
    store.create(&meta("done")).unwrap();
    store.set_status("done", SessionStatus::Completed).unwrap();
    for id in ["orphan", "orphan-queued", "done"] {
        store
            .record_owner(id, &dead_owner(&ago(Duration::ZERO)))
            .unwrap();
    }
    let mut reaped = store.reap_orphans().unwrap();
    reaped.sort();
    assert_eq!(reaped, ["orphan", "orphan-queued"]);
    // Written down: another store (another process) reads it so even without
    // looking at owners, and a second reap finds nothing.
    assert!(store.reap_orphans().unwrap().is_empty());
    let again = kind.open(dir.path());
    assert_eq!(
        again.get("orphan").unwrap().status,
        SessionStatus::Interrupted
    );
    assert_eq!(again.get("live").unwrap().status, SessionStatus::Running);
    assert_eq!(again.get("done").unwrap().status, SessionStatus::Completed);
    assert_eq!(
        again
            .list(Some(SessionStatus::Interrupted), 10)
            .unwrap()
            .len(),
        2
    );
}

fn heartbeat_refreshes_only_our_own_sessions(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    let old = ago(Duration::from_secs(3600));
    store.create(&running("mine")).unwrap();
    store.create(&running("theirs")).unwrap();
    let mine = OwnerRecord {
        owner: agentfile_session::Owner::current().clone(),
        heartbeat_at: old.clone(),
    };
    store.record_owner("mine", &mine).unwrap();
    store.record_owner("theirs", &remote_owner(&old)).unwrap();
    store.heartbeat("mine").unwrap();
    store.heartbeat("theirs").unwrap();
    assert!(store.owner("mine").unwrap().unwrap().heartbeat_at > old);
    assert_eq!(store.owner("theirs").unwrap().unwrap().heartbeat_at, old);
}

fn create_get_and_list(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    for (i, id) in ["s-a", "s-b", "s-c"].iter().enumerate() {
        store.create(&meta_at(id, i as u64)).unwrap();
    }
    assert_eq!(store.get("s-b").unwrap(), meta_at("s-b", 1));
    let ids = |v: Vec<session::SessionMeta>| v.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(ids(store.list(None, 10).unwrap()), ["s-c", "s-b", "s-a"]);
    assert_eq!(ids(store.list(None, 2).unwrap()), ["s-c", "s-b"]);
    assert!(store.list(None, 0).unwrap().is_empty());
    store.set_status("s-a", SessionStatus::Failed).unwrap();
    assert_eq!(
        ids(store.list(Some(SessionStatus::Failed), 10).unwrap()),
        ["s-a"]
    );
    assert!(
        store
            .list(Some(SessionStatus::Completed), 10)
            .unwrap()
            .is_empty()
    );

    assert!(matches!(
        store.create(&meta("s-a")),
        Err(StoreError::AlreadyExists(id)) if id == "s-a"
    ));
    for bad in ["", "../escape", "a/b", "a.json", "-x"] {
        assert!(
            matches!(store.create(&meta(bad)), Err(StoreError::InvalidId(_))),
            "{bad:?}"
        );
    }
    for missing in ["nope", "../etc/passwd"] {
        assert!(matches!(store.get(missing), Err(StoreError::NotFound(_))));
        assert!(matches!(
            store.events(missing, 0),
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.set_status(missing, SessionStatus::Running),
            Err(StoreError::NotFound(_))
        ));
    }
    let id = new_session_id();
    store.create(&meta(&id)).unwrap();
    assert_eq!(store.get(&id).unwrap().id, id);
}

fn pages_walk_newest_first_without_gaps(kind: Kind) {
    use session::{Cursor, SessionQuery};
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    // 25 sessions, three to a timestamp (ties are ordered by id), two
    // workflows; every fifth failed; one with an input to search for.
    for i in 0..25u64 {
        let mut m = meta_at(&format!("s-{i:02}"), i / 3);
        m.workflow = if i % 2 == 0 { "even" } else { "odd_1%" }.into();
        if i == 7 {
            m.inputs.insert("q".into(), "Needle_50%".into());
        }
        store.create(&m).unwrap();
        if i % 5 == 0 {
            store.set_status(&m.id, SessionStatus::Failed).unwrap();
        }
    }
    let walk = |q: SessionQuery| {
        let mut q = SessionQuery { limit: 4, ..q };
        let mut seen = Vec::new();
        loop {
            let page = store.page(&q).unwrap();
            assert!(page.len() <= 4);
            seen.extend(page.iter().map(|m| m.id.clone()));
            match page.last() {
                Some(last) if page.len() == 4 => {
                    let cursor = Cursor::after(last);
                    assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor.clone()));
                    q.before = Some(cursor);
                }
                _ => return seen,
            }
        }
    };
    let all = walk(SessionQuery::default());
    let listed: Vec<String> = store
        .list(None, 100)
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(all, listed, "pages, one after another, are the list");
    assert_eq!(all.len(), 25);
    let failed = walk(SessionQuery {
        status: Some(SessionStatus::Failed),
        ..Default::default()
    });
    assert_eq!(failed, ["s-20", "s-15", "s-10", "s-05", "s-00"]);
    let odd = walk(SessionQuery {
        workflow: Some("odd_1%".into()),
        ..Default::default()
    });
    assert_eq!(odd.len(), 12);
    assert!(
        odd.iter()
            .all(|id| id[2..].parse::<u32>().unwrap() % 2 == 1)
    );
    // `%` and `_` are text to search for, not wildcards; case is ignored.
    for (text, hits) in [
        ("needle_50", 1),
        ("LE_5", 1),
        ("e_5x", 0),
        ("1%", 12),
        ("s-2", 5),
    ] {
        let found = walk(SessionQuery {
            search: Some(text.into()),
            ..Default::default()
        });
        assert_eq!(found.len(), hits, "{text}: {found:?}");
    }
    let mut names = store.workflows().unwrap();
    names.sort();
    assert_eq!(names, ["even", "odd_1%"]);
}

/// The rows a store's query lets through but the rules refuse are skipped,
/// and the page still fills from the rows after them (issue 49): `running`
/// sessions whose owner died read `interrupted`, a word found only in an
/// input's name matches nothing, and filters combine.
fn pages_fill_past_rows_the_rules_refuse(kind: Kind) {
    use session::{Cursor, SessionQuery};
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    // 24 sessions: every other one running here, the rest running for a
    // process that died; the odd ones of each kind are `deploy`.
    for i in 0..24u64 {
        let mut m = running(&format!("r-{i:02}"));
        m.created_at = ts(i);
        m.updated_at = ts(i);
        m.workflow = if i % 4 < 2 { "deploy" } else { "triage" }.into();
        store.create(&m).unwrap();
        if i % 2 == 1 {
            store
                .record_owner(&m.id, &dead_owner(&ago(Duration::ZERO)))
                .unwrap();
        }
    }
    let walk = |q: SessionQuery| {
        let mut q = SessionQuery { limit: 3, ..q };
        let mut seen = Vec::new();
        loop {
            let page = store.page(&q).unwrap();
            assert!(page.iter().all(|m| q.matches(m)), "{kind:?}: {page:?}");
            seen.extend(page.iter().map(|m| m.id.clone()));
            match page.last() {
                Some(last) if page.len() == 3 => q.before = Some(Cursor::after(last)),
                _ => return seen,
            }
        }
    };
    let expect = |f: fn(u64) -> bool| -> Vec<String> {
        (0..24u64)
            .rev()
            .filter(|i| f(*i))
            .map(|i| format!("r-{i:02}"))
            .collect()
    };
    let status = |s| SessionQuery {
        status: Some(s),
        ..Default::default()
    };
    assert_eq!(
        walk(status(SessionStatus::Interrupted)),
        expect(|i| i % 2 == 1)
    );
    assert_eq!(walk(status(SessionStatus::Running)), expect(|i| i % 2 == 0));
    assert!(walk(status(SessionStatus::Queued)).is_empty());
    assert_eq!(
        walk(SessionQuery {
            workflow: Some("deploy".into()),
            search: Some("SAFETY".into()),
            ..status(SessionStatus::Interrupted)
        }),
        expect(|i| i % 4 == 1)
    );
    // `topic` is the inputs' name, not a value; `crash safety` is a value.
    for (text, want) in [("topic", 0), ("crash safety", 24), ("r-1", 10)] {
        let found = walk(SessionQuery {
            search: Some(text.into()),
            ..Default::default()
        });
        assert_eq!(found.len(), want, "{kind:?} {text}: {found:?}");
    }
}

fn summaries_read_trigger_end_and_usage(kind: Kind) {
    use agentfile_wire::events::RunTrigger;
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("done")).unwrap();
    let events = full_run("done");
    store.append_batch(&events).unwrap();
    let s = store.summary("done").unwrap();
    assert_eq!(s.trigger, None);
    assert_eq!(
        s.ended_at.as_deref(),
        Some(events.last().unwrap().ts.as_str())
    );
    assert_eq!(
        s.usage,
        Some(usage()),
        "a finished run: its terminal totals"
    );

    store.create(&meta("going")).unwrap();
    let mut log = Log::new("going");
    let mut started = run_started();
    if let EventBody::RunStarted { trigger, .. } = &mut started {
        *trigger = Some(Box::new(RunTrigger {
            id: "nightly#0".into(),
            kind: "schedule".into(),
            fired_at: ts(1),
            scheduled_for: None,
            delivery_id: None,
            event_id: None,
        }));
    }
    log.push(started);
    for (input, cost) in [(10, Some(0.5)), (32, Some(0.25))] {
        log.push(EventBody::LlmResponse {
            model: "m".into(),
            turn: 1,
            input_tokens: input,
            output_tokens: 3,
            latency_ms: 1,
            cost_usd: cost,
            stop_reason: "tool_use".into(),
            text: String::new(),
            tool_calls: Vec::new(),
        });
        log.push(EventBody::ToolCall {
            id: format!("c{input}"),
            tool: "bash".into(),
            arguments: json!({}),
        });
    }
    store.append_batch(&log.events).unwrap();
    let s = store.summary("going").unwrap();
    assert_eq!(s.trigger, Some(("nightly#0".into(), "schedule".into())));
    assert_eq!(s.ended_at, None, "still running");
    let u = s.usage.unwrap();
    assert_eq!(
        (
            u.input_tokens,
            u.output_tokens,
            u.turns,
            u.tool_calls,
            u.cost_usd
        ),
        (42, 6, 2, 2, Some(0.75)),
        "a running session: what is stored so far"
    );
    store.create(&meta("new")).unwrap();
    assert_eq!(store.summary("new").unwrap(), Default::default());
    assert!(matches!(
        store.summary("nope"),
        Err(StoreError::NotFound(_))
    ));
    // All at once (a page of the web view): the same, in order; a session
    // that is gone reads as the default.
    let ids: Vec<String> = ["going", "nope", "done", "new"].map(str::to_owned).into();
    let each: Vec<_> = ids
        .iter()
        .map(|id| store.summary(id).unwrap_or_default())
        .collect();
    assert_eq!(store.summaries(&ids).unwrap(), each, "{kind:?}");
    assert_eq!(store.summaries(&[]).unwrap(), Vec::new());
}

fn events_read_back_exactly(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("run")).unwrap();
    let events = full_run("run");
    for e in &events {
        store.append(e).unwrap();
    }
    let back = store.events("run", 0).unwrap();
    assert_eq!(back, events);
    assert_eq!(wire(&back), wire(&events), "byte-for-byte");
    let m = store.get("run").unwrap();
    assert_eq!(m.last_seq, events.len() as u64);
    assert_eq!(m.updated_at, events[events.len() - 1].ts);
    assert_eq!(m.status, SessionStatus::Completed);
    assert_eq!(m.created_at, meta("run").created_at);
}

/// A fork's session (CONTRACT §19): its `run_started` names where it was
/// forked from, the events copied from the other session's journal are
/// `replayed`, the ones its own run produced are not. Each reads back as
/// written, through a single append and a batch, and after reopening; on the
/// wire `replayed` appears only when true.
fn replayed_events_read_back_as_written(kind: Kind) {
    use agentfile_wire::events::ForkedFrom;
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("fork")).unwrap();
    let mut events = small_events("fork", 1, 6);
    for (i, e) in events.iter_mut().enumerate() {
        e.node = Some(if i < 3 { "gather" } else { "review" }.into());
        e.node_kind = Some("goal".into());
        e.replayed = (1..3).contains(&i);
    }
    events[0].body = run_started();
    if let EventBody::RunStarted { forked_from, .. } = &mut events[0].body {
        *forked_from = Some(Box::new(ForkedFrom {
            session: "original".into(),
            node: "review".into(),
        }));
    }
    store.append(&events[0]).unwrap();
    store.append(&events[1]).unwrap();
    store.append_batch(&events[2..]).unwrap();
    let back = store.events("fork", 0).unwrap();
    assert_eq!(back, events, "{kind:?}");
    assert_eq!(
        back.iter().map(|e| e.replayed).collect::<Vec<_>>(),
        [false, true, true, false, false, false]
    );
    let json = wire(&back);
    assert!(!json[0].contains("\"replayed\""), "{}", json[0]);
    assert!(json[0].contains(r#""forked_from":{"session":"original","node":"review"}"#));
    assert!(json[1].contains(r#""replayed":true"#), "{}", json[1]);
    assert!(!json[3].contains("\"replayed\""), "{}", json[3]);
    drop(store);
    let store = kind.open(dir.path());
    assert_eq!(
        store.events("fork", 0).unwrap(),
        events,
        "{kind:?} reopened"
    );
    assert_eq!(store.events("fork", 1).unwrap(), events[1..]);
}

fn events_after_a_seq(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("x")).unwrap();
    let events = small_events("x", 1, 20);
    for e in &events {
        store.append(e).unwrap();
    }
    assert_eq!(store.events("x", 15).unwrap(), events[15..]);
    assert!(store.events("x", 20).unwrap().is_empty());
    assert!(store.events("x", u64::MAX).unwrap().is_empty());
    store.create(&meta("empty")).unwrap();
    assert!(store.events("empty", 0).unwrap().is_empty());
}

/// `events_page`: the start of `events` after a seq, at most a limit, read
/// with the limit in the query (issue 49) — the same answer on every store,
/// and for a log that starts past seq 1 (a session created with a
/// `last_seq`).
fn event_pages_are_the_start_of_the_events(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("x")).unwrap();
    let events = small_events("x", 1, 30);
    store.append_batch(&events).unwrap();
    for after in [0, 1, 7, 29, 30, 31, u64::MAX] {
        let all = store.events("x", after).unwrap();
        for limit in [0, 1, 5, 29, 30, 31, usize::MAX] {
            let page = store.events_page("x", after, limit).unwrap();
            assert_eq!(
                page,
                all[..all.len().min(limit)],
                "after {after}, limit {limit}"
            );
        }
    }
    let mut later = meta("later");
    later.last_seq = 10;
    store.create(&later).unwrap();
    let events = small_events("later", 11, 10);
    store.append_batch(&events).unwrap();
    assert_eq!(store.events_page("later", 0, 3).unwrap(), events[..3]);
    assert_eq!(store.events_page("later", 10, 3).unwrap(), events[..3]);
    assert_eq!(store.events_page("later", 12, 3).unwrap(), events[2..5]);
    assert_eq!(store.events_page("later", 18, 9).unwrap(), events[8..]);
    assert!(store.events_page("later", 20, 9).unwrap().is_empty());
    store.create(&meta("empty")).unwrap();
    assert!(store.events_page("empty", 0, 10).unwrap().is_empty());
    assert!(matches!(
        store.events_page("nope", 0, 10),
        Err(StoreError::NotFound(_))
    ));
}

fn out_of_order_writes_nothing(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("x")).unwrap();
    let events = small_events("x", 1, 3);
    let err = store.append(&events[1]).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::OutOfOrder {
                expected: 1,
                got: 2,
                ..
            }
        ),
        "{err}"
    );
    store.append(&events[0]).unwrap();
    assert!(matches!(
        store.append(&events[0]),
        Err(StoreError::OutOfOrder {
            expected: 2,
            got: 1,
            ..
        })
    ));
    assert_eq!(store.events("x", 0).unwrap(), events[..1]);
    assert_eq!(store.get("x").unwrap().last_seq, 1);
    let orphan = small_events("ghost", 1, 1);
    assert!(matches!(
        store.append(&orphan[0]),
        Err(StoreError::NotFound(id)) if id == "ghost"
    ));

    // A session created with a non-zero last_seq continues from there.
    let mut m = meta("later");
    m.last_seq = 10;
    store.create(&m).unwrap();
    assert!(store.append(&small_events("later", 1, 1)[0]).is_err());
    store.append(&small_events("later", 11, 1)[0]).unwrap();
    assert_eq!(store.get("later").unwrap().last_seq, 11);
}

fn status_follows_events(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    let status = |id: &str| store.get(id).unwrap().status;
    store.create(&meta("x")).unwrap();
    assert_eq!(status("x"), SessionStatus::Queued);
    let mut log = Log::new("x");
    store.append(&log.push(run_started())).unwrap();
    assert_eq!(status("x"), SessionStatus::Running);
    store
        .append(&log.push(EventBody::ApprovalRequired {
            reason: "r".into(),
            deadline_ms: None,
        }))
        .unwrap();
    assert_eq!(status("x"), SessionStatus::WaitingApproval);
    store
        .append(&log.push(EventBody::Warning {
            message: "m".into(),
        }))
        .unwrap();
    assert_eq!(status("x"), SessionStatus::WaitingApproval);
    store
        .append(&log.push(EventBody::ApprovalResolved {
            approved: true,
            note: None,
        }))
        .unwrap();
    assert_eq!(status("x"), SessionStatus::Running);
    store
        .append(&log.push(EventBody::RunComplete {
            outputs: Default::default(),
            usage: usage(),
        }))
        .unwrap();
    assert_eq!(status("x"), SessionStatus::Completed);

    for (id, body, want) in [
        (
            "f",
            EventBody::RunFailed {
                error: "boom".into(),
                termination_reason: agentfile_wire::events::TerminationReason::Error,
                usage: usage(),
            },
            SessionStatus::Failed,
        ),
        (
            "c",
            EventBody::RunCancelled { usage: usage() },
            SessionStatus::Cancelled,
        ),
    ] {
        store.create(&meta(id)).unwrap();
        let mut log = Log::new(id);
        store.append(&log.push(run_started())).unwrap();
        store.append(&log.push(body)).unwrap();
        assert_eq!(status(id), want);
    }
}

fn set_status_sticks_until_the_next_status_event(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("x")).unwrap();
    let mut log = Log::new("x");
    store.append(&log.push(run_started())).unwrap();
    store.set_status("x", SessionStatus::Interrupted).unwrap();
    let m = store.get("x").unwrap();
    assert_eq!(m.status, SessionStatus::Interrupted);
    assert!(m.updated_at >= log.events[0].ts);
    store
        .append(&log.push(EventBody::Warning {
            message: "m".into(),
        }))
        .unwrap();
    assert_eq!(store.get("x").unwrap().status, SessionStatus::Interrupted);
    store.append(&log.push(run_started())).unwrap();
    assert_eq!(store.get("x").unwrap().status, SessionStatus::Running);
    assert_eq!(store.get("x").unwrap().last_seq, 3);
}

fn batches_are_all_or_nothing(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("x")).unwrap();
    store.create(&meta("y")).unwrap();
    let xs = small_events("x", 1, 6);
    store.append_batch(&xs[..3]).unwrap();
    // A gap in the middle: nothing of the batch is written.
    let bad = [xs[3].clone(), xs[5].clone()];
    assert!(matches!(
        store.append_batch(&bad),
        Err(StoreError::OutOfOrder {
            expected: 5,
            got: 6,
            ..
        })
    ));
    assert_eq!(store.events("x", 0).unwrap(), xs[..3]);
    // Interleaved sessions in one batch.
    let ys = small_events("y", 1, 2);
    let mixed = [xs[3].clone(), ys[0].clone(), xs[4].clone(), ys[1].clone()];
    store.append_batch(&mixed).unwrap();
    assert_eq!(store.events("x", 0).unwrap(), xs[..5]);
    assert_eq!(store.events("y", 0).unwrap(), ys);
    store.append_batch(&[]).unwrap();
}

fn approvals_first_decision_wins(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("x")).unwrap();
    assert!(matches!(
        store.record_approval("x", true, None),
        Err(StoreError::NoPendingApproval(_))
    ));
    assert!(matches!(
        store.record_approval("nope", true, None),
        Err(StoreError::NotFound(_))
    ));
    let mut log = Log::new("x");
    store.append(&log.push(run_started())).unwrap();
    let asked = log.push(EventBody::ApprovalRequired {
        reason: "SUPERVISED".into(),
        deadline_ms: None,
    });
    store.append(&asked).unwrap();
    assert_eq!(store.pending_approval("x").unwrap(), Some(asked.seq));
    assert_eq!(store.approval("x", asked.seq).unwrap(), None);

    // Another process's view of the same store decides.
    let other = kind.open(dir.path());
    let a = other
        .record_approval("x", true, Some("looks fine"))
        .unwrap();
    assert_eq!(a.seq_requested, asked.seq);
    assert!(a.approved);
    let again = store.record_approval("x", false, None).unwrap_err();
    assert!(
        matches!(again, StoreError::AlreadyDecided { approved: true, seq, .. } if seq == asked.seq),
        "{again}"
    );
    assert_eq!(store.approval("x", asked.seq).unwrap(), Some(a.clone()));

    store
        .append(&log.push(EventBody::ApprovalResolved {
            approved: true,
            note: a.note.clone(),
        }))
        .unwrap();
    assert_eq!(store.pending_approval("x").unwrap(), None);
    let asked2 = log.push(EventBody::ApprovalRequired {
        reason: "again".into(),
        deadline_ms: None,
    });
    store.append(&asked2).unwrap();
    let r = store.record_approval("x", false, None).unwrap();
    assert_eq!((r.seq_requested, r.approved), (asked2.seq, false));
    assert!(matches!(
        store.approval("nope", 1),
        Err(StoreError::NotFound(_))
    ));
}

fn reopen_sees_everything(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let events = full_run("run");
    {
        let store = kind.open(dir.path());
        store.create(&meta("run")).unwrap();
        for e in &events {
            store.append(e).unwrap();
        }
    }
    let store = kind.open(dir.path());
    assert_eq!(wire(&store.events("run", 0).unwrap()), wire(&events));
    assert_eq!(store.get("run").unwrap().status, SessionStatus::Completed);
}

/// The principal an MCP task belongs to survives the store and leaves the
/// session otherwise alone; sessions not started as tasks have none.
fn task_owners_are_durable(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let events = full_run("task");
    {
        let store = kind.open(dir.path());
        store.create(&meta("task")).unwrap();
        store.create(&meta("plain")).unwrap();
        assert_eq!(store.task_owner("task").unwrap(), None);
        store.set_task_owner("task", "token:abc").unwrap();
        for e in &events {
            store.append(e).unwrap();
        }
        assert!(matches!(
            store.set_task_owner("nobody", "local:1"),
            Err(session::StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.task_owner("nobody"),
            Err(session::StoreError::NotFound(_))
        ));
    }
    let store = kind.open(dir.path());
    assert_eq!(
        store.task_owner("task").unwrap().as_deref(),
        Some("token:abc")
    );
    assert_eq!(store.task_owner("plain").unwrap(), None);
    assert_eq!(store.get("task").unwrap().status, SessionStatus::Completed);
    assert_eq!(wire(&store.events("task", 0).unwrap()), wire(&events));
}

/// The principal a session belongs to (any door's, not only a task's) is
/// recorded once: the same again is a no-op, another is refused and changes
/// nothing, through `set_principal` and `set_task_owner` alike; status
/// changes, events and run settings leave it alone; it survives the store. A
/// task's owner is its principal; a session with no principal is the
/// operator's.
fn a_sessions_principal_is_durable_and_fixed(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let events = full_run("owned");
    {
        let store = kind.open(dir.path());
        for id in ["owned", "task", "plain"] {
            store.create(&meta(id)).unwrap();
        }
        assert_eq!(store.principal("owned").unwrap(), None);
        store.set_principal("owned", "token:alice").unwrap();
        store.set_principal("owned", "token:alice").unwrap();
        for (attempt, who) in [("principal", "token:bob"), ("task", "token:bob")] {
            let r = if attempt == "task" {
                store.set_task_owner("owned", who)
            } else {
                store.set_principal("owned", who)
            };
            assert!(
                matches!(r, Err(session::StoreError::OwnedByAnother(ref id)) if id == "owned"),
                "{kind:?} {attempt}: {r:?}"
            );
        }
        assert_eq!(store.task_owner("owned").unwrap(), None, "{kind:?}");
        for e in &events {
            store.append(e).unwrap();
        }
        store
            .set_status("owned", SessionStatus::Interrupted)
            .unwrap();
        store
            .set_run_settings("owned", &serde_json::json!({"principal": "token:bob"}))
            .unwrap();
        store.set_task_owner("task", "local:1").unwrap();
        assert!(matches!(
            store.set_principal("task", "token:bob"),
            Err(session::StoreError::OwnedByAnother(_))
        ));
        assert!(matches!(
            store.set_principal("nobody", "local:1"),
            Err(session::StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.principal("nobody"),
            Err(session::StoreError::NotFound(_))
        ));
    }
    let store = kind.open(dir.path());
    assert_eq!(
        store.principal("owned").unwrap().as_deref(),
        Some("token:alice"),
        "{kind:?}"
    );
    let ids: Vec<String> = ["task", "nobody", "plain", "owned"]
        .map(str::to_owned)
        .into();
    assert_eq!(
        store.principals(&ids).unwrap(),
        vec![
            Some("local:1".into()),
            None,
            None,
            Some("token:alice".into())
        ],
        "{kind:?}: every row's owner at once, in order"
    );
    assert_eq!(store.principal("task").unwrap().as_deref(), Some("local:1"));
    assert_eq!(
        store.task_owner("task").unwrap().as_deref(),
        Some("local:1")
    );
    assert_eq!(store.principal("plain").unwrap(), None);
    assert_eq!(wire(&store.events("owned", 0).unwrap()), wire(&events));
}

/// The per-call settings a run started with survive the store, are replaced
/// whole, and leave the session otherwise alone.
fn run_settings_are_durable(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let events = full_run("run");
    let settings = serde_json::json!({"model": "m-explicit", "max_turns": 7, "allow": ["bash:ls"]});
    {
        let store = kind.open(dir.path());
        store.create(&meta("run")).unwrap();
        store.create(&meta("plain")).unwrap();
        assert_eq!(store.run_settings("run").unwrap(), None);
        store
            .set_run_settings("run", &serde_json::json!({"model": "old"}))
            .unwrap();
        store.set_run_settings("run", &settings).unwrap();
        for e in &events {
            store.append(e).unwrap();
        }
        assert!(matches!(
            store.set_run_settings("nobody", &settings),
            Err(session::StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.run_settings("nobody"),
            Err(session::StoreError::NotFound(_))
        ));
    }
    let store = kind.open(dir.path());
    assert_eq!(store.run_settings("run").unwrap(), Some(settings));
    assert_eq!(store.run_settings("plain").unwrap(), None);
    assert_eq!(store.get("run").unwrap().status, SessionStatus::Completed);
    assert_eq!(wire(&store.events("run", 0).unwrap()), wire(&events));
}

/// Two writers race to append the next event of one session: every seq is
/// stored exactly once, and each attempt either wins or is told it is late.
fn racing_writers_of_one_session(kind: Kind) {
    const N: u64 = 60;
    let dir = TempDir::new(kind.name());
    kind.open(dir.path()).create(&meta("x")).unwrap();
    let wins: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let path = dir.path().to_owned();
                s.spawn(move || {
                    // Each thread has its own store: two connections, two
                    // file handles, as two processes would.
                    let store = kind.open(&path);
                    let mut wins = 0;
                    loop {
                        let last = store.get("x").unwrap().last_seq;
                        if last >= N {
                            return wins;
                        }
                        match store.append(&small_events("x", last + 1, 1)[0]) {
                            Ok(()) => wins += 1,
                            Err(StoreError::OutOfOrder { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(wins, N);
    let store = kind.open(dir.path());
    assert_eq!(store.events("x", 0).unwrap(), small_events("x", 1, N));
}

/// Two servers starting on one store both try to resume an interrupted
/// task: each has its own store (as processes would), all claim at once, and
/// exactly one gets it, whether the session was written down `interrupted`
/// or still reads `running` from an owner that died.
fn one_claimer_of_many_takes_an_interrupted_session(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    store.create(&meta("stopped")).unwrap();
    store
        .set_status("stopped", SessionStatus::Interrupted)
        .unwrap();
    store.create(&running("crashed")).unwrap();
    store
        .record_owner("crashed", &dead_owner(&ago(Duration::ZERO)))
        .unwrap();
    store.create(&meta("done")).unwrap();
    store.set_status("done", SessionStatus::Completed).unwrap();
    for id in ["stopped", "crashed"] {
        assert_eq!(store.get(id).unwrap().status, SessionStatus::Interrupted);
        let barrier = std::sync::Barrier::new(6);
        let wins: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..6)
                .map(|_| {
                    let (path, barrier) = (dir.path().to_owned(), &barrier);
                    s.spawn(move || {
                        let store = kind.open(&path);
                        barrier.wait();
                        usize::from(store.claim_interrupted(id).unwrap())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(wins, 1, "{id}: claimed {wins} times");
        // Taken: it reads running (this process, alive, owns it).
        let again = kind.open(dir.path());
        assert_eq!(again.get(id).unwrap().status, SessionStatus::Running);
        assert!(!again.claim_interrupted(id).unwrap());
    }
    assert!(!store.claim_interrupted("done").unwrap());
    assert_eq!(store.get("done").unwrap().status, SessionStatus::Completed);
    assert!(matches!(
        store.claim_interrupted("missing"),
        Err(StoreError::NotFound(_))
    ));
}

/// One store shared by several threads, each writing its own session.
fn threads_on_many_sessions(kind: Kind) {
    const THREADS: usize = 4;
    const EVENTS: u64 = 100;
    let dir = TempDir::new(kind.name());
    let store: Arc<dyn SessionStore> = Arc::from(kind.open(dir.path()));
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let store = Arc::clone(&store);
            s.spawn(move || {
                let id = format!("t{t}");
                store.create(&meta(&id)).unwrap();
                for e in small_events(&id, 1, EVENTS) {
                    store.append(&e).unwrap();
                }
            });
        }
    });
    for t in 0..THREADS {
        let id = format!("t{t}");
        assert_eq!(store.events(&id, 0).unwrap(), small_events(&id, 1, EVENTS));
    }
    assert_eq!(store.list(None, 100).unwrap().len(), THREADS);
}

// ---- fire records (issue 33: exactly once across processes) ----

/// A scheduled fire of `trigger` for the instant `n` minutes after a fixed
/// time, fired `late_ms` after it.
fn scheduled_fire(trigger: &str, n: u64, late_ms: u64) -> FireRecord {
    let at = |ms: u64| {
        agentfile_wire::events::rfc3339(
            std::time::UNIX_EPOCH + Duration::from_millis(1_795_341_600_000 + ms),
        )
    };
    let instant = at(n * 60_000);
    FireRecord {
        trigger: trigger.to_owned(),
        kind: FireKind::Schedule,
        key: instant.clone(),
        scheduled_for: Some(instant),
        fired_at: at(n * 60_000 + late_ms),
        outcome: FireOutcome::Fired,
        reason: None,
        session_id: None,
        cost_usd: None,
    }
}

fn webhook_fire(trigger: &str, delivery: &str, fired_at: &str) -> FireRecord {
    FireRecord {
        trigger: trigger.to_owned(),
        kind: FireKind::Webhook,
        key: delivery.to_owned(),
        scheduled_for: None,
        fired_at: fired_at.to_owned(),
        outcome: FireOutcome::Fired,
        reason: None,
        session_id: None,
        cost_usd: None,
    }
}

fn keys(fires: &[FireRecord]) -> Vec<(String, String)> {
    fires
        .iter()
        .map(|f| (f.trigger.clone(), f.key.clone()))
        .collect()
}

fn a_fire_is_claimed_once(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    let first = scheduled_fire("nightly#0", 0, 5);
    assert_eq!(store.fire("nightly#0", &first.key).unwrap(), None);
    assert!(store.claim_fire(&first).unwrap());
    // The second claim of the same instant loses and changes nothing.
    let second = FireRecord {
        fired_at: ts(99),
        outcome: FireOutcome::Skipped,
        reason: Some("late".into()),
        ..first.clone()
    };
    assert!(!store.claim_fire(&second).unwrap());
    assert!(!kind.open(dir.path()).claim_fire(&second).unwrap());
    assert_eq!(
        store.fire("nightly#0", &first.key).unwrap(),
        Some(first.clone())
    );
    // The same key under another trigger is another fire.
    assert!(
        store
            .claim_fire(&FireRecord {
                trigger: "nightly#1".into(),
                ..first.clone()
            })
            .unwrap()
    );
    // Keys that are not file-name material are keys all the same.
    for key in ["a/b", "../x", ".hidden", "x y%20", &"k".repeat(300), "ü"] {
        let f = webhook_fire("hook#0", key, &ts(1));
        assert!(store.claim_fire(&f).unwrap(), "{key}");
        assert!(!store.claim_fire(&f).unwrap(), "{key}");
        assert_eq!(store.fire("hook#0", key).unwrap(), Some(f), "{key}");
    }
    assert_eq!(store.fires(Some("hook#0"), 100).unwrap().len(), 6);

    // Linked to its session after the run starts, then finished and costed.
    store
        .set_fire_session("nightly#0", &first.key, "20261122-100000-abc")
        .unwrap();
    store.set_fire_cost("nightly#0", &first.key, 0.25).unwrap();
    store
        .finish_fire("nightly#0", &first.key, FireOutcome::Refused, Some("quota"))
        .unwrap();
    let reopened = kind.open(dir.path());
    assert_eq!(
        reopened.fire("nightly#0", &first.key).unwrap(),
        Some(FireRecord {
            session_id: Some("20261122-100000-abc".into()),
            cost_usd: Some(0.25),
            outcome: FireOutcome::Refused,
            reason: Some("quota".into()),
            ..first.clone()
        })
    );
    reopened
        .finish_fire("nightly#0", &first.key, FireOutcome::Fired, None)
        .unwrap();
    assert_eq!(
        reopened
            .fire("nightly#0", &first.key)
            .unwrap()
            .unwrap()
            .reason,
        None
    );

    // Nothing claimed, nothing to change.
    for err in [
        store
            .set_fire_session("nightly#0", "never", "s")
            .unwrap_err(),
        store
            .finish_fire("nope#0", "never", FireOutcome::Skipped, None)
            .unwrap_err(),
        store.set_fire_cost("nightly#0", "never", 1.0).unwrap_err(),
    ] {
        assert!(matches!(err, StoreError::NoFire { .. }), "{err}");
    }
    assert_eq!(store.fire("nightly#0", "never").unwrap(), None);
    // A record the history could not order is refused before it is written.
    for bad in [
        FireRecord {
            fired_at: "yesterday".into(),
            key: "bad-1".into(),
            ..first.clone()
        },
        FireRecord {
            scheduled_for: Some("2026-11-22 10:00".into()),
            key: "bad-2".into(),
            ..first.clone()
        },
        FireRecord {
            key: String::new(),
            ..first.clone()
        },
    ] {
        let err = store.claim_fire(&bad).unwrap_err();
        assert!(matches!(err, StoreError::InvalidFire { .. }), "{err}");
        assert_eq!(store.fire("nightly#0", &bad.key).unwrap(), None);
    }
}

fn fire_history_is_newest_first(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    assert!(store.fires(None, 10).unwrap().is_empty());
    // Claimed out of order; one fired late (catch-up) after a later instant.
    let a = scheduled_fire("nightly#0", 1, 0);
    let b = scheduled_fire("nightly#0", 2, 0);
    let late = scheduled_fire("nightly#0", 0, 3 * 60_000);
    let hook = webhook_fire("hook#0", "d-1", &scheduled_fire("x", 1, 30_000).fired_at);
    // A time written with an offset sorts as the instant it names (10:00:30Z,
    // the oldest), not as its text.
    let other_form = FireRecord {
        fired_at: "2026-11-22T12:00:30+02:00".into(),
        ..webhook_fire("hook#0", "d-2", "")
    };
    for f in [&b, &hook, &late, &a, &other_form] {
        assert!(store.claim_fire(f).unwrap());
    }
    let all = store.fires(None, 10).unwrap();
    assert_eq!(
        keys(&all),
        keys(&[
            late.clone(),
            b.clone(),
            hook.clone(),
            a.clone(),
            other_form.clone()
        ])
    );
    assert_eq!(all[0], late);
    assert_eq!(
        keys(&store.fires(Some("nightly#0"), 10).unwrap()),
        keys(&[late.clone(), b.clone(), a.clone()])
    );
    assert_eq!(
        keys(&store.fires(Some("nightly#0"), 2).unwrap()),
        keys(&[late.clone(), b.clone()])
    );
    assert_eq!(keys(&store.fires(None, 1).unwrap()), keys(&[late]));
    assert!(store.fires(Some("nobody#0"), 10).unwrap().is_empty());
    assert!(store.fires(None, 0).unwrap().is_empty());
}

fn last_fire_is_the_latest_fired_or_skipped_instant(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    assert_eq!(store.last_fire("nightly#0").unwrap(), None);
    let one = scheduled_fire("nightly#0", 1, 0);
    let two = FireRecord {
        outcome: FireOutcome::Skipped,
        reason: Some("overlap".into()),
        ..scheduled_fire("nightly#0", 2, 0)
    };
    // Refused instants do not count as handled, nor do fires without an
    // instant, nor other triggers' fires; a late fire of an earlier instant
    // does not move it back.
    let three = FireRecord {
        outcome: FireOutcome::Refused,
        ..scheduled_fire("nightly#0", 3, 0)
    };
    let late_zero = scheduled_fire("nightly#0", 0, 10 * 60_000);
    let manual = FireRecord {
        kind: FireKind::Manual,
        key: "m-1".into(),
        scheduled_for: None,
        ..scheduled_fire("nightly#0", 9, 0)
    };
    for f in [
        &one,
        &two,
        &three,
        &late_zero,
        &manual,
        &scheduled_fire("nightly#1", 8, 0),
    ] {
        assert!(store.claim_fire(f).unwrap());
    }
    assert_eq!(store.last_fire("nightly#0").unwrap(), Some(two.clone()));
    store
        .finish_fire("nightly#0", &three.key, FireOutcome::Fired, None)
        .unwrap();
    assert_eq!(
        store.last_fire("nightly#0").unwrap().map(|f| f.key),
        Some(three.key)
    );
}

fn quota_counts_fired_only(kind: Kind) {
    let dir = TempDir::new(kind.name());
    let store = kind.open(dir.path());
    let at = |ms: u64| std::time::UNIX_EPOCH + Duration::from_millis(1_795_341_600_000 + ms);
    let minute = 60_000;
    let day = (at(0), at(10 * minute));
    assert_eq!(
        store.fired_between("nightly#0", day.0, day.1).unwrap(),
        (0, 0.0)
    );
    for n in 0..12 {
        let f = scheduled_fire("nightly#0", n, 0);
        assert!(store.claim_fire(&f).unwrap());
        if n % 2 == 0 {
            store.set_fire_cost("nightly#0", &f.key, 0.5).unwrap();
        }
        if n == 3 {
            store
                .finish_fire("nightly#0", &f.key, FireOutcome::Skipped, Some("overlap"))
                .unwrap();
        }
        if n == 5 {
            store
                .finish_fire("nightly#0", &f.key, FireOutcome::Refused, Some("quota"))
                .unwrap();
        }
    }
    assert!(
        store
            .claim_fire(&FireRecord {
                cost_usd: Some(7.0),
                ..scheduled_fire("other#0", 1, 0)
            })
            .unwrap()
    );
    // [0, 10 minutes): instants 0..=9, less the skipped 3 and refused 5; the
    // half-open end leaves out the fire at exactly 10 minutes.
    let (count, cost) = store.fired_between("nightly#0", day.0, day.1).unwrap();
    assert_eq!(count, 8);
    assert!((cost - 2.5).abs() < 1e-9, "{cost}");
    let (count, cost) = store
        .fired_between("nightly#0", at(10 * minute), at(10 * minute + 1))
        .unwrap();
    assert_eq!((count, cost), (1, 0.5));
    assert_eq!(
        store.fired_between("other#0", day.0, day.1).unwrap(),
        (1, 7.0)
    );
}

/// Several stores on one backend (separate connections, separate file
/// handles) claim the same 200 fires at once: each is owned exactly once.
fn racing_claims_each_fire_once(kind: Kind) {
    const FIRES: u64 = 200;
    const CLAIMANTS: usize = 4;
    let dir = TempDir::new(kind.name());
    kind.open(dir.path());
    let go = std::sync::Barrier::new(CLAIMANTS);
    let won: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLAIMANTS)
            .map(|t| {
                let (path, go) = (dir.path().to_owned(), &go);
                s.spawn(move || {
                    let store = kind.open(&path);
                    go.wait();
                    let mut won = Vec::new();
                    for n in 0..FIRES {
                        let f = FireRecord {
                            reason: Some(format!("t{t}")),
                            ..scheduled_fire("nightly#0", n, 0)
                        };
                        if store.claim_fire(&f).unwrap() {
                            won.push(f.key);
                        }
                    }
                    won
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let store = kind.open(dir.path());
    let mut all = BTreeSet::new();
    for (t, keys) in won.iter().enumerate() {
        for k in keys {
            assert!(all.insert(k.clone()), "{k} won twice");
            // The record is the winner's.
            let f = store.fire("nightly#0", k).unwrap().unwrap();
            assert_eq!(f.reason.as_deref(), Some(format!("t{t}").as_str()));
        }
    }
    assert_eq!(all.len() as u64, FIRES);
    assert_eq!(store.fires(None, 1000).unwrap().len() as u64, FIRES);
}

// ---- open() and configuration ----

#[test]
fn open_picks_backend_and_default_paths() {
    let dir = TempDir::new("open");
    let ws = dir.path();
    let store = session::open(&Config::default(), ws).unwrap();
    store.create(&meta("x")).unwrap();
    assert!(ws.join(".agentfile/sessions.db").is_file());

    let mut c = Config::default();
    c.session.store = Some("file".into());
    let store = session::open(&c, ws).unwrap();
    store.create(&meta("y")).unwrap();
    assert!(ws.join(".agentfile/sessions/y.json").is_file());

    c.session.path = Some("elsewhere".into());
    session::open(&c, ws).unwrap().create(&meta("z")).unwrap();
    assert!(ws.join("elsewhere/z.json").is_file());

    c.session.store = Some("mongo".into());
    assert!(matches!(
        session::open(&c, ws),
        Err(StoreError::UnknownBackend(_))
    ));
}

// ---- SQLite ----

fn sqlite(dir: &TempDir) -> SqliteStore {
    SqliteStore::open(&dir.path().join("sessions.db")).unwrap()
}

fn raw(dir: &TempDir) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.path().join("sessions.db")).unwrap()
}

#[test]
fn sqlite_schema_is_versioned_and_shared_with_memory() {
    let dir = TempDir::new("schema");
    // The memory tool may create its table first, in a fresh file.
    raw(&dir)
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS memory(agent_id TEXT NOT NULL, key TEXT NOT NULL, \
             value TEXT NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY(agent_id, key));
             INSERT INTO memory VALUES ('a', 'k', 'v', 't');",
        )
        .unwrap();
    let store = sqlite(&dir);
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::sqlite::SCHEMA_VERSION
    );
    drop(store);
    let conn = raw(&dir);
    let v: String = conn
        .query_row("SELECT value FROM memory WHERE agent_id = 'a'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(v, "v");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let applied: i64 = conn
        .query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(applied, agentfile_session::sqlite::SCHEMA_VERSION);
    drop(conn);
    // Opening again applies nothing twice.
    sqlite(&dir);
}

#[test]
fn sqlite_refuses_a_newer_database_untouched() {
    let dir = TempDir::new("future");
    let path = dir.path().join("sessions.db");
    raw(&dir)
        .execute_batch("CREATE TABLE future(x); PRAGMA user_version = 99;")
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("sessions.db") && msg.contains("99"), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "file was modified");
    assert!(!dir.path().join("sessions.db-wal").exists());
}

#[test]
fn sqlite_refuses_a_file_that_is_not_a_database() {
    let dir = TempDir::new("notdb");
    let path = dir.path().join("sessions.db");
    std::fs::write(
        &path,
        "this is not a database, but it is long enough to look at ".repeat(50),
    )
    .unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("sessions.db"), "{err}");
}

#[test]
fn sqlite_stores_a_repeated_large_output_once() {
    let dir = TempDir::new("dedupe");
    let store = sqlite(&dir);
    store.create(&meta("x")).unwrap();
    let output = "0123456789abcdef".repeat(100 * 1024 / 16);
    let mut log = Log::new("x");
    for i in 0..50 {
        log.at(Some("s"), Some(&format!("g{i}")), None, None);
        store
            .append(&log.push(EventBody::GoalComplete {
                output: output.clone(),
                fields: Default::default(),
                converged: None,
                tool_calls: 0,
                done: false,
            }))
            .unwrap();
    }
    assert_eq!(store.blob_count().unwrap(), 1);
    let stored: i64 = raw(&dir)
        .query_row("SELECT sum(length(data)) FROM events", [], |r| r.get(0))
        .unwrap();
    assert!(stored < 50 * 200, "events hold copies: {stored} bytes");
    let back = store.events("x", 0).unwrap();
    assert_eq!(back, log.events);
    assert!(store.integrity_check().unwrap().is_empty());
}

#[test]
fn sqlite_derives_messages_and_tool_calls() {
    let dir = TempDir::new("derived");
    let store = sqlite(&dir);
    store.create(&meta("run")).unwrap();
    let events = full_run("run");
    for e in &events {
        store.append(e).unwrap();
    }
    let conn = raw(&dir);
    let roles: Vec<String> = conn
        .prepare("SELECT role FROM messages WHERE session_id = 'run' ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
    // Large texts are readable in full through the view, stored once.
    let big: String = conn
        .query_row(
            "SELECT content FROM messages_text WHERE role = 'tool' ORDER BY seq LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(big.len() > 100_000);
    /// call_id, denied_rule, result, is_error
    type CallRow = (String, Option<String>, Option<String>, Option<bool>);
    let calls: Vec<CallRow> = conn
        .prepare(
            "SELECT call_id, denied_rule, result, is_error FROM tool_calls \
             WHERE session_id = 'run' ORDER BY seq",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].0, "c1");
    assert_eq!(calls[0].2, None, "large result is in result_blob");
    assert_eq!(calls[0].3, Some(false));
    assert_eq!(
        calls[1],
        (
            "c2".into(),
            Some("bash: deny rm".into()),
            Some("denied".into()),
            Some(true)
        )
    );
}

#[test]
fn sqlite_damaged_rows_are_errors_not_panics() {
    let dir = TempDir::new("damaged");
    let store = sqlite(&dir);
    store.create(&meta("x")).unwrap();
    for e in small_events("x", 1, 3) {
        store.append(&e).unwrap();
    }
    let conn = raw(&dir);
    conn.execute("UPDATE events SET data = 'not json' WHERE seq = 2", [])
        .unwrap();
    let err = store.events("x", 0).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("event 2"), "{err}");
    conn.execute(
        "UPDATE events SET data = '{\"turn\": \"x\"}' WHERE seq = 2",
        [],
    )
    .unwrap();
    assert!(matches!(
        store.events("x", 0),
        Err(StoreError::Corrupt { .. })
    ));
    conn.execute(
        "UPDATE events SET data = '{\"text\": {\"$blob\": \"feed\"}}' WHERE seq = 2",
        [],
    )
    .unwrap();
    let err = store.events("x", 0).unwrap_err();
    assert!(err.to_string().contains("feed"), "{err}");
    conn.execute("UPDATE sessions SET status = 'sleeping'", [])
        .unwrap();
    assert!(matches!(store.get("x"), Err(StoreError::Corrupt { .. })));
    assert!(matches!(
        store.list(None, 9),
        Err(StoreError::Corrupt { .. })
    ));
    conn.execute("UPDATE sessions SET status = 'running', inputs = '[1]'", [])
        .unwrap();
    assert!(matches!(store.get("x"), Err(StoreError::Corrupt { .. })));
}

/// Many writers over two connections at once; the database must stay sound.
#[test]
fn sqlite_integrity_after_heavy_concurrent_appends() {
    const THREADS: usize = 6;
    const EVENTS: u64 = 250;
    let dir = TempDir::new("heavy");
    let stores = [Arc::new(sqlite(&dir)), Arc::new(sqlite(&dir))];
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let store = Arc::clone(&stores[t % 2]);
            s.spawn(move || {
                let id = format!("t{t}");
                store.create(&meta(&id)).unwrap();
                let mut log = Log::new(&id);
                for e in full_run(&id) {
                    store.append(&e).unwrap();
                    log.events.push(e);
                }
                // Then small events in batches and singly.
                let first = log.next_seq();
                let more = small_events(&id, first, EVENTS);
                for chunk in more.chunks(25) {
                    if chunk[0].seq % 2 == 0 {
                        store.append_batch(chunk).unwrap();
                    } else {
                        chunk.iter().for_each(|e| store.append(e).unwrap());
                    }
                }
            });
        }
    });
    let store = &stores[0];
    assert_eq!(store.integrity_check().unwrap(), Vec::<String>::new());
    for t in 0..THREADS {
        let id = format!("t{t}");
        let events = store.events(&id, 0).unwrap();
        let full = full_run(&id);
        assert_eq!(events[..full.len()], full[..]);
        assert_eq!(events.len() as u64, full.len() as u64 + EVENTS);
    }
    // One blob per distinct large string, however many sessions used it.
    assert_eq!(store.blob_count().unwrap(), 1);
}

// ---- file store ----

fn log_path(dir: &TempDir, id: &str) -> std::path::PathBuf {
    dir.path()
        .join("sessions")
        .join(format!("{id}.events.jsonl"))
}

fn append_raw(dir: &TempDir, id: &str, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(log_path(dir, id))
        .unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn file_torn_last_line_is_ignored_then_cut() {
    for torn in [
        &b"{\"schema_version\":1,\"session_id\":\"x\",\"se"[..],
        b"\0\0\0\0\0\0\0\0\n",
        b"{\"half\": true}\n",
    ] {
        let dir = TempDir::new("torn");
        let store = Kind::File.open(dir.path());
        store.create(&meta("x")).unwrap();
        let events = small_events("x", 1, 6);
        for e in &events[..5] {
            store.append(e).unwrap();
        }
        append_raw(&dir, "x", torn);
        assert_eq!(store.events("x", 0).unwrap(), events[..5]);
        assert_eq!(store.events_page("x", 3, 10).unwrap(), events[3..5]);
        assert_eq!(store.get("x").unwrap().last_seq, 5);
        assert_eq!(store.list(None, 9).unwrap()[0].last_seq, 5);
        // The next append cuts the torn line off and continues.
        store.append(&events[5]).unwrap();
        assert_eq!(store.events("x", 0).unwrap(), events);
        let text = std::fs::read_to_string(log_path(&dir, "x")).unwrap();
        assert_eq!(text.lines().count(), 6, "{text}");
        assert!(text.ends_with('\n'));
    }
}

#[test]
fn file_garbage_inside_the_log_is_an_error() {
    let dir = TempDir::new("garbage");
    let store = Kind::File.open(dir.path());
    store.create(&meta("x")).unwrap();
    let events = small_events("x", 1, 4);
    for e in &events[..2] {
        store.append(e).unwrap();
    }
    append_raw(&dir, "x", b"garbage\n");
    append_raw(
        &dir,
        "x",
        format!("{}\n", serde_json::to_string(&events[2]).unwrap()).as_bytes(),
    );
    let err = store.events("x", 0).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("line 3"), "{err}");
    // A page that reaches the garbage says so too; one before it does not
    // read that far.
    assert!(matches!(
        store.events_page("x", 1, 5),
        Err(StoreError::Corrupt { .. })
    ));
    assert_eq!(store.events_page("x", 0, 2).unwrap(), events[..2]);

    // A log whose seqs skip is damaged too.
    let dir = TempDir::new("gap");
    let store = Kind::File.open(dir.path());
    store.create(&meta("x")).unwrap();
    store.append(&events[0]).unwrap();
    append_raw(
        &dir,
        "x",
        format!("{}\n", serde_json::to_string(&events[2]).unwrap()).as_bytes(),
    );
    append_raw(
        &dir,
        "x",
        format!("{}\n", serde_json::to_string(&events[3]).unwrap()).as_bytes(),
    );
    assert!(matches!(
        store.events("x", 0),
        Err(StoreError::Corrupt { .. })
    ));
    for after in [0, 1, 2] {
        assert!(
            matches!(
                store.events_page("x", after, 5),
                Err(StoreError::Corrupt { .. })
            ),
            "after {after}"
        );
    }

    // And a meta file that is not one.
    std::fs::write(dir.path().join("sessions/y.json"), "{").unwrap();
    assert!(matches!(store.get("y"), Err(StoreError::Corrupt { .. })));
}

/// Killed after the event reached the log but before `ID.json` was rewritten:
/// the event decides the status, and the next append repairs the file.
#[test]
fn file_status_event_wins_over_a_stale_meta() {
    let dir = TempDir::new("stale");
    let store = Kind::File.open(dir.path());
    store.create(&meta("x")).unwrap();
    let mut log = Log::new("x");
    store.append(&log.push(run_started())).unwrap();
    let asked = log.push(EventBody::ApprovalRequired {
        reason: "r".into(),
        deadline_ms: None,
    });
    append_raw(
        &dir,
        "x",
        format!("{}\n", serde_json::to_string(&asked).unwrap()).as_bytes(),
    );
    assert_eq!(
        store.get("x").unwrap().status,
        SessionStatus::WaitingApproval
    );
    store
        .append(&log.push(EventBody::Warning {
            message: "m".into(),
        }))
        .unwrap();
    assert_eq!(
        store.get("x").unwrap().status,
        SessionStatus::WaitingApproval
    );
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("sessions/x.json")).unwrap())
            .unwrap();
    assert_eq!(on_disk["status"], json!("waiting_approval"));
}

#[test]
fn file_store_ignores_temporary_and_foreign_files() {
    let dir = TempDir::new("foreign");
    let store = Kind::File.open(dir.path());
    store.create(&meta("x")).unwrap();
    let folder = dir.path().join("sessions");
    std::fs::write(folder.join(".x.json.123.0.tmp"), "{").unwrap();
    std::fs::write(folder.join("notes.txt"), "hi").unwrap();
    std::fs::write(folder.join("x.approval-3.json"), "{}").unwrap();
    let ids: BTreeSet<String> = store
        .list(None, 10)
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, BTreeSet::from(["x".to_owned()]));
}

// ---- several processes ----

/// Every backend this machine can run: PostgreSQL when it is installed.
fn kinds() -> Vec<Kind> {
    let mut kinds = vec![Kind::Sqlite, Kind::File];
    if pg::available() {
        kinds.push(Kind::Postgres);
    }
    kinds
}

/// Child half of `processes_share_a_store`: does nothing unless started by it.
#[test]
fn child_writer() {
    let (Ok(dir), Ok(kind), Ok(name)) = (
        std::env::var("SESSION_CHILD_DIR"),
        std::env::var("SESSION_CHILD_KIND"),
        std::env::var("SESSION_CHILD_NAME"),
    ) else {
        return;
    };
    let store = Kind::parse(&kind).open(std::path::Path::new(&dir));
    // Its own session, and a share of the races on a common one.
    store.create(&meta(&name)).unwrap();
    for e in small_events(&name, 1, 150) {
        store.append(&e).unwrap();
    }
    loop {
        let last = store.get("shared").unwrap().last_seq;
        if last >= 100 {
            break;
        }
        match store.append(&small_events("shared", last + 1, 1)[0]) {
            Ok(()) | Err(StoreError::OutOfOrder { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn processes_share_a_store() {
    for kind in kinds() {
        let dir = TempDir::new("procs");
        kind.open(dir.path()).create(&meta("shared")).unwrap();
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..3)
            .map(|i| {
                std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        crate::test_name(module_path!(), "child_writer").as_str(),
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env("SESSION_CHILD_DIR", dir.path())
                    .env("SESSION_CHILD_KIND", kind.name())
                    .env("SESSION_CHILD_NAME", format!("p{i}"))
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success(), "{kind:?} child failed");
        }
        let store = kind.open(dir.path());
        for i in 0..3 {
            let id = format!("p{i}");
            assert_eq!(store.events(&id, 0).unwrap(), small_events(&id, 1, 150));
        }
        assert_eq!(
            store.events("shared", 0).unwrap(),
            small_events("shared", 1, 100)
        );
        if kind == Kind::Sqlite {
            let db = SqliteStore::open(&dir.path().join("sessions.db")).unwrap();
            assert!(db.integrity_check().unwrap().is_empty());
        }
    }
}

/// Child half of `processes_claim_each_fire_once`: does nothing unless
/// started by it. Waits for the `go` file, claims every fire, and writes the
/// keys it won to `won-NAME`.
#[test]
fn child_claimer() {
    let (Ok(dir), Ok(kind), Ok(name)) = (
        std::env::var("FIRE_CHILD_DIR"),
        std::env::var("FIRE_CHILD_KIND"),
        std::env::var("FIRE_CHILD_NAME"),
    ) else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    let store = Kind::parse(&kind).open(dir);
    while !dir.join("go").exists() {
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut won = String::new();
    for n in 0..200 {
        let f = FireRecord {
            reason: Some(name.clone()),
            ..scheduled_fire("nightly#0", n, 0)
        };
        if store.claim_fire(&f).unwrap() {
            won.push_str(&f.key);
            won.push('\n');
        }
    }
    std::fs::write(dir.join(format!("won-{name}")), won).unwrap();
}

/// Issue 33, "exactly once across processes": three processes on one store
/// claim the same 200 scheduled instants; each is claimed by exactly one, and
/// its record is that process's.
#[test]
fn processes_claim_each_fire_once() {
    for kind in kinds() {
        let dir = TempDir::new("fire-procs");
        kind.open(dir.path());
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..3)
            .map(|i| {
                std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        crate::test_name(module_path!(), "child_claimer").as_str(),
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env("FIRE_CHILD_DIR", dir.path())
                    .env("FIRE_CHILD_KIND", kind.name())
                    .env("FIRE_CHILD_NAME", format!("p{i}"))
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        // Let them all open the store first, then start them together.
        std::thread::sleep(Duration::from_millis(300));
        std::fs::write(dir.path().join("go"), "").unwrap();
        for mut c in children {
            assert!(c.wait().unwrap().success(), "{kind:?} child failed");
        }
        let store = kind.open(dir.path());
        let mut all = BTreeSet::new();
        for i in 0..3 {
            let name = format!("p{i}");
            let won = std::fs::read_to_string(dir.path().join(format!("won-{name}"))).unwrap();
            for key in won.lines() {
                assert!(all.insert(key.to_owned()), "{kind:?}: {key} claimed twice");
                let f = store.fire("nightly#0", key).unwrap().unwrap();
                assert_eq!(f.reason.as_deref(), Some(name.as_str()), "{kind:?}");
            }
        }
        assert_eq!(all.len(), 200, "{kind:?}");
        assert_eq!(store.fires(Some("nightly#0"), 1000).unwrap().len(), 200);
        if kind == Kind::Sqlite {
            let db = SqliteStore::open(&dir.path().join("sessions.db")).unwrap();
            assert!(db.integrity_check().unwrap().is_empty());
        }
    }
}

/// Undoes PostgreSQL's migration 7 (the web view's indexes), for the tests
/// that take a database back to an older version.
const PG_UNDO_7: &str = "DROP INDEX IF EXISTS sessions_by_workflow; \
     DROP INDEX IF EXISTS sessions_by_text; \
     ALTER TABLE sessions ALTER COLUMN workflow SET DATA TYPE TEXT COLLATE \"default\";";

/// Sessions of two workflows, one with a rare word among its inputs.
fn browse_fixture(store: &dyn SessionStore) {
    for i in 0..30u64 {
        let mut m = meta_at(&format!("b-{i:02}"), i);
        m.workflow = if i % 3 == 0 { "triage" } else { "review" }.into();
        if i == 11 {
            m.inputs.insert("topic".into(), "Zanzibar migration".into());
        }
        store.create(&m).unwrap();
        store.append_batch(&full_run(&m.id)).unwrap();
    }
}

/// What the web view asks of `store` over [`browse_fixture`]: pages by
/// cursor, a workflow filter, a rare and a common search, the names.
fn browse_answers(store: &dyn SessionStore) -> Vec<Vec<String>> {
    use session::{Cursor, SessionQuery};
    let ids = |q: &SessionQuery| -> Vec<String> {
        store.page(q).unwrap().into_iter().map(|m| m.id).collect()
    };
    let first = SessionQuery {
        limit: 7,
        ..Default::default()
    };
    let page1 = store.page(&first).unwrap();
    let page2 = SessionQuery {
        before: page1.last().map(Cursor::after),
        ..first.clone()
    };
    vec![
        page1.iter().map(|m| m.id.clone()).collect(),
        ids(&page2),
        ids(&SessionQuery {
            workflow: Some("triage".into()),
            limit: 50,
            ..Default::default()
        }),
        ids(&SessionQuery {
            search: Some("ZANZIBAR".into()),
            limit: 50,
            ..Default::default()
        }),
        ids(&SessionQuery {
            search: Some("crash".into()),
            workflow: Some("review".into()),
            limit: 5,
            ..Default::default()
        }),
        // An input's name is not its value: nothing, after reading them all.
        ids(&SessionQuery {
            search: Some("topic".into()),
            limit: 5,
            ..Default::default()
        }),
        store.workflows().unwrap(),
    ]
}

/// Migration 7 (issue 49): a database of version 6 with sessions in it
/// gets the web view's indexes; nothing stored is lost, and the pages,
/// filters and search answer what SQLite answers over the same sessions.
/// The rare word is found through the trigram index.
#[test]
fn postgres_migrates_to_browse_indexes_keeping_sessions() {
    if !pg::available() {
        return;
    }
    let dir = TempDir::new("pg-browse-migrate");
    let url = pg::url_for(dir.path());
    {
        let store = PgStore::open(&url).unwrap();
        browse_fixture(&store);
    }
    let cluster = pg::shared();
    let db = db_name(&url);
    cluster
        .psql(
            db,
            &format!("{PG_UNDO_7} DELETE FROM schema_migrations WHERE version >= 7"),
        )
        .unwrap();
    let indexes = "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes \
                   WHERE tablename = 'sessions' AND indexname LIKE 'sessions_by_%'";
    assert_eq!(
        cluster.psql(db, indexes).unwrap(),
        "sessions_by_created,sessions_by_status"
    );
    let store = PgStore::open(&url).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::postgres::SCHEMA_VERSION
    );
    assert_eq!(
        cluster.psql(db, indexes).unwrap(),
        "sessions_by_created,sessions_by_status,sessions_by_text,sessions_by_workflow"
    );
    assert_eq!(store.events("b-11", 0).unwrap(), full_run("b-11"));
    let lite_dir = TempDir::new("pg-browse-sqlite");
    let lite = Kind::Sqlite.open(lite_dir.path());
    browse_fixture(&*lite);
    let answers = browse_answers(&store);
    assert_eq!(answers, browse_answers(&*lite));
    assert_eq!(answers[3], ["b-11"]);
    assert_eq!(answers[5], Vec::<String>::new());
    assert_eq!(answers[6], ["review", "triage"]);
    // The search's expression is the trigram index's (over 30 rows the
    // planner rightly reads the table; told not to, it takes the index).
    let plan = cluster
        .psql(
            db,
            "SET enable_seqscan = off; EXPLAIN SELECT id FROM sessions WHERE \
             lower((id || E'\\n' || workflow || E'\\n' || inputs) COLLATE \"C\") \
             LIKE '%zanzibar%'",
        )
        .unwrap();
    assert!(plan.contains("sessions_by_text"), "{plan}");
}

/// Without `pg_trgm` (here: a user who may not create extensions), migration
/// 7 still applies, without the trigram index, and the search answers the
/// same by reading rows.
#[test]
fn postgres_search_works_without_pg_trgm() {
    if !pg::available() {
        return;
    }
    let cluster = pg::shared();
    let db = cluster.create_database();
    let role = format!("plain_{db}");
    cluster
        .psql(
            &db,
            &format!("CREATE ROLE {role} LOGIN; GRANT CREATE ON SCHEMA public TO {role}"),
        )
        .unwrap();
    let url = format!("postgres://{role}@127.0.0.1:{}/{db}", cluster.port);
    let store = PgStore::open(&url).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::postgres::SCHEMA_VERSION
    );
    assert_eq!(
        cluster
            .psql(
                &db,
                "SELECT count(*) FROM pg_indexes WHERE indexname = 'sessions_by_text'"
            )
            .unwrap(),
        "0"
    );
    browse_fixture(&store);
    let lite_dir = TempDir::new("pg-plain-sqlite");
    let lite = Kind::Sqlite.open(lite_dir.path());
    browse_fixture(&*lite);
    assert_eq!(browse_answers(&store), browse_answers(&*lite));
}

/// A version-8 database (before `replayed` events) opens as version 9: the
/// events stored then read back as this run's own, and a fork's copied event
/// is stored and read back `replayed`.
#[test]
fn sqlite_migrates_events_to_replayed_flags() {
    let dir = TempDir::new("replayed-migrate");
    {
        let store = sqlite(&dir);
        store.create(&meta("old")).unwrap();
        store.append_batch(&small_events("old", 1, 5)).unwrap();
    }
    // Back to exactly what version 8 had: migration 9 only added the column.
    raw(&dir)
        .execute_batch(
            "ALTER TABLE events DROP COLUMN replayed; \
             DELETE FROM schema_migrations WHERE version = 9; PRAGMA user_version = 8;",
        )
        .unwrap();
    let store = sqlite(&dir);
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::sqlite::SCHEMA_VERSION
    );
    assert_eq!(store.events("old", 0).unwrap(), small_events("old", 1, 5));
    let mut copied = small_events("old", 6, 1).remove(0);
    copied.replayed = true;
    store.append(&copied).unwrap();
    assert!(store.events("old", 5).unwrap()[0].replayed);
    let flags: Vec<i64> = raw(&dir)
        .prepare("SELECT replayed FROM events WHERE session_id = 'old' ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(flags, [0, 0, 0, 0, 0, 1]);
}

/// A version-7 database (before session principals) opens as version 8: a
/// task's owner becomes its session's principal, a session with none stays
/// the operator's, and the events stay.
#[test]
fn sqlite_migrates_task_owners_to_principals() {
    let dir = TempDir::new("principal-migrate");
    {
        let store = sqlite(&dir);
        store.create(&meta("task")).unwrap();
        store.create(&meta("plain")).unwrap();
        store.append_batch(&small_events("task", 1, 5)).unwrap();
        store.set_task_owner("task", "token:abc").unwrap();
    }
    raw(&dir)
        .execute_batch(
            "ALTER TABLE events DROP COLUMN replayed; ALTER TABLE sessions DROP COLUMN principal; \
             DELETE FROM schema_migrations WHERE version >= 8; PRAGMA user_version = 7;",
        )
        .unwrap();
    let store = sqlite(&dir);
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::sqlite::SCHEMA_VERSION
    );
    assert_eq!(
        store.principal("task").unwrap().as_deref(),
        Some("token:abc")
    );
    assert_eq!(
        store.task_owner("task").unwrap().as_deref(),
        Some("token:abc")
    );
    assert_eq!(store.principal("plain").unwrap(), None);
    assert_eq!(store.events("task", 0).unwrap(), small_events("task", 1, 5));
    assert!(matches!(
        store.set_principal("task", "token:def"),
        Err(StoreError::OwnedByAnother(_))
    ));
}

/// A version-6 database (before fire records) opens as version 7 with its
/// sessions intact, and takes fire records.
#[test]
fn sqlite_migrates_to_fire_records_keeping_sessions() {
    let dir = TempDir::new("fires-migrate");
    {
        let store = sqlite(&dir);
        store.create(&meta("kept")).unwrap();
        store.append_batch(&small_events("kept", 1, 5)).unwrap();
    }
    // Back to exactly what version 6 had: migration 7 only added `fires`,
    // migration 8 `sessions.principal`, migration 9 `events.replayed`.
    raw(&dir)
        .execute_batch(
            "DROP TABLE fires; ALTER TABLE sessions DROP COLUMN principal; \
             ALTER TABLE events DROP COLUMN replayed; \
             DELETE FROM schema_migrations WHERE version >= 7; PRAGMA user_version = 6;",
        )
        .unwrap();
    let store = sqlite(&dir);
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::sqlite::SCHEMA_VERSION
    );
    assert_eq!(store.events("kept", 0).unwrap(), small_events("kept", 1, 5));
    assert!(
        store
            .claim_fire(&scheduled_fire("nightly#0", 0, 0))
            .unwrap()
    );
    let applied: Vec<i64> = raw(&dir)
        .prepare("SELECT version FROM schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        applied,
        (1..=agentfile_session::sqlite::SCHEMA_VERSION).collect::<Vec<i64>>()
    );
}

#[test]
fn events_equal_what_the_wire_carries() {
    // The stored form is an implementation detail; what comes back must be
    // what `--output stream-json` would have printed.
    let events: Vec<Event> = full_run("w");
    for kind in kinds() {
        let dir = TempDir::new("wire");
        let store = kind.open(dir.path());
        store.create(&meta("w")).unwrap();
        store.append_batch(&events).unwrap();
        let back: Vec<serde_json::Value> = store
            .events("w", 0)
            .unwrap()
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        let sent: Vec<serde_json::Value> = events
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        assert_eq!(back, sent, "{kind:?}");
    }
}

#[test]
fn sqlite_fresh_database_opened_by_many_at_once() {
    let dir = TempDir::new("fresh");
    std::thread::scope(|s| {
        for i in 0..6 {
            let dir = &dir;
            s.spawn(move || {
                let store = sqlite(dir);
                store.create(&meta(&format!("s{i}"))).unwrap();
            });
        }
    });
    let store = sqlite(&dir);
    assert_eq!(store.list(None, 10).unwrap().len(), 6);
    let applied: i64 = raw(&dir)
        .query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(applied, agentfile_session::sqlite::SCHEMA_VERSION);
}

// ---- killed mid-append ----

/// Event `seq` of the crash test: mostly small, every seventh a 5 KB tool
/// result (several database pages, a long log line), every eleventh a status
/// change.
fn crash_event(id: &str, seq: u64) -> Event {
    let mut e = small_events(id, seq, 1).remove(0);
    if seq.is_multiple_of(7) {
        e.body = EventBody::ToolResult {
            id: format!("c{seq}"),
            tool: "read".into(),
            content: format!("{seq:>8} bytes of file content\n").repeat(170),
            is_error: false,
            duration_ms: seq,
        };
    } else if seq.is_multiple_of(11) {
        e.body = EventBody::ApprovalRequired {
            reason: format!("checkpoint {seq}"),
            deadline_ms: None,
        };
    } else if seq % 11 == 1 {
        e.body = EventBody::ApprovalResolved {
            approved: true,
            note: None,
        };
    }
    e
}

/// Child half of `sigkill_mid_append_loses_nothing_committed`: appends until
/// it is killed.
#[test]
fn child_appender() {
    let (Ok(dir), Ok(kind)) = (
        std::env::var("SESSION_CRASH_DIR"),
        std::env::var("SESSION_CRASH_KIND"),
    ) else {
        return;
    };
    let store = Kind::parse(&kind).open(std::path::Path::new(&dir));
    let mut seq = store.get("crash").unwrap().last_seq;
    loop {
        seq += 1;
        store.append(&crash_event("crash", seq)).unwrap();
    }
}

/// SIGKILL a process while it appends, many times: what was acknowledged is
/// there, the log is dense and readable (a torn file-store line is ignored),
/// the database passes `integrity_check`, and the next process continues.
#[test]
fn sigkill_mid_append_loses_nothing_committed() {
    const ROUNDS: u64 = 8;
    for kind in kinds() {
        let dir = TempDir::new("sigkill");
        kind.open(dir.path()).create(&meta("crash")).unwrap();
        let exe = std::env::current_exe().unwrap();
        for round in 0..ROUNDS {
            let store = kind.open(dir.path());
            let before = store.get("crash").unwrap().last_seq;
            let mut child = std::process::Command::new(&exe)
                .args([
                    "--exact",
                    crate::test_name(module_path!(), "child_appender").as_str(),
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("SESSION_CRASH_DIR", dir.path())
                .env("SESSION_CRASH_KIND", kind.name())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            // Kill only once it is writing, at a different moment each round.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while store.get("crash").unwrap().last_seq == before {
                assert!(std::time::Instant::now() < deadline, "child never wrote");
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            std::thread::sleep(std::time::Duration::from_millis(round * 7 % 23));
            child.kill().unwrap();
            child.wait().unwrap();

            let store = kind.open(dir.path());
            let meta = store.get("crash").unwrap();
            assert!(meta.last_seq > before, "{kind:?} round {round}");
            let events = store.events("crash", 0).unwrap();
            let want: Vec<Event> = (1..=meta.last_seq)
                .map(|s| crash_event("crash", s))
                .collect();
            assert_eq!(wire(&events), wire(&want), "{kind:?} round {round}");
            let want_status = want
                .iter()
                .rev()
                .find_map(|e| session::status_after(&e.body))
                .unwrap_or(SessionStatus::Queued);
            // The child that made it running is dead, so it reads interrupted.
            let want_status = match want_status {
                SessionStatus::Running | SessionStatus::Queued => SessionStatus::Interrupted,
                other => other,
            };
            assert_eq!(meta.status, want_status, "{kind:?} round {round}");
            if kind == Kind::Sqlite {
                let db = SqliteStore::open(&dir.path().join("sessions.db")).unwrap();
                assert!(db.integrity_check().unwrap().is_empty());
            }
        }
    }
}

// ---- owners across processes ----

/// Child half of `sessions_of_a_process_that_died_read_interrupted`: creates a
/// running session, starts a run in another, and exits without ending either.
#[test]
fn child_owner() {
    let (Ok(dir), Ok(kind)) = (
        std::env::var("SESSION_OWNER_DIR"),
        std::env::var("SESSION_OWNER_KIND"),
    ) else {
        return;
    };
    let store = Kind::parse(&kind).open(std::path::Path::new(&dir));
    store.create(&running("created")).unwrap();
    store.create(&meta("started")).unwrap();
    store
        .append(&Log::new("started").push(run_started()))
        .unwrap();
    assert_eq!(store.get("started").unwrap().status, SessionStatus::Running);
}

#[test]
fn sessions_of_a_process_that_died_read_interrupted() {
    for kind in kinds() {
        let dir = TempDir::new("owners");
        // The store first, here: a PostgreSQL database the child made would
        // live in the child's own throwaway cluster, which its watchdog stops
        // once the child exits (a race this test lost now and then).
        drop(kind.open(dir.path()));
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                crate::test_name(module_path!(), "child_owner").as_str(),
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SESSION_OWNER_DIR", dir.path())
            .env("SESSION_OWNER_KIND", kind.name())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{kind:?} child failed");
        let store = kind.open(dir.path());
        for id in ["created", "started"] {
            assert_eq!(
                store.get(id).unwrap().status,
                SessionStatus::Interrupted,
                "{kind:?} {id}"
            );
        }
        let mut reaped = store.reap_orphans().unwrap();
        reaped.sort();
        assert_eq!(reaped, ["created", "started"], "{kind:?}");
    }
}

// ---- PostgreSQL ----

fn pg_owner(name: &str) -> Owner {
    // Another boot: this machine cannot tell whether it lives, so only its
    // lease and heartbeat speak for it.
    Owner {
        pid: 7,
        host: name.to_owned(),
        start: format!("{name}-boot/1/1"),
    }
}

fn pg_store(url: &str, owner: &str, lease: Duration) -> PgStore {
    PgStore::open_with(
        url,
        PgOptions {
            owner: pg_owner(owner),
            lease,
            ..PgOptions::default()
        },
    )
    .unwrap()
}

fn db_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap()
}

fn warning(id: &str, seq: u64) -> Event {
    let mut e = small_events(id, seq, 1).remove(0);
    e.body = EventBody::Warning {
        message: format!("w{seq}"),
    };
    e
}

fn with_body(id: &str, seq: u64, body: EventBody) -> Event {
    let mut e = small_events(id, seq, 1).remove(0);
    e.body = body;
    e
}

#[test]
fn postgres_lease_keeps_a_second_owner_out_until_it_expires() {
    if !pg::available() {
        return;
    }
    let dir = TempDir::new("pg-lease");
    let url = pg::url_for(dir.path());
    let lease = Duration::from_secs(2);
    let a = pg_store(&url, "a", lease);
    let b = pg_store(&url, "b", lease);
    a.create(&running("x")).unwrap();
    a.append(&with_body("x", 1, run_started())).unwrap();

    // While a's lease is valid, b can neither append nor claim the session.
    for attempt in [
        warning("x", 2),
        with_body("x", 2, run_started()),
        small_events("x", 2, 1).remove(0),
    ] {
        let err = b.append(&attempt).unwrap_err();
        assert!(
            matches!(&err, StoreError::LeaseHeld { session, owner, .. }
                if session == "x" && owner.contains(" a")),
            "{err}"
        );
        assert!(err.to_string().contains("lease"), "{err}");
    }
    assert!(matches!(
        b.set_status("x", SessionStatus::Running),
        Err(StoreError::LeaseHeld { .. })
    ));
    assert!(matches!(
        b.append_batch(&[warning("x", 2), warning("x", 3)]),
        Err(StoreError::LeaseHeld { .. })
    ));
    assert_eq!(a.get("x").unwrap().last_seq, 1, "nothing written");

    // a's heartbeats keep the lease past its length.
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(500));
        a.heartbeat("x").unwrap();
    }
    assert!(matches!(
        b.append(&warning("x", 2)),
        Err(StoreError::LeaseHeld { .. })
    ));
    a.append(&warning("x", 2)).unwrap();

    // a stops renewing (it died elsewhere): once the lease expires, b takes
    // the session over with a run of its own, and now a is the one kept out.
    std::thread::sleep(lease + Duration::from_millis(500));
    b.append(&with_body("x", 3, run_started())).unwrap();
    assert_eq!(b.owner("x").unwrap().unwrap().owner, pg_owner("b"));
    assert!(matches!(
        a.append(&warning("x", 4)),
        Err(StoreError::LeaseHeld { .. })
    ));
    // A run that ends releases its lease: anyone may append again.
    b.append(&with_body(
        "x",
        4,
        EventBody::RunComplete {
            outputs: Default::default(),
            usage: usage(),
        },
    ))
    .unwrap();
    a.append(&warning("x", 5)).unwrap();
    assert_eq!(a.events("x", 0).unwrap().len(), 5);

    // A queued session is not leased: it waits for whoever picks it up.
    a.create(&meta_at("queued", 1)).unwrap();
    b.append(&warning("queued", 1)).unwrap();
    b.set_status("queued", SessionStatus::Running).unwrap();
    assert!(matches!(
        a.set_status("queued", SessionStatus::Queued),
        Err(StoreError::LeaseHeld { .. })
    ));

    // The holder setting an end status releases the lease too; then the
    // session takes appends from anyone, ordered by the seq check alone.
    a.create(&running("free")).unwrap();
    assert!(matches!(
        b.append(&warning("free", 1)),
        Err(StoreError::LeaseHeld { .. })
    ));
    a.set_status("free", SessionStatus::Interrupted).unwrap();
    b.append(&warning("free", 1)).unwrap();
    a.append(&warning("free", 2)).unwrap();
}

#[test]
fn postgres_an_append_survives_a_server_restart() {
    if !pg::available() {
        return;
    }
    let cluster = pg::Cluster::start().unwrap();
    let url = cluster.url(&cluster.create_database());
    let store = Arc::new(PgStore::open(&url).unwrap());
    let impatient = PgStore::open_with(
        &url,
        PgOptions {
            retry_for: Duration::from_secs(1),
            ..PgOptions::default()
        },
    )
    .unwrap();
    store.create(&meta("x")).unwrap();
    let events = small_events("x", 1, 30);
    store.append_batch(&events[..10]).unwrap();

    cluster.stop().unwrap();
    let writer = {
        let store = Arc::clone(&store);
        let events = events.clone();
        std::thread::spawn(move || {
            store.append(&events[10]).unwrap();
            store.append_batch(&events[11..20]).unwrap();
        })
    };
    // A store with a short bound gives up, naming the server, not the URL.
    let started = std::time::Instant::now();
    let err = impatient.get("x").unwrap_err().to_string();
    assert!(started.elapsed() < Duration::from_secs(10), "{err}");
    assert!(
        err.contains(&format!("127.0.0.1:{}", cluster.port)) && err.contains("gave up"),
        "{err}"
    );
    std::thread::sleep(Duration::from_secs(2));
    cluster.resume().unwrap();
    writer.join().unwrap();
    store.append_batch(&events[20..]).unwrap();
    assert_eq!(wire(&store.events("x", 0).unwrap()), wire(&events));
    assert_eq!(impatient.get("x").unwrap().last_seq, 30);
}

#[test]
fn postgres_a_newer_schema_is_refused_untouched() {
    if !pg::available() {
        return;
    }
    let dir = TempDir::new("pg-newer");
    let url = pg::url_for(dir.path());
    let store = PgStore::open(&url).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::postgres::SCHEMA_VERSION
    );
    store.create(&meta("kept")).unwrap();
    drop(store);
    let cluster = pg::shared();
    let db = db_name(&url);
    cluster
        .psql(
            db,
            "INSERT INTO schema_migrations VALUES (99, 'the future')",
        )
        .unwrap();
    let err = PgStore::open(&url).unwrap_err();
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    assert_eq!(
        cluster
            .psql(db, "SELECT count(*) FROM schema_migrations")
            .unwrap(),
        // Every migration of this version, and the future one.
        (agentfile_session::postgres::SCHEMA_VERSION + 1).to_string()
    );
    assert_eq!(cluster.psql(db, "SELECT id FROM sessions").unwrap(), "kept");
}

/// A version-5 database (before `replayed` events) opens as version 6: the
/// events stored then read back as this run's own, and a fork's copied event
/// is stored and read back `replayed`.
#[test]
fn postgres_migrates_events_to_replayed_flags() {
    if !pg::available() {
        return;
    }
    let dir = TempDir::new("pg-replayed-migrate");
    let url = pg::url_for(dir.path());
    {
        let store = PgStore::open(&url).unwrap();
        store.create(&meta("old")).unwrap();
        store.append_batch(&small_events("old", 1, 5)).unwrap();
    }
    let cluster = pg::shared();
    let db = db_name(&url);
    // Back to exactly what version 5 had: migration 6 only added the column.
    cluster
        .psql(
            db,
            &format!(
                "{PG_UNDO_7} ALTER TABLE events DROP COLUMN replayed; \
                 DELETE FROM schema_migrations WHERE version >= 6"
            ),
        )
        .unwrap();
    let store = PgStore::open(&url).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::postgres::SCHEMA_VERSION
    );
    assert_eq!(store.events("old", 0).unwrap(), small_events("old", 1, 5));
    let mut copied = small_events("old", 6, 1).remove(0);
    copied.replayed = true;
    store.append(&copied).unwrap();
    assert!(store.events("old", 5).unwrap()[0].replayed);
    assert_eq!(
        cluster
            .psql(
                db,
                "SELECT string_agg(replayed::text, ',' ORDER BY seq) FROM events \
                 WHERE session_id = 'old'"
            )
            .unwrap(),
        "false,false,false,false,false,true"
    );
}

/// A version-4 database (before session principals) opens as version 5: a
/// task's owner becomes its session's principal, a session with none stays
/// the operator's.
#[test]
fn postgres_migrates_task_owners_to_principals() {
    if !pg::available() {
        return;
    }
    let dir = TempDir::new("pg-principal-migrate");
    let url = pg::url_for(dir.path());
    {
        let store = PgStore::open(&url).unwrap();
        store.create(&meta("task")).unwrap();
        store.create(&meta("plain")).unwrap();
        store.append_batch(&small_events("task", 1, 5)).unwrap();
        store.set_task_owner("task", "token:abc").unwrap();
    }
    pg::shared()
        .psql(
            db_name(&url),
            &format!(
                "{PG_UNDO_7} ALTER TABLE events DROP COLUMN replayed; \
                 ALTER TABLE sessions DROP COLUMN principal; \
                 DELETE FROM schema_migrations WHERE version >= 5"
            ),
        )
        .unwrap();
    let store = PgStore::open(&url).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::postgres::SCHEMA_VERSION
    );
    assert_eq!(
        store.principal("task").unwrap().as_deref(),
        Some("token:abc")
    );
    assert_eq!(
        store.task_owner("task").unwrap().as_deref(),
        Some("token:abc")
    );
    assert_eq!(store.principal("plain").unwrap(), None);
    assert_eq!(store.events("task", 0).unwrap(), small_events("task", 1, 5));
}

/// A version-3 database (before fire records) opens as version 4 with its
/// sessions intact, and takes fire records.
#[test]
fn postgres_migrates_to_fire_records_keeping_sessions() {
    if !pg::available() {
        return;
    }
    let dir = TempDir::new("pg-fires-migrate");
    let url = pg::url_for(dir.path());
    {
        let store = PgStore::open(&url).unwrap();
        store.create(&meta("kept")).unwrap();
        store.append_batch(&small_events("kept", 1, 5)).unwrap();
    }
    let cluster = pg::shared();
    let db = db_name(&url);
    cluster
        .psql(
            db,
            &format!(
                "{PG_UNDO_7} DROP TABLE fires; ALTER TABLE sessions DROP COLUMN principal; \
                 ALTER TABLE events DROP COLUMN replayed; \
                 DELETE FROM schema_migrations WHERE version >= 4"
            ),
        )
        .unwrap();
    let store = PgStore::open(&url).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        agentfile_session::postgres::SCHEMA_VERSION
    );
    assert_eq!(store.events("kept", 0).unwrap(), small_events("kept", 1, 5));
    assert!(
        store
            .claim_fire(&scheduled_fire("nightly#0", 0, 0))
            .unwrap()
    );
    assert!(
        !store
            .claim_fire(&scheduled_fire("nightly#0", 0, 0))
            .unwrap()
    );
}

#[test]
fn postgres_fresh_database_opened_by_many_at_once() {
    if !pg::available() {
        return;
    }
    let dir = TempDir::new("pg-fresh");
    let url = pg::url_for(dir.path());
    std::thread::scope(|s| {
        for i in 0..8 {
            let url = &url;
            s.spawn(move || {
                let store = PgStore::open(url).unwrap();
                store.create(&meta(&format!("s{i}"))).unwrap();
            });
        }
    });
    let store = PgStore::open(&url).unwrap();
    assert_eq!(store.list(None, 10).unwrap().len(), 8);
    assert_eq!(
        pg::shared()
            .psql(db_name(&url), "SELECT count(*) FROM schema_migrations")
            .unwrap(),
        agentfile_session::postgres::SCHEMA_VERSION.to_string()
    );
}

#[test]
fn postgres_unreachable_server_fails_fast_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = std::time::Instant::now();
    let err = PgStore::open(&format!("postgres://me:sekrit@127.0.0.1:{port}/db"))
        .unwrap_err()
        .to_string();
    assert!(started.elapsed() < Duration::from_secs(15), "{err}");
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && !err.contains("sekrit"),
        "{err}"
    );
    assert!(err.contains("running"), "{err}");
    let err = PgStore::open("postgres://me:sekrit@db.internal/x?sslmode=require")
        .unwrap_err()
        .to_string();
    assert!(err.contains("TLS") && !err.contains("sekrit"), "{err}");
}

#[test]
fn postgres_is_chosen_by_config_and_its_url_read_from_the_environment() {
    let ws = TempDir::new("pg-config");
    let mut c = Config::default();
    c.session.store = Some("postgres".into());
    c.session.url_env = Some("AGENTFILE_TEST_NO_SUCH_URL".into());
    let (backend, _) = session::location(&c, ws.path()).unwrap();
    assert_eq!(backend, session::Backend::Postgres);
    let Err(err) = session::open(&c, ws.path()) else {
        panic!("opened without a URL");
    };
    let err = err.to_string();
    assert!(err.contains("AGENTFILE_TEST_NO_SUCH_URL"), "{err}");
    if !pg::available() {
        return;
    }
    // The variable set: a child process opens the store through the config.
    let dir = TempDir::new("pg-config-db");
    let url = pg::url_for(dir.path());
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::test_name(module_path!(), "child_config_open").as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env("AGENTFILE_TEST_PG_CHILD_URL", &url)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        PgStore::open(&url).unwrap().get("via-config").unwrap().id,
        "via-config"
    );
}

/// Child half of `postgres_is_chosen_by_config_and_its_url_read_from_the_environment`.
#[test]
fn child_config_open() {
    if std::env::var("AGENTFILE_TEST_PG_CHILD_URL").is_err() {
        return;
    }
    let ws = TempDir::new("pg-config-child");
    let mut c = Config::default();
    c.session.store = Some("postgres".into());
    c.session.url_env = Some("AGENTFILE_TEST_PG_CHILD_URL".into());
    let store = session::open(&c, ws.path()).unwrap();
    store.create(&meta("via-config")).unwrap();
}

/// A TCP proxy in front of the shared cluster that, once armed, forwards the
/// next `COMMIT` to the server and then cuts the connection before the answer
/// comes back: the client cannot know whether its transaction committed.
struct CommitCutter {
    port: u16,
    armed: Arc<std::sync::atomic::AtomicBool>,
    cuts: Arc<std::sync::atomic::AtomicU64>,
}

impl CommitCutter {
    fn start(upstream: u16) -> CommitCutter {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let cuts = Arc::new(AtomicU64::new(0));
        let (armed2, cuts2) = (Arc::clone(&armed), Arc::clone(&cuts));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let cut = Arc::new(AtomicBool::new(false));
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (armed, cuts, cut_up) =
                    (Arc::clone(&armed2), Arc::clone(&cuts2), Arc::clone(&cut));
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n @ 1..) = c_in.read(&mut buf) {
                        let chunk = &buf[..n];
                        let commit = chunk.windows(6).any(|w| w == b"COMMIT");
                        if commit && armed.swap(false, Ordering::SeqCst) {
                            cut_up.store(true, Ordering::SeqCst);
                            let _ = s_out.write_all(chunk);
                            // Let the server commit, then drop both sides.
                            std::thread::sleep(Duration::from_millis(300));
                            cuts.fetch_add(1, Ordering::SeqCst);
                            let _ = c_in.shutdown(Shutdown::Both);
                            let _ = s_out.shutdown(Shutdown::Both);
                            return;
                        }
                        if s_out.write_all(chunk).is_err() {
                            return;
                        }
                    }
                    let _ = s_out.shutdown(Shutdown::Both);
                });
                let (mut s_in, mut c_out) = (server, client);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n @ 1..) = s_in.read(&mut buf) {
                        if cut.load(Ordering::SeqCst) || c_out.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                    let _ = c_out.shutdown(Shutdown::Both);
                });
            }
        });
        CommitCutter { port, armed, cuts }
    }

    fn arm(&self) {
        self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn cuts(&self) -> u64 {
        self.cuts.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[test]
fn postgres_a_retried_append_that_had_committed_is_not_doubled() {
    if !pg::available() {
        return;
    }
    let dir = TempDir::new("pg-commit-cut");
    let url = pg::url_for(dir.path());
    let cluster = pg::shared();
    let proxy = CommitCutter::start(cluster.port);
    let via_proxy = url.replace(&format!(":{}/", cluster.port), &format!(":{}/", proxy.port));
    let store = PgStore::open(&via_proxy).unwrap();
    store.create(&meta("x")).unwrap();
    let events = full_run("x");
    store.append_batch(&events[..3]).unwrap();

    // The batch commits, the answer is lost: the retry finds it stored.
    proxy.arm();
    store.append_batch(&events[3..8]).unwrap();
    assert_eq!(proxy.cuts(), 1);
    // Same for a single event.
    proxy.arm();
    store.append(&events[8]).unwrap();
    assert_eq!(proxy.cuts(), 2);
    store.append_batch(&events[9..]).unwrap();

    let direct = PgStore::open(&url).unwrap();
    assert_eq!(wire(&direct.events("x", 0).unwrap()), wire(&events));
    assert_eq!(direct.get("x").unwrap().last_seq, events.len() as u64);
    // A genuine duplicate (no connection trouble) is still out of order.
    assert!(matches!(
        direct.append(&events[0]),
        Err(StoreError::OutOfOrder { .. })
    ));
    // An approval decided through a cut connection is recorded once, and
    // the retry reports it as decided by us, not by someone else.
    direct.create(&meta("a")).unwrap();
    direct
        .append_batch(&[
            with_body("a", 1, run_started()),
            with_body(
                "a",
                2,
                EventBody::ApprovalRequired {
                    reason: "r".into(),
                    deadline_ms: None,
                },
            ),
        ])
        .unwrap();
    proxy.arm();
    let a = store.record_approval("a", true, Some("yes")).unwrap();
    assert_eq!(proxy.cuts(), 3);
    assert_eq!(direct.approval("a", 2).unwrap(), Some(a));
    // A fire claimed through a cut connection is ours once, not "taken".
    let f = scheduled_fire("nightly#0", 0, 0);
    proxy.arm();
    assert!(store.claim_fire(&f).unwrap());
    assert_eq!(proxy.cuts(), 4);
    assert_eq!(direct.fire("nightly#0", &f.key).unwrap(), Some(f.clone()));
    assert!(!direct.claim_fire(&f).unwrap());
}
