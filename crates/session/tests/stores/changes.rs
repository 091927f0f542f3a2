//! Followers of a session that another store appends to (PostgreSQL's
//! `LISTEN`/`NOTIFY`, `SessionStore::watch`): woken when an append commits
//! through a second store on the same database, not by other sessions'
//! appends nor by an append that failed, and woken again when the listening
//! connection comes back after it was cut.
//!
//! The bounds on waiting (seconds) only decide when a test gives up: a wake
//! usually comes within milliseconds (`cargo bench --bench session_notify`).

use std::time::Duration;

use crate::support::*;
use agentfile_session::{PgStore, SessionStore, Watch};

const GIVE_UP: Duration = Duration::from_secs(10);
/// How long a watch that must not be woken is watched.
const QUIET: Duration = Duration::from_millis(300);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn woken(w: &mut Watch, within: Duration) -> bool {
    tokio::time::timeout(within, w.changed()).await.is_ok()
}

fn event(id: &str, seq: u64) -> agentfile_wire::events::Event {
    small_events(id, seq, 1).remove(0)
}

/// Two stores on one new database, with sessions `ids`, and `b`'s listener
/// in force: it has woken a watch of `ready` (any wake-up, the one on
/// connecting or an append's, comes after `LISTEN` took effect).
fn two_stores(label: &str, ids: &[&str]) -> (TempDir, String, PgStore, PgStore) {
    let dir = TempDir::new(label);
    let url = pg::url_for(dir.path());
    let a = PgStore::open(&url).unwrap();
    let b = PgStore::open(&url).unwrap();
    for id in ids.iter().chain(&["ready"]) {
        a.create(&meta(id)).unwrap();
    }
    runtime().block_on(async {
        let mut ready = b.watch("ready").expect("PostgreSQL offers watches");
        a.append(&event("ready", 1)).unwrap();
        assert!(
            woken(&mut ready, GIVE_UP).await,
            "b never started listening"
        );
    });
    (dir, url, a, b)
}

#[test]
fn postgres_a_watch_is_woken_by_a_commit_through_another_store() {
    if !pg::available() {
        return;
    }
    let (_dir, _url, a, b) = two_stores("pg-watch", &["x", "y"]);
    runtime().block_on(async {
        let mut x = b.watch("x").unwrap();
        let mut y = b.watch("y").unwrap();
        let mut x_too = b.watch("x").unwrap();

        a.append(&event("x", 1)).unwrap();
        assert!(woken(&mut x, GIVE_UP).await, "x's watch was not woken");
        assert!(
            woken(&mut x_too, GIVE_UP).await,
            "every watch of x is woken"
        );
        assert_eq!(b.events("x", 0).unwrap().len(), 1, "readable when woken");
        assert!(!woken(&mut y, QUIET).await, "y's watch woken by x's append");

        // An append that fails commits nothing, and tells nobody.
        assert!(a.append(&event("x", 9)).is_err());
        assert!(!woken(&mut x, QUIET).await, "woken by a failed append");

        // A batch over two sessions wakes the watches of both.
        a.append_batch(&[event("x", 2), event("y", 1)]).unwrap();
        assert!(woken(&mut x, GIVE_UP).await && woken(&mut y, GIVE_UP).await);

        // The store's own appends wake its watches too.
        b.append(&event("y", 2)).unwrap();
        assert!(woken(&mut y, GIVE_UP).await);
    });
    // SQLite cannot hear other processes: its followers poll.
    let dir = TempDir::new("sqlite-watch");
    assert!(Kind::Sqlite.open(dir.path()).watch("x").is_none());
}

#[test]
fn postgres_watches_are_woken_when_the_listener_comes_back() {
    if !pg::available() {
        return;
    }
    let (_dir, url, a, b) = two_stores("pg-watch-back", &["x"]);
    let db = url.rsplit('/').next().unwrap();
    runtime().block_on(async {
        let mut x = b.watch("x").unwrap();
        // Cut the listening connection, as a restarting server or a lost
        // network would.
        let cut = pg::shared()
            .psql(
                db,
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = 'agentfile-listen' AND datname = current_database()",
            )
            .unwrap();
        assert_eq!(cut, "1", "one listening connection per store");
        // Appends made while it was down went unheard: every watch is woken
        // once it listens again, and reads the store.
        assert!(woken(&mut x, GIVE_UP).await, "not woken on reconnecting");
        a.append(&event("x", 1)).unwrap();
        assert!(woken(&mut x, GIVE_UP).await, "not listening again");
    });
}

/// A request to a run sent through one store is heard by every listener of
/// another on the same database, whole; SQLite carries none.
#[test]
fn postgres_a_request_to_a_run_reaches_the_other_stores_listeners() {
    use agentfile_session::{RunAction, RunRequest};
    if !pg::available() {
        return;
    }
    let (_dir, _url, a, b) = two_stores("pg-requests", &["held"]);
    runtime().block_on(async {
        let mut heard = b.requests().expect("PostgreSQL carries requests");
        let approve = RunAction::Approve {
            approve: true,
            note: Some("looks right".into()),
        };
        assert!(a.request("held", &approve).unwrap(), "sent");
        let got = tokio::time::timeout(GIVE_UP, heard.recv())
            .await
            .expect("heard in time")
            .expect("a request");
        assert_eq!(
            got,
            RunRequest {
                session: "held".into(),
                action: approve,
            }
        );
        assert!(a.request("held", &RunAction::Cancel).unwrap());
        let got = tokio::time::timeout(GIVE_UP, heard.recv()).await;
        assert_eq!(
            got.ok().and_then(Result::ok).map(|r| r.action),
            Some(RunAction::Cancel)
        );
    });
    let dir = TempDir::new("sqlite-requests");
    let sqlite = agentfile_session::SqliteStore::open(&dir.path().join("s.db")).unwrap();
    assert!(!sqlite.request("held", &RunAction::Cancel).unwrap());
    assert!(sqlite.requests().is_none());
}
