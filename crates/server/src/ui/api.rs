//! The JSON the page reads and the actions it takes, each over the
//! [`Gateway`](crate::gateway::Gateway): a page of sessions, one session's
//! snapshot (rows of its events, its graph and timeline, outputs, usage,
//! what it waits for), one event in full, and approve / signal / cancel /
//! resume, the operations JSON-RPC and MCP call.

// An error here is the HTTP response to send, built once where it arises.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use agentfile_frontend::inspect::Diagram;
use agentfile_session::{Cursor, SessionMeta, SessionQuery, SessionStatus, SessionStore};
use agentfile_telemetry::parse_ts;
use agentfile_wire::events::{Event, EventBody, Usage};
use agentfile_wire::rpc::{ApproveParams, CancelParams, RpcError, SignalParams, code};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};

use super::rows::{EventRow, event_row};
use super::{Body, Ui, graph, json, json_error, read_body, sse, timeline};
use crate::access::{Action, Principal};
use crate::gateway::RunHooks;

/// `GET /ui/api/me`.
#[derive(Serialize)]
pub(super) struct Me {
    pub auth: &'static str,
    pub csrf: String,
}

/// A row of the list.
#[derive(Serialize)]
struct Row {
    id: String,
    workflow: String,
    status: SessionStatus,
    created_at: String,
    updated_at: String,
    last_seq: u64,
    inputs: BTreeMap<String, String>,
    trigger: Option<TriggerRef>,
    ended_at: Option<String>,
    duration_ms: Option<u64>,
    usage: Option<Usage>,
}

#[derive(Serialize)]
struct TriggerRef {
    id: String,
    kind: String,
}

/// Plans read for graphs, by file, while the file is unchanged.
#[derive(Default)]
pub(super) struct PlanCache(Mutex<HashMap<PathBuf, Cached>>);

/// A file's modification time and length, and its diagram.
type Cached = (SystemTime, u64, Arc<Diagram>);

/// The most plans remembered.
const MAX_PLANS: usize = 64;

/// Answer one API request made as `who`. Every route that names a session
/// first asks the owner rule ([`crate::access`]); a session `who` may not
/// read or steer answers exactly as one that does not exist.
pub(super) async fn route<B>(
    ui: &Ui,
    req: Request<B>,
    rest: &str,
    me: Me,
    who: &Principal,
) -> Response<Body>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let segs: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let method = req.method().clone();
    let query = req.uri().query().unwrap_or("").to_owned();
    let valid = |id: &str| agentfile_session::is_valid_id(id);
    if let (Some(&"sessions"), Some(id)) = (segs.first(), segs.get(1))
        && valid(id)
    {
        let action = if method == Method::POST {
            Action::Steer
        } else {
            Action::Read
        };
        if let Err(r) = allowed(ui, who, id, action).await {
            return r;
        }
    }
    let out = match (&method, segs.as_slice()) {
        (&Method::GET, ["me"]) => Ok(json(StatusCode::OK, &me)),
        (&Method::GET, ["sessions"]) => list(ui, &query, who).await,
        (&Method::GET, ["workflows"]) => workflows(ui).await,
        (&Method::GET, ["sessions", id]) if valid(id) => snapshot(ui, id, &query).await,
        (&Method::GET, ["sessions", id, "events", seq]) if valid(id) => match seq.parse() {
            Ok(seq) => event(ui, id, seq).await,
            Err(_) => Err(bad("the event's seq is a number")),
        },
        (&Method::GET, ["sessions", id, "stream"]) if valid(id) => {
            let known = (*id).to_owned();
            match with_store(ui, move |store| store.get(&known).map_err(store_failed)).await {
                Ok(_) => Ok(sse::stream(ui, id, req.headers(), &query)),
                Err(r) => Err(r),
            }
        }
        (&Method::POST, ["sessions", id, action]) if valid(id) => {
            let id = (*id).to_owned();
            let action = (*action).to_owned();
            match read_body(req, super::MAX_BODY, ui.read_timeout).await {
                Ok(body) => act(ui, who, id, &action, &body).await,
                Err(r) => return r,
            }
        }
        (_, ["sessions", id, ..]) if !valid(id) => Err(json_error(
            StatusCode::NOT_FOUND,
            "no such session: ids are letters, digits, - and _",
        )),
        _ => Err(json_error(
            StatusCode::NOT_FOUND,
            "no such API route: see \"The web view\" in the book, docs/src/guides/web-view.md",
        )),
    };
    out.unwrap_or_else(|r| r)
}

type Answer = Result<Response<Body>, Response<Body>>;

fn bad(message: &str) -> Response<Body> {
    json_error(StatusCode::BAD_REQUEST, message)
}

/// A gateway error as an HTTP status with its message.
fn failed(e: RpcError) -> Response<Body> {
    let status = match e.code {
        code::UNKNOWN_SESSION => StatusCode::NOT_FOUND,
        code::SESSION_STATE | code::RUN_REJECTED => StatusCode::CONFLICT,
        code::SHUTTING_DOWN => StatusCode::SERVICE_UNAVAILABLE,
        code::INVALID_PARAMS => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    json_error(status, &e.message)
}

fn store_failed(e: agentfile_session::StoreError) -> Response<Body> {
    match e {
        agentfile_session::StoreError::NotFound(id) => json_error(
            StatusCode::NOT_FOUND,
            &format!("no session `{id}` in this store"),
        ),
        other => json_error(StatusCode::INTERNAL_SERVER_ERROR, &other.to_string()),
    }
}

/// Whether `who` may do `action` with session `id`: else the 404 an unknown
/// session gets, so another principal's ids cannot be probed.
async fn allowed(ui: &Ui, who: &Principal, id: &str, action: Action) -> Result<(), Response<Body>> {
    let (rule, who, id) = (ui.rule, who.clone(), id.to_owned());
    with_store(ui, move |store| {
        match rule.check(store, &who, &id, action) {
            Ok(true) => Ok(()),
            Ok(false) => Err(store_failed(agentfile_session::StoreError::NotFound(id))),
            Err(e) => Err(store_failed(e)),
        }
    })
    .await
}

/// Run `work` on the store, off the async threads.
async fn with_store<T: Send + 'static>(
    ui: &Ui,
    work: impl FnOnce(&dyn SessionStore) -> Result<T, Response<Body>> + Send + 'static,
) -> Result<T, Response<Body>> {
    let store = ui.gateway.store().map_err(failed)?;
    tokio::task::spawn_blocking(move || work(&*store))
        .await
        .map_err(|e| json_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()))?
}

/// Pages of the store one list request reads at most to fill its page with
/// sessions the caller may see.
const MAX_LIST_SCANS: usize = 20;

async fn list(ui: &Ui, query: &str, who: &Principal) -> Answer {
    let mut q = SessionQuery {
        limit: 50,
        ..SessionQuery::default()
    };
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let v = v.trim();
        if v.is_empty() {
            continue;
        }
        match &*k {
            "status" => {
                q.status = Some(SessionStatus::parse(v).ok_or_else(|| {
                    bad(&format!("unknown status `{v}`: one of queued, running, waiting_approval, suspended, completed, failed, cancelled, interrupted"))
                })?)
            }
            "workflow" => q.workflow = Some(v.to_owned()),
            "q" => q.search = Some(v.chars().take(200).collect()),
            "before" => {
                q.before = Some(
                    Cursor::decode(v).ok_or_else(|| bad("`before` is not a cursor this list gave"))?,
                )
            }
            "limit" => {
                q.limit = v
                    .parse()
                    .map_err(|_| bad("`limit` is a number (at most 500)"))?
            }
            _ => {}
        }
    }
    let (rule, who) = (ui.rule, who.clone());
    let rows = with_store(ui, move |store| {
        // Only the sessions `who` may see: read pages of the store until
        // this one is full (bounded); the cursor continues after the last
        // session read, seen or not.
        let limit = q.limit();
        let mut seen = Vec::new();
        let mut next = None;
        for _ in 0..MAX_LIST_SCANS {
            let page = store.page(&q).map_err(store_failed)?;
            let full = page.len() == limit;
            next = None;
            // Every row's owner in one read, not one per row.
            let ids: Vec<String> = page.iter().map(|m| m.id.clone()).collect();
            let owners = store.principals(&ids).map_err(store_failed)?;
            for (m, owner) in page.into_iter().zip(owners) {
                if seen.len() == limit {
                    break;
                }
                next = Some(Cursor::after(&m));
                if rule.allows(&who, owner.as_deref(), Action::Read) {
                    seen.push(m);
                }
            }
            if !full && seen.len() < limit {
                next = None;
            }
            match (&next, seen.len() < limit) {
                (Some(c), true) => q.before = Some(c.clone()),
                _ => break,
            }
        }
        let ids: Vec<String> = seen.iter().map(|m| m.id.clone()).collect();
        let summaries = store
            .summaries(&ids)
            .ok()
            .filter(|s| s.len() == ids.len())
            .unwrap_or_else(|| vec![Default::default(); ids.len()]);
        let rows = seen
            .into_iter()
            .zip(summaries)
            .map(|(m, s)| row(m, s))
            .collect::<Vec<_>>();
        Ok((rows, next.map(|c| c.encode())))
    })
    .await?;
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({ "sessions": rows.0, "next": rows.1 }),
    ))
}

fn row(m: SessionMeta, s: agentfile_session::SessionSummary) -> Row {
    let at = |ts: &str| {
        parse_ts(ts)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
    };
    let end = match (&s.ended_at, m.status) {
        (Some(e), _) => at(e),
        (None, SessionStatus::Running | SessionStatus::Queued) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis() as u64),
        (None, _) => at(&m.updated_at),
    };
    let duration_ms = end.zip(at(&m.created_at)).map(|(e, c)| e.saturating_sub(c));
    Row {
        trigger: s.trigger.map(|(id, kind)| TriggerRef { id, kind }),
        ended_at: s.ended_at,
        duration_ms,
        usage: s.usage,
        id: m.id,
        workflow: m.workflow,
        status: m.status,
        created_at: m.created_at,
        updated_at: m.updated_at,
        last_seq: m.last_seq,
        inputs: m.inputs,
    }
}

async fn workflows(ui: &Ui) -> Answer {
    let names = with_store(ui, |store| store.workflows().map_err(store_failed)).await?;
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({ "workflows": names }),
    ))
}

/// `GET /ui/api/sessions/<id>[?after=N]`: with `after`, only the event rows
/// after seq N (the page refreshing what it has).
async fn snapshot(ui: &Ui, id: &str, query: &str) -> Answer {
    let after = url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "after")
        .map(|(_, v)| v.parse::<u64>())
        .transpose()
        .map_err(|_| bad("`after` is an event's seq"))?
        .unwrap_or(0);
    let id = id.to_owned();
    let (meta, events) = with_store(ui, move |store| {
        let meta = store.get(&id).map_err(store_failed)?;
        let events = store.events(&id, 0).map_err(store_failed)?;
        Ok((meta, events))
    })
    .await?;
    let diagram = ui.plan(&meta).await;
    let events = Arc::new(events);
    let work = events.clone();
    // Serialized straight from the typed snapshot, off the async threads:
    // a 10,000-event session is megabytes of JSON.
    let body = tokio::task::spawn_blocking(move || {
        serde_json::to_vec(&snapshot_of(meta, &work, after, diagram)).unwrap_or_default()
    })
    .await
    .map_err(|e| json_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()))?;
    let mut r = Response::new(http_body_util::BodyExt::boxed(http_body_util::Full::new(
        Bytes::from(body),
    )));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// `GET /ui/api/sessions/<id>`'s answer.
#[derive(Serialize)]
struct Snapshot {
    session: Row,
    outputs: Option<BTreeMap<String, serde_json::Value>>,
    error: Option<String>,
    pending: serde_json::Value,
    graph: GraphView,
    timeline: timeline::Timeline,
    events: Vec<EventRow>,
    /// Lines left out at the start: a session longer than [`MAX_ROWS`]
    /// sends its last lines only (any one event stays readable by its seq).
    events_omitted: u64,
    last_seq: u64,
    /// The OCI package the run's workflow came from (its latest start's).
    package: Option<agentfile_wire::events::PackageRef>,
}

/// The most event lines one snapshot carries.
const MAX_ROWS: u64 = 20_000;

#[derive(Serialize)]
#[serde(untagged)]
enum GraphView {
    Drawn(graph::Graph),
    Unavailable { unavailable: String },
}

fn snapshot_of(
    meta: SessionMeta,
    events: &[Event],
    after: u64,
    diagram: Result<Arc<Diagram>, NoDiagram>,
) -> Snapshot {
    let printer = crate::printer::Progress::plain(false);
    let last_seq = events.last().map_or(meta.last_seq, |e| e.seq);
    let from = after.max(last_seq.saturating_sub(MAX_ROWS));
    let rows: Vec<EventRow> = events
        .iter()
        .filter(|e| e.seq > from)
        .map(|e| event_row(e, &printer))
        .collect();
    let (mut outputs, mut error) = (None, None);
    if let Some(last) = events.last() {
        match &last.body {
            EventBody::RunComplete { outputs: o, .. } => outputs = Some(o.clone()),
            EventBody::RunFailed { error: e, .. } => error = Some(e.clone()),
            _ => {}
        }
    }
    let pending = pending_of(&meta, events);
    let running = matches!(meta.status, SessionStatus::Running | SessionStatus::Queued);
    let (graph, parallels) = match diagram {
        Ok(d) => {
            let parallels: Vec<String> = d
                .groups
                .iter()
                .filter(|g| g.kind == "parallel")
                .map(|g| g.path.clone())
                .collect();
            let mut placed = graph::layout(&d, &graph::States::of(events));
            let ran = events.iter().rev().find_map(|e| match &e.body {
                EventBody::RunStarted { fingerprint, .. } => Some(fingerprint.clone()),
                _ => None,
            });
            if let Some(Some(ran)) = ran
                && ran != d.fingerprint
            {
                placed.note = Some(
                    "The workflow file changed since this run: this is the graph of the file \
                     as it is now, and states are matched by node path."
                        .into(),
                );
            }
            (GraphView::Drawn(placed), parallels)
        }
        Err(why) => (
            GraphView::Unavailable {
                unavailable: why.to_string(),
            },
            Vec::new(),
        ),
    };
    let timeline = timeline::build(events, &parallels, running);
    let package = events.iter().rev().find_map(|e| match &e.body {
        EventBody::RunStarted { package, .. } => Some(package.as_deref().cloned()),
        _ => None,
    });
    let summary = agentfile_session::browse::summarize(events);
    Snapshot {
        session: row(meta, summary),
        outputs,
        error,
        pending,
        graph,
        timeline,
        events: rows,
        events_omitted: from - after,
        last_seq,
        package: package.flatten(),
    }
}

/// What a session waits for: an approval, or signals at suspends.
fn pending_of(meta: &SessionMeta, events: &[Event]) -> serde_json::Value {
    match meta.status {
        SessionStatus::WaitingApproval => {
            let Some(seq) = agentfile_session::pending_approval_in(events) else {
                return serde_json::Value::Null;
            };
            let Some(e) = events.iter().find(|e| e.seq == seq) else {
                return serde_json::Value::Null;
            };
            let reason = match &e.body {
                EventBody::ApprovalRequired { reason, .. } => reason.clone(),
                _ => String::new(),
            };
            serde_json::json!({"kind": "approval", "reason": reason, "node": e.node, "seq": seq})
        }
        SessionStatus::Suspended => {
            let waiting = agentfile_session::pending_suspends(events);
            let names: Vec<String> = waiting.iter().flat_map(|(_, evs)| evs.clone()).collect();
            let node = waiting.first().map(|(p, _)| p.clone());
            serde_json::json!({"kind": "suspend", "events": names, "node": node, "seq": meta.last_seq})
        }
        _ => serde_json::Value::Null,
    }
}

/// The longest string an event shown in full carries; longer ones are cut
/// and say by how much.
const MAX_SHOWN: usize = 256 * 1024;

/// `GET /ui/api/sessions/<id>/events/<seq>`: the stored event, its long
/// strings cut.
async fn event(ui: &Ui, id: &str, seq: u64) -> Answer {
    let id = id.to_owned();
    let found = with_store(ui, move |store| {
        let mut events = store
            .events(&id, seq.saturating_sub(1))
            .map_err(store_failed)?;
        events.truncate(1);
        Ok(events.pop().filter(|e| e.seq == seq))
    })
    .await?;
    let Some(event) = found else {
        return Err(json_error(StatusCode::NOT_FOUND, "no event with that seq"));
    };
    let mut value = serde_json::to_value(&event).unwrap_or_default();
    clip_strings(&mut value);
    Ok(json(StatusCode::OK, &value))
}

/// Cut each string longer than [`MAX_SHOWN`], saying how much was cut.
fn clip_strings(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) if s.len() > MAX_SHOWN => {
            let mut end = MAX_SHOWN;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            let cut = s.len() - end;
            s.truncate(end);
            s.push_str(&format!("\n… [{cut} more bytes not shown]"));
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(clip_strings),
        serde_json::Value::Object(o) => o.values_mut().for_each(clip_strings),
        _ => {}
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decide {
    approve: bool,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Signal {
    event: String,
    #[serde(default)]
    payload: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Nothing {}

/// The body of `fork`: the node to run live from.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fork {
    at: String,
}

/// `POST /ui/api/sessions/<id>/<action>`: the gateway's operation. The
/// reply names the session it acted on (for `fork`, the new one).
async fn act(ui: &Ui, who: &Principal, id: String, action: &str, body: &[u8]) -> Answer {
    fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Response<Body>> {
        let body = if body.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            body
        };
        serde_json::from_slice(body).map_err(|e| bad(&format!("the request body: {e}")))
    }
    let gateway = &ui.gateway;
    let status = match action {
        "approve" => {
            let d: Decide = parse(body)?;
            let note = d.note.filter(|n| !n.trim().is_empty());
            gateway
                .approve(
                    ApproveParams {
                        session_id: id,
                        approve: d.approve,
                        note,
                    },
                    RunHooks::default(),
                )
                .await
        }
        "signal" => {
            let s: Signal = parse(body)?;
            if s.event.trim().is_empty() {
                return Err(bad("a signal needs an event name"));
            }
            gateway
                .signal(
                    SignalParams {
                        session_id: id,
                        event: s.event,
                        payload: s.payload,
                    },
                    RunHooks::default(),
                )
                .await
        }
        "cancel" => {
            let _: Nothing = parse(body)?;
            gateway.cancel(CancelParams { session_id: id }).await
        }
        "resume" => {
            let _: Nothing = parse(body)?;
            gateway.resume(id, RunHooks::default()).await
        }
        "fork" => {
            let f: Fork = parse(body)?;
            let hooks = RunHooks {
                // With tokens, the new session is its token's, as a run's is.
                owner: Some(who.clone()).filter(Principal::is_token),
                ..RunHooks::default()
            };
            let params = agentfile_wire::rpc::ForkParams {
                session_id: id,
                at: f.at,
                wait: Some(false),
                ..Default::default()
            };
            gateway
                .fork(params, hooks)
                .await
                .map(|live| agentfile_wire::rpc::RunStatus {
                    session_id: live.session_id().to_owned(),
                    status: live.status(),
                })
        }
        other => {
            return Err(json_error(
                StatusCode::NOT_FOUND,
                &format!("no action `{other}`: approve, signal, cancel, resume or fork"),
            ));
        }
    }
    .map_err(failed)?;
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({ "status": status.status, "session_id": status.session_id }),
    ))
}

/// Why a session's plan cannot be drawn: the `unavailable` text the page
/// shows in place of the graph.
#[derive(Debug, thiserror::Error)]
enum NoDiagram {
    #[error("This run had no workflow file to draw ({how}); its timeline and events are below.")]
    NoFile { how: &'static str },
    #[error("The workflow file is no longer there ({}).", .0.display())]
    Gone(PathBuf),
    #[error("the workflow file is larger than {0} bytes")]
    TooLarge(u64),
    /// The gateway's config could not be read: its message.
    #[error("{}", .0.message)]
    Config(RpcError),
    #[error("{0}")]
    Join(tokio::task::JoinError),
    #[error("the workflow file no longer reads as a valid workflow")]
    Invalid,
}

impl Ui {
    /// The diagram of the plan a session ran, or why there is none.
    async fn plan(&self, meta: &SessionMeta) -> Result<Arc<Diagram>, NoDiagram> {
        let path = PathBuf::from(&meta.path);
        if let Some(name @ ("(goal)" | "(stdin)")) = path.file_name().and_then(|n| n.to_str()) {
            let how = if name == "(goal)" {
                "run --goal"
            } else {
                "run -"
            };
            return Err(NoDiagram::NoFile { how });
        }
        let file = if path.is_dir() {
            agentfile_frontend::registry::file_in(&path).unwrap_or(path.clone())
        } else {
            path.clone()
        };
        let stat = std::fs::metadata(&file).map_err(|_| NoDiagram::Gone(file.clone()))?;
        let modified = stat.modified().unwrap_or(UNIX_EPOCH);
        if let Some((m, len, d)) = self.plans.get(&file)
            && m == modified
            && len == stat.len()
        {
            return Ok(d);
        }
        let max = self.gateway.options().limits.max_source() as u64;
        if stat.len() > max {
            return Err(NoDiagram::TooLarge(max));
        }
        let config = self.gateway.default_config().map_err(NoDiagram::Config)?;
        let read = path.clone();
        let diagram = tokio::task::spawn_blocking(move || {
            let options = agentfile_frontend::Options {
                packages: None,
                config: Some(&config),
                dialect: None,
                read: Default::default(),
            };
            agentfile_frontend::Analysis::load_for_run(&read, None, options)
                .map(|plan| agentfile_frontend::inspect::diagram(&plan))
        })
        .await
        .map_err(NoDiagram::Join)?
        .map_err(|_| NoDiagram::Invalid)?;
        let diagram = Arc::new(diagram);
        self.plans.put(file, modified, stat.len(), diagram.clone());
        Ok(diagram)
    }
}

impl PlanCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Cached>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, file: &PathBuf) -> Option<Cached> {
        self.lock().get(file).cloned()
    }

    fn put(&self, file: PathBuf, modified: SystemTime, len: u64, d: Arc<Diagram>) {
        let mut all = self.lock();
        if all.len() >= MAX_PLANS {
            all.clear();
        }
        all.insert(file, (modified, len, d));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64) -> Event {
        Event {
            schema_version: 1,
            session_id: "s".into(),
            seq,
            ts: "2026-11-27T10:00:00.000Z".into(),
            step: None,
            goal: None,
            agent: None,
            iteration: None,
            node: Some("main".into()),
            node_kind: None,
            replayed: false,
            body: EventBody::Warning {
                message: format!("<b>event {seq}</b>"),
            },
        }
    }

    fn meta(last_seq: u64) -> SessionMeta {
        SessionMeta {
            id: "s".into(),
            workflow: "w".into(),
            path: "/nowhere".into(),
            workspace: "/".into(),
            inputs: BTreeMap::new(),
            status: SessionStatus::Completed,
            created_at: "2026-11-27T10:00:00.000Z".into(),
            updated_at: "2026-11-27T10:00:00.000Z".into(),
            last_seq,
        }
    }

    #[test]
    fn a_very_long_session_sends_its_last_lines_and_says_how_many_it_left_out() {
        let n = MAX_ROWS + 5;
        let events: Vec<Event> = (1..=n).map(event).collect();
        let snap = snapshot_of(meta(n), &events, 0, Err(NoDiagram::Invalid));
        assert_eq!(snap.events.len() as u64, MAX_ROWS);
        assert_eq!((snap.events[0].seq, snap.events_omitted), (6, 5));
        let refresh = snapshot_of(meta(n), &events, n - 2, Err(NoDiagram::Invalid));
        assert_eq!((refresh.events.len(), refresh.events_omitted), (2, 0));
        let short = snapshot_of(meta(3), &events[..3], 0, Err(NoDiagram::Invalid));
        assert_eq!((short.events.len(), short.events_omitted), (3, 0));
        // Lines are text as the printer writes it, markup and all.
        assert!(short.events[0].line.contains("<b>event 1</b>"));
    }
}
