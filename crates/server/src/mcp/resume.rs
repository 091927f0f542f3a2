//! SSE resumption on `mcp --http`: a client whose response stream dropped
//! sends `GET /mcp` with its `Mcp-Session-Id` and `Last-Event-ID`, and gets
//! the events it missed, then the rest live until the response.
//!
//! Only the session revisions have it (2025-03-26 … 2025-11-25): the
//! 2026-07-28 transport has no resumable streams, and its stateless requests
//! are cancelled when their stream closes, so they never come here.
//!
//! rmcp's own resumption (`LocalSessionManager`) replays the event the client
//! already had, replays with a silent gap past its 16-event cache, and loses a
//! response that arrives while the client is away. So the HTTP front keeps
//! rmcp's response stream itself: for a POST in a session, a task (the
//! *pump*) reads rmcp's SSE body to its end whether or not anyone listens,
//! and keeps each event in a ring of the stream's last [`RING`] events (and
//! at most [`RING_BYTES`], never fewer than the newest one). The client reads
//! from the ring, the first time on the POST's response and later on a
//! resumption; each event carries the id `<stream>/<n>` (`n` counts from 0,
//! the priming event). A stream is found only with the session and the
//! principal (bearer token) that opened it: another token cannot resume it.
//!
//! A resumption attaches a new reader and ends the one before, so one client
//! reads a stream at a time. A reader that falls behind the ring is ended;
//! its resumption then gets 410. An id whose stream is unknown here (never
//! sent, another session's or token's, or finished more than [`KEEP`] ago)
//! gets 404. Finished streams are kept [`KEEP`], at most `[mcp]
//! max_streams` of them per principal; a live one counts against its
//! principal's requests in flight until rmcp's response ends.
//!
//! Not here: the standalone GET stream (ids without `/`), which rmcp
//! resumes itself, and anything that outlives the process.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::principal::Principal;

type HttpBody = BoxBody<Bytes, Infallible>;

/// Events a stream keeps for a resumption.
pub const RING: usize = 256;
/// Bytes a stream keeps for a resumption (the newest event is kept whatever
/// its size).
pub const RING_BYTES: usize = 4 * 1024 * 1024;
/// How long a finished stream stays resumable.
pub const KEEP: Duration = Duration::from_secs(60);
/// A comment sent to an idle reader, so proxies keep the connection.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The per-request meta key of the 2026-07-28 revision (stateless requests).
const PER_REQUEST_VERSION: &[u8] = b"io.modelcontextprotocol/protocolVersion";

/// Whether a POST is one whose stream may be resumed: it names a session and
/// does not speak 2026-07-28 (by header or by its per-request meta), which
/// rmcp would serve statelessly, closing its stream cancelling it.
pub(super) fn resumable(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    let session = headers.get("mcp-session-id")?.to_str().ok()?.to_owned();
    let version = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("2025-03-26");
    let stateless = version >= "2026"
        || body
            .windows(PER_REQUEST_VERSION.len())
            .any(|w| w == PER_REQUEST_VERSION);
    (!stateless).then_some(session)
}

/// The resumable streams of one listener.
pub(super) struct Streams {
    all: Mutex<HashMap<u64, Arc<Stream>>>,
    next: AtomicU64,
    /// Finished streams kept per principal (`[mcp] max_streams`).
    max_finished: usize,
    stop: CancellationToken,
}

impl Streams {
    pub(super) fn new(max_finished: usize, stop: CancellationToken) -> Arc<Streams> {
        Arc::new(Streams {
            all: Mutex::default(),
            next: AtomicU64::new(0),
            max_finished: max_finished.max(1),
            stop,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Stream>>> {
        self.all.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take over rmcp's SSE `response` to a POST of `session`: its body is
    /// read to the end into a ring (holding `hold`, the request's place in
    /// flight, until then), and the client reads from the ring.
    pub(super) fn adopt<H: Send + 'static>(
        self: &Arc<Self>,
        response: Response<HttpBody>,
        session: String,
        who: Principal,
        hold: H,
        disconnect: Disconnect,
    ) -> Response<HttpBody> {
        let (parts, body) = response.into_parts();
        let stream = self.open(session, who);
        disconnect.attach(&stream);
        tokio::spawn(pump(self.clone(), stream.clone(), body, hold));
        Response::from_parts(parts, reader(stream, 0, 0))
    }

    /// A new stream, registered; expired streams and the principal's oldest
    /// finished ones past the bound are forgotten first.
    fn open(&self, session: String, who: Principal) -> Arc<Stream> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut all = self.lock();
        let now = Instant::now();
        all.retain(|_, s| s.finished().is_none_or(|at| now - at < KEEP));
        let mut finished: Vec<(Instant, u64)> = all
            .values()
            .filter(|s| s.who == who)
            .filter_map(|s| s.finished().map(|at| (at, s.id)))
            .collect();
        if finished.len() > self.max_finished {
            finished.sort_unstable();
            for (_, old) in &finished[..finished.len() - self.max_finished] {
                all.remove(old);
            }
        }
        let stream = Arc::new(Stream {
            id,
            session,
            who,
            ring: Mutex::new(Ring::default()),
            changed: watch::channel(()).0,
        });
        all.insert(id, stream.clone());
        stream
    }

    /// Forget the streams of a session that was deleted.
    pub(super) fn forget_session(&self, session: &str) {
        self.lock().retain(|_, s| s.session != session);
    }

    /// The answer to a `GET` that resumes one of these streams, or `None`
    /// when it is not one (no `Last-Event-ID` of the `<stream>/<n>` form, no
    /// session): rmcp answers those.
    pub(super) fn resume(
        &self,
        headers: &HeaderMap,
        who: &Principal,
    ) -> Option<Response<HttpBody>> {
        let last = headers.get("last-event-id")?.to_str().ok()?;
        let (stream, n) = parse_id(last)?;
        let session = headers.get("mcp-session-id")?.to_str().ok()?;
        let found = self
            .lock()
            .get(&stream)
            .filter(|s| s.session == session && s.who == *who)
            .cloned();
        let Some(found) = found else {
            return Some(refusal(
                StatusCode::NOT_FOUND,
                &format!(
                    "Not Found: no stream {stream} to resume in this session (Last-Event-ID {last}): \
                     it finished more than {}s ago, or it is another session's or client's; \
                     send the request again",
                    KEEP.as_secs()
                ),
            ));
        };
        let generation = match found.attach(n) {
            Ok(g) => g,
            Err(Gap::TooOld { oldest }) => {
                return Some(refusal(
                    StatusCode::GONE,
                    &format!(
                        "Gone: the events after {last} are no longer kept (a stream keeps its last \
                         {RING} events; the oldest kept is {stream}/{oldest}); send the request again"
                    ),
                ));
            }
            Err(Gap::NeverSent) => {
                return Some(refusal(
                    StatusCode::NOT_FOUND,
                    &format!("Not Found: event {last} was never sent on stream {stream}"),
                ));
            }
        };
        let mut response = Response::new(reader(found, n + 1, generation));
        let h = response.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        Some(response)
    }

    fn remove(&self, stream: &Arc<Stream>) {
        let mut all = self.lock();
        if all.get(&stream.id).is_some_and(|s| Arc::ptr_eq(s, stream)) {
            all.remove(&stream.id);
        }
    }
}

/// `<stream>/<n>`.
fn parse_id(id: &str) -> Option<(u64, u64)> {
    let (stream, n) = id.trim().split_once('/')?;
    Some((stream.parse().ok()?, n.parse().ok()?))
}

fn refusal(status: StatusCode, body: &str) -> Response<HttpBody> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_owned())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// One POST's response stream.
struct Stream {
    id: u64,
    session: String,
    who: Principal,
    ring: Mutex<Ring>,
    /// Bumped on every event, on the end, and when a reader is replaced.
    changed: watch::Sender<()>,
}

impl Stream {
    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finished(&self) -> Option<Instant> {
        self.ring().finished
    }

    /// Keep one SSE event block of rmcp's (keep-alive comments are not
    /// kept: readers send their own), with this stream's id.
    fn push_block(&self, block: &[u8]) {
        let text = String::from_utf8_lossy(block);
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        if lines.iter().all(|l| l.starts_with(':')) {
            return;
        }
        let mut ring = self.ring();
        let mut event = String::with_capacity(block.len() + 24);
        for line in lines.iter().filter(|l| !l.starts_with("id:")) {
            event.push_str(line);
            event.push('\n');
        }
        event.push_str(&format!("id: {}/{}\n\n", self.id, ring.end()));
        ring.push(Bytes::from(event));
        drop(ring);
        self.changed.send_replace(());
    }

    fn finish(&self) {
        self.ring().finished = Some(Instant::now());
        self.changed.send_replace(());
    }

    /// A new reader that resumes after event `n`: its generation (the one
    /// before it ends), or why not.
    fn attach(&self, n: u64) -> Result<u64, Gap> {
        let mut ring = self.ring();
        if n >= ring.end() {
            return Err(Gap::NeverSent);
        }
        if n + 1 < ring.first {
            return Err(Gap::TooOld { oldest: ring.first });
        }
        ring.reader += 1;
        ring.limit = None;
        let generation = ring.reader;
        drop(ring);
        self.changed.send_replace(());
        Ok(generation)
    }

    /// End the reader attached now once it has the events sent so far (at
    /// least the priming event, whose id the client resumes after).
    fn close_reader(&self) {
        let mut ring = self.ring();
        ring.limit = Some(ring.end().max(1));
        drop(ring);
        self.changed.send_replace(());
    }
}

/// Why a resumption cannot be served.
#[derive(Debug, PartialEq)]
enum Gap {
    /// Events after the client's last one were dropped from the ring.
    TooOld { oldest: u64 },
    /// The id names an event this stream has not sent.
    NeverSent,
}

/// A stream's last events.
#[derive(Default)]
struct Ring {
    events: VecDeque<Bytes>,
    /// The number of `events[0]`.
    first: u64,
    bytes: usize,
    finished: Option<Instant>,
    /// The generation of the reader allowed to read.
    reader: u64,
    /// Where that reader stops, when the server closed its stream.
    limit: Option<u64>,
}

impl Ring {
    /// The number the next event gets.
    fn end(&self) -> u64 {
        self.first + self.events.len() as u64
    }

    fn push(&mut self, event: Bytes) {
        self.bytes += event.len();
        self.events.push_back(event);
        while self.events.len() > RING || (self.bytes > RING_BYTES && self.events.len() > 1) {
            if let Some(old) = self.events.pop_front() {
                self.bytes -= old.len();
                self.first += 1;
            }
        }
    }

    /// What reader `generation` gets at event `n`.
    fn read(&self, n: u64, generation: u64) -> Read {
        if generation != self.reader || n < self.first || self.limit.is_some_and(|l| n >= l) {
            // Replaced by a resumption, fallen behind the ring, or closed.
            return Read::End;
        }
        match self.events.get((n - self.first) as usize) {
            Some(event) => Read::Event(event.clone()),
            None if self.finished.is_some() => Read::End,
            None => Read::Wait,
        }
    }
}

enum Read {
    Event(Bytes),
    Wait,
    End,
}

/// Read rmcp's SSE body to its end into `stream`, then keep the stream
/// [`KEEP`] (or until the server stops).
async fn pump<H>(streams: Arc<Streams>, stream: Arc<Stream>, mut body: HttpBody, hold: H) {
    let mut pending = BytesMut::new();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else {
            continue;
        };
        pending.extend_from_slice(&data);
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let block = pending.split_to(end + 2);
            stream.push_block(&block);
        }
    }
    if !pending.is_empty() {
        stream.push_block(&pending);
    }
    stream.finish();
    // The request has its answer: it leaves the requests in flight.
    drop(hold);
    tokio::select! {
        _ = tokio::time::sleep(KEEP) => {}
        _ = streams.stop.cancelled() => {}
    }
    streams.remove(&stream);
}

/// The body a client reads: `stream`'s events from number `next`, live, until
/// the stream ends, another reader replaces this one, or it falls behind.
fn reader(stream: Arc<Stream>, next: u64, generation: u64) -> HttpBody {
    let changes = stream.changed.subscribe();
    let events = futures::stream::unfold(
        (stream, next, changes),
        move |(stream, next, mut changes)| async move {
            loop {
                changes.borrow_and_update();
                let read = stream.ring().read(next, generation);
                match read {
                    Read::Event(event) => {
                        return Some((Ok(Frame::data(event)), (stream, next + 1, changes)));
                    }
                    Read::End => return None,
                    Read::Wait => {}
                }
                match tokio::time::timeout(KEEP_ALIVE, changes.changed()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return None,
                    Err(_) => {
                        let alive = Frame::data(Bytes::from_static(b":\n\n"));
                        return Some((Ok(alive), (stream, next, changes)));
                    }
                }
            }
        },
    );
    StreamBody::new(events).boxed()
}

/// The handle a tool call has on its own SSE stream (SEP-1699 polling): it
/// may close the client's stream mid-call, and the client resumes with
/// `Last-Event-ID`; the call goes on meanwhile. In the HTTP request's
/// extensions of a resumable POST.
#[derive(Clone, Default)]
pub struct Disconnect(Arc<Mutex<DisconnectState>>);

#[derive(Default)]
struct DisconnectState {
    stream: Weak<Stream>,
    /// Closed before the stream was attached.
    early: bool,
}

impl Disconnect {
    fn lock(&self) -> std::sync::MutexGuard<'_, DisconnectState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn attach(&self, stream: &Arc<Stream>) {
        let mut state = self.lock();
        state.stream = Arc::downgrade(stream);
        if state.early {
            stream.close_reader();
        }
    }

    /// Close the SSE stream of the request `context` answers, if it has one
    /// that can be resumed (a POST in an HTTP session); whether it had.
    pub fn close(context: &RequestContext<RoleServer>) -> bool {
        let Some(this) = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Disconnect>())
        else {
            return false;
        };
        let mut state = this.lock();
        match state.stream.upgrade() {
            Some(stream) => stream.close_reader(),
            None => state.early = true,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(i: usize) -> Bytes {
        Bytes::from(format!("data: {i}\nid: 0/{i}\n\n"))
    }

    #[test]
    fn a_resumption_starts_after_the_last_event_the_client_had() {
        let s = Stream {
            id: 7,
            session: "s".into(),
            who: Principal::loopback(),
            ring: Mutex::default(),
            changed: watch::channel(()).0,
        };
        s.push_block(b"id: 0/3\nretry: 3000\ndata: \n\n");
        s.push_block(b":\n\n");
        s.push_block(b"event: message\ndata: {\"a\":1}\nid: 1/3\n\n");
        let g = s.attach(0).unwrap();
        let ring = s.ring();
        assert_eq!(ring.events.len(), 2, "the keep-alive is not kept");
        assert_eq!(
            &ring.events[0][..],
            b"retry: 3000\ndata: \nid: 7/0\n\n",
            "rmcp's id is replaced"
        );
        match ring.read(1, g) {
            Read::Event(e) => assert_eq!(&e[..], b"event: message\ndata: {\"a\":1}\nid: 7/1\n\n"),
            _ => panic!("event 1 is there"),
        }
        assert!(matches!(ring.read(2, g), Read::Wait));
        assert!(matches!(ring.read(0, 0), Read::End), "the old reader ends");
        drop(ring);
        assert_eq!(s.attach(2), Err(Gap::NeverSent));
        s.finish();
        assert!(matches!(s.ring().read(2, 2), Read::End));
    }

    #[test]
    fn the_ring_is_bounded_and_a_gap_is_told() {
        let mut ring = Ring::default();
        for i in 0..RING + 10 {
            ring.push(event(i));
        }
        assert_eq!(ring.events.len(), RING);
        assert_eq!(ring.first, 10);
        assert!(matches!(ring.read(9, 0), Read::End), "behind the ring");
        let s = Stream {
            id: 1,
            session: "s".into(),
            who: Principal::loopback(),
            ring: Mutex::new(ring),
            changed: watch::channel(()).0,
        };
        assert_eq!(s.attach(8), Err(Gap::TooOld { oldest: 10 }));
        assert!(s.attach(9).is_ok(), "event 10 is the oldest kept");
        // Bytes bound too, but the newest event always stays.
        let mut ring = Ring::default();
        ring.push(Bytes::from(vec![b'x'; RING_BYTES]));
        ring.push(Bytes::from(vec![b'y'; RING_BYTES + 1]));
        assert_eq!((ring.events.len(), ring.first), (1, 1));
    }

    #[test]
    fn only_session_posts_before_2026_are_resumable() {
        let mut h = HeaderMap::new();
        assert_eq!(resumable(&h, b"{}"), None);
        h.insert("mcp-session-id", HeaderValue::from_static("abc"));
        assert_eq!(resumable(&h, b"{}").as_deref(), Some("abc"));
        let meta =
            br#"{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert_eq!(resumable(&h, meta), None);
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        assert_eq!(resumable(&h, b"{}"), None);
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2025-11-25"),
        );
        assert_eq!(resumable(&h, b"{}").as_deref(), Some("abc"));
        assert_eq!(parse_id("12/0"), Some((12, 0)));
        assert_eq!(parse_id("12"), None);
    }
}
