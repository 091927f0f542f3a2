//! `agentfile sessions replay ID` (CONTRACT §19): a session run again from
//! its own journal — every model answer and tool result as recorded — asks
//! the model nothing (the fake model's request count stays put), runs no
//! tool (a file a tool wrote is not written again) and gives the same
//! outputs; with an edited prompt it stops at that node, `replay-diverged`.

use std::net::SocketAddr;
use std::path::Path;

use agentfile::llm::fake::{FakeReply, FakeScript, FakeServer};
use serde_json::{Value, json};

use crate::support::{self, agentfile, config, copy_dir, fake, repo, text, tmp};

fn run_json(dir: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let o = agentfile(dir, args, &[]);
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    (o.status.code(), v)
}

/// Run, then replay, and compare: the same outputs, no request to the model.
fn replays_offline(dir: &Path, server: &FakeServer, run: &[&str]) -> String {
    let mut args = vec!["run"];
    args.extend_from_slice(run);
    args.extend(["--output", "json"]);
    let (code, first) = run_json(dir, &args);
    assert_eq!(code, Some(0), "{first}");
    let asked = server.request_count();
    assert!(asked > 0, "the first run asks the model");
    let id = first["session_id"].as_str().unwrap().to_owned();
    let (code, again) = run_json(dir, &["sessions", "replay", &id, "--output", "json"]);
    assert_eq!(code, Some(0), "{again}");
    assert_eq!(again["outputs"], first["outputs"], "{again}");
    assert_eq!(server.request_count(), asked, "the replay asked the model");
    let replayed = again["session_id"].as_str().unwrap();
    assert_ne!(replayed, id);
    let events = support::events(dir, replayed);
    let started = events.iter().find(|e| e["type"] == "run_started").unwrap();
    assert_eq!(started["data"]["replay_of"], id.as_str(), "{started}");
    id
}

fn script_server(path: &Path) -> FakeServer {
    let script = FakeScript::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    support::runtime()
        .block_on(FakeServer::start_script(
            script,
            SocketAddr::from(([127, 0, 0, 1], 0)),
        ))
        .unwrap()
}

#[test]
fn each_formats_example_replays_with_no_model_call() {
    for (folder, run) in [
        ("workflow-md", vec![".workflows/summarize"]),
        (
            "workflow-yaml",
            vec!["workflows/release-notes", "--input", "CHANGES=faster start"],
        ),
        (
            "agent-md",
            vec!["reviewer.agent.md", "--input", "task=Review draft.txt"],
        ),
        (
            "agentrc",
            vec!["Agentfile", "--input", "task=What does notes.txt say?"],
        ),
    ] {
        let dir = tmp("replay", folder);
        copy_dir(
            &repo().join("examples").join(folder),
            &dir,
            &[".agentfile", "outputs", "tests"],
        );
        let server = script_server(&dir.join("model.json"));
        // The example's model, spoken to over HTTP so its requests are counted.
        let mut cfg = std::fs::read_to_string(dir.join("agent.toml")).unwrap_or_default();
        config(&dir, &server);
        cfg.push('\n');
        cfg.push_str(&std::fs::read_to_string(dir.join("agent.toml")).unwrap());
        std::fs::write(dir.join("agent.toml"), cfg).unwrap();
        replays_offline(&dir, &server, &run);
    }
}

const WRITER: &str = r#"NAME writer
GOAL note "Write the word done into marker.txt."
GOAL say "Say what $note did."
RUN main USING note, say
"#;

#[test]
fn a_replay_runs_no_tool_and_an_edited_prompt_diverges_at_its_node() {
    let server = fake(vec![
        FakeReply::tool_call("write", json!({"path": "marker.txt", "content": "done"})),
        FakeReply::text("wrote it"),
        FakeReply::text("It wrote the marker."),
    ]);
    let dir = tmp("replay", "writer");
    config(&dir, &server);
    std::fs::write(dir.join("Agentfile"), WRITER).unwrap();
    let id = {
        let marker = dir.join("marker.txt");
        let id = replays_offline_after(&dir, &server, &marker);
        assert!(!marker.exists(), "the replay ran the write tool");
        id
    };
    // An edited prompt: the replay stops at that goal, naming the part.
    std::fs::write(
        dir.join("Agentfile"),
        WRITER.replace("Say what $note did.", "Say in one word what $note did."),
    )
    .unwrap();
    let asked = server.request_count();
    let (code, r) = run_json(&dir, &["sessions", "replay", &id, "--output", "json"]);
    assert_eq!(code, Some(1), "{r}");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("replay-diverged at `main/say`") && error.contains("`messages`"),
        "{r}"
    );
    assert_eq!(server.request_count(), asked, "nothing was asked");
}

/// The first run writes `marker`; it is removed, and the replay must not
/// write it again.
fn replays_offline_after(dir: &Path, server: &FakeServer, marker: &Path) -> String {
    let (code, first) = run_json(dir, &["run", "Agentfile", "--output", "json"]);
    assert_eq!(code, Some(0), "{first}");
    assert!(marker.exists(), "the first run's tool wrote the marker");
    std::fs::remove_file(marker).unwrap();
    let asked = server.request_count();
    let id = first["session_id"].as_str().unwrap().to_owned();
    let (code, again) = run_json(dir, &["sessions", "replay", &id, "--output", "json"]);
    assert_eq!(code, Some(0), "{again}");
    assert_eq!(again["outputs"], first["outputs"]);
    assert_eq!(server.request_count(), asked, "the replay asked the model");
    id
}

/// The same replay over JSON-RPC (`replay`) and as the MCP tool `replay`.
#[test]
fn replay_is_a_json_rpc_method_and_an_mcp_tool() {
    let server = fake(vec![
        FakeReply::tool_call("write", json!({"path": "marker.txt", "content": "done"})),
        FakeReply::text("wrote it"),
        FakeReply::text("It wrote the marker."),
    ]);
    let dir = tmp("replay", "doors");
    config(&dir, &server);
    std::fs::write(dir.join("Agentfile"), WRITER).unwrap();
    let (code, first) = run_json(&dir, &["run", "Agentfile", "--output", "json"]);
    assert_eq!(code, Some(0), "{first}");
    std::fs::remove_file(dir.join("marker.txt")).unwrap();
    let id = first["session_id"].as_str().unwrap().to_owned();
    let ask = |command: &str, lines: &[String]| support::stdio_reply(&dir, command, lines);
    let params = json!({"session_id": id});
    let rpc = ask(
        "serve",
        &[json!({"jsonrpc": "2.0", "id": 1, "method": "replay", "params": params}).to_string()],
    );
    assert_eq!(rpc["result"]["status"], "completed", "{rpc}");
    assert_eq!(rpc["result"]["outputs"], first["outputs"], "{rpc}");
    let mcp = ask(
        "mcp",
        &[
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string(),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "replay", "arguments": params}}).to_string(),
        ],
    );
    assert_eq!(mcp["result"]["isError"], false, "{mcp}");
    assert_eq!(
        mcp["result"]["structuredContent"]["outputs"], first["outputs"],
        "{mcp}"
    );
    assert_eq!(
        server.request_count(),
        3,
        "only the first run asked the model"
    );
    assert!(!dir.join("marker.txt").exists(), "no replay ran the tool");
}
