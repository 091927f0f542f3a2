//! One goal: the model/tool loop, several agents in parallel, the synthesis, and
//! structured outputs.
//!
//! A *conversation* is one model working one goal: a system prompt (the agent's
//! persona and the runtime's rules), a user prompt (the outcome with variables
//! filled in, and the context it needs), then turns until the model answers
//! without calling a tool. Two tools belong to the runtime rather than the
//! policy-gated tool set, because they act on the run and not on the world:
//! `submit_output` (the goal's `-> fields`) and `signal_done` (a loop's explicit
//! completion).

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::{RunCx, Stop};
use agentfile_session::events::Scope;
use futures::StreamExt;

use agentfile_llm::{
    ChatRequest, ChatResponse, ContentBlock, LlmError, Message, Provider, StreamEvent, ToolCall,
    ToolDef, ToolResult,
};
use agentfile_wire::events::{EventBody, ToolCallInfo};

/// Replies with unparseable tool arguments the model may send in one
/// conversation before the goal fails.
const MAX_BAD_ARGUMENTS: u32 = 3;

/// The runtime's own tools.
pub const SUBMIT_OUTPUT: &str = "submit_output";
pub const SIGNAL_DONE: &str = "signal_done";

/// What a conversation needs beyond its prompts.
pub struct Conversation<'a> {
    pub scope: Scope,
    pub provider: Arc<dyn Provider>,
    pub system: String,
    pub user: String,
    /// Offer the tool set (false for a synthesis).
    pub use_tools: bool,
    /// Structured output fields to ask for.
    pub outputs: &'a [String],
    /// The node's `outputs` JSON Schema, when it declares one: a field it
    /// describes is declared to `submit_output` as it says (else a string).
    pub output_schema: Option<&'a Value>,
    /// Offer `signal_done` (goals inside a LOOP).
    pub can_signal_done: bool,
    /// A CONVERGE round after the first: the exact reply `CONVERGED` ends the
    /// conversation as a signal, before any structured-output parsing.
    pub accept_converged: bool,
    /// The agent file of the persona: its JavaScript tools are offered, and
    /// its startup tool runs before the first turn.
    pub card: Option<&'a agentfile_plan::agent::AgentCard>,
}

/// What a conversation produced.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// The final text (for structured goals: the fields as a JSON object).
    pub text: String,
    pub fields: BTreeMap<String, Value>,
    /// Calls to the tool set (not the runtime's own tools).
    pub tool_calls: u64,
    pub done: bool,
    /// The model replied exactly `CONVERGED` (only when the conversation
    /// accepted that signal); `text` and `fields` are then empty.
    pub converged: bool,
}

/// The reply that ends a CONVERGE goal: `CONVERGED`, give or take the
/// punctuation and markup models wrap around it.
pub fn says_converged(text: &str) -> bool {
    text.trim()
        .trim_matches(['.', '*', '`', '"', '\'', '!'])
        .trim()
        .eq_ignore_ascii_case("CONVERGED")
}

/// The running state of one conversation, carried from turn to turn.
struct Talk {
    request: ChatRequest,
    answer: Answer,
    /// The structured answer's one retry after unparseable text is spent.
    json_retry_used: bool,
    /// Calls to `signal_done` where it is not offered: answered once, then
    /// the goal ends on the model's text instead of burning every turn.
    stray_done: u32,
    /// Replies whose tool arguments were not valid JSON.
    bad_arguments: u32,
}

impl RunCx<'_> {
    /// Run one conversation to its end.
    pub(super) async fn converse(&self, mut conv: Conversation<'_>) -> Result<Answer, Stop> {
        let tools = self.conversation_tools(&conv).await?;
        let mut talk = Talk {
            request: ChatRequest {
                system: Some(std::mem::take(&mut conv.system)),
                messages: vec![Message::user(std::mem::take(&mut conv.user))],
                tools,
                ..ChatRequest::default()
            },
            answer: Answer::default(),
            json_retry_used: false,
            stray_done: 0,
            bad_arguments: 0,
        };
        let goal_turns = self
            .budget
            .limits()
            .goal_turns
            .unwrap_or(super::budget::DEFAULT_GOAL_TURNS);
        for turn in 1..=goal_turns {
            self.check_store()?;
            self.budget.check_turn().map_err(Stop::Budget)?;
            let Some(response) = self.model_turn(&conv, &mut talk, turn).await? else {
                continue;
            };
            self.budget.record_turn(
                response.usage.input_tokens,
                response.usage.output_tokens,
                response.cost_usd,
            );
            let calls: Vec<ToolCall> = response.tool_calls().into_iter().cloned().collect();
            let text = response.text();
            // Held for the commit of what follows at once: the first tool
            // call, or the goal's completion.
            self.defer(&conv.scope, response_event(&response, turn, &text, &calls));
            if let Some(reason) = self.budget.exhausted() {
                return Err(Stop::Budget(reason));
            }
            talk.request.messages.push(response.to_message());
            let next = if calls.is_empty() {
                talk.text_reply(&conv, text)?
            } else {
                self.tool_reply(&conv, &mut talk, &calls, text).await?
            };
            if next.is_break() {
                return Ok(talk.answer);
            }
        }
        Err(Stop::Failed(format!(
            "the goal used all {goal_turns} model turns without finishing"
        )))
    }

    /// The tools a conversation offers: the tool set (with the agent's own
    /// script tools), then the runtime's. Runs the agent's startup tool.
    async fn conversation_tools(&self, conv: &Conversation<'_>) -> Result<Vec<ToolDef>, Stop> {
        let mut tools: Vec<ToolDef> = if conv.use_tools {
            self.tool_defs.clone()
        } else {
            Vec::new()
        };
        if let Some(card) = conv.card {
            self.startup(&conv.scope, card).await?;
            if conv.use_tools
                && let Some(script) = &card.script
            {
                // The agent's own tools shadow a built-in of the same name.
                tools.retain(|t| card.script_tool(&t.name).is_none());
                tools.extend(script.tools.iter().map(|t| ToolDef {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: t.parameters.clone(),
                }));
            }
        }
        if !conv.outputs.is_empty() {
            tools.push(submit_output_def(conv.outputs, conv.output_schema));
        }
        if conv.can_signal_done {
            tools.push(signal_done_def());
        }
        Ok(tools)
    }

    /// Ask the model for its next reply. `None`: the reply's tool arguments
    /// were not valid JSON, the model has been told, and the turn is spent.
    async fn model_turn(
        &self,
        conv: &Conversation<'_>,
        talk: &mut Talk,
        turn: u32,
    ) -> Result<Option<ChatResponse>, Stop> {
        let digests = agentfile_llm::request_digests(&talk.request);
        self.emit(
            &conv.scope,
            EventBody::LlmRequest {
                model: conv.provider.model().to_owned(),
                turn,
                messages: talk.request.messages.len(),
                tools: talk.request.tools.len(),
                digests: digests.clone(),
            },
        );
        if let Some(replay) = &self.replay {
            // A replay asks no model: the recorded answer, or where it diverges.
            return replay
                .answer(&conv.scope, &digests)
                .map(Some)
                .map_err(|d| Stop::Failed(d.to_string()));
        }
        match self
            .stream_turn(
                &conv.scope,
                conv.provider.as_ref(),
                talk.request.clone(),
                turn,
            )
            .await
        {
            Ok(r) => Ok(Some(r)),
            Err(LlmError::Cancelled) => Err(self.stop_for_cancel()),
            Err(LlmError::InvalidToolArguments { tool, message, .. })
                if talk.bad_arguments < MAX_BAD_ARGUMENTS =>
            {
                // The model's own mistake: tell it and let it try again,
                // as for any other tool error, instead of ending the run.
                talk.bad_arguments += 1;
                let message = truncate(&message, 300);
                self.emit(
                    &conv.scope,
                    EventBody::Warning {
                        message: format!(
                            "the model's arguments for `{tool}` were not valid JSON ({message}); asked it to try again"
                        ),
                    },
                );
                talk.request.messages.push(Message::user(format!(
                    "Your last reply could not be used: the arguments of your call to `{tool}` are not valid JSON ({message}). Call the tool again with a flat, valid JSON object as its arguments."
                )));
                Ok(None)
            }
            Err(e) => Err(Stop::Failed(format!("model call failed: {e}"))),
        }
    }

    /// A reply with tool calls: answer each, then end the goal if its fields
    /// are in (or the model keeps signalling outside a loop), else hand the
    /// results back for another turn.
    async fn tool_reply(
        &self,
        conv: &Conversation<'_>,
        talk: &mut Talk,
        calls: &[ToolCall],
        text: String,
    ) -> Result<ControlFlow<()>, Stop> {
        let mut results = Vec::with_capacity(calls.len());
        let mut submitted = false;
        for call in calls {
            let result = match call.name.as_str() {
                SUBMIT_OUTPUT if !conv.outputs.is_empty() => {
                    let result = submit_output(call, conv.outputs, &mut talk.answer);
                    submitted |= !result.is_error;
                    result
                }
                SIGNAL_DONE if conv.can_signal_done => {
                    talk.answer.done = true;
                    reply(call, "Noted: the loop stops after this goal.".into(), false)
                }
                SIGNAL_DONE => {
                    talk.stray_done += 1;
                    stray_signal_done(call, conv.outputs)
                }
                _ => {
                    talk.answer.tool_calls += 1;
                    self.answer_tool_call(conv, call).await?
                }
            };
            results.push(result);
        }
        if talk.stray_done > 1 && conv.outputs.is_empty() {
            // Told once already: take what it said as the answer.
            self.emit(
                &conv.scope,
                EventBody::Warning {
                    message: format!(
                        "the model kept calling `{SIGNAL_DONE}` outside a loop; the goal ends on its last text"
                    ),
                },
            );
            talk.answer.text = if text.trim().is_empty() {
                last_text(&talk.request.messages)
            } else {
                text
            };
            return Ok(ControlFlow::Break(()));
        }
        if submitted {
            // The fields are in; no need for another turn.
            return Ok(ControlFlow::Break(()));
        }
        talk.request.messages.push(Message::tool_results(results));
        Ok(ControlFlow::Continue(()))
    }

    /// A call to the tool set: the agent's own script tool of that name, else
    /// the policy-gated tools.
    async fn answer_tool_call(
        &self,
        conv: &Conversation<'_>,
        call: &ToolCall,
    ) -> Result<ToolResult, Stop> {
        // A replay serves the agent's own script tools from the journal too.
        let script_card = conv.card.filter(|c| {
            self.replay.is_none() && conv.use_tools && c.script_tool(&call.name).is_some()
        });
        let Some(card) = script_card else {
            return self.call_tool(&conv.scope, call).await;
        };
        let out = self
            .script_call(
                &conv.scope,
                card,
                &call.id,
                &call.name,
                call.arguments.clone(),
            )
            .await?;
        Ok(reply(call, out.content, out.is_error))
    }

    /// One model call, streamed: text deltas go out as transient `llm_delta`
    /// events as they arrive, retries as `warning` events before their wait.
    async fn stream_turn(
        &self,
        scope: &Scope,
        provider: &dyn Provider,
        request: ChatRequest,
        turn: u32,
    ) -> Result<ChatResponse, LlmError> {
        let mut stream = provider.stream(request, self.cancel.clone());
        while let Some(item) = stream.next().await {
            match item? {
                StreamEvent::TextDelta(text) => self.svc.bus.emit_transient(
                    scope,
                    EventBody::LlmDelta {
                        turn,
                        text,
                        restart: false,
                    },
                ),
                StreamEvent::Restart { .. } => self.svc.bus.emit_transient(
                    scope,
                    EventBody::LlmDelta {
                        turn,
                        text: String::new(),
                        restart: true,
                    },
                ),
                StreamEvent::Retry {
                    attempt,
                    max_attempts,
                    wait,
                    reason,
                } => self.emit(
                    scope,
                    EventBody::Warning {
                        message: format!(
                            "model call failed: {}; retry {attempt}/{max_attempts} in {}",
                            truncate(&reason, 300),
                            agentfile_config::text::human_duration(wait)
                        ),
                    },
                ),
                StreamEvent::Done(response) => return Ok(response),
                StreamEvent::ToolCallStart { .. } | StreamEvent::ToolCallDelta { .. } => {}
            }
        }
        Err(LlmError::Protocol {
            provider: provider.name().to_owned(),
            message: "the stream ended without a final answer".to_owned(),
        })
    }

    /// One tool call through the gate, with its events.
    async fn call_tool(&self, scope: &Scope, call: &ToolCall) -> Result<ToolResult, Stop> {
        let (output, _) = self
            .gated_call(scope, &call.id, &call.name, call.arguments.clone())
            .await?;
        Ok(ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: output.content,
            is_error: output.is_error,
        })
    }

    /// One call through the policy gate, recorded as `tool_call`, then
    /// `policy_denied` when refused, then `tool_result`.
    pub(super) async fn gated_call(
        &self,
        scope: &Scope,
        id: &str,
        name: &str,
        arguments: Value,
    ) -> Result<(agentfile_tools::ToolOutput, Option<agentfile_tools::Denial>), Stop> {
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        self.check_store()?;
        self.budget.record_tool_call();
        self.emit(
            scope,
            EventBody::ToolCall {
                id: id.to_owned(),
                tool: name.to_owned(),
                arguments: arguments.clone(),
            },
        );
        let started = Instant::now();
        let result = match &self.replay {
            // A replay runs no tool: the recorded result, or where it diverges.
            Some(replay) => {
                let (content, is_error) = replay
                    .result(scope, id, name, &arguments)
                    .map_err(|d| Stop::Failed(d.to_string()))?;
                agentfile_tools::CallResult {
                    output: agentfile_tools::ToolOutput {
                        content,
                        is_error,
                        command: None,
                    },
                    denied: None,
                    duration: std::time::Duration::ZERO,
                }
            }
            None => self.tools.call(name, arguments, &self.tool_cx).await,
        };
        if let Some(d) = &result.denied {
            self.emit(
                scope,
                EventBody::PolicyDenied {
                    id: id.to_owned(),
                    tool: d.tool.clone(),
                    rule: d.rule.clone(),
                    reason: d.reason.clone(),
                },
            );
        }
        // Held for the commit of the next call or model request.
        self.defer(
            scope,
            EventBody::ToolResult {
                id: id.to_owned(),
                tool: name.to_owned(),
                content: result.output.content.clone(),
                is_error: result.output.is_error,
                duration_ms: started.elapsed().as_millis() as u64,
            },
        );
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        Ok((result.output, result.denied))
    }
}

impl Talk {
    /// A reply without tool calls: the convergence signal, the plain answer,
    /// or a structured answer given as text (asked for once more when it
    /// does not parse).
    fn text_reply(
        &mut self,
        conv: &Conversation<'_>,
        text: String,
    ) -> Result<ControlFlow<()>, Stop> {
        // The convergence signal is recognised before the answer is
        // read as structured output: `CONVERGED` is not a JSON object.
        if conv.accept_converged && says_converged(&text) {
            self.answer.converged = true;
            return Ok(ControlFlow::Break(()));
        }
        if conv.outputs.is_empty() {
            self.answer.text = text;
            return Ok(ControlFlow::Break(()));
        }
        // Structured goal answered in text: accept a JSON object, else
        // ask once more with the parse error, then give up.
        match parse_fields(&text, conv.outputs) {
            Ok(fields) => {
                self.answer.text = fields_text(&fields);
                self.answer.fields = fields;
                Ok(ControlFlow::Break(()))
            }
            Err(why) if !self.json_retry_used => {
                self.json_retry_used = true;
                self.request.messages.push(Message::user(format!(
                    "Your answer could not be used: {why}. Call `{SUBMIT_OUTPUT}` with the fields {}, or reply with only a JSON object with those keys.",
                    conv.outputs.join(", ")
                )));
                Ok(ControlFlow::Continue(()))
            }
            Err(why) => Err(Stop::Failed(format!(
                "the model did not produce the structured output ({}): {why}; its answer was: {}",
                conv.outputs.join(", "),
                truncate(&text, 2000)
            ))),
        }
    }
}

/// The `llm_response` event for one reply.
fn response_event(response: &ChatResponse, turn: u32, text: &str, calls: &[ToolCall]) -> EventBody {
    EventBody::LlmResponse {
        model: response.model.clone(),
        turn,
        input_tokens: response.usage.input_tokens,
        output_tokens: response.usage.output_tokens,
        latency_ms: response.latency.as_millis() as u64,
        cost_usd: response.cost_usd,
        stop_reason: response
            .raw_stop_reason
            .clone()
            .unwrap_or_else(|| format!("{:?}", response.stop_reason)),
        text: text.to_owned(),
        tool_calls: calls
            .iter()
            .map(|c| ToolCallInfo {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect(),
    }
}

/// The result handed back for one call.
fn reply(call: &ToolCall, content: String, is_error: bool) -> ToolResult {
    ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error,
    }
}

/// A call to `submit_output`: its fields become the answer, or the model is
/// told why they cannot.
fn submit_output(call: &ToolCall, outputs: &[String], answer: &mut Answer) -> ToolResult {
    match fields_from_value(&call.arguments, outputs) {
        Ok(fields) => {
            answer.text = fields_text(&fields);
            answer.fields = fields;
            reply(call, "Output recorded.".into(), false)
        }
        Err(why) => reply(call, why.to_string(), true),
    }
}

/// A call to `signal_done` outside a loop: tell the model how to finish.
fn stray_signal_done(call: &ToolCall, outputs: &[String]) -> ToolResult {
    let finish = if outputs.is_empty() {
        "reply with your final answer and no tool calls".to_owned()
    } else {
        format!("call `{SUBMIT_OUTPUT}` with your result")
    };
    reply(
        call,
        format!(
            "`{SIGNAL_DONE}` is only for goals inside a loop, and this goal is not in one; there is nothing to signal. To finish, {finish}."
        ),
        true,
    )
}

/// `submit_output` with one parameter per field: as the node's `outputs`
/// schema declares it, else a string.
fn submit_output_def(fields: &[String], schema: Option<&Value>) -> ToolDef {
    let declared = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let props: serde_json::Map<String, Value> = fields
        .iter()
        .map(|f| {
            let description = Value::String(format!("The `{f}` output."));
            let prop = match declared.and_then(|d| d.get(f)).and_then(Value::as_object) {
                Some(p) => {
                    let mut p = p.clone();
                    p.entry("description").or_insert(description);
                    Value::Object(p)
                }
                None => json!({"type": "string", "description": description}),
            };
            (f.clone(), prop)
        })
        .collect();
    ToolDef {
        name: SUBMIT_OUTPUT.into(),
        description: format!(
            "Submit this goal's final result. Call it once, when you are done, with every field: {}.",
            fields.join(", ")
        ),
        parameters: json!({
            "type": "object",
            "properties": props,
            "required": fields,
        }),
    }
}

fn signal_done_def() -> ToolDef {
    ToolDef {
        name: SIGNAL_DONE.into(),
        description: "Call this when the work of the loop you are in is complete (for example, every test passes), so it stops repeating. Do not call it while work remains.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"reason": {"type": "string", "description": "Why the work is complete."}},
        }),
    }
}

/// The fields as the goal's text output: a JSON object.
fn fields_text(fields: &BTreeMap<String, Value>) -> String {
    serde_json::to_string_pretty(fields).unwrap_or_default()
}

/// Why a model's answer is not the goal's structured output: what the model
/// is told when it may try again (as `submit_output`'s error, or in the
/// retry prompt), and part of the run's failure when it may not.
#[derive(Debug, thiserror::Error)]
pub enum FieldsError {
    /// The wanted fields.
    #[error("expected a JSON object with the fields {}", .0.join(", "))]
    NotAnObject(Vec<String>),
    /// The fields it lacks.
    #[error("missing field(s): {}", .0.join(", "))]
    Missing(Vec<String>),
    #[error("invalid JSON: {0}")]
    Json(serde_json::Error),
    #[error("the answer is not a JSON object")]
    NoObject,
}

fn fields_from_value(v: &Value, wanted: &[String]) -> Result<BTreeMap<String, Value>, FieldsError> {
    let Some(obj) = v.as_object() else {
        return Err(FieldsError::NotAnObject(wanted.to_vec()));
    };
    let missing: Vec<String> = wanted
        .iter()
        .filter(|w| !obj.contains_key(w.as_str()))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(FieldsError::Missing(missing));
    }
    Ok(wanted
        .iter()
        .map(|w| (w.clone(), obj.get(w).cloned().unwrap_or(Value::Null)))
        .collect())
}

/// Find the JSON object in a model's text answer: the whole text, a fenced
/// block, or the outermost `{…}`.
pub fn parse_fields(text: &str, wanted: &[String]) -> Result<BTreeMap<String, Value>, FieldsError> {
    let t = text.trim();
    let mut candidates: Vec<&str> = vec![t];
    if let Some(start) = t.find("```") {
        let rest = &t[start + 3..];
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        if let Some(end) = rest.find("```") {
            candidates.push(rest[..end].trim());
        }
    }
    if let (Some(a), Some(b)) = (t.find('{'), t.rfind('}'))
        && a < b
    {
        candidates.push(&t[a..=b]);
    }
    let mut last_err = FieldsError::NoObject;
    for c in candidates {
        match serde_json::from_str::<Value>(c) {
            Ok(v) => match fields_from_value(&v, wanted) {
                Ok(f) => return Ok(f),
                Err(e) => last_err = e,
            },
            Err(e) => last_err = FieldsError::Json(e),
        }
    }
    Err(last_err)
}

pub use agentfile_config::text::truncate;

/// The last non-empty assistant text in a conversation.
fn last_text(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .filter(|m| m.role == agentfile_llm::Role::Assistant)
        .flat_map(|m| m.content.iter().rev())
        .find_map(|b| match b {
            ContentBlock::Text { text } if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Text blocks of a message list, for tests and transcripts.
pub fn text_of(messages: &[Message]) -> String {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fields_from_text_forms() {
        let want = w(&["a", "b"]);
        assert!(parse_fields(r#"{"a": 1, "b": "x"}"#, &want).is_ok());
        assert!(parse_fields("Here:\n```json\n{\"a\": 1, \"b\": 2}\n```\n", &want).is_ok());
        assert!(parse_fields("Result: {\"a\": [1], \"b\": {}} done", &want).is_ok());
        let e = parse_fields(r#"{"a": 1}"#, &want).unwrap_err().to_string();
        assert!(e.contains("missing field(s): b"), "{e}");
        assert!(parse_fields("no json here", &want).is_err());
    }

    #[test]
    fn submit_output_declares_the_schemas_types() {
        let want = w(&["files", "summary"]);
        // No schema: every field a string, byte for byte as before (the demo
        // cassette replays these requests).
        let plain = serde_json::to_string(&submit_output_def(&want, None).parameters).unwrap();
        assert_eq!(
            plain,
            r#"{"type":"object","properties":{"files":{"type":"string","description":"The `files` output."},"summary":{"type":"string","description":"The `summary` output."}},"required":["files","summary"]}"#
        );
        let schema = json!({"type": "object", "properties": {
            "files": {"type": "array", "items": {"type": "string"}},
            "summary": {"type": "string", "description": "One line."},
        }});
        let typed = submit_output_def(&want, Some(&schema)).parameters;
        assert_eq!(
            typed["properties"]["files"],
            json!({"type": "array", "items": {"type": "string"}, "description": "The `files` output."})
        );
        assert_eq!(
            typed["properties"]["summary"],
            json!({"type": "string", "description": "One line."})
        );
        assert_eq!(typed["required"], json!(["files", "summary"]));
    }
}
