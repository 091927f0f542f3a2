//! Runs as tasks for 2025-11-25 clients: the core tasks of that revision
//! (`params.task` on `tools/call`, `tasks/get|result|list|cancel`), which
//! VS Code speaks.
//!
//! rmcp 3.9 models only the 2026-07-28 tasks extension: it drops
//! `params.task`, `Tool.execution` and `capabilities.tasks`, and gates
//! `tasks/get`/`tasks/cancel` on the extension. So this module works on the
//! raw JSON, before rmcp parses a message, on both transports:
//!
//! - [`inbound`]: an `initialize` whose `capabilities.tasks` is set is a v1
//!   client; the declaration is copied to `capabilities.experimental`
//!   ([`FLAG`]), which rmcp keeps, so every later request sees it
//!   ([`is_v1`]). For a v1 client only, `tools/call` of a run tool with
//!   `params.task`, `tools/list` and `tasks/*` are renamed into
//!   `agentfile/v1/…` custom methods, answered by [`handle`] with the v1
//!   wire shapes.
//! - [`advertise`]: the `initialize` reply to a v1 client gets
//!   `capabilities.tasks` (stdio: on the way out; HTTP: the reply's SSE or
//!   JSON body). Other clients never see it (the 2026 extension's path must
//!   not).
//!
//! What a task is (its id is the session id, its status read from the store,
//! owned by its principal, an interrupted one resumed on `tasks/get`) is
//! [`super::tasks`]'s, shared with the 2026 extension; this module only
//! renders it the v1 way (flat `Task` with `ttl`/`pollInterval`, `failed` as
//! a status) and adds what v1 has and the extension does not: `tasks/result`
//! (blocks until the task ends; at an approval or suspend it asks through
//! `elicitation/create` tagged with the task, or returns the waiting result
//! when the client cannot be asked), `tasks/list` and
//! `notifications/tasks/status` (best effort; polling is the contract).

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, CancelTaskParams, CustomNotification, CustomRequest, CustomResult,
    ElicitRequestParams, ElicitationAction, ErrorCode, ErrorData, GetTaskParams, GetTaskResult,
    InputRequest, InputResponses, ServerNotification, TaskPayload, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use serde_json::{Map, Value, json};

use super::McpServer;
use super::principal::Principal;
use super::task_timing::{expired, timing};
use agentfile_session::SessionStatus;
use agentfile_wire::rpc::RunParams;

/// Where a v1 client's `capabilities.tasks` is kept once rmcp has parsed
/// `initialize` (under `capabilities.experimental`).
pub const FLAG: &str = "agentfile/v1-tasks";
/// The prefix of the custom methods v1 requests are renamed to.
pub const PREFIX: &str = "agentfile/v1/";
/// The `_meta` key tying a message to a task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// Tasks per `tasks/list` page.
pub const PAGE: usize = 50;
/// Sessions looked at by `tasks/list` (newest first).
pub const LIST_SCAN: usize = 1_000;

/// The server capabilities a v1 client is told.
pub fn capabilities() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Whether the client of `ctx` declared v1 tasks at `initialize`.
pub fn is_v1(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .and_then(|c| c.experimental)
        .is_some_and(|e| e.contains_key(FLAG))
}

/// What [`inbound`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inbound {
    /// Passed as it was.
    Unchanged,
    /// Rewritten (re-serialize it).
    Rewritten,
    /// An `initialize` declaring v1 tasks (rewritten): its reply must
    /// [`advertise`], and the connection is a v1 client from now on.
    Initialize,
}

/// Whether `name` is a run tool (`run`, `run_<workflow>`).
fn is_run_tool(name: &str) -> bool {
    name == "run" || name.starts_with("run_")
}

/// Rewrite one raw inbound message (see the module doc). `v1`: the
/// connection's client declared v1 tasks at `initialize`.
pub fn inbound(msg: &mut Value, v1: bool) -> Inbound {
    let Some(obj) = msg.as_object_mut() else {
        return Inbound::Unchanged;
    };
    let Some(method) = obj.get("method").and_then(Value::as_str).map(str::to_owned) else {
        return Inbound::Unchanged;
    };
    if obj.get("id").is_none() {
        return Inbound::Unchanged;
    }
    if method == "initialize" {
        let Some(caps) = obj
            .get_mut("params")
            .and_then(|p| p.get_mut("capabilities"))
            .and_then(Value::as_object_mut)
        else {
            return Inbound::Unchanged;
        };
        let Some(tasks) = caps.get("tasks").filter(|t| !t.is_null()).cloned() else {
            return Inbound::Unchanged;
        };
        let tasks = if tasks.is_object() { tasks } else { json!({}) };
        let experimental = caps
            .entry("experimental")
            .or_insert_with(|| Value::Object(Map::new()));
        if !experimental.is_object() {
            *experimental = Value::Object(Map::new());
        }
        if let Some(e) = experimental.as_object_mut() {
            e.insert(FLAG.to_owned(), tasks);
        }
        return Inbound::Initialize;
    }
    if !v1 {
        return Inbound::Unchanged;
    }
    let renamed = match method.as_str() {
        "tools/call" => {
            let params = obj.get("params");
            let task = params
                .and_then(|p| p.get("task"))
                .is_some_and(Value::is_object);
            let run = params
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
                .is_some_and(is_run_tool);
            // Other tools run as before: no task, the call's result.
            task && run
        }
        "tools/list" | "tasks/get" | "tasks/cancel" | "tasks/result" | "tasks/list" => true,
        _ => false,
    };
    if !renamed {
        return Inbound::Unchanged;
    }
    obj.insert("method".into(), Value::String(format!("{PREFIX}{method}")));
    Inbound::Rewritten
}

/// [`inbound`] on raw bytes: the bytes to pass on (the same when nothing
/// changed or they are not one JSON message) and what was found.
pub fn inbound_bytes(bytes: &[u8], v1: bool) -> (Option<Vec<u8>>, Inbound) {
    // Most messages need no change: read only the envelope (the method, no
    // tree) and parse in full just an `initialize` or a v1 client's message.
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow, default)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    if !v1 {
        match serde_json::from_slice::<Envelope<'_>>(bytes) {
            Ok(Envelope { method: Some(m) }) if m == "initialize" => {}
            _ => return (None, Inbound::Unchanged),
        }
    }
    let Ok(mut v) = serde_json::from_slice::<Value>(bytes) else {
        return (None, Inbound::Unchanged);
    };
    match inbound(&mut v, v1) {
        Inbound::Unchanged => (None, Inbound::Unchanged),
        found => (serde_json::to_vec(&v).ok(), found),
    }
}

/// Add `capabilities.tasks` to an `initialize` reply (a JSON-RPC response).
pub fn advertise(reply: &mut Value) {
    if let Some(caps) = reply
        .get_mut("result")
        .and_then(|r| r.get_mut("capabilities"))
        .and_then(Value::as_object_mut)
    {
        caps.insert("tasks".into(), capabilities());
    }
}

/// [`advertise`] in an HTTP reply body: JSON, or an SSE stream whose `data:`
/// lines carry the reply. `None`: nothing to change.
pub fn advertise_body(body: &[u8]) -> Option<Vec<u8>> {
    if let Ok(mut v) = serde_json::from_slice::<Value>(body) {
        advertise(&mut v);
        return serde_json::to_vec(&v).ok();
    }
    let text = std::str::from_utf8(body).ok()?;
    let mut out = String::with_capacity(text.len() + 96);
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let (content, end) = match line.strip_suffix('\n') {
            Some(c) => (c, "\n"),
            None => (line, ""),
        };
        let (content, cr) = match content.strip_suffix('\r') {
            Some(c) => (c, "\r"),
            None => (content, ""),
        };
        if let Some(data) = content.strip_prefix("data:")
            && let Ok(mut v) = serde_json::from_str::<Value>(data.trim_start())
            && v.get("result").is_some()
        {
            advertise(&mut v);
            out.push_str("data: ");
            out.push_str(&v.to_string());
            changed = true;
        } else {
            out.push_str(content);
        }
        out.push_str(cr);
        out.push_str(end);
    }
    changed.then(|| out.into_bytes())
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

fn params_of(request: &CustomRequest) -> Value {
    request.params.clone().unwrap_or(Value::Null)
}

fn task_id(params: &Value) -> Result<String, ErrorData> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ErrorData::invalid_params("`taskId` is required", None))
}

/// Answer an `agentfile/v1/…` request (anything else: method not found, as
/// rmcp answers unknown methods).
pub async fn handle(
    server: &McpServer,
    request: CustomRequest,
    ctx: RequestContext<RoleServer>,
) -> Result<CustomResult, ErrorData> {
    let Some(verb) = request.method.strip_prefix(PREFIX).map(str::to_owned) else {
        return Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            request.method,
            None,
        ));
    };
    if !is_v1(&ctx) {
        // Renamed for v1 clients only; someone calling the name itself.
        return Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            request.method,
            None,
        ));
    }
    let params = params_of(&request);
    let value = match verb.as_str() {
        "tools/list" => list_tools(server, ctx).await?,
        "tools/call" => call(server, params, &ctx).await?,
        "tasks/get" => task_value(&get(server, &task_id(&params)?, &ctx).await?),
        "tasks/cancel" => cancel(server, &task_id(&params)?, &ctx).await?,
        "tasks/result" => result(server, &task_id(&params)?, &ctx).await?,
        "tasks/list" => list(server, &params, &ctx).await?,
        _ => {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
    };
    let mut value = value;
    if let Some(o) = value.as_object_mut() {
        // 2025-11-25 results have no `resultType`; rmcp strips it from the
        // results it sends, these are ours.
        o.remove("resultType");
    }
    Ok(CustomResult::new(value))
}

/// `tools/list` with `execution.taskSupport: "optional"` on the run tools.
async fn list_tools(
    server: &McpServer,
    ctx: RequestContext<RoleServer>,
) -> Result<Value, ErrorData> {
    use rmcp::ServerHandler as _;
    let list = server.list_tools(None, ctx).await?;
    let mut v = serde_json::to_value(list).map_err(internal)?;
    if let Some(tools) = v.get_mut("tools").and_then(Value::as_array_mut) {
        for t in tools {
            let run = t
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(is_run_tool);
            if run && let Some(o) = t.as_object_mut() {
                o.insert("execution".into(), json!({"taskSupport": "optional"}));
            }
        }
    }
    Ok(v)
}

/// `tools/call` of a run tool with `params.task`: start it as a task.
async fn call(
    server: &McpServer,
    params: Value,
    ctx: &RequestContext<RoleServer>,
) -> Result<Value, ErrorData> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let args = params.get("arguments").cloned().unwrap_or(json!({}));
    let p = if name == "run" {
        match serde_json::from_value::<RunParams>(args) {
            Ok(p) => p,
            Err(e) => return tool_error(format!("invalid arguments for `run`: {e}")),
        }
    } else {
        let tools = server.catalog.tools().await;
        let Some(w) = tools.iter().find(|w| w.tool.name == name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`; `tools/list` names them"),
                None,
            ));
        };
        let inputs = match args {
            Value::Object(o) => o.into_iter().collect(),
            _ => Default::default(),
        };
        RunParams {
            path: w.path.clone(),
            inputs,
            ..RunParams::default()
        }
    };
    if let Err(e) = server.gateway.check_run_paths(&p) {
        return tool_error(e.message);
    }
    // A workflow's own tool checks the result against its output schema.
    let tool = (name != "run").then_some(name.as_str());
    // The TTL the client asks for, honoured within the server's bound.
    let ttl = params
        .get("task")
        .and_then(|t| t.get("ttl"))
        .and_then(Value::as_u64);
    let created = match super::tasks::start_with(server, p, ctx, tool, ttl).await {
        Ok(rmcp::model::CallToolResponse::Task(t)) => t,
        Ok(rmcp::model::CallToolResponse::Complete(r)) => {
            return serde_json::to_value(r).map_err(internal);
        }
        Ok(_) => return Err(internal("the run did not start as a task")),
        Err(e) => return tool_error(e.message),
    };
    let id = created.task.task_id.clone();
    notify_status(server.clone(), id, ctx.clone());
    Ok(json!({"task": task_json(&created.task, "working", None)}))
}

fn tool_error(message: String) -> Result<Value, ErrorData> {
    let mut v = serde_json::to_value(CallToolResult::error(vec![
        rmcp::model::ContentBlock::text(message),
    ]))
    .map_err(internal)?;
    if let Some(o) = v.as_object_mut() {
        o.remove("resultType");
    }
    Ok(v)
}

/// The generation-neutral view of task `id` ([`super::tasks::get`]: owner
/// check, status from the store, resume of an interrupted run).
async fn get(
    server: &McpServer,
    id: &str,
    ctx: &RequestContext<RoleServer>,
) -> Result<GetTaskResult, ErrorData> {
    super::tasks::get(server, GetTaskParams::new(id), ctx).await
}

/// The run's result in a completed view, and whether the run failed.
fn completed(view: &GetTaskResult) -> Option<(&rmcp::model::JsonObject, bool)> {
    match &view.task.payload {
        TaskPayload::Completed { result } => {
            let failed = result
                .get("structuredContent")
                .and_then(|s| s.get("status"))
                .and_then(Value::as_str)
                == Some(SessionStatus::Failed.as_str())
                || (result.get("isError") == Some(&Value::Bool(true))
                    && result.get("structuredContent").is_none());
            Some((result, failed))
        }
        _ => None,
    }
}

/// The v1 wire status of a view.
fn status(view: &GetTaskResult) -> &'static str {
    match &view.task.payload {
        TaskPayload::Working => "working",
        TaskPayload::InputRequired { .. } => "input_required",
        TaskPayload::Completed { .. } => {
            if completed(view).is_some_and(|(_, failed)| failed) {
                "failed"
            } else {
                "completed"
            }
        }
        TaskPayload::Failed { .. } => "failed",
        TaskPayload::Cancelled => "cancelled",
        _ => "working",
    }
}

/// A view as the v1 `Task`.
fn task_value(view: &GetTaskResult) -> Value {
    let t = &view.task.task;
    let status = status(view);
    let message = t.status_message.clone().or_else(|| match status {
        "input_required" => Some(
            "waiting for a human: call tasks/result to be asked, or the `approve`/`signal` tool"
                .to_owned(),
        ),
        "failed" => completed(view).and_then(|(r, _)| {
            r.get("structuredContent")?
                .get("error")?
                .as_str()
                .map(str::to_owned)
        }),
        _ => None,
    });
    task_json(t, status, message)
}

/// The v1 `Task` wire shape.
fn task_json(t: &rmcp::model::Task, status: &str, message: Option<String>) -> Value {
    let mut o = Map::new();
    o.insert("taskId".into(), json!(t.task_id));
    o.insert("status".into(), json!(status));
    if let Some(m) = message {
        o.insert("statusMessage".into(), json!(m));
    }
    o.insert("createdAt".into(), json!(t.created_at));
    o.insert("lastUpdatedAt".into(), json!(t.last_updated_at));
    o.insert("ttl".into(), json!(t.ttl_ms));
    if let Some(p) = t.poll_interval_ms {
        o.insert("pollInterval".into(), json!(p));
    }
    Value::Object(o)
}

fn terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// `tasks/cancel`: the task, cancelled (or as it ended before).
async fn cancel(
    server: &McpServer,
    id: &str,
    ctx: &RequestContext<RoleServer>,
) -> Result<Value, ErrorData> {
    super::tasks::cancel(server, CancelTaskParams::new(id), ctx).await?;
    let mut view = get(server, id, ctx).await?;
    // Cancellation is cooperative: give it a moment to be recorded.
    for _ in 0..20 {
        if terminal(status(&view)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        view = get(server, id, ctx).await?;
    }
    Ok(task_value(&view))
}

/// The `_meta` tying a result or request to task `id`.
fn related(id: &str) -> Value {
    json!({ RELATED_TASK: {"taskId": id} })
}

/// `tasks/result`: the tool's result once the task ends; while it waits for
/// a human, ask through elicitation when the client can, else the waiting
/// result at once.
async fn result(
    server: &McpServer,
    id: &str,
    ctx: &RequestContext<RoleServer>,
) -> Result<Value, ErrorData> {
    let can_elicit = ctx
        .client_capabilities()
        .is_some_and(|c| c.elicitation.is_some());
    let mut delay = Duration::from_millis(200);
    let mut answered = std::collections::HashSet::new();
    loop {
        let view = get(server, id, ctx).await?;
        let mut out = match &view.task.payload {
            TaskPayload::Completed { result } => Value::Object(result.clone()),
            TaskPayload::Cancelled => match server
                .gateway
                .stored_result(id)
                .map_err(|e| internal(e.message))?
            {
                Some(r) => {
                    serde_json::to_value(super::results::run_result(&r)).map_err(internal)?
                }
                None => serde_json::to_value(CallToolResult::error(vec![
                    rmcp::model::ContentBlock::text(format!("The task {id} was cancelled.")),
                ]))
                .map_err(internal)?,
            },
            TaskPayload::Failed { error } => {
                return Err(ErrorData::internal_error(
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("the task failed")
                        .to_owned(),
                    Some(Value::Object(error.clone())),
                ));
            }
            // Answered already (here, or with the `approve` tool), the run
            // not yet past it: wait as for working.
            TaskPayload::InputRequired { input_requests }
                if !input_requests.keys().all(|k| answered.contains(k))
                    && !server.gateway.approval_answered(id) =>
            {
                let asked = if can_elicit {
                    ask(server, id, input_requests, ctx).await?
                } else {
                    false
                };
                if asked {
                    answered.extend(input_requests.keys().cloned());
                    delay = Duration::from_millis(100);
                    continue;
                }
                waiting(server, id).await?
            }
            _ => {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = ctx.ct.cancelled() => {
                        return Err(ErrorData::internal_error("cancelled", None));
                    }
                }
                delay = (delay * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        if let Some(o) = out.as_object_mut() {
            // A 2025-11-25 result has no `resultType` (rmcp strips it from
            // the results it sends; this one is ours).
            o.remove("resultType");
            let meta = o.entry("_meta").or_insert_with(|| json!({}));
            if let (Some(m), Value::Object(r)) = (meta.as_object_mut(), related(id)) {
                m.extend(r);
            }
        }
        return Ok(out);
    }
}

/// Ask the client each pending request of task `id` (`elicitation/create`
/// tagged with the task) and pass the answers on. `false`: not answered
/// (declined, dismissed, or the client failed).
async fn ask(
    server: &McpServer,
    id: &str,
    requests: &rmcp::model::InputRequests,
    ctx: &RequestContext<RoleServer>,
) -> Result<bool, ErrorData> {
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let InputRequest::Elicitation(e) = request else {
            continue;
        };
        let mut params = serde_json::to_value(&e.params).map_err(internal)?;
        if let Some(o) = params.as_object_mut() {
            o.insert("_meta".into(), related(id));
        }
        let params: ElicitRequestParams = serde_json::from_value(params).map_err(internal)?;
        let answer = tokio::select! {
            a = ctx.peer.create_elicitation(params) => a,
            _ = ctx.ct.cancelled() => return Err(ErrorData::internal_error("cancelled", None)),
        };
        match answer {
            Ok(a) if a.action == ElicitationAction::Accept => {
                responses.insert(
                    key.clone(),
                    json!({"action": "accept", "content": a.content.unwrap_or(json!({}))}),
                );
            }
            Ok(_) => return Ok(false),
            Err(e) => {
                tracing::debug!(error = %e, "elicitation for a task failed");
                return Ok(false);
            }
        }
    }
    if responses.is_empty() {
        return Ok(false);
    }
    super::tasks::update(server, UpdateTaskParams::new(id, responses), ctx).await?;
    Ok(true)
}

/// The result of a task that waits for a human the client cannot be asked
/// for: what a blocking call returns then.
async fn waiting(server: &McpServer, id: &str) -> Result<Value, ErrorData> {
    if let Some(r) = server
        .gateway
        .stored_result(id)
        .map_err(|e| internal(e.message))?
        && r.status == SessionStatus::Suspended.as_str()
    {
        return serde_json::to_value(super::results::run_result(&r)).map_err(internal);
    }
    let mut r = CallToolResult::success(vec![rmcp::model::ContentBlock::text(format!(
        "Task {id} is waiting for a human to approve a supervised goal, and this client cannot be asked. \
             Ask the user whether to go ahead, then call `approve` {{\"session_id\": \"{id}\", \"approve\": true or false}}, \
             and `tasks/get` or `tasks/result` until it ends."
    ))]);
    r.structured_content = Some(json!({
        "session_id": id,
        "status": SessionStatus::WaitingApproval.as_str(),
        "resume_with": "approve",
    }));
    serde_json::to_value(r).map_err(internal)
}

/// The v1 status of a session, for `tasks/list` (which reads the rows only:
/// it resumes nothing and asks nothing; `tasks/get` says more).
fn list_status(s: SessionStatus) -> &'static str {
    match s {
        SessionStatus::Queued | SessionStatus::Running | SessionStatus::Interrupted => "working",
        SessionStatus::WaitingApproval | SessionStatus::Suspended => "input_required",
        SessionStatus::Completed => "completed",
        SessionStatus::Failed => "failed",
        SessionStatus::Cancelled => "cancelled",
    }
}

/// `tasks/list`: the caller's tasks, newest first, [`PAGE`] at a time (the
/// cursor is an offset).
async fn list(
    server: &McpServer,
    params: &Value,
    ctx: &RequestContext<RoleServer>,
) -> Result<Value, ErrorData> {
    let offset = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(c) => c
            .as_str()
            .and_then(|c| c.parse::<usize>().ok())
            .ok_or_else(|| ErrorData::invalid_params("invalid cursor", None))?,
    };
    let store = server.gateway.store().map_err(|e| internal(e.message))?;
    let principal = Principal::of(ctx);
    let timing = timing(server);
    let mine = tokio::task::spawn_blocking(move || {
        let rows = store.list(None, LIST_SCAN)?;
        let mut out = Vec::new();
        for m in rows {
            // Tasks only: a plain run the principal owns is no task.
            if store.task_owner(&m.id)?.is_some()
                && crate::access::owner_of(&*store, &m.id)?.as_deref() == Some(principal.as_str())
            {
                // Each task's own TTL (one its client asked for, or the server's).
                let ttl = timing.ttl_of(store.run_settings(&m.id)?.as_ref());
                out.push((m, ttl));
            }
        }
        Ok::<_, agentfile_session::StoreError>(out)
    })
    .await
    .map_err(internal)?
    .map_err(internal)?;
    let mine: Vec<_> = mine
        .into_iter()
        .filter(|(m, ttl)| !expired(*ttl, m))
        .collect();
    let page: Vec<Value> = mine
        .iter()
        .skip(offset)
        .take(PAGE)
        .map(|(m, ttl)| {
            json!({
                "taskId": m.id,
                "status": list_status(m.status),
                "createdAt": m.created_at,
                "lastUpdatedAt": m.updated_at,
                "ttl": ttl,
                "pollInterval": timing.poll_interval_ms,
            })
        })
        .collect();
    let mut out = json!({ "tasks": page });
    if mine.len() > offset + PAGE {
        out["nextCursor"] = json!((offset + PAGE).to_string());
    }
    Ok(out)
}

/// Tell the client of `ctx` each status change of task `id`
/// (`notifications/tasks/status`) until it ends or the client goes. Best
/// effort: polling `tasks/get` is the contract.
fn notify_status(server: McpServer, id: String, ctx: RequestContext<RoleServer>) {
    tokio::spawn(async move {
        let mut last = String::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(24 * 3600);
        while tokio::time::Instant::now() < deadline && !ctx.peer.is_transport_closed() {
            let Ok(view) = get(&server, &id, &ctx).await else {
                return;
            };
            let now = status(&view);
            if now != last {
                last = now.to_owned();
                let n =
                    CustomNotification::new("notifications/tasks/status", Some(task_value(&view)));
                if ctx
                    .peer
                    .send_notification(ServerNotification::CustomNotification(n))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            if terminal(now) {
                return;
            }
            let poll = timing(&server).poll_interval_ms;
            tokio::time::sleep(Duration::from_millis((poll / 2).clamp(50, 500))).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_with_tasks_is_marked_and_others_pass() {
        let mut m = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"tasks": {"list": {}}},
            "clientInfo": {"name": "c", "version": "1"}}});
        assert_eq!(inbound(&mut m, false), Inbound::Initialize);
        assert_eq!(
            m["params"]["capabilities"]["experimental"][FLAG],
            json!({"list": {}})
        );
        let mut plain = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}});
        assert_eq!(inbound(&mut plain, false), Inbound::Unchanged);
    }

    #[test]
    fn only_v1_clients_get_renamed_methods() {
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run_x", "arguments": {}, "task": {"ttl": 60000}}});
        let mut m = call.clone();
        assert_eq!(inbound(&mut m, false), Inbound::Unchanged);
        assert_eq!(inbound(&mut m, true), Inbound::Rewritten);
        assert_eq!(m["method"], "agentfile/v1/tools/call");
        let mut other = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "list", "task": {}}});
        assert_eq!(inbound(&mut other, true), Inbound::Unchanged);
        let mut get =
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "x"}});
        assert_eq!(inbound(&mut get, true), Inbound::Rewritten);
        assert_eq!(get["method"], "agentfile/v1/tasks/get");
        let mut note = json!({"jsonrpc": "2.0", "method": "tasks/get"});
        assert_eq!(inbound(&mut note, true), Inbound::Unchanged);
    }

    #[test]
    fn the_initialize_reply_is_advertised_in_json_and_sse() {
        let reply = json!({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {"tools": {}}}});
        let json_body = advertise_body(reply.to_string().as_bytes()).unwrap();
        let v: Value = serde_json::from_slice(&json_body).unwrap();
        assert_eq!(v["result"]["capabilities"]["tasks"], capabilities());
        let sse = format!("id: 0\ndata: {reply}\n\n");
        let out = String::from_utf8(advertise_body(sse.as_bytes()).unwrap()).unwrap();
        assert!(out.starts_with("id: 0\ndata: {"), "{out}");
        assert!(out.ends_with("\n\n"));
        let data = out.lines().nth(1).unwrap().strip_prefix("data: ").unwrap();
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["result"]["capabilities"]["tasks"], capabilities());
        assert_eq!(advertise_body(b": keep-alive\n\n"), None);
    }
}
