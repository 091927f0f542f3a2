//! The JSON-RPC methods of the A2A binding, 1.0's and 0.3's: one request
//! per POST (no batches), each answered with a JSON-RPC response, or for the
//! streaming methods a stream of them as server-sent events. A request that
//! is not JSON, not JSON-RPC, names no method we serve or carries bad
//! params gets its JSON-RPC error, and the server goes on serving.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::reply::{Fault, Version};
use super::tasks::{self, Incoming, Owned};
use super::{A2a, Body, stream};
use crate::access::Principal;
use agentfile_wire::a2a::{
    CancelTaskRequest, GetTaskRequest, JsonRpcResponse, ListTasksRequest, ListTasksResponse,
    SubscribeToTaskRequest, Task, method, v0_3,
};

/// The longest a blocking `SendMessage` waits before it answers with the
/// task still working (the client then polls `GetTask` or subscribes).
const MAX_BLOCK: Duration = Duration::from_secs(300);
/// Tasks a `ListTasks` page holds at most (and by default).
const MAX_PAGE: usize = 100;
const DEFAULT_PAGE: usize = 50;

/// What a method does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Send,
    Stream,
    Get,
    List,
    Cancel,
    Subscribe,
    Card,
    Push,
}

/// The method's generation and what it does, if we serve it.
fn op(method: &str) -> Option<(Version, Op)> {
    use v0_3::method as old;
    Some(match method {
        method::SEND_MESSAGE => (Version::V1, Op::Send),
        method::SEND_STREAMING_MESSAGE => (Version::V1, Op::Stream),
        method::GET_TASK => (Version::V1, Op::Get),
        method::LIST_TASKS => (Version::V1, Op::List),
        method::CANCEL_TASK => (Version::V1, Op::Cancel),
        method::SUBSCRIBE_TO_TASK => (Version::V1, Op::Subscribe),
        method::GET_EXTENDED_AGENT_CARD => (Version::V1, Op::Card),
        method::CREATE_TASK_PUSH_NOTIFICATION_CONFIG
        | method::GET_TASK_PUSH_NOTIFICATION_CONFIG
        | method::LIST_TASK_PUSH_NOTIFICATION_CONFIGS
        | method::DELETE_TASK_PUSH_NOTIFICATION_CONFIG => (Version::V1, Op::Push),
        old::SEND_MESSAGE => (Version::V03, Op::Send),
        old::SEND_STREAMING_MESSAGE => (Version::V03, Op::Stream),
        old::GET_TASK => (Version::V03, Op::Get),
        old::CANCEL_TASK => (Version::V03, Op::Cancel),
        old::RESUBSCRIBE => (Version::V03, Op::Subscribe),
        old::GET_AUTHENTICATED_EXTENDED_CARD => (Version::V03, Op::Card),
        m if m.starts_with(old::PUSH_NOTIFICATION_CONFIG_PREFIX) => (Version::V03, Op::Push),
        _ => return None,
    })
}

fn json_response(body: &JsonRpcResponse) -> Response<Body> {
    let body = serde_json::to_string(body).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn error(id: &Value, f: &Fault, v: Version) -> Response<Body> {
    json_response(&JsonRpcResponse::error(id.clone(), f.write(v)))
}

fn result(id: &Value, result: Value) -> Response<Body> {
    json_response(&JsonRpcResponse::result(id.clone(), result))
}

/// A request as it came: who sent it, the `A2A-Version` it named, its body,
/// the JSON-RPC endpoint's URL (for the card).
pub struct Call<'a> {
    pub who: Principal,
    pub version: Option<&'a str>,
    pub body: &'a [u8],
    pub endpoint: &'a str,
}

/// Answer one JSON-RPC request.
pub async fn call(a2a: &Arc<A2a>, call: Call<'_>) -> Response<Body> {
    let msg: Value = match serde_json::from_slice(call.body) {
        Ok(v) => v,
        Err(e) => {
            let f = Fault::parse(format!("the body is not JSON: {e}"));
            return error(&Value::Null, &f, Version::V1);
        }
    };
    let Some(obj) = msg.as_object() else {
        let f = Fault::invalid_request("a request is one JSON-RPC object (batches are not served)");
        return error(&Value::Null, &f, Version::V1);
    };
    let id = match obj.get("id") {
        None => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id.clone(),
        Some(_) => {
            let f = Fault::invalid_request("`id` must be a string, a number or null");
            return error(&Value::Null, &f, Version::V1);
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        let f = Fault::invalid_request("`jsonrpc` must be \"2.0\"");
        return error(&id, &f, Version::V1);
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        let f = Fault::invalid_request("the request names no `method`");
        return error(&id, &f, Version::V1);
    };
    let Some((version, op)) = op(method) else {
        return error(&id, &Fault::method_not_found(method), Version::V1);
    };
    if version == Version::V1
        && let Some(asked) = call.version.map(str::trim).filter(|v| !v.is_empty())
        && asked != "1"
        && !asked.starts_with("1.")
    {
        return error(&id, &Fault::version(asked), version);
    }
    let params = obj.get("params").cloned().unwrap_or_else(|| json!({}));
    let who = &call.who;
    let answered = match op {
        Op::Send => send(a2a, who, &params, version)
            .await
            .map(|t| version.sent(t)),
        Op::Stream => return open(a2a, who, &params, version, id).await,
        Op::Subscribe => return subscribe(a2a, who, &params, version, id).await,
        Op::Get => match read::<GetTaskRequest>(&params).and_then(|p| task_id(p.id)) {
            Ok(task) => get(a2a, who, &task).await.map(|t| version.task(&t)),
            Err(f) => Err(f),
        },
        Op::Cancel => match read::<CancelTaskRequest>(&params).and_then(|p| task_id(p.id)) {
            Ok(task) => tasks::cancel(a2a, who, &task)
                .await
                .map(|t| version.task(&t)),
            Err(f) => Err(f),
        },
        Op::List => list(a2a, who, &params).await,
        Op::Card => {
            Ok(serde_json::to_value(a2a.card(call.endpoint, true).await).unwrap_or_default())
        }
        Op::Push => Err(Fault::push_not_supported()),
    };
    match answered {
        Ok(v) => result(&id, v),
        Err(f) => error(&id, &f, version),
    }
}

/// A method's `params` as the wire type `T` (0.3's task params read as
/// their 1.0 twins: both name the task `id`).
fn read<T: DeserializeOwned>(params: &Value) -> Result<T, Fault> {
    serde_json::from_value(params.clone())
        .map_err(|e| Fault::invalid_params(format!("the params do not read: {e}")))
}

/// The task a task method names (`params.id`).
fn task_id(id: String) -> Result<String, Fault> {
    if id.is_empty() {
        return Err(Fault::invalid_params("name the task: params.id"));
    }
    Ok(id)
}

/// A task of `who`'s as it stands (an interrupted one resumed here).
async fn get(a2a: &Arc<A2a>, who: &Principal, id: &str) -> Result<Task, Fault> {
    let o = tasks::owned(a2a, who, id).await?;
    tasks::task_of(a2a, &o, true).await
}

/// The task a message starts, or answers (`taskId`); and the event its
/// updates follow from.
async fn begin(a2a: &Arc<A2a>, who: &Principal, msg: &Incoming) -> Result<(Owned, u64), Fault> {
    match &msg.task_id {
        Some(task) => {
            let o = tasks::owned(a2a, who, task).await?;
            tasks::answer(a2a, &o, msg).await?;
            let after = o.meta.last_seq;
            Ok((o, after))
        }
        None => Ok((tasks::start(a2a, who, msg).await?, 0)),
    }
}

/// `SendMessage` / `message/send`: the task once it ends or asks, unless
/// the client asked for it at once (1.0 `returnImmediately`, 0.3
/// `blocking: false`).
async fn send(
    a2a: &Arc<A2a>,
    who: &Principal,
    params: &Value,
    version: Version,
) -> Result<Task, Fault> {
    let msg = Incoming::read(version, params)?;
    let (o, _) = begin(a2a, who, &msg).await?;
    if msg.at_once {
        return Ok(tasks::working(&o));
    }
    let Some(_hold) = a2a.hold(who) else {
        // Too many waiting already: answer now; the client polls.
        return Ok(tasks::working(&o));
    };
    stream::settle(a2a, o, MAX_BLOCK).await
}

/// `SendStreamingMessage` / `message/stream`.
async fn open(
    a2a: &Arc<A2a>,
    who: &Principal,
    params: &Value,
    version: Version,
    id: Value,
) -> Response<Body> {
    let Some(hold) = a2a.hold(who) else {
        return error(&id, &too_many(a2a), version);
    };
    let msg = match Incoming::read(version, params) {
        Ok(m) => m,
        Err(f) => return error(&id, &f, version),
    };
    match begin(a2a, who, &msg).await {
        Ok((o, after)) => {
            let first = tasks::working(&o);
            stream::respond(a2a, o, first, after, version, id, hold)
        }
        Err(f) => error(&id, &f, version),
    }
}

/// `SubscribeToTask` / `tasks/resubscribe`: the task as it stands, then its
/// updates.
async fn subscribe(
    a2a: &Arc<A2a>,
    who: &Principal,
    params: &Value,
    version: Version,
    id: Value,
) -> Response<Body> {
    let Some(hold) = a2a.hold(who) else {
        return error(&id, &too_many(a2a), version);
    };
    let task = match read::<SubscribeToTaskRequest>(params).and_then(|p| task_id(p.id)) {
        Ok(t) => t,
        Err(f) => return error(&id, &f, version),
    };
    let o = match tasks::owned(a2a, who, &task).await {
        Ok(o) => o,
        Err(f) => return error(&id, &f, version),
    };
    match tasks::task_of(a2a, &o, true).await {
        Ok(first) => {
            let after = o.meta.last_seq;
            stream::respond(a2a, o, first, after, version, id, hold)
        }
        Err(f) => error(&id, &f, version),
    }
}

fn too_many(a2a: &A2a) -> Fault {
    Fault::internal(format!(
        "too many streams and waiting requests are open (at most {} for a token, `[mcp] \
         max_streams`, and {} in all); poll GetTask instead",
        a2a.max_streams,
        super::MAX_WAITS
    ))
}

/// `ListTasks`: `who`'s tasks, newest first (`pageSize`, at most 100; no
/// further pages or filters).
async fn list(a2a: &Arc<A2a>, who: &Principal, params: &Value) -> Result<Value, Fault> {
    let asked = read::<ListTasksRequest>(params)?;
    let size = asked
        .page_size
        .map_or(DEFAULT_PAGE, |n| (n.max(1) as usize).min(MAX_PAGE));
    let with_artifacts = asked.include_artifacts == Some(true);
    let mut tasks = tasks::list(a2a, who, size).await?;
    if !with_artifacts {
        for t in &mut tasks {
            t.artifacts.clear();
        }
    }
    let listed = ListTasksResponse {
        total_size: tasks.len() as i32,
        tasks,
        next_page_token: String::new(),
        page_size: size as i32,
    };
    serde_json::to_value(listed).map_err(|e| Fault::internal(e.to_string()))
}
