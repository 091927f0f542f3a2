//! Anthropic's Messages API (`POST /v1/messages`), streaming and not.
//!
//! Mapping: the system prompt is the top-level `system`; an assistant turn is
//! `text` and `tool_use` blocks; tool results are `tool_result` blocks in a user
//! turn (placed first, as the API requires), with `is_error` when the tool failed.
//! Tools are `{name, description, input_schema}`. Streams are the documented SSE
//! events (`message_start`, `content_block_start/delta/stop`, `message_delta`,
//! `message_stop`, `ping`, `error`); tool input arrives as `input_json_delta`
//! fragments that are joined and parsed at the end. Unknown event and block types
//! (thinking, citations, server tools) are ignored rather than fatal, so new API
//! features do not break old runtimes.

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::http::{
    CallParams, DEFAULT_MAX_TOKENS, DecodeContext, DecodeError, HeaderError, Parsed, StreamDecoder,
    WireFormat, parse_arguments, temperature_json,
};
use crate::schema::{SchemaTarget, clean_cached};
use crate::sse::SseEvent;
use crate::types::{ChatRequest, ContentBlock, Role, StopReason, StreamEvent, ToolCall, Usage};

/// The `anthropic-version` header this code is written against.
pub const API_VERSION: &str = "2023-06-01";
/// Where the API lives unless `base_url` says otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The Anthropic wire format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Anthropic;

impl WireFormat for Anthropic {
    fn url(&self, base: &str, _model: &str, _stream: bool) -> String {
        if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        }
    }

    fn headers(&self, api_key: Option<&str>) -> Result<HeaderMap, HeaderError> {
        let mut h = HeaderMap::new();
        h.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        if let Some(key) = api_key {
            let mut v = HeaderValue::from_str(key).map_err(|_| HeaderError::ApiKey)?;
            v.set_sensitive(true);
            h.insert("x-api-key", v);
        }
        Ok(h)
    }

    fn body(&self, request: &ChatRequest, call: &CallParams<'_>) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(call.model));
        body.insert(
            "max_tokens".into(),
            json!(
                call.max_tokens
                    .unwrap_or_else(|| default_max_tokens(call.model))
            ),
        );
        if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
            body.insert("system".into(), json!(system));
        }
        let messages: Vec<Value> = request
            .messages
            .iter()
            .filter_map(|m| {
                let content = blocks(m.role, &m.content);
                (!content.is_empty()).then(|| {
                    json!({
                        "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
                        "content": content,
                    })
                })
            })
            .collect();
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    // Built by moving values in: `json!` would copy the schema again.
                    let mut tool = Map::new();
                    tool.insert("name".into(), Value::String(t.name.clone()));
                    tool.insert("description".into(), Value::String(t.description.clone()));
                    tool.insert(
                        "input_schema".into(),
                        clean_cached(&t.name, &t.parameters, SchemaTarget::Anthropic),
                    );
                    Value::Object(tool)
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(t) = call.temperature {
            body.insert("temperature".into(), temperature_json(t));
        }
        if call.stream {
            body.insert("stream".into(), json!(true));
        }
        Value::Object(body)
    }

    fn parse(&self, body: &[u8], _ctx: &DecodeContext) -> Result<Parsed, DecodeError> {
        let r: WireResponse = serde_json::from_slice(body).map_err(|e| {
            DecodeError::Protocol(format!("the body is not a Messages API response: {e}"))
        })?;
        let mut content = Vec::new();
        for block in r.content {
            match block {
                WireBlock::Text { text } => content.push(ContentBlock::Text { text }),
                WireBlock::ToolUse { id, name, input } => {
                    content.push(ContentBlock::ToolCall(ToolCall {
                        id,
                        name,
                        arguments: input,
                        signature: None,
                    }))
                }
                WireBlock::Other => {}
            }
        }
        let (stop_reason, raw) = stop(r.stop_reason);
        Ok(Parsed {
            content,
            stop_reason,
            raw_stop_reason: raw,
            usage: r.usage.map(WireUsage::total).unwrap_or_default(),
            model: r.model,
        })
    }

    fn decoder(&self, _ctx: &DecodeContext) -> Box<dyn StreamDecoder> {
        Box::<Decoder>::default()
    }
}

/// The API requires `max_tokens`; without a configured one, ask for
/// [`DEFAULT_MAX_TOKENS`], except from the Claude 3 models whose output limit is
/// lower (asking for more is a 400).
fn default_max_tokens(model: &str) -> u32 {
    let small = ["claude-3-haiku", "claude-3-opus", "claude-3-sonnet"];
    if small.iter().any(|m| model.starts_with(m)) {
        4096
    } else {
        DEFAULT_MAX_TOKENS
    }
}

/// Our blocks as Anthropic content blocks for a turn of `role`.
fn blocks(role: Role, content: &[ContentBlock]) -> Vec<Value> {
    let mut results = Vec::new();
    let mut rest = Vec::new();
    for block in content {
        match (role, block) {
            (_, ContentBlock::Text { text }) if !text.is_empty() => {
                rest.push(json!({"type": "text", "text": text}));
            }
            (Role::Assistant, ContentBlock::ToolCall(c)) => rest.push(json!({
                "type": "tool_use",
                "id": c.id,
                "name": c.name,
                "input": c.arguments,
            })),
            (Role::User, ContentBlock::ToolResult(r)) => {
                let mut v = json!({
                    "type": "tool_result",
                    "tool_use_id": r.call_id,
                    "content": r.content,
                });
                if r.is_error {
                    v["is_error"] = json!(true);
                }
                results.push(v);
            }
            // Empty text is rejected by the API; calls in a user turn or results in an
            // assistant turn cannot be expressed, and a well-formed history has none.
            _ => {}
        }
    }
    results.extend(rest);
    results
}

fn stop(raw: Option<String>) -> (StopReason, Option<String>) {
    let reason = match raw.as_deref() {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") | Some("model_context_window_exceeded") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::ContentFilter,
        _ => StopReason::Other,
    };
    (reason, raw)
}

#[derive(Deserialize)]
struct WireResponse {
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Cached tokens are billed as input too (at other rates), so they count.
    fn total(self) -> Usage {
        Usage {
            input_tokens: self.input_tokens.unwrap_or(0)
                + self.cache_creation_input_tokens.unwrap_or(0)
                + self.cache_read_input_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
        }
    }
}

enum Block {
    Text(String),
    Tool {
        call_index: usize,
        id: String,
        name: String,
        json: String,
    },
    Other,
}

#[derive(Default)]
struct Decoder {
    model: Option<String>,
    usage: WireUsage,
    blocks: BTreeMap<u64, Block>,
    tools: usize,
    stop_reason: Option<String>,
    done: bool,
}

/// The JSON data of one stream event.
fn event_data(event: &SseEvent) -> Result<Value, DecodeError> {
    serde_json::from_str(&event.data).map_err(|e| {
        let named = if event.event.is_empty() {
            String::new()
        } else {
            format!(" `{}`", event.event)
        };
        DecodeError::Protocol(format!(
            "the data of stream event{named} is not JSON ({e}): {}",
            crate::error::truncate(&event.data, 200)
        ))
    })
}

/// The error an `error` event reports.
fn stream_error(data: &Value) -> DecodeError {
    let err = data.get("error").unwrap_or(&Value::Null);
    let kind = err
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("error")
        .to_owned();
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the stream reported an error without a message")
        .to_owned();
    let retryable = matches!(
        kind.as_str(),
        "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
    );
    DecodeError::Api {
        kind,
        message,
        retryable,
    }
}

impl Decoder {
    /// `content_block_start`: a text or tool_use block opens at `index`.
    fn block_start(
        &mut self,
        index: u64,
        block: &Value,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), DecodeError> {
        let b = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                if !text.is_empty() {
                    out.push(StreamEvent::TextDelta(text.to_owned()));
                }
                Block::Text(text.to_owned())
            }
            Some("tool_use") => self.tool_start(block, out)?,
            _ => Block::Other,
        };
        self.blocks.insert(index, b);
        Ok(())
    }

    fn tool_start(
        &mut self,
        block: &Value,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Block, DecodeError> {
        let field = |f: &str| {
            block
                .get(f)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| DecodeError::Protocol(format!("a tool_use block has no `{f}`")))
        };
        let (id, name) = (field("id")?, field("name")?);
        // The start event carries `input: {}`; the real input follows as
        // deltas. A proxy that sends it whole here is understood too.
        let json = match block.get("input") {
            Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()).to_string(),
            _ => String::new(),
        };
        let call_index = self.tools;
        self.tools += 1;
        out.push(StreamEvent::ToolCallStart {
            index: call_index,
            id: id.clone(),
            name: name.clone(),
        });
        if !json.is_empty() {
            out.push(StreamEvent::ToolCallDelta {
                index: call_index,
                fragment: json.clone(),
            });
        }
        Ok(Block::Tool {
            call_index,
            id,
            name,
            json,
        })
    }

    /// `content_block_delta`: more text or tool input for the block at `index`.
    fn block_delta(
        &mut self,
        index: u64,
        delta: &Value,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), DecodeError> {
        let piece = |f: &str| delta.get(f).and_then(Value::as_str).unwrap_or("");
        match (
            delta.get("type").and_then(Value::as_str),
            self.blocks.get_mut(&index),
        ) {
            (Some("text_delta"), Some(Block::Text(text))) => {
                let p = piece("text");
                text.push_str(p);
                out.push(StreamEvent::TextDelta(p.to_owned()));
            }
            (
                Some("input_json_delta"),
                Some(Block::Tool {
                    call_index, json, ..
                }),
            ) => {
                let p = piece("partial_json");
                json.push_str(p);
                out.push(StreamEvent::ToolCallDelta {
                    index: *call_index,
                    fragment: p.to_owned(),
                });
            }
            (Some("text_delta" | "input_json_delta"), None) => {
                return Err(DecodeError::Protocol(format!(
                    "a delta for content block {index}, which was never started"
                )));
            }
            // Deltas of blocks we do not use (thinking, server tools, citations).
            _ => {}
        }
        Ok(())
    }

    /// `message_delta`: the stop reason and the usage so far.
    fn message_delta(&mut self, data: &Value) {
        if let Some(r) = data
            .get("delta")
            .and_then(|d| d.get("stop_reason"))
            .and_then(Value::as_str)
        {
            self.stop_reason = Some(r.to_owned());
        }
        if let Some(u) = data.get("usage") {
            self.merge_usage(u);
        }
    }
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        let data = event_data(event)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        let index = || {
            data.get("index").and_then(Value::as_u64).ok_or_else(|| {
                DecodeError::Protocol(format!("event `{kind}` has no block `index`"))
            })
        };
        match kind {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                self.model = message
                    .get("model")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if let Some(u) = message.get("usage") {
                    self.merge_usage(u);
                }
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                self.block_start(index()?, block, out)?;
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                self.block_delta(index()?, delta, out)?;
            }
            "message_delta" => self.message_delta(&data),
            "message_stop" => self.done = true,
            "error" => return Err(stream_error(&data)),
            // `ping`, `content_block_stop` and event types newer than this code.
            _ => {}
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn finish(self: Box<Self>) -> Result<Parsed, DecodeError> {
        if !self.done {
            return Err(DecodeError::Incomplete(
                "the stream ended before `message_stop`".to_owned(),
            ));
        }
        let mut content = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(text) => content.push(ContentBlock::Text { text }),
                Block::Tool { id, name, json, .. } => {
                    let arguments = parse_arguments(&name, &id, &json)?;
                    content.push(ContentBlock::ToolCall(ToolCall {
                        id,
                        name,
                        arguments,
                        signature: None,
                    }));
                }
                Block::Other => {}
            }
        }
        let (stop_reason, raw) = stop(self.stop_reason);
        Ok(Parsed {
            content,
            stop_reason,
            raw_stop_reason: raw,
            usage: self.usage.total(),
            model: self.model,
        })
    }
}

impl Decoder {
    /// `message_start` has the input count, `message_delta` the (cumulative) output
    /// count and sometimes updated input counts: later values win.
    fn merge_usage(&mut self, u: &Value) {
        let get = |f: &str| u.get(f).and_then(Value::as_u64);
        let u = &mut self.usage;
        u.input_tokens = get("input_tokens").or(u.input_tokens);
        u.output_tokens = get("output_tokens").or(u.output_tokens);
        u.cache_creation_input_tokens =
            get("cache_creation_input_tokens").or(u.cache_creation_input_tokens);
        u.cache_read_input_tokens = get("cache_read_input_tokens").or(u.cache_read_input_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse(event: &str, data: Value) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.to_string(),
        }
    }

    #[test]
    fn stream_without_message_stop_is_incomplete() {
        let mut d: Box<dyn StreamDecoder> = Box::<Decoder>::default();
        let mut out = Vec::new();
        d.event(
            &sse(
                "message_start",
                json!({"type":"message_start","message":{"model":"m","usage":{"input_tokens":3}}}),
            ),
            &mut out,
        )
        .unwrap();
        assert!(matches!(d.finish(), Err(DecodeError::Incomplete(_))));
    }

    #[test]
    fn max_tokens_default_fits_the_model() {
        assert_eq!(default_max_tokens("claude-3-haiku-20240307"), 4096);
        assert_eq!(default_max_tokens("claude-sonnet-4-5"), DEFAULT_MAX_TOKENS);
    }

    #[test]
    fn junk_data_is_a_protocol_error() {
        let mut d = Decoder::default();
        let e = d
            .event(
                &SseEvent {
                    event: "content_block_delta".into(),
                    data: "{not json".into(),
                },
                &mut Vec::new(),
            )
            .unwrap_err();
        let DecodeError::Protocol(m) = e else {
            panic!("{e:?}")
        };
        assert!(
            m.contains("`content_block_delta`") && m.contains("not JSON"),
            "{m}"
        );
    }

    #[test]
    fn overloaded_event_is_retryable() {
        let mut d = Decoder::default();
        let e = d
            .event(
                &sse("error", json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})),
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(
            e,
            DecodeError::Api {
                kind: "overloaded_error".into(),
                message: "Overloaded".into(),
                retryable: true
            }
        );
    }
}
