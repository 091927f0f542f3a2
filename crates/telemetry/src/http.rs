//! The `http` exporter: the seed's telemetry messages POSTed to
//! `telemetry.endpoint` as a JSON array, in batches.
//!
//! A batch goes out when it holds [`Batching::max_messages`] messages, when its
//! oldest message has waited [`Batching::linger`], and at the end of the run.
//! A batch that fails with a network error, 408, 429 or a 5xx is sent again
//! after an exponential backoff (honouring `Retry-After`, capped), up to
//! [`Batching::attempts`] times; any other answer drops it. Every retry stops at
//! the run's closing deadline. Messages arrive at most once per accepted POST —
//! a batch is never split or resent after a 2xx.
//!
//! The client is reqwest's blocking one, on the telemetry worker thread, so
//! nothing here touches the run's async runtime.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use agentfile_wire::events::Event;
use agentfile_wire::telemetry::TelemetryMessage;

use super::message::Converter;
use super::{Exporter, RunInfo, Settings, Shared, StartError, redact_url};

/// When batches go out and how often they are retried.
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    pub max_messages: usize,
    pub linger: Duration,
    /// Tries per batch, the first included.
    pub attempts: u32,
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// Per request.
    pub timeout: Duration,
}

impl Default for Batching {
    fn default() -> Self {
        Batching {
            max_messages: 100,
            linger: Duration::from_secs(1),
            attempts: 5,
            first_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            timeout: Duration::from_secs(5),
        }
    }
}

pub(crate) struct HttpExporter {
    client: Client,
    endpoint: String,
    convert: Converter,
    batching: Batching,
    batch: Vec<TelemetryMessage>,
    oldest: Option<Instant>,
    shared: Arc<Shared>,
}

impl HttpExporter {
    pub(crate) fn new(
        settings: &Settings,
        info: &RunInfo,
        shared: Arc<Shared>,
    ) -> Result<HttpExporter, StartError> {
        let endpoint = settings.endpoint.clone().ok_or(StartError::NoEndpoint)?;
        Self::with_batching(
            endpoint,
            &settings.headers,
            Converter::new(info, settings.capture_content),
            Batching::default(),
            shared,
        )
    }

    pub(crate) fn with_batching(
        endpoint: String,
        headers: &[(String, String)],
        convert: Converter,
        batching: Batching,
        shared: Arc<Shared>,
    ) -> Result<HttpExporter, StartError> {
        let mut map = HeaderMap::new();
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| StartError::HeaderName(name.clone()))?;
            // The value is a secret: the error must not show it.
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| StartError::HeaderValue(name.to_string()))?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        agentfile_llm::install_tls();
        let client = Client::builder()
            .default_headers(map)
            .timeout(batching.timeout)
            .connect_timeout(batching.timeout.min(Duration::from_secs(2)))
            .build()
            .map_err(StartError::HttpClient)?;
        Ok(HttpExporter {
            client,
            endpoint,
            convert,
            batching,
            batch: Vec::new(),
            oldest: None,
            shared,
        })
    }

    /// Send the current batch, retrying as the module doc says.
    fn send_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        self.oldest = None;
        let n = batch.len() as u64;
        let body = match serde_json::to_vec(&batch) {
            Ok(b) => b,
            Err(e) => {
                self.shared.failed(format!("encoding a batch: {e}"));
                return;
            }
        };
        // Backoff with jitter, as for model calls: exporters of many
        // processes that lost one collector do not retry in lockstep.
        let policy = agentfile_llm::RetryPolicy {
            max_attempts: self.batching.attempts.max(1),
            base_delay: self.batching.first_backoff,
            max_delay: self.batching.max_backoff,
            max_retry_after: self.batching.max_backoff,
        };
        for attempt in 1..=self.batching.attempts.max(1) {
            let (retry, wait, why) =
                match self.client.post(&self.endpoint).body(body.clone()).send() {
                    Ok(r) if r.status().is_success() => {
                        self.shared.delivered.fetch_add(n, Ordering::Relaxed);
                        return;
                    }
                    Ok(r) => {
                        let status = r.status().as_u16();
                        // The same reading of `Retry-After` (seconds, an
                        // HTTP-date, `retry-after-ms`) as the model calls'.
                        let retry_after =
                            agentfile_llm::retry::retry_after_from_headers(r.headers());
                        let retry = matches!(status, 408 | 429) || (500..600).contains(&status);
                        (retry, retry_after, format!("HTTP {status}"))
                    }
                    // reqwest's error names the URL; keep the query (tokens) out.
                    Err(e) => (
                        true,
                        None,
                        format!(
                            "{} ({})",
                            if e.is_timeout() {
                                "timed out"
                            } else if e.is_connect() {
                                "cannot connect"
                            } else {
                                "request failed"
                            },
                            redact_url(&self.endpoint)
                        ),
                    ),
                };
            let wait = wait
                .unwrap_or_else(|| policy.backoff(attempt))
                .min(self.batching.max_backoff);
            let past_deadline = self
                .shared
                .deadline()
                .is_some_and(|d| Instant::now() + wait >= d);
            if !retry || attempt == self.batching.attempts || past_deadline {
                tracing::debug!(attempt, error = %why, "telemetry: batch of {n} messages dropped");
                self.shared.failed(why);
                return;
            }
            tracing::debug!(attempt, error = %why, wait_ms = wait.as_millis() as u64, "telemetry: retrying a batch");
            std::thread::sleep(wait);
        }
    }
}

impl Exporter for HttpExporter {
    fn export(&mut self, event: &Event) {
        self.batch.push(self.convert.message(event));
        self.shared.produced.fetch_add(1, Ordering::Relaxed);
        self.oldest.get_or_insert_with(Instant::now);
        if self.batch.len() >= self.batching.max_messages {
            self.send_batch();
        }
    }

    fn tick(&mut self) {
        if self
            .oldest
            .is_some_and(|t| t.elapsed() >= self.batching.linger)
        {
            self.send_batch();
        }
    }

    fn finish(&mut self, _deadline: Instant) {
        // `send_batch` reads the deadline itself, also for retries.
        self.send_batch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_wire::events::EventBody;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::Mutex;

    /// Each request's status and body.
    type Seen = Arc<Mutex<Vec<(u16, Vec<u8>)>>>;

    /// A tiny HTTP/1.1 server on a thread: answers each request with the next
    /// status of `statuses` (200 when they run out) and keeps the bodies.
    fn server(statuses: Vec<u16>) -> (String, Seen) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/ingest", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            let mut statuses = statuses.into_iter();
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                reader.read_exact(&mut body).unwrap();
                let status = statuses.next().unwrap_or(200);
                kept.lock().unwrap().push((status, body));
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        (url, seen)
    }

    fn events(n: u64) -> Vec<Event> {
        (1..=n)
            .map(|seq| Event {
                schema_version: 1,
                session_id: "s".into(),
                seq,
                ts: "2026-11-22T10:00:00.000Z".into(),
                step: None,
                goal: None,
                agent: None,
                iteration: None,
                node: None,
                node_kind: None,
                replayed: false,
                body: EventBody::Warning {
                    message: format!("w{seq}"),
                },
            })
            .collect()
    }

    fn exporter(url: String, batching: Batching) -> (HttpExporter, Arc<Shared>) {
        let shared = Arc::new(Shared::default());
        let convert = Converter {
            agent_id: "a".into(),
            workflow_name: "w".into(),
            capture_content: true,
        };
        let e = HttpExporter::with_batching(
            url,
            &[("x-token".into(), "t0ken".into())],
            convert,
            batching,
            shared.clone(),
        )
        .unwrap();
        (e, shared)
    }

    fn seqs(body: &[u8]) -> Vec<u64> {
        let v: Vec<TelemetryMessage> = serde_json::from_slice(body).unwrap();
        v.iter().map(|m| m.data.seq).collect()
    }

    #[test]
    fn bad_headers_are_refused_without_their_value() {
        let build = |name: &str, value: &str| {
            let convert = Converter {
                agent_id: "a".into(),
                workflow_name: "w".into(),
                capture_content: true,
            };
            HttpExporter::with_batching(
                "http://127.0.0.1:9/x".into(),
                &[(name.into(), value.into())],
                convert,
                Batching::default(),
                Arc::new(Shared::default()),
            )
            .err()
            .expect("refused")
        };
        let e = build("bad name", "v");
        assert!(matches!(&e, StartError::HeaderName(n) if n == "bad name"));
        assert_eq!(
            e.to_string(),
            "telemetry.headers_env: `bad name` is not a header name"
        );
        let e = build("X-Token", "s3cret\n");
        assert_eq!(
            e.to_string(),
            "telemetry.headers_env: the value for `x-token` is not a valid header value"
        );
    }

    #[test]
    fn full_batches_go_out_at_once_and_the_rest_at_the_end() {
        let (url, seen) = server(vec![]);
        let batching = Batching {
            max_messages: 100,
            ..Batching::default()
        };
        let (mut e, shared) = exporter(url, batching);
        for ev in events(250) {
            e.export(&ev);
        }
        assert_eq!(seen.lock().unwrap().len(), 2, "two full batches sent");
        e.finish(Instant::now() + Duration::from_secs(2));
        let seen = seen.lock().unwrap();
        let sizes: Vec<usize> = seen.iter().map(|(_, b)| seqs(b).len()).collect();
        assert_eq!(sizes, vec![100, 100, 50]);
        let all: Vec<u64> = seen.iter().flat_map(|(_, b)| seqs(b)).collect();
        assert_eq!(all, (1..=250).collect::<Vec<_>>());
        assert_eq!(shared.delivered.load(Ordering::Relaxed), 250);
    }

    #[test]
    fn server_errors_are_retried_and_client_errors_are_not() {
        let (url, seen) = server(vec![503, 500, 200, 400]);
        let batching = Batching {
            max_messages: 3,
            first_backoff: Duration::from_millis(10),
            ..Batching::default()
        };
        let (mut e, shared) = exporter(url, batching);
        for ev in events(6) {
            e.export(&ev);
        }
        let seen = seen.lock().unwrap();
        let statuses: Vec<u16> = seen.iter().map(|(s, _)| *s).collect();
        assert_eq!(statuses, vec![503, 500, 200, 400]);
        assert_eq!(seqs(&seen[2].1), vec![1, 2, 3]);
        assert_eq!(seqs(&seen[3].1), vec![4, 5, 6]);
        assert_eq!(shared.delivered.load(Ordering::Relaxed), 3);
        assert_eq!(shared.last_error().as_deref(), Some("HTTP 400"));
    }

    #[test]
    fn retries_stop_at_the_deadline() {
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/x?token=s3cret", dead.local_addr().unwrap());
        drop(dead);
        let batching = Batching {
            first_backoff: Duration::from_secs(10),
            ..Batching::default()
        };
        let (mut e, shared) = exporter(url, batching);
        e.export(&events(1)[0]);
        shared.close_by(Instant::now() + Duration::from_millis(300));
        let started = Instant::now();
        e.finish(Instant::now());
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(shared.delivered.load(Ordering::Relaxed), 0);
        let why = shared.last_error().unwrap();
        assert!(
            why.contains("cannot connect") && !why.contains("s3cret"),
            "{why}"
        );
    }
}
