//! Snapshot tests of session exports: a fixed event log in
//! `fixtures/session/run.session.json` (a two-step run with concurrent agents,
//! a denial, an approval across a crash and resume, a loop that converges)
//! rendered as Markdown (`run.md`) and JSON (`run.export.json`).
//!
//! Regenerate after an intended change with
//! `UPDATE_SNAPSHOTS=1 cargo test -p agentfile-session --test stores export::`, then read the diff.

use std::path::PathBuf;

use crate::support::{Kind, TempDir};
use agentfile_session::{SessionMeta, export};
use agentfile_wire::events::Event;
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    session: SessionMeta,
    events: Vec<Event>,
}

fn fixture_dir() -> PathBuf {
    crate::repo().join("fixtures/session")
}

fn load() -> Fixture {
    let text = std::fs::read_to_string(fixture_dir().join("run.session.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn check_snapshot(name: &str, actual: &str) {
    let path = fixture_dir().join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_SNAPSHOTS=1 to create it",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs (UPDATE_SNAPSHOTS=1 rewrites it); got:\n{actual}",
        path.display()
    );
}

#[test]
fn markdown_transcript() {
    let f = load();
    check_snapshot("run.md", &export::markdown(&f.session, &f.events));
}

#[test]
fn json_export() {
    let f = load();
    let v = export::json(&f.session, &f.events);
    check_snapshot(
        "run.export.json",
        &(serde_json::to_string_pretty(&v).unwrap() + "\n"),
    );
    // The export carries every event unchanged, and the final outputs.
    let events: Vec<Event> = serde_json::from_value(v["events"].clone()).unwrap();
    assert_eq!(events, f.events);
    assert_eq!(v["outputs"]["review"]["verdict"], "approve");
}

#[test]
fn export_is_the_same_from_either_store() {
    let f = load();
    let want = export::markdown(&f.session, &f.events);
    for kind in [Kind::Sqlite, Kind::File] {
        let dir = TempDir::new("export");
        let store = kind.open(dir.path());
        let mut meta = f.session.clone();
        meta.last_seq = 0;
        meta.updated_at = meta.created_at.clone();
        store.create(&meta).unwrap();
        for e in &f.events {
            store.append(e).unwrap();
        }
        let meta = store.get(&meta.id).unwrap();
        assert_eq!(meta, f.session, "{kind:?}");
        let events = store.events(&meta.id, 0).unwrap();
        assert_eq!(export::markdown(&meta, &events), want, "{kind:?}");
    }
}
