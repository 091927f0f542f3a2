//! `agentfile mcp` with the test tools of the MCP conformance suite's
//! "everything" server beside agentfile's own, for `tests/e2e/mcp_conformance.rs`:
//! the same server code as the shipped binary (its [`McpOptions`], HTTP front
//! and stdio transport), plus an [`ExtraTools`] registry that the CLI never
//! fills. Not a product: the tools answer fixed content.
//!
//! ```text
//! cargo run --example mcp_fixtures -- --workspace DIR [--http 127.0.0.1:0]
//! ```
//!
//! Served: `test_simple_text`, `test_image_content`, `test_audio_content`,
//! `test_embedded_resource`, `test_multiple_content_types`,
//! `test_error_handling`, `test_tool_with_progress`, `test_tool_with_logging`,
//! `test_sampling`, `test_elicitation`, `test_reconnection` (closes its SSE
//! stream mid-call, SEP-1699) and `greet` (a plain synchronous tool);
//! the task fixtures `slow_compute`, `failing_job`, `protocol_error_job`,
//! `confirm_delete`, `multi_input` and `test_tool_with_task` ([`tasks`]: tasks
//! of the server's `LocalTasks`, which answer the same `tasks/*` methods as
//! runs); and the multi round-trip fixtures `test_input_required_result_*`
//! ([`mrtr`]); the stateless-request diagnostics `test_missing_capability`,
//! `test_streaming_elicitation` and `test_logging_tool` ([`diag`]).

// `test_tool_with_logging` and `test_sampling` use logging and sampling:
// deprecated by the 2026 protocol (SEP-2577), still tested by the suite.
#![allow(deprecated)]

use std::sync::Arc;
use std::time::Duration;

use agentfile::server::gateway::GatewayOptions;
use agentfile::server::mcp::{ExtraAnswer, ExtraTools, McpOptions, ToolHost};
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, LoggingMessageNotificationParam,
    ProgressNotificationParam, Tool,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

mod diag;
mod mrtr;
mod prompts;
mod tasks;

/// A 1×1 red PNG.
pub(crate) const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV header (no samples).
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

struct Fixtures;

pub(crate) fn tool(name: &str, description: &str, schema: Value) -> Tool {
    serde_json::from_value(json!({"name": name, "description": description, "inputSchema": schema}))
        .expect("a valid tool")
}

/// A finished call (`resultType: "complete"`, which rmcp drops for clients
/// before 2026-07-28, as for agentfile's own results).
pub(crate) fn result(mut v: Value) -> Result<CallToolResponse, rmcp::ErrorData> {
    v["resultType"] = json!("complete");
    Ok(CallToolResponse::Complete(
        serde_json::from_value::<CallToolResult>(v).expect("a valid result"),
    ))
}

/// A string argument of the call, or "".
fn arg(request: &CallToolRequestParams, name: &str) -> String {
    request
        .arguments
        .as_ref()
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The input schema of `json_schema_2020_12_tool`: `$defs` with an
/// `$anchor`, `$ref`, composition and conditional keywords, kept as written.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

/// A text content block.
pub(crate) fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

pub(crate) fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

impl ExtraTools for Fixtures {
    fn tools(&self) -> Vec<Tool> {
        vec![
            tool("test_simple_text", "Returns simple text", no_args()),
            tool("test_image_content", "Returns an image", no_args()),
            tool("test_audio_content", "Returns audio", no_args()),
            tool(
                "test_embedded_resource",
                "Returns an embedded resource",
                no_args(),
            ),
            tool(
                "test_multiple_content_types",
                "Returns text, image and a resource",
                no_args(),
            ),
            tool("test_error_handling", "Always fails", no_args()),
            tool("test_tool_with_progress", "Reports progress", no_args()),
            tool("test_tool_with_logging", "Logs while it runs", no_args()),
            tool(
                "test_reconnection",
                "Closes its SSE stream mid-call; the client resumes it with Last-Event-ID",
                no_args(),
            ),
            tool(
                "test_sampling",
                "Asks the client's model",
                json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
            ),
            tool(
                "test_elicitation",
                "Asks the user",
                json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            ),
            tool(
                "test_elicitation_sep1034_defaults",
                "Asks the user, with a default for every primitive type",
                no_args(),
            ),
            tool(
                "test_elicitation_sep1330_enums",
                "Asks the user to pick, in every enum form",
                no_args(),
            ),
            tool(
                "json_schema_2020_12_tool",
                "Takes input described with JSON Schema 2020-12 keywords",
                json_schema_2020_12(),
            ),
            tool(
                "greet",
                "Greets someone",
                json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            ),
        ]
        .into_iter()
        .chain(tasks::tools())
        .chain(mrtr::tools())
        .chain(diag::tools())
        .collect()
    }

    fn requires_task(&self, name: &str) -> bool {
        tasks::REQUIRED.contains(&name)
    }

    fn prompts(&self) -> Vec<rmcp::model::Prompt> {
        prompts::prompts()
    }

    fn get_prompt(
        &self,
        request: &rmcp::model::GetPromptRequestParams,
        _: &RequestContext<RoleServer>,
    ) -> Option<Result<rmcp::model::GetPromptResponse, rmcp::ErrorData>> {
        prompts::get(request)
    }

    fn call(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        host: &ToolHost,
    ) -> Option<ExtraAnswer> {
        if let Some(answer) = tasks::call(request, context, &host.tasks) {
            return Some(answer);
        }
        if let Some(answer) = mrtr::call(request, context) {
            return Some(answer);
        }
        if let Some(answer) = diag::call(request, context, host) {
            return Some(answer);
        }
        let resource = json!({"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain",
            "text": "This is an embedded resource content."}});
        let answer: ExtraAnswer = match request.name.as_ref() {
            "test_simple_text" => Box::pin(async move {
                result(json!({"content": [text("This is a simple text response for testing.")]}))
            }),
            "test_image_content" => Box::pin(async move {
                result(
                    json!({"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}),
                )
            }),
            "test_audio_content" => Box::pin(async move {
                result(
                    json!({"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]}),
                )
            }),
            "test_embedded_resource" => {
                Box::pin(async move { result(json!({"content": [resource]})) })
            }
            "test_multiple_content_types" => Box::pin(async move {
                result(json!({"content": [
                    text("Multiple content types test:"),
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    resource
                ]}))
            }),
            "test_error_handling" => Box::pin(async move {
                result(json!({"isError": true, "content": [
                    text("This tool intentionally returns an error for testing")
                ]}))
            }),
            "test_tool_with_progress" => {
                let peer = context.peer.clone();
                let token = context.meta.get_progress_token();
                Box::pin(async move {
                    for (i, p) in [0, 50, 100].into_iter().enumerate() {
                        if i > 0 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        if let Some(token) = &token {
                            let param: ProgressNotificationParam = serde_json::from_value(
                                json!({"progressToken": token, "progress": p, "total": 100}),
                            )
                            .expect("a valid progress notification");
                            let _ = peer.notify_progress(param).await;
                        }
                    }
                    result(json!({"content": [text("Progress test completed")]}))
                })
            }
            "test_reconnection" => {
                // SEP-1699: the server closes the stream, the call goes on,
                // and the result waits for the client's `Last-Event-ID`.
                let closed = agentfile::server::mcp::resume::Disconnect::close(context);
                Box::pin(async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let said = if closed {
                        "Reconnection test completed"
                    } else {
                        "Reconnection test completed (no resumable stream to close)"
                    };
                    result(json!({"content": [text(said)]}))
                })
            }
            "test_tool_with_logging" => {
                let peer = context.peer.clone();
                Box::pin(async move {
                    for (i, m) in [
                        "Tool execution started",
                        "Tool processing data",
                        "Tool execution completed",
                    ]
                    .into_iter()
                    .enumerate()
                    {
                        if i > 0 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        let param: LoggingMessageNotificationParam =
                            serde_json::from_value(json!({"level": "info", "data": m}))
                                .expect("a valid log message");
                        let _ = peer.notify_logging_message(param).await;
                    }
                    result(json!({"content": [text("Logging test completed")]}))
                })
            }
            "test_sampling" => {
                let peer = context.peer.clone();
                let prompt = arg(request, "prompt");
                Box::pin(async move {
                    let params = serde_json::from_value(json!({
                        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                        "maxTokens": 100
                    }))
                    .expect("a valid sampling request");
                    match peer.create_message(params).await {
                        Ok(r) => {
                            let r = serde_json::to_value(r).unwrap_or_default();
                            let said = r["content"]["text"]
                                .as_str()
                                .or_else(|| r["content"][0]["text"].as_str())
                                .unwrap_or_default()
                                .to_owned();
                            result(json!({"content": [text(&format!("LLM response: {said}"))]}))
                        }
                        Err(e) => result(
                            json!({"isError": true, "content": [text(&format!("sampling failed: {e}"))]}),
                        ),
                    }
                })
            }
            "test_elicitation" => {
                let peer = context.peer.clone();
                let message = arg(request, "message");
                Box::pin(async move {
                    let params = serde_json::from_value(json!({
                        "message": message,
                        "requestedSchema": {"type": "object", "properties": {
                            "username": {"type": "string", "description": "User's response"},
                            "email": {"type": "string", "description": "User's email address"}
                        }, "required": ["username", "email"]}
                    }))
                    .expect("a valid elicitation request");
                    match peer.create_elicitation(params).await {
                        Ok(r) => {
                            let r = serde_json::to_value(r).unwrap_or_default();
                            result(json!({"content": [text(&format!("User response: {r}"))]}))
                        }
                        Err(e) => result(
                            json!({"isError": true, "content": [text(&format!("elicitation failed: {e}"))]}),
                        ),
                    }
                })
            }
            "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums" => {
                let peer = context.peer.clone();
                let schema = if request.name == "test_elicitation_sep1034_defaults" {
                    json!({"type": "object", "properties": {
                        "name": {"type": "string", "default": "John Doe"},
                        "age": {"type": "integer", "default": 30},
                        "score": {"type": "number", "default": 95.5},
                        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "default": true}
                    }})
                } else {
                    json!({"type": "object", "properties": {
                        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "oneOf": [
                            {"const": "value1", "title": "First Option"},
                            {"const": "value2", "title": "Second Option"},
                            {"const": "value3", "title": "Third Option"}
                        ]},
                        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"}
                        ]}}
                    }})
                };
                Box::pin(async move {
                    let params = serde_json::from_value(json!({
                        "message": "Please review and fill in the form",
                        "requestedSchema": schema
                    }))
                    .map_err(|e| {
                        rmcp::ErrorData::internal_error(format!("the fixture's form: {e}"), None)
                    })?;
                    match peer.create_elicitation(params).await {
                        Ok(r) => {
                            let r = serde_json::to_value(r).unwrap_or_default();
                            result(json!({"content": [text(&format!(
                                "Elicitation completed: action={}, content={}",
                                r["action"].as_str().unwrap_or("?"),
                                r.get("content").cloned().unwrap_or(Value::Null)
                            ))]}))
                        }
                        Err(e) => result(
                            json!({"isError": true, "content": [text(&format!("elicitation failed: {e}"))]}),
                        ),
                    }
                })
            }
            "json_schema_2020_12_tool" => {
                let args = Value::Object(request.arguments.clone().unwrap_or_default());
                Box::pin(
                    async move { result(json!({"content": [text(&format!("received {args}"))]})) },
                )
            }
            "greet" => {
                let name = request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("world")
                    .to_owned();
                Box::pin(
                    async move { result(json!({"content": [text(&format!("Hello, {name}!"))]})) },
                )
            }
            _ => return None,
        };
        Some(answer)
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut options = McpOptions {
        extra_tools: Some(Arc::new(Fixtures)),
        ..McpOptions::default()
    };
    let mut gateway = GatewayOptions::default();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--workspace" => gateway.workspace = args.next().map(Into::into),
            "--http" => {
                options.http = Some(
                    args.next()
                        .and_then(|a| a.parse().ok())
                        .expect("--http ADDR: an address such as 127.0.0.1:0"),
                )
            }
            other => {
                eprintln!("mcp_fixtures: unknown argument {other}");
                std::process::exit(2);
            }
        }
    }
    options.gateway = gateway;
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let code = if options.http.is_some() {
        runtime.block_on(agentfile::server::mcp::http::serve_http(options))
    } else {
        runtime.block_on(agentfile::server::mcp::serve_stdio(options))
    };
    std::process::exit(code);
}
