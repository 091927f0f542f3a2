//! Issue 31, the secrets defect: one predicate (`tools::secrets`) decides
//! which environment variables reach what agentfile starts or reads for a
//! workflow, and every consumer follows it. One test per consumer, each
//! through the built binary, with the same secret-named variables (and a
//! configured key variable with an innocent name) set in its environment:
//!
//! - the bash tool the model calls,
//! - a JavaScript tool's `env()` (and its `sh()`, which is the bash tool),
//! - a command a config binds as a tool (`[tools.<id>] command`),
//! - a workflow.yaml shell step,
//! - an MCP stdio server the config starts,
//! - a workflow.yaml trigger variable (`trigger.input_var`), read from the
//!   environment only when it is not a secret.
//!
//! Each checks that the consumer saw none of the secrets, that the harmless
//! variables the rule passes still pass, and that no secret value appears on
//! standard output or error, in the streamed events, in the stored events or
//! anywhere in the session database's files, or in what the model was sent.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{fake, text};
use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};

/// The provider key the config names (`llm.api_key_env`).
const PROVIDER_KEY: &str = "LLM_PAT";
/// A key variable a profile names, with a name no shape rule catches and
/// that the allowlist of commands would pass (`LC_*`): only the config
/// makes it a secret.
const INNOCENT_KEY: &str = "LC_MODEL_ACCESS";

/// Every secret, each with a value that must never come back or be stored.
const SECRETS: &[(&str, &str)] = &[
    ("GITHUB_PAT", "ghp_leak_github_pat_3101"),
    ("DATABASE_URL", "postgres://u:leak_db_url_3102@db/x"),
    ("DB_PASS", "leak_db_pass_3103"),
    ("MYSQL_PWD", "leak_mysql_pwd_3104"),
    ("GPG_PASSPHRASE", "leak_gpg_passphrase_3105"),
    (
        "SLACK_WEBHOOK_URL",
        "https://hooks.slack.com/leak_webhook_3106",
    ),
    (
        "AGENTFILE_DATABASE_URL",
        "postgres://u:leak_af_db_3107@db/x",
    ),
    (PROVIDER_KEY, "leak-provider-key-3108"),
    (INNOCENT_KEY, "leak-innocent-key-3109"),
];

/// On the allowlist of what commands are given, not a secret: passes.
const LANG: (&str, &str) = ("LANG", "C.UTF-8");
/// Not a secret, not on the allowlist: only MCP servers (which keep the
/// environment without its secrets) see it.
const FOO: (&str, &str) = ("FOO_SETTING", "harmless-foo-3110");

fn tmp(name: &str) -> PathBuf {
    support::tmp("secrets", name)
}

/// `agent.toml` in `dir`: the fake model (or none), the provider key in
/// [`PROVIDER_KEY`], a profile's key in [`INNOCENT_KEY`], then `extra`.
fn config(dir: &Path, server: Option<&FakeServer>, extra: &str) {
    let base = server.map_or_else(|| "http://127.0.0.1:9".to_owned(), |s| s.base_url());
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{base}\"\napi_key_env = \"{PROVIDER_KEY}\"\n\n\
             [profiles.spare]\napi_key_env = \"{INNOCENT_KEY}\"\n\n{extra}"
        ),
    )
    .unwrap();
}

/// `agentfile ARGS --output stream-json` in `dir` with every secret, `LANG`
/// and `FOO_SETTING` in its environment.
fn run(dir: &Path, args: &[&str]) -> Output {
    let mut env: Vec<(&str, &str)> = SECRETS.to_vec();
    env.extend([LANG, FOO]);
    let mut all = args.to_vec();
    all.extend(["--output", "stream-json"]);
    support::agentfile(dir, &all, &env)
}

/// The streamed events and the final result of a `stream-json` run.
fn streamed(o: &Output) -> (Vec<Value>, Value) {
    let mut lines: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}\n{}", text(o))))
        .collect();
    let result = lines
        .pop()
        .filter(|r| r["type"] == "result")
        .unwrap_or_else(|| panic!("no result line:\n{}", text(o)));
    (lines, result)
}

/// A completed run's streamed events (its stored ones are checked by
/// [`assert_no_secret_anywhere`]).
fn completed(o: &Output) -> Vec<Value> {
    let (events, result) = streamed(o);
    assert_eq!(result["status"], "completed", "{result:#}\n{}", text(o));
    events
}

/// The content of the first tool result of `tool` among `events`.
fn tool_result(events: &[Value], tool: &str) -> String {
    events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["data"]["tool"] == tool)
        .and_then(|e| e["data"]["content"].as_str())
        .unwrap_or_else(|| panic!("no result of {tool}: {events:#?}"))
        .to_owned()
}

/// Every file under `dir`, recursively.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// No secret value on the run's output (streamed events included), in its
/// session's stored events, in any file of the session database (or
/// anything else under `.agentfile/`), or in what `server` was sent.
fn assert_no_secret_anywhere(dir: &Path, o: &Output, server: Option<&FakeServer>) {
    let printed = text(o);
    let session = printed
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["session_id"].as_str().map(str::to_owned));
    let stored = match &session {
        Some(id) => {
            let show = support::agentfile(dir, &["sessions", "show", id, "--format", "json"], &[]);
            assert!(show.status.success(), "{}", text(&show));
            text(&show)
        }
        None => String::new(),
    };
    let mut db = Vec::new();
    files(&dir.join(".agentfile"), &mut db);
    let sent: String = server
        .map(|s| s.requests().iter().map(|r| r.body.to_string()).collect())
        .unwrap_or_default();
    for (name, value) in SECRETS {
        assert!(
            !printed.contains(value),
            "{name}'s value was printed:\n{printed}"
        );
        assert!(
            !stored.contains(value),
            "{name}'s value is in the stored events"
        );
        assert!(
            !sent.contains(value),
            "{name}'s value was sent to the model"
        );
        for f in &db {
            let bytes = std::fs::read(f).unwrap_or_default();
            assert!(
                !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
                "{name}'s value is in {}",
                f.display()
            );
        }
    }
}

/// `printenv`'s output (`NAME=value` lines, or a JSON object of the
/// environment) as names and values.
fn environment(seen: &str) -> Vec<(String, String)> {
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(seen.trim()) {
        return m
            .into_iter()
            .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned()))
            .collect();
    }
    seen.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// What a program started for the model saw: no secret (by name or value),
/// `LANG` as set, `FOO_SETTING` not at all (not on the allowlist).
fn assert_command_environment(seen: &str) {
    let env = environment(seen);
    assert!(!env.is_empty(), "no environment in {seen:?}");
    for (name, value) in SECRETS {
        assert!(
            !env.iter().any(|(k, _)| k == name),
            "{name} was given:\n{seen}"
        );
        assert!(!seen.contains(value), "{name}'s value was given:\n{seen}");
    }
    assert!(env.contains(&(LANG.0.into(), LANG.1.into())), "{seen}");
    assert!(!env.iter().any(|(k, _)| k == FOO.0), "{seen}");
}

// ---------------------------------------------------------------- the bash tool

const ONE_GOAL: &str = "NAME peek\nGOAL look \"Look around\"\nRUN main USING look\n";

#[test]
fn the_bash_tool_sees_no_secret() {
    let dir = tmp("bash");
    std::fs::write(dir.join("Agentfile"), ONE_GOAL).unwrap();
    std::fs::write(
        dir.join("policy.toml"),
        "[bash]\nallowlist = [\"printenv\"]\n",
    )
    .unwrap();
    let server = fake(vec![
        FakeReply::tool_call("bash", json!({ "command": "printenv" })),
        FakeReply::text("Done."),
    ]);
    config(&dir, Some(&server), "");
    let o = run(&dir, &["run", "Agentfile"]);
    let events = completed(&o);
    let out = tool_result(&events, "bash");
    assert!(out.starts_with("exit code: 0"), "{out}");
    assert_command_environment(&out);
    assert_no_secret_anywhere(&dir, &o, Some(&server));
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------- a JavaScript tool's env()

/// An agent whose `peek` tool reads every name it is given with `env()`
/// (the value, or why it was refused), and the whole environment with
/// `sh("printenv")`.
const ENV_AGENT: &str = r#"---
title: Peeker
abilities:
  allow: [env, "sh:printenv"]
---

## System
You read variables.

## Tools
```js
return {
  peek: {
    fn: ({ names }) => {
      const out = {};
      for (const n of names) {
        try { out[n] = { value: env(n) }; } catch (e) { out[n] = { refused: String(e && e.message || e) }; }
      }
      try { out["sh"] = { value: sh("printenv") }; } catch (e) { out["sh"] = { refused: String(e && e.message || e) }; }
      return JSON.stringify(out);
    },
    scheme: { name: "peek", description: "Reads variables",
      parameters: { type: "object", properties: { names: { type: "array", items: { type: "string" } } }, required: ["names"] } }
  },
};
```
"#;

#[test]
fn a_javascript_tool_env_returns_no_secret() {
    let dir = tmp("js-env");
    std::fs::write(dir.join("peek.agent.md"), ENV_AGENT).unwrap();
    std::fs::write(
        dir.join("policy.toml"),
        "[bash]\nallowlist = [\"printenv\"]\n",
    )
    .unwrap();
    let mut names: Vec<&str> = SECRETS.iter().map(|(k, _)| *k).collect();
    names.extend([LANG.0, FOO.0]);
    let server = fake(vec![
        FakeReply::tool_call("peek", json!({ "names": names })),
        FakeReply::text("Done."),
    ]);
    config(&dir, Some(&server), "");
    let o = run(&dir, &["run", "peek.agent.md", "--input", "task=peek"]);
    let events = completed(&o);
    let peek: Value = serde_json::from_str(&tool_result(&events, "peek")).unwrap();
    for (name, _) in SECRETS {
        let got = &peek[*name];
        let why = got["refused"]
            .as_str()
            .unwrap_or_else(|| panic!("env({name}) was not refused: {got}"));
        assert!(
            why.contains("secret") || why.contains("credential"),
            "{name}: {why}"
        );
        // Each refusal is an event.
        assert!(
            events.iter().any(|e| e["type"] == "policy_denied"
                && e["data"]["tool"] == "env"
                && e["data"]["reason"].as_str().unwrap_or("").contains(name)),
            "no policy_denied for env({name})"
        );
    }
    // The configured key variables say which config key names them.
    for (name, key) in [
        (PROVIDER_KEY, "llm.api_key_env"),
        (INNOCENT_KEY, "profiles.spare.api_key_env"),
    ] {
        let why = peek[name]["refused"].as_str().unwrap();
        assert!(why.contains(key), "{name}: {why}");
    }
    // What a shell is given comes back; what it is not, does not.
    assert_eq!(peek[LANG.0]["value"], LANG.1, "{peek:#}");
    assert!(peek[FOO.0]["refused"].is_string(), "{peek:#}");
    // sh() is the bash tool: the same environment.
    let sh = peek["sh"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("sh(printenv) failed: {peek:#}"));
    assert_command_environment(sh);
    assert_no_secret_anywhere(&dir, &o, Some(&server));
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------- a command bound as a tool

/// Prints its environment as JSON (a command tool's output is JSON).
const DUMP_PY: &str =
    "import json, os, sys\nsys.stdin.read()\njson.dump(dict(os.environ), sys.stdout)\n";

/// A WORKFLOW.md of one step that runs the tool `dump`.
const DUMP_WORKFLOW: &str = "---\nname: Dump\nid: dump\ndescription: d\nversion: 1.0.0\ninputs: { type: object }\noutputs: { type: object }\nsteps:\n  - id: dump\n    kind: tool\n    tool: dump\n    inputs: {}\n---\n";

fn dump_workflow(dir: &Path) {
    let w = dir.join(".workflows").join("dump");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("WORKFLOW.md"), DUMP_WORKFLOW).unwrap();
}

#[test]
fn a_bound_command_tool_sees_no_secret() {
    let dir = tmp("command");
    dump_workflow(&dir);
    std::fs::write(dir.join("dump.py"), DUMP_PY).unwrap();
    std::fs::write(
        dir.join("policy.toml"),
        "[bash]\nallowlist = [\"python3 dump.py\"]\n",
    )
    .unwrap();
    config(
        &dir,
        None,
        "[tools.dump]\ncommand = [\"python3\", \"dump.py\"]\n",
    );
    let o = run(&dir, &["run", ".workflows/dump"]);
    let events = completed(&o);
    let seen = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .and_then(|e| e["data"]["content"].as_str())
        .unwrap_or_else(|| panic!("no tool result: {events:#?}"));
    assert_command_environment(&stdout_of(seen));
    assert_no_secret_anywhere(&dir, &o, None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The standard output in a command's text report (`--- stdout ---`), or
/// the whole text when it has none.
fn stdout_of(report: &str) -> String {
    match report.split_once("--- stdout ---\n") {
        Some((_, rest)) => rest
            .split("\n--- stderr ---")
            .next()
            .unwrap_or(rest)
            .to_owned(),
        None => report.to_owned(),
    }
}

// ------------------------------------------------- a workflow.yaml shell step

/// A workflow.yaml whose only step runs `scripts/dump.sh`; its trigger
/// variable is `NOTES_TEXT` (not a secret: read from the environment).
const SHELL_WORKFLOW: &str = "specVersion: \"1.0\"\nname: dump\nversion: 1.0.0\ndescription: Dump the environment.\ntrigger:\n  type: command\n  input_var: NOTES_TEXT\nsteps:\n  - id: dump\n    name: Dump\n    action: shell\n    script:\n      bash: scripts/dump.sh\n    goal: Print the environment.\n";

#[test]
fn a_workflow_yaml_shell_step_sees_no_secret() {
    let dir = tmp("shell");
    let w = dir.join("workflows").join("dump");
    std::fs::create_dir_all(w.join("scripts")).unwrap();
    std::fs::write(w.join("workflow.yaml"), SHELL_WORKFLOW).unwrap();
    std::fs::write(w.join("scripts/dump.sh"), "#!/bin/bash\nprintenv\n").unwrap();
    config(&dir, None, "");
    let mut env: Vec<(&str, &str)> = SECRETS.to_vec();
    env.extend([LANG, FOO, ("NOTES_TEXT", "harmless-notes-3111")]);
    let o = support::agentfile(
        &dir,
        &["run", "workflows/dump", "--output", "stream-json"],
        &env,
    );
    let events = completed(&o);
    let seen = stdout_of(&tool_result(&events, "shell"));
    assert_command_environment(&seen);
    // The step is given its trigger variable, read from the environment.
    assert!(seen.contains("NOTES_TEXT=harmless-notes-3111"), "{seen}");
    assert_no_secret_anywhere(&dir, &o, None);
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------- a workflow.yaml trigger

#[test]
fn a_workflow_yaml_trigger_never_reads_a_secret_from_the_environment() {
    for (name, _) in SECRETS {
        let dir = tmp(&format!("trigger-{name}"));
        let w = dir.join("workflows").join("dump");
        std::fs::create_dir_all(w.join("scripts")).unwrap();
        std::fs::write(
            w.join("workflow.yaml"),
            SHELL_WORKFLOW.replace("NOTES_TEXT", name),
        )
        .unwrap();
        std::fs::write(w.join("scripts/dump.sh"), "#!/bin/bash\nprintenv\n").unwrap();
        config(&dir, None, "");
        let o = run(&dir, &["run", "workflows/dump"]);
        // The variable is set, yet the input is missing: it was not read.
        assert!(!o.status.success(), "{name}: {}", text(&o));
        let printed = text(&o);
        assert!(
            printed.contains(&format!("missing required input `{name}`")),
            "{name}: {printed}"
        );
        // Nor offered as a way to pass it.
        assert!(
            !printed.contains(&format!("set {name} in the environment")),
            "{printed}"
        );
        assert_no_secret_anywhere(&dir, &o, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

// ------------------------------------------------- an MCP stdio server

/// A stdio MCP server (JSON-RPC, one message a line) with one tool,
/// `environ`, that answers with the server's whole environment as JSON.
const MCP_SERVER: &str = r#"import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "envdump", "version": "1.0.0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "environ", "description": "The server's environment",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps(dict(os.environ))}]}
    else:
        reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no such method"}}
        print(json.dumps(reply), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

#[test]
fn an_mcp_server_keeps_the_environment_without_its_secrets() {
    let dir = tmp("mcp");
    std::fs::write(dir.join("envdump.py"), MCP_SERVER).unwrap();
    dump_workflow(&dir);
    std::fs::write(
        dir.join("policy.toml"),
        "[mcp]\nallow = [\"envdump:environ\"]\n",
    )
    .unwrap();
    config(
        &dir,
        None,
        &format!(
            "[tools.dump]\nmcp = \"envdump:environ\"\n\n[mcp.servers.envdump]\ncommand = \"python3\"\nargs = [{:?}]\nenv = {{ SET_BY_CONFIG = \"from-the-env-table\" }}\n",
            dir.join("envdump.py").display().to_string()
        ),
    );
    let o = run(&dir, &["run", ".workflows/dump"]);
    let events = completed(&o);
    let seen = events
        .iter()
        .find(|e| e["type"] == "tool_result")
        .and_then(|e| e["data"]["content"].as_str())
        .unwrap_or_else(|| panic!("no tool result: {events:#?}"));
    let env = environment(seen);
    for (name, value) in SECRETS {
        assert!(
            !env.iter().any(|(k, _)| k == name),
            "{name} was given:\n{seen}"
        );
        assert!(!seen.contains(value), "{name}'s value was given:\n{seen}");
    }
    // Not a secret: kept, allowlisted or not, and the server's env table.
    for (k, v) in [LANG, FOO, ("SET_BY_CONFIG", "from-the-env-table")] {
        assert!(env.contains(&(k.into(), v.into())), "{k}: {seen}");
    }
    assert_no_secret_anywhere(&dir, &o, None);
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------- no other way out

/// The folder holding `Cargo.lock` (the repository's root, whether this
/// crate is the whole of it or one member of a workspace).
fn repository_root() -> PathBuf {
    let mut dir = support::repo();
    while !dir.join("Cargo.lock").exists() {
        assert!(
            dir.pop(),
            "no Cargo.lock above {}",
            support::repo().display()
        );
    }
    dir
}

/// Every `.rs` file under a `src` folder below `dir` (build output, tests
/// and hidden folders left out).
fn sources(dir: &Path, in_src: bool, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !(name.starts_with('.') || name == "target" || name == "tests") {
                sources(&p, in_src || name == "src", out);
            }
        } else if in_src && name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// The guard behind the tests above: every program agentfile starts (outside
/// unit tests) starts with a cleared environment, so what it is given is
/// only what the code hands it (the predicate's `child_env` or
/// `server_env`, or nothing). A new place that starts a process without
/// `env_clear()` fails here, and needs a test above.
#[test]
fn every_process_agentfile_starts_starts_with_a_cleared_environment() {
    let mut all = Vec::new();
    sources(&repository_root(), false, &mut all);
    let mut spawning = Vec::new();
    for file in &all {
        let text = std::fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let starts = code.matches("Command::new(").count();
        if starts == 0 {
            continue;
        }
        let cleared = code.matches(".env_clear()").count();
        assert!(
            cleared >= starts,
            "{} starts {starts} process(es) but clears the environment {cleared} time(s): start them with `.env_clear()` and the environment of `tools::secrets`",
            file.display()
        );
        spawning.push(file.file_name().unwrap().to_string_lossy().into_owned());
    }
    // The bash tool (and through it bound commands and shell steps), MCP
    // servers and the isolated workers: found, so the scan is not empty.
    for f in ["bash.rs", "mcp.rs", "isolate.rs"] {
        assert!(
            spawning.iter().any(|s| s == f),
            "{f} not found: {spawning:?}"
        );
    }
}
