//! Agent definition files (`*.agent.md`) end to end with the built binary:
//! the reference `policy.agent.md` as `inspect` shows it, one agent file
//! loaded by each format that names a persona, and JavaScript tools called by
//! the fake model — a value returned, the sandbox's missing escape hatches,
//! an infinite loop stopped, a secret read refused by the policy gate —
//! with `required.env` and `required.startup` as hard gates before any turn.

use std::path::PathBuf;

use agentfile::llm::fake::FakeReply;
use serde_json::{Value, json};

use crate::support;
use crate::support::{agentfile, config, events, fake, repo, result_of, text};

fn tmp(name: &str) -> PathBuf {
    support::tmp("am", name)
}

#[test]
fn the_reference_policy_agent_loads_with_its_system_rules_and_commands() {
    let dir = tmp("policy");
    std::fs::copy(
        repo().join("../shared/reference/agent-md/policy.agent.md"),
        dir.join("policy.agent.md"),
    )
    .unwrap();
    let o = agentfile(&dir, &["validate", "policy.agent.md"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = agentfile(&dir, &["inspect", "policy.agent.md"], &[]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "agent policy: 🧭 Policy Agent  version 0.1.0  active",
        "  system message\n    You are a policy-focused AI agent.\n",
        "    When in doubt, propose changes instead of applying them.\n  rules\n    - Do not modify policies directly unless explicitly instructed\n",
        "    /policy.checkPolicies <root-path>  Check all policy files for inconsistencies",
        "    /policy.buildPolicyIndex <root-path> <index-path>  Build or update a policy index file.",
        "    /policy.suggestPolicyChanges <root-path>",
        "  recommended models  GPT-5.2",
    ] {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }
    let o = agentfile(
        &dir,
        &["inspect", "policy.agent.md", "--format", "json"],
        &[],
    );
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let card = &plan["agents"][0]["card"];
    assert_eq!(card["commands"].as_array().unwrap().len(), 3, "{card:#}");
    assert_eq!(
        card["commands"][1]["arguments"],
        json!(["root-path", "index-path"])
    );
    assert!(
        plan["agents"][0]["prompt"]
            .as_str()
            .unwrap()
            .contains("## Rules\n\n- Do not modify policies"),
        "{plan:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

const TOOLS_AGENT: &str = r#"---
title: Toolsmith
abilities:
  allow: [fs]
required:
  startup: ready
---

## System
You use your tools.

## Rules
- Use tools.

## Tools
```js
const obj = { type: "object", properties: {} };
return {
  ready: { fn: () => "ready", scheme: { name: "ready", description: "Startup check", parameters: obj } },
  add: {
    fn: async ({ a, b }) => a + b,
    scheme: { name: "add", description: "Adds two numbers",
      parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] } }
  },
  probe: {
    fn: () => {
      const out = [];
      try { require("fs"); out.push("require ok"); } catch (e) { out.push("require: " + e.message); }
      out.push("process: " + typeof process);
      try { fetch("https://example.com/"); out.push("fetch ok"); } catch (e) { out.push("fetch: " + e.message); }
      return out.join(" | ");
    },
    scheme: { name: "probe", description: "Tries the sandbox's walls", parameters: obj }
  },
  spin: { fn: () => { while (true) {} }, scheme: { name: "spin", description: "Never ends", parameters: obj } },
  secret: { fn: () => read("~/.ssh/id_rsa"), scheme: { name: "secret", description: "Reads a key", parameters: obj } },
  notes: { fn: () => read("notes.txt").trim(), scheme: { name: "notes", description: "Reads notes", parameters: obj } },
};
```
"#;

#[test]
fn javascript_tools_run_sandboxed_and_every_host_call_passes_the_gate() {
    let dir = tmp("tools");
    std::fs::write(dir.join("tools.agent.md"), TOOLS_AGENT).unwrap();
    std::fs::write(dir.join("notes.txt"), "the notes\n").unwrap();
    let server = fake(vec![
        FakeReply::tool_call("ADD", json!({"a": 2, "b": 3})),
        FakeReply::tool_call("probe", json!({})),
        FakeReply::tool_call("spin", json!({})),
        FakeReply::tool_call("secret", json!({})),
        FakeReply::tool_call("notes", json!({})),
        FakeReply::text("All done."),
    ]);
    config(&dir, &server);
    let started = std::time::Instant::now();
    let o = agentfile(
        &dir,
        &[
            "run",
            "tools.agent.md",
            "--input",
            "task=use the tools",
            "--output",
            "json",
        ],
        &[],
    );
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r:#}\n{}", text(&o));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the loop was not stopped in time"
    );
    let reqs = server.requests();
    let first = &reqs[0].body;
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You use your tools.\n\n## Rules\n\n- Use tools."),
        "{first:#}"
    );
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for t in ["ready", "add", "probe", "spin", "secret", "notes"] {
        assert!(offered.contains(&t), "{t} not offered: {offered:?}");
    }
    let evs = events(&dir, r["session_id"].as_str().unwrap());
    let result = |id_tool: &str| -> Value {
        evs.iter()
            .find(|e| e["type"] == "tool_result" && e["data"]["tool"] == id_tool)
            .cloned()
            .unwrap_or_else(|| panic!("no result for {id_tool}: {evs:#?}"))
    };
    // The startup tool ran before the first turn.
    let ready_at = evs
        .iter()
        .position(|e| e["type"] == "tool_result" && e["data"]["tool"] == "ready")
        .unwrap();
    let first_turn = evs.iter().position(|e| e["type"] == "llm_request").unwrap();
    assert!(ready_at < first_turn, "{evs:#?}");
    assert_eq!(result("ADD")["data"]["content"], "5");
    let probe = result("probe")["data"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(probe.contains("require: require is not defined"), "{probe}");
    assert!(probe.contains("process: undefined"), "{probe}");
    assert!(
        probe.contains("fetch: ") && probe.contains("`network` ability"),
        "{probe}"
    );
    let spin = result("spin");
    assert_eq!(spin["data"]["is_error"], true, "{spin}");
    assert!(
        spin["data"]["content"]
            .as_str()
            .unwrap()
            .contains("CPU time"),
        "{spin}"
    );
    let secret = result("secret");
    assert_eq!(secret["data"]["is_error"], true, "{secret}");
    let denied: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "policy_denied")
        .collect();
    assert!(
        denied.iter().any(|d| d["data"]["tool"] == "read"
            && d["data"]["reason"].as_str().unwrap().contains(".ssh")),
        "{denied:#?}"
    );
    assert!(
        denied.iter().any(|d| d["data"]["tool"] == "fetch"),
        "the ability refusal is recorded too: {denied:#?}"
    );
    assert_eq!(result("notes")["data"]["content"], "the notes");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn required_env_and_a_failing_startup_stop_the_agent_before_any_turn() {
    let dir = tmp("gates");
    std::fs::write(
        dir.join("needs.agent.md"),
        "---\nrequired:\n  env: [AGENTFILE_TEST_NEEDED]\n---\n# Needs\n\nNeeds a variable.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("boot.agent.md"),
        "---\nrequired:\n  startup: Check\n---\n# Boot\n\nBoots.\n\n## Tools\n```js\nreturn { check: { fn: () => { throw new Error(\"no database\"); }, scheme: { name: \"check\", description: \"Checks\", parameters: { type: \"object\" } } } };\n```\n",
    )
    .unwrap();
    let server = fake(vec![FakeReply::text("never")]);
    config(&dir, &server);
    let o = agentfile(&dir, &["run", "needs.agent.md", "--input", "task=x"], &[]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("requires environment variables that are not set: AGENTFILE_TEST_NEEDED"),
        "{}",
        text(&o)
    );
    let o = agentfile(
        &dir,
        &[
            "run",
            "boot.agent.md",
            "--input",
            "task=x",
            "--output",
            "json",
        ],
        &[],
    );
    let r = result_of(&o);
    assert_eq!(r["status"], "failed", "{r:#}");
    let err = r.to_string();
    assert!(
        err.contains("startup tool `check` failed") && err.contains("no database"),
        "{r:#}"
    );
    assert!(server.requests().is_empty(), "a model was asked");
    // With the variable set, the run starts.
    let o = agentfile(
        &dir,
        &[
            "run",
            "needs.agent.md",
            "--input",
            "task=x",
            "--output",
            "json",
        ],
        &[("AGENTFILE_TEST_NEEDED", "1")],
    );
    assert_eq!(result_of(&o)["status"], "completed", "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_format_that_names_a_persona_loads_the_agent_file() {
    let dir = tmp("formats");
    std::fs::create_dir_all(dir.join("agents")).unwrap();
    std::fs::write(
        dir.join("agents/critic.agent.md"),
        "---\ntitle: Critic\ninput: prices in $\n---\n\n## System\nYou criticise {{ctx.input}}.\n\n## Rules\n- Be fair.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Agentfile"),
        "NAME critique\nAGENT critic FROM agents/critic.agent.md\nGOAL judge \"Judge the plan\" USING critic\nRUN main USING judge\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join(".workflows/judge")).unwrap();
    std::fs::write(
        dir.join(".workflows/judge/WORKFLOW.md"),
        "---\nname: judge\nid: judge\nversion: 1.0.0\ndescription: Judge.\ninputs:\n  type: object\n  properties: {}\noutputs:\n  type: object\n  properties: {}\nsteps:\n  - id: judge\n    kind: tool\n    tool: agent\n    inputs:\n      prompt: Judge the plan\n      agent: ../../agents/critic.agent.md\n---\n",
    )
    .unwrap();
    let want = "You criticise prices in $.\n\n## Rules\n\n- Be fair.";
    let server = fake(vec![FakeReply::text("Fair.")]);
    config(&dir, &server);
    let o = agentfile(&dir, &["run", "Agentfile", "--output", "json"], &[]);
    assert_eq!(result_of(&o)["status"], "completed", "{}", text(&o));
    let system = server.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.starts_with(want), "{system}");
    // WORKFLOW.md keeps agent files inside its folder.
    let o = agentfile(&dir, &["validate", ".workflows/judge/WORKFLOW.md"], &[]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("must lie inside the workflow's folder"),
        "{}",
        text(&o)
    );
    std::fs::create_dir_all(dir.join(".workflows/judge/agents")).unwrap();
    std::fs::copy(
        dir.join("agents/critic.agent.md"),
        dir.join(".workflows/judge/agents/critic.agent.md"),
    )
    .unwrap();
    let wmd = std::fs::read_to_string(dir.join(".workflows/judge/WORKFLOW.md"))
        .unwrap()
        .replace("../../agents/", "agents/");
    std::fs::write(dir.join(".workflows/judge/WORKFLOW.md"), wmd).unwrap();
    let server = fake(vec![FakeReply::text("Fair.")]);
    config(&dir, &server);
    let o = agentfile(
        &dir,
        &["run", ".workflows/judge/WORKFLOW.md", "--output", "json"],
        &[],
    );
    assert_eq!(result_of(&o)["status"], "completed", "{}", text(&o));
    let system = server.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.starts_with(want), "{system}");
    let _ = std::fs::remove_dir_all(&dir);
}
