//! The OpenRPC document of `agentfile serve`: every method, its named params
//! and result as JSON Schemas generated from the wire types, the `event`
//! notification, and the error codes. Published as `protocol/openrpc.json` and
//! returned by the `rpc.discover` method.

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use agentfile_wire::diagnostics::ValidateReport;
use agentfile_wire::events::{Event, RunResult};
use agentfile_wire::rpc::{
    ApproveParams, CancelParams, EmitParams, EmitResult, EventPage, EventParams, FireHistory,
    FireParams, FireReport, InspectParams, ListParams, PingParams, Pong, RpcError, RunParams,
    RunStatus, SessionList, SessionsParams, SignalParams, TriggerHistoryParams, TriggerList,
    TriggersParams, ValidateParams, code,
};
use agentfile_wire::workflows::WorkflowList;

struct Method {
    name: &'static str,
    summary: &'static str,
    params: Schema,
    result_name: &'static str,
    result: Schema,
    errors: &'static [i64],
}

/// A method whose result is the schema of `R`.
fn method<P: JsonSchema, R: JsonSchema>(
    g: &mut SchemaGenerator,
    name: &'static str,
    summary: &'static str,
    result_name: &'static str,
    errors: &'static [i64],
) -> Method {
    let result = g.subschema_for::<R>();
    method_with::<P>(g, name, summary, result_name, result, errors)
}

/// A method with the given result schema.
fn method_with<P: JsonSchema>(
    g: &mut SchemaGenerator,
    name: &'static str,
    summary: &'static str,
    result_name: &'static str,
    result: Schema,
    errors: &'static [i64],
) -> Method {
    Method {
        name,
        summary,
        params: P::json_schema(g),
        result_name,
        result,
        errors,
    }
}

/// Named params from an object schema: one content descriptor per property.
fn descriptors(params: &Schema) -> Vec<Value> {
    let required: Vec<&str> = params
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = params.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, schema)| {
            let mut d = Map::new();
            d.insert("name".into(), json!(name));
            if let Some(desc) = schema.get("description") {
                d.insert("description".into(), desc.clone());
            }
            d.insert("required".into(), json!(required.contains(&name.as_str())));
            d.insert("schema".into(), schema.clone());
            Value::Object(d)
        })
        .collect()
}

const ERRORS: [(i64, &str); 13] = [
    (
        code::PARSE_ERROR,
        "Parse error: the line is not JSON (id is null)",
    ),
    (
        code::INVALID_REQUEST,
        "Invalid request: not a JSON-RPC 2.0 request object, or an empty batch",
    ),
    (code::METHOD_NOT_FOUND, "Method not found"),
    (
        code::INVALID_PARAMS,
        "Invalid params: the message names the field",
    ),
    (code::INTERNAL, "Internal error"),
    (
        code::RUN_REJECTED,
        "The run cannot start: invalid workflow, missing input, config or provider problem; data.exit_code is the CLI's exit code",
    ),
    (
        code::UNKNOWN_SESSION,
        "No session with that id in this server's session store",
    ),
    (
        code::SESSION_STATE,
        "The session is not in a state that allows this (nothing to approve, finished, running in another process)",
    ),
    (
        code::SHUTTING_DOWN,
        "The server is shutting down and accepts no new runs; data.session_id names a session made for the run before the refusal, left interrupted to resume",
    ),
    (code::STORE, "The session store failed"),
    (
        code::NOT_FOUND,
        "A workflow file or folder named in the request does not exist",
    ),
    (
        code::LIMIT,
        "A bound of the server was reached and the request was not run: data.limit names it (requests_in_flight, request_bytes_in_flight, reply_size, source_size) and data.max is its value",
    ),
    (
        code::UNKNOWN_TRIGGER,
        "No trigger with that id in the server's workspace, or no workflow subscribes to the emitted event",
    ),
];

/// The errors of a method that acts on a stored session.
/// What a method that starts a run can answer with.
const RUN_ERRORS: &[i64] = &[
    code::INVALID_PARAMS,
    code::RUN_REJECTED,
    code::UNKNOWN_SESSION,
    code::SESSION_STATE,
    code::SHUTTING_DOWN,
    code::STORE,
    code::NOT_FOUND,
    code::LIMIT,
    code::INTERNAL,
];

const SESSION_ERRORS: &[i64] = &[
    code::INVALID_PARAMS,
    code::UNKNOWN_SESSION,
    code::SESSION_STATE,
    code::STORE,
    code::LIMIT,
    code::INTERNAL,
];

/// The whole document.
pub fn document() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
    });
    let mut g = SchemaGenerator::new(settings);
    let methods = methods(&mut g);
    let event = g.subschema_for::<Event>();
    // Referenced by the error objects of every method.
    let _ = g.subschema_for::<RpcError>();
    let described: Map<String, Value> = ERRORS
        .iter()
        .map(|(c, m)| (c.to_string(), json!({"code": c, "message": m})))
        .collect();
    let methods: Vec<Value> = methods.iter().map(method_object).collect();
    let schemas = g.take_definitions(true);
    json!({
        "openrpc": "1.3.2",
        "info": {
            "title": "agentfile serve",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "JSON-RPC 2.0 over stdio, one message per line (batches and notifications per spec). While a run started on the connection executes, the server sends `{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":EVENT}` for each of its events (schema: components.schemas.Event, referenced by x-notifications)."
        },
        "methods": methods,
        "x-notifications": [{"name": "event", "params": [{"name": "event", "schema": event}]}],
        "components": {"schemas": schemas, "errors": described}
    })
}

/// One method's entry in the document.
fn method_object(m: &Method) -> Value {
    json!({
        "name": m.name,
        "summary": m.summary,
        "paramStructure": "by-name",
        "params": descriptors(&m.params),
        "result": {"name": m.result_name, "schema": m.result},
        "errors": m.errors.iter().map(|c| json!({"$ref": format!("#/components/errors/{c}")})).collect::<Vec<_>>(),
    })
}

/// `oneOf` the given schemas, described.
fn one_of(schemas: [Schema; 2], description: &str) -> Schema {
    Schema::from(
        json!({"oneOf": schemas, "description": description})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

/// Every method, in the document's order.
fn methods(g: &mut SchemaGenerator) -> [Method; 16] {
    use code::*;
    let run_result = {
        let finished = g.subschema_for::<RunResult>();
        let started = g.subschema_for::<RunStatus>();
        one_of(
            [finished, started],
            "The finished run (wait: true), or at once its session id and status (wait: false)",
        )
    };
    let inspect_result = {
        let plan = g.subschema_for::<agentfile_plan::Plan>();
        let text = g.subschema_for::<agentfile_wire::rpc::InspectText>();
        one_of([plan, text], "The plan (format json), or rendered text")
    };
    [
        method_with::<RunParams>(
            g,
            "run",
            "Run (or resume) a workflow; events arrive as `event` notifications while it runs",
            "result",
            run_result.clone(),
            RUN_ERRORS,
        ),
        method_with::<agentfile_wire::rpc::ForkParams>(
            g,
            "fork",
            "Start a new session from a stored one's journal and run it live from a node: every node that completed before it is taken over (no model call, no tool); the session forked is left as it is",
            "result",
            run_result.clone(),
            RUN_ERRORS,
        ),
        method_with::<agentfile_wire::rpc::ReplayParams>(
            g,
            "replay",
            "Run a stored session again in a new one from its own journal: every model answer and tool result as recorded, nothing asked or run; with an edited workflow it stops where a request first differs (`replay-diverged`)",
            "result",
            run_result,
            RUN_ERRORS,
        ),
        method::<EventParams, EventPage>(
            g,
            "event",
            "Read a session's events after a seq, or long-poll for the next ones",
            "page",
            &[INVALID_PARAMS, UNKNOWN_SESSION, STORE, LIMIT, INTERNAL],
        ),
        method::<CancelParams, RunStatus>(
            g,
            "cancel",
            "Cancel a run; a finished one keeps its status",
            "status",
            SESSION_ERRORS,
        ),
        method::<ApproveParams, RunStatus>(
            g,
            "approve",
            "Approve or reject the supervised goal a run waits at (a session waiting from an earlier process is resumed)",
            "status",
            SESSION_ERRORS,
        ),
        method::<SignalParams, RunStatus>(
            g,
            "signal",
            "Deliver an event to a suspended session (status `suspended`); the run resumes at once",
            "status",
            SESSION_ERRORS,
        ),
        method::<ValidateParams, ValidateReport>(
            g,
            "validate",
            "Check workflow files (or source text) and report every problem",
            "report",
            &[INVALID_PARAMS, LIMIT, INTERNAL],
        ),
        method_with::<InspectParams>(
            g,
            "inspect",
            "A workflow's plan: inputs, agents, goals, steps",
            "plan",
            inspect_result,
            &[INVALID_PARAMS, RUN_REJECTED, LIMIT, INTERNAL],
        ),
        method::<ListParams, WorkflowList>(
            g,
            "list",
            "Find the workflows under a folder",
            "workflows",
            &[INVALID_PARAMS, NOT_FOUND, LIMIT, INTERNAL],
        ),
        method::<SessionsParams, SessionList>(
            g,
            "sessions",
            "Stored sessions, newest first",
            "sessions",
            &[INVALID_PARAMS, STORE, LIMIT, INTERNAL],
        ),
        method::<PingParams, Pong>(
            g,
            "ping",
            "Answered `{}` at once, also while the connection is at a limit: is the server there?",
            "pong",
            &[INVALID_PARAMS],
        ),
        method::<TriggersParams, TriggerList>(
            g,
            "triggers",
            "The triggers of the workflows in the workspace (as `agentfile triggers list --format json`): state, next fire, quota use",
            "triggers",
            &[INVALID_PARAMS, RUN_REJECTED, LIMIT, INTERNAL],
        ),
        method::<TriggerHistoryParams, FireHistory>(
            g,
            "trigger_history",
            "Fires, newest first (as `agentfile triggers history --format json`): outcome, reason, session",
            "fires",
            &[INVALID_PARAMS, RUN_REJECTED, STORE, LIMIT, INTERNAL],
        ),
        method::<FireParams, FireReport>(
            g,
            "fire",
            "Fire a trigger now, by hand; answers once its run started (follow it with `event`), or why it did not run",
            "fire",
            &[
                INVALID_PARAMS,
                UNKNOWN_TRIGGER,
                RUN_REJECTED,
                STORE,
                LIMIT,
                INTERNAL,
            ],
        ),
        method::<EmitParams, EmitResult>(
            g,
            "emit",
            "Emit a named event: each workflow subscribed to it runs once per event id, with the payload as its inputs",
            "emitted",
            &[
                INVALID_PARAMS,
                UNKNOWN_TRIGGER,
                RUN_REJECTED,
                STORE,
                LIMIT,
                INTERNAL,
            ],
        ),
    ]
}
