//! Wake-ups for those following a session whose run is in another process:
//! the live view, `event` calls with a wait, A2A streams. A store that can
//! hear other processes' appends (PostgreSQL, through `LISTEN`/`NOTIFY`)
//! hands out a [`Watch`] per follower ([`SessionStore::watch`]); the others
//! hand out none, and their followers poll.
//!
//! A wake-up carries no events and promises nothing but "read the store
//! again": the store stays the only copy. So a spurious wake-up costs one
//! read, and a lost one costs the follower's slow safety re-read, never an
//! event. Whoever hears the store ([`Changes`]' owner) wakes every watch
//! when it (re)connects, because appends made while it was deaf were not
//! heard.
//!
//! Memory is bounded: a session has an entry only while someone watches it,
//! and at most [`MAX_WATCHED`] sessions are watched at once per store; past
//! that, [`Changes::watch`] gives none and the follower polls.
//!
//! The same store carries [`RunRequest`]s the other way: a server asked to
//! approve or cancel a run that another process on the store holds sends the
//! request through the store ([`SessionStore::request`]), and the process
//! holding runs hears it ([`SessionStore::requests`]) and acts on its own
//! run. A request is a hint, like a wake-up: the sender reads the store for
//! its effect and says so when none comes.
//!
//! [`SessionStore::watch`]: crate::SessionStore::watch
//! [`SessionStore::request`]: crate::SessionStore::request
//! [`SessionStore::requests`]: crate::SessionStore::requests

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};

/// Requests kept for a listener that has fallen behind; older ones are lost
/// (their senders time out and say so).
const REQUESTS_KEPT: usize = 256;
/// The longest note a request carries (PostgreSQL's payload is at most
/// 8,000 bytes).
pub const MAX_NOTE: usize = 2_000;

/// What one process asks of the run another holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum RunAction {
    /// The decision on the approval the run waits at.
    Approve {
        approve: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    Cancel,
}

/// A [`RunAction`] for the run of session `session`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    pub session: String,
    #[serde(flatten)]
    pub action: RunAction,
}

impl RunRequest {
    /// The request with its note cut to [`MAX_NOTE`] bytes (on a character
    /// boundary), so that it fits any carrier.
    pub fn bounded(mut self) -> RunRequest {
        if let RunAction::Approve {
            note: Some(note), ..
        } = &mut self.action
            && note.len() > MAX_NOTE
        {
            let mut end = MAX_NOTE;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
        }
        self
    }
}

/// The most sessions one store watches at once.
pub const MAX_WATCHED: usize = 10_000;

/// The sessions being watched in one store, and their followers; and the
/// requests heard for runs.
#[derive(Debug)]
pub struct Changes {
    /// One sender per watched session; its receivers are the [`Watch`]es.
    sessions: Mutex<HashMap<String, watch::Sender<()>>>,
    requests: broadcast::Sender<RunRequest>,
}

impl Default for Changes {
    fn default() -> Changes {
        Changes {
            sessions: Mutex::default(),
            requests: broadcast::channel(REQUESTS_KEPT).0,
        }
    }
}

impl Changes {
    pub fn new() -> Arc<Changes> {
        Arc::new(Changes::default())
    }

    /// Hear the requests heard from now on.
    pub fn requests(&self) -> broadcast::Receiver<RunRequest> {
        self.requests.subscribe()
    }

    /// A request was heard: hand it to every listener (none: dropped).
    pub fn request(&self, request: RunRequest) {
        let _ = self.requests.send(request);
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<()>>> {
        // A panic while holding the lock leaves the map consistent (every
        // change is one insert or remove), so a poisoned lock is used as is.
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Start watching session `id`: the watch sees every [`wake`](Self::wake)
    /// of `id` from now on. `None` when [`MAX_WATCHED`] other sessions are
    /// watched already.
    pub fn watch(self: &Arc<Self>, id: &str) -> Option<Watch> {
        let mut sessions = self.sessions();
        let rx = match sessions.get(id) {
            Some(tx) => tx.subscribe(),
            None if sessions.len() >= MAX_WATCHED => return None,
            None => {
                let (tx, rx) = watch::channel(());
                sessions.insert(id.to_owned(), tx);
                rx
            }
        };
        Some(Watch {
            rx: Some(rx),
            id: id.to_owned(),
            changes: Arc::clone(self),
        })
    }

    /// Session `id` has new events: wake whoever watches it. Nobody
    /// watching costs a map lookup and leaves nothing behind.
    pub fn wake(&self, id: &str) {
        if let Some(tx) = self.sessions().get(id) {
            tx.send_replace(());
        }
    }

    /// Wake every watch, after a time in which wake-ups may have been
    /// missed (the listening connection was down).
    pub fn wake_all(&self) {
        for tx in self.sessions().values() {
            tx.send_replace(());
        }
    }

    /// How many sessions are watched now.
    pub fn watched(&self) -> usize {
        self.sessions().len()
    }
}

/// One follower's wait for a session's next appends, from
/// [`Changes::watch`]. Dropping it stops watching; the last one dropped
/// removes the session's entry.
#[derive(Debug)]
pub struct Watch {
    /// Always `Some` until dropped.
    rx: Option<watch::Receiver<()>>,
    id: String,
    changes: Arc<Changes>,
}

impl Watch {
    /// Wait until the session may have new events: a wake-up since this
    /// watch began or since the last `changed` returned. Wake-ups that come
    /// while nobody waits are kept (as one), so subscribing before reading
    /// the store loses none. Read the store again after it returns.
    pub async fn changed(&mut self) {
        let Some(rx) = self.rx.as_mut() else {
            return std::future::pending().await;
        };
        // The sender lives while this receiver does (it leaves the map only
        // when its last receiver is gone), so an error cannot happen; were it
        // to, waiting forever is right: the caller's deadline ends the wait.
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// The session watched.
    pub fn session(&self) -> &str {
        &self.id
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        drop(self.rx.take());
        // Under the lock, so that a `watch` of the same session either sees
        // the entry and subscribes before this check or finds it removed.
        let mut sessions = self.changes.sessions();
        if sessions
            .get(&self.id)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            sessions.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    async fn woken(w: &mut Watch) -> bool {
        tokio::time::timeout(Duration::from_millis(50), w.changed())
            .await
            .is_ok()
    }

    #[test]
    fn a_wake_reaches_the_sessions_watches_only_and_is_kept_until_read() {
        runtime().block_on(async {
            let changes = Changes::new();
            let (mut a1, mut a2, mut b) = (
                changes.watch("a").expect("a watch"),
                changes.watch("a").expect("a watch"),
                changes.watch("b").expect("a watch"),
            );
            assert!(!woken(&mut a1).await, "nothing happened yet");
            // Woken before anyone waits: kept, and several count as one.
            changes.wake("a");
            changes.wake("a");
            assert!(woken(&mut a1).await && woken(&mut a2).await);
            assert!(!woken(&mut a1).await && !woken(&mut b).await);
            changes.wake_all();
            assert!(woken(&mut a1).await && woken(&mut b).await);
        });
    }

    #[test]
    fn requests_reach_every_listener_and_keep_their_shape_on_the_wire() {
        runtime().block_on(async {
            let changes = Changes::new();
            changes.request(RunRequest {
                session: "nobody-listens".into(),
                action: RunAction::Cancel,
            });
            let (mut a, mut b) = (changes.requests(), changes.requests());
            let r = RunRequest {
                session: "s-1".into(),
                action: RunAction::Approve {
                    approve: true,
                    note: Some("ok".into()),
                },
            };
            changes.request(r.clone());
            assert_eq!(a.recv().await.ok(), Some(r.clone()));
            assert_eq!(b.recv().await.ok(), Some(r.clone()));
            let text = serde_json::to_string(&r).expect("JSON");
            assert_eq!(
                text,
                r#"{"session":"s-1","action":"approve","approve":true,"note":"ok"}"#
            );
            assert_eq!(serde_json::from_str::<RunRequest>(&text).ok(), Some(r));
        });
    }

    #[test]
    fn a_long_note_is_cut_on_a_character_boundary() {
        let r = RunRequest {
            session: "s".into(),
            action: RunAction::Approve {
                approve: false,
                note: Some("é".repeat(MAX_NOTE)),
            },
        }
        .bounded();
        let RunAction::Approve { note: Some(n), .. } = r.action else {
            panic!("an approval");
        };
        assert!(
            n.len() <= MAX_NOTE && n.len() >= MAX_NOTE - 1,
            "{}",
            n.len()
        );
    }

    #[test]
    fn entries_live_as_long_as_their_watches_and_are_bounded() {
        let changes = Changes::new();
        changes.wake("nobody");
        assert_eq!(changes.watched(), 0, "a wake-up leaves nothing behind");
        let a1 = changes.watch("a").expect("a watch");
        let a2 = changes.watch("a").expect("a watch");
        assert_eq!(changes.watched(), 1);
        drop(a1);
        assert_eq!(changes.watched(), 1, "a2 still watches");
        drop(a2);
        assert_eq!(changes.watched(), 0);

        let many: Vec<Watch> = (0..MAX_WATCHED)
            .filter_map(|n| changes.watch(&n.to_string()))
            .collect();
        assert_eq!(many.len(), MAX_WATCHED);
        assert!(changes.watch("one-too-many").is_none());
        // A session already watched still gets more watches.
        assert!(changes.watch("0").is_some());
        drop(many);
        assert_eq!(changes.watched(), 0);
    }
}
