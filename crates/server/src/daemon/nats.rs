//! With `agentfile daemon --nats URL`: `kind: event` triggers also fire on
//! NATS (CONTRACT §15, §22), through JetStream, so an event published while
//! no daemon listens fires when one starts.
//!
//! An event named `NAME` is a message on [`event_subject`]`(NAME)` =
//! `agentfile.emit.NAME` (the name may hold dots: `deploy.done` →
//! `agentfile.emit.deploy.done`). Its payload is the event's JSON payload (an
//! object, the workflows' inputs; empty for none). Its id is the
//! [`EVENT_ID_HEADER`] header, else `Nats-Msg-Id` (which JetStream also
//! deduplicates within its window), else one made from the message's place in
//! the stream (the same on a redelivery). Each message goes through
//! [`Daemon::emit`], so each subscribed workflow runs once per event id, as
//! with `agentfile emit`: the fire record in the session store decides.
//!
//! The stream [`EVENTS_STREAM`] keeps every message on `agentfile.emit.>` for
//! the retention `[daemon] event_retention` sets ([`DEFAULT_RETENTION`]);
//! the daemons share one durable consumer ([`CONSUMER`]), so a message
//! reaches one daemon of several, and one started later takes what was
//! published while none listened. A message is acknowledged once handled; a
//! daemon that dies first leaves it to be delivered again, and the fire
//! record keeps it from firing twice. A message whose [`REPLY_HEADER`] names
//! a subject is answered there with what fired (`{"event", "id", "fires":
//! [...]}` or `{"error"}`), which is how `agentfile emit --nats` prints the
//! sessions; a plain core request is answered by JetStream's ack (stored).
//! Every listening daemon also answers [`PRESENCE_SUBJECT`], so a publisher
//! learns at once whether anyone will answer now.
//!
//! Not `agentfile.events.*`: that prefix carries sessions' run events
//! between workers and servers (`crate::cluster::events_subject`).

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{consumer, stream};
use futures::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::Daemon;
use crate::cluster::{Cluster, ClusterError};

/// What every event subject starts with.
pub const EVENT_PREFIX: &str = "agentfile.emit";
/// The JetStream stream events are kept in.
pub const EVENTS_STREAM: &str = "AGENTFILE_EVENTS";
/// The durable consumer the daemons share.
pub const CONSUMER: &str = "agentfile-daemons";
/// How long an event waits in the stream for a daemon when `[daemon]
/// event_retention` does not say.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// The header naming the event id (not deduplicated by JetStream: the fire
/// record answers a repeated id with the first fire).
pub const EVENT_ID_HEADER: &str = "Agentfile-Event-Id";
/// The header naming the subject a daemon answers with what fired.
pub const REPLY_HEADER: &str = "Agentfile-Reply-To";
/// The subject every listening daemon answers (with `{}`).
pub const PRESENCE_SUBJECT: &str = "agentfile.daemons.present";
/// How long a daemon may hold a message before it goes to another.
const ACK_WAIT: Duration = Duration::from_secs(30);

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

/// The events on NATS could not be served.
#[derive(Debug, thiserror::Error)]
pub enum SubscribeFailed {
    #[error(
        "agent.toml `[daemon] event_retention = {value}` is not allowed; use a duration such as \"24h\" or \"7d\""
    )]
    Retention { value: Value },
    #[error("{0}")]
    Stream(ClusterError),
    #[error("stream `{EVENTS_STREAM}`: cannot open the consumer `{CONSUMER}`: {0}")]
    Consumer(String),
}

/// `[daemon] event_retention` of `config` (untyped, as the other `[daemon]`
/// keys): how long the stream keeps an event; `None` when unset.
pub fn event_retention(
    config: &agentfile_config::Config,
) -> Result<Option<Duration>, SubscribeFailed> {
    let Some(v) = config
        .other
        .get("daemon")
        .and_then(|d| d.get("event_retention"))
    else {
        return Ok(None);
    };
    v.as_str()
        .and_then(|t| agentfile_config::parse_duration(t).ok())
        .filter(|d| !d.is_zero())
        .map(Some)
        .ok_or_else(|| SubscribeFailed::Retention { value: v.clone() })
}

/// The events stream, created when missing; with `retention`, an existing
/// one is set to keep events that long.
pub async fn event_stream(
    cluster: &Cluster,
    retention: Option<Duration>,
) -> Result<stream::Stream, ClusterError> {
    let max_age = retention.unwrap_or(DEFAULT_RETENTION);
    cluster
        .ensure_stream(
            stream::Config {
                name: EVENTS_STREAM.into(),
                subjects: vec![format!("{EVENT_PREFIX}.>")],
                retention: stream::RetentionPolicy::Limits,
                storage: stream::StorageType::File,
                max_age,
                duplicate_window: max_age.min(Duration::from_secs(120)),
                ..Default::default()
            },
            retention.is_some(),
        )
        .await
}

/// Take the stream's events through the daemons' consumer until `stop`;
/// each message is fired in its own task (a queued fire does not hold the
/// next message back), and acknowledged once handled.
pub async fn serve_events(
    daemon: Arc<Daemon>,
    cluster: Cluster,
    retention: Option<Duration>,
    stop: CancellationToken,
) -> Result<(), SubscribeFailed> {
    let stream = event_stream(&cluster, retention)
        .await
        .map_err(SubscribeFailed::Stream)?;
    let consumer = stream
        .get_or_create_consumer(
            CONSUMER,
            consumer::pull::Config {
                durable_name: Some(CONSUMER.into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: ACK_WAIT,
                deliver_policy: consumer::DeliverPolicy::All,
                max_deliver: -1,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| SubscribeFailed::Consumer(e.to_string()))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| SubscribeFailed::Consumer(e.to_string()))?;
    let client = cluster.client.clone();
    let mut presence = client
        .subscribe(PRESENCE_SUBJECT)
        .await
        .map_err(|e| SubscribeFailed::Consumer(e.to_string()))?;
    // The subscription is in place once the server has seen it.
    let _ = client.flush().await;
    tokio::spawn(async move {
        loop {
            let msg = tokio::select! {
                _ = stop.cancelled() => break,
                p = presence.next() => {
                    if let Some(reply) = p.and_then(|p| p.reply) {
                        let _ = client.publish(reply, "{}".into()).await;
                    }
                    continue;
                }
                m = messages.next() => match m {
                    Some(Ok(m)) => m,
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "NATS events: a message could not be read");
                        continue;
                    }
                    None => break,
                },
            };
            let daemon = daemon.clone();
            let client = client.clone();
            tokio::spawn(async move {
                let answer = handle(&daemon, &msg).await;
                let reply = header(&msg.message, REPLY_HEADER);
                if let Some(reply) = reply {
                    let _ = client.publish(reply, answer.to_string().into()).await;
                    let _ = client.flush().await;
                }
                if let Err(e) = msg.ack().await {
                    tracing::warn!(error = %e, "NATS events: cannot acknowledge a message");
                }
            });
        }
        let _ = presence.unsubscribe().await;
    });
    Ok(())
}

/// What became of an event [`publish`]ed: a daemon's answer (`{"event",
/// "id", "fires"}` or `{"error"}`), or stored only (no daemon listens now,
/// or none answered in time): it fires when one takes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Published {
    Answered(Value),
    Stored { sequence: u64 },
}

/// Publish event `name` (id `id`, `payload` as its inputs) into the events
/// stream, and wait up to `wait` for a listening daemon's answer. Returns
/// once JetStream has stored it; at once when no daemon listens.
pub async fn publish(
    cluster: &Cluster,
    name: &str,
    id: &str,
    payload: &Value,
    wait: Duration,
) -> Result<Published, ClusterError> {
    event_stream(cluster, None).await?;
    let client = &cluster.client;
    let inbox = client.new_inbox();
    let mut answers = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| ClusterError(format!("cannot subscribe to the answer: {e}")))?;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(EVENT_ID_HEADER, id);
    headers.insert(REPLY_HEADER, inbox.as_str());
    let body = if payload.is_null() {
        String::new()
    } else {
        payload.to_string()
    };
    let failed = |e: &dyn std::fmt::Display| {
        ClusterError(format!(
            "cannot store event `{name}` (id `{id}`) on NATS: {e}"
        ))
    };
    let ack = cluster
        .js
        .publish_with_headers(event_subject(name), headers, body.into())
        .await
        .map_err(|e| failed(&e))?
        .await
        .map_err(|e| failed(&e))?;
    let stored = Published::Stored {
        sequence: ack.sequence,
    };
    let present = tokio::time::timeout(
        Duration::from_secs(2),
        client.request(PRESENCE_SUBJECT, "".into()),
    )
    .await;
    if !matches!(present, Ok(Ok(_))) {
        return Ok(stored);
    }
    match tokio::time::timeout(wait, answers.next()).await {
        Ok(Some(m)) => Ok(Published::Answered(
            serde_json::from_slice(&m.payload).unwrap_or_else(
                |e| json!({"error": format!("the daemon's answer is not JSON: {e}")}),
            ),
        )),
        _ => Ok(stored),
    }
}

/// A header's value, trimmed; `None` when absent or blank.
fn header(msg: &async_nats::Message, name: &str) -> Option<String> {
    msg.headers
        .as_ref()
        .and_then(|h| h.get(name))
        .map(|v| v.as_str().trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The event id of a stream message: its headers', else one made from its
/// place in the stream (stable across redeliveries, apart across streams).
fn event_id(msg: &async_nats::jetstream::Message) -> String {
    if let Some(id) =
        header(&msg.message, EVENT_ID_HEADER).or_else(|| header(&msg.message, "Nats-Msg-Id"))
    {
        return id;
    }
    match msg.info() {
        Ok(info) => {
            let stamp = Sha256::digest(format!("{:?}", info.published));
            let stamp: String = stamp[..6].iter().map(|b| format!("{b:02x}")).collect();
            format!("nats-{}-{}-{stamp}", info.stream, info.stream_sequence)
        }
        Err(_) => format!("event-{}", agentfile_session::new_session_id()),
    }
}

/// One message: the answer a requester gets.
async fn handle(daemon: &Arc<Daemon>, msg: &async_nats::jetstream::Message) -> Value {
    let subject = msg.subject.as_str();
    let Some(name) = event_name(subject) else {
        return json!({"error": format!("`{subject}` names no event")});
    };
    let id = event_id(msg);
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
