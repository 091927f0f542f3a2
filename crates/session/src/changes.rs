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
//! [`SessionStore::watch`]: crate::SessionStore::watch

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

/// The most sessions one store watches at once.
pub const MAX_WATCHED: usize = 10_000;

/// The sessions being watched in one store, and their followers.
#[derive(Debug, Default)]
pub struct Changes {
    /// One sender per watched session; its receivers are the [`Watch`]es.
    sessions: Mutex<HashMap<String, watch::Sender<()>>>,
}

impl Changes {
    pub fn new() -> Arc<Changes> {
        Arc::new(Changes::default())
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
