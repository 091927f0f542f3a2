//! `agentfile sessions fork ID --at NODE` (CONTRACT §19): a new session takes
//! every node that completed before NODE from the old one's journal and runs
//! NODE and all after it live. The fake model's request log shows which
//! nodes asked it; the original session is left as it was.

use std::path::Path;

use agentfile::llm::fake::FakeReply;
use serde_json::Value;

use crate::support::{self, agentfile, config, fake, text, tmp};

const THREE: &str = r#"NAME three
GOAL a "Name a colour."
GOAL b "Name a fruit of the colour $a."
GOAL c "Say a sentence about $b."
RUN main USING a, b, c
"#;

fn sessions(dir: &Path) -> Vec<String> {
    let o = agentfile(dir, &["sessions", "list", "--format", "json"], &[]);
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    v.as_array()
        .or(v["sessions"].as_array())
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

fn run_json(dir: &Path, args: &[&str]) -> Value {
    let o = agentfile(dir, args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    support::result_of(&o)
}

#[test]
fn a_fork_at_the_second_of_three_goals_asks_the_model_from_there_on() {
    let server = fake(vec![
        FakeReply::text("red"),
        FakeReply::text("cherry"),
        FakeReply::text("Cherries are small."),
    ]);
    let dir = tmp("fork", "dsl");
    config(&dir, &server);
    std::fs::write(dir.join("Agentfile"), THREE).unwrap();
    let first = run_json(&dir, &["run", "Agentfile", "--output", "json"]);
    let id = first["session_id"].as_str().unwrap().to_owned();
    assert_eq!(server.request_count(), 3);
    let before = support::events(&dir, &id);

    // Edit goal b, then fork at it: a is taken over, b and c are asked again.
    std::fs::write(
        dir.join("Agentfile"),
        THREE.replace(
            "Name a fruit of the colour $a.",
            "Name a vegetable of the colour $a.",
        ),
    )
    .unwrap();
    server.push([
        FakeReply::text("tomato"),
        FakeReply::text("Tomatoes are fruit, really."),
    ]);
    let forked = run_json(
        &dir,
        &[
            "sessions", "fork", &id, "--at", "main/b", "--output", "json",
        ],
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "a was not asked again, b and c were");
    let asked = |i: usize| requests[i].body.to_string();
    assert!(
        asked(3).contains("Name a vegetable of the colour red."),
        "{}",
        asked(3)
    );
    assert!(asked(4).contains("tomato"), "{}", asked(4));
    assert_eq!(forked["outputs"]["a"], "red", "{forked}");
    assert_eq!(forked["outputs"]["b"], "tomato", "{forked}");
    assert_eq!(
        forked["outputs"]["c"], "Tomatoes are fruit, really.",
        "{forked}"
    );
    let new = forked["session_id"].as_str().unwrap();
    assert_ne!(new, id);
    let events = support::events(&dir, new);
    let copied: Vec<&Value> = events.iter().filter(|e| e["replayed"] == true).collect();
    assert!(
        !copied.is_empty() && copied.iter().all(|e| e["node"] == "main/a"),
        "only a's events are copied: {copied:#?}"
    );
    let started = events.iter().find(|e| e["type"] == "run_started").unwrap();
    assert_eq!(
        started["data"]["forked_from"],
        serde_json::json!({"session": id, "node": "main/b"}),
        "{started}"
    );
    // The original session is as it was.
    assert_eq!(support::events(&dir, &id), before);
    assert_eq!(sessions(&dir).len(), 2);
}

#[test]
fn a_fork_refuses_a_workflow_changed_before_the_node_and_an_unknown_node() {
    let server = fake(vec![
        FakeReply::text("red"),
        FakeReply::text("cherry"),
        FakeReply::text("Cherries are small."),
    ]);
    let dir = tmp("fork", "refused");
    config(&dir, &server);
    std::fs::write(dir.join("Agentfile"), THREE).unwrap();
    let first = run_json(&dir, &["run", "Agentfile", "--output", "json"]);
    let id = first["session_id"].as_str().unwrap().to_owned();
    std::fs::write(
        dir.join("Agentfile"),
        THREE.replace("Name a colour.", "Name a warm colour."),
    )
    .unwrap();
    let o = agentfile(&dir, &["sessions", "fork", &id, "--at", "main/c"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("goal `a` changed"), "{}", text(&o));
    let o = agentfile(&dir, &["sessions", "fork", &id, "--at", "main/bb"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("did you mean `main/b`?"), "{}", text(&o));
    assert_eq!(server.request_count(), 3, "nothing was asked");
    assert_eq!(sessions(&dir).len(), 1, "no session was left behind");
}

const TRIAGE: &str = r#"---
name: Triage
id: triage
description: Rate each lead, then sum up.
version: 1.0.0
inputs:
  type: object
  properties:
    leads: { type: array, items: { type: string } }
outputs: { type: string }
steps:
  - id: each
    kind: map
    over: $input.leads
    steps:
      - id: rate
        kind: tool
        tool: agent
        inputs:
          prompt: "Rate the lead ${{ $item }} from 1 to 5."
    next: sum
  - id: sum
    kind: tool
    tool: agent
    inputs:
      prompt: "Sum up the ratings: ${{ $steps.each }}"
---
"#;

#[test]
fn a_fork_inside_a_map_item_runs_that_item_and_what_follows() {
    let rate = |lead: &str, n: &str| FakeReply::text(n).when([format!("Rate the lead {lead}")]);
    let server = fake(vec![
        rate("ann", "3"),
        rate("bob", "2"),
        rate("cy", "4"),
        FakeReply::text("9 in all").when(["Sum up the ratings"]),
        FakeReply::text("nine, all told").when(["Add up the ratings"]),
    ]);
    let dir = tmp("fork", "map");
    config(&dir, &server);
    std::fs::create_dir_all(dir.join(".workflows/triage")).unwrap();
    std::fs::write(dir.join(".workflows/triage/WORKFLOW.md"), TRIAGE).unwrap();
    std::fs::write(dir.join("leads.json"), r#"{"leads": ["ann", "bob", "cy"]}"#).unwrap();
    let first = run_json(
        &dir,
        &[
            "run",
            ".workflows/triage",
            "--inputs-json",
            "leads.json",
            "--output",
            "json",
        ],
    );
    let id = first["session_id"].as_str().unwrap().to_owned();
    assert_eq!(server.request_count(), 4);
    let before = support::events(&dir, &id);
    // An edit after the fork point: the sum is asked another way.
    std::fs::write(
        dir.join(".workflows/triage/WORKFLOW.md"),
        TRIAGE.replace("Sum up the ratings", "Add up the ratings"),
    )
    .unwrap();

    let forked = run_json(
        &dir,
        &[
            "sessions",
            "fork",
            &id,
            "--at",
            "each[1]/rate",
            "--output",
            "json",
        ],
    );
    let requests = server.requests();
    let later: Vec<String> = requests[4..].iter().map(|r| r.body.to_string()).collect();
    assert_eq!(later.len(), 2, "item 1 and the sum: {later:#?}");
    assert!(later[0].contains("Rate the lead bob"), "{}", later[0]);
    assert!(
        later[1].contains(r#"Add up the ratings: [\"3\",\"2\",\"4\"]"#),
        "{}",
        later[1]
    );
    assert_eq!(forked["outputs"]["result"], "nine, all told", "{forked}");
    assert_eq!(
        support::events(&dir, &id),
        before,
        "the original is untouched"
    );
}

/// The same fork over JSON-RPC (`fork`) and as the MCP tool `fork`: a new
/// session whose `run_started` names the session and node it came from.
#[test]
fn fork_is_a_json_rpc_method_and_an_mcp_tool() {
    let server = fake(vec![
        FakeReply::text("red"),
        FakeReply::text("cherry"),
        FakeReply::text("Cherries are small."),
    ]);
    let dir = tmp("fork", "doors");
    config(&dir, &server);
    std::fs::write(dir.join("Agentfile"), THREE).unwrap();
    let first = run_json(&dir, &["run", "Agentfile", "--output", "json"]);
    let id = first["session_id"].as_str().unwrap().to_owned();
    server.push([FakeReply::text("plum"), FakeReply::text("Plums are sweet.")]);
    server.push([
        FakeReply::text("grape"),
        FakeReply::text("Grapes grow in bunches."),
    ]);
    let ask = |command: &str, lines: &[String]| support::stdio_reply(&dir, command, lines);
    let params = serde_json::json!({"session_id": id, "at": "main/b"});
    let rpc = ask(
        "serve",
        &[
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "fork", "params": params})
                .to_string(),
        ],
    );
    assert_eq!(rpc["result"]["status"], "completed", "{rpc}");
    assert_eq!(rpc["result"]["outputs"]["b"], "plum", "{rpc}");
    let mcp = ask(
        "mcp",
        &[
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string(),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fork", "arguments": params}}).to_string(),
        ],
    );
    let result = &mcp["result"];
    assert_eq!(result["isError"], false, "{mcp}");
    assert_eq!(
        result["structuredContent"]["outputs"]["b"], "grape",
        "{mcp}"
    );
    assert_eq!(server.request_count(), 7, "a was asked once only");
    let forked = result["structuredContent"]["session_id"].as_str().unwrap();
    let events = support::events(&dir, forked);
    let started = events.iter().find(|e| e["type"] == "run_started").unwrap();
    assert_eq!(started["data"]["forked_from"]["session"], id.as_str());
}
