//! The conformance suite's task fixtures (SEP-2663): tools whose work runs
//! as a task of the server's [`LocalTasks`] when the client declared the
//! tasks extension (and synchronously, or refused, when it did not).
//!
//! - `slow_compute {seconds, label}`: sleeps, then answers; cancellable.
//! - `failing_job` (task required): a tool error after a moment.
//! - `protocol_error_job`: an internal error, so the task is `failed`.
//! - `confirm_delete {filename}`: asks for a confirmation, then answers.
//! - `multi_input`: asks two questions at once (answerable one at a time).
//! - `test_tool_with_task` (task required): asks the user's name through a
//!   multi round-trip result first, then runs as a task that greets them.

use std::sync::Arc;
use std::time::Duration;

use agentfile::server::mcp::ExtraAnswer;
use agentfile::server::mcp::local_tasks::{LocalTasks, TaskContext};
use agentfile::server::mcp::principal::Principal;
use agentfile::server::mcp::tasks::wanted;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, InputRequests,
    InputRequiredResult, InputResponses, Tool,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use super::{no_args, result, text, tool};

/// The tools that only run as tasks.
pub const REQUIRED: [&str; 2] = ["failing_job", "test_tool_with_task"];

pub fn tools() -> Vec<Tool> {
    vec![
        tool(
            "slow_compute",
            "Computes for `seconds` seconds (a task when the client can follow one)",
            json!({"type": "object", "properties": {
                "seconds": {"type": "number", "minimum": 0},
                "label": {"type": "string"}
            }}),
        ),
        tool("failing_job", "A task that ends in a tool error", no_args()),
        tool(
            "protocol_error_job",
            "A task that ends in an internal error",
            no_args(),
        ),
        tool(
            "confirm_delete",
            "Asks for a confirmation before it deletes (pretends to)",
            json!({"type": "object", "properties": {"filename": {"type": "string"}}}),
        ),
        tool("multi_input", "Asks two questions at once", no_args()),
        tool(
            "test_tool_with_task",
            "Asks the user's name, then greets them from a task",
            no_args(),
        ),
    ]
}

fn done(v: Value) -> Result<CallToolResult, ErrorData> {
    match result(v)? {
        CallToolResponse::Complete(r) => Ok(r),
        _ => Err(ErrorData::internal_error("not a complete result", None)),
    }
}

fn question(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    }})
}

fn requests(v: Value) -> InputRequests {
    serde_json::from_value(v).expect("valid fixture input requests")
}

/// The accepted answer's `field`, as text.
fn answer(answers: &InputResponses, key: &str, field: &str) -> Option<String> {
    let a = answers.get(key)?;
    if a.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    match a.get("content")?.get(field)? {
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

async fn compute(seconds: f64, label: String) -> Result<CallToolResult, ErrorData> {
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    done(json!({"content": [text(&format!("computed {label} in {seconds}s"))]}))
}

async fn confirm(cx: TaskContext, filename: String) -> Result<CallToolResult, ErrorData> {
    let asked = requests(json!({
        "confirm": question(&format!("Delete {filename}?"), "confirm", "boolean")
    }));
    let Some(answers) = cx.ask(asked).await else {
        return Err(ErrorData::internal_error("cancelled", None));
    };
    let yes = answer(&answers, "confirm", "confirm").as_deref() == Some("true");
    done(json!({"content": [text(&if yes {
        format!("deleted {filename}")
    } else {
        format!("kept {filename}")
    })]}))
}

pub fn call(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    tasks: &Arc<LocalTasks>,
) -> Option<ExtraAnswer> {
    let as_task = wanted(context);
    let owner = Principal::of(context);
    let args = request.arguments.clone().unwrap_or_default();
    let tasks = tasks.clone();
    let task =
        move |created: rmcp::model::CreateTaskResult| -> Result<CallToolResponse, ErrorData> {
            Ok(CallToolResponse::Task(created))
        };
    let answer: ExtraAnswer = match request.name.as_ref() {
        "slow_compute" => {
            let seconds = args
                .get("seconds")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
                .clamp(0.0, 3_600.0);
            let label = args
                .get("label")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            if as_task {
                Box::pin(async move { task(tasks.start(&owner, |_| compute(seconds, label))) })
            } else {
                Box::pin(async move { compute(seconds, label).await.map(Into::into) })
            }
        }
        "failing_job" => Box::pin(async move {
            task(tasks.start(&owner, |_| async {
                tokio::time::sleep(Duration::from_millis(500)).await;
                done(json!({"isError": true, "content": [text("failing_job failed, as it always does")]}))
            }))
        }),
        "protocol_error_job" => {
            let fail = || async {
                Err(ErrorData::internal_error(
                    "protocol_error_job: an internal failure, on purpose",
                    None,
                ))
            };
            if as_task {
                Box::pin(async move { task(tasks.start(&owner, |_| fail())) })
            } else {
                Box::pin(async move { fail().await.map(Into::into) })
            }
        }
        "confirm_delete" => {
            let filename = args
                .get("filename")
                .and_then(Value::as_str)
                .unwrap_or("the file")
                .to_owned();
            if as_task {
                Box::pin(async move { task(tasks.start(&owner, |cx| confirm(cx, filename))) })
            } else {
                Box::pin(async move {
                    result(json!({"isError": true, "content": [text(
                        "confirm_delete asks for a confirmation: call it as a task (declare io.modelcontextprotocol/tasks)"
                    )]}))
                })
            }
        }
        "multi_input" => Box::pin(async move {
            if !as_task {
                return result(json!({"isError": true, "content": [text(
                    "multi_input asks two questions: call it as a task (declare io.modelcontextprotocol/tasks)"
                )]}));
            }
            task(tasks.start(&owner, |cx| async move {
                let asked = requests(json!({
                    "name": question("What is your name?", "name", "string"),
                    "confirm": question("Go ahead?", "confirm", "boolean")
                }));
                let Some(answers) = cx.ask(asked).await else {
                    return Err(ErrorData::internal_error("cancelled", None));
                };
                let name = answer(&answers, "name", "name").unwrap_or_default();
                let go = answer(&answers, "confirm", "confirm").unwrap_or_default();
                done(json!({"content": [text(&format!("name {name}, go ahead {go}"))]}))
            }))
        }),
        "test_tool_with_task" => {
            let answers = request.input_responses.clone().unwrap_or_default();
            Box::pin(async move {
                // Round 1 asks through a multi round-trip result; the round
                // that brings the name starts the task.
                let Some(name) = answer(&answers, "user_name", "name") else {
                    return Ok(CallToolResponse::InputRequired(
                        InputRequiredResult::from_input_requests(requests(json!({
                            "user_name": question("What is your name?", "name", "string")
                        }))),
                    ));
                };
                task(tasks.start(&owner, |_| async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    done(json!({"content": [text(&format!("Hello, {name}! (from a task)"))]}))
                }))
            })
        }
        _ => return None,
    };
    Some(answer)
}
