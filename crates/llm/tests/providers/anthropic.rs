//! The provider against the fake server speaking its wire format: the shared
//! scenarios of `support`, then what is particular to this format.

use crate::support::Wire;

scenarios!(Wire::Anthropic;
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

use crate::support::{ask, provider};
use agentfile_llm::fake::{FakeReply, FakeServer};
use agentfile_llm::{CancellationToken, LlmError, collect_stream};

/// An `error` event inside a 200 stream (Anthropic's "overloaded" mid-stream) is
/// retried like a 529; a non-retryable one fails at once with its message.
#[tokio::test]
async fn error_event_mid_stream() {
    let overloaded = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n\
                      event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let invalid = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long\"}}\n\n";
    let server = FakeServer::start(vec![
        FakeReply::raw(200, "text/event-stream", overloaded),
        FakeReply::text("fine now"),
        FakeReply::raw(200, "text/event-stream", invalid),
    ])
    .await
    .unwrap();
    let p = provider(Wire::Anthropic, &server);
    let r = collect_stream(p.stream(ask("Hi."), CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(r.text(), "fine now");
    assert_eq!(r.attempts, 2);

    let e = collect_stream(p.stream(ask("Hi."), CancellationToken::new()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            LlmError::Api {
                retryable: false,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("prompt is too long"), "{e}");
    assert_eq!(server.request_count(), 3);
}

/// `stop_reason` values map onto the normalised enum, keeping the raw one.
#[tokio::test]
async fn max_tokens_stop_reason() {
    let server = FakeServer::start(vec![FakeReply::text("cut sho").with_stop("max_tokens")])
        .await
        .unwrap();
    let p = provider(Wire::Anthropic, &server);
    let r = p.chat(ask("Hi."), CancellationToken::new()).await.unwrap();
    assert_eq!(r.stop_reason, agentfile_llm::StopReason::MaxTokens);
    assert_eq!(r.raw_stop_reason.as_deref(), Some("max_tokens"));
}
