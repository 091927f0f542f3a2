//! The MCP tools: `run`, `event`, `cancel`, `approve`, `validate`, `inspect`,
//! `list`, the daemon's `triggers`, `trigger_history`, `fire`, `emit` (plus
//! the `run_<name>` workflow tools of [`super::workflows`]).
//!
//! Input schemas come from the parameter types of [`agentfile_wire::rpc`] (the
//! same ones `agentfile serve` decodes), output schemas from the result types.
//! Every result is readable text for the model plus, where the result is an
//! object, `structuredContent`. A request the model can fix — bad arguments,
//! an invalid workflow, a missing key, a failed run — is a tool result with
//! `isError: true` and a message saying what to do; only an unknown tool or a
//! malformed request is a protocol error.

use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use super::McpServer;
use super::approval::{McpApprover, Phase};
use super::progress;
use super::results::{
    check_outputs, input_schema, output_schema, run_output_schema, run_result, structured,
    text_result, value_text,
};
use super::sampling;
use crate::gateway::RunHooks;
use crate::printer::Progress;
use agentfile_session::SessionStatus;
use agentfile_wire::diagnostics::ValidateReport;
use agentfile_wire::events::{EventBody, RunResult};
use agentfile_wire::rpc::{
    ApproveParams, CancelParams, CreateParams, EmitParams, EmitResult, EventPage, EventParams,
    FireHistory, FireParams, FireReport, ForkParams, InspectParams, ListParams, PromoteParams,
    ReplayParams, RpcError, RunParams, RunStatus, SignalParams, TriggerHistoryParams, TriggerList,
    TriggersParams, ValidateParams, params,
};
use agentfile_wire::workflows::WorkflowList;

/// How long the last progress notifications may take to go out before a result.
const FLUSH: Duration = Duration::from_secs(2);

fn annotations(
    title: &str,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(open_world)
}

const RUN: &str = "Run an agentfile workflow and return its outputs. A workflow is an Agentfile or `*.agent` file (also `workflows/<name>/workflow.yaml`, `.workflows/<id>/WORKFLOW.md`); call `list` first to see the workspace's workflows and their inputs (each also has its own `run_<name>` tool). \
Pass `path` (relative to the workspace) and `inputs` (an object keyed by the workflow's INPUT names; inputs with a default may be left out). \
By default the call waits for the run to end and returns each goal's output with the session_id, status and usage, reporting progress meanwhile. \
For a long run pass `wait: false`: you get the session_id at once; then call `event` with it to follow the run until `done`. \
If a supervised goal needs a human decision the client cannot ask for, the call returns status `waiting_approval`: ask the user, then call `approve`. \
To continue an interrupted, failed or approved session pass `resume` with its session_id instead of `path`. \
`provider`/`model` override the configured model; `max_turns`, `max_tokens`, `max_cost_usd` and `timeout` (e.g. `10m`) cap the run.";

const EVENT: &str = "Read the events of a run (started by `run`, or any stored session): steps, goals, model calls, tool calls and results, approvals, and the end. \
Pass `session_id`, `after_seq` = the `seq` of the last event you have (0 at first) and `wait_ms` (up to 60000; 20000 is a good value) to wait for new ones. \
Call again with the new `after_seq` until `done` is true; the last event is `run_complete` (with every goal's output), `run_failed` (with the error) or `run_cancelled`.";

const CANCEL: &str = "Stop a running workflow by its session_id (from `run`). The run ends with status `cancelled`; outputs of goals that finished stay in its events, and `run` with `resume` can continue it later. Use it when the user asks to stop or a run is stuck.";

const APPROVE: &str = "Record a human's decision on a supervised goal a run waits at (status `waiting_approval`). Ask the user first: this stands for their decision. \
`approve: true` lets the goal run, `false` rejects it (the run then fails); `note` is recorded with it. Afterwards follow the run with `event` until `done`.";

const SIGNAL: &str = "Deliver an event to a suspended run (status `suspended`, waiting at a suspend step for named events), which then resumes. \
`event` must be one the run waits for (the error lists them); `payload` is any JSON the step receives. Afterwards follow the run with `event` until `done`.";

const FORK: &str = "Start a new session from a stored one and run it live from one node: every node that completed before `at` is taken from the stored session's journal (no model call, no tool run), `at` and everything after it run again. \
Use it to retry a failed run from the step that went wrong after fixing the workflow (`workflow`: the edited file), or to see what a step would do with other `inputs` or another `model`. \
`at` is a node path as events name it (`main/report`; `flow/each[3]/triage` for a step of a map's fourth item); a fork whose workflow changed before `at` is refused with the change named. The stored session is left as it is. \
Waits for the new run like `run` (or pass `wait: false` and follow it with `event`).";

const REPLAY: &str = "Run a stored session again, in a new session, from its own journal: every model answer and tool result as recorded, so no model is asked and no tool runs. \
Pass `workflow` (an edited copy of the session's workflow) to see whether a change still gives the same run: the replay stops with `replay-diverged`, naming the node and the part of the request, where a request first differs. The stored session is left as it is.";

const VALIDATE: &str = "Check workflow files without running them, like a compiler: every problem with file:line:col, a message and a hint. \
Pass `path` (or `paths`) relative to the workspace, or `source` with the text of an Agentfile you are writing (with `path` set to where it will be saved, so its FROM files resolve). \
The result says `ok` and lists the diagnostics; fix them and validate again until `ok` is true.";

const INSPECT: &str = "Show a workflow's plan without running it: its inputs, agents, goals and steps in execution order. `format`: `json` (default) for the plan object, `text` for a readable outline, `mermaid` for a flowchart. The workflow must be valid (`validate` explains what is not).";

const LIST: &str = "List the workflows under the workspace (or `dir`): name, path, format, inputs (required, or with a default) and whether each is valid. Start here to find what can be run.";

/// The tools every server has, built once per process on first use: their
/// schemas are a third of what `agentfile mcp` did before it could answer
/// `initialize` (10 of 16 million instructions).
pub fn fixed_shared() -> Arc<Vec<Tool>> {
    static FIXED: OnceLock<Arc<Vec<Tool>>> = OnceLock::new();
    FIXED.get_or_init(|| Arc::new(fixed())).clone()
}

/// Build [`fixed_shared`]'s tools now on a thread of their own, beside the
/// server's start and the client's `initialize`, so that the first
/// `tools/list` finds them ready.
pub fn prepare_fixed() {
    let _ = std::thread::Builder::new()
        .name("agentfile-tools".into())
        .spawn(|| drop(fixed_shared()));
}

/// The tools every server has.
pub fn fixed() -> Vec<Tool> {
    vec![
        Tool::new("run", RUN, input_schema::<RunParams>())
            .with_title("Run a workflow")
            .with_meta(super::app::tool_meta())
            .with_raw_output_schema(run_output_schema())
            .with_annotations(annotations("Run a workflow", false, true, false, true)),
        Tool::new("event", EVENT, input_schema::<EventParams>())
            .with_title("Read a run's events")
            .with_raw_output_schema(output_schema::<EventPage>())
            .with_annotations(annotations("Read a run's events", true, false, true, false)),
        Tool::new("cancel", CANCEL, input_schema::<CancelParams>())
            .with_title("Cancel a run")
            .with_raw_output_schema(output_schema::<RunStatus>())
            .with_annotations(annotations("Cancel a run", false, false, true, false)),
        Tool::new("signal", SIGNAL, input_schema::<SignalParams>())
            .with_title("Resume a suspended run with an event")
            .with_raw_output_schema(output_schema::<RunStatus>())
            .with_annotations(annotations(
                "Signal a suspended run",
                false,
                false,
                false,
                false,
            )),
        Tool::new("fork", FORK, input_schema::<ForkParams>())
            .with_title("Fork a session from a node")
            .with_raw_output_schema(run_output_schema())
            .with_annotations(annotations(
                "Fork a session from a node",
                false,
                false,
                false,
                true,
            )),
        Tool::new("replay", REPLAY, input_schema::<ReplayParams>())
            .with_title("Replay a session")
            .with_raw_output_schema(run_output_schema())
            .with_annotations(annotations("Replay a session", false, false, false, false)),
        Tool::new("approve", APPROVE, input_schema::<ApproveParams>())
            .with_title("Approve or reject a supervised goal")
            .with_raw_output_schema(output_schema::<RunStatus>())
            .with_annotations(annotations(
                "Approve or reject a goal",
                false,
                false,
                false,
                false,
            )),
        Tool::new("validate", VALIDATE, input_schema::<ValidateParams>())
            .with_title("Validate workflows")
            .with_raw_output_schema(output_schema::<ValidateReport>())
            .with_annotations(annotations("Validate workflows", true, false, true, false)),
        Tool::new("inspect", INSPECT, input_schema::<InspectParams>())
            .with_title("Show a workflow's plan")
            .with_annotations(annotations(
                "Show a workflow's plan",
                true,
                false,
                true,
                false,
            )),
        Tool::new("list", LIST, input_schema::<ListParams>())
            .with_title("List workflows")
            .with_raw_output_schema(output_schema::<WorkflowList>())
            .with_annotations(annotations("List workflows", true, false, true, false)),
        Tool::new("create", CREATE, input_schema::<CreateParams>())
            .with_title("Generate a workflow")
            .with_annotations(annotations(
                "Generate a workflow",
                false,
                false,
                false,
                true,
            )),
        Tool::new("promote", PROMOTE, input_schema::<PromoteParams>())
            .with_title("Promote a generated workflow")
            .with_annotations(annotations(
                "Promote a generated workflow",
                false,
                false,
                false,
                false,
            )),
        Tool::new("triggers", TRIGGERS, input_schema::<TriggersParams>())
            .with_title("List triggers")
            .with_raw_output_schema(output_schema::<TriggerList>())
            .with_annotations(annotations("List triggers", true, false, true, false)),
        Tool::new(
            "trigger_history",
            TRIGGER_HISTORY,
            input_schema::<TriggerHistoryParams>(),
        )
        .with_title("Show what triggers fired")
        .with_raw_output_schema(output_schema::<FireHistory>())
        .with_annotations(annotations("Trigger history", true, false, true, false)),
        Tool::new("fire", FIRE, input_schema::<FireParams>())
            .with_title("Fire a trigger now")
            .with_raw_output_schema(output_schema::<FireReport>())
            .with_annotations(annotations("Fire a trigger", false, true, false, true)),
        Tool::new("emit", EMIT, input_schema::<EmitParams>())
            .with_title("Emit an event")
            .with_raw_output_schema(output_schema::<EmitResult>())
            .with_annotations(annotations("Emit an event", false, true, true, true)),
    ]
}

const TRIGGERS: &str = "List the triggers of the workflows in the workspace (what `agentfile daemon` fires): each trigger's id (`<workflow>#<index>`, e.g. `nightly#0`), workflow, kind (schedule, webhook, event, …), state (`active`, or `refused` with the reason), a schedule's next fire time in its time zone, and its daily quota use. Use the id with `fire` and `trigger_history`.";

const TRIGGER_HISTORY: &str = "Show what the triggers fired, newest first: when, what fired it (schedule, webhook, event, manual), the outcome (`fired`, or `skipped`/`refused` with the reason: overlap, quota, …) and the session_id of the run it started (read it with `event`). `trigger` narrows it to one trigger id; `limit` caps the count (default 50).";

const FIRE: &str = "Fire a trigger now, by hand, as if its schedule, webhook or event had come: `trigger` is an id from `triggers` (e.g. `nightly#0`). The trigger's overlap and daily quota still apply. Returns at once with the outcome and, when it ran, the session_id: follow the run with `event` (wait_ms 20000) until done. Ask the user first: this starts the workflow.";

const EMIT: &str = "Emit a named event: every workflow with a trigger `kind: event, name: <name>` runs once, with `payload` (a JSON object) as its inputs. `id` makes it idempotent: emitting the same id again fires nothing (`fired` is empty and `already_fired` names the earlier runs). An event no workflow subscribes to is an error. Each started run's session_id can be followed with `event`.";

const CREATE: &str = "Generate a new workflow (Agentfile spec workflow.yaml with its agents, skills and scripts) from a description, with the built-in generator workflow run by this server's model. Everything is written to `artifacts/<name>/<run-id>/` with a manifest.json, and the generated workflow is validated. When it is valid, show the user the review (07-review.md) and offer `promote`.";

const PROMOTE: &str = "Promote a validated generation run (`run`: `artifacts/<name>/<run-id>`, as `create` returned) to `workflows/<name>/`, with workflow_status.json, and archive the run to `outputs/<name>/<run-id>/build/`. Refuses when the run is not validated or the workflow exists.";

async fn create(
    server: &McpServer,
    p: CreateParams,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    use agentfile_author::create as c;
    let root = server.gateway.root().to_path_buf();
    let begun = match c::begin(&root, &p.description, p.name.as_deref()) {
        Ok(b) => b,
        Err(e) => return text_result(e.to_string(), None, true),
    };
    let run = RunParams {
        path: begun.workflow.display().to_string(),
        inputs: begun
            .inputs()
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect(),
        provider: p.provider,
        model: p.model,
        ..RunParams::default()
    };
    let sink: Arc<dyn agentfile_session::events::EventSink> = begun.sink.clone();
    let (answer, result) = run_with(server, run, ctx, vec![sink]).await;
    let Some(result) = result else {
        return answer;
    };
    let created = c::finish(&begun, &root, &result.status, result.error.as_deref());
    let rel = &created.artifacts;
    let text = if result.status != "completed" {
        format!(
            "The generator run {} ({}); its files are in {rel}.",
            result.status,
            result.error.as_deref().unwrap_or("no reason given")
        )
    } else if created.valid {
        format!(
            "Generated and validated {rel}. Read {rel}/07-review.md with the user; to install it as workflows/{}/, call `promote` {{\"run\": \"{rel}\"}}.",
            created.name
        )
    } else {
        format!(
            "Generated {rel}, but the workflow is invalid:\n{}",
            created.diagnostics.join("\n")
        )
    };
    let mut v = serde_json::to_value(&created).unwrap_or_default();
    v["run"] = serde_json::to_value(&result).unwrap_or_default();
    text_result(
        text,
        Some(v),
        result.status != "completed" || !created.valid,
    )
}

/// A problem the model can fix, as a tool error.
/// Hooks for a session a call resumes in this server (a decision or signal
/// for one left waiting by an earlier process): its log lines reach this
/// client while the returned forwarder lives.
fn resume_hooks(server: &McpServer) -> (RunHooks, progress::Forwarder) {
    let (sink, forwarder) = progress::start(
        &server.client,
        server.client.peer(),
        None,
        progress::LogFloor::Session,
    );
    let hooks = RunHooks {
        sinks: vec![sink],
        approver: None,
        owner: None,
    };
    (hooks, forwarder)
}

/// The answer to `approve` or `signal`: what happened and how to follow.
fn resumed(outcome: Result<RunStatus, RpcError>, what: &str) -> CallToolResult {
    match outcome {
        Ok(s) => text_result(
            format!(
                "{what}; session {} is {}. Follow it with `event` (session_id \"{}\", wait_ms 20000) until done.",
                s.session_id,
                s.status.as_str(),
                s.session_id
            ),
            structured(&s),
            false,
        ),
        Err(e) => tool_error(&e),
    }
}

fn tool_error(e: &RpcError) -> CallToolResult {
    text_result(e.message.clone(), None, true)
}

/// Answer one `tools/call`.
pub async fn call(
    server: &McpServer,
    request: CallToolRequestParams,
    ctx: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.as_ref();
    if let Some(state) = &request.request_state
        && super::mrtr::wanted(&ctx)
    {
        // The retry of a call that returned an input-required result.
        return super::mrtr::retry(server, state, request.input_responses.as_ref(), &ctx).await;
    }
    let args = request.arguments.map(Value::Object);
    // A session that is another principal's task is not this caller's to
    // read, steer or resume: it reads as unknown, as in `tasks/get`.
    if let Some(id) = session_named(name, args.as_ref())
        && !super::tasks::may_touch(server, &id, &ctx).await
    {
        return Ok(
            tool_error(&agentfile_wire::rpc::RpcError::invalid_params(format!(
                "unknown session `{id}`"
            )))
            .into(),
        );
    }
    let result = match name {
        "run" => match params::<RunParams>("run", args) {
            Ok(p) if super::tasks::wanted(&ctx) => {
                if let Err(e) = server.gateway.check_run_paths(&p) {
                    return Ok(tool_error(&e).into());
                }
                return Ok(super::tasks::start(server, p, &ctx)
                    .await
                    .unwrap_or_else(|e| tool_error(&e).into()));
            }
            Ok(p) => return Ok(input_required(server, run(server, p, &ctx).await, &ctx).await),
            Err(e) => tool_error(&e),
        },
        "event" => match params::<EventParams>("event", args) {
            Ok(p) => event(server, p, &ctx).await,
            Err(e) => tool_error(&e),
        },
        "cancel" => match params::<CancelParams>("cancel", args) {
            Ok(p) => cancel(server, p).await,
            Err(e) => tool_error(&e),
        },
        "approve" => match params::<ApproveParams>("approve", args) {
            Ok(p) => {
                let verdict = if p.approve { "approved" } else { "rejected" };
                let (hooks, _forwarder) = resume_hooks(server);
                resumed(
                    server.gateway.approve(p, hooks).await,
                    &format!("Goal {verdict}"),
                )
            }
            Err(e) => tool_error(&e),
        },
        "signal" => match params::<SignalParams>("signal", args) {
            Ok(p) => {
                let what = format!("Signal `{}` delivered", p.event);
                let (hooks, _forwarder) = resume_hooks(server);
                resumed(server.gateway.signal(p, hooks).await, &what)
            }
            Err(e) => tool_error(&e),
        },
        "fork" => match params::<ForkParams>("fork", args) {
            Ok(p) => fork(server, p, &ctx).await,
            Err(e) => tool_error(&e),
        },
        "replay" => match params::<ReplayParams>("replay", args) {
            Ok(p) => replay(server, p, &ctx).await,
            Err(e) => tool_error(&e),
        },
        "validate" => match params::<ValidateParams>("validate", args) {
            Ok(p) => validate(server, p).await,
            Err(e) => tool_error(&e),
        },
        "inspect" => match params::<InspectParams>("inspect", args) {
            Ok(p) => inspect(server, p).await,
            Err(e) => tool_error(&e),
        },
        "create" => match params::<CreateParams>("create", args) {
            Ok(p) => create(server, p, &ctx).await,
            Err(e) => tool_error(&e),
        },
        "promote" => match params::<PromoteParams>("promote", args) {
            Ok(p) => promote(server, p),
            Err(e) => tool_error(&e),
        },
        "triggers" => match params::<TriggersParams>("triggers", args) {
            Ok(p) => match server.triggers.triggers(p).await {
                Ok(list) => text_result(triggers_text(&list), structured(&list), false),
                Err(e) => tool_error(&e),
            },
            Err(e) => tool_error(&e),
        },
        "trigger_history" => match params::<TriggerHistoryParams>("trigger_history", args) {
            Ok(p) => match server.triggers.history(p).await {
                Ok(h) => text_result(history_text(&h), structured(&h), false),
                Err(e) => tool_error(&e),
            },
            Err(e) => tool_error(&e),
        },
        "fire" => match params::<FireParams>("fire", args) {
            Ok(p) => match server.triggers.fire(p).await {
                Ok(r) => text_result(fire_text(&r), structured(&r), false),
                Err(e) => tool_error(&e),
            },
            Err(e) => tool_error(&e),
        },
        "emit" => match params::<EmitParams>("emit", args) {
            Ok(p) => match server.triggers.emit(p).await {
                Ok(r) => text_result(emit_text(&r), structured(&r), false),
                Err(e) => tool_error(&e),
            },
            Err(e) => tool_error(&e),
        },
        "list" => match params::<ListParams>("list", args) {
            Ok(p) => match server.gateway.list_bounded(p).await {
                Ok(list) => text_result(list_text(&list), structured(&list), false),
                Err(e) => tool_error(&e),
            },
            Err(e) => tool_error(&e),
        },
        other => {
            return match workflow(server, other, args, &ctx).await? {
                CallToolResponse::Complete(r) => Ok(input_required(server, r, &ctx).await),
                task => Ok(task),
            };
        }
    };
    Ok(result.into())
}

/// A blocking run call's result for a client that takes input-required
/// results (MRTR): a run waiting for approval asks for it instead of naming
/// the `approve` tool.
async fn input_required(
    server: &McpServer,
    r: CallToolResult,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResponse {
    let waiting = r.structured_content.as_ref().and_then(|s| {
        (s.get("status").and_then(Value::as_str) == Some(SessionStatus::WaitingApproval.as_str()))
            .then(|| s.get("session_id").and_then(Value::as_str))
            .flatten()
            .map(str::to_owned)
    });
    if let Some(id) = waiting
        && super::mrtr::wanted(ctx)
        && let Some(seq) = super::mrtr::pending(server, &id).await
        && let Ok(ask) = super::mrtr::ask(&super::principal::Principal::of(ctx), &id, seq)
    {
        return ask;
    }
    let suspended = r.structured_content.as_ref().and_then(|s| {
        (s.get("status").and_then(Value::as_str) == Some(SessionStatus::Suspended.as_str()))
            .then(|| s.get("session_id").and_then(Value::as_str))
            .flatten()
            .map(str::to_owned)
    });
    if let Some(id) = suspended
        && super::mrtr::wanted(ctx)
        && let Some(ask) =
            super::mrtr::suspended(server, &super::principal::Principal::of(ctx), &id).await
    {
        return ask;
    }
    r.into()
}

/// `event`: a page of the session's events, waiting for new ones up to the
/// call's `wait_ms` (or until the client cancels the call).
async fn event(
    server: &McpServer,
    p: EventParams,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    let page = tokio::select! {
        r = server.gateway.events(p) => r,
        _ = ctx.ct.cancelled() => return text_result("cancelled".into(), None, true),
    };
    match page {
        Ok(page) => text_result(event_text(&page), structured(&page), false),
        Err(e) => tool_error(&e),
    }
}

/// `cancel`.
async fn cancel(server: &McpServer, p: CancelParams) -> CallToolResult {
    match server.gateway.cancel(p).await {
        Ok(s) => text_result(
            format!("Session {} is {}.", s.session_id, s.status.as_str()),
            structured(&s),
            false,
        ),
        Err(e) => tool_error(&e),
    }
}

/// `validate`.
async fn validate(server: &McpServer, p: ValidateParams) -> CallToolResult {
    match server.gateway.validate_bounded(p).await {
        // A report of thousands of diagnostics takes a while to render:
        // off the async threads, like the validation.
        Ok(report) => match tokio::task::spawn_blocking(move || {
            text_result(validate_text(&report), structured(&report), false)
        })
        .await
        {
            Ok(r) => r,
            Err(e) => tool_error(&RpcError::internal(format!(
                "internal error: cannot render the report: {e}"
            ))),
        },
        Err(e) => tool_error(&e),
    }
}

/// `inspect`: the rendering as text when there is one, else the JSON.
async fn inspect(server: &McpServer, p: InspectParams) -> CallToolResult {
    match server.gateway.inspect_bounded(p).await {
        Ok(v) => {
            let text = match v.get("text").and_then(Value::as_str) {
                Some(t) => t.to_owned(),
                None => serde_json::to_string_pretty(&v).unwrap_or_default(),
            };
            text_result(text, Some(v), false)
        }
        Err(e) => tool_error(&e),
    }
}

/// `promote`: a generated run becomes a workflow of the project.
fn promote(server: &McpServer, p: PromoteParams) -> CallToolResult {
    let gateway = &server.gateway;
    if let Err(e) = gateway.request_path(&p.run) {
        return tool_error(&e);
    }
    let root = gateway.root().to_path_buf();
    match agentfile_author::generate::promote(&root, std::path::Path::new(&p.run)) {
        Ok(done) => text_result(
            format!(
                "Promoted {} to {} (archived in {}).",
                p.run, done.target, done.archive
            ),
            Some(
                json!({"name": done.name, "run_id": done.run_id, "target": done.target, "archive": done.archive}),
            ),
            false,
        ),
        Err(e) => text_result(e.to_string(), None, true),
    }
}

/// A `run_<name>` tool: run that workflow with the arguments as its inputs.
async fn workflow(
    server: &McpServer,
    name: &str,
    args: Option<Value>,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let tools = server.catalog.tools().await;
    let Some(w) = tools.iter().find(|w| w.tool.name == name) else {
        return Err(ErrorData::invalid_params(
            format!("unknown tool `{name}`; `tools/list` names them"),
            None,
        ));
    };
    let inputs = match args {
        Some(Value::Object(o)) => o.into_iter().collect(),
        _ => Default::default(),
    };
    let p = RunParams {
        path: w.path.clone(),
        inputs,
        ..RunParams::default()
    };
    if super::tasks::wanted(ctx) {
        return Ok(super::tasks::start_tool(server, p, ctx, Some(name))
            .await
            .unwrap_or_else(|e| tool_error(&e).into()));
    }
    let mut r = run(server, p, ctx).await;
    check_outputs(&w.tool, &mut r);
    Ok(r.into())
}

/// `run` and the `run_<name>` tools.
/// The `replay` tool: a stored session run again from its journal.
async fn replay(
    server: &McpServer,
    p: ReplayParams,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    let wait = p.wait.unwrap_or(true);
    let (mut hooks, _forwarder) = resume_hooks(server);
    hooks.owner = super::principal::Principal::run_owner(ctx);
    match server.gateway.replay(p, hooks).await {
        Err(e) => tool_error(&e),
        Ok(live) if !wait => {
            let (id, status) = (live.session_id().to_owned(), live.status());
            text_result(
                format!(
                    "Replaying into session {id} (status {}). Follow it with `event` until `done`.",
                    status.as_str()
                ),
                Some(json!({"session_id": id, "status": status.as_str()})),
                false,
            )
        }
        Ok(live) => run_result(&*live.finished().await),
    }
}

/// The `fork` tool: a new session from a stored one, run live from a node.
async fn fork(
    server: &McpServer,
    p: ForkParams,
    ctx: &RequestContext<RoleServer>,
) -> CallToolResult {
    let wait = p.wait.unwrap_or(true);
    let (mut hooks, _forwarder) = resume_hooks(server);
    // Over HTTP the new session is its token's alone, as a run's is.
    hooks.owner = super::principal::Principal::run_owner(ctx);
    let live = match server.gateway.fork(p, hooks).await {
        Ok(l) => l,
        Err(e) => return tool_error(&e),
    };
    let id = live.session_id().to_owned();
    if !wait {
        let status = live.status();
        return text_result(
            format!(
                "Forked into session {id} (status {}). Follow it with `event` {{\"session_id\": \"{id}\", \"after_seq\": 0, \"wait_ms\": 20000}} until `done`.",
                status.as_str()
            ),
            Some(json!({"session_id": id, "status": status.as_str()})),
            false,
        );
    }
    run_result(&*live.finished().await)
}

async fn run(server: &McpServer, p: RunParams, ctx: &RequestContext<RoleServer>) -> CallToolResult {
    // The paths a client names must be readable in the workspace; `create`'s
    // generator (under `.agentfile/`) is the server's own and is not judged.
    if let Err(e) = server.gateway.check_run_paths(&p) {
        return tool_error(&e);
    }
    run_with(server, p, ctx, Vec::new()).await.0
}

/// `run`, with more sinks on the run's bus; also the run's result when the
/// call waited for its end.
async fn run_with(
    server: &McpServer,
    p: RunParams,
    ctx: &RequestContext<RoleServer>,
    extra: Vec<Arc<dyn agentfile_session::events::EventSink>>,
) -> (CallToolResult, Option<RunResult>) {
    let provider = p
        .provider
        .as_deref()
        .or(server.gateway.options().provider.as_deref());
    if provider == Some(sampling::NAME) && !server.client.can_sample() {
        return (
            text_result(
                format!("{}: {}", sampling::NAME, sampling::NO_SAMPLING),
                None,
                true,
            ),
            None,
        );
    }
    let wait = p.wait.unwrap_or(true);
    // Progress belongs to this call: only while it waits.
    let token = if wait {
        ctx.meta.get_progress_token()
    } else {
        None
    };
    let (sink, forwarder) = progress::start(
        &server.client,
        Some(ctx.peer.clone()),
        token,
        progress::LogFloor::of(ctx),
    );
    let phase = sink.phase();
    let mut sinks: Vec<Arc<dyn agentfile_session::events::EventSink>> = vec![sink.clone()];
    sinks.extend(extra);
    let hooks = RunHooks {
        sinks,
        approver: Some(Arc::new(McpApprover {
            client: server.client.clone(),
            peer: Some(ctx.peer.clone()),
            can_elicit: super::approval::can_elicit(ctx),
            phase: phase.clone(),
        })),
        // Over HTTP the run is its token's alone (crate::access).
        owner: super::principal::Principal::run_owner(ctx),
    };
    let live = match server.gateway.submit(p, hooks).await {
        Ok(l) => l,
        Err(e) => {
            forwarder.finish(FLUSH).await;
            return (tool_error(&e), None);
        }
    };
    let id = live.session_id().to_owned();
    if !wait {
        let status = live.status();
        return (
            text_result(
                format!(
                    "Started session {id} (status {}). Follow it with `event` {{\"session_id\": \"{id}\", \"after_seq\": 0, \"wait_ms\": 20000}} until `done`; `cancel` stops it.",
                    status.as_str()
                ),
                Some(
                    json!({"session_id": id, "status": status.as_str(), "last_seq": sink.last_seq()}),
                ),
                false,
            ),
            None,
        );
    }
    let mut phase_rx = phase.subscribe();
    let outcome = loop {
        // Checked before waiting: the phase may have moved before we subscribed.
        if *phase_rx.borrow_and_update() == Phase::NeedsApproveTool {
            break None;
        }
        tokio::select! {
            r = live.finished() => break Some(r),
            _ = ctx.ct.cancelled() => {
                // The client cancelled this call (notifications/cancelled): stop the run.
                let _ = server.gateway.cancel(CancelParams { session_id: id.clone() }).await;
                break None;
            }
            changed = phase_rx.changed() => {
                if changed.is_err() {
                    break Some(live.finished().await);
                }
            }
        }
    };
    forwarder.finish(FLUSH).await;
    match outcome {
        Some(r) => (run_result(&r), Some((*r).clone())),
        None if ctx.ct.is_cancelled() => (
            text_result(format!("Run {id} was cancelled."), None, true),
            None,
        ),
        None => (
            {
                let last_seq = sink.last_seq();
                text_result(
                    format!(
                        "Run {id} is waiting for a human to approve a supervised goal; the client could not ask (no elicitation, or the prompt was dismissed). \
                     Ask the user whether to go ahead (its `approval_required` event says which goal: `event` {{\"session_id\": \"{id}\", \"after_seq\": 0}}). \
                     Then call `approve` {{\"session_id\": \"{id}\", \"approve\": true or false, \"note\": \"…\"}}, and follow the run with `event` {{\"session_id\": \"{id}\", \"after_seq\": {last_seq}, \"wait_ms\": 20000}} until `done`."
                    ),
                    Some(
                        json!({"session_id": id, "status": SessionStatus::WaitingApproval.as_str(), "last_seq": last_seq, "resume_with": "approve"}),
                    ),
                    false,
                )
            },
            None,
        ),
    }
}

fn event_text(page: &EventPage) -> String {
    let printer = Progress::to_writer(Box::new(std::io::sink()));
    let mut t = String::new();
    for e in &page.events {
        let _ = writeln!(t, "{} {}", e.seq, progress::summary(&printer, e));
        if let EventBody::RunComplete { outputs, .. } = &e.body {
            for (goal, v) in outputs {
                let _ = write!(t, "\n## {goal}\n\n{}\n\n", value_text(v));
            }
        }
    }
    if page.events.is_empty() {
        t.push_str("No new events.\n");
    }
    let _ = write!(
        t,
        "status {}, last_seq {}, done {}",
        page.status.as_str(),
        page.last_seq,
        page.done
    );
    if !page.done {
        let next = page.events.last().map_or(page.last_seq, |e| e.seq);
        let _ = write!(t, " (ask again with after_seq {next})");
    }
    t
}

fn validate_text(r: &ValidateReport) -> String {
    let mut t = String::new();
    for f in &r.files {
        for d in &f.diagnostics {
            let at = match (d.line, d.column) {
                (Some(l), Some(c)) => format!("{}:{l}:{c}", d.path),
                _ => d.path.clone(),
            };
            let severity = serde_json::to_value(d.severity)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let _ = writeln!(t, "{at}: {severity}[{}]: {}", d.code, d.message);
            if let Some(h) = &d.hint {
                let _ = writeln!(t, "  = hint: {h}");
            }
            for n in &d.notes {
                let _ = writeln!(
                    t,
                    "  = note: {}:{}:{}: {}",
                    n.path, n.line, n.column, n.message
                );
            }
        }
        let _ = writeln!(t, "{}: {}", f.path, if f.ok { "ok" } else { "invalid" });
    }
    let _ = write!(
        t,
        "{}: {} error(s), {} warning(s)",
        if r.ok { "ok" } else { "not ok" },
        r.errors,
        r.warnings
    );
    t
}

fn list_text(l: &WorkflowList) -> String {
    if l.workflows.is_empty() {
        return format!("No workflows under {}.", l.root);
    }
    let mut t = String::new();
    for w in &l.workflows {
        let inputs: Vec<String> = w
            .inputs
            .iter()
            .map(|i| match &i.default {
                Some(d) => format!("{}={d:?}", i.name),
                None => format!("{} (required)", i.name),
            })
            .collect();
        let status = if w.valid {
            "valid".to_owned()
        } else {
            format!("invalid, {} error(s)", w.errors)
        };
        let _ = writeln!(
            t,
            "- {} — {} ({}, {status}){}",
            w.name,
            w.path,
            w.dialect,
            if inputs.is_empty() {
                String::new()
            } else {
                format!("; inputs: {}", inputs.join(", "))
            }
        );
    }
    t.trim_end().to_owned()
}

/// The session a session tool's arguments name (`event`, `cancel`,
/// `approve`, `signal`, or `run` with `resume`).
fn session_named(tool: &str, args: Option<&Value>) -> Option<String> {
    let args = args?;
    let key = match tool {
        "event" | "cancel" | "approve" | "signal" | "fork" | "replay" => "session_id",
        "run" => "resume",
        _ => return None,
    };
    args.get(key)?.as_str().map(str::to_owned)
}

/// `triggers` for the model: one line per trigger.
fn triggers_text(list: &TriggerList) -> String {
    if list.triggers.is_empty() {
        return "No triggers under the workspace.".into();
    }
    let mut out = String::new();
    for t in &list.triggers {
        let state = match t.state {
            agentfile_wire::rpc::TriggerState::Active => "active",
            agentfile_wire::rpc::TriggerState::Refused => "refused",
        };
        let _ = write!(out, "{} ({} of {}): {state}", t.id, t.kind, t.workflow);
        if let Some(n) = &t.next_fire {
            let _ = write!(out, ", next {n}");
        }
        if let Some(r) = &t.reason {
            let _ = write!(out, " ({r})");
        }
        out.push('\n');
    }
    out
}

fn outcome_name(o: agentfile_wire::rpc::FireOutcome) -> &'static str {
    match o {
        agentfile_wire::rpc::FireOutcome::Fired => "fired",
        agentfile_wire::rpc::FireOutcome::Skipped => "skipped",
        agentfile_wire::rpc::FireOutcome::Refused => "refused",
    }
}

/// `trigger_history` for the model: one line per fire.
fn history_text(h: &FireHistory) -> String {
    if h.fires.is_empty() {
        return "Nothing has fired yet.".into();
    }
    let mut out = String::new();
    for f in &h.fires {
        let _ = write!(
            out,
            "{} {} ({}): {}",
            f.fired_at,
            f.trigger,
            f.kind,
            outcome_name(f.outcome)
        );
        if let Some(s) = &f.session_id {
            let _ = write!(out, ", session {s}");
        }
        if let Some(r) = &f.reason {
            let _ = write!(out, " ({r})");
        }
        out.push('\n');
    }
    out
}

/// One fire for the model: its session to follow, or why it did not run.
fn fire_text(r: &FireReport) -> String {
    match &r.session_id {
        Some(s) => format!(
            "{}: {}, session {s}. Follow it with `event` (session_id \"{s}\", wait_ms 20000) until done.",
            r.trigger,
            outcome_name(r.outcome)
        ),
        None => format!(
            "{}: {}{}",
            r.trigger,
            outcome_name(r.outcome),
            r.reason
                .as_deref()
                .map(|w| format!(" ({w})"))
                .unwrap_or_default()
        ),
    }
}

/// `emit` for the model.
fn emit_text(r: &EmitResult) -> String {
    let mut out = format!("Event `{}` (id {}): ", r.event, r.id);
    if r.fired.is_empty() {
        out.push_str("nothing fired: this event id fired already.\n");
    } else {
        let _ = writeln!(out, "{} fired.", r.fired.len());
    }
    for f in &r.fired {
        let _ = writeln!(out, "{}", fire_text(f));
    }
    for f in &r.already_fired {
        let _ = writeln!(
            out,
            "{}: already fired for this id{}",
            f.trigger,
            f.session_id
                .as_deref()
                .map(|s| format!(" (session {s})"))
                .unwrap_or_default()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_objects_without_refs() {
        for t in fixed() {
            let input = Value::Object(t.input_schema.as_ref().clone());
            assert_eq!(input["type"], "object", "{}", t.name);
            assert!(
                !input.to_string().contains("\"$ref\""),
                "{}: {input}",
                t.name
            );
            if let Some(o) = &t.output_schema {
                assert_eq!(o.get("type"), Some(&json!("object")), "{}", t.name);
            }
        }
        let run = run_output_schema();
        assert_eq!(run["required"], json!(["session_id", "status"]));
        let input = input_schema::<RunParams>();
        assert_eq!(input["additionalProperties"], json!(false));
        assert!(input["properties"]["inputs"].is_object());
    }

    #[test]
    fn failed_runs_are_tool_errors_with_their_reason() {
        let r = RunResult {
            kind: "result".into(),
            session_id: "s1".into(),
            status: "failed".into(),
            outputs: Default::default(),
            usage: Default::default(),
            termination_reason: agentfile_wire::events::TerminationReason::Error,
            error: Some("model call failed: boom".into()),
            exit_code: 1,
            waiting_for: Vec::new(),
        };
        let c = run_result(&r);
        assert_eq!(c.is_error, Some(true));
        let text = serde_json::to_value(&c.content[0]).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(text.contains("boom") && text.contains("resume"), "{text}");
        assert_eq!(c.structured_content.unwrap()["session_id"], "s1");
    }
}
