//! Multi-round-trip `requestState` across `agentfile mcp --http` processes
//! (CONTRACT §22): with `[mcp] state_key_env`, a state sealed by one replica
//! is opened by another on the same store, and by the same one after a
//! restart; with the old key as `state_key_previous_env`, a state sealed
//! before a rotation still opens; a replica with another key refuses it
//! (`-32602`). A weak or missing key stops the server at start. Raw
//! stateless 2026-07-28 requests over HTTP; the model is the loopback fake.

use std::path::Path;
use std::process::Stdio;

use crate::support::Dir;
use crate::support::mcp_http::{Replica, WAIT};
use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};

const KEY_VAR: &str = "AGENTFILE_MCP_REPLICAS_TEST_KEY";
const STATE_VAR: &str = "AGENTFILE_TEST_STATE_SEAL";
const OLD_VAR: &str = "AGENTFILE_TEST_STATE_SEAL_OLD";

/// Two keys of 32 random bytes, as `openssl rand -hex 32` and `-base64 32`
/// print them.
const KEY_1: &str = "3b1f0a9c5e7d2468ace13579bdf02468fedcba9876543210a1b2c3d4e5f60718";
const KEY_2: &str = "q2N0Yk9+Xv3L8pZr1sT6uW4yA7bC0dE5fG9hJ2kL3mM=";
const KEY_3: &str = "c0ffee00d15ea5e0badc0de0cafe0f00d0123456789abcdef0fedcba98765432";

const GATED: &str =
    "NAME gated\nGOAL act \"Do the gated thing\" SUPERVISED HUMAN\nRUN main USING act\n";

/// A WORKFLOW.md that suspends until `go.now`, then ends with the signal's
/// payload: a run that no process holds between the rounds.
const HOLD: &str = r#"---
name: Hold
id: hold
description: Waits for a signal.
version: 1.0.0
inputs: { type: object }
outputs: { type: object }
steps:
  - id: hold
    kind: suspend
    resume:
      on: [go.now]
    next: $end
result:
  channel: $steps.hold.channel
---
"#;

async fn fake() -> FakeServer {
    FakeServer::start(vec![
        FakeReply::text("gated thing done").when(["Do the gated thing"]),
    ])
    .await
    .unwrap()
}

/// A workspace whose config names the state key variables.
fn workspace(label: &str, fake: &FakeServer, previous: bool) -> Dir {
    let d = Dir::new(&format!("mcp-replicas-{label}"));
    let previous = if previous {
        format!("state_key_previous_env = [\"{OLD_VAR}\"]\n")
    } else {
        String::new()
    };
    std::fs::write(
        d.0.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n\n[mcp]\nstate_key_env = \"{STATE_VAR}\"\n{previous}",
            fake.base_url()
        ),
    )
    .unwrap();
    std::fs::write(d.0.join("gated.agent"), GATED).unwrap();
    std::fs::create_dir_all(d.0.join(".workflows/hold")).unwrap();
    std::fs::write(d.0.join(".workflows/hold/WORKFLOW.md"), HOLD).unwrap();
    d
}

fn command(ws: &Path, key: Option<&str>, old: Option<&str>) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.arg("mcp")
        .arg("--workspace")
        .arg(ws)
        .args(["--http", "127.0.0.1:0", "--heartbeat-ms", "300"])
        .current_dir(ws)
        .env(KEY_VAR, "test-key-0123456789")
        .env_remove(STATE_VAR)
        .env_remove(OLD_VAR)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("AGENTFILE_PROVIDER")
        .env_remove("AGENTFILE_MODEL")
        .env_remove("AGENTFILE_MCP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(k) = key {
        c.env(STATE_VAR, k);
    }
    if let Some(k) = old {
        c.env(OLD_VAR, k);
    }
    c
}

/// A replica on workspace `ws` with state key `key` (and previous `old`).
async fn start(ws: &Path, key: &str, old: Option<&str>) -> Replica {
    Replica::start(command(ws, Some(key), old), "replica").await
}

/// A stateless 2026-07-28 `tools/call` of `run` on `path` from a client that
/// declared elicitation; the JSON-RPC reply.
async fn call(replica: &Replica, path: &str, extra: Value) -> Value {
    let mut params = json!({"name": "run", "arguments": {"path": path}});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        params[k] = v;
    }
    replica
        .request("tools/call", params, json!({"elicitation": {"form": {}}}))
        .await
}

/// The state and the accepting answer of an input-required reply: approve,
/// or signal `go.now` with a channel.
fn asked(r: &Value) -> (String, Value) {
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let state = r["result"]["requestState"].as_str().unwrap().to_owned();
    let key = r["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let content = if key.starts_with("approval-") {
        json!({"approve": true})
    } else {
        assert!(key.starts_with("signal-"), "{r}");
        json!({"event": "go.now", "payload": "{\"channel\": \"#ops\"}"})
    };
    let answer = json!({key: {"action": "accept", "content": content}});
    (state, answer)
}

/// Answer rounds of the call of `path` on `replica` until its run ends (a
/// run resumed after a restart asks again); the states are never refused.
async fn finish(replica: &Replica, path: &str, mut state: String, mut answer: Value) -> Value {
    for _ in 0..4 {
        let r = call(
            replica,
            path,
            json!({"requestState": state, "inputResponses": answer}),
        )
        .await;
        assert!(r.get("error").is_none(), "the state was refused: {r}");
        if r["result"]["resultType"] == "input_required" {
            (state, answer) = asked(&r);
            continue;
        }
        return r;
    }
    panic!("the run did not complete in four rounds");
}

fn completed(r: &Value) {
    let s = &r["result"]["structuredContent"];
    assert_eq!(s["status"], "completed", "{r}");
    assert_eq!(s["outputs"]["act"], "gated thing done", "{r}");
}

fn signalled(r: &Value) {
    let s = &r["result"]["structuredContent"];
    assert_eq!(s["status"], "completed", "{r}");
    assert_eq!(s["outputs"]["channel"], "#ops", "{r}");
}

const HOLD_PATH: &str = ".workflows/hold";

#[tokio::test]
async fn a_state_sealed_by_one_replica_opens_on_another_and_after_a_restart() {
    let f = fake().await;
    let ws = workspace("two", &f, false);
    let a = start(&ws.0, KEY_1, None).await;
    let b = start(&ws.0, KEY_1, None).await;

    // The first round on A, the retry on B: B signals the suspended run
    // and it completes there.
    let (state, answer) = asked(&call(&a, HOLD_PATH, json!({})).await);
    signalled(&finish(&b, HOLD_PATH, state, answer).await);

    // An approval state of A's opens on B too. The run itself waits inside
    // A, so B may refuse to decide for it, but never for the state.
    let (state, answer) = asked(&call(&a, "gated.agent", json!({})).await);
    let r = call(
        &b,
        "gated.agent",
        json!({"requestState": state.clone(), "inputResponses": answer.clone()}),
    )
    .await;
    let refused = r["error"]["message"].as_str().unwrap_or_default();
    assert!(!refused.contains("invalid requestState"), "{r}");

    // A state sealed by A, which is then restarted with the same key: the
    // run resumes there (and asks again) and completes.
    a.stop().await;
    let a = start(&ws.0, KEY_1, None).await;
    completed(&finish(&a, "gated.agent", state, answer).await);

    // Neither replica ever wrote the key.
    for r in [&a, &b] {
        let log = r.log.lock().unwrap().join("\n");
        assert!(!log.contains(KEY_1), "{log}");
    }
}

#[tokio::test]
async fn a_rotated_key_still_opens_old_states_and_another_key_opens_none() {
    let f = fake().await;
    // Every replica here names a previous key, as they do during a rotation.
    let ws = workspace("rotate", &f, true);
    let old = start(&ws.0, KEY_1, Some(KEY_3)).await;
    let (before, answer) = asked(&call(&old, HOLD_PATH, json!({})).await);
    let (refused_state, refused_answer) = asked(&call(&old, HOLD_PATH, json!({})).await);

    // Keys that are not KEY_1 (current or previous): the state is refused,
    // as one altered is.
    let other = start(&ws.0, KEY_3, Some(KEY_2)).await;
    let r = call(
        &other,
        HOLD_PATH,
        json!({"requestState": refused_state, "inputResponses": refused_answer}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("requestState")),
        "{r}"
    );
    other.stop().await;

    // Rotated: KEY_2 now, KEY_1 previous. The state sealed before opens,
    // and what the rotated replica seals opens where KEY_2 is current.
    old.stop().await;
    let rotated = start(&ws.0, KEY_2, Some(KEY_1)).await;
    signalled(&finish(&rotated, HOLD_PATH, before, answer).await);
    let (after, answer) = asked(&call(&rotated, HOLD_PATH, json!({})).await);
    rotated.stop().await;
    let fresh = start(&ws.0, KEY_2, Some(KEY_3)).await;
    signalled(&finish(&fresh, HOLD_PATH, after, answer).await);
}

#[tokio::test]
async fn a_weak_or_missing_state_key_stops_the_server_at_start() {
    let f = fake().await;
    let ws = workspace("weak", &f, false);
    for (key, says) in [
        (None, format!("{STATE_VAR} is not set")),
        (Some("not-random-at-all"), "too easy to guess".to_owned()),
    ] {
        let out = tokio::time::timeout(WAIT, command(&ws.0, key, None).output())
            .await
            .expect("the server did not stop")
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("[mcp] state_key_env"), "{err}");
        assert!(err.contains(&says), "{err}");
        assert!(!err.contains("not-random-at-all"), "{err}");
    }
}
