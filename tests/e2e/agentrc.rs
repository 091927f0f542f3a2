//! agentrc Agentfiles end to end with the built binary: a core-syntax agent
//! whose Cedar policy permits reads and forbids writes under a path, run
//! against the fake model (the read works, the forbidden write is denied by
//! Cedar and recorded naming the policy, a permitted write lands); a
//! Dockerfile-shaped agent run with its SOP and only its declared tools; the
//! run refusing to start on an unknown tool or a missing credential; the
//! support matrix; and the digest's rule (placement, comments and layout do
//! not count, content does).

use std::path::Path;
use std::process::Output;

use agentfile::llm::fake::FakeReply;
use serde_json::{Value, json};

use crate::support;
use crate::support::{config, events, fake, result_of, text};

fn tmp(name: &str) -> std::path::PathBuf {
    support::tmp("rc", name)
}

fn agentfile(dir: &Path, args: &[&str]) -> Output {
    support::agentfile(dir, args, &[])
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

const WRITER: &str = r#"# syntax=agentrc.agentfile/v0.1
AGENT writer
CMD python ./agent.py
TOOL utcp:file_read
TOOL utcp:file_write
MOUNT /workspace rw
AUDIT all
POLICY
  permit(
    principal == AgentRC::Agent::"writer",
    action == AgentRC::Action::"tool.invoke",
    resource
  ) when { [AgentRC::Tool::"file_read", AgentRC::Tool::"file_write"].contains(resource) };
  @id("no-private-writes")
  forbid(
    principal,
    action == AgentRC::Action::"filesystem.write",
    resource
  ) when { context.path like "/workspace/private/*" };
END
"#;

#[test]
fn cedar_permits_the_read_and_denies_the_write_under_a_path() {
    let dir = tmp("cedar");
    std::fs::write(dir.join("Agentfile"), WRITER).unwrap();
    std::fs::write(dir.join("notes.txt"), "the notes\n").unwrap();
    std::fs::create_dir_all(dir.join("private")).unwrap();
    let server = fake(vec![
        FakeReply::tool_call("read", json!({"path": "notes.txt"})),
        FakeReply::tool_call(
            "write",
            json!({"path": "private/leak.txt", "content": "secret"}),
        ),
        FakeReply::tool_call("write", json!({"path": "out.txt", "content": "summary"})),
        FakeReply::text("Done."),
    ]);
    config(&dir, &server);
    let o = agentfile(
        &dir,
        &[
            "run",
            "Agentfile",
            "--input",
            "task=summarise the notes",
            "--output",
            "json",
        ],
    );
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r:#}\n{}", text(&o));
    let reqs = server.requests();
    // Only the declared tools are offered.
    let mut tools = offered(&reqs[0].body);
    tools.sort();
    assert_eq!(tools, ["read", "write"], "{:#}", reqs[0].body);
    let evs = events(&dir, r["session_id"].as_str().unwrap());
    let results: Vec<&Value> = evs.iter().filter(|e| e["type"] == "tool_result").collect();
    assert!(
        results[0]["data"]["content"]
            .as_str()
            .unwrap()
            .contains("the notes"),
        "{results:#?}"
    );
    let denied: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "policy_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert_eq!(denied[0]["data"]["tool"], "write");
    let rule = denied[0]["data"]["rule"].as_str().unwrap();
    assert!(
        rule.contains("cedar") && rule.contains("no-private-writes"),
        "{rule}"
    );
    let reason = denied[0]["data"]["reason"].as_str().unwrap();
    assert!(reason.contains("/workspace/private/leak.txt"), "{reason}");
    assert!(!dir.join("private/leak.txt").exists(), "a denied call ran");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.txt")).unwrap(),
        "summary"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dockerfile_shaped_agent_runs_with_its_sop_and_declared_tools_only() {
    let dir = tmp("docker");
    std::fs::write(
        dir.join("Agentfile"),
        "# syntax=agentrc.agentfile/v0.1\nFROM python:3.11-slim\nIDENTITY name=notes version=1.0\nCAPABILITY text\nSOP <<EOF\nYou summarise notes.\nBe brief.\nEOF\nCOPY --chmod=755 ./tools/file_read /mnt/tools/file_read\nPOLICY model.name claude-sonnet-4\nCMD python ./agent.py\n",
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "the notes\n").unwrap();
    let server = fake(vec![
        FakeReply::tool_call("bash", json!({"command": "cat notes.txt"})),
        FakeReply::tool_call("read", json!({"path": "notes.txt"})),
        FakeReply::text("Short notes."),
    ]);
    config(&dir, &server);
    let o = agentfile(
        &dir,
        &[
            "run",
            "Agentfile",
            "--input",
            "task=summarise",
            "--output",
            "json",
            "--allow",
            "bash",
        ],
    );
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r:#}\n{}", text(&o));
    let reqs = server.requests();
    let body = &reqs[0].body;
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You summarise notes.\nBe brief.\n\n"),
        "{body:#}"
    );
    // `--allow bash` widens the operator's policy, not the declaration.
    assert_eq!(offered(body), ["read"], "{body:#}");
    let evs = events(&dir, r["session_id"].as_str().unwrap());
    let read = evs
        .iter()
        .find(|e| e["type"] == "tool_result" && e["data"]["tool"] == "read")
        .unwrap();
    assert!(
        read["data"]["content"]
            .as_str()
            .unwrap()
            .contains("the notes")
    );
    let bash = evs
        .iter()
        .find(|e| e["type"] == "tool_result" && e["data"]["tool"] == "bash")
        .unwrap();
    assert_eq!(bash["data"]["is_error"], true, "{bash}");
    assert!(
        evs.iter().any(|e| e["type"] == "warning"
            && e["data"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("POLICY model.name"))),
        "requests a run does not act on are reported"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unknown_tools_and_missing_credentials_refuse_to_start() {
    let dir = tmp("refuse");
    std::fs::write(
        dir.join("Agentfile"),
        "AGENT clock\nTOOL strands:current_time\nCRED token env:AGENTFILE_TEST_ABSENT\nAUDIT basic\nPOLICY\n  permit(principal, action, resource);\nEND\n",
    )
    .unwrap();
    let server = fake(vec![FakeReply::text("never")]);
    config(&dir, &server);
    let o = agentfile(&dir, &["run", "Agentfile", "--input", "task=time"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("strands:current_time"), "{t}");
    assert!(t.contains("AGENTFILE_TEST_ABSENT (CRED token)"), "{t}");
    assert!(server.requests().is_empty(), "the model was asked");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_support_matrix_lists_every_directive() {
    let dir = tmp("matrix");
    let o = agentfile(&dir, &["inspect", "--support-matrix"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    for d in [
        "AGENT",
        "FROM",
        "CMD",
        "TOOL",
        "MOUNT",
        "CRED",
        "URL",
        "POLICY",
        "AUDIT",
        "TOOLSET",
        "FUNCTION",
        "SKILL",
        "SERVER",
        "MCP",
        "MEMORY",
        "SOP",
        "ALLOW",
        "DENY",
        "RATELIMIT",
        "TIMEOUT",
        "LIMIT",
        "ISOLATION",
        "IMAGE",
        "SLICE",
        "BACKEND",
        "BIND",
        "BROKER",
        "PLUGIN",
        "TRACE",
        "HEALTHCHECK",
        "SHELL",
        "OPTIMIZER",
        "IDENTITY",
        "CAPABILITY",
        "COPY",
        "ADD",
        "LABEL",
    ] {
        assert!(
            t.lines()
                .any(|l| l.trim_start().starts_with(&format!("{d} "))),
            "{d} missing:\n{t}"
        );
    }
    let o = agentfile(&dir, &["inspect", "--support-matrix", "--format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["directives"].as_array().unwrap();
    assert!(
        rows.iter()
            .any(|r| r["directive"] == "POLICY" && r["syntax"] == "core" && r["enforces"] == true)
    );
    assert!(
        rows.iter()
            .any(|r| r["directive"] == "ISOLATION" && r["placement"] == true)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_digest_ignores_placement_comments_and_layout() {
    let dir = tmp("digest");
    let digest = |name: &str, body: &str, extensions: bool| -> String {
        std::fs::write(dir.join(name), body).unwrap();
        let mut args = vec!["inspect", name, "--format", "json", "--dialect", "agentrc"];
        if extensions {
            args.extend(["--extensions", "placement"]);
        }
        let o = agentfile(&dir, &args);
        let v: Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
        v["agentrc"]["digest"].as_str().unwrap().to_owned()
    };
    let base = digest("a", WRITER, false);
    assert!(base.starts_with("sha256:") && base.len() == 71, "{base}");
    let relaid = WRITER
        .replace(
            "AGENT writer\n",
            "# the writer\n\nAGENT   writer   # inline\n",
        )
        .replace("  permit(", "      // who may do what\n      permit(")
        .replace("CMD python ./agent.py\n", "CMD python \\\n    ./agent.py\n");
    assert_eq!(
        digest("b", &relaid, false),
        base,
        "layout changed the digest"
    );
    let placed = WRITER.replace(
        "AUDIT all\n",
        "AUDIT all\nISOLATION microvm\nBIND ./repo /workspace copy\n",
    );
    assert_eq!(
        digest("c", &placed, true),
        base,
        "placement changed the digest"
    );
    let changed = WRITER.replace("MOUNT /workspace rw", "MOUNT /workspace ro");
    assert_ne!(
        digest("d", &changed, false),
        base,
        "content did not change the digest"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
