//! What a tool call returns: result builders, the output schemas clients
//! check results against, and a finished run as a tool result. Shared by the
//! fixed tools ([`super::tools`]), the `run_<name>` workflow tools
//! ([`super::workflows`]), tasks in both generations ([`super::tasks`],
//! [`super::tasks_v1`]) and input-required results ([`super::mrtr`]), which
//! sit above it and never need each other for it.

use std::fmt::Write as _;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use agentfile_wire::events::RunResult;

fn strip(root: schemars::Schema) -> Arc<JsonObject> {
    let mut v = serde_json::to_value(root).unwrap_or(Value::Null);
    portable_formats(&mut v);
    let mut o = match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    // The type's name and doc comment are noise to a model; the tool says it.
    o.remove("title");
    o.remove("description");
    Arc::new(o)
}

/// The `format`s schemars writes for Rust's number types (`uint64`,
/// `int32`, `double`, …) are none of JSON Schema's: clients warn about each
/// one they meet (Claude Code prints `unknown format "uint64" ignored` on the
/// user's terminal, once per use). Dropped here; an unsigned type keeps its
/// `minimum: 0`, which says the same in words every validator knows.
fn portable_formats(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let numeric = o.get("format").and_then(Value::as_str).is_some_and(|f| {
                matches!(f, "int" | "uint" | "double" | "float")
                    || ["int", "uint"].iter().any(|p| {
                        f.strip_prefix(p)
                            .is_some_and(|bits| matches!(bits, "8" | "16" | "32" | "64" | "128"))
                    })
            });
            if numeric {
                let unsigned = o
                    .get("format")
                    .and_then(Value::as_str)
                    .is_some_and(|f| f.starts_with("uint"));
                o.shift_remove("format");
                if unsigned && !o.contains_key("minimum") {
                    o.insert("minimum".into(), json!(0));
                }
            }
            o.values_mut().for_each(portable_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(portable_formats),
        _ => {}
    }
}

/// JSON Schema (2020-12, no `$ref`s: some clients cannot follow them) of what
/// `T` accepts.
pub fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let settings = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let mut schema = strip(settings.into_generator().into_root_schema_for::<T>());
    // A tool without arguments still lists its (no) properties: some clients
    // require the member.
    if !schema.contains_key("properties") {
        Arc::make_mut(&mut schema).insert("properties".into(), json!({}));
    }
    schema
}

/// JSON Schema of what `T` serializes to.
pub fn output_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let settings = SchemaSettings::draft2020_12()
        .for_serialize()
        .with(|s| s.inline_subschemas = true);
    strip(settings.into_generator().into_root_schema_for::<T>())
}

/// `run`'s output: a [`RunResult`] when the run ended, or just `session_id`
/// and `status` when it was started with `wait: false` or waits for approval.
pub fn run_output_schema() -> Arc<JsonObject> {
    let mut s = output_schema::<RunResult>().as_ref().clone();
    s.insert("required".into(), json!(["session_id", "status"]));
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        props.insert(
            "status".into(),
            json!({"type": "string", "description": "completed, failed or cancelled when the run ended; suspended when it waits for a `signal` (see waiting_for); queued, running or waiting_approval otherwise"}),
        );
        props.insert(
            "last_seq".into(),
            json!({"type": "integer", "description": "The last event's seq so far: pass it as `after_seq` to `event`"}),
        );
        props.insert(
            "resume_with".into(),
            json!({"type": "string", "enum": ["approve", "signal"], "description": "When the run waits (waiting_approval, suspended) and the client could not be asked: the tool that resumes it"}),
        );
    }
    Arc::new(s)
}

pub(super) fn text_result(
    text: String,
    structured: Option<Value>,
    is_error: bool,
) -> CallToolResult {
    let mut r = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    r.structured_content = structured;
    r
}

pub(super) fn structured<T: serde::Serialize>(v: &T) -> Option<Value> {
    serde_json::to_value(v).ok()
}

pub(super) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

fn usage_text(r: &RunResult) -> String {
    let u = &r.usage;
    let mut s = format!(
        "{} model turn{}, {} tool call{}, {} tokens",
        u.turns,
        if u.turns == 1 { "" } else { "s" },
        u.tool_calls,
        if u.tool_calls == 1 { "" } else { "s" },
        u.input_tokens + u.output_tokens
    );
    if let Some(c) = u.cost_usd {
        let _ = write!(s, ", ${c:.4}");
    }
    s
}

/// A finished run for the model: the outputs as text, the result as structure.
pub fn run_result(r: &RunResult) -> CallToolResult {
    let id = &r.session_id;
    let mut t = String::new();
    let ok = r.status == "completed";
    if r.status == "suspended" {
        // Not a failure: the run waits for an event, stored, until `signal`.
        let events: Vec<String> = r.waiting_for.iter().map(|e| format!("`{e}`")).collect();
        let first = r.waiting_for.first().map_or("EVENT", String::as_str);
        let _ = write!(
            t,
            "The run is suspended (session {id}), waiting for {}. It stays stored until a signal resumes it: call `signal` {{\"session_id\": \"{id}\", \"event\": \"{first}\", \"payload\": {{…}}}}, then follow it with `event` until `done`. ({}.)",
            if events.is_empty() {
                "an event".to_owned()
            } else {
                format!("one of {}", events.join(", "))
            },
            usage_text(r)
        );
        // No outputs yet: left out, so the workflow's output schema (which
        // describes a finished run's) is not claimed for them.
        let mut v = structured(r);
        if let Some(Value::Object(o)) = &mut v {
            if r.outputs.is_empty() {
                o.remove("outputs");
            }
            o.insert("resume_with".into(), json!("signal"));
        }
        return text_result(t, v, false);
    }
    if ok {
        let _ = writeln!(t, "The run completed (session {id}).");
        for (goal, v) in &r.outputs {
            let _ = write!(t, "\n## {goal}\n\n{}\n", value_text(v));
        }
        let _ = write!(t, "\n{}.", usage_text(r));
    } else {
        let reason = r.termination_reason.as_str();
        let why = r.error.as_deref().unwrap_or(reason);
        let _ = writeln!(
            t,
            "The run {} (session {id}): {}: {why}",
            r.status, r.termination_reason
        );
        if !r.outputs.is_empty() {
            let _ = writeln!(t, "\nOutputs of the goals that finished:");
            for (goal, v) in &r.outputs {
                let _ = write!(t, "\n## {goal}\n\n{}\n", value_text(v));
            }
        }
        let _ = write!(
            t,
            "\n`event` {{\"session_id\": \"{id}\"}} shows what happened; after fixing the cause, `run` {{\"resume\": \"{id}\"}} continues from the last finished goal. ({}.)",
            usage_text(r)
        );
    }
    text_result(t, structured(r), !ok)
}

/// A result that breaks the tool's own output schema would be refused by
/// the client: say so as a tool error instead.
pub(crate) fn check_outputs(tool: &rmcp::model::Tool, r: &mut CallToolResult) {
    if r.is_error != Some(true)
        && let Some(s) = &r.structured_content
        && let Some(problems) = outputs_problems(tool, s)
    {
        r.is_error = Some(true);
        r.content.push(ContentBlock::text(format!(
            "The run completed, but its outputs do not match the workflow's `outputs` schema: {}",
            problems.join("; ")
        )));
    }
}

/// Whether a finished run's `outputs` break the tool's output schema (a
/// client would refuse the result): the problems, for the caller.
pub fn outputs_problems(tool: &Tool, structured: &Value) -> Option<Vec<String>> {
    if structured.get("status").and_then(Value::as_str) != Some("completed") {
        return None;
    }
    let schema = tool
        .output_schema
        .as_ref()?
        .get("properties")?
        .get("outputs")?;
    let outputs = structured.get("outputs")?;
    agentfile_plan::values::validate_value(schema, outputs).err()
}
