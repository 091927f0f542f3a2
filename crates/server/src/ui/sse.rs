//! `GET /ui/api/sessions/<id>/stream`: a session's events as server-sent
//! events, from the store, as they are stored — by this process's runs (at
//! once) or by another process writing to the same store (polled).
//!
//! Each event is one frame, `id: <seq>`, so a browser that reconnects sends
//! `Last-Event-ID` and the stream resumes after it; `?after=N` starts after
//! `N` (the page's snapshot). A status change is an `event: status` frame.
//! The stream does not end when the run does: a session waiting for an
//! approval or a signal, or failed, may go on (approved here, resumed
//! elsewhere), so it keeps watching until the client goes or the server
//! stops. At most [`super::MAX_STREAMS`] streams are open at once.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agentfile_session::SessionStatus;
use agentfile_wire::rpc::EventParams;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use super::rows::event_row;
use super::{Body, Ui, json_error};
use crate::gateway::Gateway;

/// How long one wait for new events lasts before a keep-alive comment.
const WAIT: Duration = Duration::from_secs(15);
/// How often a session that has ended is looked at again.
const ENDED_POLL: Duration = Duration::from_secs(1);

struct State {
    gateway: Arc<Gateway>,
    id: String,
    after: u64,
    status: Option<SessionStatus>,
    done: bool,
    stop: CancellationToken,
    _permit: OwnedSemaphorePermit,
    printer: crate::printer::Progress,
    first: bool,
}

pub(super) fn stream(ui: &Ui, id: &str, headers: &HeaderMap, query: &str) -> Response<Body> {
    let Ok(permit) = ui.streams.clone().try_acquire_owned() else {
        let mut r = json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live views are open; close some tabs",
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return r;
    };
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let asked = url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "after")
        .and_then(|(_, v)| v.parse::<u64>().ok());
    let state = State {
        gateway: ui.gateway.clone(),
        id: id.to_owned(),
        after: resumed.max(asked).unwrap_or(0),
        status: None,
        done: false,
        stop: ui.stop.clone(),
        _permit: permit,
        printer: crate::printer::Progress::plain(false),
        first: true,
    };
    let frames = futures::stream::unfold(state, |mut s| async move {
        let chunk = next_chunk(&mut s).await?;
        Some((Ok::<_, Infallible>(Frame::data(Bytes::from(chunk))), s))
    });
    let mut r = Response::new(StreamBody::new(frames).boxed());
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// The next frames to send, or `None` to end the stream.
async fn next_chunk(s: &mut State) -> Option<String> {
    let mut out = String::new();
    if s.first {
        s.first = false;
        out.push_str("retry: 1000\n\n");
    }
    let wait = if s.done { 0 } else { WAIT.as_millis() as u64 };
    let asked = s.gateway.events(EventParams {
        session_id: s.id.clone(),
        after_seq: s.after,
        wait_ms: wait,
        limit: Some(500),
    });
    let page = tokio::select! {
        _ = s.stop.cancelled() => return None,
        page = asked => page,
    };
    let page = match page {
        Ok(p) => p,
        Err(e) => {
            let body = serde_json::json!({ "error": e.message });
            out.push_str(&format!("event: failure\ndata: {body}\n\n"));
            // Say it once, then wait as for an ended session.
            s.done = true;
            tokio::select! {
                _ = s.stop.cancelled() => return None,
                _ = tokio::time::sleep(ENDED_POLL * 5) => {}
            }
            return Some(out);
        }
    };
    for e in &page.events {
        let row = event_row(e, &s.printer);
        let data = serde_json::to_string(&row).unwrap_or_default();
        out.push_str(&format!("id: {}\nevent: event\ndata: {data}\n\n", e.seq));
        s.after = e.seq;
    }
    if s.status != Some(page.status) {
        s.status = Some(page.status);
        let data = serde_json::json!({ "status": page.status, "last_seq": page.last_seq });
        out.push_str(&format!("event: status\ndata: {data}\n\n"));
    }
    s.done = page.done;
    if out.is_empty() {
        if s.done {
            // Ended: look again now and then, quietly.
            tokio::select! {
                _ = s.stop.cancelled() => return None,
                _ = tokio::time::sleep(ENDED_POLL) => {}
            }
        }
        out.push_str(": keep-alive\n\n");
    }
    Some(out)
}
