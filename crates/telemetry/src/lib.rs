//! Telemetry: a run's events shipped to where operators look, and the process's
//! own logs.
//!
//! A [`Telemetry`] is an [`EventSink`] on a run's bus. Its `send` only clones the
//! event into a bounded queue (`try_send`: a full queue drops the event and
//! counts it); one worker thread per run drains the queue into the configured
//! exporter (`telemetry.protocol`):
//!
//! - [`otlp`]: OpenTelemetry over OTLP/HTTP — one span per run, step, goal,
//!   agent, model call and tool call, built from the events with their own
//!   timestamps and following the GenAI semantic conventions, plus one log
//!   record per telemetry message;
//! - [`http`]: the seed's JSON messages ([`agentfile_wire::telemetry`]),
//!   POSTed in batches with retries;
//! - [`file`]: the same messages as JSON lines, one file per session;
//! - `noop`: nothing (no worker at all).
//!
//! At the end of a run [`Telemetry::finish`] closes the queue and waits a
//! bounded time for the exporter to flush; what could not be delivered is
//! counted and reported once, as a warning log line.
//!
//! What it is not: part of the run. Exporting never blocks an event, never fails
//! or slows a run, and never decides anything — a collector that is down costs
//! the run nothing but the bounded wait at its end. Nor is it the engine: it
//! sits beside it and knows no executor, tool or front end; the engine's
//! `run::start` attaches one to each run's bus. [`logs`] sets up the
//! process's `tracing` output on stderr; it is here because it is the other half
//! of "what did my agent do", not because it depends on the exporters.

pub mod file;
pub mod http;
pub mod logs;
pub mod message;
pub mod otlp;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentfile_config::{Config, TelemetryProtocol};
use agentfile_plan::Plan;
use agentfile_session::events::EventSink;
use agentfile_wire::events::Event;

/// Events waiting for the exporter; beyond this, events are dropped and counted.
pub const QUEUE_CAPACITY: usize = 4096;

/// How long the end of a run waits for telemetry to flush.
pub const FINISH_WAIT: Duration = Duration::from_secs(2);

/// What a run tells telemetry about itself, beyond its events.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    pub session_id: String,
    pub workflow: String,
    /// `agent.id` from the config.
    pub agent_id: String,
    pub workspace: PathBuf,
    /// The provider of the default profile (synthesis calls and agents
    /// without a profile).
    pub provider: String,
    /// The provider of each agent that has a profile of its own.
    pub agent_providers: BTreeMap<String, String>,
}

impl RunInfo {
    /// Everything telemetry needs from a prepared run's config and plan.
    pub fn new(config: &Config, plan: &Plan, workspace: &Path, session_id: &str) -> RunInfo {
        let provider_of = |profile: Option<&str>| {
            config
                .llm_for(profile)
                .ok()
                .and_then(|l| l.provider_name())
                .unwrap_or_default()
        };
        RunInfo {
            session_id: session_id.to_owned(),
            workflow: plan.name.clone(),
            agent_id: config.agent.id.clone().unwrap_or_else(|| "default".into()),
            workspace: workspace.to_path_buf(),
            provider: provider_of(None),
            agent_providers: plan
                .agents
                .iter()
                .filter_map(|a| {
                    let p = a.profile.as_deref()?;
                    Some((a.name.clone(), provider_of(Some(p))))
                })
                .collect(),
        }
    }

    /// The provider that serves `agent`'s model calls.
    pub fn provider_for(&self, agent: Option<&str>) -> &str {
        agent
            .and_then(|a| self.agent_providers.get(a))
            .map(String::as_str)
            .unwrap_or(&self.provider)
    }
}

/// Telemetry settings resolved from the config: what [`check`] validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub protocol: TelemetryProtocol,
    pub endpoint: Option<String>,
    pub capture_content: bool,
    /// Header name and value, read from the variables `headers_env` names.
    pub headers: Vec<(String, String)>,
    /// `file`: the folder of the per-session files, when configured.
    pub path: Option<PathBuf>,
}

/// A telemetry configuration that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("telemetry.endpoint `{0}` is not an http(s) URL")]
    Endpoint(String),
    #[error("telemetry.protocol = \"http\" needs telemetry.endpoint, the URL to POST messages to")]
    MissingEndpoint,
    #[error("telemetry.headers_env: `{0}` is not a valid header name")]
    HeaderName(String),
}

/// Why an exporter could not start (the run goes on without it).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// `file`: the folder or the session's file (`what`: `create`, `open`).
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("telemetry.protocol = \"http\" needs telemetry.endpoint")]
    NoEndpoint,
    #[error("telemetry.headers_env: `{0}` is not a header name")]
    HeaderName(String),
    /// The value is a secret: only the header's name is shown.
    #[error("telemetry.headers_env: the value for `{0}` is not a valid header value")]
    HeaderValue(String),
    #[error("cannot build the telemetry HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// `signal`: `span` or `log`.
    #[error("cannot build the OTLP {signal} exporter: {source}")]
    Otlp {
        signal: &'static str,
        source: opentelemetry_otlp::ExporterBuildError,
    },
    #[error("noop has no exporter")]
    Noop,
    #[error("cannot start the telemetry thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("the telemetry thread stopped while starting")]
    Stopped,
}

/// Check the telemetry section before a run starts: a bad endpoint is a usage
/// error then, rather than a run that silently ships nothing.
pub fn check(config: &Config) -> Result<(), TelemetryError> {
    let t = &config.telemetry;
    if !t.enabled {
        return Ok(());
    }
    let protocol = t.protocol.unwrap_or_default();
    let endpoint = t
        .endpoint
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty());
    if let Some(e) = endpoint {
        let ok = url::Url::parse(e).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
        if !ok && matches!(protocol, TelemetryProtocol::Otlp | TelemetryProtocol::Http) {
            return Err(TelemetryError::Endpoint(redact_url(e)));
        }
    } else if protocol == TelemetryProtocol::Http {
        return Err(TelemetryError::MissingEndpoint);
    }
    for name in t.headers_env.keys() {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(TelemetryError::HeaderName(name.clone()));
        }
    }
    Ok(())
}

/// The settings a run uses, with header values read from the environment
/// through `env`. `None` when telemetry is off.
pub fn settings(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Option<Settings> {
    let t = &config.telemetry;
    let protocol = t.protocol.unwrap_or_default();
    if !t.enabled || protocol == TelemetryProtocol::Noop {
        return None;
    }
    if protocol == TelemetryProtocol::Otlp
        && env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        tracing::debug!("telemetry: OTEL_SDK_DISABLED=true, the otlp exporter is off");
        return None;
    }
    let mut headers = Vec::new();
    for (name, var) in &t.headers_env {
        match env(var) {
            Some(v) => headers.push((name.clone(), v)),
            None => tracing::warn!(
                header = %name,
                variable = %var,
                "telemetry: the variable for this header is not set; sending without it"
            ),
        }
    }
    Some(Settings {
        protocol,
        endpoint: t
            .endpoint
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned),
        // The seed's messages are the transcript; OTLP's GenAI conventions make
        // content opt-in.
        capture_content: t
            .capture_content
            .unwrap_or(protocol != TelemetryProtocol::Otlp),
        headers,
        path: t.path.clone(),
    })
}

/// Counters and the closing deadline, shared by the sink, the worker and the
/// exporter.
#[derive(Debug, Default)]
pub struct Shared {
    /// Events that reached the queue.
    pub queued: AtomicU64,
    /// Events dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Items the exporter produced (spans and log records, or messages).
    pub produced: AtomicU64,
    /// Items the destination accepted.
    pub delivered: AtomicU64,
    last_error: Mutex<Option<String>>,
    closing: Mutex<Option<Instant>>,
    /// The run's notices: the first give-up is said there as an `error` event.
    notices: Mutex<Option<agentfile_session::events::Notices>>,
    /// Which exporter (for that message).
    label: Mutex<String>,
}

impl Shared {
    /// Remember why an export failed (the latest reason wins).
    pub fn failed(&self, why: impl Into<String>) {
        let why = why.into();
        let first = self
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(why.clone())
            .is_none();
        if first && let Some(n) = &*self.notices.lock().unwrap_or_else(|p| p.into_inner()) {
            let label = self.label.lock().unwrap_or_else(|p| p.into_inner()).clone();
            n.push(format!(
                "telemetry ({label}) gave up on a batch: {why}; the run goes on, but the exporter misses events"
            ));
        }
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// When the run has ended: the time by which everything must be flushed.
    pub fn deadline(&self) -> Option<Instant> {
        *self.closing.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn close_by(&self, deadline: Instant) {
        *self.closing.lock().unwrap_or_else(|p| p.into_inner()) = Some(deadline);
    }
}

/// What one exporter does with the event stream, on the worker thread.
pub(crate) trait Exporter {
    /// Take one event (convert, buffer, maybe send).
    fn export(&mut self, event: &Event);
    /// Called about every [`TICK`]: send what has waited long enough.
    fn tick(&mut self) {}
    /// Flush and stop; give up at `deadline`.
    fn finish(&mut self, deadline: Instant);
}

/// How often an idle worker calls [`Exporter::tick`].
const TICK: Duration = Duration::from_millis(200);

/// A run's telemetry: the sink for its bus, and the worker behind it.
pub struct Telemetry {
    sink: Arc<Sink>,
    shared: Arc<Shared>,
    done: Option<tokio::sync::oneshot::Receiver<()>>,
    /// `otlp → http://collector:4318`, for the report.
    label: String,
}

struct Sink {
    tx: Mutex<Option<SyncSender<Event>>>,
    shared: Arc<Shared>,
}

impl EventSink for Sink {
    fn send(&self, event: &Event) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(event.clone()) {
            Ok(()) => {
                self.shared.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// What telemetry managed to do, reported at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub label: String,
    /// Events dropped at a full queue.
    pub dropped: u64,
    /// Spans, log records or messages produced from the events.
    pub produced: u64,
    /// Of those, accepted by the destination.
    pub delivered: u64,
    /// The exporter was still busy when the wait ran out.
    pub timed_out: bool,
    pub last_error: Option<String>,
}

impl Report {
    /// Items that did not reach the destination, counting dropped events.
    pub fn undelivered(&self) -> u64 {
        self.produced.saturating_sub(self.delivered) + self.dropped
    }
}

impl Telemetry {
    /// Start telemetry for a run, or `None` when it is off. A telemetry that
    /// cannot start (a folder that cannot be created, a thread that cannot be
    /// spawned) is a warning, never a failed run.
    pub fn start(config: &Config, info: &RunInfo) -> Option<Telemetry> {
        let settings = settings(config, &|k| std::env::var(k).ok())?;
        let label = match (&settings.protocol, &settings.endpoint, &settings.path) {
            (TelemetryProtocol::File, _, Some(p)) => format!("file → {}", p.display()),
            (TelemetryProtocol::File, _, None) => {
                format!("file → {}", file::default_folder(&info.workspace).display())
            }
            (p, Some(e), _) => format!("{} → {}", p.as_str(), redact_url(e)),
            (p, None, _) => format!("{} → OTEL_EXPORTER_OTLP_* or localhost:4318", p.as_str()),
        };
        match Self::spawn(settings, info.clone(), label.clone()) {
            Ok(t) => {
                tracing::info!(exporter = %label, session = %info.session_id, "telemetry started");
                Some(t)
            }
            Err(e) => {
                tracing::warn!(exporter = %label, error = %e, "telemetry could not start; the run goes on without it");
                None
            }
        }
    }

    fn spawn(settings: Settings, info: RunInfo, label: String) -> Result<Telemetry, StartError> {
        let shared = Arc::new(Shared::default());
        let (tx, rx) = sync_channel::<Event>(QUEUE_CAPACITY);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), StartError>>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let worker_shared = shared.clone();
        // The exporter is built on its own thread, outside any async runtime:
        // the blocking HTTP clients must neither be created nor dropped inside one.
        std::thread::Builder::new()
            .name("agentfile-telemetry".into())
            .spawn(move || {
                let exporter = build(&settings, &info, worker_shared.clone());
                match exporter {
                    Ok(exporter) => {
                        let _ = ready_tx.send(Ok(()));
                        work(exporter, rx, &worker_shared);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
                let _ = done_tx.send(());
            })
            .map_err(StartError::Thread)?;
        ready_rx.recv().map_err(|_| StartError::Stopped)??;
        Ok(Telemetry {
            sink: Arc::new(Sink {
                tx: Mutex::new(Some(tx)),
                shared: shared.clone(),
            }),
            shared,
            done: Some(done_rx),
            label,
        })
    }

    /// The sink to subscribe to the run's bus.
    pub fn sink(&self) -> Arc<dyn EventSink> {
        self.sink.clone()
    }

    /// Say the exporter's first give-up to the run as an `error` event.
    pub fn report_errors_to(&self, notices: agentfile_session::events::Notices) {
        *self.shared.label.lock().unwrap_or_else(|p| p.into_inner()) = self.label.clone();
        *self
            .shared
            .notices
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(notices);
    }

    /// Close the queue, let the exporter flush for at most `wait`, and report
    /// (a warning log line when anything was lost).
    pub async fn finish(mut self, wait: Duration) -> Report {
        self.close(wait);
        let timed_out = match self.done.take() {
            // A little slack past the exporter's own deadline for it to say so.
            Some(done) => tokio::time::timeout(wait + Duration::from_millis(200), done)
                .await
                .is_err(),
            None => false,
        };
        let report = self.report(timed_out);
        if report.undelivered() > 0 || report.timed_out {
            tracing::warn!(
                exporter = %report.label,
                undelivered = report.undelivered(),
                produced = report.produced,
                dropped_at_queue = report.dropped,
                still_exporting = report.timed_out,
                last_error = report.last_error.as_deref().unwrap_or(""),
                "telemetry: {} of {} items were not delivered",
                report.undelivered(),
                report.produced + report.dropped,
            );
        } else {
            tracing::debug!(
                exporter = %report.label,
                delivered = report.delivered,
                "telemetry delivered"
            );
        }
        report
    }

    /// What has happened so far (the run is still going: `timed_out` is false).
    pub fn progress(&self) -> Report {
        self.report(false)
    }

    fn close(&self, wait: Duration) {
        if self.shared.deadline().is_none() {
            self.shared.close_by(Instant::now() + wait);
        }
        self.sink
            .tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    fn report(&self, timed_out: bool) -> Report {
        Report {
            label: self.label.clone(),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
            produced: self.shared.produced.load(Ordering::Relaxed),
            delivered: self.shared.delivered.load(Ordering::Relaxed),
            timed_out,
            last_error: self.shared.last_error(),
        }
    }
}

impl Drop for Telemetry {
    /// Never finished (a run that ended in a panic): let the worker flush on its
    /// own, within the usual bound.
    fn drop(&mut self) {
        self.close(FINISH_WAIT);
    }
}

fn build(
    settings: &Settings,
    info: &RunInfo,
    shared: Arc<Shared>,
) -> Result<Box<dyn Exporter>, StartError> {
    Ok(match settings.protocol {
        TelemetryProtocol::Otlp => Box::new(otlp::OtlpExporter::new(settings, info, shared)?),
        TelemetryProtocol::Http => Box::new(http::HttpExporter::new(settings, info, shared)?),
        TelemetryProtocol::File => Box::new(file::FileExporter::new(settings, info, shared)?),
        TelemetryProtocol::Noop => return Err(StartError::Noop),
    })
}

/// The worker: drain the queue into the exporter until the sink closes it.
fn work(mut exporter: Box<dyn Exporter>, rx: Receiver<Event>, shared: &Shared) {
    let mut ticked = Instant::now();
    loop {
        match rx.recv_timeout(TICK) {
            Ok(event) => exporter.export(&event),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        // Also while events keep coming, so a busy run's batches still linger
        // no longer than they should.
        if ticked.elapsed() >= TICK {
            exporter.tick();
            ticked = Instant::now();
        }
    }
    let deadline = shared
        .deadline()
        .unwrap_or_else(|| Instant::now() + FINISH_WAIT);
    exporter.finish(deadline);
}

/// An event's `ts` (RFC 3339 UTC, as [`agentfile_wire::events::rfc3339`]
/// writes it) as a time; `None` when it is not in that form.
pub fn parse_ts(ts: &str) -> Option<SystemTime> {
    let b = ts.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !ts.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let frac = &ts[19..ts.len() - 1];
    let nanos = match frac.strip_prefix('.') {
        None if frac.is_empty() => 0,
        Some(digits) if !digits.is_empty() && digits.len() <= 9 => {
            let n: u64 = digits.parse().ok()?;
            n * 10u64.pow(9 - digits.len() as u32)
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    // Days since the epoch from a civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = u64::try_from(days * 86_400 + h * 3600 + mi * 60 + s).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_nanos(nanos))
}

/// An event's time: its `ts`, else now.
pub(crate) fn event_time(event: &Event) -> SystemTime {
    parse_ts(&event.ts).unwrap_or_else(SystemTime::now)
}

/// A URL fit for a log line: no user, password, query or fragment (they may
/// carry tokens).
pub fn redact_url(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "<not a URL>".to_owned(),
    }
}

pub(crate) use agentfile_config::text::truncate;

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_config::TelemetrySection;
    use agentfile_wire::events::rfc3339;

    #[test]
    fn timestamps_read_back() {
        for ms in [0u64, 951_782_400_000, 1_795_341_600_123, 4_102_444_799_999] {
            let t = UNIX_EPOCH + Duration::from_millis(ms);
            assert_eq!(parse_ts(&rfc3339(t)), Some(t), "{}", rfc3339(t));
        }
        assert_eq!(
            parse_ts("2026-11-22T10:00:00Z"),
            Some(UNIX_EPOCH + Duration::from_secs(1_795_341_600))
        );
        for bad in [
            "",
            "2026-11-22",
            "2026-13-22T10:00:00Z",
            "2026-11-22T10:00:00.Z",
        ] {
            assert_eq!(parse_ts(bad), None, "{bad}");
        }
    }

    #[test]
    fn urls_lose_their_secrets() {
        assert_eq!(
            redact_url("https://user:pw@collector.example:4318/v1?token=s3cret#x"),
            "https://collector.example:4318/v1"
        );
        assert_eq!(redact_url("not a url"), "<not a URL>");
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("ééé", 3), "é… [4 more bytes]");
    }

    fn config(t: TelemetrySection) -> Config {
        Config {
            telemetry: t,
            ..Config::default()
        }
    }

    #[test]
    fn settings_follow_the_config() {
        let env = |k: &str| (k == "TOKEN_VAR").then(|| "Bearer x".to_owned());
        // Off unless enabled; noop is off too.
        assert!(settings(&Config::default(), &env).is_none());
        let noop = config(TelemetrySection {
            enabled: true,
            protocol: Some(TelemetryProtocol::Noop),
            ..Default::default()
        });
        assert!(settings(&noop, &env).is_none());
        // otlp is the default and leaves content out; http keeps it.
        let otlp = config(TelemetrySection {
            enabled: true,
            headers_env: [("Authorization".to_owned(), "TOKEN_VAR".to_owned())].into(),
            ..Default::default()
        });
        let s = settings(&otlp, &env).unwrap();
        assert_eq!(s.protocol, TelemetryProtocol::Otlp);
        assert!(!s.capture_content);
        assert_eq!(s.headers, vec![("Authorization".into(), "Bearer x".into())]);
        let disabled = |k: &str| (k == "OTEL_SDK_DISABLED").then(|| "TRUE".to_owned());
        assert!(settings(&otlp, &disabled).is_none());
        let http = config(TelemetrySection {
            enabled: true,
            protocol: Some(TelemetryProtocol::Http),
            endpoint: Some("http://127.0.0.1:9/ingest".into()),
            ..Default::default()
        });
        assert!(settings(&http, &env).unwrap().capture_content);
    }

    #[test]
    fn check_refuses_what_cannot_work() {
        let mut c = config(TelemetrySection {
            enabled: true,
            protocol: Some(TelemetryProtocol::Http),
            ..Default::default()
        });
        assert!(matches!(check(&c), Err(TelemetryError::MissingEndpoint)));
        c.telemetry.endpoint = Some("ftp://x".into());
        assert!(matches!(check(&c), Err(TelemetryError::Endpoint(_))));
        c.telemetry.endpoint = Some("http://localhost:1/x".into());
        assert!(check(&c).is_ok());
        c.telemetry.headers_env = [("bad header".to_owned(), "V".to_owned())].into();
        assert!(matches!(check(&c), Err(TelemetryError::HeaderName(_))));
        c.telemetry.enabled = false;
        assert!(check(&c).is_ok());
    }
}
