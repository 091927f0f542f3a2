//! The conformance suite's multi round-trip fixtures (SEP-2322,
//! `test_input_required_result_*`): synchronous tools that answer an
//! input-required result until the client retries with every answer they
//! asked for. They keep no state between rounds: what a round needs from the
//! previous one travels in the `requestState`, sealed by the server
//! ([`seal_state`] / [`open_state`]: HMAC-bound to the caller), so a state
//! altered by the client is refused with `-32602`.

use agentfile::server::mcp::ExtraAnswer;
use agentfile::server::mcp::mrtr::{open_state, seal_state};
use agentfile::server::mcp::principal::Principal;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, InputRequests, InputRequiredResult,
    InputResponses, Tool,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

use super::{no_args, result, text, tool};

pub const PREFIX: &str = "test_input_required_result_";

pub fn tools() -> Vec<Tool> {
    [
        ("elicitation", "Asks the user's name (one elicitation)"),
        ("sampling", "Asks the client's model (one sampling request)"),
        ("list_roots", "Asks for the client's roots"),
        ("request_state", "Asks once, with a request state to echo"),
        (
            "multiple_inputs",
            "Asks for an elicitation, a sample and the roots at once",
        ),
        ("multi_round", "Asks twice, one round after the other"),
        ("tampered_state", "Refuses a request state it did not seal"),
        (
            "capabilities",
            "Asks only through the methods the client declared",
        ),
    ]
    .into_iter()
    .map(|(name, what)| tool(&format!("{PREFIX}{name}"), what, no_args()))
    .collect()
}

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    }})
}

fn sample(prompt: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens
    }})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

/// An input-required result asking `requests` (a JSON object of key →
/// request), with `state` sealed for the caller.
fn ask(
    principal: &Principal,
    requests: Value,
    state: Option<&str>,
) -> Result<CallToolResponse, ErrorData> {
    let requests: InputRequests = serde_json::from_value(requests)
        .map_err(|e| ErrorData::internal_error(format!("bad fixture request: {e}"), None))?;
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(requests),
        state.map(|s| seal_state(principal, s)),
    )))
}

/// The accepted elicitation answer's `field`, when it is a string (or a
/// boolean, as text).
fn elicited(answers: &InputResponses, key: &str, field: &str) -> Option<String> {
    let a = answers.get(key)?;
    if a.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    match a.get("content")?.get(field)? {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The text of a sampling answer.
fn sampled(answers: &InputResponses, key: &str) -> Option<String> {
    let c = &answers.get(key)?["content"];
    c["text"]
        .as_str()
        .or_else(|| c[0]["text"].as_str())
        .map(str::to_owned)
}

/// The URIs of a `roots/list` answer.
fn rooted(answers: &InputResponses, key: &str) -> Option<Vec<String>> {
    let roots = answers.get(key)?.get("roots")?.as_array()?;
    Some(
        roots
            .iter()
            .filter_map(|r| r["uri"].as_str().map(str::to_owned))
            .collect(),
    )
}

/// The request's sealed state opened, `None` when it has none; `-32602`
/// when it is not one this server sealed for the caller.
fn state(
    principal: &Principal,
    request: &CallToolRequestParams,
) -> Result<Option<String>, ErrorData> {
    request
        .request_state
        .as_deref()
        .map(|s| open_state(principal, s))
        .transpose()
}

pub fn call(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<ExtraAnswer> {
    let which = request.name.strip_prefix(PREFIX)?.to_owned();
    let principal = Principal::of(context);
    let answers = request.input_responses.clone().unwrap_or_default();
    let caps = context.client_capabilities();
    let opened = state(&principal, request);
    let answer = move || -> Result<CallToolResponse, ErrorData> {
        let opened = opened?;
        let p = &principal;
        match which.as_str() {
            "elicitation" => match elicited(&answers, "user_name", "name") {
                Some(name) => result(json!({"content": [text(&format!("Hello, {name}!"))]})),
                // Missing, wrong or malformed answers: asked again.
                None => ask(
                    p,
                    json!({"user_name": elicit("What is your name?", "name", "string")}),
                    None,
                ),
            },
            "sampling" => match sampled(&answers, "capital_question") {
                Some(said) => result(json!({"content": [text(&said)]})),
                None => ask(
                    p,
                    json!({"capital_question": sample("What is the capital of France?", 100)}),
                    None,
                ),
            },
            "list_roots" => match rooted(&answers, "client_roots") {
                Some(uris) => result(
                    json!({"content": [text(&format!("Client roots: {}", uris.join(", ")))]}),
                ),
                None => ask(p, json!({"client_roots": roots()}), None),
            },
            "request_state" | "tampered_state" => {
                let confirmed = elicited(&answers, "confirm", "ok");
                match (opened.as_deref(), confirmed) {
                    (Some("confirm"), Some(ok)) => {
                        result(json!({"content": [text(&format!("state-ok: confirmed {ok}"))]}))
                    }
                    _ => ask(
                        p,
                        json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                        Some("confirm"),
                    ),
                }
            }
            "multiple_inputs" => {
                let name = elicited(&answers, "user_name", "name");
                let greeting = sampled(&answers, "greeting");
                let roots_ = rooted(&answers, "client_roots");
                match (opened.as_deref(), name, greeting, roots_) {
                    (Some("multiple"), Some(name), Some(greeting), Some(uris)) => result(json!({
                        "content": [text(&format!("{greeting} {name}; roots: {}", uris.join(", ")))]
                    })),
                    _ => ask(
                        p,
                        json!({
                            "user_name": elicit("What is your name?", "name", "string"),
                            "greeting": sample("Generate a greeting", 50),
                            "client_roots": roots()
                        }),
                        Some("multiple"),
                    ),
                }
            }
            "multi_round" => {
                let round1 = || {
                    ask(
                        p,
                        json!({"step1": elicit("Step 1: What is your name?", "name", "string")}),
                        Some("round1"),
                    )
                };
                match opened.as_deref() {
                    Some("round1") => match elicited(&answers, "step1", "name") {
                        Some(name) => ask(
                            p,
                            json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
                            Some(&format!("round2:{name}")),
                        ),
                        None => round1(),
                    },
                    Some(s) if s.starts_with("round2:") => {
                        let name = &s["round2:".len()..];
                        match elicited(&answers, "step2", "color") {
                            Some(color) => {
                                result(json!({"content": [text(&format!("{name} likes {color}"))]}))
                            }
                            None => ask(
                                p,
                                json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
                                Some(s),
                            ),
                        }
                    }
                    _ => round1(),
                }
            }
            "capabilities" => {
                let caps = caps.unwrap_or_default();
                let mut asked = serde_json::Map::new();
                if caps.elicitation.is_some() {
                    asked.insert(
                        "user_name".into(),
                        elicit("What is your name?", "name", "string"),
                    );
                }
                #[allow(deprecated)] // sampling: deprecated by 2026-07-28, still negotiable
                if caps.sampling.is_some() {
                    asked.insert("greeting".into(), sample("Generate a greeting", 50));
                }
                if caps.roots.is_some() {
                    asked.insert("client_roots".into(), roots());
                }
                let all_answered = asked.keys().all(|k| answers.contains_key(k));
                if asked.is_empty() || all_answered {
                    result(json!({"content": [text(&format!(
                        "asked through: {}",
                        if asked.is_empty() { "nothing (no input capability declared)".to_owned() }
                        else { asked.keys().cloned().collect::<Vec<_>>().join(", ") }
                    ))]}))
                } else {
                    ask(p, Value::Object(asked), None)
                }
            }
            _ => Err(ErrorData::invalid_params(
                format!("no fixture {PREFIX}{which}"),
                None,
            )),
        }
    };
    Some(Box::pin(async move { answer() }))
}
