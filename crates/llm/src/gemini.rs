//! Google Gemini `generateContent` and `streamGenerateContent?alt=sse`.
//!
//! Mapping: the system prompt is `systemInstruction`; turns are `contents` with
//! roles `user` and `model`; a tool call is a `functionCall` part, a tool result a
//! `functionResponse` part (in a `user` turn) whose `response` is
//! `{"output": …}` or, for a failed tool, `{"error": …}`, as the API documents.
//! Tools are one `functionDeclarations` list, with schemas cleaned to Gemini's
//! subset (see [`crate::schema`]). The key goes in the `x-goog-api-key`
//! header, never in the URL, so it cannot leak through a logged URL.
//!
//! Ids: Gemini often gives function calls no `id`. We then make one up that is
//! stable for a given request (a hash of the request body and the call's
//! position, prefixed [`SYNTHETIC_ID_PREFIX`]) and, when the history is sent back,
//! leave such ids out, matching results to calls by name and order as Gemini does.
//! Ids Gemini did give are sent back as they came. Gemini 3 also requires each
//! call's `thoughtSignature` back; it is kept in [`ToolCall::signature`].
//!
//! Streaming: each SSE event is a whole `GenerateContentResponse`. Unlike the other
//! two formats, Gemini sends every function call complete in one part, never split
//! across events, so a call's arguments arrive as a single
//! [`StreamEvent::ToolCallDelta`]. The stream has no end marker: it is complete when
//! the connection closes after a chunk with `finishReason`.

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};

use crate::error::truncate;
use crate::http::{
    CallParams, DecodeContext, DecodeError, HeaderError, Parsed, StreamDecoder, WireFormat,
    temperature_json,
};
use crate::schema::{SchemaTarget, clean_cached};
use crate::sse::SseEvent;
use crate::types::{ChatRequest, ContentBlock, Role, StopReason, StreamEvent, ToolCall, Usage};

/// The Generative Language API root.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// Ids we made up start with this, so they are not sent back to Gemini as its own.
pub const SYNTHETIC_ID_PREFIX: &str = "gemini_call_";

/// The Gemini wire format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gemini;

impl WireFormat for Gemini {
    fn url(&self, base: &str, model: &str, stream: bool) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        let root = if base.ends_with("/v1beta") || base.ends_with("/v1") {
            base.to_owned()
        } else {
            format!("{base}/v1beta")
        };
        if stream {
            format!("{root}/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{root}/models/{model}:generateContent")
        }
    }

    fn headers(&self, api_key: Option<&str>) -> Result<HeaderMap, HeaderError> {
        let mut h = HeaderMap::new();
        if let Some(key) = api_key {
            let mut v = HeaderValue::from_str(key).map_err(|_| HeaderError::ApiKey)?;
            v.set_sensitive(true);
            h.insert("x-goog-api-key", v);
        }
        Ok(h)
    }

    fn body(&self, request: &ChatRequest, call: &CallParams<'_>) -> Value {
        let mut body = Map::new();
        let contents: Vec<Value> = request
            .messages
            .iter()
            .filter_map(|m| {
                let parts = parts(m.role, &m.content);
                (!parts.is_empty()).then(|| {
                    json!({
                        "role": match m.role { Role::User => "user", Role::Assistant => "model" },
                        "parts": parts,
                    })
                })
            })
            .collect();
        body.insert("contents".into(), Value::Array(contents));
        if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system}]}),
            );
        }
        if !request.tools.is_empty() {
            let declarations: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    let mut d = json!({"name": t.name, "description": t.description});
                    let params = clean_cached(&t.name, &t.parameters, SchemaTarget::Gemini);
                    // An object with no properties is rejected; no parameters is not.
                    if params.get("properties").is_some() {
                        d["parameters"] = params;
                    }
                    d
                })
                .collect();
            // Moved in: `json!` would copy every schema again.
            let mut group = Map::new();
            group.insert("functionDeclarations".into(), Value::Array(declarations));
            body.insert("tools".into(), Value::Array(vec![Value::Object(group)]));
        }
        let mut generation = Map::new();
        if let Some(n) = call.max_tokens {
            generation.insert("maxOutputTokens".into(), json!(n));
        }
        if let Some(t) = call.temperature {
            generation.insert("temperature".into(), temperature_json(t));
        }
        if !generation.is_empty() {
            body.insert("generationConfig".into(), Value::Object(generation));
        }
        Value::Object(body)
    }

    fn parse(&self, body: &[u8], ctx: &DecodeContext) -> Result<Parsed, DecodeError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| DecodeError::Protocol(format!("the body is not JSON: {e}")))?;
        let mut acc = Accumulator::new(ctx.seed);
        acc.chunk(&v, &mut Vec::new())?;
        acc.finish()
    }

    fn decoder(&self, ctx: &DecodeContext) -> Box<dyn StreamDecoder> {
        Box::new(Accumulator::new(ctx.seed))
    }
}

fn parts(role: Role, content: &[ContentBlock]) -> Vec<Value> {
    let mut out = Vec::new();
    for block in content {
        match (role, block) {
            (_, ContentBlock::Text { text }) if !text.is_empty() => {
                out.push(json!({"text": text}));
            }
            (Role::Assistant, ContentBlock::ToolCall(c)) => {
                let mut call = json!({"name": c.name, "args": c.arguments});
                if !c.id.starts_with(SYNTHETIC_ID_PREFIX) {
                    call["id"] = json!(c.id);
                }
                let mut part = json!({"functionCall": call});
                if let Some(sig) = &c.signature {
                    part["thoughtSignature"] = json!(sig);
                }
                out.push(part);
            }
            (Role::User, ContentBlock::ToolResult(r)) => {
                let key = if r.is_error { "error" } else { "output" };
                let mut response = json!({"name": r.name, "response": {key: r.content}});
                if !r.call_id.starts_with(SYNTHETIC_ID_PREFIX) {
                    response["id"] = json!(r.call_id);
                }
                out.push(json!({"functionResponse": response}));
            }
            _ => {}
        }
    }
    out
}

/// Builds the answer from one response or from the chunks of a stream.
struct Accumulator {
    seed: u64,
    content: Vec<ContentBlock>,
    calls: usize,
    finish_reason: Option<String>,
    usage: Usage,
    model: Option<String>,
}

impl Accumulator {
    fn new(seed: u64) -> Self {
        Accumulator {
            seed,
            content: Vec::new(),
            calls: 0,
            finish_reason: None,
            usage: Usage::default(),
            model: None,
        }
    }

    fn chunk(&mut self, v: &Value, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if let Some(err) = v.get("error") {
            return Err(api_error(err));
        }
        if !v.is_object() {
            return Err(DecodeError::Protocol(format!(
                "expected a GenerateContentResponse object, got: {}",
                truncate(&v.to_string(), 200)
            )));
        }
        if let Some(m) = v.get("modelVersion").and_then(Value::as_str) {
            self.model = Some(m.to_owned());
        }
        if let Some(u) = v.get("usageMetadata") {
            let get = |f: &str| u.get(f).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage {
                input_tokens: get("promptTokenCount") + get("toolUsePromptTokenCount"),
                // Thinking tokens are billed as output.
                output_tokens: get("candidatesTokenCount") + get("thoughtsTokenCount"),
            };
        }
        let candidate = v
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        let Some(candidate) = candidate else {
            if let Some(reason) = v
                .get("promptFeedback")
                .and_then(|f| f.get("blockReason"))
                .and_then(Value::as_str)
            {
                // A blocked prompt is an answer (an empty, filtered one), not a fault.
                self.finish_reason = Some(reason.to_owned());
                return Ok(());
            }
            if v.get("usageMetadata").is_some() {
                return Ok(());
            }
            return Err(DecodeError::Protocol(format!(
                "the response has no `candidates`: {}",
                truncate(&v.to_string(), 300)
            )));
        };
        let parts = candidate
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for part in parts {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                // Thought summaries are not part of the answer.
                if part.get("thought").and_then(Value::as_bool) == Some(true) || text.is_empty() {
                    continue;
                }
                out.push(StreamEvent::TextDelta(text.to_owned()));
                match self.content.last_mut() {
                    Some(ContentBlock::Text { text: t }) => t.push_str(text),
                    _ => self.content.push(ContentBlock::Text {
                        text: text.to_owned(),
                    }),
                }
            } else if let Some(call) = part.get("functionCall") {
                let name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        DecodeError::Protocol("a functionCall has no `name`".to_owned())
                    })?
                    .to_owned();
                let arguments = match call.get("args") {
                    None | Some(Value::Null) => json!({}),
                    Some(a) => a.clone(),
                };
                let index = self.calls;
                self.calls += 1;
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map_or_else(
                        || format!("{SYNTHETIC_ID_PREFIX}{:016x}_{index}", self.seed),
                        str::to_owned,
                    );
                let signature = part
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                out.push(StreamEvent::ToolCallStart {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                });
                out.push(StreamEvent::ToolCallDelta {
                    index,
                    fragment: arguments.to_string(),
                });
                self.content.push(ContentBlock::ToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                    signature,
                }));
            }
        }
        if let Some(r) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish_reason = Some(r.to_owned());
        }
        Ok(())
    }

    fn finish(self) -> Result<Parsed, DecodeError> {
        let Some(raw) = self.finish_reason else {
            return Err(DecodeError::Incomplete(
                "the response ended without a `finishReason`".to_owned(),
            ));
        };
        let stop_reason = match raw.as_str() {
            "MAX_TOKENS" => StopReason::MaxTokens,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
            | "IMAGE_SAFETY" | "LANGUAGE" | "OTHER" => StopReason::ContentFilter,
            // Gemini says STOP after function calls too.
            _ if self.calls > 0 => StopReason::ToolUse,
            "STOP" => StopReason::EndTurn,
            _ => StopReason::Other,
        };
        Ok(Parsed {
            content: self.content,
            stop_reason,
            raw_stop_reason: Some(raw),
            usage: self.usage,
            model: self.model,
        })
    }
}

impl StreamDecoder for Accumulator {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        let v: Value = serde_json::from_str(&event.data).map_err(|e| {
            DecodeError::Protocol(format!(
                "a stream chunk is not JSON ({e}): {}",
                truncate(&event.data, 200)
            ))
        })?;
        self.chunk(&v, out)
    }

    fn is_done(&self) -> bool {
        false
    }

    fn finish(self: Box<Self>) -> Result<Parsed, DecodeError> {
        Accumulator::finish(*self)
    }
}

fn api_error(err: &Value) -> DecodeError {
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the response reported an error without a message")
        .to_owned();
    let status = err.get("status").and_then(Value::as_str).unwrap_or("");
    let code = err.get("code").and_then(Value::as_u64).unwrap_or(0);
    let retryable = matches!(
        status,
        "UNAVAILABLE" | "RESOURCE_EXHAUSTED" | "INTERNAL" | "DEADLINE_EXCEEDED"
    ) || u16::try_from(code).is_ok_and(crate::error::is_retryable_status);
    DecodeError::Api {
        kind: if status.is_empty() {
            code.to_string()
        } else {
            status.to_owned()
        },
        message,
        retryable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let g = Gemini;
        assert_eq!(
            g.url("https://x", "models/gemini-2.5-pro", false),
            "https://x/v1beta/models/gemini-2.5-pro:generateContent"
        );
        assert_eq!(
            g.url("https://x/v1beta", "gemini-2.5-pro", true),
            "https://x/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        );
    }

    #[test]
    fn blocked_prompt_is_a_filtered_answer() {
        let p = Gemini
            .parse(
                br#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":4}}"#,
                &DecodeContext { seed: 1 },
            )
            .unwrap();
        assert_eq!(p.stop_reason, StopReason::ContentFilter);
        assert!(p.content.is_empty());
        assert_eq!(p.usage.input_tokens, 4);
    }

    #[test]
    fn ids_are_made_up_stably_and_not_sent_back() {
        let body = br#"{"candidates":[{"content":{"role":"model","parts":[
            {"functionCall":{"name":"a","args":{"x":1}},"thoughtSignature":"sig"},
            {"functionCall":{"name":"b","args":{}}}]},"finishReason":"STOP"}]}"#;
        let p1 = Gemini.parse(body, &DecodeContext { seed: 7 }).unwrap();
        let p2 = Gemini.parse(body, &DecodeContext { seed: 7 }).unwrap();
        assert_eq!(p1, p2);
        assert_eq!(p1.stop_reason, StopReason::ToolUse);
        let ContentBlock::ToolCall(c) = &p1.content[0] else {
            panic!()
        };
        assert!(c.id.starts_with(SYNTHETIC_ID_PREFIX));
        assert_eq!(c.signature.as_deref(), Some("sig"));
        let sent = parts(Role::Assistant, &p1.content);
        assert_eq!(
            sent[0],
            json!({"functionCall": {"name": "a", "args": {"x": 1}}, "thoughtSignature": "sig"})
        );
    }
}
