//! A suspend node: the run stops (exit 6) until a signal resumes it or its
//! deadline passes.

use super::*;

impl<'a> RunCx<'a> {
    pub(super) fn run_suspend(
        &self,
        path: &str,
        scope: &Scope,
        events: &[String],
        timeout_ms: Option<u64>,
        on_timeout: &OnTimeout,
    ) -> Result<Outcome, Stop> {
        let mut j = self.journal();
        if let Some((name, payload)) = j.take_signal(path, events) {
            // The payload's own fields are the step's outputs (AIP-15's
            // examples read `$steps.<id>.chargeId`), beside `eventName` and
            // the whole `eventPayload`.
            let mut value = match &payload {
                Value::Object(o) => o.clone(),
                _ => serde_json::Map::new(),
            };
            value.insert("eventName".into(), json!(name));
            value.insert("eventPayload".into(), payload);
            return Ok(Outcome {
                value: Arc::new(Value::Object(value)),
                ..Outcome::default()
            });
        }
        let deadline = match j.deadlines.get(path) {
            Some(d) => Some(*d),
            None => timeout_ms.map(|t| now_ms().saturating_add(t)),
        };
        let waiting = j.suspended.contains_key(path);
        drop(j);
        if let Some(d) = deadline
            && now_ms() >= d
        {
            let route = self.on_timeout(on_timeout, path, "suspend")?;
            return Ok(Outcome {
                value: Arc::new(json!({"eventName": null, "timedOut": true})),
                route,
                ..Outcome::default()
            });
        }
        if !waiting {
            self.emit(
                scope,
                EventBody::Suspended {
                    events: events.to_vec(),
                    deadline_ms: deadline,
                },
            );
        }
        Err(Stop::Suspended(events.to_vec()))
    }
}
