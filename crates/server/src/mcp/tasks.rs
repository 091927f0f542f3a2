//! Runs as MCP tasks (the `io.modelcontextprotocol/tasks` extension of the
//! 2026-07-28 revision), read from the session store.
//!
//! A run tool (`run`, `run_<name>`) called by a client that declared the
//! extension starts the run and answers at once with a task whose id is the
//! session id. Everything after that is derived from the store, so a task
//! survives the connection and the server: `tasks/get` maps the session's
//! status to the task's (and resumes an `interrupted` one nobody holds),
//! `tasks/update` answers its approval (or delivers its signal), `tasks/cancel`
//! cancels it. A run started as a task never asks the connection: its
//! approvals wait in the store (`waiting_approval`) for `tasks/update` or the
//! `approve` tool, from this server or another on the same store.
//!
//! A task belongs to the principal that created it ([`Principal::of`]),
//! recorded durably with the session; an unknown id and another principal's
//! id get the same `-32602`, so ids cannot be probed.

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, CancelTaskParams, CreateTaskResult, DetailedTask, ElicitRequest,
    ElicitRequestParams, ElicitationSchema, ErrorData, GetTaskParams, GetTaskResult, InputRequest,
    InputRequests, JsonObject, Task, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use super::McpServer;
use super::principal::Principal;
use crate::gateway::RunHooks;
use agentfile_session::SessionStatus;
use agentfile_wire::rpc::{ApproveParams, CancelParams, RunParams, SignalParams};

/// Whether the client of `ctx` declared the tasks extension (in its 2026
/// `_meta` capabilities, or at `initialize`).
pub fn wanted(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .is_some_and(|c| c.supports_tasks())
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown task `{id}`"), None)
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

/// Hooks of a run no call waits on: no sinks, no approver (approvals wait in
/// the store for `tasks/update` or `approve`).
fn detached() -> RunHooks {
    RunHooks::default()
}

/// Task `id` as a handle: `ttl_ms` its TTL (see [`super::task_timing`]),
/// the poll interval the server's.
fn task(
    server: &McpServer,
    id: &str,
    status: TaskStatus,
    (created, updated): (&str, &str),
    ttl_ms: Option<u64>,
) -> Task {
    let timing = super::task_timing::timing(server);
    let t = Task::new(id, status, created, updated).with_poll_interval_ms(timing.poll_interval_ms);
    match ttl_ms {
        Some(ttl) => t.with_ttl_ms(ttl),
        None => t,
    }
}

/// The run settings of session `id` (where [`TOOL_KEY`] and the task's
/// TTL are kept), if any.
async fn settings_of(server: &McpServer, id: &str) -> Option<Value> {
    let store = server.gateway.store().ok()?;
    let id = id.to_owned();
    tokio::task::spawn_blocking(move || store.run_settings(&id))
        .await
        .ok()?
        .ok()?
}

/// The key of the run settings naming the `run_<name>` tool that started a
/// task (unknown to the engine's `RunSettings`,
/// which ignores it).
const TOOL_KEY: &str = "mcp_tool";

/// Start `p` as a task owned by the caller's principal.
pub async fn start(
    server: &McpServer,
    p: RunParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, agentfile_wire::rpc::RpcError> {
    start_tool(server, p, ctx, None).await
}

/// [`start`] for a workflow's own `run_<name>` tool (`tool`): the task's
/// result is checked against that tool's output schema, as a blocking
/// call's is.
pub async fn start_tool(
    server: &McpServer,
    p: RunParams,
    ctx: &RequestContext<RoleServer>,
    tool: Option<&str>,
) -> Result<CallToolResponse, agentfile_wire::rpc::RpcError> {
    start_with(server, p, ctx, tool, None).await
}

/// [`start_tool`] for a client that asked for a TTL of `ttl_ms` (2025-11-25
/// `params.task.ttl`): the task gets it within the server's bound, kept with
/// the run's settings, and reports the TTL it got.
pub async fn start_with(
    server: &McpServer,
    mut p: RunParams,
    ctx: &RequestContext<RoleServer>,
    tool: Option<&str>,
    ttl_ms: Option<u64>,
) -> Result<CallToolResponse, agentfile_wire::rpc::RpcError> {
    p.wait = Some(false);
    let timing = super::task_timing::timing(server);
    let ttl = timing.ttl_for(ttl_ms);
    let gateway = &server.gateway;
    let store = gateway.store()?;
    let principal = Principal::of(ctx);
    let mut hooks = detached();
    // The session is its principal's from the moment it is recorded.
    hooks.owner = Some(principal.clone());
    {
        // The run's events wake whoever follows the task (`subscriptions/listen`).
        let hub = server.host.changes().clone();
        hooks.sinks.push(std::sync::Arc::new(
            move |e: &agentfile_wire::events::Event| hub.task_event(&e.session_id),
        ));
    }
    let live = gateway.submit(p, hooks).await?;
    let id = live.session_id().to_owned();
    let recorded = {
        let (store, id) = (store.clone(), id.clone());
        let tool = tool.map(str::to_owned);
        tokio::task::spawn_blocking(move || {
            store.set_task_owner(&id, principal.as_str())?;
            if tool.is_some() || ttl_ms.is_some() {
                // Kept with the run's settings: a resume elsewhere keeps them.
                let mut settings = match store.run_settings(&id)? {
                    Some(Value::Object(o)) => o,
                    _ => JsonObject::new(),
                };
                if let Some(tool) = tool {
                    settings.insert(TOOL_KEY.into(), Value::String(tool));
                }
                if let Some(ttl) = ttl.filter(|_| ttl_ms.is_some()) {
                    settings.insert(super::task_timing::TTL_KEY.into(), ttl.into());
                }
                store.set_run_settings(&id, &Value::Object(settings))?;
            }
            store.get(&id)
        })
        .await
    };
    let meta = match recorded {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => {
            let _ = gateway.cancel(CancelParams { session_id: id }).await;
            return Err(agentfile_wire::rpc::RpcError::internal(format!(
                "cannot record the task: {e}"
            )));
        }
        Err(e) => {
            return Err(agentfile_wire::rpc::RpcError::internal(format!(
                "cannot record the task: {e}"
            )));
        }
    };
    let t = task(
        server,
        &id,
        TaskStatus::Working,
        (&meta.created_at, &meta.updated_at),
        ttl,
    );
    Ok(CallToolResponse::Task(CreateTaskResult::new(t)))
}

/// Whether the caller may read or steer session `id` through the session
/// tools: the one owner rule of every door ([`crate::access`]): not another
/// principal's session, task or plain run (a session no principal owns is
/// the operator's, and anyone's who holds one of the operator's tokens and
/// knows its id).
pub async fn may_touch(server: &McpServer, id: &str, ctx: &RequestContext<RoleServer>) -> bool {
    if !agentfile_session::is_valid_id(id) {
        return true; // the tool itself says what is wrong with it
    }
    crate::access::Rule::OWNED
        .may(
            server.gateway.store().ok(),
            &Principal::of(ctx),
            id,
            crate::access::Action::Steer,
        )
        .await
}

/// The session of task `id` if it belongs to `principal`.
async fn owned(
    server: &McpServer,
    id: &str,
    principal: &Principal,
) -> Result<agentfile_session::SessionMeta, ErrorData> {
    if !agentfile_session::is_valid_id(id) {
        return Err(unknown(id));
    }
    let store = server.gateway.store().map_err(|e| internal(e.message))?;
    let id2 = id.to_owned();
    let found = tokio::task::spawn_blocking(move || {
        // A task: a session started as one (its task owner is also its
        // principal, which the owner rule reads); a plain run, owned or not,
        // is no task.
        let owner = match store.task_owner(&id2)? {
            Some(_) => crate::access::owner_of(&*store, &id2)?,
            None => None,
        };
        let settings = match owner {
            Some(_) => store.run_settings(&id2)?,
            None => None,
        };
        Ok::<_, agentfile_session::StoreError>((owner, store.get(&id2)?, settings))
    })
    .await
    .map_err(internal)?;
    let timing = super::task_timing::timing(server);
    match found {
        // A task is only ever its owner's (the owner rule, never shared);
        // past its TTL a finished task is unknown (its session stays).
        Ok((Some(owner), meta, settings))
            if crate::access::Rule::OWNED.allows(
                principal,
                Some(&owner),
                crate::access::Action::Steer,
            ) && !super::task_timing::expired(timing.ttl_of(settings.as_ref()), &meta) =>
        {
            Ok(meta)
        }
        Ok(_) | Err(agentfile_session::StoreError::NotFound(_)) => Err(unknown(id)),
        Err(agentfile_session::StoreError::InvalidId(_)) => Err(unknown(id)),
        Err(e) => Err(internal(e)),
    }
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

fn form(message: String, schema: Value) -> Result<InputRequest, ErrorData> {
    let requested_schema = ElicitationSchema::from_json_schema(object(schema)).map_err(internal)?;
    Ok(InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema,
        },
    )))
}

/// The approval form a waiting task asks for.
pub(crate) fn approval_form(id: &str) -> Result<InputRequest, ErrorData> {
    form(
        format!("agentfile: approve the supervised goal of session {id}?"),
        json!({
            "type": "object",
            "properties": {
                "approve": {"type": "boolean", "title": "Approve", "default": true,
                    "description": "Go ahead (unchecked: reject; the workflow decides what a rejection does)"},
                "note": {"type": "string", "title": "Note", "description": "Recorded with your decision (optional)"}
            },
            "required": ["approve"]
        }),
    )
}

/// The form a suspended task asks for: which event, and its payload as JSON.
pub(crate) fn signal_form(id: &str, events: &[String]) -> Result<InputRequest, ErrorData> {
    form(
        format!(
            "agentfile: session {id} is suspended, waiting for {}",
            events.join(", ")
        ),
        json!({
            "type": "object",
            "properties": {
                "event": {"type": "string", "title": "Event", "enum": events},
                "payload": {"type": "string", "title": "Payload", "description": "The event's payload as JSON (optional)"}
            },
            "required": ["event"]
        }),
    )
}

/// `tasks/get`.
pub async fn get(
    server: &McpServer,
    p: GetTaskParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<GetTaskResult, ErrorData> {
    if let Some(local) = server.host.tasks.get(&p.task_id, &Principal::of(ctx)) {
        return local.map(GetTaskResult::new);
    }
    let meta = owned(server, &p.task_id, &Principal::of(ctx)).await?;
    Ok(GetTaskResult::new(view(server, &meta, true).await?))
}

/// Where the task of session `meta` stands; `resume`: run an interrupted one
/// on here (unless someone holds it).
async fn view(
    server: &McpServer,
    meta: &agentfile_session::SessionMeta,
    resume: bool,
) -> Result<DetailedTask, ErrorData> {
    let gateway = &server.gateway;
    let id = meta.id.as_str();
    let settings = settings_of(server, id).await;
    let ttl = super::task_timing::timing(server).ttl_of(settings.as_ref());
    let t = |s| task(server, id, s, (&meta.created_at, &meta.updated_at), ttl);
    let payload = match meta.status {
        SessionStatus::Queued | SessionStatus::Running => TaskPayload::Working,
        SessionStatus::Interrupted => {
            // Its server died or stopped: run it on here, unless someone
            // (this server, or another with a live lease) holds it already.
            if resume {
                gateway.resume_task(id).await;
            }
            TaskPayload::Working
        }
        // Answered here, its `approval_resolved` not stored yet: going on.
        SessionStatus::WaitingApproval if gateway.approval_answered(id) => TaskPayload::Working,
        SessionStatus::WaitingApproval => {
            let store = gateway.store().map_err(|e| internal(e.message))?;
            let id2 = id.to_owned();
            let seq = tokio::task::spawn_blocking(move || store.pending_approval(&id2))
                .await
                .map_err(internal)?
                .map_err(internal)?;
            match seq {
                Some(seq) => {
                    let mut reqs = InputRequests::new();
                    reqs.insert(format!("approval-{seq}"), approval_form(id)?);
                    TaskPayload::InputRequired {
                        input_requests: reqs,
                    }
                }
                // Decided, the run not yet going again.
                None => TaskPayload::Working,
            }
        }
        SessionStatus::Suspended => {
            let result = gateway.stored_result(id).map_err(|e| internal(e.message))?;
            let events = result.map(|r| r.waiting_for).unwrap_or_default();
            let mut reqs = InputRequests::new();
            reqs.insert(
                format!("signal-{}", meta.last_seq),
                signal_form(id, &events)?,
            );
            TaskPayload::InputRequired {
                input_requests: reqs,
            }
        }
        SessionStatus::Cancelled => TaskPayload::Cancelled,
        SessionStatus::Completed | SessionStatus::Failed => {
            // Completed either way: a failed run is a tool result with
            // `isError: true`, as a blocking call returns it.
            match gateway.stored_result(id).map_err(|e| internal(e.message))? {
                Some(r) => {
                    let mut result = super::results::run_result(&r);
                    if let Some(tool) = started_by(server, settings.as_ref()).await {
                        super::results::check_outputs(&tool, &mut result);
                    }
                    TaskPayload::Completed {
                        result: object(serde_json::to_value(result).map_err(internal)?),
                    }
                }
                None => TaskPayload::Working,
            }
        }
    };
    Ok(DetailedTask::new(t(TaskStatus::Working), payload))
}

/// The `run_<name>` tool that started the task whose run settings are
/// `settings`, if it still exists.
async fn started_by(server: &McpServer, settings: Option<&Value>) -> Option<rmcp::model::Tool> {
    let name = settings?.get(TOOL_KEY)?.as_str()?.to_owned();
    let tools = server.catalog.tools().await;
    tools
        .iter()
        .find(|w| w.tool.name == name)
        .map(|w| w.tool.clone())
}

/// How long a follower waits for an event before it looks at the store
/// anyway (a decision or a status written without an event of this run:
/// another server, a resume here).
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The store's tasks as [`listen`](super::listen) follows them: only for a
/// client that subscribed (`subscriptions/listen` with `taskIds`), never
/// pushed unasked.
pub struct Feed {
    server: McpServer,
}

impl Feed {
    /// Tasks read through `server` (its gateway, catalog and timing; its
    /// client is never spoken to).
    pub fn new(server: McpServer) -> Feed {
        Feed { server }
    }
}

impl super::listen::TaskSource for Feed {
    fn followable<'a>(
        &'a self,
        who: &'a Principal,
        ids: Vec<String>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for id in ids {
                if owned(&self.server, &id, who).await.is_ok() {
                    out.push(id);
                }
            }
            out
        })
    }

    fn follow(&self, id: String, out: tokio::sync::mpsc::Sender<Value>) {
        tokio::spawn(follow(self.server.clone(), id, out));
    }
}

/// Send task `id`'s state on `out` now and each time its status changes,
/// until it ends or `out` closes. The run's events (through the hub, or the
/// store's watch for a run another replica holds) wake it; without them it
/// looks every [`WATCH_EVERY`].
async fn follow(server: McpServer, id: String, out: tokio::sync::mpsc::Sender<Value>) {
    let Ok(store) = server.gateway.store() else {
        return;
    };
    let mut events = server.host.changes().task_events();
    // A run another replica holds: the store says when its events commit
    // (PostgreSQL), taken before the first read so none is missed.
    let mut elsewhere = store.watch(&id);
    let mut last = None;
    loop {
        let meta = {
            let (store, id) = (store.clone(), id.clone());
            match tokio::task::spawn_blocking(move || store.get(&id)).await {
                Ok(Ok(m)) => m,
                _ => return,
            }
        };
        if let Ok(detailed) = view(&server, &meta, false).await {
            let status = detailed.status();
            if last != Some(status) {
                last = Some(status);
                let params = rmcp::model::TaskStatusNotificationParams::new(detailed);
                let Ok(params) = serde_json::to_value(params) else {
                    return;
                };
                if out.send(params).await.is_err() {
                    return;
                }
            }
            if matches!(
                status,
                TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
            ) {
                return;
            }
        }
        let until = tokio::time::sleep(WATCH_EVERY);
        tokio::pin!(until);
        loop {
            tokio::select! {
                _ = &mut until => break,
                _ = out.closed() => return,
                _ = changed(&mut elsewhere) => break,
                e = events.recv() => match e {
                    Ok(of) if *of == *id => break,
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    }
}

/// The store's next wake-up for a watched session; never without a watch.
async fn changed(watch: &mut Option<agentfile_session::Watch>) {
    match watch {
        Some(w) => w.changed().await,
        None => std::future::pending().await,
    }
}

/// `tasks/update`: answers to the task's input requests. Keys that are not
/// the pending request's are ignored.
pub async fn update(
    server: &McpServer,
    p: UpdateTaskParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    if let Some(local) =
        server
            .host
            .tasks
            .update(&p.task_id, &Principal::of(ctx), &p.input_responses)
    {
        return local;
    }
    let gateway = &server.gateway;
    let meta = owned(server, &p.task_id, &Principal::of(ctx)).await?;
    let id = meta.id.clone();
    for (key, answer) in &p.input_responses {
        let content = answer.get("content").cloned().unwrap_or(Value::Null);
        let accepted = answer.get("action").and_then(Value::as_str) == Some("accept");
        if key.starts_with("approval-") {
            if !accepted {
                // Dismissed: the task stays input_required.
                continue;
            }
            let approve = match content.get("approve") {
                Some(Value::Bool(b)) => *b,
                Some(Value::String(s)) => matches!(s.trim(), "true" | "yes" | "y"),
                _ => {
                    return Err(ErrorData::invalid_params(
                        format!("`{key}`: the answer has no `approve` decision"),
                        None,
                    ));
                }
            };
            let note = content
                .get("note")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .or_else(|| Some("answered in the MCP client".to_owned()));
            gateway
                .approve(
                    ApproveParams {
                        session_id: id.clone(),
                        approve,
                        note,
                    },
                    detached(),
                )
                .await
                .map_err(|e| ErrorData::invalid_params(e.message, None))?;
        } else if key.starts_with("signal-") {
            if !accepted {
                continue;
            }
            let Some(event) = content.get("event").and_then(Value::as_str) else {
                return Err(ErrorData::invalid_params(
                    format!("`{key}`: the answer names no `event`"),
                    None,
                ));
            };
            let payload = match content.get("payload") {
                Some(Value::String(s)) if !s.trim().is_empty() => {
                    serde_json::from_str(s).map_err(|e| {
                        ErrorData::invalid_params(
                            format!("`{key}`: the payload is not JSON: {e}"),
                            None,
                        )
                    })?
                }
                Some(Value::String(_)) | None => Value::Null,
                Some(other) => other.clone(),
            };
            gateway
                .signal(
                    SignalParams {
                        session_id: id.clone(),
                        event: event.to_owned(),
                        payload,
                    },
                    detached(),
                )
                .await
                .map_err(|e| ErrorData::invalid_params(e.message, None))?;
        }
    }
    Ok(())
}

/// `tasks/cancel`: acknowledged for a task that already ended too.
pub async fn cancel(
    server: &McpServer,
    p: CancelTaskParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    if let Some(local) = server.host.tasks.cancel(&p.task_id, &Principal::of(ctx)) {
        return local;
    }
    let meta = owned(server, &p.task_id, &Principal::of(ctx)).await?;
    let terminal = matches!(
        meta.status,
        SessionStatus::Completed | SessionStatus::Failed | SessionStatus::Cancelled
    );
    if !terminal {
        server
            .gateway
            .cancel(CancelParams {
                session_id: meta.id,
            })
            .await
            .map_err(|e| ErrorData::invalid_params(e.message, None))?;
    }
    Ok(())
}
