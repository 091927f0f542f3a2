//! Issue 30 items 3 (a YAML alias bomb under the alias cap aborted the
//! process: validate, serve and mcp) and 14 (AIP-15's own `when: true`).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentfile::syntax::yaml::{self, KEY_BYTES, Limits, VALUE_BYTES};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::hardening::limited;
use crate::support::{repo, tmp};

/// YAML lines holding a 1 MB anchor aliased 5,000 times: a 1 MB file that
/// expands to 5 GB.
fn bomb() -> String {
    format!(
        "bomb: &a {}\nmore: [{}]\n",
        "x".repeat(1 << 20),
        vec!["*a"; 5000].join(", ")
    )
}

/// The three places YAML is read, each holding the bomb, under `dir`:
/// (path, what).
fn plant_bombs(dir: &Path) -> Vec<(&'static str, &'static str)> {
    let b = bomb();
    let files = [
        (
            ".workflows/bomb/WORKFLOW.md",
            "WORKFLOW.md",
            format!("---\nname: Bomb\nid: bomb\n{b}---\n# Bomb\n"),
        ),
        ("workflows/bomb/workflow.yaml", "workflow.yaml", b.clone()),
        (
            "bomb.agent.md",
            ".agent.md",
            format!("---\nname: bomb\ndescription: a bomb\n{b}---\nYou are a bomb.\n"),
        ),
    ];
    files
        .into_iter()
        .map(|(path, what, text)| {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            (path, what)
        })
        .collect()
}

/// A valid WORKFLOW.md that needs no model: `run_good` once scanned.
fn plant_good(dir: &Path) {
    let p = dir.join(".workflows/good/WORKFLOW.md");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(
        p,
        "---\nname: Good\nid: good\ndescription: Lists a folder.\nversion: 1.0.0\n\
         inputs: { type: object, properties: { path: { type: string } } }\n\
         outputs: { type: object }\n\
         steps:\n  - id: look\n    kind: tool\n    tool: ls\n    inputs: { path: $input.path }\n---\n",
    )
    .unwrap();
}

fn text(o: &Output) -> String {
    crate::support::text(o)
}

#[test]
fn item_03_alias_bomb_is_a_clean_error_in_validate() {
    let dir = tmp("hardening", "yaml-bomb-validate");
    // One after another: before the fix each took 4 GiB.
    for (path, what) in plant_bombs(&dir) {
        let o = limited::run(&dir, &["validate", path], &[], b"", Duration::from_secs(60));
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{what}: {out}");
        assert!(
            out.contains("aliases copy more than 16 MiB"),
            "{what}: no message naming the limit:\n{out}"
        );
        // Located: at the alias that crossed the limit (line 2 of the
        // YAML), not at the top of the file.
        let line = if what == "workflow.yaml" { 2 } else { 5 };
        assert!(
            out.contains(&format!("{}:{line}:", path.rsplit('/').next().unwrap())),
            "{what}: not located at line {line}:\n{out}"
        );
    }
}

#[test]
fn item_03_many_small_values_are_refused_not_checked_one_by_one() {
    // The same rule without aliases: 3 bytes of `{},` made a step the schema
    // checks took 3 to 15 KB for (a 1.2 MB file: 3 GB and more, or minutes).
    let dir = tmp("hardening", "yaml-many-values");
    let many = |n: usize| format!("[{}]", vec!["{}"; n].join(","));
    let head = "name: Many\nid: many\ndescription: d\nversion: 1.0.0\n\
                inputs: { type: object }\noutputs: { type: object }\n";
    let files = [
        (
            ".workflows/many/WORKFLOW.md",
            format!("---\n{head}steps: {}\n---\n", many(400_000)),
            "more than 100000 values",
        ),
        (
            "workflows/many/workflow.yaml",
            format!("steps: {}\n", many(400_000)),
            "more than 100000 values",
        ),
        (
            ".workflows/steps/WORKFLOW.md",
            format!("---\n{head}steps: {}\n---\n", many(12_000)),
            "the workflow has 12000 steps, nested ones included: more than 10000",
        ),
    ];
    for (path, body, says) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
        let started = Instant::now();
        let o = limited::run(&dir, &["validate", path], &[], b"", Duration::from_secs(60));
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{path}: {out}");
        assert!(out.contains(says), "{path}: expected `{says}` in:\n{out}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{path}: {:?}",
            started.elapsed()
        );
    }
}

/// A JSON-RPC server (serve or mcp) under the suite's limits, one line per
/// message.
struct Server {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Server {
    fn start(dir: &Path, args: &[&str]) -> Server {
        let mut c = limited::command(dir, args, &[]);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    return;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Server {
            what: format!("agentfile {}", args.join(" ")),
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        }
    }

    fn send(&mut self, msg: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        let _ = writeln!(stdin, "{msg}");
        let _ = stdin.flush();
    }

    /// The reply to `id` within `wait`; panics, saying how the server
    /// ended, if it died first.
    fn reply(&mut self, id: &Value, wait: Duration) -> Value {
        let end = Instant::now() + wait;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if v.get("id") == Some(id) && v.get("method").is_none() => return v,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{}: no reply to {id} within {wait:?}", self.what)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = limited::wait(&mut self.child, Duration::from_secs(5));
                    panic!(
                        "{}: ended ({status:?}) before answering {id}\n{}",
                        self.what,
                        String::from_utf8_lossy(&self.stderr.lock().unwrap())
                    )
                }
            }
        }
    }

    fn call(&mut self, id: u64, method: &str, params: Value, wait: Duration) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.reply(&json!(id), wait)
    }

    /// Close its input and wait for it to end, under the suite's rules.
    fn finish(mut self) {
        drop(self.stdin.take());
        let status = limited::wait(&mut self.child, Duration::from_secs(20));
        let Some(status) = status else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!("{}: still running after its input closed", self.what);
        };
        let o = Output {
            status,
            stdout: Vec::new(),
            stderr: self.stderr.lock().unwrap().clone(),
        };
        limited::assert_no_signal(&o, &self.what);
    }
}

#[test]
fn item_03_alias_bomb_leaves_serve_answering() {
    let dir = tmp("hardening", "yaml-bomb-serve");
    let bombs = plant_bombs(&dir);
    plant_good(&dir);
    let mut s = Server::start(&dir, &["serve"]);
    let wait = Duration::from_secs(60);
    for (i, (path, what)) in bombs.iter().enumerate() {
        let r = s.call(i as u64 + 1, "validate", json!({"path": path}), wait);
        assert!(
            r.to_string().contains("aliases copy more than 16 MiB"),
            "{what}: {r}"
        );
    }
    let r = s.call(10, "list", json!({}), wait);
    let listed = r["result"]["workflows"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let valid: Vec<(&str, bool)> = listed
        .iter()
        .map(|w| (w["name"].as_str().unwrap_or(""), w["valid"] == true))
        .collect();
    assert_eq!(
        valid,
        [("bomb", false), ("Good", true), ("bomb", false)],
        "{r}"
    );
    let r = s.call(11, "ping", json!({}), Duration::from_secs(10));
    assert!(r.get("result").is_some(), "{r}");
    s.finish();
}

#[test]
fn item_03_alias_bomb_in_the_workspace_leaves_mcp_answering() {
    let dir = tmp("hardening", "yaml-bomb-mcp");
    plant_bombs(&dir);
    plant_good(&dir);
    let mut s = Server::start(&dir, &["mcp", "--workspace", ".", "--poll-ms", "200"]);
    let wait = Duration::from_secs(30);
    s.call(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "hardening", "version": "1"}}),
        wait,
    );
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    // The background scan is done once `run_good` is listed (the catalog is
    // set after the whole workspace was analysed, bombs included).
    let end = Instant::now() + Duration::from_secs(45);
    let mut id = 10;
    loop {
        id += 1;
        let r = s.call(id, "tools/list", json!({}), wait);
        let names: Vec<&str> = r["result"]["tools"]
            .as_array()
            .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        if names.contains(&"run_good") {
            assert!(!names.contains(&"run_bomb"), "{names:?}");
            break;
        }
        assert!(
            Instant::now() < end,
            "the first scan did not finish: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // The agent prompts are read from the same workspace (bomb.agent.md).
    let r = s.call(2, "prompts/list", json!({}), wait);
    assert!(r.get("result").is_some(), "{r}");
    // A few more rescans, then still answering.
    std::thread::sleep(Duration::from_millis(700));
    let r = s.call(3, "ping", json!({}), Duration::from_secs(10));
    assert!(r.get("result").is_some(), "{r}");
    s.finish();
}

/// A fresh copy of the AIP-15 examples project (EXAMPLES.md's workflows with
/// their tools bound to small test programs).
fn examples(name: &str) -> std::path::PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let n = e.file_name();
            if n == ".agentfile" || n == "tool-log.jsonl" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(&n));
            } else {
                std::fs::copy(e.path(), to.join(&n)).unwrap();
            }
        }
    }
    let dir = tmp("hardening", name);
    copy(&repo().join("examples/aip-15"), &dir);
    dir
}

/// `validate --format json`: the exit code and the diagnostics.
fn validate_json(dir: &Path, path: &str) -> (Option<i32>, Vec<Value>) {
    let o = limited::run(
        dir,
        &["validate", path, "--format", "json"],
        &[],
        b"",
        Duration::from_secs(30),
    );
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {}", text(&o)));
    let diags = v["files"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|f| f["diagnostics"].as_array().cloned().unwrap_or_default())
        .collect();
    (o.status.code(), diags)
}

#[test]
fn item_14_when_true_default_branch_validates_and_runs() {
    let dir = examples("when-true");
    // As EXAMPLES.md writes them: `- when: true` as the default branch.
    for id in [
        "lead-triage",
        "onboarding-after-payment",
        "bulk-lead-triage",
    ] {
        let (code, diags) = validate_json(&dir, &format!(".workflows/{id}"));
        assert_eq!(code, Some(0), "{id}: {diags:#?}");
        let warned = diags
            .iter()
            .any(|d| d["code"] == "boolean-condition" && d["severity"] == "warning");
        assert!(warned, "{id}: no boolean-condition warning: {diags:#?}");
        assert!(
            diags.iter().all(|d| d["severity"] != "error"),
            "{id}: {diags:#?}"
        );
    }
    let (_, diags) = validate_json(&dir, ".workflows/lead-triage");
    let d = diags
        .iter()
        .find(|d| d["code"] == "boolean-condition")
        .unwrap();
    assert_eq!(d["line"], 34, "{d}");
    assert!(
        d["hint"].as_str().unwrap_or("").contains("when: \"true\""),
        "{d}"
    );
    // The default branch is taken for a small company.
    let o = limited::run(
        &dir,
        &[
            "run",
            ".workflows/lead-triage",
            "--input",
            "email=small@shop.test",
            "--approve-all",
            "--output",
            "json",
        ],
        &[],
        b"",
        Duration::from_secs(60),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["outputs"]["messageId"], "m-small@shop.test", "{r}");
}

#[test]
fn item_14_when_of_another_type_is_still_an_error() {
    let dir = tmp("hardening", "when-types");
    let wf = |when: &str| {
        format!(
            "---\nname: W\nid: when-types\ndescription: d\nversion: 1.0.0\n\
             inputs: {{ type: object }}\noutputs: {{ type: object }}\n\
             steps:\n  - id: route\n    kind: branch\n    branches:\n      - when: {when}\n        next: look\n\
             \x20 - id: look\n    kind: tool\n    tool: ls\n    inputs: {{ path: . }}\n---\n"
        )
    };
    let cases = [
        ("true", true, ""),
        ("false", true, ""),
        ("3", false, "not an integer"),
        ("[a]", false, "not a list"),
        ("{a: 1}", false, "not a mapping"),
    ];
    for (when, ok, says) in cases {
        let p = dir.join(".workflows/w/WORKFLOW.md");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, wf(when)).unwrap();
        let (code, diags) = validate_json(&dir, ".workflows/w");
        let errors: Vec<&Value> = diags.iter().filter(|d| d["severity"] == "error").collect();
        if ok {
            assert_eq!(code, Some(0), "when: {when}: {diags:#?}");
        } else {
            assert_eq!(code, Some(2), "when: {when}: {diags:#?}");
            assert_eq!(errors.len(), 1, "when: {when}: {errors:#?}");
            let e = errors[0];
            assert_eq!(e["code"], "schema", "{e}");
            assert_eq!(e["line"], 12, "{e}");
            let msg = e["message"].as_str().unwrap_or("");
            assert!(
                msg.contains("must be a string") && msg.contains(says),
                "when: {when}: {msg}"
            );
        }
    }
}

// ── The YAML front matter loader under generated documents ───────────────────

/// A YAML node of the small grammar: scalars (long ones too, and escapes
/// that grow when read), aliases, anchors, flow lists and mappings.
#[derive(Debug, Clone)]
enum Gen {
    Scalar(String),
    /// `*aN`
    Alias(u8),
    Seq(Vec<Gen>),
    Map(Vec<(Key, Gen)>),
    /// `&aN node`
    Anchored(u8, Box<Gen>),
    /// `[[[ node ]]]`, `n` levels.
    Deep(u16, Box<Gen>),
    /// The same alias `n` times in a list: where expansion multiplies.
    Repeat(u8, u16),
}

#[derive(Debug, Clone)]
enum Key {
    Plain(String),
    Alias(u8),
    /// `? key` with a long text.
    Explicit(String),
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zé→]{1,8}",
        1 => Just("true".to_owned()),
        1 => Just("~".to_owned()),
        1 => Just("0x1F".to_owned()),
        1 => Just("-1.5e3".to_owned()),
        1 => Just("''".to_owned()),
        // Escapes that grow when read: `\L` is 2 bytes written, 3 read.
        1 => Just(r#""\L\P\_é\u00e9""#.to_owned()),
        4 => (1usize..3000, "[a-z]").prop_map(|(n, c)| c.repeat(n)),
        1 => Just("a: b".to_owned()),
        1 => Just("[".to_owned()),
        1 => Just("- x".to_owned()),
    ]
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        4 => "[a-zü]{1,6}".prop_map(Key::Plain),
        1 => (0u8..4).prop_map(Key::Alias),
        1 => (0usize..2000).prop_map(|n| Key::Explicit("k".repeat(n + 1))),
    ]
}

fn node() -> impl Strategy<Value = Gen> {
    let leaf = prop_oneof![
        4 => scalar().prop_map(Gen::Scalar),
        2 => (0u8..4).prop_map(Gen::Alias),
        1 => (0u8..4, 0u16..400).prop_map(|(a, n)| Gen::Repeat(a, n)),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            3 => prop::collection::vec(inner.clone(), 0..8).prop_map(Gen::Seq),
            3 => prop::collection::vec((key(), inner.clone()), 0..6).prop_map(Gen::Map),
            3 => (0u8..4, inner.clone()).prop_map(|(a, n)| Gen::Anchored(a, Box::new(n))),
            1 => (0u16..260, inner).prop_map(|(d, n)| Gen::Deep(d, Box::new(n))),
        ]
    })
}

/// `g` as YAML, on a line after `defined` lines anchored `&a0`, `&a1`, …:
/// aliases name one of those (or, on the first line, none).
fn emit(g: &Gen, defined: u8, out: &mut String) {
    let alias = |a: u8| {
        if defined == 0 {
            "x".to_owned()
        } else {
            format!("*a{}", a % defined)
        }
    };
    match g {
        Gen::Scalar(s) => out.push_str(s),
        Gen::Alias(a) => out.push_str(&alias(*a)),
        Gen::Seq(items) => {
            out.push('[');
            for (i, n) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                emit(n, defined, out);
            }
            out.push(']');
        }
        Gen::Map(entries) => {
            out.push('{');
            for (i, (k, n)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match k {
                    Key::Plain(k) => out.push_str(k),
                    Key::Alias(a) => out.push_str(&format!("{} ", alias(*a))),
                    Key::Explicit(k) => out.push_str(&format!("? {k}")),
                }
                out.push_str(": ");
                emit(n, defined, out);
            }
            out.push('}');
        }
        Gen::Anchored(a, n) => {
            // Anchors inside redefine a name already used, or a new one.
            out.push_str(&format!("&a{} ", a % (defined + 1)));
            emit(n, defined, out);
        }
        Gen::Deep(d, n) => {
            out.push_str(&"[".repeat(*d as usize));
            emit(n, defined, out);
            out.push_str(&"]".repeat(*d as usize));
        }
        Gen::Repeat(a, n) => {
            out.push('[');
            out.push_str(&vec![alias(*a); *n as usize].join(", "));
            out.push(']');
        }
    }
}

/// A document: top-level `kN: &aN node` lines, so later lines alias what
/// earlier ones anchored (layers of aliases: the "billion laughs").
fn document() -> impl Strategy<Value = String> {
    prop::collection::vec(node(), 1..8).prop_map(|nodes| {
        let mut out = String::new();
        for (i, n) in nodes.iter().enumerate() {
            out.push_str(&format!("k{i}: &a{i} "));
            emit(n, i as u8, &mut out);
            out.push('\n');
        }
        out
    })
}

/// (the copy size the loader accounts for, lists and mappings nested,
/// values).
fn measure(v: &Value) -> (usize, usize, usize) {
    let mut size = 0;
    let mut deepest = 0;
    let mut values = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        values += 1;
        size += VALUE_BYTES;
        match v {
            Value::String(s) => size += s.len(),
            Value::Array(items) => {
                deepest = deepest.max(depth + 1);
                stack.extend(items.iter().map(|i| (i, depth + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(depth + 1);
                for (k, i) in map {
                    size += KEY_BYTES + k.len();
                    stack.push((i, depth + 1));
                }
            }
            _ => {}
        }
    }
    (size, deepest, values)
}

/// Small bounds, so a case that would expand without them is caught in
/// kilobytes, not gigabytes.
const SMALL: Limits = Limits {
    depth: 64,
    values: 4000,
    alias_bytes: 64 << 10,
};

fn check_document(text: &str) {
    let base = 7;
    let started = Instant::now();
    let parsed = yaml::parse_with(text, base, SMALL);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?} to parse {} bytes",
        started.elapsed(),
        text.len()
    );
    let doc = match parsed {
        Ok(doc) => doc,
        Err(e) => {
            assert!(
                ["yaml-syntax", "duplicate-key", "too-deep", "yaml-too-large"].contains(&e.code),
                "{e:?}"
            );
            assert!(
                base <= e.start && e.start <= e.end && e.end <= base + text.len() + 3,
                "{e:?} outside 0..{}",
                text.len()
            );
            return;
        }
    };
    // What was read is within the bounds: its own text (read escapes at most
    // double), a value and a key's worth per value written, and what the
    // aliases may copy.
    assert!(doc.written() <= SMALL.values);
    let (size, depth, values) = measure(&doc.value);
    assert!(values <= SMALL.values, "{values} values");
    let bound = 2 * text.len() + (VALUE_BYTES + KEY_BYTES) * doc.written() + SMALL.alias_bytes;
    assert!(
        size <= bound,
        "{size} bytes read from {} bytes of text (bound {bound})",
        text.len()
    );
    assert!(depth <= SMALL.depth, "nested {depth} deep");
    // Every place lies inside the text.
    let mut pointers = vec![(String::new(), &*doc.value)];
    let mut checked = 0;
    while let Some((p, v)) = pointers.pop() {
        checked += 1;
        if checked > 2000 {
            break;
        }
        let at = doc.at(&p);
        assert!(
            base <= at.start && at.start <= at.end && at.end <= base + text.len(),
            "{p}: {at:?}"
        );
        assert!(
            text.is_char_boundary(at.start - base) && text.is_char_boundary(at.end - base),
            "{p}: {at:?} splits a character"
        );
        match v {
            Value::Array(items) => pointers.extend(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| (format!("{p}/{i}"), x)),
            ),
            Value::Object(map) => pointers.extend(
                map.iter()
                    .map(|(k, x)| (format!("{p}/{}", yaml::segment(k)), x)),
            ),
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 384,
        max_shrink_iters: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Must show (item 3): the YAML loader returns a value within its bounds
    /// or a located error, in bounded time, for any document of anchors,
    /// aliases, long scalars and keys and deep nesting. Without a bound on
    /// bytes copied, one long anchor repeated in a list breaks the size
    /// bound here (in kilobytes, under the small limits).
    #[test]
    fn item_03_yaml_loader_stays_within_its_bounds(text in document()) {
        check_document(&text);
    }
}

#[test]
fn item_03_yaml_loader_property_finds_the_bomb_shape() {
    // The shape of item 3, scaled down to the small bounds: an anchor of 3 KB
    // aliased 400 times (1.2 MB) must be refused, not read.
    let text = format!(
        "k0: &a0 {}\nk1: [{}]\n",
        "x".repeat(3000),
        vec!["*a0"; 400].join(", ")
    );
    check_document(&text);
    assert_eq!(
        yaml::parse_with(&text, 0, SMALL).unwrap_err().code,
        "yaml-too-large"
    );
}
