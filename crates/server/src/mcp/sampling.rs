//! `--provider mcp-sampling`: the MCP host's own model as an LLM [`Provider`],
//! through `sampling/createMessage`, so a workflow runs with no API key.
//!
//! A [`ChatRequest`] becomes a sampling request: the system prompt, the
//! messages, `maxTokens`, and the configured model name as a `modelPreferences`
//! hint (the host picks the model; the hint is advisory). Tools in sampling are
//! new in 2025-11-25: when the client declared `sampling.tools`, the goal's
//! tools are passed and the model's `tool_use` blocks come back as tool calls;
//! otherwise the system prompt says tools are unavailable, tool calls and
//! results already in the conversation are sent as text, and goals that need
//! tools get only the model's text. The host reports no token counts, so usage
//! is zero and cost unknown.
//!
//! What it is not: a fallback. A client that did not declare `sampling` gets a
//! clear error on the first call rather than a silent switch to another model.

#![allow(deprecated)] // rmcp marks sampling deprecated for the 2026 protocol; we speak 2025-11-25.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use rmcp::model::{
    ContentBlock as McpContent, CreateMessageRequestParams, ModelHint, ModelPreferences,
    Role as McpRole, SamplingMessage, SamplingMessageContentBlock, Tool, ToolChoice,
    ToolResultContent,
};
use rmcp::service::ServiceError;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Client;
use agentfile_llm::{
    ChatRequest, ChatResponse, ContentBlock, LlmError, Provider, Role, StopReason, StreamEvent,
    ToolCall, Usage,
};

pub const NAME: &str = "mcp-sampling";

/// Said when the client cannot sample.
pub const NO_SAMPLING: &str = "the MCP client does not support sampling; set a provider with an API key in the server's env block instead";

/// Output tokens asked for when the request sets no limit.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The host's model, reached through the MCP client.
pub struct SamplingProvider {
    client: Arc<Client>,
    /// `--model`: sent as a hint; also what `run_started` names.
    model: String,
}

impl SamplingProvider {
    pub fn new(client: Arc<Client>, model: Option<String>) -> SamplingProvider {
        SamplingProvider {
            client,
            model: model.unwrap_or_else(|| "host".to_owned()),
        }
    }

    fn unavailable(message: impl Into<String>) -> LlmError {
        LlmError::Unavailable {
            provider: NAME.to_owned(),
            message: message.into(),
        }
    }

    /// The sampling request for a chat request; `tools`: the client can take
    /// tool definitions.
    fn params(&self, request: &ChatRequest, tools: bool) -> CreateMessageRequestParams {
        let mut system = request.system.clone().unwrap_or_default();
        if !tools && !request.tools.is_empty() {
            system.push_str(
                "\n\nTool calls are unavailable in this conversation: answer in text only. \
                 When asked for structured output, reply with one JSON object holding the requested fields.",
            );
        }
        let messages = request
            .messages
            .iter()
            .filter_map(|m| {
                let blocks: Vec<SamplingMessageContentBlock> =
                    m.content.iter().map(|b| block(b, tools)).collect();
                if blocks.is_empty() {
                    return None;
                }
                let role = match m.role {
                    Role::User => McpRole::User,
                    Role::Assistant => McpRole::Assistant,
                };
                Some(SamplingMessage::new_multiple(role, blocks))
            })
            .collect();
        let mut params = CreateMessageRequestParams::new(
            messages,
            request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        )
        .with_model_preferences(ModelPreferences::new().with_hints(vec![ModelHint::new(
            request.model.clone().unwrap_or_else(|| self.model.clone()),
        )]));
        if !system.trim().is_empty() {
            params = params.with_system_prompt(system);
        }
        if let Some(t) = request.temperature {
            params = params.with_temperature(t);
        }
        if tools && !request.tools.is_empty() {
            let defs = request
                .tools
                .iter()
                .map(|t| {
                    let schema = match &t.parameters {
                        Value::Object(o) => o.clone(),
                        _ => serde_json::Map::new(),
                    };
                    Tool::new(t.name.clone(), t.description.clone(), Arc::new(schema))
                })
                .collect();
            params = params.with_tools(defs).with_tool_choice(ToolChoice::auto());
        }
        params
    }
}

/// One conversation block as sampling content. Without sampling tools, tool
/// calls and results are told as text (a sampling message may not carry them).
fn block(b: &ContentBlock, tools: bool) -> SamplingMessageContentBlock {
    match b {
        ContentBlock::Text { text } => SamplingMessageContentBlock::text(text.clone()),
        ContentBlock::ToolCall(c) if tools => {
            let input = match &c.arguments {
                Value::Object(o) => o.clone(),
                other => {
                    let mut o = serde_json::Map::new();
                    o.insert("value".into(), other.clone());
                    o
                }
            };
            SamplingMessageContentBlock::tool_use(c.id.clone(), c.name.clone(), input)
        }
        ContentBlock::ToolCall(c) => SamplingMessageContentBlock::text(format!(
            "[called tool `{}` with {}]",
            c.name, c.arguments
        )),
        ContentBlock::ToolResult(r) if tools => {
            let mut result = ToolResultContent::new(
                r.call_id.clone(),
                vec![McpContent::text(r.content.clone())],
            );
            if r.is_error {
                result.is_error = Some(true);
            }
            SamplingMessageContentBlock::ToolResult(result)
        }
        ContentBlock::ToolResult(r) => SamplingMessageContentBlock::text(format!(
            "[result of tool `{}`{}]\n{}",
            r.name,
            if r.is_error { ", an error" } else { "" },
            r.content
        )),
    }
}

fn stop_reason(raw: Option<&str>, has_calls: bool) -> StopReason {
    match raw {
        _ if has_calls => StopReason::ToolUse,
        None | Some("endTurn") => StopReason::EndTurn,
        Some("maxTokens") => StopReason::MaxTokens,
        Some("stopSequence") => StopReason::StopSequence,
        Some("toolUse") => StopReason::ToolUse,
        Some(_) => StopReason::Other,
    }
}

impl Provider for SamplingProvider {
    fn name(&self) -> &str {
        NAME
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn chat(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let Some(peer) = self.client.peer() else {
                return Err(Self::unavailable("no MCP client is connected"));
            };
            if self.client.input_closed() {
                return Err(Self::unavailable(
                    "the MCP client closed the connection, so its model cannot answer",
                ));
            }
            let Some(caps) = peer.peer_info().map(|i| i.capabilities.clone()) else {
                return Err(Self::unavailable("the MCP client has not initialized yet"));
            };
            let Some(sampling) = caps.sampling else {
                return Err(Self::unavailable(NO_SAMPLING));
            };
            let tools = sampling.tools.is_some();
            let params = self.params(&request, tools);
            let started = Instant::now();
            let result = tokio::select! {
                r = peer.create_message(params) => r,
                _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                _ = self.client.io.input_closed.cancelled() => {
                    return Err(Self::unavailable("the MCP client closed the connection before its model answered"));
                }
            };
            let result = result.map_err(|e| match e {
                ServiceError::McpError(e) => LlmError::Api {
                    provider: NAME.to_owned(),
                    kind: format!("error {}", e.code.0),
                    message: format!("the MCP client refused the sampling request: {}", e.message),
                    retryable: false,
                },
                ServiceError::Cancelled { .. } => LlmError::Cancelled,
                other => {
                    Self::unavailable(format!("sampling through the MCP client failed: {other}"))
                }
            })?;
            let mut content = Vec::new();
            for b in result.message.content.iter() {
                match b {
                    SamplingMessageContentBlock::Text(t) => content.push(ContentBlock::Text {
                        text: t.text.clone(),
                    }),
                    SamplingMessageContentBlock::ToolUse(u) => {
                        content.push(ContentBlock::ToolCall(ToolCall {
                            id: u.id.clone(),
                            name: u.name.clone(),
                            arguments: Value::Object(u.input.clone()),
                            signature: None,
                        }))
                    }
                    // Images, audio and tool results are not an answer we can use.
                    _ => {}
                }
            }
            let has_calls = content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolCall(_)));
            Ok(ChatResponse {
                content,
                stop_reason: stop_reason(result.stop_reason.as_deref(), has_calls),
                raw_stop_reason: result.stop_reason.clone(),
                usage: Usage::default(),
                model: if result.model.is_empty() {
                    self.model.clone()
                } else {
                    result.model.clone()
                },
                latency: started.elapsed().max(Duration::from_micros(1)),
                cost_usd: None,
                attempts: 1,
            })
        })
    }

    fn stream(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, LlmError>> {
        // Sampling answers whole; the stream is that one answer.
        Box::pin(futures::stream::once(async move {
            self.chat(request, cancel).await.map(StreamEvent::Done)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_llm::{Message, ToolDef, ToolResult};

    fn conversation() -> ChatRequest {
        let mut r = ChatRequest::new("persona", "do it");
        r.tools = vec![ToolDef {
            name: "read".into(),
            description: "Read a file".into(),
            parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }];
        r.messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolCall(ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: serde_json::json!({"path": "a"}),
                signature: None,
            })],
        });
        r.messages.push(Message::tool_results([ToolResult {
            call_id: "c1".into(),
            name: "read".into(),
            content: "text of a".into(),
            is_error: false,
        }]));
        r
    }

    fn provider() -> SamplingProvider {
        SamplingProvider::new(
            Arc::new(Client::detached()),
            Some("claude-sonnet-4-5".into()),
        )
    }

    #[test]
    fn with_sampling_tools_the_conversation_keeps_its_tool_blocks() {
        let p = provider().params(&conversation(), true);
        p.validate().unwrap();
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["systemPrompt"], "persona");
        assert_eq!(v["maxTokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(
            v["modelPreferences"]["hints"][0]["name"],
            "claude-sonnet-4-5"
        );
        assert_eq!(v["tools"][0]["name"], "read");
        assert_eq!(v["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(v["messages"][2]["content"][0]["type"], "tool_result");
    }

    #[test]
    fn without_sampling_tools_they_are_told_as_text() {
        let p = provider().params(&conversation(), false);
        p.validate().unwrap();
        let v = serde_json::to_value(&p).unwrap();
        assert!(v.get("tools").is_none());
        assert!(
            v["systemPrompt"]
                .as_str()
                .unwrap()
                .contains("Tool calls are unavailable"),
            "{v}"
        );
        let text = v["messages"][2]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("text of a"), "{text}");
    }

    #[test]
    fn stop_reasons_map_to_ours() {
        assert_eq!(stop_reason(Some("endTurn"), false), StopReason::EndTurn);
        assert_eq!(stop_reason(Some("maxTokens"), false), StopReason::MaxTokens);
        assert_eq!(stop_reason(Some("endTurn"), true), StopReason::ToolUse);
        assert_eq!(stop_reason(Some("refusal"), false), StopReason::Other);
    }
}
