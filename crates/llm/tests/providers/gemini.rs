//! The provider against the fake server speaking its wire format: the shared
//! scenarios of `support`, then what is particular to this format.

use crate::support::Wire;

scenarios!(Wire::Gemini;
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

use crate::support::{ask, provider, tools};
use agentfile_llm::fake::{FakeReply, FakeServer};
use agentfile_llm::gemini::SYNTHETIC_ID_PREFIX;
use agentfile_llm::{CancellationToken, Message, ToolResult};
use serde_json::json;

/// Gemini 3 wants each call's `thoughtSignature` back, next to the call, and has
/// no ids of its own here: the made-up ids stay on our side.
#[tokio::test]
async fn thought_signatures_round_trip_and_made_up_ids_stay_home() {
    let server = FakeServer::start(vec![
        FakeReply::tool_calls([
            ("read", json!({"path": "a"})),
            ("read", json!({"path": "b"})),
        ]),
        FakeReply::text("both read"),
    ])
    .await
    .unwrap();
    let p = provider(Wire::Gemini, &server);
    let mut request = ask("Read a and b.");
    request.tools = tools();
    let r = p
        .chat(request.clone(), CancellationToken::new())
        .await
        .unwrap();
    let calls = r.tool_calls();
    assert!(calls.iter().all(|c| c.id.starts_with(SYNTHETIC_ID_PREFIX)));
    assert_eq!(calls[0].signature.as_deref(), Some("fake-signature-1"));
    assert_eq!(calls[1].signature, None);

    let results: Vec<ToolResult> = calls
        .iter()
        .map(|c| ToolResult {
            call_id: c.id.clone(),
            name: c.name.clone(),
            content: "x".into(),
            is_error: false,
        })
        .collect();
    request.messages.push(r.to_message());
    request.messages.push(Message::tool_results(results));
    p.chat(request, CancellationToken::new()).await.unwrap();

    let sent = &server.requests()[1].body["contents"];
    assert_eq!(
        sent[1]["parts"][0],
        json!({"functionCall": {"name": "read", "args": {"path": "a"}}, "thoughtSignature": "fake-signature-1"})
    );
    assert_eq!(
        sent[2]["parts"][1],
        json!({"functionResponse": {"name": "read", "response": {"output": "x"}}})
    );
    assert!(!sent.to_string().contains(SYNTHETIC_ID_PREFIX));
}

/// Ids Gemini does give are kept and sent back.
#[tokio::test]
async fn ids_from_gemini_are_kept() {
    let mut reply = FakeReply::tool_call("read", json!({"path": "a"}));
    reply.tool_calls[0].id = Some("gid-7".into());
    let server = FakeServer::start(vec![reply]).await.unwrap();
    let p = provider(Wire::Gemini, &server);
    let r = p
        .chat(ask("Read a."), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(r.tool_calls()[0].id, "gid-7");
}
