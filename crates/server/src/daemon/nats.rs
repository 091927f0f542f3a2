//! With `agentfile daemon --nats URL`: `kind: event` triggers also fire on
//! NATS (CONTRACT §15).
//!
//! An event named `NAME` is a message on [`event_subject`]`(NAME)` =
//! `agentfile.emit.NAME` (the name may hold dots: `deploy.done` →
//! `agentfile.emit.deploy.done`). Its payload is the event's JSON payload (an
//! object, the workflows' inputs; empty for none); its `Nats-Msg-Id` header
//! is the event id (else a fresh one). Each message goes through
//! [`Daemon::emit`], so each subscribed workflow runs once per event id, as
//! with `agentfile emit`: the fire record in the session store decides.
//!
//! The daemons subscribe in one queue group ([`QUEUE_GROUP`]), so a message
//! reaches one daemon of several; the fire record still makes a message
//! published twice with the same id (or delivered to two daemons on one
//! store some other way) fire once. Core NATS: an event published while no
//! daemon listens is not kept. A message with a reply subject is answered
//! with what fired (`{"event", "id", "fires": [...]}` or `{"error"}`), so
//! `nats request agentfile.emit.NAME '{…}'` works as `agentfile emit`.
//!
//! Not `agentfile.events.*`: that prefix carries sessions' run events
//! between workers and servers (`crate::cluster::events_subject`).

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Daemon;

/// What every event subject starts with.
pub const EVENT_PREFIX: &str = "agentfile.emit";
/// The queue group the daemons' subscriptions share.
pub const QUEUE_GROUP: &str = "agentfile-daemons";

/// The subject an event named `name` is published on.
pub fn event_subject(name: &str) -> String {
    format!("{EVENT_PREFIX}.{name}")
}

/// The event name a subject carries, `None` for a subject outside
/// [`EVENT_PREFIX`] or with an empty name.
pub fn event_name(subject: &str) -> Option<&str> {
    subject
        .strip_prefix(EVENT_PREFIX)?
        .strip_prefix('.')
        .filter(|n| !n.is_empty())
}

/// A message's payload as the event's: empty (or blank) is no payload.
pub fn event_payload(bytes: &[u8]) -> Result<Value, NotJson> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).map_err(NotJson)
}

/// A message whose payload is not JSON.
#[derive(Debug, thiserror::Error)]
#[error("the message is not JSON: {0}")]
pub struct NotJson(serde_json::Error);

/// The event subjects could not be subscribed to.
#[derive(Debug, thiserror::Error)]
#[error("cannot subscribe to {subject}: {source}")]
pub struct SubscribeFailed {
    subject: String,
    source: async_nats::SubscribeError,
}

/// Subscribe to every event subject until `stop`; each message is fired in
/// its own task (a queued fire does not hold the next message back).
pub async fn serve_events(
    daemon: Arc<Daemon>,
    client: async_nats::Client,
    stop: CancellationToken,
) -> Result<(), SubscribeFailed> {
    let subject = format!("{EVENT_PREFIX}.>");
    let mut sub = client
        .queue_subscribe(subject.clone(), QUEUE_GROUP.into())
        .await
        .map_err(|source| SubscribeFailed {
            subject: subject.clone(),
            source,
        })?;
    // The subscription is in place once the server has seen it.
    let _ = client.flush().await;
    tokio::spawn(async move {
        loop {
            let msg = tokio::select! {
                _ = stop.cancelled() => break,
                m = sub.next() => match m {
                    Some(m) => m,
                    None => break,
                },
            };
            let daemon = daemon.clone();
            let client = client.clone();
            tokio::spawn(async move {
                let answer = handle(&daemon, &msg).await;
                if let Some(reply) = msg.reply.clone() {
                    let _ = client.publish(reply, answer.to_string().into()).await;
                }
            });
        }
        let _ = sub.unsubscribe().await;
    });
    Ok(())
}

/// One message: the answer a requester gets.
async fn handle(daemon: &Arc<Daemon>, msg: &async_nats::Message) -> Value {
    let Some(name) = event_name(msg.subject.as_str()) else {
        return json!({"error": format!("`{}` names no event", msg.subject)});
    };
    let id = msg
        .headers
        .as_ref()
        .and_then(|h| h.get("Nats-Msg-Id"))
        .map(|v| v.as_str().trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| format!("event-{}", agentfile_session::new_session_id()));
    let payload = match event_payload(&msg.payload) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(event = name, id = %id, error = %e, "NATS event not fired");
            return json!({"event": name, "id": id, "error": e.to_string()});
        }
    };
    match daemon.emit(name, &id, payload).await {
        Err(e) => {
            tracing::warn!(event = name, id = %id, error = %e, "NATS event not fired");
            json!({"event": name, "id": id, "error": e.to_string()})
        }
        Ok(fires) => {
            if fires.is_empty() {
                tracing::info!(event = name, id = %id, "NATS event: no workflow subscribes");
            }
            let fires: Vec<Value> = fires
                .into_iter()
                .map(|f| match f {
                    Ok(r) => serde_json::to_value(r).unwrap_or(Value::Null),
                    Err(e) => json!({"error": e.to_string()}),
                })
                .collect();
            json!({"event": name, "id": id, "fires": fires})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_carry_the_event_name() {
        assert_eq!(event_subject("deploy.done"), "agentfile.emit.deploy.done");
        assert_eq!(
            event_name("agentfile.emit.deploy.done"),
            Some("deploy.done")
        );
        assert_eq!(event_name("agentfile.emit."), None);
        assert_eq!(event_name("agentfile.emit"), None);
        assert_eq!(event_name("agentfile.emitter.x"), None);
        assert_eq!(event_name("agentfile.events.x"), None);
    }

    #[test]
    fn payloads_are_json_or_nothing() {
        assert_eq!(event_payload(b"").unwrap(), Value::Null);
        assert_eq!(event_payload(b" \n").unwrap(), Value::Null);
        assert_eq!(event_payload(br#"{"a":1}"#).unwrap()["a"], 1);
        assert!(
            event_payload(b"{nope")
                .unwrap_err()
                .to_string()
                .contains("not JSON")
        );
    }
}
