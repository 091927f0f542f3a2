//! How soon a follower in one process sees an event another process appended
//! to a PostgreSQL store (issue 49, CONTRACT §22): the live view, `event`
//! calls and A2A streams of a run on another replica wait on
//! `SessionStore::watch` (`LISTEN`/`NOTIFY`) instead of reading the store
//! every 100 ms.
//!
//! Two `PgStore`s on one database stand for two processes. A writer thread
//! appends one event at a time through the first; the follower, watching the
//! session on the second, wakes and reads the events after the last it had.
//! Measured: from just before the append to the follower holding the event
//! (the append's own commit included), and, beside it, the append alone.
//! Target: p99 ≤ 50 ms.
//!
//! PostgreSQL: a throwaway cluster of the server Debian's `postgresql`
//! package installs, on loopback, as the store conformance tests start it
//! (`crates/session/tests/stores/support.rs`); without one the bench says
//! why and does nothing.
//!
//! Run with `cargo bench --bench session_notify` (1,000 events). Without
//! `--bench` (as `cargo test --all-targets` runs it) 20 events, as a smoke
//! test.

#[path = "../crates/session/tests/stores/support.rs"]
mod support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentfile::session::{PgStore, SessionStore};

use support::{meta, pg, small_events};

/// How long one event may take before the bench gives up.
const GIVE_UP: Duration = Duration::from_secs(10);

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let events = if full { 1000 } else { 20 };
    if !pg::available() {
        return;
    }
    let cluster = pg::shared();
    let url = cluster.url(&cluster.create_database());
    let writer = PgStore::open(&url).expect("open the writer's store");
    let follower = PgStore::open(&url).expect("open the follower's store");
    writer
        .create(&meta("followed"))
        .expect("create the session");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (go_tx, go_rx) = mpsc::channel::<u64>();
    let (done_tx, done_rx) = mpsc::channel::<(Instant, Duration)>();
    let writing = std::thread::spawn(move || {
        for seq in go_rx {
            let event = small_events("followed", seq, 1).remove(0);
            let start = Instant::now();
            writer.append(&event).expect("append");
            let _ = done_tx.send((start, start.elapsed()));
        }
    });
    let mut watch = follower
        .watch("followed")
        .expect("PostgreSQL offers watches");
    let (mut seen, mut wakes) = (0u64, 0u64);
    let (mut followed, mut appended) = (Vec::new(), Vec::new());
    rt.block_on(async {
        // Once: the listening connection opens, and wakes the watch.
        tokio::time::timeout(GIVE_UP, watch.changed())
            .await
            .expect("the follower's store started listening");
        for seq in 1..=events {
            go_tx.send(seq).expect("the writer runs");
            // A wake-up means "read again": read until the event is there.
            while seen < seq {
                tokio::time::timeout(GIVE_UP, watch.changed())
                    .await
                    .unwrap_or_else(|_| panic!("event {seq}: no wake-up in {GIVE_UP:?}"));
                wakes += 1;
                let got = follower.events("followed", seen).expect("read");
                seen = got.last().map_or(seen, |e| e.seq);
            }
            let at = Instant::now();
            let (start, append) = done_rx.recv().expect("the writer answers");
            followed.push(at - start);
            appended.push(append);
        }
    });
    drop(go_tx);
    writing.join().expect("the writer thread");
    report("append → follower on another store has read it", followed);
    report("the append alone (its commit)", appended);
    println!("wake-ups: {wakes} for {events} events (more would be spurious reads)");
}

fn report(what: &str, mut times: Vec<Duration>) {
    assert!(!times.is_empty(), "{what}: nothing measured");
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    println!(
        "{what} (n = {}): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        times.len(),
        ms(at(0.50)),
        ms(at(0.99)),
        ms(times[times.len() - 1])
    );
}
