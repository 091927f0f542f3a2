//! `agentfile serve` conformance: the real binary, JSON-RPC 2.0 lines on its
//! stdin and stdout, workflows run against the loopback fake provider.
//!
//! Covered: every error class (-32700 with id null, -32600, -32601, -32602
//! naming the field, our application codes), batches with and without
//! notifications, many runs in flight on one connection, the concurrency limit
//! (`queued`), cancellation, approvals, `event` read and long-poll, `event`
//! notifications, end of input (runs finish and answer), SIGTERM (sessions left
//! `interrupted`, then resumed), and garbage that must not stop the server.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use agentfile::llm::fake::{FakeReply, FakeScript, FakeServer};
use serde_json::{Value, json};

const KEY_VAR: &str = "AGENTFILE_TEST_KEY";
const PATIENCE: Duration = Duration::from_secs(60);

fn tmp(name: &str) -> PathBuf {
    crate::support::tmp("serve", name)
}

/// A workspace with an agent.toml pointing at `server`, and `Agentfile`.
fn workspace(name: &str, server: &FakeServer, agentfile: &str) -> PathBuf {
    let dir = tmp(name);
    write_config(&dir.join("agent.toml"), server);
    std::fs::write(dir.join("Agentfile"), agentfile).unwrap();
    dir
}

fn write_config(path: &Path, server: &FakeServer) {
    std::fs::write(
        path,
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n",
            server.base_url()
        ),
    )
    .unwrap();
}

const ONE_GOAL: &str =
    "NAME hello\nINPUT who DEFAULT \"world\"\nGOAL greet \"Greet $who\"\nRUN main USING greet\n";
const SUPERVISED: &str = "NAME careful\nGOAL first \"Say one\"\nGOAL second \"Say two\" SUPERVISED\nRUN main USING first, second\n";

/// A fake provider answering every request with `text` after `latency`.
async fn fake(text: &str, latency: Duration) -> FakeServer {
    FakeServer::start_script(
        FakeScript {
            replies: vec![FakeReply::text(text).with_latency(latency)],
            repeat: true,
        },
        ([127, 0, 0, 1], 0).into(),
    )
    .await
    .unwrap()
}

/// One `agentfile serve` process and its two streams.
struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next_id: u64,
    /// Messages read while waiting for something else.
    seen: Vec<Value>,
}

impl Serve {
    fn start(dir: &Path, extra: &[&str]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentfile"))
            .arg("serve")
            .args(extra)
            .current_dir(dir)
            .env(KEY_VAR, "test-key-0123456789")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start agentfile serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Serve {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 0,
            seen: Vec::new(),
        }
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send_raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        id
    }

    /// The next message satisfying `pred`, keeping the others.
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.seen.iter().position(&pred) {
            return self.seen.remove(i);
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if pred(&v) => return v,
                Ok(v) => self.seen.push(v),
                Err(RecvTimeoutError::Timeout) => panic!("timed out waiting for {what}"),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "stdout closed while waiting for {what}; seen: {:?}",
                        self.seen
                    )
                }
            }
        }
    }

    fn reply(&mut self, id: u64) -> Value {
        self.wait_for(&format!("reply {id}"), |v| {
            v.get("id") == Some(&json!(id)) && v.get("method").is_none()
        })
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        let r = self.reply(id);
        assert_eq!(r["jsonrpc"], "2.0", "{r}");
        r
    }

    fn result(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    fn error(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("result").is_none(), "{method} should fail: {r}");
        r["error"].clone()
    }

    /// Event notifications for `session` seen so far or arriving until `until` matches.
    fn event_until(&mut self, session: &str, kind: &str) -> Value {
        let session = session.to_owned();
        let kind = kind.to_owned();
        self.wait_for(&format!("event {kind} of {session}"), move |v| {
            v["method"] == "event"
                && v["params"]["session_id"] == session
                && v["params"]["type"] == kind
        })
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn wait_exit(&mut self) -> i32 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "serve did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

#[test]
fn error_classes() {
    let rt = rt();
    let server = rt.block_on(fake("hi", Duration::ZERO));
    let dir = workspace("errors", &server, ONE_GOAL);
    std::fs::write(
        dir.join("Broken"),
        "NAME x\nGOAL a \"x\"\nRUN main USING nope\n",
    )
    .unwrap();
    let mut s = Serve::start(&dir, &[]);

    // -32700: not JSON; the id is null because none could be read.
    s.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ");
    let r = s.wait_for("parse error", |v| v["error"]["code"] == -32700);
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["jsonrpc"], "2.0");

    // -32600: valid JSON that is not a request; the id is echoed when usable.
    for (line, id) in [
        (r#"42"#, Value::Null),
        (r#"{"jsonrpc":"2.0","id":7}"#, json!(7)),
        (r#"{"jsonrpc":"1.0","id":"a","method":"list"}"#, json!("a")),
        (r#"{"id":8,"method":"list"}"#, json!(8)),
        (
            r#"{"jsonrpc":"2.0","id":{"x":1},"method":"list"}"#,
            Value::Null,
        ),
        (r#"{"jsonrpc":"2.0","id":9,"method":5}"#, json!(9)),
        (
            r#"{"jsonrpc":"2.0","id":10,"method":"list","params":"dir"}"#,
            json!(10),
        ),
        (r#"[]"#, Value::Null),
    ] {
        s.send_raw(line);
        let r = s.wait_for(line, |v| v["error"]["code"] == -32600);
        assert_eq!(r["id"], id, "{line}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid request"),
            "{r}"
        );
    }

    // -32601, naming the methods there are.
    let e = s.error("runn", json!({}));
    assert_eq!(e["code"], -32601);
    assert!(e["message"].as_str().unwrap().contains("`runn`"), "{e}");

    // -32602 names the field.
    for (method, params, field) in [
        (
            "run",
            json!({"path": "Agentfile", "input": {"who": "x"}}),
            "`input`",
        ),
        ("run", json!({}), "`path`"),
        (
            "run",
            json!({"path": "Agentfile", "inputs": {"who": [1]}}),
            "`inputs.who`",
        ),
        (
            "run",
            json!({"path": "Agentfile", "timeout": "soon"}),
            "`timeout`",
        ),
        ("event", json!({"after_seq": 1}), "`session_id`"),
        (
            "event",
            json!({"session_id": "x", "wait_ms": "long"}),
            "`wait_ms`",
        ),
        ("approve", json!({"session_id": "x"}), "`approve`"),
        ("sessions", json!({"status": "sleeping"}), "`status`"),
        (
            "inspect",
            json!({"path": "Agentfile", "format": "yaml"}),
            "`format`",
        ),
        ("run", json!(["Agentfile"]), "object"),
    ] {
        let e = s.error(method, params.clone());
        assert_eq!(e["code"], -32602, "{method} {params}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains(field),
            "{method} {params}: {e} should name {field}"
        );
    }

    // Application errors.
    let e = s.error("run", json!({"path": "Broken"}));
    assert_eq!(e["code"], -32001);
    assert_eq!(e["data"]["exit_code"], 2);
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
    let e = s.error("run", json!({"path": "missing/Agentfile"}));
    assert_eq!(e["code"], -32006);
    let e = s.error("run", json!({"path": "Agentfile", "inputs": {"whom": "x"}}));
    assert_eq!(e["code"], -32001, "unknown input: {e}");
    let e = s.error(
        "event",
        json!({"session_id": "20990101-000000-000000000000"}),
    );
    assert_eq!(e["code"], -32002);
    let e = s.error("cancel", json!({"session_id": "no-such"}));
    assert_eq!(e["code"], -32002);
    let e = s.error("run", json!({"resume": "../etc"}));
    assert_eq!(e["code"], -32602);

    // Still serving after all that.
    let list = s.result("list", json!({}));
    assert_eq!(list["workflows"].as_array().unwrap().len(), 1, "{list}");
    s.close_stdin();
    assert_eq!(s.wait_exit(), 0);
}

#[test]
fn garbage_never_stops_the_server() {
    let rt = rt();
    let server = rt.block_on(fake("hi", Duration::ZERO));
    let dir = workspace("garbage", &server, ONE_GOAL);
    let mut s = Serve::start(&dir, &[]);
    let junk = [
        "\u{0}\u{1}\u{2}",
        "{{{{",
        "null",
        "\"jsonrpc\"",
        r#"{"jsonrpc":"2.0","method":"run","params":{"path":{"$ne":1}},"id":1e400}"#,
        r#"[1,2,3]"#,
        r#"{"jsonrpc":"2.0","method":"event","id":2,"params":{"session_id":"' OR 1=1 --"}}"#,
        "   ",
    ];
    for j in junk {
        s.send_raw(j);
    }
    let stdin = s.stdin.as_mut().unwrap();
    stdin.write_all(&[0xff, 0xfe, b'\n']).unwrap();
    let r = s.result("validate", json!({"path": "Agentfile"}));
    assert_eq!(r["files"][0]["ok"], true, "{r}");
}

#[test]
fn batches_and_notifications() {
    let rt = rt();
    let server = rt.block_on(fake("hello there", Duration::ZERO));
    let dir = workspace("batch", &server, ONE_GOAL);
    let mut s = Serve::start(&dir, &[]);

    // A mixed batch: replies only to requests, in one array.
    s.send_raw(
        &json!([
            {"jsonrpc": "2.0", "id": "a", "method": "validate", "params": {"path": "Agentfile"}},
            {"jsonrpc": "2.0", "method": "list"},
            {"jsonrpc": "2.0", "id": "b", "method": "nope"},
            {"jsonrpc": "2.0", "id": "c", "method": "inspect", "params": {"path": "Agentfile"}},
            5,
        ])
        .to_string(),
    );
    let batch = s.wait_for("batch reply", Value::is_array);
    let replies = batch.as_array().unwrap();
    assert_eq!(replies.len(), 4, "{batch}");
    let by_id = |id: Value| replies.iter().find(|r| r["id"] == id).cloned().unwrap();
    assert_eq!(by_id(json!("a"))["result"]["files"][0]["ok"], true);
    assert_eq!(by_id(json!("b"))["error"]["code"], -32601);
    assert_eq!(by_id(json!("c"))["result"]["name"], "hello");
    assert_eq!(by_id(Value::Null)["error"]["code"], -32600);

    // A batch of notifications only: no reply at all. A notification `run` still
    // runs and still sends its events.
    s.send_raw(
        &json!([
            {"jsonrpc": "2.0", "method": "list"},
            {"jsonrpc": "2.0", "method": "run", "params": {"path": "Agentfile", "inputs": {"who": "batch"}}},
        ])
        .to_string(),
    );
    let done = s.wait_for("run_complete of the notified run", |v| {
        v["method"] == "event" && v["params"]["type"] == "run_complete"
    });
    let session = done["params"]["session_id"].as_str().unwrap().to_owned();
    // Nothing but event notifications arrived for that batch.
    assert!(
        s.seen.iter().all(|v| v["method"] == "event"),
        "{:?}",
        s.seen
    );
    let page = s.result("event", json!({"session_id": session}));
    assert_eq!(page["done"], true);
    assert_eq!(page["status"], "completed");

    // rpc.discover: the OpenRPC document, every method in it.
    let doc = s.result("rpc.discover", json!({}));
    assert_eq!(doc["openrpc"], "1.3.2");
    let names: Vec<&str> = doc["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "run",
            "fork",
            "replay",
            "event",
            "cancel",
            "approve",
            "signal",
            "validate",
            "inspect",
            "list",
            "sessions",
            "ping",
            "triggers",
            "trigger_history",
            "fire",
            "emit"
        ]
    );
}

#[test]
fn many_runs_in_flight_with_events_and_long_poll() {
    let rt = rt();
    let server = rt.block_on(fake("hello", Duration::from_millis(400)));
    let dir = workspace("many", &server, ONE_GOAL);
    let mut s = Serve::start(&dir, &[]);

    // Eight runs waiting for their outputs, sent back to back.
    let ids: Vec<u64> = (0..8)
        .map(|i| s.request("run", json!({"path": "Agentfile", "inputs": {"who": i}})))
        .collect();
    let started = Instant::now();
    let results: Vec<Value> = ids
        .iter()
        .map(|&id| s.reply(id)["result"].clone())
        .collect();
    let elapsed = started.elapsed();
    for r in &results {
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(r["outputs"]["greet"], "hello");
        assert_eq!(r["exit_code"], 0);
    }
    // In flight together: eight sequential runs would take at least 3.2 s.
    assert!(elapsed < Duration::from_millis(3000), "{elapsed:?}");
    // Every run's events were notified, in order, seq dense from 1.
    for r in &results {
        let id = r["session_id"].as_str().unwrap();
        let seqs: Vec<u64> = s
            .seen
            .iter()
            // Streamed text (`llm_delta`) is transient: it repeats the seq of
            // the last stored event and is left out of the dense sequence.
            .filter(|v| {
                v["method"] == "event"
                    && v["params"]["session_id"] == id
                    && v["params"]["type"] != "llm_delta"
            })
            .map(|v| v["params"]["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "{id}");
        let deltas = s
            .seen
            .iter()
            .filter(|v| v["params"]["session_id"] == id && v["params"]["type"] == "llm_delta")
            .count();
        assert!(deltas > 0, "{id}: the answer streamed as notifications");
        assert!(seqs.len() >= 6, "{id}: {seqs:?}");
    }

    // wait: false answers at once; event long-polls follow the run to its end.
    let started = s.result("run", json!({"path": "Agentfile", "wait": false}));
    let id = started["session_id"].as_str().unwrap().to_owned();
    assert!(
        matches!(started["status"].as_str(), Some("queued" | "running")),
        "{started}"
    );
    let mut after = 0;
    let mut kinds = Vec::new();
    let mut polls = 0;
    loop {
        let page = s.result(
            "event",
            json!({"session_id": id, "after_seq": after, "wait_ms": 10_000}),
        );
        polls += 1;
        for e in page["events"].as_array().unwrap() {
            assert_eq!(e["seq"].as_u64().unwrap(), after + 1);
            after += 1;
            kinds.push(e["type"].as_str().unwrap().to_owned());
        }
        if page["done"] == true {
            assert_eq!(page["status"], "completed");
            break;
        }
        assert!(polls < 100, "too many polls: {kinds:?}");
    }
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    assert_eq!(kinds.last().map(String::as_str), Some("run_complete"));
    // A long poll on a finished run answers at once.
    let t = Instant::now();
    let page = s.result(
        "event",
        json!({"session_id": id, "after_seq": after, "wait_ms": 30_000}),
    );
    assert_eq!(page["done"], true);
    assert!(page["events"].as_array().unwrap().is_empty());
    assert!(t.elapsed() < Duration::from_secs(5));
    // Reading with a limit pages through the log.
    let page = s.result("event", json!({"session_id": id, "limit": 2}));
    assert_eq!(page["events"].as_array().unwrap().len(), 2);
    assert_eq!(page["done"], false);

    let sessions = s.result("sessions", json!({"status": "completed"}));
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 9);
}

#[test]
fn concurrency_limit_queues_and_cancel_stops() {
    let rt = rt();
    // Slow enough that the first run is still at its model call when the
    // queue is read, even on a machine busy building (2 s was not).
    let server = rt.block_on(fake("slow", Duration::from_secs(5)));
    let dir = workspace("queue", &server, ONE_GOAL);
    let mut s = Serve::start(&dir, &["--max-runs", "1"]);
    let ids: Vec<String> = (0..3)
        .map(|_| {
            s.result("run", json!({"path": "Agentfile", "wait": false}))["session_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    s.event_until(&ids[0], "llm_request");
    let queued = s.result("sessions", json!({"status": "queued"}));
    let queued: Vec<&str> = queued["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(queued.contains(&ids[1].as_str()) && queued.contains(&ids[2].as_str()));

    // Cancel the queued one: it never runs. Cancel the running one: it stops.
    let c = s.result("cancel", json!({"session_id": ids[2]}));
    assert_eq!(c["status"], "cancelled", "{c}");
    let t = Instant::now();
    let c = s.result("cancel", json!({"session_id": ids[0]}));
    assert_eq!(c["status"], "cancelled", "{c}");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "cancel took {:?}",
        t.elapsed()
    );
    s.event_until(&ids[0], "run_cancelled");
    // The second now runs and completes.
    s.event_until(&ids[1], "run_complete");
    let page = s.result("event", json!({"session_id": ids[2]}));
    assert_eq!(page["status"], "cancelled");
    assert!(page["events"].as_array().unwrap().is_empty());
    // Cancelling a finished run keeps its status.
    let c = s.result("cancel", json!({"session_id": ids[1]}));
    assert_eq!(c["status"], "completed");
}

#[test]
fn approvals_through_the_connection() {
    let rt = rt();
    let server = rt.block_on(fake("ok", Duration::ZERO));
    let dir = workspace("approve", &server, SUPERVISED);
    let mut s = Serve::start(&dir, &[]);

    let id = s.request("run", json!({"path": "Agentfile"}));
    let asked = s.event_until_any("approval_required");
    let session = asked["params"]["session_id"].as_str().unwrap().to_owned();
    let st = s.result("sessions", json!({"status": "waiting_approval"}));
    assert_eq!(st["sessions"][0]["id"], session);
    let e = s.error(
        "approve",
        json!({"session_id": "20990101-000000-000000000000", "approve": true}),
    );
    assert_eq!(e["code"], -32002);
    let a = s.result(
        "approve",
        json!({"session_id": session, "approve": true, "note": "fine"}),
    );
    assert_eq!(a["status"], "running");
    let r = s.reply(id)["result"].clone();
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["outputs"]["second"], "ok");
    // Nothing left to approve.
    let e = s.error("approve", json!({"session_id": session, "approve": true}));
    assert_eq!(e["code"], -32003, "{e}");

    // Rejected: the run fails without running the goal.
    let id = s.request("run", json!({"path": "Agentfile"}));
    let asked = s.event_until_any_new("approval_required", &session);
    let other = asked["params"]["session_id"].as_str().unwrap().to_owned();
    s.result("approve", json!({"session_id": other, "approve": false}));
    let r = s.reply(id)["result"].clone();
    assert_eq!(r["status"], "failed");
    assert_eq!(r["termination_reason"], "approval_denied");
}

/// A second `approve` of an approval already decided is refused, whether
/// or not its `approval_resolved` was delivered yet: it must never be kept
/// and then stand for the run's next approval, which waits for its own.
#[test]
fn a_decision_answers_one_approval_only() {
    let rt = rt();
    // The model answers slowly, so the second `approve` arrives while the
    // first goal runs (no approval pending): with an instant model a loaded
    // machine could let the run reach the second approval first, which
    // that `approve` would then rightly answer.
    let server = rt.block_on(fake("ok", Duration::from_millis(1500)));
    let dir = workspace(
        "approve-once",
        &server,
        "NAME twice\nGOAL first \"Say one\" SUPERVISED\nGOAL second \"Say two\" SUPERVISED\nRUN main USING first, second\n",
    );
    let mut s = Serve::start(&dir, &[]);
    let id = s.request("run", json!({"path": "Agentfile"}));
    let asked = s.event_until_any("approval_required");
    let session = asked["params"]["session_id"].as_str().unwrap().to_owned();
    s.result("approve", json!({"session_id": session, "approve": true}));
    let e = s.error("approve", json!({"session_id": session, "approve": true}));
    assert_eq!(e["code"], -32003, "{e}");
    let second = s.event_until(&session, "approval_required");
    assert!(second.to_string().contains("second"), "{second}");
    // The second goal waits: no stray decision answered it.
    let st = s.result("sessions", json!({"status": "waiting_approval"}));
    assert_eq!(st["sessions"][0]["id"], session, "{st}");
    s.result("approve", json!({"session_id": session, "approve": true}));
    let r = s.reply(id)["result"].clone();
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(server.request_count(), 2);
}

impl Serve {
    fn event_until_any(&mut self, kind: &str) -> Value {
        let kind = kind.to_owned();
        self.wait_for(&kind.clone(), move |v| {
            v["method"] == "event" && v["params"]["type"] == kind
        })
    }

    fn event_until_any_new(&mut self, kind: &str, not_session: &str) -> Value {
        let kind = kind.to_owned();
        let not = not_session.to_owned();
        self.wait_for(&kind.clone(), move |v| {
            v["method"] == "event"
                && v["params"]["type"] == kind
                && v["params"]["session_id"] != not
        })
    }
}

#[test]
fn closing_stdin_lets_runs_finish_and_answer() {
    let rt = rt();
    let server = rt.block_on(fake("late answer", Duration::from_millis(800)));
    let dir = workspace("eof", &server, ONE_GOAL);
    let mut s = Serve::start(&dir, &[]);
    let waited = s.request("run", json!({"path": "Agentfile"}));
    let quick = s.request("run", json!({"path": "Agentfile", "wait": false}));
    s.close_stdin();
    let r = s.reply(waited);
    assert_eq!(r["result"]["outputs"]["greet"], "late answer", "{r}");
    let q = s.reply(quick)["result"].clone();
    let id = q["session_id"].as_str().unwrap().to_owned();
    s.event_until(&id, "run_complete");
    assert_eq!(s.wait_exit(), 0);
}

#[cfg(unix)]
#[test]
fn sigterm_leaves_sessions_interrupted_and_resumable() {
    let rt = rt();
    let server = rt.block_on(fake("eventually", Duration::from_secs(3)));
    let dir = workspace("term", &server, ONE_GOAL);
    let mut s = Serve::start(&dir, &[]);
    let r = s.result("run", json!({"path": "Agentfile", "wait": false}));
    let id = r["session_id"].as_str().unwrap().to_owned();
    s.event_until(&id, "llm_request");
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    assert_eq!(s.wait_exit(), 143);
    drop(s);

    let mut s = Serve::start(&dir, &[]);
    let page = s.result("event", json!({"session_id": id}));
    assert_eq!(page["status"], "interrupted", "{page}");
    let r = s.result("run", json!({"resume": id}));
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["session_id"], id);
    assert_eq!(r["outputs"]["greet"], "eventually");
}

#[test]
fn validate_inspect_list_sessions() {
    let rt = rt();
    let server = rt.block_on(fake("hi", Duration::ZERO));
    let dir = workspace("static", &server, ONE_GOAL);
    let mut s = Serve::start(&dir, &[]);
    let r = s.result(
        "validate",
        json!({"source": "NAME x\nGOAL a \"do\"\nRUN main USING b\n"}),
    );
    assert_eq!(r["files"][0]["ok"], false, "{r}");
    assert_eq!(r["files"][0]["diagnostics"][0]["line"], 3, "{r}");
    let r = s.result("validate", json!({"paths": ["Agentfile"]}));
    assert_eq!(r["files"][0]["ok"], true, "{r}");
    let r = s.result("inspect", json!({"path": "Agentfile", "format": "mermaid"}));
    assert!(r["text"].as_str().unwrap().starts_with("flowchart"), "{r}");
    let r = s.result("inspect", json!({"path": "Agentfile"}));
    assert_eq!(r["inputs"][0]["name"], "who", "{r}");
    let e = s.error("list", json!({"dir": "nowhere"}));
    assert_eq!(e["code"], -32006);
    let r = s.result("sessions", json!({}));
    assert_eq!(r["sessions"], json!([]));
}

/// `signal` reaches only a suspended session: an unknown one and one that is
/// not waiting at a suspend step are answered with their error classes.
#[test]
fn signal_is_refused_where_nothing_waits() {
    let rt = rt();
    let server = rt.block_on(fake("hi", Duration::ZERO));
    let dir = workspace("signal", &server, ONE_GOAL);
    let mut s = Serve::start(&dir, &[]);
    let e = s.error("signal", json!({"session_id": "nope", "event": "go"}));
    assert_eq!(e["code"], -32002, "{e}");
    let r = s.result("run", json!({"path": "Agentfile"}));
    let id = r["session_id"].as_str().unwrap().to_owned();
    let e = s.error("signal", json!({"session_id": id, "event": "go"}));
    assert!(
        e["message"].as_str().unwrap().contains("not suspended"),
        "{e}"
    );
    let e = s.error("signal", json!({"session_id": id}));
    assert_eq!(e["code"], -32602, "{e}");
}

/// A WORKFLOW.md over JSON-RPC: its approval step waits for `approve`, its
/// suspend step for `signal`, and the resumed run ends with the outputs the
/// workflow's `result` shapes from the model's answer and the signal's
/// payload (`tests/workflow_md/ship-notes`).
#[test]
fn a_workflow_md_is_approved_and_signalled_over_json_rpc() {
    let rt = rt();
    let server = rt.block_on(fake(r#"{"notes": "Tides are faster."}"#, Duration::ZERO));
    let dir = tmp("wmd-signal");
    crate::support::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workflow_md/ship-notes"),
        &dir,
        &[],
    );
    write_config(&dir.join("agent.toml"), &server);
    let mut config = std::fs::read_to_string(dir.join("agent.toml")).unwrap();
    config.push_str("\n[tools.publish-notes]\ncommand = [\"python3\", \"publish.py\"]\n");
    std::fs::write(dir.join("agent.toml"), config).unwrap();
    let mut s = Serve::start(&dir, &[]);
    let r = s.result(
        "run",
        json!({"path": ".workflows/ship-notes", "inputs": {"version": "1.2.0"}, "wait": false}),
    );
    let id = r["session_id"].as_str().unwrap().to_owned();
    let asked = s.event_until(&id, "approval_required");
    assert!(
        asked.to_string().contains("Publish these release notes?"),
        "{asked}"
    );
    s.result("approve", json!({"session_id": id, "approve": true}));
    let suspended = s.event_until(&id, "run_suspended");
    assert!(
        suspended.to_string().contains("release.tagged"),
        "{suspended}"
    );
    let e = s.error(
        "signal",
        json!({"session_id": id, "event": "release.cancelled"}),
    );
    assert!(
        e["message"].as_str().unwrap().contains("release.tagged"),
        "{e}"
    );
    s.result(
        "signal",
        json!({"session_id": id, "event": "release.tagged", "payload": {"channel": "#releases"}}),
    );
    let done = s.event_until(&id, "run_complete");
    assert_eq!(
        done["params"]["data"]["outputs"],
        json!({"notes": "Tides are faster.", "channel": "#releases"}),
        "{done}"
    );
    assert_eq!(server.request_count(), 1, "the model is asked once");
}

/// JSON values given over JSON-RPC reach the step as the JSON the workflow's
/// `inputs` schema declares — a number, a list, an object — not as their text
/// read back; an input the workflow reads as text still takes only a string,
/// number or boolean.
#[test]
fn json_inputs_reach_the_step_as_json() {
    let rt = rt();
    let server = rt.block_on(fake("unused", Duration::ZERO));
    let dir = tmp("json-inputs");
    write_config(&dir.join("agent.toml"), &server);
    let mut config = std::fs::read_to_string(dir.join("agent.toml")).unwrap();
    config.push_str("\n[tools.echo]\ncommand = [\"python3\", \"echo.py\"]\n");
    std::fs::write(dir.join("agent.toml"), config).unwrap();
    std::fs::write(
        dir.join("echo.py"),
        "import json, sys\nargs = json.load(sys.stdin)\nopen('args.json', 'w').write(json.dumps(args))\nprint(json.dumps(args))\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.toml"),
        "[bash]\nallowlist = [\"python3 echo.py\"]\n",
    )
    .unwrap();
    let wf = dir.join(".workflows/typed");
    std::fs::create_dir_all(&wf).unwrap();
    std::fs::write(
        wf.join("WORKFLOW.md"),
        "---\nname: Typed\nid: typed\ndescription: Echo typed inputs.\nversion: 1.0.0\n\
inputs:\n  type: object\n  properties:\n    n: { type: integer }\n    tags: { type: array, items: { type: string } }\n    opts: { type: object }\n    name: { type: string }\n  required: [n, tags, opts, name]\n\
outputs: { type: object }\n\
steps:\n  - id: echo\n    kind: tool\n    tool: echo\n    inputs:\n      n: $input.n\n      tags: $input.tags\n      opts: $input.opts\n      name: $input.name\n    next: $end\n\
---\n# Typed\n",
    )
    .unwrap();
    let mut s = Serve::start(&dir, &[]);
    let given = json!({
        "n": 5,
        "tags": ["a", "b c"],
        "opts": {"depth": 2, "nested": {"on": true, "list": [1.5, null]}},
        "name": 7
    });
    let r = s.result(
        "run",
        json!({"path": ".workflows/typed", "inputs": given.clone()}),
    );
    assert_eq!(r["status"], "completed", "{r}");
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("args.json")).unwrap()).unwrap();
    assert_eq!(seen["n"], json!(5), "{seen}");
    assert_eq!(seen["tags"], given["tags"], "{seen}");
    assert_eq!(seen["opts"], given["opts"], "{seen}");
    assert_eq!(
        seen["name"],
        json!("7"),
        "a string input takes the number's text"
    );

    // A list for an input read as text is refused, as before.
    std::fs::write(dir.join("Agentfile"), ONE_GOAL).unwrap();
    let e = s.error(
        "run",
        json!({"path": "Agentfile", "inputs": {"who": {"a": 1}}}),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert_eq!(
        e["message"],
        "run: invalid params: `inputs.who`: expected a string, number or boolean, not an object"
    );
    s.close_stdin();
    assert_eq!(s.wait_exit(), 0);
}

/// `sessions` pages newest first by the `next` cursor, and filters by
/// workflow and text, as the web view's list does.
#[test]
fn sessions_page_by_cursor_and_filter() {
    let rt = rt();
    let server = rt.block_on(fake("ok", Duration::ZERO));
    let dir = workspace("pages", &server, ONE_GOAL);
    let mut s = Serve::start(&dir, &[]);
    for _ in 0..3 {
        let id = s.request("run", json!({"path": "Agentfile"}));
        assert_eq!(s.reply(id)["result"]["status"], "completed");
    }
    let first = s.result("sessions", json!({"limit": 2}));
    assert_eq!(first["sessions"].as_array().unwrap().len(), 2);
    let next = first["next"]
        .as_str()
        .expect("a full page has a next")
        .to_owned();
    let second = s.result("sessions", json!({"limit": 2, "before": next}));
    let rest = second["sessions"].as_array().unwrap();
    assert_eq!(rest.len(), 1);
    assert!(second.get("next").is_none(), "{second}");
    assert!(
        first["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["id"] != rest[0]["id"])
    );
    let name = rest[0]["workflow"].as_str().unwrap().to_owned();
    let named = s.result("sessions", json!({"workflow": name}));
    assert_eq!(named["sessions"].as_array().unwrap().len(), 3);
    let found = s.result("sessions", json!({"search": rest[0]["id"]}));
    assert_eq!(found["sessions"][0]["id"], rest[0]["id"]);
    assert!(
        s.result("sessions", json!({"workflow": "nope"}))["sessions"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let e = s.error("sessions", json!({"before": "not a cursor"}));
    assert_eq!(e["code"], -32602, "{e}");
}
