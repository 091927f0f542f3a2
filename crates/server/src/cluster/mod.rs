//! Runs across machines (CONTRACT §13): a NATS JetStream work queue between
//! `serve --nats` / `mcp --nats` (which submit runs) and `agentfile worker`
//! processes (which execute them), with PostgreSQL as the shared session store.
//!
//! - Work: one message per run on `agentfile.runs` in the stream
//!   [`DEFAULT_STREAM`] (work-queue retention, file storage, deduplicated by
//!   `Nats-Msg-Id` = the session id and its last `seq`, so a session queued
//!   again after an approval or a signal is a new message). Workers pull it through one durable
//!   consumer with explicit acks; while a run goes on its worker sends
//!   in-progress acks every `ack_wait / 3`. A worker that dies stops sending
//!   them and the message is redelivered after `ack_wait`; the next worker
//!   resumes the session from its journal, so no completed goal runs twice.
//! - Events: the worker publishes every stored event (JSON) on
//!   `agentfile.events.<session>` (core NATS, at most once). The store stays
//!   the source of truth: the submitting server fills any gap from it.
//! - Control: `agentfile.control.<session>` (request/reply, a JSON
//!   [`Control`]) reaches the worker that holds the run: `cancel`, and the
//!   decision on an approval the run waits at (for up to `approval_hold`;
//!   then the worker releases it as `waiting_approval`, and `approve` records
//!   the decision and queues the run again, as `signal` does for a suspended
//!   one).
//!
//! Assumed: every server and worker sees the same files at the same paths
//! (workflows, configs, the workspace) and the same PostgreSQL database.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use serde::{Deserialize, Serialize};

use agentfile_wire::rpc::RunParams;

/// The stream runs are queued in.
pub const DEFAULT_STREAM: &str = "AGENTFILE_RUNS";
/// The subject work messages are published on.
pub const RUNS_SUBJECT: &str = "agentfile.runs";
/// The durable consumer every worker pulls from.
pub const CONSUMER: &str = "agentfile-workers";
/// How long a worker may go without acking before its run is redelivered.
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);

/// How long a worker keeps a run that waits at an approval before releasing it.
pub const DEFAULT_APPROVAL_HOLD: Duration = Duration::from_secs(300);

/// Where the queue is and how it behaves (`--nats`, `--nats-stream`,
/// `--ack-wait`, `--approval-hold`).
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub url: String,
    pub stream: String,
    pub ack_wait: Duration,
    /// A worker's run waiting at an approval keeps its slot this long, waiting
    /// for an `approve` relayed from the submitting server; then it ends as
    /// `waiting_approval` (a later `approve` queues it again).
    pub approval_hold: Duration,
}

impl ClusterOptions {
    pub fn new(url: impl Into<String>) -> ClusterOptions {
        ClusterOptions {
            url: url.into(),
            stream: DEFAULT_STREAM.into(),
            ack_wait: DEFAULT_ACK_WAIT,
            approval_hold: DEFAULT_APPROVAL_HOLD,
        }
    }
}

/// A request on a session's control subject, to the worker holding its run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Control {
    Cancel,
    /// The decision on the approval the run waits at.
    Approve {
        approve: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

/// The worker's answer to a [`Control`] request: `error` (with its JSON-RPC
/// `code`) when it was refused, e.g. an approval the run does not wait for;
/// `gone` when the run ended on the worker before the request came (the
/// sender then goes on as if nobody held it).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ControlReply {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gone: bool,
}

/// One work item: the session to run (already recorded `queued` in the shared
/// store, with its workflow path, workspace and inputs) and the request's
/// other settings (config, provider, budgets) the worker needs to prepare it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Work {
    pub session_id: String,
    /// The session's last stored `seq` when it was queued: a session queued
    /// again later (resumed after an approval or a signal) is a new message,
    /// the same state queued twice is one.
    #[serde(default)]
    pub from_seq: u64,
    /// The request as submitted, paths made absolute, `inputs` and `resume` left out.
    pub params: RunParams,
    /// The trigger that started the run (a daemon's fire), for the worker's
    /// `run_started`. Absent for other runs: their messages are as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<agentfile_wire::events::RunTrigger>,
}

impl Work {
    /// JetStream's deduplication key (`Nats-Msg-Id`).
    pub fn message_id(&self) -> String {
        format!("{}@{}", self.session_id, self.from_seq)
    }
}

/// The subject a session's events are published on.
pub fn events_subject(session_id: &str) -> String {
    format!("agentfile.events.{session_id}")
}

/// The subject the worker holding a session answers control requests on.
pub fn control_subject(session_id: &str) -> String {
    format!("agentfile.control.{session_id}")
}

/// A connection to NATS with the run stream in place.
#[derive(Clone)]
pub struct Cluster {
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    pub options: ClusterOptions,
}

/// A NATS server could not be reached or set up at start.
#[derive(Debug)]
pub struct ClusterError(pub String);

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ClusterError {}

/// The URL as it may be shown: without a user or password.
pub fn display_url(url: &str) -> String {
    match url.rsplit_once('@') {
        Some((scheme_and_secret, host)) => match scheme_and_secret.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://{host}"),
            None => host.to_owned(),
        },
        None => url.to_owned(),
    }
}

impl Cluster {
    /// Connect and make sure the stream exists. Fails at once (no retry) when
    /// the server cannot be reached; once connected, a lost connection is
    /// re-established in the background with capped exponential backoff.
    pub async fn connect(options: ClusterOptions) -> Result<Cluster, ClusterError> {
        let shown = display_url(&options.url);
        let client = async_nats::ConnectOptions::new()
            .name("agentfile")
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None)
            .reconnect_delay_callback(|attempts| {
                // 100 ms, doubling, at most 5 s.
                let shift = attempts.min(6) as u32;
                Duration::from_millis(100u64 << shift).min(Duration::from_secs(5))
            })
            .event_callback(|event| async move {
                match event {
                    async_nats::Event::Disconnected => {
                        tracing::warn!("NATS connection lost; reconnecting")
                    }
                    async_nats::Event::Connected => tracing::info!("NATS connection (re)established"),
                    other => tracing::debug!(event = %other, "NATS"),
                }
            })
            .connect(options.url.as_str())
            .await
            .map_err(|e| {
                ClusterError(format!(
                    "cannot reach the NATS server at {shown}: {e}; start one with JetStream enabled (`nats-server -js`) or pass the right URL with --nats"
                ))
            })?;
        let js = jetstream::new(client.clone());
        let cluster = Cluster {
            client,
            js,
            options,
        };
        cluster
            .ensure_stream(
                stream::Config {
                    name: cluster.options.stream.clone(),
                    subjects: vec![RUNS_SUBJECT.into()],
                    retention: stream::RetentionPolicy::WorkQueue,
                    storage: stream::StorageType::File,
                    duplicate_window: Duration::from_secs(120),
                    ..Default::default()
                },
                false,
            )
            .await?;
        Ok(cluster)
    }

    /// Open the stream `config` names, creating it when missing. With
    /// `update`, an existing stream whose `max_age` differs from `config`'s
    /// is changed to it (the retention a config sets).
    pub async fn ensure_stream(
        &self,
        config: stream::Config,
        update: bool,
    ) -> Result<stream::Stream, ClusterError> {
        let shown = display_url(&self.options.url);
        let name = config.name.clone();
        let failed = |e: &dyn std::fmt::Display| {
            ClusterError(format!(
                "NATS server at {shown}: cannot create or open the stream `{name}`: {e}; is JetStream enabled (`nats-server -js`)?"
            ))
        };
        let mut stream = self
            .js
            .get_or_create_stream(config.clone())
            .await
            .map_err(|e| failed(&e))?;
        if update && stream.cached_info().config.max_age != config.max_age {
            let mut changed = stream.cached_info().config.clone();
            changed.max_age = config.max_age;
            changed.duplicate_window = config.duplicate_window;
            self.js
                .update_stream(changed)
                .await
                .map_err(|e| failed(&e))?;
            stream = self
                .js
                .get_stream(&config.name)
                .await
                .map_err(|e| failed(&e))?;
        }
        Ok(stream)
    }

    /// Queue a run; returns once JetStream has stored the message. Publishing
    /// the same session at the same `seq` twice within two minutes queues it
    /// once.
    pub async fn submit(&self, work: &Work) -> Result<(), ClusterError> {
        let payload = serde_json::to_vec(work).map_err(|e| ClusterError(e.to_string()))?;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", work.message_id().as_str());
        let ack = self
            .js
            .publish_with_headers(RUNS_SUBJECT, headers, payload.into())
            .await
            .map_err(|e| {
                ClusterError(format!(
                    "cannot queue session `{}` on NATS: {e}",
                    work.session_id
                ))
            })?;
        ack.await.map_err(|e| {
            ClusterError(format!(
                "NATS did not confirm the run of session `{}`: {e}",
                work.session_id
            ))
        })?;
        Ok(())
    }

    /// The durable pull consumer workers share.
    pub async fn consumer(&self) -> Result<consumer::PullConsumer, ClusterError> {
        let stream = self
            .js
            .get_stream(&self.options.stream)
            .await
            .map_err(|e| ClusterError(format!("stream `{}`: {e}", self.options.stream)))?;
        stream
            .get_or_create_consumer(
                CONSUMER,
                consumer::pull::Config {
                    durable_name: Some(CONSUMER.into()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: self.options.ack_wait,
                    max_deliver: -1,
                    max_ack_pending: -1,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| {
                ClusterError(format!(
                    "stream `{}`: cannot create or open the consumer `{CONSUMER}`: {e}",
                    self.options.stream
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_secrets() {
        assert_eq!(display_url("nats://u:secret@host:4222"), "nats://host:4222");
        assert_eq!(display_url("nats://host:4222"), "nats://host:4222");
    }

    #[test]
    fn work_round_trips() {
        let w = Work {
            session_id: "s1".into(),
            from_seq: 7,
            params: RunParams {
                path: "/w/Agentfile".into(),
                ..Default::default()
            },
            trigger: None,
        };
        let bytes = serde_json::to_vec(&w).unwrap();
        let wire: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert!(
            wire.get("trigger").is_none(),
            "no trigger, no field: {wire}"
        );
        let back: Work = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back.session_id, "s1");
        assert_eq!(back.message_id(), "s1@7");
        assert_eq!(back.params.path, "/w/Agentfile");
        assert_eq!(back.trigger, None);
    }

    #[test]
    fn work_carries_its_trigger() {
        let trigger = agentfile_wire::events::RunTrigger {
            id: "deploy#0".into(),
            kind: "event".into(),
            fired_at: "2025-01-01T00:00:00Z".into(),
            scheduled_for: None,
            delivery_id: None,
            event_id: Some("ev-1".into()),
        };
        let w = Work {
            session_id: "s1".into(),
            from_seq: 0,
            params: RunParams::default(),
            trigger: Some(trigger.clone()),
        };
        let back: Work = serde_json::from_slice(&serde_json::to_vec(&w).unwrap()).unwrap();
        assert_eq!(back.trigger, Some(trigger));
        // A message from before the field (an older submitter) still reads.
        let old: Work =
            serde_json::from_str(r#"{"session_id":"s2","from_seq":3,"params":{"path":""}}"#)
                .unwrap();
        assert_eq!(old.trigger, None);
    }
}
