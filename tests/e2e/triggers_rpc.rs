//! The daemon's methods over JSON-RPC (`agentfile serve`) and MCP
//! (`agentfile mcp`): `triggers`, `trigger_history`, `fire`, `emit`
//! (CONTRACT §15), driven through the built binary on a real SQLite store.
//! The workflows have one bash step (`sleep 0`), so no model is needed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::support::Dir;
use serde_json::{Value, json};

const PATIENCE: Duration = Duration::from_secs(60);

/// A workspace with a scheduled workflow (`nightly`, 09:00 in Paris) and one
/// that runs on the event `deploy.done` (`ondeploy`).
fn workspace(label: &str) -> Dir {
    let dir = Dir::new(&format!("triggers-rpc-{label}"));
    for (id, triggers) in [
        (
            "nightly",
            "  - kind: schedule\n    cron: \"0 9 * * *\"\n    timezone: Europe/Paris\n",
        ),
        ("ondeploy", "  - kind: event\n    name: deploy.done\n"),
    ] {
        let d = dir.0.join(".workflows").join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("WORKFLOW.md"),
            format!(
                "---\nname: {id}\nid: {id}\ndescription: A test.\nversion: 1.0.0\ninputs: {{ type: object }}\noutputs: {{ type: object }}\ntriggers:\n{triggers}steps:\n  - id: wait\n    kind: tool\n    tool: bash\n    inputs: {{ command: \"sleep 0\" }}\n---\n# {id}\n"
            ),
        )
        .unwrap();
        std::fs::write(d.join("policy.toml"), "[bash]\nallowlist = [\"sleep *\"]\n").unwrap();
    }
    dir
}

/// A server process spoken to in JSON lines on stdio.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    seen: Vec<Value>,
    next_id: u64,
}

impl Proc {
    fn start(ws: &Path, command: &str) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentfile"))
            .arg(command)
            .arg("--workspace")
            .arg(ws)
            .current_dir(ws)
            .env_remove("AGENTFILE_PROVIDER")
            .env_remove("AGENTFILE_MODEL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Proc {
            child,
            stdin,
            lines: rx,
            seen: Vec::new(),
            next_id: 0,
        }
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// Send a request and wait for its reply (other messages are kept).
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        // Null: a request without params.
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            request["params"] = params;
        }
        self.send(request);
        if let Some(i) = self
            .seen
            .iter()
            .position(|v| v.get("id") == Some(&id) && v.get("method").is_none())
        {
            return self.seen.remove(i);
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if v.get("id") == Some(&id) && v.get("method").is_none() => return v,
                Ok(v) => self.seen.push(v),
                Err(RecvTimeoutError::Timeout) => panic!("no reply to {method} in time"),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "stdout closed before the reply to {method}: {:?}",
                        self.seen
                    )
                }
            }
        }
    }

    /// JSON-RPC: the result of a call that must succeed.
    fn result(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// JSON-RPC: the error of a call that must fail.
    fn error(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("result").is_none(), "{method} should fail: {r}");
        r["error"].clone()
    }

    /// MCP: the result of `tools/call`.
    fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let r = self.call("tools/call", json!({"name": name, "arguments": arguments}));
        assert!(r.get("error").is_none(), "tools/call {name}: {r}");
        r["result"].clone()
    }

    /// MCP: the structured result of a tool call that must succeed.
    fn tool_ok(&mut self, name: &str, arguments: Value) -> Value {
        let r = self.tool(name, arguments);
        assert_ne!(r["isError"], true, "{name} failed: {r}");
        r["structuredContent"].clone()
    }

    fn exit(mut self) -> Option<i32> {
        self.stdin = None;
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `event` pages of a session (through `page`) until done; its final status.
fn until_done(mut page: impl FnMut(u64) -> Value) -> String {
    let mut after = 0;
    let deadline = Instant::now() + PATIENCE;
    loop {
        assert!(Instant::now() < deadline, "the run did not end");
        let p = page(after);
        if let Some(last) = p["events"].as_array().and_then(|e| e.last()) {
            after = last["seq"].as_u64().unwrap();
        }
        if p["done"] == true {
            return p["status"].as_str().unwrap().to_owned();
        }
    }
}

/// What `triggers` answers for the workspace, over either protocol.
fn check_listed(list: &Value) {
    let triggers = list["triggers"].as_array().expect("a triggers list");
    assert_eq!(triggers.len(), 2, "{list}");
    let nightly = &triggers[0];
    assert_eq!(nightly["id"], "nightly#0", "{list}");
    assert_eq!(nightly["workflow"], "nightly");
    assert_eq!(nightly["kind"], "schedule");
    assert_eq!(nightly["state"], "active");
    let next = nightly["next_fire"].as_str().expect("a next fire");
    assert!(
        next.contains("T09:00:00+01:00") || next.contains("T09:00:00+02:00"),
        "{next}"
    );
    let event = &triggers[1];
    assert_eq!(event["id"], "ondeploy#0", "{list}");
    assert_eq!(event["kind"], "event");
    assert_eq!(event["state"], "active");
    assert!(event.get("next_fire").is_none(), "{list}");
}

#[test]
fn json_rpc_lists_fires_shows_history_and_emits_once_per_id() {
    let ws = workspace("serve");
    let mut s = Proc::start(&ws.0, "serve");

    check_listed(&s.result("triggers", json!({})));
    // No params at all is the same call.
    check_listed(&s.result("triggers", Value::Null));
    assert!(
        s.result("trigger_history", json!({}))["fires"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // A manual fire starts a run in the server's engine, followed with `event`.
    let fired = s.result("fire", json!({"trigger": "nightly#0"}));
    assert_eq!(fired["trigger"], "nightly#0", "{fired}");
    assert_eq!(fired["outcome"], "fired", "{fired}");
    let session = fired["session_id"].as_str().expect("a session").to_owned();
    let status = until_done(|after| {
        s.result(
            "event",
            json!({"session_id": session, "after_seq": after, "wait_ms": 5000}),
        )
    });
    assert_eq!(status, "completed");
    let h = s.result("trigger_history", json!({"trigger": "nightly#0"}));
    let fires = h["fires"].as_array().unwrap();
    assert_eq!(fires.len(), 1, "{h}");
    assert_eq!(fires[0]["kind"], "manual", "{h}");
    assert_eq!(fires[0]["outcome"], "fired", "{h}");
    assert_eq!(fires[0]["session_id"], session.as_str(), "{h}");
    assert!(fires[0].get("key").is_none(), "{h}");
    assert!(fires[0]["fired_at"].is_string(), "{h}");

    // An event fires its subscriber once per id.
    let first = s.result("emit", json!({"name": "deploy.done", "id": "e1"}));
    assert_eq!(first["event"], "deploy.done", "{first}");
    assert_eq!(first["id"], "e1", "{first}");
    let fired = first["fired"].as_array().unwrap();
    assert_eq!(fired.len(), 1, "{first}");
    assert_eq!(fired[0]["trigger"], "ondeploy#0", "{first}");
    assert_eq!(fired[0]["outcome"], "fired", "{first}");
    let event_session = fired[0]["session_id"].as_str().unwrap().to_owned();
    let again = s.result(
        "emit",
        json!({"name": "deploy.done", "id": "e1", "payload": {}}),
    );
    assert_eq!(again["fired"], json!([]), "{again}");
    assert_eq!(
        again["already_fired"][0]["session_id"],
        event_session.as_str(),
        "{again}"
    );
    // Without an id, each emit is a new event.
    let fresh = s.result("emit", json!({"name": "deploy.done"}));
    assert!(
        fresh["id"].as_str().unwrap().starts_with("event-"),
        "{fresh}"
    );
    assert_eq!(fresh["fired"].as_array().unwrap().len(), 1, "{fresh}");

    let all = s.result("trigger_history", json!({"limit": 10}));
    let fires = all["fires"].as_array().unwrap();
    let events: Vec<&Value> = fires.iter().filter(|f| f["kind"] == "event").collect();
    assert_eq!(events.len(), 2, "{all}");
    assert_eq!(fires.len(), 3, "{all}");
    assert_eq!(
        s.result("trigger_history", json!({"limit": 1}))["fires"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Refusals say what is wrong.
    let e = s.error("emit", json!({"name": "nobody.listens"}));
    assert_eq!(e["code"], -32008, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("no workflow subscribes to event `nobody.listens`"),
        "{e}"
    );
    let e = s.error("fire", json!({"trigger": "nightly#9"}));
    assert_eq!(e["code"], -32008, "{e}");
    let m = e["message"].as_str().unwrap();
    assert!(
        m.contains("`nightly#9`") && m.contains("nightly#0, ondeploy#0"),
        "{m}"
    );
    let e = s.error("emit", json!({"name": "deploy.done", "payload": [1]}));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("payload"), "{e}");
    let e = s.error("fire", json!({}));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("`trigger`"), "{e}");
    let e = s.error("trigger_history", json!({"limit": "ten"}));
    assert_eq!(e["code"], -32602, "{e}");

    // The runs the server started end before it exits.
    assert_eq!(s.exit(), Some(0));
}

#[test]
fn mcp_tools_list_fire_show_history_and_emit_once_per_id() {
    let ws = workspace("mcp");
    let mut m = Proc::start(&ws.0, "mcp");
    let init = m.call(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    m.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let tools = m.call("tools/list", json!({}))["result"]["tools"].clone();
    let tool = |n: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("no tool {n}: {tools}"))
            .clone()
    };
    for (name, read_only) in [
        ("triggers", true),
        ("trigger_history", true),
        ("fire", false),
        ("emit", false),
    ] {
        let t = tool(name);
        assert_eq!(t["annotations"]["readOnlyHint"], read_only, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().unwrap().len() > 80, "{t}");
    }
    assert_eq!(tool("fire")["inputSchema"]["required"], json!(["trigger"]));
    assert_eq!(tool("emit")["inputSchema"]["required"], json!(["name"]));

    check_listed(&m.tool_ok("triggers", json!({})));

    let fired = m.tool_ok("fire", json!({"trigger": "nightly#0"}));
    assert_eq!(fired["outcome"], "fired", "{fired}");
    let session = fired["session_id"].as_str().unwrap().to_owned();
    let status = until_done(|after| {
        m.tool_ok(
            "event",
            json!({"session_id": session, "after_seq": after, "wait_ms": 5000}),
        )
    });
    assert_eq!(status, "completed");
    let h = m.tool_ok("trigger_history", json!({"trigger": "nightly#0"}));
    assert_eq!(h["fires"][0]["kind"], "manual", "{h}");
    assert_eq!(h["fires"][0]["session_id"], session.as_str(), "{h}");

    let first = m.tool_ok("emit", json!({"name": "deploy.done", "id": "e1"}));
    assert_eq!(first["fired"].as_array().unwrap().len(), 1, "{first}");
    let again = m.tool("emit", json!({"name": "deploy.done", "id": "e1"}));
    assert_ne!(again["isError"], true, "{again}");
    assert_eq!(again["structuredContent"]["fired"], json!([]), "{again}");
    assert!(
        again["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("already"),
        "{again}"
    );

    let unknown = m.tool("emit", json!({"name": "nobody.listens"}));
    assert_eq!(unknown["isError"], true, "{unknown}");
    assert!(
        unknown["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no workflow subscribes to event `nobody.listens`"),
        "{unknown}"
    );
    let unknown = m.tool("fire", json!({"trigger": "nope#0"}));
    assert_eq!(unknown["isError"], true, "{unknown}");

    let all = m.tool_ok("trigger_history", json!({}));
    let kinds: Vec<&str> = all["fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["event", "manual"], "{all}");
    assert_eq!(m.exit(), Some(0));
}
