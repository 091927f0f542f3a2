//! The provider against the fake server speaking its wire format: the shared
//! scenarios of `support`, then what is particular to this format.

use crate::support::Wire;

scenarios!(Wire::OpenAi;
    plain_answer,
    plain_answer_streaming,
    parallel_tool_calls_round_trip,
    streamed_tool_call_arguments,
    usage_is_reported_when_streaming,
    rate_limit_honours_retry_after,
    server_error_then_success,
    cut_stream_is_retried_as_a_whole_call,
    bad_request_fails_at_once_with_the_provider_message,
    key_never_appears_in_errors,
    connect_error_is_retried_then_clear,
    first_byte_timeout,
    idle_stream_timeout,
    trickle_hits_the_call_deadline,
    retries_are_announced,
    cancellation_stops_the_request,
    cancellation_mid_stream,
    garbage_is_a_clear_error,
    request_body_matches_snapshot,
);

use std::collections::BTreeMap;

use crate::support::{ask, fast, provider};
use agentfile_config::LlmConfig;
use agentfile_llm::fake::{FakeReply, FakeServer};
use agentfile_llm::{
    CancellationToken, ProviderOptions, StopReason, StreamEvent, collect_stream,
    provider_from_config_with,
};
use futures::StreamExt;
use serde_json::json;

/// OpenRouter and Ollama run the same code: same endpoint shape, `max_tokens`
/// instead of OpenAI's `max_completion_tokens`, and Ollama needs no key.
#[tokio::test]
async fn compatible_servers_share_the_code() {
    let server = FakeServer::start(vec![FakeReply::text("local"), FakeReply::text("routed")])
        .await
        .unwrap();
    let options = ProviderOptions {
        http: fast(),
        ..Default::default()
    };
    let ollama = LlmConfig {
        provider: Some("ollama".into()),
        model: Some("llama3.1:8b".into()),
        base_url: Some(format!("{}/v1", server.base_url())),
        max_tokens: Some(300),
        ..Default::default()
    };
    let p = provider_from_config_with(&ollama, &BTreeMap::new(), &|_| None, &options).unwrap();
    let r = p.chat(ask("Hi."), CancellationToken::new()).await.unwrap();
    assert_eq!(r.text(), "local");
    // A local model is free, not of unknown price.
    assert_eq!(r.cost_usd, Some(0.0));

    let openrouter = LlmConfig {
        provider: Some("openrouter".into()),
        model: Some("anthropic/claude-sonnet-4.5".into()),
        base_url: Some(format!("{}/api/v1", server.base_url())),
        max_tokens: Some(300),
        ..Default::default()
    };
    let env = |k: &str| (k == "OPENROUTER_API_KEY").then(|| "or-key-0123456789".to_owned());
    let p = provider_from_config_with(&openrouter, &BTreeMap::new(), &env, &options).unwrap();
    let r = p.chat(ask("Hi."), CancellationToken::new()).await.unwrap();
    assert_eq!(r.text(), "routed");
    assert!(
        r.cost_usd.is_some(),
        "router names are priced by their model"
    );

    let reqs = server.requests();
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].header("authorization"), None);
    assert_eq!(reqs[0].body["max_tokens"], json!(300));
    assert_eq!(reqs[1].path, "/api/v1/chat/completions");
    assert_eq!(
        reqs[1].header("authorization"),
        Some("Bearer or-key-0123456789")
    );
    assert_eq!(reqs[1].body["max_tokens"], json!(300));
    assert!(reqs[1].body.get("max_completion_tokens").is_none());
}

/// A server that ignores `stream: true` and answers with one JSON body still
/// streams: the deltas are made from the whole answer.
#[tokio::test]
async fn non_streaming_answer_to_a_stream_request() {
    let body = json!({"id": "x", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4}});
    let server = FakeServer::start(vec![FakeReply::raw(
        200,
        "application/json",
        body.to_string(),
    )])
    .await
    .unwrap();
    let p = provider(Wire::OpenAi, &server);
    let events: Vec<_> = p
        .stream(ask("Hi."), CancellationToken::new())
        .collect()
        .await;
    assert!(matches!(&events[0], Ok(StreamEvent::ToolCallStart { id, .. }) if id == "c1"));
    let Some(Ok(StreamEvent::Done(r))) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.tool_calls()[0].arguments, json!({"path": "a"}));
}

/// Invalid JSON arguments from the model are a clear, non-retried error.
#[tokio::test]
async fn invalid_tool_arguments_are_reported() {
    let body = json!({"model": "gpt-4o", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "write", "arguments": "{\"path\": \"a\", "}}]}}]});
    let server = FakeServer::start(vec![FakeReply::raw(
        200,
        "application/json",
        body.to_string(),
    )])
    .await
    .unwrap();
    let p = provider(Wire::OpenAi, &server);
    let e = collect_stream(p.stream(ask("Hi."), CancellationToken::new()))
        .await
        .unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.contains("`write`") && shown.contains("not valid JSON"),
        "{shown}"
    );
    assert_eq!(server.request_count(), 1);
}
