//! The provider-neutral conversation types: what the runtime sends to a model and
//! what it gets back.
//!
//! These are the only LLM types the rest of the runtime sees. Each provider module
//! translates them to and from its own wire format; nothing here knows about HTTP,
//! JSON field names of a particular service, or retries. They serialize to JSON
//! because cassettes (record/replay) store them as they are.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One call to a model: the whole conversation so far, plus the tools it may call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatRequest {
    /// Model to use instead of the provider's configured one; `None` for the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The system prompt (persona, rules). Sent the way each provider expects it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation, oldest first. Tool results go in a [`Role::User`] message.
    pub messages: Vec<Message>,
    /// Tools the model may call, with JSON Schemas for their arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef>,
    /// Output token limit for this call; `None` for the provider's configured one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature; `None` leaves it to the provider's configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// A request with a system prompt and one user turn, the common start of a goal.
    pub fn new(system: impl Into<String>, user: impl Into<String>) -> Self {
        ChatRequest {
            system: Some(system.into()),
            messages: vec![Message::user(user)],
            ..Default::default()
        }
    }
}

/// Who said a message. There is no `System` role: the system prompt is
/// [`ChatRequest::system`], because two of the three providers take it outside the
/// message list and a single place avoids "which one wins" questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person or the runtime, including tool results sent back to the model.
    User,
    /// The model: text and tool calls.
    Assistant,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user turn with plain text.
    pub fn user(text: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// An assistant turn with plain text.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// A user turn carrying the results of the tool calls of the previous assistant turn.
    pub fn tool_results(results: impl IntoIterator<Item = ToolResult>) -> Self {
        Message {
            role: Role::User,
            content: results.into_iter().map(ContentBlock::ToolResult).collect(),
        }
    }

    /// All text blocks joined, ignoring tool calls and results.
    pub fn text(&self) -> String {
        text_of(&self.content)
    }
}

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text { text: String },
    ToolCall(ToolCall),
    ToolResult(ToolResult),
}

/// The model asking for a tool to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Identifies the call so its result can be matched to it. Gemini does not always
    /// give one; the Gemini provider then makes a stable one up (see `gemini.rs`).
    pub id: String,
    pub name: String,
    /// The arguments, parsed. Always a JSON value; a model that produced invalid JSON
    /// is reported as [`crate::LlmError::InvalidToolArguments`] instead.
    pub arguments: Value,
    /// An opaque token the provider wants back with this call in the next request
    /// (Gemini's `thoughtSignature`; Gemini 3 rejects a history without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// What a tool produced, sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The [`ToolCall::id`] this answers.
    pub call_id: String,
    /// The tool's name; Gemini matches results by name, so it is required.
    pub name: String,
    pub content: String,
    /// The tool failed (or was denied by policy); `content` says why.
    #[serde(default)]
    pub is_error: bool,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object. Providers clean it for what they accept
    /// (see [`crate::schema`]), so any reasonable schema may be given here.
    pub parameters: Value,
}

/// Why the model stopped, normalised across providers. The provider's own value is
/// kept in [`ChatResponse::raw_stop_reason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants tool results before it goes on.
    ToolUse,
    /// The output token limit cut the answer short.
    MaxTokens,
    /// A stop sequence was produced.
    StopSequence,
    /// The provider withheld or cut the answer (safety, recitation, refusal).
    ContentFilter,
    /// Anything else; see the raw value.
    Other,
}

/// Tokens used by one call. Input includes cached tokens, output includes reasoning
/// ("thinking") tokens, so that both are what the provider bills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The model's answer to one [`ChatRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// Text and tool calls, in the order the model produced them.
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    /// The provider's own stop reason (`end_turn`, `tool_calls`, `STOP`, …), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_stop_reason: Option<String>,
    pub usage: Usage,
    /// The model as the provider reported it (often a dated snapshot name).
    pub model: String,
    /// Wall time of the whole call, retries and backoff included.
    #[serde(with = "duration_ms", rename = "latency_ms")]
    pub latency: Duration,
    /// Estimated cost in USD from the price table; `None` when the model's price is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// HTTP attempts made (1 when nothing was retried).
    #[serde(default = "one")]
    pub attempts: u32,
}

fn one() -> u32 {
    1
}

impl ChatResponse {
    /// All text blocks joined.
    pub fn text(&self) -> String {
        text_of(&self.content)
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> Vec<&ToolCall> {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    /// This answer as the assistant turn to append to the conversation.
    pub fn to_message(&self) -> Message {
        Message {
            role: Role::Assistant,
            content: self.content.clone(),
        }
    }
}

/// One item of a streaming call. Callers that only want the answer can skip
/// everything up to [`StreamEvent::Done`].
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More answer text.
    TextDelta(String),
    /// The model started a tool call. `index` counts tool calls in this answer from 0.
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A fragment of a tool call's JSON arguments, as the provider sent it. The
    /// fragments of one call concatenate to its full argument text.
    ToolCallDelta { index: usize, fragment: String },
    /// The attempt that produced the deltas so far failed part-way and the whole call
    /// is being retried: discard what was received since the start or the last
    /// `Restart`. The final [`StreamEvent::Done`] never contains discarded parts.
    Restart { attempt: u32, reason: String },
    /// The last attempt failed with a retryable error; attempt `attempt` of
    /// `max_attempts` starts after `wait`. Nothing to discard unless a
    /// `Restart` follows.
    Retry {
        attempt: u32,
        max_attempts: u32,
        wait: std::time::Duration,
        reason: String,
    },
    /// The whole answer, assembled. Always the last item of a successful stream.
    Done(ChatResponse),
}

fn text_of(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn response_round_trips_through_json() {
        let r = ChatResponse {
            content: vec![
                ContentBlock::Text { text: "hi".into() },
                ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: json!({"path": "a"}),
                    signature: None,
                }),
            ],
            stop_reason: StopReason::ToolUse,
            raw_stop_reason: Some("tool_use".into()),
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
            },
            model: "m".into(),
            latency: Duration::from_millis(12),
            cost_usd: Some(0.5),
            attempts: 1,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["latency_ms"], 12);
        assert_eq!(v["content"][1]["type"], "tool_call");
        let back: ChatResponse = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.text(), "hi");
        assert_eq!(back.tool_calls().len(), 1);
    }
}
