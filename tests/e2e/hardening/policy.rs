//! Issue 30 items 9, 10 and 11: the policy's protected folders against command
//! arguments, Cedar `forbid`s on reads against tools that read many files, and
//! the servers' reads of the paths their requests name.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use agentfile::llm::fake::FakeReply;
use serde_json::{Value, json};

use crate::hardening::limited;
use crate::support::{config, events, fake, result_of, text};

const DEADLINE: Duration = Duration::from_secs(60);

fn tmp(name: &str) -> std::path::PathBuf {
    crate::support::tmp("h30-policy", name)
}

fn write(p: &Path, s: &str) {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, s).unwrap();
}

/// Every event of `kind` in a session.
fn of_kind<'a>(evs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == kind).collect()
}

// ── item 9: the protected scripts/ folder against command arguments ─────────

const SCRIPT: &str = "#!/bin/bash\nset -eu\necho published > published.txt\n";

/// A workspace with a workflow.yaml whose agent step may run the bash commands
/// `allow`ed, then whose shell step runs `scripts/publish.sh`.
fn scripts_workspace(name: &str, allow: &[&str]) -> std::path::PathBuf {
    let dir = tmp(name);
    let wf = dir.join("workflows/pub");
    write(
        &wf.join("workflow.yaml"),
        "specVersion: \"1.0\"\nname: pub\nversion: 1.0.0\ndescription: Draft, then publish.\ntrigger:\n  type: command\n  input_var: CHANGES\nsteps:\n  - id: draft\n    name: Draft\n    agent: agents/writer.md\n    input: $CHANGES\n    goal: Draft the notes.\n    produces: outputs/notes.md\n  - id: publish\n    name: Publish\n    action: shell\n    script:\n      bash: scripts/publish.sh\n    goal: Publish.\n",
    );
    write(
        &wf.join("agents/writer.md"),
        "# Writer\n\nYou write release notes.\n",
    );
    write(&wf.join("scripts/publish.sh"), SCRIPT);
    write(&dir.join("evil.sh"), "#!/bin/bash\ntouch PWNED\n");
    write(
        &dir.join("evil.patch"),
        "--- workflows/pub/scripts/publish.sh\n+++ workflows/pub/scripts/publish.sh\n@@ -1,3 +1,4 @@\n #!/bin/bash\n set -eu\n+touch PWNED\n echo published > published.txt\n",
    );
    let list: Vec<String> = allow.iter().map(|a| format!("{a:?}")).collect();
    write(
        &dir.join("policy.toml"),
        &format!(
            "[write]\nallow = [\"$WORKSPACE/**\"]\n[bash]\nenabled = true\nallowlist = [{}]\n",
            list.join(", ")
        ),
    );
    dir
}

/// Run the workflow with the model calling bash with each of `commands`.
fn run_scripts_workflow(dir: &Path, commands: &[&str]) -> (Value, Vec<Value>) {
    let mut replies: Vec<FakeReply> = commands
        .iter()
        .map(|c| FakeReply::tool_call("bash", json!({ "command": c })))
        .collect();
    replies.push(FakeReply::text("Notes."));
    let server = fake(replies);
    config(dir, &server);
    let o = limited::run(
        dir,
        &[
            "run",
            "workflows/pub",
            "--policy",
            "policy.toml",
            "--input",
            "CHANGES=x",
            "--max-turns",
            "40",
            "--output",
            "json",
        ],
        &[],
        b"",
        DEADLINE,
    );
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r:#}\n{}", text(&o));
    let evs = events(dir, r["session_id"].as_str().unwrap());
    (r, evs)
}

#[test]
fn item_09_commands_cannot_rewrite_scripts_through_their_arguments() {
    let dir = scripts_workspace(
        "writers",
        &[
            "sed *",
            "cp *",
            "mv *",
            "tee *",
            "dd *",
            "ln *",
            "patch *",
            "install *",
            "cat *",
            "truncate *",
            "touch *",
            "chmod *",
            "rm *",
            "cd *",
            "grep *",
            "echo *",
        ],
    );
    let s = "workflows/pub/scripts/publish.sh";
    let writes = [
        format!("sed -i '1a touch PWNED' {s}"),
        format!("sed -i.bak -e '2a touch PWNED' {s}"),
        format!("cp evil.sh {s}"),
        "cp evil.sh workflows/pub/scripts".to_owned(),
        format!("mv evil.sh {s}"),
        format!("cat evil.sh | tee {s}"),
        format!("dd if=evil.sh of={s}"),
        format!("ln -sf {}/evil.sh {s}", dir.display()),
        format!("patch {s} evil.patch"),
        "patch -p0 -i evil.patch".to_owned(),
        "patch -p0 < evil.patch".to_owned(),
        format!("install -m 755 evil.sh {s}"),
        format!("truncate -s 0 {s}"),
        format!("chmod -x {s}"),
        "rm -rf workflows".to_owned(),
        "cd workflows/pub/scripts && sed -i '1a touch PWNED' publish.sh".to_owned(),
        format!("sed -n 'w {s}' evil.sh"),
    ];
    // Reads of the folder, and writes elsewhere, still run.
    let allowed = [
        format!("cat {s}"),
        "grep -rn published workflows/pub/scripts/".to_owned(),
        format!("sed -n 3p {s}"),
        format!("cp {s} copy.sh"),
        "sed -i 's/PWNED/OK/' evil.sh".to_owned(),
        "echo hi | tee notes.txt".to_owned(),
    ];
    let commands: Vec<&str> = writes.iter().chain(&allowed).map(String::as_str).collect();
    let (_, evs) = run_scripts_workflow(&dir, &commands);
    assert_eq!(
        std::fs::read_to_string(dir.join(s)).unwrap(),
        SCRIPT,
        "the script is unchanged"
    );
    assert!(!dir.join("PWNED").exists(), "the edited script ran");
    assert_eq!(
        std::fs::read_to_string(dir.join("published.txt")).unwrap(),
        "published\n",
        "the shell step ran the workflow's own script"
    );
    let denied = of_kind(&evs, "policy_denied");
    let reasons: Vec<String> = denied
        .iter()
        .map(|d| d["data"]["reason"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        denied.len(),
        writes.len(),
        "every write is denied, nothing else: {reasons:#?}"
    );
    for d in &denied {
        let rule = d["data"]["rule"].as_str().unwrap();
        assert!(rule.contains("scripts/"), "{d}");
        let reason = d["data"]["reason"].as_str().unwrap();
        assert!(reason.contains("protected"), "{d}");
    }
    let results = of_kind(&evs, "tool_result");
    let all: String = results
        .iter()
        .map(|r| r["data"]["content"].as_str().unwrap_or("").to_owned())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(all.contains("echo published"), "{all}");
    assert_eq!(
        std::fs::read_to_string(dir.join("copy.sh")).unwrap(),
        SCRIPT
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("evil.sh")).unwrap(),
        "#!/bin/bash\ntouch OK\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "hi\n"
    );
}

// ── item 10: a Cedar forbid on reads, against grep, glob and ls ─────────────

const FORBID_ENV: &str = r#"# syntax=agentrc.agentfile/v0.1
AGENT reader
CMD python ./agent.py
TOOL utcp:file_read
TOOL grep
TOOL glob
TOOL ls
TOOL shell
MOUNT /workspace ro
POLICY
  permit(
    principal == AgentRC::Agent::"reader",
    action == AgentRC::Action::"tool.invoke",
    resource
  );
  @id("no-env-reads")
  forbid(
    principal,
    action == AgentRC::Action::"filesystem.read",
    resource
  ) when { context.path like "/workspace/.env*" };
END
"#;

#[test]
fn item_10_a_cedar_forbid_on_reads_holds_for_each_file_grep_glob_and_ls_meet() {
    let dir = tmp("cedar-env");
    write(&dir.join("Agentfile"), FORBID_ENV);
    write(&dir.join(".env"), "SECRET_TOKEN=sk-live-4242\n");
    write(&dir.join(".env.local"), "SECRET_TOKEN=sk-live-4343\n");
    write(&dir.join("public.txt"), "SECRET_PUBLIC_MARKER\n");
    let server = fake(vec![
        FakeReply::tool_call(
            "grep",
            json!({"pattern": "SECRET", "path": ".", "glob": ".env"}),
        ),
        FakeReply::tool_call(
            "grep",
            json!({"pattern": "SECRET", "path": ".", "glob": "{.env*,*.txt}"}),
        ),
        FakeReply::tool_call("glob", json!({"pattern": "**/.env*"})),
        FakeReply::tool_call("ls", json!({"path": "."})),
        FakeReply::tool_call("read", json!({"path": ".env"})),
        FakeReply::tool_call("bash", json!({"command": "cat .env.local"})),
        FakeReply::tool_call("bash", json!({"command": "cat public.txt"})),
        FakeReply::text("Done."),
    ]);
    config(&dir, &server);
    let o = limited::run(
        &dir,
        &[
            "run",
            "Agentfile",
            "--input",
            "task=look",
            "--allow",
            "bash:cat *",
            "--output",
            "json",
        ],
        &[],
        b"",
        DEADLINE,
    );
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r:#}\n{}", text(&o));
    let evs = events(&dir, r["session_id"].as_str().unwrap());
    let results = of_kind(&evs, "tool_result");
    assert_eq!(results.len(), 7, "{results:#?}");
    let content = |i: usize| {
        results[i]["data"]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    for i in 0..7 {
        let c = content(i);
        assert!(!c.contains("sk-live"), "call {i} returned the secret: {c}");
    }
    // The second grep still finds what Cedar lets it read.
    assert!(
        content(1).contains("SECRET_PUBLIC_MARKER"),
        "{}",
        content(1)
    );
    // glob and ls do not name the forbidden files.
    let lists_env = |c: &str| c.lines().any(|l| l.trim().starts_with(".env"));
    assert!(!lists_env(&content(2)), "{}", content(2));
    assert!(!lists_env(&content(3)), "{}", content(3));
    assert!(content(3).contains("public.txt"), "{}", content(3));
    // A bash line's paths are judged as files read too.
    assert!(content(5).contains("no-env-reads"), "{}", content(5));
    assert!(
        content(6).contains("SECRET_PUBLIC_MARKER"),
        "{}",
        content(6)
    );
    // Nothing in the model's requests carries it either.
    for req in server.requests() {
        assert!(!req.body.to_string().contains("sk-live"), "{}", req.body);
    }
}

// ── item 11: paths the servers read ─────────────────────────────────────────

/// A server process spoken to in JSON lines.
struct Lines {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn start(dir: &Path, args: &[&str]) -> Lines {
        let mut c = limited::command(dir, args, &[]);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            stdin: child.stdin.take(),
            child,
            out: rx,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, v: Value) {
        let s = self.stdin.as_mut().unwrap();
        writeln!(s, "{v}").unwrap();
        s.flush().unwrap();
    }

    /// The reply to request `id`.
    fn reply(&mut self, id: Value) -> Value {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let line = self
                .out
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no reply to {id} in time; seen: {:#?}", self.seen));
            self.seen.push(line.clone());
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v.get("id") == Some(&id) && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// Close stdin and wait for a clean exit; returns everything it printed.
    fn finish(mut self) -> String {
        self.stdin = None;
        let status = limited::wait(&mut self.child, DEADLINE);
        let Some(status) = status else {
            let _ = self.child.kill();
            panic!("the server did not exit after its input closed");
        };
        while let Ok(l) = self.out.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(l);
        }
        assert!(
            !matches!(status.code(), Some(134 | 137 | 139) | None),
            "{status:?}"
        );
        self.seen.join("\n")
    }
}

const HELLO: &str = "NAME hello\nGOAL greet \"Say hello\"\nRUN main USING greet\n";

/// A workspace beside a secret file, with a link inside pointing at it.
fn server_workspace(name: &str) -> std::path::PathBuf {
    let root = tmp(name);
    write(
        &root.join("secret.txt"),
        "SECRET-LINE-ONE hash$6$abcdef\nSECRET-LINE-TWO\n",
    );
    let ws = root.join("ws");
    write(&ws.join("Agentfile"), HELLO);
    write(&ws.join("sub/hello.agent"), HELLO);
    std::os::unix::fs::symlink(root.join("secret.txt"), ws.join("link.agent")).unwrap();
    ws
}

/// The paths each server must refuse to read, as a request names them.
const OUTSIDE: &[&str] = &["/etc/passwd", "../..", "../secret.txt", "link.agent"];

fn assert_no_content(all: &str) {
    assert!(!all.contains("SECRET-LINE"), "{all}");
    assert!(!all.contains("root:x:0"), "{all}");
    assert!(!all.contains("/bin/bash"), "{all}");
}

#[test]
fn item_11_serve_reads_only_paths_inside_the_workspace() {
    let ws = server_workspace("serve");
    let mut s = Lines::start(&ws, &["serve", "--workspace", ws.to_str().unwrap()]);
    let mut id = 0;
    for p in OUTSIDE {
        for (method, params) in [
            ("validate", json!({ "path": p })),
            ("validate", json!({ "paths": [p] })),
            ("inspect", json!({ "path": p })),
            ("validate", json!({ "path": "Agentfile", "config": p })),
            ("run", json!({ "path": p })),
        ] {
            id += 1;
            s.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
            let r = s.reply(json!(id));
            let e = &r["error"];
            assert!(e.is_object(), "{method} {params}: {r}");
            let msg = e["message"].as_str().unwrap();
            assert!(
                msg.contains("outside the workspace") || msg.contains("may not read"),
                "{method} {params}: {r}"
            );
        }
    }
    id += 1;
    s.send(json!({"jsonrpc": "2.0", "id": id, "method": "list", "params": {"dir": "/etc"}}));
    let r = s.reply(json!(id));
    assert!(r["error"].is_object(), "{r}");
    // In the workspace, all still works.
    id += 1;
    s.send(
        json!({"jsonrpc": "2.0", "id": id, "method": "validate", "params": {"path": "Agentfile"}}),
    );
    let r = s.reply(json!(id));
    assert_eq!(r["result"]["ok"], true, "{r}");
    id += 1;
    s.send(json!({"jsonrpc": "2.0", "id": id, "method": "inspect", "params": {"path": "sub/hello.agent"}}));
    let r = s.reply(json!(id));
    assert!(r["result"].is_object(), "{r}");
    id += 1;
    s.send(json!({"jsonrpc": "2.0", "id": id, "method": "list", "params": {"dir": "sub"}}));
    let r = s.reply(json!(id));
    assert_eq!(
        r["result"]["workflows"].as_array().map(Vec::len),
        Some(1),
        "{r}"
    );
    let all = s.finish();
    assert_no_content(&all);
}

#[test]
fn item_11_mcp_reads_only_paths_inside_the_workspace() {
    let ws = server_workspace("mcp");
    let mut s = Lines::start(&ws, &["mcp", "--workspace", ws.to_str().unwrap()]);
    s.send(json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    s.reply(json!("init"));
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut id = 0;
    for p in OUTSIDE {
        for (tool, args) in [
            ("validate", json!({ "path": p })),
            ("inspect", json!({ "path": p })),
            ("list", json!({ "dir": p })),
        ] {
            id += 1;
            s.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": args}}));
            let r = s.reply(json!(id));
            assert_eq!(r["result"]["isError"], true, "{tool} {args}: {r}");
            let t = r["result"]["content"][0]["text"].as_str().unwrap_or("");
            assert!(
                t.contains("outside the workspace") || t.contains("may not read"),
                "{tool} {args}: {r}"
            );
        }
    }
    id += 1;
    s.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "validate", "arguments": {"path": "Agentfile"}}}));
    let r = s.reply(json!(id));
    assert_ne!(r["result"]["isError"], true, "{r}");
    let all = s.finish();
    assert_no_content(&all);
}
