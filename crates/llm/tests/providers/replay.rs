//! Record and replay: a run against the fake server recorded to a cassette, then
//! answered from it with no server and no key; and the clear failures when the
//! workflow asks something the cassette does not hold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::support::{KEY, Wire, ask, fast, tools};
use agentfile_config::LlmConfig;
use agentfile_llm::fake::{FakeReply, FakeServer};
use agentfile_llm::replay::CassetteEntry;
use agentfile_llm::{
    CancellationToken, LlmError, Message, Provider, ProviderOptions, ReplayProvider, ToolResult,
    collect_stream, provider_from_config_with,
};
use serde_json::json;

fn cassette(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("llm_replay");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.jsonl"));
    let _ = std::fs::remove_file(&path);
    path
}

fn build(llm: LlmConfig, options: ProviderOptions) -> Result<Arc<dyn Provider>, LlmError> {
    let env = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| KEY.to_owned());
    provider_from_config_with(&llm, &BTreeMap::new(), &env, &options)
}

fn replay(path: &Path) -> Arc<dyn Provider> {
    let llm = LlmConfig {
        provider: Some("replay".into()),
        ..Default::default()
    };
    build(
        llm,
        ProviderOptions {
            cassette: Some(path.to_path_buf()),
            ..Default::default()
        },
    )
    .unwrap()
}

/// A two-turn tool conversation: the model calls `read`, gets the result, answers.
async fn conversation(p: &dyn Provider) -> Vec<agentfile_llm::ChatResponse> {
    let mut request = ask("What is in a.txt?");
    request.tools = tools();
    let first = p
        .chat(request.clone(), CancellationToken::new())
        .await
        .unwrap();
    let call = first.tool_calls()[0].clone();
    request.messages.push(first.to_message());
    request.messages.push(Message::tool_results([ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: "hello".into(),
        is_error: false,
    }]));
    let second = collect_stream(p.stream(request, CancellationToken::new()))
        .await
        .unwrap();
    vec![first, second]
}

async fn record(path: &Path) -> Vec<agentfile_llm::ChatResponse> {
    let server = FakeServer::start(vec![
        FakeReply::tool_call("read", json!({"path": "a.txt"})),
        FakeReply::text("It says hello."),
    ])
    .await
    .unwrap();
    let llm = LlmConfig {
        provider: Some("anthropic".into()),
        model: Some(Wire::Anthropic.model().into()),
        base_url: Some(server.base_url()),
        ..Default::default()
    };
    let recorder = build(
        llm,
        ProviderOptions {
            http: fast(),
            record: Some(path.to_path_buf()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(recorder.name(), "anthropic");
    conversation(recorder.as_ref()).await
}

#[tokio::test]
async fn record_then_replay_gives_the_same_answers() {
    let path = cassette("round_trip");
    let recorded = record(&path).await;

    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2);
    assert!(!text.contains(KEY), "the key must never reach a cassette");
    for line in text.lines() {
        let entry: CassetteEntry = serde_json::from_str(line).unwrap();
        assert_eq!(entry.provider, "anthropic");
        assert!(entry.response.is_some());
    }

    // No server, no key: the cassette answers.
    let p = replay(&path);
    assert_eq!(p.name(), "replay");
    let replayed = conversation(p.as_ref()).await;
    // Compared as stored: latency is kept in whole milliseconds.
    assert_eq!(
        serde_json::to_value(&replayed).unwrap(),
        serde_json::to_value(&recorded).unwrap()
    );
}

#[tokio::test]
async fn a_request_not_in_the_cassette_is_a_clear_error() {
    let path = cassette("mismatch");
    record(&path).await;
    let p = replay(&path);
    let e = p
        .chat(ask("What is in b.txt?"), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(e, LlmError::Replay { .. }), "{e:?}");
    let shown = e.to_string();
    assert!(shown.contains("model request #1"), "{shown}");
    assert!(shown.contains("messages[0].content[0].text"), "{shown}");
    assert!(
        shown.contains("a.txt") && shown.contains("b.txt"),
        "{shown}"
    );
    assert!(shown.contains("--record"), "{shown}");
}

#[tokio::test]
async fn an_exhausted_cassette_is_a_clear_error() {
    let path = cassette("exhausted");
    record(&path).await;
    let p = replay(&path);
    conversation(p.as_ref()).await;
    let mut request = ask("What is in a.txt?");
    request.tools = tools();
    let e = p.chat(request, CancellationToken::new()).await.unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.contains("request #3") && shown.contains("holds only 2"),
        "{shown}"
    );
}

/// Concurrent agents may ask in another order than when recorded: equal requests
/// are found wherever they are; the model name does not take part in matching.
#[tokio::test]
async fn requests_are_matched_out_of_order_and_regardless_of_model() {
    let entry = |q: &str, a: &str| CassetteEntry {
        provider: "openai".into(),
        request: ask(q),
        response: Some(agentfile_llm::ChatResponse {
            content: vec![agentfile_llm::ContentBlock::Text { text: a.into() }],
            stop_reason: agentfile_llm::StopReason::EndTurn,
            raw_stop_reason: None,
            usage: Default::default(),
            model: "gpt-4o".into(),
            latency: Default::default(),
            cost_usd: None,
            attempts: 1,
        }),
        error: None,
    };
    let p = ReplayProvider::from_entries(
        &PathBuf::from("memory.jsonl"),
        vec![entry("first?", "one"), entry("second?", "two")],
    );
    let mut second = ask("second?");
    second.model = Some("another-model".into());
    let r = p.chat(second, CancellationToken::new()).await.unwrap();
    assert_eq!(r.text(), "two");
    let r = p
        .chat(ask("first?"), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(r.text(), "one");
    assert_eq!(p.remaining(), 0);
}

#[tokio::test]
async fn a_recorded_failure_replays_as_a_failure() {
    let path = cassette("failure");
    let server = FakeServer::start(vec![FakeReply::error(400, "prompt is too long")])
        .await
        .unwrap();
    let llm = LlmConfig {
        provider: Some("anthropic".into()),
        model: Some("claude-sonnet-4-5".into()),
        base_url: Some(server.base_url()),
        ..Default::default()
    };
    let p = build(
        llm,
        ProviderOptions {
            http: fast(),
            record: Some(path.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(p.chat(ask("Hi."), CancellationToken::new()).await.is_err());

    let e = replay(&path)
        .chat(ask("Hi."), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("prompt is too long"), "{e}");
}

#[tokio::test]
async fn a_broken_cassette_names_the_line() {
    let path = cassette("broken");
    std::fs::write(&path, "{\"provider\":\"x\",\"request\":{}}\nnot json\n").unwrap();
    let e = ReplayProvider::open(&path).err().unwrap();
    let shown = e.to_string();
    assert!(shown.contains("line 2"), "{shown}");
    let e = ReplayProvider::open(&cassette("missing")).err().unwrap();
    assert!(e.to_string().contains("cannot open"), "{e}");
}
