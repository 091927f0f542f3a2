//! The conformance suite's diagnostic tools for stateless 2026-07-28
//! requests (SEP-2575): each makes one rule of the revision observable.
//!
//! - `test_missing_capability`: needs elicitation, sampling and roots; a
//!   request whose `_meta` capabilities lack one gets `-32021`.
//! - `test_streaming_elicitation`: asks the user through an input-required
//!   result, never through a request of its own on the response stream.
//! - `test_logging_tool`: logs only when the request's `_meta` asks for a
//!   level (`io.modelcontextprotocol/logLevel`).
//! - `test_trigger_tool_change`: adds `test_dynamic_tool` to the tool list
//!   (or takes it away), so the clients hear `tools/list_changed`.

use std::sync::atomic::{AtomicBool, Ordering};

use agentfile::server::mcp::{ExtraAnswer, ToolHost};
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ErrorData, InputRequests,
    InputRequiredResult, LoggingMessageNotificationParam, Tool,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use super::{no_args, result, text, tool};

const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// Whether `test_dynamic_tool` is listed.
static DYNAMIC: AtomicBool = AtomicBool::new(false);

pub fn tools() -> Vec<Tool> {
    let mut all = vec![
        tool(
            "test_trigger_tool_change",
            "Adds or removes test_dynamic_tool",
            no_args(),
        ),
        tool(
            "test_missing_capability",
            "Needs the client's elicitation, sampling and roots",
            no_args(),
        ),
        tool(
            "test_streaming_elicitation",
            "Asks the user (through an input-required result)",
            no_args(),
        ),
        tool(
            "test_logging_tool",
            "Logs when the request asks for a log level",
            no_args(),
        ),
    ];
    if DYNAMIC.load(Ordering::SeqCst) {
        all.push(tool(
            "test_dynamic_tool",
            "Listed after test_trigger_tool_change",
            no_args(),
        ));
    }
    all
}

#[allow(deprecated)] // sampling and logging: deprecated by 2026-07-28, still negotiable
pub fn call(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    host: &ToolHost,
) -> Option<ExtraAnswer> {
    let answer: ExtraAnswer = match request.name.as_ref() {
        "test_trigger_tool_change" => {
            let shown = !DYNAMIC.fetch_xor(true, Ordering::SeqCst);
            host.tools_changed();
            Box::pin(async move {
                result(json!({"content": [text(if shown {
                    "test_dynamic_tool added"
                } else {
                    "test_dynamic_tool removed"
                })]}))
            })
        }
        "test_dynamic_tool" if DYNAMIC.load(Ordering::SeqCst) => {
            Box::pin(async move { result(json!({"content": [text("here")]})) })
        }
        "test_missing_capability" => {
            let caps = context.client_capabilities().unwrap_or_default();
            Box::pin(async move {
                let mut missing = ClientCapabilities::default();
                if caps.elicitation.is_none() {
                    missing.elicitation = Some(Default::default());
                }
                if caps.sampling.is_none() {
                    missing.sampling = Some(Default::default());
                }
                if caps.roots.is_none() {
                    missing.roots = Some(Default::default());
                }
                if missing == ClientCapabilities::default() {
                    result(json!({"content": [text("every capability it needs was declared")]}))
                } else {
                    Err(ErrorData::missing_required_client_capability(missing))
                }
            })
        }
        "test_streaming_elicitation" => {
            let answered = request
                .input_responses
                .as_ref()
                .and_then(|a| a.get("confirm"))
                .cloned();
            Box::pin(async move {
                match answered {
                    Some(a) => result(json!({"content": [text(&format!("answered: {a}"))]})),
                    None => {
                        let asked: InputRequests = serde_json::from_value(json!({"confirm": {
                            "method": "elicitation/create",
                            "params": {"message": "Go ahead?", "requestedSchema": {
                                "type": "object", "properties": {"ok": {"type": "boolean"}}}}
                        }}))
                        .expect("a valid input request");
                        Ok(CallToolResponse::InputRequired(
                            InputRequiredResult::from_input_requests(asked),
                        ))
                    }
                }
            })
        }
        "test_logging_tool" => {
            let level = context.meta.0.get(LOG_LEVEL).cloned();
            let peer = context.peer.clone();
            Box::pin(async move {
                if let Some(Value::String(_)) = &level {
                    let param: LoggingMessageNotificationParam = serde_json::from_value(
                        json!({"level": "info", "data": "logged, as asked"}),
                    )
                    .expect("a valid log message");
                    let _ = peer.notify_logging_message(param).await;
                }
                result(json!({"content": [text(&format!(
                    "log level asked: {}",
                    level.map_or("none".to_owned(), |l| l.to_string())
                ))]}))
            })
        }
        _ => return None,
    };
    Some(answer)
}
