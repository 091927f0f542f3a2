//! The event bus: one ordered stream of events per run, fanned out to sinks.
//!
//! The bus stamps each event with its session id, a dense `seq` and a timestamp,
//! writes it to the session store, and only then hands it to the other sinks (the
//! CLI printer, a JSON-RPC connection, MCP progress, telemetry). Emission holds a
//! lock, so events from concurrent agents never interleave out of order.
//!
//! What it is not: a queue. Sinks are called synchronously and must be quick (a
//! sink that needs to do slow work forwards into its own bounded channel).

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::protocol::events::{EVENT_SCHEMA_VERSION, Event, EventBody, rfc3339};
use crate::session::SessionStore;

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
    state: Mutex<BusState>,
}

impl EventBus {
    /// A bus for `session_id` continuing after `last_seq` (0 for a new session).
    pub fn new(session_id: &str, last_seq: u64, store: Option<Arc<dyn SessionStore>>) -> EventBus {
        EventBus {
            session_id: session_id.to_owned(),
            store,
            state: Mutex::new(BusState {
                seq: last_seq,
                sinks: Vec::new(),
                store_error: None,
            }),
        }
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

    /// The store's first failure, if any.
    pub fn store_error(&self) -> Option<String> {
        self.lock().store_error.clone()
    }

    /// Stamp, store, and fan out one event. Returns it as sent.
    pub fn emit(&self, scope: &Scope, body: EventBody) -> Event {
        let mut st = self.lock();
        let event = Event {
            schema_version: EVENT_SCHEMA_VERSION,
            session_id: self.session_id.clone(),
            seq: st.seq + 1,
            ts: rfc3339(SystemTime::now()),
            step: scope.step.clone(),
            goal: scope.goal.clone(),
            agent: scope.agent.clone(),
            iteration: scope.iteration,
            body,
        };
        if let Some(store) = &self.store
            && st.store_error.is_none()
            && let Err(e) = store.append(&event)
        {
            tracing::error!(session = %self.session_id, seq = event.seq, error = %e, "the session store failed; the run stops");
            st.store_error = Some(e.to_string());
        }
        st.seq = event.seq;
        for sink in &st.sinks {
            sink.send(&event);
        }
        event
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
        let event = Event {
            schema_version: EVENT_SCHEMA_VERSION,
            session_id: self.session_id.clone(),
            seq: st.seq,
            ts: rfc3339(SystemTime::now()),
            step: scope.step.clone(),
            goal: scope.goal.clone(),
            agent: scope.agent.clone(),
            iteration: scope.iteration,
            body,
        };
        for sink in &st.sinks {
            sink.send_transient(&event);
        }
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
}
