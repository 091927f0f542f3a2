//! Issue 30 items 1 and 2: JavaScript tools (`## Tools` of an `.agent.md`).
//!
//! 1. Built-ins that loop inside the engine's C code (`join`, `copyWithin`,
//!    `reverse` on a huge `length`) never reach an interrupt point; the CPU
//!    limit is enforced from outside (a killable worker process), so
//!    `validate`, `inspect`, `run` and `mcp` end.
//! 2. Host calls are counted and capped per tool call, and time in them
//!    counts toward a wall-clock limit.
//!
//! And the property test of the JavaScript front end: snippets built from a
//! grammar of dangerous built-in calls always come back, as a result or an
//! error, within a bounded time.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentfile::llm::fake::FakeReply;
use serde_json::{Value, json};

use crate::hardening::limited;
use crate::support::{config, fake, result_of, text, tmp};

/// One tool per built-in that loops in C on a huge array-like.
const SPIN_TOOLS: &str = r#"const obj = { type: "object", properties: {} };
const huge = () => ({ length: 1e15 });
return {
  join: { fn: () => Array.prototype.join.call(huge(), ""), scheme: { name: "join", description: "Joins", parameters: obj } },
  copy: { fn: () => Array.prototype.copyWithin.call(huge(), 0, 1), scheme: { name: "copy", description: "Copies", parameters: obj } },
  rev: { fn: () => Array.prototype.reverse.call(huge()), scheme: { name: "rev", description: "Reverses", parameters: obj } },
  ok: { fn: () => "fine", scheme: { name: "ok", description: "Answers", parameters: obj } },
};"#;

fn agent(tools: &str) -> String {
    format!(
        "---\ntitle: Spinner\nabilities:\n  allow: [fs]\ncommands:\n  - {{ name: go, description: Go, body: Go now. }}\n---\n\n## System\nYou use your tools.\n\n## Tools\n```js\n{tools}\n```\n"
    )
}

/// The agent whose `## Tools` code itself never returns.
fn hanging_agent() -> String {
    agent(&format!(
        "Array.prototype.join.call({{ length: 1e15 }}, \"\");\n{SPIN_TOOLS}"
    ))
}

/// `agentfile run FILE` in `dir`, the fake model calling `tools` in turn and
/// then answering; the run must complete. How long it took, and the messages
/// of the model's last request (where every tool result shows).
fn run_calling(dir: &Path, file: &str, tools: &[&str]) -> (Duration, String) {
    let mut replies: Vec<FakeReply> = tools
        .iter()
        .map(|t| FakeReply::tool_call(*t, json!({})))
        .collect();
    replies.push(FakeReply::text("All done."));
    let server = fake(replies);
    config(dir, &server);
    let t = Instant::now();
    let o = limited::run(
        dir,
        &["run", file, "--input", "task=go", "--output", "json"],
        &[],
        b"",
        Duration::from_secs(50),
    );
    let took = t.elapsed();
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r:#}\n{}", text(&o));
    let last = server.requests().last().unwrap().body["messages"].to_string();
    (took, last)
}

#[test]
fn item_01_validate_and_inspect_end_on_tools_code_that_loops_in_a_builtin() {
    let dir = tmp("hardening-js", "validate");
    std::fs::write(dir.join("hang.agent.md"), hanging_agent()).unwrap();
    for args in [
        &["validate", "hang.agent.md"][..],
        &["inspect", "hang.agent.md"][..],
        &["validate", "--format", "json", "hang.agent.md"][..],
    ] {
        let t = Instant::now();
        let o = limited::run(&dir, args, &[], b"", Duration::from_secs(30));
        let took = t.elapsed();
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        let all = text(&o);
        assert!(
            all.contains("`## Tools` code does not define tools") && all.contains("CPU time limit"),
            "{args:?}: {all}"
        );
        assert!(took < Duration::from_secs(15), "{args:?} took {took:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn item_01_a_run_ends_without_timeout_when_a_tool_loops_in_a_builtin() {
    let dir = tmp("hardening-js", "run");
    std::fs::write(dir.join("spin.agent.md"), agent(SPIN_TOOLS)).unwrap();
    let (took, last) = run_calling(&dir, "spin.agent.md", &["join", "copy", "rev", "ok"]);
    // Each of the three stops at its 2 s CPU limit (plus the grace).
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // The model saw each tool's error, then the good tool's answer.
    for tool in ["join", "copy", "rev"] {
        assert!(
            last.contains(&format!(
                "tool `{tool}` failed: it ran past its CPU time limit"
            )),
            "{tool}: {last}"
        );
    }
    assert!(last.contains("fine"), "{last}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server (`serve`, `mcp`) under the limits, spoken to in JSON lines.
struct Server {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Server {
    fn start(dir: &Path, args: &[&str]) -> Server {
        let mut c = limited::command(dir, args, &[]);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn send(&mut self, v: Value) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = writeln!(stdin, "{v}");
            let _ = stdin.flush();
        }
    }

    /// The response with `id`, or `None` within `patience`.
    fn response(&self, id: u64, patience: Duration) -> Option<Value> {
        let deadline = Instant::now() + patience;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] == json!(id) {
                return Some(v);
            }
        }
    }

    /// Close its input and wait up to `patience` for it to exit (killed
    /// after); how it exited, `None` if it had to be killed.
    fn close(mut self, patience: Duration) -> Option<std::process::ExitStatus> {
        self.stdin = None;
        let status = limited::wait(&mut self.child, patience);
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        status
    }
}

#[test]
fn item_01_mcp_lists_prompts_and_exits_with_such_an_agent_in_the_workspace() {
    let dir = tmp("hardening-js", "mcp");
    std::fs::write(dir.join("hang.agent.md"), hanging_agent()).unwrap();
    std::fs::write(
        dir.join("good.agent.md"),
        agent(r#"return { ok: { fn: () => "fine", scheme: { name: "ok", description: "Answers", parameters: { type: "object" } } } };"#),
    )
    .unwrap();
    let dirs = dir.display().to_string();
    let mut mcp = Server::start(&dir, &["mcp", "--workspace", &dirs]);
    mcp.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "hardening", "version": "1"}}}));
    let init = mcp.response(1, Duration::from_secs(20));
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    mcp.send(json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}));
    let t = Instant::now();
    let listed = mcp.response(2, Duration::from_secs(20));
    let took = t.elapsed();
    let status = mcp.close(Duration::from_secs(20));
    assert!(init.is_some(), "no answer to initialize");
    let listed = listed.expect("no answer to prompts/list within 20 s");
    let names: Vec<&str> = listed["result"]["prompts"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"good.go"), "{names:?}");
    assert!(!names.contains(&"hang.go"), "{names:?}");
    assert!(took < Duration::from_secs(15), "prompts/list took {took:?}");
    let status = status.expect("mcp did not exit when its stdin closed");
    use std::os::unix::process::ExitStatusExt;
    assert!(status.signal().is_none(), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// CPU time (user + system) of process `pid` and its children, in seconds.
fn cpu_of_tree(pid: u32) -> f64 {
    let ticks = |pid: &str| -> u64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return 0;
        };
        let Some((_, after)) = stat.rsplit_once(')') else {
            return 0;
        };
        let f: Vec<&str> = after.split_whitespace().collect();
        let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        n(11) + n(12)
    };
    let mut total = ticks(&pid.to_string());
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_whitespace() {
            total += ticks(child);
        }
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    total as f64 / hz
}

#[test]
fn item_01_serve_leaves_nothing_spinning_after_a_run_times_out() {
    let dir = tmp("hardening-js", "serve");
    std::fs::write(dir.join("spin.agent.md"), agent(SPIN_TOOLS)).unwrap();
    let server = fake(vec![
        FakeReply::tool_call("join", json!({})),
        FakeReply::text("never reached"),
    ]);
    config(&dir, &server);
    let mut serve = Server::start(&dir, &["serve"]);
    serve.send(json!({"jsonrpc": "2.0", "id": 1, "method": "run",
           "params": {"path": "spin.agent.md", "inputs": {"task": "spin"}, "timeout": "1s"}}));
    let reply = serve.response(1, Duration::from_secs(20));
    // Before the tool's own CPU limit could end it: only the cancel stops it.
    std::thread::sleep(Duration::from_millis(200));
    let pid = serve.child.id();
    let before = cpu_of_tree(pid);
    std::thread::sleep(Duration::from_millis(1700));
    let spent = cpu_of_tree(pid) - before;
    eprintln!("serve and its children after the run: {spent:.2} s of CPU");
    let status = serve.close(Duration::from_secs(20));
    let reply = reply.expect("no answer to run");
    assert_eq!(reply["result"]["termination_reason"], "timeout", "{reply}");
    assert!(
        spent < 0.25,
        "{spent:.2} s of CPU spent by serve and its children after the run ended"
    );
    assert!(status.is_some(), "serve did not exit when its stdin closed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bytes under `dir`, all files.
fn bytes_under(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += bytes_under(&p);
        } else {
            n += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    n
}

#[test]
fn item_02_host_calls_in_a_loop_stop_at_the_cap() {
    let dir = tmp("hardening-js", "host-cap");
    std::fs::write(
        dir.join("loop.agent.md"),
        agent(
            r#"const obj = { type: "object", properties: {} };
return {
  forever: { fn: () => { while (true) { read("notes.txt"); } }, scheme: { name: "forever", description: "Reads for ever", parameters: obj } },
  swallow: { fn: () => { for (;;) { try { read("notes.txt"); } catch (e) {} } }, scheme: { name: "swallow", description: "Ignores errors", parameters: obj } },
  few: { fn: () => { let s = ""; for (let i = 0; i < 20; i++) s = read("notes.txt"); return s.trim(); }, scheme: { name: "few", description: "Reads twenty times", parameters: obj } },
};"#,
        ),
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "the notes\n").unwrap();
    let (took, last) = run_calling(&dir, "loop.agent.md", &["forever", "swallow", "few"]);
    assert!(took < Duration::from_secs(30), "took {took:?}");
    for tool in ["forever", "swallow"] {
        assert!(
            last.contains(&format!(
                "tool `{tool}` failed: it made more than 1000 host calls"
            )),
            "{tool}: {last}"
        );
    }
    assert!(last.contains("the notes"), "{last}");
    let stored = bytes_under(&dir.join(".agentfile"));
    assert!(stored < 16 << 20, "{stored} bytes stored");
    let _ = std::fs::remove_dir_all(&dir);
}

// ── the property test of the JavaScript front end ──────────────────────────

mod property {
    use super::*;
    use agentfile::script::{self, Host, HostError, HostFn, Limits};
    use proptest::prelude::*;

    /// Receivers with a `length` no loop should walk.
    const LENGTHS: &[&str] = &["1e15", "2 ** 53 - 1", "2 ** 32", "1e9", "4294967295"];

    /// Calls into built-ins that run long or allocate much inside the engine,
    /// `N` standing for a length.
    const CALLS: &[&str] = &[
        "Array.prototype.join.call({ length: N }, '')",
        "Array.prototype.copyWithin.call({ length: N }, 0, 1)",
        "Array.prototype.reverse.call({ length: N })",
        "Array.prototype.fill.call({ length: N }, 0)",
        "Array.prototype.sort.call({ length: N })",
        "Array.prototype.indexOf.call({ length: N }, 1)",
        "Array.prototype.lastIndexOf.call({ length: N }, 1)",
        "Array.prototype.includes.call({ length: N }, 1)",
        "Array.prototype.splice.call({ length: N }, 0, 1)",
        "Array.prototype.unshift.call({ length: N }, 1)",
        "Array.prototype.toString.call({ length: N })",
        "Array.from({ length: N })",
        "new Array(N).fill(0)",
        "'x'.repeat(N)",
        "'x'.padStart(N)",
        "'ab'.repeat(1 << 20).split('')",
        "JSON.stringify(new Array(1 << 20).fill('x'.repeat(64)))",
        "new ArrayBuffer(N)",
        "(function f(n) { return f(n + 1) + 1; })(0)",
        "/(a+)+$/.test('a'.repeat(32) + 'b')",
        "/(x|x)*y/.test('x'.repeat(40))",
        "(() => { const a = []; for (;;) a.push(new Array(1e5).fill(1)); })()",
        "(() => { for (;;) {} })()",
        "(() => { for (;;) { try { read('x'); } catch (e) {} } })()",
        "JSON.parse('['.repeat(1e6))",
        "String(Array(1e6).fill(0)).replace(/0/g, '$&$&')",
    ];

    /// Where the snippet runs.
    #[derive(Debug, Clone, Copy)]
    enum Place {
        /// The code that builds the tools (`describe`).
        TopLevel,
        /// The tool's body (`call`).
        Tool,
        /// An async tool's body, after an `await`.
        AsyncTool,
    }

    struct Refuse;

    impl Host for Refuse {
        fn call(&self, _: HostFn, _: Value) -> Result<Value, HostError> {
            Err("no".into())
        }
    }

    fn limits() -> Limits {
        Limits {
            cpu: Duration::from_millis(300),
            memory: 32 << 20,
            ..Limits::default()
        }
    }

    fn source(place: Place, snippet: &str) -> String {
        let tools = |body: &str| {
            format!(
                "return {{ t: {{ fn: {body}, scheme: {{ name: 't', description: 'd', parameters: {{ type: 'object' }} }} }} }};"
            )
        };
        match place {
            Place::TopLevel => format!("{snippet};\n{}", tools("() => 1")),
            Place::Tool => tools(&format!("() => {snippet}")),
            Place::AsyncTool => tools(&format!("async () => {{ await 0; return {snippet}; }}")),
        }
    }

    /// Runs the code and reports how long it took; the code must come back
    /// (any result or error) well within the bound.
    fn bounded(place: Place, snippet: String) -> Result<(), TestCaseError> {
        let code = source(place, &snippet);
        let (tx, rx) = mpsc::channel();
        // A thread, so a hang fails the case instead of the whole suite.
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = match place {
                Place::TopLevel => script::describe(&code, &limits()).map(|_| Value::Null),
                _ => script::call(&code, "t", json!({}), std::rc::Rc::new(Refuse), &limits()),
            };
            let _ = tx.send((r, t.elapsed()));
        });
        let bound = Duration::from_secs(8);
        let Ok((r, took)) = rx.recv_timeout(bound) else {
            return Err(TestCaseError::fail(format!(
                "{place:?} `{snippet}`: no answer within {bound:?}"
            )));
        };
        if let Err(e) = &r {
            // A clean error, not the engine's process dying of something else.
            prop_assert!(
                !e.to_string().contains("crashed"),
                "{place:?} `{snippet}`: {e}"
            );
        }
        prop_assert!(
            took < Duration::from_secs(5),
            "{place:?} `{snippet}`: {took:?}"
        );
        Ok(())
    }

    fn snippet() -> impl Strategy<Value = String> {
        (
            proptest::sample::select(CALLS),
            proptest::sample::select(LENGTHS),
        )
            .prop_map(|(call, n)| call.replace('N', &format!("({n})")))
    }

    fn place() -> impl Strategy<Value = Place> {
        prop_oneof![
            Just(Place::TopLevel),
            Just(Place::Tool),
            Just(Place::AsyncTool)
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 24,
            max_shrink_iters: 4,
            failure_persistence: None,
            .. ProptestConfig::default()
        })]

        /// Would have found item 1: `join`, `copyWithin`, `reverse`… on a
        /// huge `length` never returned.
        #[test]
        fn item_01_javascript_front_end_always_answers_within_bounds(
            place in place(),
            snippet in snippet(),
        ) {
            bounded(place, snippet)?;
        }
    }

    /// The three of the issue, each in each place, always (the property test
    /// samples).
    #[test]
    fn item_01_join_copywithin_reverse_are_stopped_in_every_place() {
        for call in &CALLS[..3] {
            for place in [Place::TopLevel, Place::Tool, Place::AsyncTool] {
                bounded(place, call.replace('N', "1e15")).unwrap();
            }
        }
    }
}
