//! OpenAI Chat Completions (`POST {base}/chat/completions`), streaming and not. The
//! same code serves OpenRouter, Ollama's `/v1` endpoint and any compatible server.
//!
//! Mapping: the system prompt is a leading `system` message; an assistant turn is
//! `content` plus `tool_calls` (arguments as a JSON *string*); each tool result is
//! its own `tool` message with `tool_call_id`. The format has no error flag for
//! tool results, so a failed tool's content is prefixed with `Error: `. Tools are
//! `{type: "function", function: {name, description, parameters}}`.
//!
//! Streaming asks for `stream_options.include_usage`, so the last chunk before
//! `data: [DONE]` carries usage. Tool calls stream as deltas keyed by `index`: the
//! first has `id` and `function.name`, the rest `function.arguments` fragments.
//! Compatible servers differ in small ways that are tolerated here: arguments sent
//! as an object instead of a string, tool-call deltas without `index`, no ids, no
//! `[DONE]` after the final chunk, `finish_reason: "stop"` with tool calls.

use std::collections::BTreeMap;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};

use crate::error::truncate;
use crate::http::{
    CallParams, DecodeContext, DecodeError, HeaderError, Parsed, StreamDecoder, WireFormat,
    parse_arguments, temperature_json,
};
use crate::schema::{SchemaTarget, clean_cached};
use crate::sse::SseEvent;
use crate::types::{ChatRequest, ContentBlock, Role, StopReason, StreamEvent, ToolCall, Usage};

/// OpenAI's API root.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// OpenRouter's OpenAI-compatible root.
pub const OPENROUTER_BASE_URL: &str = "https://openrouter.ai/api/v1";
/// A local Ollama's OpenAI-compatible root.
pub const OLLAMA_BASE_URL: &str = "http://localhost:11434/v1";

/// The OpenAI wire format, in the variant a given service expects.
#[derive(Debug, Clone, Copy)]
pub struct OpenAi {
    /// OpenAI itself deprecated `max_tokens` for `max_completion_tokens` (and its
    /// reasoning models reject the old name); compatible servers mostly know only
    /// `max_tokens`.
    max_tokens_field: &'static str,
}

impl OpenAi {
    /// The variant for the configured provider name.
    pub fn for_provider(provider: &str) -> Self {
        OpenAi {
            max_tokens_field: if provider == "openai" {
                "max_completion_tokens"
            } else {
                "max_tokens"
            },
        }
    }
}

impl WireFormat for OpenAi {
    fn url(&self, base: &str, _model: &str, _stream: bool) -> String {
        // `http://host:port` alone means the usual `/v1` root.
        let bare = reqwest::Url::parse(base).is_ok_and(|u| u.path() == "/" || u.path().is_empty());
        if bare {
            format!("{base}/v1/chat/completions")
        } else {
            format!("{base}/chat/completions")
        }
    }

    fn headers(&self, api_key: Option<&str>) -> Result<HeaderMap, HeaderError> {
        let mut h = HeaderMap::new();
        if let Some(key) = api_key {
            let mut v =
                HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| HeaderError::ApiKey)?;
            v.set_sensitive(true);
            h.insert(AUTHORIZATION, v);
        }
        Ok(h)
    }

    fn body(&self, request: &ChatRequest, call: &CallParams<'_>) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
            messages.push(json!({"role": "system", "content": system}));
        }
        for m in &request.messages {
            push_message(&mut messages, m.role, &m.content);
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(call.model));
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    // Built by moving values in: `json!` would copy the schema again.
                    let mut function = Map::new();
                    function.insert("name".into(), Value::String(t.name.clone()));
                    function.insert("description".into(), Value::String(t.description.clone()));
                    function.insert(
                        "parameters".into(),
                        clean_cached(&t.name, &t.parameters, SchemaTarget::OpenAi),
                    );
                    let mut tool = Map::new();
                    tool.insert("type".into(), Value::String("function".into()));
                    tool.insert("function".into(), Value::Object(function));
                    Value::Object(tool)
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(n) = call.max_tokens {
            body.insert(self.max_tokens_field.into(), json!(n));
        }
        if let Some(t) = call.temperature {
            body.insert("temperature".into(), temperature_json(t));
        }
        if call.stream {
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        Value::Object(body)
    }

    fn parse(&self, body: &[u8], _ctx: &DecodeContext) -> Result<Parsed, DecodeError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| DecodeError::Protocol(format!("the body is not JSON: {e}")))?;
        let choice = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| {
                DecodeError::Protocol(format!(
                    "the response has no `choices`: {}",
                    truncate(&v.to_string(), 300)
                ))
            })?;
        let message = choice
            .get("message")
            .ok_or_else(|| DecodeError::Protocol("the first choice has no `message`".to_owned()))?;
        let mut content = Vec::new();
        let text = message.get("content").and_then(Value::as_str).unwrap_or("");
        let refusal = message.get("refusal").and_then(Value::as_str);
        if !text.is_empty() {
            content.push(ContentBlock::Text {
                text: text.to_owned(),
            });
        } else if let Some(r) = refusal {
            content.push(ContentBlock::Text { text: r.to_owned() });
        }
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
            for (i, c) in calls.iter().enumerate() {
                let function = c.get("function").unwrap_or(&Value::Null);
                let name = function
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| DecodeError::Protocol(format!("tool call {i} has no name")))?
                    .to_owned();
                let id = c
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map_or_else(|| format!("call_{i}"), str::to_owned);
                let arguments = match function.get("arguments") {
                    Some(Value::String(s)) => parse_arguments(&name, &id, s)?,
                    Some(Value::Null) | None => json!({}),
                    Some(other) => other.clone(),
                };
                content.push(ContentBlock::ToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                    signature: None,
                }));
            }
        }
        let raw = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let stop_reason = stop(raw.as_deref(), &content, refusal.is_some());
        Ok(Parsed {
            content,
            stop_reason,
            raw_stop_reason: raw,
            usage: usage(v.get("usage")),
            model: v.get("model").and_then(Value::as_str).map(str::to_owned),
        })
    }

    fn decoder(&self, _ctx: &DecodeContext) -> Box<dyn StreamDecoder> {
        Box::<Decoder>::default()
    }
}

fn push_message(out: &mut Vec<Value>, role: Role, content: &[ContentBlock]) {
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in content {
        match (role, block) {
            (_, ContentBlock::Text { text: t }) => {
                if !text.is_empty() && !t.is_empty() {
                    text.push_str("\n\n");
                }
                text.push_str(t);
            }
            (Role::Assistant, ContentBlock::ToolCall(c)) => calls.push(json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments.to_string()},
            })),
            (Role::User, ContentBlock::ToolResult(r)) => {
                let content = if r.is_error {
                    format!("Error: {}", r.content)
                } else {
                    r.content.clone()
                };
                // Tool messages must directly follow the assistant turn that called.
                out.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": content}));
            }
            _ => {}
        }
    }
    match role {
        Role::User if !text.is_empty() => out.push(json!({"role": "user", "content": text})),
        Role::User => {}
        Role::Assistant => {
            let mut m = json!({"role": "assistant"});
            m["content"] = if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            if !calls.is_empty() {
                m["tool_calls"] = Value::Array(calls);
            }
            out.push(m);
        }
    }
}

fn stop(raw: Option<&str>, content: &[ContentBlock], refused: bool) -> StopReason {
    let has_calls = content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolCall(_)));
    match raw {
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::ContentFilter,
        _ if has_calls => StopReason::ToolUse,
        _ if refused => StopReason::ContentFilter,
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
        _ => StopReason::Other,
    }
}

fn usage(u: Option<&Value>) -> Usage {
    let get = |f: &str| {
        u.and_then(|u| u.get(f))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Usage {
        input_tokens: get("prompt_tokens"),
        output_tokens: get("completion_tokens"),
    }
}

struct Call {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Default)]
struct Decoder {
    model: Option<String>,
    text: String,
    refusal: String,
    calls: Vec<Call>,
    /// Wire `index` → position in `calls`.
    by_index: BTreeMap<u64, usize>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    done: bool,
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            DecodeError::Protocol(format!(
                "a stream chunk is not JSON ({e}): {}",
                truncate(data, 200)
            ))
        })?;
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(stream_error(err));
        }
        if let Some(m) = chunk
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
        {
            self.model = Some(m.to_owned());
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        let Some(choice) = choice else {
            return Ok(());
        };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(r.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(());
        };
        if let Some(t) = delta.get("content").and_then(Value::as_str)
            && !t.is_empty()
        {
            self.text.push_str(t);
            out.push(StreamEvent::TextDelta(t.to_owned()));
        }
        if let Some(r) = delta.get("refusal").and_then(Value::as_str) {
            self.refusal.push_str(r);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for tc in calls {
                self.tool_call_delta(tc, out)?;
            }
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(self: Box<Self>) -> Result<Parsed, DecodeError> {
        // Some compatible servers close after the final chunk without `[DONE]`; the
        // finish reason shows the answer was complete.
        if !self.done && self.finish_reason.is_none() {
            return Err(DecodeError::Incomplete(
                "the stream ended before a `finish_reason` or `[DONE]`".to_owned(),
            ));
        }
        let mut content = Vec::new();
        let refused = !self.refusal.is_empty();
        if !self.text.is_empty() {
            content.push(ContentBlock::Text { text: self.text });
        } else if refused {
            content.push(ContentBlock::Text { text: self.refusal });
        }
        for call in self.calls {
            let arguments = parse_arguments(&call.name, &call.id, &call.arguments)?;
            content.push(ContentBlock::ToolCall(ToolCall {
                id: call.id,
                name: call.name,
                arguments,
                signature: None,
            }));
        }
        let stop_reason = stop(self.finish_reason.as_deref(), &content, refused);
        Ok(Parsed {
            content,
            stop_reason,
            raw_stop_reason: self.finish_reason,
            usage: usage(self.usage.as_ref()),
            model: self.model,
        })
    }
}

impl Decoder {
    fn tool_call_delta(
        &mut self,
        tc: &Value,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), DecodeError> {
        let id = tc
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let function = tc.get("function").unwrap_or(&Value::Null);
        let name = function.get("name").and_then(Value::as_str).unwrap_or("");
        let position = match tc.get("index").and_then(Value::as_u64) {
            Some(index) => match self.by_index.get(&index) {
                Some(&p) => p,
                None => {
                    let p = self.new_call(id, name, out);
                    self.by_index.insert(index, p);
                    p
                }
            },
            // No index: a new id starts a new call, anything else continues the last.
            None => match (self.calls.last(), id) {
                (Some(last), Some(id)) if last.id != id => self.new_call(Some(id), name, out),
                (Some(_), _) => self.calls.len() - 1,
                (None, _) => self.new_call(id, name, out),
            },
        };
        let Some(call) = self.calls.get_mut(position) else {
            return Err(DecodeError::Protocol(
                "a tool-call delta out of order".to_owned(),
            ));
        };
        if call.name.is_empty() && !name.is_empty() {
            call.name = name.to_owned();
        }
        let fragment = match function.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        if !fragment.is_empty() {
            call.arguments.push_str(&fragment);
            out.push(StreamEvent::ToolCallDelta {
                index: position,
                fragment,
            });
        }
        Ok(())
    }

    fn new_call(&mut self, id: Option<&str>, name: &str, out: &mut Vec<StreamEvent>) -> usize {
        let position = self.calls.len();
        let id = id.map_or_else(|| format!("call_{position}"), str::to_owned);
        out.push(StreamEvent::ToolCallStart {
            index: position,
            id: id.clone(),
            name: name.to_owned(),
        });
        self.calls.push(Call {
            id,
            name: name.to_owned(),
            arguments: String::new(),
        });
        position
    }
}

fn stream_error(err: &Value) -> DecodeError {
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| err.as_str())
        .unwrap_or("the stream reported an error without a message")
        .to_owned();
    let kind = err
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            err.get("code")
                .map(|c| c.to_string().trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| "error".to_owned());
    let retryable = kind
        .parse::<u16>()
        .is_ok_and(crate::error::is_retryable_status)
        || matches!(
            kind.as_str(),
            "server_error" | "rate_limit_exceeded" | "overloaded_error" | "timeout"
        );
    DecodeError::Api {
        kind,
        message,
        retryable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(data: &str) -> SseEvent {
        SseEvent {
            event: String::new(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn tool_calls_without_index_or_id_are_assembled() {
        let mut d: Box<dyn StreamDecoder> = Box::<Decoder>::default();
        let mut out = Vec::new();
        for data in [
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"read","arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"th\":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ] {
            d.event(&ev(data), &mut out).unwrap();
        }
        let p = d.finish().unwrap();
        assert_eq!(p.stop_reason, StopReason::ToolUse);
        assert_eq!(p.raw_stop_reason.as_deref(), Some("stop"));
        let ContentBlock::ToolCall(c) = &p.content[0] else {
            panic!()
        };
        assert_eq!((c.id.as_str(), c.name.as_str()), ("call_0", "read"));
        assert_eq!(c.arguments, json!({"path": 1}));
    }

    #[test]
    fn error_chunk_is_reported() {
        let mut d = Decoder::default();
        let e = d
            .event(
                &ev(r#"{"error":{"code":502,"message":"upstream died"}}"#),
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(
            e,
            DecodeError::Api {
                kind: "502".into(),
                message: "upstream died".into(),
                retryable: true
            }
        );
    }

    #[test]
    fn invalid_arguments_are_a_clear_error() {
        let mut d: Box<dyn StreamDecoder> = Box::<Decoder>::default();
        let mut out = Vec::new();
        d.event(
            &ev(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"w","arguments":"{oops"}}]},"finish_reason":"tool_calls"}]}"#),
            &mut out,
        )
        .unwrap();
        d.event(&ev("[DONE]"), &mut out).unwrap();
        assert!(matches!(d.finish(), Err(DecodeError::ToolArguments { .. })));
    }

    #[test]
    fn bare_host_gets_v1() {
        let w = OpenAi::for_provider("ollama");
        assert_eq!(
            w.url("http://127.0.0.1:9", "m", false),
            "http://127.0.0.1:9/v1/chat/completions"
        );
        assert_eq!(
            w.url("https://openrouter.ai/api/v1", "m", true),
            "https://openrouter.ai/api/v1/chat/completions"
        );
    }
}
