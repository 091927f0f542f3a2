//! The event bus: one ordered stream of events per run, fanned out to sinks.
//!
//! The bus stamps each event with its session id, a dense `seq` and a timestamp,
//! writes it to the session store, and only then hands it to the other sinks (the
//! CLI printer, a JSON-RPC connection, MCP progress, telemetry). Emission holds a
//! lock, so events from concurrent agents never interleave out of order.
//!
//! By default `emit` stores and sends before it returns. A run's bus is
//! [`EventBus::pipelined`]: `emit` stamps the event and queues it, and one
//! background thread per bus commits whatever has queued since its last commit
//! in one transaction (group commit), then sends those events to the sinks, in
//! order. The guarantees that matter hold either way: a sink sees an event only
//! after the commit that holds it, never one the store refused; the store holds
//! a prefix of what was emitted, so a run killed at any moment resumes from its
//! log like any interrupted run; [`EventBus::flush`] waits until everything
//! emitted is stored (the executor calls it when a goal completes, so a
//! finished goal is never asked again after a crash, before asking for an
//! approval, and when the run ends). What a pipelined bus adds is that the run goes on with
//! its next step while the previous events are being committed.
//!
//! What it is not: a queue for sinks. Sinks are called in order, one event at a
//! time, and must be quick (a sink that needs to do slow work forwards into its
//! own bounded channel).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::SystemTime;

use crate::SessionStore;
use crate::owner::HEARTBEAT_INTERVAL;
use agentfile_wire::events::{EVENT_SCHEMA_VERSION, Event, EventBody, rfc3339};

/// Receives every event after it has been stored.
pub trait EventSink: Send + Sync {
    fn send(&self, event: &Event);

    /// A transient event (`llm_delta`: never stored, carrying the seq of the
    /// last stored event). Sinks that show a run live opt in; the default
    /// ignores it, so stores, trackers and telemetry see only stored events.
    fn send_transient(&self, _event: &Event) {}
}

/// A sink that wants every event, transient ones included.
pub struct AllEvents<F>(pub F);

impl<F: Fn(&Event) + Send + Sync> EventSink for AllEvents<F> {
    fn send(&self, event: &Event) {
        (self.0)(event)
    }

    fn send_transient(&self, event: &Event) {
        (self.0)(event)
    }
}

impl<F: Fn(&Event) + Send + Sync> EventSink for F {
    fn send(&self, event: &Event) {
        self(event)
    }
}

/// Where an event happened in the workflow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    pub step: Option<String>,
    pub goal: Option<String>,
    pub agent: Option<String>,
    pub iteration: Option<u32>,
    /// The plan node's path and kind (see [`Event::node`]).
    pub node: Option<String>,
    pub node_kind: Option<&'static str>,
}

impl Scope {
    pub fn step(name: &str) -> Scope {
        Scope {
            step: Some(name.to_owned()),
            ..Scope::default()
        }
    }

    pub fn with_goal(&self, goal: &str) -> Scope {
        Scope {
            goal: Some(goal.to_owned()),
            ..self.clone()
        }
    }

    pub fn with_agent(&self, agent: &str) -> Scope {
        Scope {
            agent: Some(agent.to_owned()),
            ..self.clone()
        }
    }

    pub fn with_iteration(&self, iteration: u32) -> Scope {
        Scope {
            iteration: Some(iteration),
            ..self.clone()
        }
    }
}

/// Errors a run survives that happen away from it — an MCP tool server that
/// died, a telemetry exporter that gave up — handed to the run's bus from any
/// thread. The bus emits each as an `error` event just before its next event,
/// from the run's own flow, so they land in order in the stored log.
#[derive(Clone, Default, Debug)]
pub struct Notices(Arc<Mutex<Vec<String>>>);

impl Notices {
    pub fn push(&self, message: impl Into<String>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(message.into());
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

struct BusState {
    seq: u64,
    sinks: Vec<Arc<dyn EventSink>>,
    /// The first store failure; once set, the run must stop (CONTRACT: nothing
    /// is sent that was not stored).
    store_error: Option<String>,
}

/// One run's event stream.
pub struct EventBus {
    session_id: String,
    store: Option<Arc<dyn SessionStore>>,
    state: Arc<Mutex<BusState>>,
    notices: Notices,
    /// The background commit of a pipelined bus (see [`EventBus::pipelined`]).
    pipe: Option<Arc<Pipe>>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// Keeps the session's heartbeat beating while the bus lives.
    _beat: Option<Heartbeat>,
}

/// The most events a pipelined bus holds uncommitted before `emit` waits for
/// the store: a run never gets far ahead of its log, even on a stalled disk.
const MAX_QUEUED: usize = 1024;

/// What a pipelined bus has emitted and its writer has not yet handled.
struct Pipe {
    state: Mutex<PipeState>,
    /// Wakes the writer: work queued, or the bus is closing.
    work: Condvar,
    /// Wakes those waiting for the writer: a batch handled.
    progress: Condvar,
}

#[derive(Default)]
struct PipeState {
    /// In emission order; `true` for an event to store, `false` for a
    /// transient one (sent in its place, never stored).
    queued: Vec<(Event, bool)>,
    /// Events in `queued` that are to be stored.
    to_store: usize,
    /// The writer holds a batch it has not finished with.
    busy: bool,
    closing: bool,
}

impl Pipe {
    fn lock(&self) -> MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl EventBus {
    /// A bus for `session_id` continuing after `last_seq` (0 for a new session).
    pub fn new(session_id: &str, last_seq: u64, store: Option<Arc<dyn SessionStore>>) -> EventBus {
        let beat = store.as_ref().map(|s| Heartbeat::start(s, session_id));
        EventBus {
            session_id: session_id.to_owned(),
            store,
            state: Arc::new(Mutex::new(BusState {
                seq: last_seq,
                sinks: Vec::new(),
                store_error: None,
            })),
            notices: Notices::default(),
            pipe: None,
            writer: None,
            _beat: beat,
        }
    }

    /// This bus, committing in the background (group commit): `emit` queues
    /// the stamped event and returns, and a thread of the bus's own stores
    /// everything queued since its last commit in one transaction, then sends
    /// it to the sinks. Sinks still see only stored events, in order; the
    /// store holds a prefix of what was emitted; [`EventBus::flush`] (and
    /// [`EventBus::store_error`], and dropping the bus) waits for the store.
    /// A bus without a store, or whose thread cannot start, stays synchronous.
    pub fn pipelined(mut self) -> EventBus {
        let Some(store) = self.store.clone() else {
            return self;
        };
        if self.pipe.is_some() {
            return self;
        }
        let pipe = Arc::new(Pipe {
            state: Mutex::new(PipeState::default()),
            work: Condvar::new(),
            progress: Condvar::new(),
        });
        let (p, state, id) = (pipe.clone(), self.state.clone(), self.session_id.clone());
        if let Ok(handle) = std::thread::Builder::new()
            .name("agentfile-store".into())
            .spawn(move || write_behind(&p, &state, store.as_ref(), &id))
        {
            self.pipe = Some(pipe);
            self.writer = Some(handle);
        }
        self
    }

    /// On a pipelined bus, wait while [`MAX_QUEUED`] events are waiting for
    /// the writer: a run never gets far ahead of its log, even on a stalled
    /// disk. Called before taking the bus's lock, which the writer needs.
    fn wait_for_room(&self) {
        let Some(pipe) = &self.pipe else {
            return;
        };
        let mut p = pipe.lock();
        while p.to_store >= MAX_QUEUED && !p.closing {
            p = pipe.progress.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Wait until every event emitted so far has been handled by the store:
    /// stored (and sent), or refused. Immediate on a synchronous bus.
    pub fn flush(&self) {
        let Some(pipe) = &self.pipe else {
            return;
        };
        let mut p = pipe.lock();
        while !p.queued.is_empty() || p.busy {
            p = pipe.progress.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// This bus, emitting what is pushed to `notices` as `error` events.
    pub fn with_notices(mut self, notices: Notices) -> EventBus {
        self.notices = notices;
        self
    }

    /// Where to push errors the run survives (see [`Notices`]).
    pub fn notices(&self) -> Notices {
        self.notices.clone()
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn subscribe(&self, sink: Arc<dyn EventSink>) {
        self.lock().sinks.push(sink);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BusState> {
        // A panicking sink must not take the whole run down with a poisoned lock.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last seq emitted.
    pub fn last_seq(&self) -> u64 {
        self.lock().seq
    }

    /// The store's first failure, if any, once everything emitted so far has
    /// been handled (see [`EventBus::flush`]).
    pub fn store_error(&self) -> Option<String> {
        self.flush();
        self.lock().store_error.clone()
    }

    /// The store's first failure as known now, without waiting for the events
    /// a pipelined bus is still committing. For a check before each step of a
    /// run: a failure stops the run at the first step after it is known.
    pub fn known_store_error(&self) -> Option<String> {
        self.lock().store_error.clone()
    }

    /// Stamp, store, and fan out one event. Returns it as stamped.
    ///
    /// Sinks see an event only once the store has it: when the append fails,
    /// or failed for an earlier event, nobody is told about this one, so a
    /// client never learns of an event that a resume would not find. The first
    /// failure is logged once and kept for [`EventBus::store_error`]; later
    /// events are not offered to the store again (their `seq` would no longer
    /// follow the stored log).
    pub fn emit(&self, scope: &Scope, body: EventBody) -> Event {
        self.wait_for_room();
        let mut st = self.lock();
        self.flush_notices(&mut st);
        let event = self.stamp(&st, scope, body, 1, rfc3339(SystemTime::now()));
        self.store_and_send(&mut st, std::slice::from_ref(&event));
        event
    }

    /// [`EventBus::emit`] without handing the event back: on a pipelined bus
    /// the event moves to the writer instead of being copied for it (an
    /// event can be large: a run's outputs, a map's list of results).
    pub fn post(&self, scope: &Scope, body: EventBody) {
        self.wait_for_room();
        let mut st = self.lock();
        self.flush_notices(&mut st);
        let event = self.stamp(&st, scope, body, 1, rfc3339(SystemTime::now()));
        self.store_and_send_owned(&mut st, vec![event]);
    }

    /// [`EventBus::emit_timed`] without handing the events back (see
    /// [`EventBus::post`]).
    pub fn post_timed(&self, items: Vec<(Scope, EventBody, String)>) {
        self.wait_for_room();
        let mut st = self.lock();
        self.flush_notices(&mut st);
        let events: Vec<Event> = items
            .into_iter()
            .zip(1..)
            .map(|((scope, body, ts), n)| self.stamp(&st, &scope, body, n, ts))
            .collect();
        self.store_and_send_owned(&mut st, events);
    }

    /// [`EventBus::emit`] for several events that are ready at the same moment
    /// (a model's answer and the tool call it asks for, a tool's result and the
    /// next model request): they get consecutive `seq`s and one timestamp, and
    /// are stored with one transaction and one commit
    /// ([`SessionStore::append_batch`]) instead of one each, which is most of
    /// what storing an event costs. The guarantees are those of `emit`, for the
    /// burst as a whole: every sink sees each event, in order, only after the
    /// commit that holds all of them; if the store refuses the burst, no sink
    /// sees any of it. Returns the events as stamped.
    pub fn emit_all(
        &self,
        scope: &Scope,
        bodies: impl IntoIterator<Item = EventBody>,
    ) -> Vec<Event> {
        self.wait_for_room();
        let mut st = self.lock();
        self.flush_notices(&mut st);
        let ts = rfc3339(SystemTime::now());
        let events: Vec<Event> = bodies
            .into_iter()
            .zip(1..)
            .map(|(body, n)| self.stamp(&st, scope, body, n, ts.clone()))
            .collect();
        self.store_and_send(&mut st, &events);
        events
    }

    /// [`EventBus::emit_all`] for events of different scopes, each with the
    /// time it happened (RFC 3339): stored in one commit, then sent in order.
    pub fn emit_timed(&self, items: Vec<(Scope, EventBody, String)>) -> Vec<Event> {
        self.wait_for_room();
        let mut st = self.lock();
        self.flush_notices(&mut st);
        let events: Vec<Event> = items
            .into_iter()
            .zip(1..)
            .map(|((scope, body, ts), n)| self.stamp(&st, &scope, body, n, ts))
            .collect();
        self.store_and_send(&mut st, &events);
        events
    }

    /// Emit what was pushed to the notices as `error` events (run-level).
    fn flush_notices(&self, st: &mut BusState) {
        let pending = self.notices.take();
        if pending.is_empty() {
            return;
        }
        let ts = rfc3339(SystemTime::now());
        let events: Vec<Event> = pending
            .into_iter()
            .zip(1..)
            .map(|(message, n)| {
                self.stamp(
                    st,
                    &Scope::default(),
                    EventBody::Error { message },
                    n,
                    ts.clone(),
                )
            })
            .collect();
        self.store_and_send(st, &events);
    }

    /// The event `nth` (1-based) after the last one emitted.
    fn stamp(&self, st: &BusState, scope: &Scope, body: EventBody, nth: u64, ts: String) -> Event {
        Event {
            schema_version: EVENT_SCHEMA_VERSION,
            session_id: self.session_id.clone(),
            seq: st.seq + nth,
            ts,
            step: scope.step.clone(),
            goal: scope.goal.clone(),
            agent: scope.agent.clone(),
            iteration: scope.iteration,
            node: scope.node.clone(),
            node_kind: scope.node_kind.map(str::to_owned),
            replayed: false,
            body,
        }
    }

    /// [`EventBus::store_and_send`] for events the caller gives up: a
    /// pipelined bus queues them as they are.
    fn store_and_send_owned(&self, st: &mut BusState, events: Vec<Event>) {
        let Some(pipe) = &self.pipe else {
            self.store_and_send(st, &events);
            return;
        };
        let Some(last) = events.last() else {
            return;
        };
        st.seq = last.seq;
        if st.store_error.is_some() {
            // Not offered to the store again, and so never sent.
            return;
        }
        let mut p = pipe.lock();
        p.to_store += events.len();
        p.queued.extend(events.into_iter().map(|e| (e, true)));
        drop(p);
        pipe.work.notify_one();
    }

    /// Store `events` (consecutive, following `st.seq`) in one commit, then
    /// hand them to the sinks if that succeeded. Called with the lock held, so
    /// bursts from concurrent agents never interleave. A pipelined bus queues
    /// them for its writer instead.
    fn store_and_send(&self, st: &mut BusState, events: &[Event]) {
        let Some(last) = events.last() else {
            return;
        };
        if let Some(pipe) = &self.pipe {
            st.seq = last.seq;
            if st.store_error.is_some() {
                // Not offered to the store again, and so never sent.
                return;
            }
            let mut p = pipe.lock();
            p.queued.extend(events.iter().map(|e| (e.clone(), true)));
            p.to_store += events.len();
            drop(p);
            pipe.work.notify_one();
            return;
        }
        let stored = match &self.store {
            None => true,
            Some(_) if st.store_error.is_some() => false,
            Some(store) => match store.append_batch(events) {
                Ok(()) => true,
                Err(e) => {
                    tracing::debug!(session = %self.session_id, seq = events[0].seq, error = %e, "the session store failed; the run stops");
                    st.store_error = Some(e.to_string());
                    false
                }
            },
        };
        st.seq = last.seq;
        if stored {
            for event in events {
                for sink in &st.sinks {
                    sink.send(event);
                }
            }
        }
    }
}

impl EventBus {
    /// Send a transient event (see [`EventSink::send_transient`]) to the sinks
    /// that want it. Nothing is stored and `seq` does not move; under the same
    /// lock as [`EventBus::emit`], so it lands between the stored events it
    /// happened between.
    pub fn emit_transient(&self, scope: &Scope, body: EventBody) {
        let st = self.lock();
        if st.store_error.is_some() || st.sinks.is_empty() {
            return;
        }
        // `nth` 0: the seq of the last stored event.
        let event = self.stamp(&st, scope, body, 0, rfc3339(SystemTime::now()));
        if let Some(pipe) = &self.pipe {
            // Behind the events queued before it, so it reaches the sinks
            // between the stored events it happened between.
            pipe.lock().queued.push((event, false));
            pipe.work.notify_one();
            return;
        }
        for sink in &st.sinks {
            sink.send_transient(&event);
        }
    }
}

impl Drop for EventBus {
    /// A pipelined bus stores what is still queued before it goes.
    fn drop(&mut self) {
        if let Some(pipe) = &self.pipe {
            pipe.lock().closing = true;
            pipe.work.notify_one();
        }
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The writer of a pipelined bus: commit everything queued since the last
/// commit in one transaction, then send it to the sinks, in order; until the
/// bus closes and nothing is left.
fn write_behind(pipe: &Pipe, state: &Mutex<BusState>, store: &dyn SessionStore, id: &str) {
    let lock_state = || state.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let batch = {
            let mut p = pipe.lock();
            while p.queued.is_empty() && !p.closing {
                p = pipe.work.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            if p.queued.is_empty() {
                return;
            }
            p.busy = true;
            p.to_store = 0;
            std::mem::take(&mut p.queued)
        };
        // Room in the queue again.
        pipe.progress.notify_all();
        let mut to_store = Vec::new();
        let mut order = Vec::with_capacity(batch.len());
        for (event, stored) in batch {
            if stored {
                order.push(Err(to_store.len()));
                to_store.push(event);
            } else {
                order.push(Ok(event));
            }
        }
        let commit_and_send = || {
            let failed_before = lock_state().store_error.is_some();
            let stored = !failed_before
                && (to_store.is_empty()
                    || match store.append_batch(&to_store) {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::debug!(session = %id, seq = to_store[0].seq, error = %e, "the session store failed; the run stops");
                            lock_state().store_error = Some(e.to_string());
                            false
                        }
                    });
            if stored {
                let st = lock_state();
                for item in &order {
                    match item {
                        Err(i) => st.sinks.iter().for_each(|s| s.send(&to_store[*i])),
                        Ok(transient) => st.sinks.iter().for_each(|s| s.send_transient(transient)),
                    }
                }
            }
        };
        // A panicking sink (or store) must not leave the bus waiting forever
        // for a writer that is gone: the batch counts as handled, and the
        // failure stops the run like a store error.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(commit_and_send)).is_err() {
            let mut st = lock_state();
            if st.store_error.is_none() {
                st.store_error = Some("the event writer panicked".to_owned());
            }
        }
        pipe.lock().busy = false;
        pipe.progress.notify_all();
    }
}

/// One process-wide thread beats for every live bus: a run's heartbeat must
/// not depend on its own tasks being scheduled, and a server with a thousand
/// runs should not need a thousand timers.
struct Heartbeat {
    key: u64,
}

type Beating = Mutex<Vec<(u64, Weak<dyn SessionStore>, String)>>;

fn beating() -> &'static Beating {
    static BEATING: OnceLock<Beating> = OnceLock::new();
    BEATING.get_or_init(|| {
        // If the thread cannot start, sessions on this machine are still
        // judged by their owner's pid; only other hosts rely on the beat.
        let _ = std::thread::Builder::new()
            .name("agentfile-heartbeat".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(HEARTBEAT_INTERVAL);
                    let due: Vec<(Arc<dyn SessionStore>, String)> = beating()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .iter()
                        .filter_map(|(_, store, id)| Some((store.upgrade()?, id.clone())))
                        .collect();
                    for (store, id) in due {
                        // A failed beat is retried at the next one; the run
                        // itself reports store failures through its events.
                        let _ = store.heartbeat(&id);
                    }
                }
            });
        Mutex::new(Vec::new())
    })
}

impl Heartbeat {
    fn start(store: &Arc<dyn SessionStore>, id: &str) -> Heartbeat {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let key = NEXT.fetch_add(1, Ordering::Relaxed);
        beating().lock().unwrap_or_else(|p| p.into_inner()).push((
            key,
            Arc::downgrade(store),
            id.to_owned(),
        ));
        Heartbeat { key }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        beating()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(k, _, _)| *k != self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_is_dense_and_sinks_see_every_event() {
        let bus = EventBus::new("s1", 4, None);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        bus.subscribe(Arc::new(move |e: &Event| s.lock().unwrap().push(e.seq)));
        bus.emit(
            &Scope::default(),
            EventBody::Warning {
                message: "a".into(),
            },
        );
        bus.emit(
            &Scope::step("x"),
            EventBody::Warning {
                message: "b".into(),
            },
        );
        assert_eq!(*seen.lock().unwrap(), vec![5, 6]);
        assert_eq!(bus.last_seq(), 6);
    }

    /// A store whose appends fail with a full disk after `ok` successes.
    struct FullDisk {
        ok: u64,
        appends: Mutex<u64>,
    }

    impl SessionStore for FullDisk {
        fn create(&self, _: &crate::SessionMeta) -> Result<(), StoreError> {
            Ok(())
        }
        fn append(&self, _: &Event) -> Result<(), StoreError> {
            let mut n = self.appends.lock().unwrap();
            *n += 1;
            if *n > self.ok {
                return Err(StoreError::DiskFull {
                    path: "/full/sessions.db".into(),
                    message: "cannot store the event".into(),
                });
            }
            Ok(())
        }
        fn set_status(&self, _: &str, _: crate::SessionStatus) -> Result<(), StoreError> {
            Ok(())
        }
        fn get(&self, id: &str) -> Result<crate::SessionMeta, StoreError> {
            Err(StoreError::NotFound(id.into()))
        }
        fn list(
            &self,
            _: Option<crate::SessionStatus>,
            _: usize,
        ) -> Result<Vec<crate::SessionMeta>, StoreError> {
            Ok(Vec::new())
        }
        fn events(&self, _: &str, _: u64) -> Result<Vec<Event>, StoreError> {
            Ok(Vec::new())
        }
    }

    use crate::StoreError;

    /// Records each batch it is given; refuses, all-or-nothing, any batch
    /// that would take it past `ok` events.
    struct Batches {
        ok: usize,
        stored: Mutex<Vec<u64>>,
        batches: Mutex<Vec<usize>>,
    }

    impl SessionStore for Batches {
        fn create(&self, _: &crate::SessionMeta) -> Result<(), StoreError> {
            Ok(())
        }
        fn append(&self, e: &Event) -> Result<(), StoreError> {
            self.append_batch(std::slice::from_ref(e))
        }
        fn append_batch(&self, events: &[Event]) -> Result<(), StoreError> {
            self.batches.lock().unwrap().push(events.len());
            let mut stored = self.stored.lock().unwrap();
            if stored.len() + events.len() > self.ok {
                return Err(StoreError::DiskFull {
                    path: "/full/sessions.db".into(),
                    message: "cannot store the events".into(),
                });
            }
            stored.extend(events.iter().map(|e| e.seq));
            Ok(())
        }
        fn set_status(&self, _: &str, _: crate::SessionStatus) -> Result<(), StoreError> {
            Ok(())
        }
        fn get(&self, id: &str) -> Result<crate::SessionMeta, StoreError> {
            Err(StoreError::NotFound(id.into()))
        }
        fn list(
            &self,
            _: Option<crate::SessionStatus>,
            _: usize,
        ) -> Result<Vec<crate::SessionMeta>, StoreError> {
            Ok(Vec::new())
        }
        fn events(&self, _: &str, _: u64) -> Result<Vec<Event>, StoreError> {
            Ok(Vec::new())
        }
    }

    fn warnings(names: &[&str]) -> Vec<EventBody> {
        names
            .iter()
            .map(|m| EventBody::Warning {
                message: (*m).to_owned(),
            })
            .collect()
    }

    #[test]
    fn emit_all_stores_a_burst_with_one_commit_before_any_sink_sees_it() {
        let store = Arc::new(Batches {
            ok: 100,
            stored: Mutex::new(Vec::new()),
            batches: Mutex::new(Vec::new()),
        });
        let bus = EventBus::new("s1", 0, Some(store.clone()));
        // The sink checks, for every event it is sent, that the store already
        // holds it.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s, st) = (seen.clone(), store.clone());
        bus.subscribe(Arc::new(move |e: &Event| {
            assert!(
                st.stored.lock().unwrap().contains(&e.seq),
                "sent before stored"
            );
            s.lock().unwrap().push(e.seq);
        }));
        bus.emit(&Scope::default(), warnings(&["a"]).remove(0));
        let burst = bus.emit_all(&Scope::step("x"), warnings(&["b", "c", "d"]));
        assert_eq!(burst.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3, 4]);
        assert!(burst.iter().all(|e| e.step.as_deref() == Some("x")));
        assert!(bus.emit_all(&Scope::default(), Vec::new()).is_empty());
        bus.emit(&Scope::default(), warnings(&["e"]).remove(0));
        assert_eq!(
            *store.batches.lock().unwrap(),
            [1, 3, 1],
            "one commit per burst"
        );
        assert_eq!(*seen.lock().unwrap(), [1, 2, 3, 4, 5]);
        assert_eq!(bus.last_seq(), 5);
    }

    #[test]
    fn a_refused_burst_reaches_no_sink() {
        let store = Arc::new(Batches {
            ok: 2,
            stored: Mutex::new(Vec::new()),
            batches: Mutex::new(Vec::new()),
        });
        let bus = EventBus::new("s1", 0, Some(store.clone()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        bus.subscribe(Arc::new(move |e: &Event| s.lock().unwrap().push(e.seq)));
        bus.emit_all(&Scope::default(), warnings(&["a"]));
        // Would be events 2 and 3; the store takes only one more, so neither.
        bus.emit_all(&Scope::default(), warnings(&["b", "c"]));
        bus.emit(&Scope::default(), warnings(&["d"]).remove(0));
        assert_eq!(*seen.lock().unwrap(), [1]);
        assert_eq!(*store.batches.lock().unwrap(), [1, 2], "not offered again");
        assert!(bus.store_error().unwrap().contains("disk full"));
    }

    /// A store that takes a while per commit, so a pipelined bus queues.
    struct Slow(Batches);

    impl SessionStore for Slow {
        fn create(&self, m: &crate::SessionMeta) -> Result<(), StoreError> {
            self.0.create(m)
        }
        fn append(&self, e: &Event) -> Result<(), StoreError> {
            self.append_batch(std::slice::from_ref(e))
        }
        fn append_batch(&self, events: &[Event]) -> Result<(), StoreError> {
            std::thread::sleep(std::time::Duration::from_millis(5));
            self.0.append_batch(events)
        }
        fn set_status(&self, id: &str, s: crate::SessionStatus) -> Result<(), StoreError> {
            self.0.set_status(id, s)
        }
        fn get(&self, id: &str) -> Result<crate::SessionMeta, StoreError> {
            self.0.get(id)
        }
        fn list(
            &self,
            s: Option<crate::SessionStatus>,
            n: usize,
        ) -> Result<Vec<crate::SessionMeta>, StoreError> {
            self.0.list(s, n)
        }
        fn events(&self, id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
            self.0.events(id, after)
        }
    }

    fn slow(ok: usize) -> Arc<Slow> {
        Arc::new(Slow(Batches {
            ok,
            stored: Mutex::new(Vec::new()),
            batches: Mutex::new(Vec::new()),
        }))
    }

    #[test]
    fn a_pipelined_bus_groups_commits_and_sends_only_what_is_stored_in_order() {
        let store = slow(1000);
        let bus = EventBus::new("s1", 0, Some(store.clone())).pipelined();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s, st) = (seen.clone(), store.clone());
        bus.subscribe(Arc::new(AllEvents(move |e: &Event| {
            if !matches!(e.body, EventBody::LlmDelta { .. }) {
                assert!(
                    st.0.stored.lock().unwrap().contains(&e.seq),
                    "sent before stored"
                );
            }
            s.lock().unwrap().push((e.seq, e.kind().to_owned()));
        })));
        for i in 0..20 {
            bus.emit(&Scope::default(), warnings(&["w"]).remove(0));
            if i == 9 {
                bus.emit_transient(
                    &Scope::default(),
                    EventBody::LlmDelta {
                        turn: 1,
                        text: "t".into(),
                        restart: false,
                    },
                );
            }
        }
        assert_eq!(bus.last_seq(), 20, "stamped at once");
        bus.flush();
        let seen = seen.lock().unwrap().clone();
        let seqs: Vec<u64> = seen.iter().map(|(s, _)| *s).collect();
        // The transient one lands between the events it happened between,
        // carrying the seq of the last event before it.
        let mut want: Vec<u64> = (1..=10).collect();
        want.push(10);
        want.extend(11..=20);
        assert_eq!(seqs, want);
        assert_eq!(seen[10].1, "llm_delta");
        let batches = store.0.batches.lock().unwrap().clone();
        assert_eq!(batches.iter().sum::<usize>(), 20);
        assert!(batches.len() < 20, "group commit: {batches:?}");
        assert!(bus.store_error().is_none());
    }

    #[test]
    fn a_pipelined_bus_stops_at_the_first_refusal_and_drop_stores_the_rest() {
        let store = slow(3);
        let bus = EventBus::new("s1", 0, Some(store.clone())).pipelined();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        bus.subscribe(Arc::new(move |e: &Event| s.lock().unwrap().push(e.seq)));
        bus.emit_all(&Scope::default(), warnings(&["a", "b"]));
        bus.flush();
        bus.emit_all(&Scope::default(), warnings(&["c", "d"]));
        let err = bus.store_error().unwrap();
        assert!(err.contains("disk full"), "{err}");
        assert_eq!(bus.known_store_error(), Some(err));
        bus.emit(&Scope::default(), warnings(&["e"]).remove(0));
        bus.flush();
        assert_eq!(*seen.lock().unwrap(), [1, 2], "only stored events are sent");
        assert_eq!(*store.0.stored.lock().unwrap(), [1, 2]);
        assert_eq!(
            store.0.batches.lock().unwrap().len(),
            2,
            "not offered again"
        );

        // Dropping a bus waits for what it still holds.
        let store = slow(100);
        let bus = EventBus::new("s2", 0, Some(store.clone())).pipelined();
        for _ in 0..5 {
            bus.emit(&Scope::default(), warnings(&["x"]).remove(0));
        }
        drop(bus);
        assert_eq!(*store.0.stored.lock().unwrap(), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_bus_without_a_store_stays_synchronous() {
        let bus = EventBus::new("s1", 0, None).pipelined();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        bus.subscribe(Arc::new(move |e: &Event| s.lock().unwrap().push(e.seq)));
        bus.emit(&Scope::default(), warnings(&["a"]).remove(0));
        assert_eq!(*seen.lock().unwrap(), [1]);
    }

    #[test]
    fn sinks_never_see_an_event_the_store_refused() {
        let store = Arc::new(FullDisk {
            ok: 2,
            appends: Mutex::new(0),
        });
        let bus = EventBus::new("s1", 0, Some(store.clone()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        bus.subscribe(Arc::new(move |e: &Event| s.lock().unwrap().push(e.seq)));
        for i in 0..5 {
            bus.emit(
                &Scope::default(),
                EventBody::Warning {
                    message: format!("w{i}"),
                },
            );
        }
        assert_eq!(
            *seen.lock().unwrap(),
            vec![1, 2],
            "only stored events are sent"
        );
        // The failure is reported once, and the store is not asked again.
        assert_eq!(*store.appends.lock().unwrap(), 3);
        let err = bus.store_error().unwrap();
        assert!(err.contains("disk full"), "{err}");
    }
}
