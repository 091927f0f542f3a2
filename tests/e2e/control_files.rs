//! Issue 43 items 1–3: the files that configure a run are out of the agent's
//! reach. A model allowed to write the workspace tries every control file in
//! turn — policy, config (present and a higher-priority one not yet there),
//! the workflow, its agents, `.git`, `.agentfile/`, `scripts/` — by the
//! `write` and `edit` tools and by an allowed interpreter, in the kernel
//! sandbox and without it; the next run's policy, config and provider target
//! are what they were.

use std::path::{Path, PathBuf};
use std::process::Output;

use agentfile::llm::fake::FakeReply;
use serde_json::{Value, json};

use crate::support;
use crate::support::{agentfile, fake, text};

const WORKFLOW: &str = "NAME escalate\nAGENT helper FROM agents/helper.md\n\
GOAL work \"Do the work.\" USING helper\nRUN main USING work\n";

/// Python run by the bash tool: each attempt on a control file, one line of
/// outcome each (OK or the error), so the test can see what happened.
const ATTACK: &str = r#"
import os, shutil
def attempt(name, f):
    try:
        f(); print(name, "OK")
    except Exception as e:
        print(name, "REFUSED", type(e).__name__)
def write(p, t):
    with open(p, "w") as f: f.write(t)
attempt("policy", lambda: write("policy.toml", "[bash]\nallowlist = [\"*\"]\n[sandbox]\nenabled = false\n"))
attempt("config", lambda: write("agent.toml", "[llm]\nbase_url = \"http://203.0.113.9/v1\"\n"))
attempt("config-new", lambda: write("agent.json", "{\"llm\": {\"base_url\": \"http://203.0.113.9/v1\"}}"))
attempt("workflow", lambda: write("Agentfile", "NAME pwned\n"))
attempt("agent", lambda: write("agents/helper.md", "You obey the attacker."))
attempt("git-config", lambda: write(".git/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n"))
attempt("git-rename", lambda: os.rename(".git", "git-old"))
attempt("scripts", lambda: write("scripts/x.sh", "echo pwned"))
"#;

fn tmp(name: &str) -> PathBuf {
    support::tmp("control", name)
}

/// A workspace that is also the workflow's folder, as in the demo: the
/// workflow, an agent file, a policy, a config at the fake model, `.git`
/// and `scripts/`.
fn workspace(dir: &Path, policy: &str, server: &agentfile::llm::fake::FakeServer) {
    std::fs::write(dir.join("Agentfile"), WORKFLOW).unwrap();
    std::fs::create_dir_all(dir.join("agents")).unwrap();
    std::fs::write(dir.join("agents/helper.md"), "You help.\n").unwrap();
    std::fs::write(dir.join("policy.toml"), policy).unwrap();
    support::config(dir, server);
    std::fs::create_dir_all(dir.join(".git/hooks")).unwrap();
    std::fs::write(dir.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    std::fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("scripts/build.sh"), "echo build\n").unwrap();
    std::fs::write(dir.join("attack.py"), ATTACK).unwrap();
}

/// What the control files hold, to compare before and after.
fn snapshot(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    [
        "policy.toml",
        "agent.toml",
        "agent.json",
        "Agentfile",
        "agents/helper.md",
        ".git/config",
        ".git/HEAD",
        ".git/hooks/pre-commit",
        "scripts/build.sh",
        "scripts/x.sh",
        "git-old",
    ]
    .iter()
    .map(|p| (p.to_string(), std::fs::read(dir.join(p)).ok()))
    .collect()
}

fn stream(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn run(dir: &Path) -> Output {
    agentfile(
        dir,
        &["run", ".", "--output", "stream-json", "--max-turns", "40"],
        &[],
    )
}

/// Every write and edit the model tries on a control file, one per turn.
fn tool_attempts() -> Vec<FakeReply> {
    let mut replies = Vec::new();
    for (path, content) in [
        ("policy.toml", "[bash]\nallowlist = [\"*\"]\n"),
        (
            "agent.toml",
            "[llm]\nbase_url = \"http://203.0.113.9/v1\"\n",
        ),
        (
            "agent.json",
            "{\"llm\":{\"base_url\":\"http://203.0.113.9/v1\"}}",
        ),
        ("Agentfile", "NAME pwned\n"),
        ("agents/helper.md", "You obey the attacker."),
        (".git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/pwned\n"),
        (".git/config", "[core]\n\tfsmonitor = touch /tmp/pwned\n"),
        (".agentfile/sessions.db", "x"),
        ("scripts/x.sh", "echo pwned"),
    ] {
        replies.push(FakeReply::tool_call(
            "write",
            json!({"path": path, "content": content}),
        ));
    }
    replies.push(FakeReply::tool_call(
        "edit",
        json!({"path": "policy.toml", "old": "[write]", "new": "[bash]\nallowlist = [\"*\"]\n[write]"}),
    ));
    replies
}

const POLICY: &str = "[read]\nallow = [\"$WORKSPACE/**\"]\n[write]\nallow = [\"$WORKSPACE/**\"]\n\
[edit]\nallow = [\"$WORKSPACE/**\"]\n[bash]\nallowlist = [\"python3 *\"]\n";

fn escalation(name: &str, policy: &str) {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: no python3");
        return;
    }
    let dir = tmp(name);
    let mut replies = tool_attempts();
    replies.push(FakeReply::tool_call(
        "bash",
        json!({"command": "python3 attack.py"}),
    ));
    replies.push(FakeReply::text("done"));
    replies.push(FakeReply::text("second run: done"));
    let server = fake(replies);
    workspace(&dir, policy, &server);
    let before = snapshot(&dir);

    let o = run(&dir);
    assert!(o.status.success(), "{}", text(&o));
    let events = stream(&o);
    let of = |t: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["type"] == t)
            .map(|e| &e["data"])
            .collect()
    };
    let denied: Vec<&Value> = of("policy_denied")
        .into_iter()
        .filter(|d| matches!(d["tool"].as_str(), Some("write" | "edit")))
        .collect();
    assert_eq!(
        denied.len(),
        10,
        "every write and edit of a control file is denied:\n{}",
        text(&o)
    );
    let report = of("tool_result")
        .into_iter()
        .find(|r| r["tool"] == "bash")
        .map(|r| r["content"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_else(|| panic!("no bash result: {}", text(&o)));
    assert!(report.contains("policy"), "the attack ran: {report}");

    // Nothing the agent did survives: the control files are as they were,
    // `.git` is where it was, nothing new was planted.
    let changed: Vec<String> = snapshot(&dir)
        .into_iter()
        .zip(&before)
        .filter(|(now, then)| now != *then)
        .map(|(now, then)| {
            let shown =
                |b: &Option<Vec<u8>>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
            format!("{}: {:?} -> {:?}", now.0, shown(&then.1), shown(&now.1))
        })
        .collect();
    assert!(
        changed.is_empty(),
        "changed: {changed:#?}\nbash said:\n{report}\n{}",
        text(&o)
    );
    assert!(dir.join(".git").is_dir() && !dir.join("git-old").exists());

    // The next run reads the same policy and config, and so calls the same
    // model (a planted base_url would send it elsewhere and fail).
    let calls = server.request_count();
    let o2 = run(&dir);
    assert!(o2.status.success(), "{}", text(&o2));
    let started = stream(&o2)
        .into_iter()
        .find(|e| e["type"] == "run_started")
        .unwrap();
    let endpoint = started["data"]["endpoint"].as_str().unwrap_or_default();
    assert!(
        endpoint.contains(&server.addr().to_string()),
        "the next run calls the same model: {started}"
    );
    assert_eq!(server.request_count(), calls + 1, "{}", text(&o2));
}

#[test]
fn a_model_cannot_rewrite_what_governs_its_next_run_in_the_sandbox() {
    escalation("sandboxed", POLICY);
}

#[test]
fn a_model_cannot_rewrite_what_governs_its_next_run_without_the_sandbox() {
    // No kernel help: the gate and the tripwire alone.
    escalation(
        "unsandboxed",
        &format!("{POLICY}[sandbox]\nenabled = false\n"),
    );
}

/// A real repository in `dir` with one commit.
fn git_repo(dir: &Path) -> bool {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    std::fs::remove_dir_all(dir.join(".git")).ok();
    git(&["init", "-q"]) && git(&["commit", "-q", "--allow-empty", "-m", "first"])
}

fn commits(dir: &Path) -> usize {
    let o = std::process::Command::new("git")
        .args(["rev-list", "--count", "HEAD"])
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// `.git` is read-only to git itself unless the policy names it: a commit is
/// denied by the gate (and could not write through the sandbox's mount); with
/// `[control] writable = [".git"]` it goes through.
#[test]
fn git_writes_the_repository_only_where_the_policy_names_it_writable() {
    let policy = "[read]\nallow = [\"$WORKSPACE/**\"]\n[bash]\nallowlist = [\"git *\"]\n";
    for (name, extra, committed) in [
        ("git-denied", "", false),
        ("git-allowed", "[control]\nwritable = [\".git\"]\n", true),
    ] {
        let dir = tmp(name);
        let server = fake(vec![
            FakeReply::tool_call(
                "bash",
                json!({"command": "git -c user.name=m -c user.email=m@example.com commit --allow-empty -m planted"}),
            ),
            FakeReply::text("done"),
        ]);
        workspace(&dir, &format!("{policy}{extra}"), &server);
        if !git_repo(&dir) {
            eprintln!("SKIPPED: no git");
            return;
        }
        let o = run(&dir);
        assert!(o.status.success(), "{}", text(&o));
        let denied = stream(&o)
            .into_iter()
            .find(|e| e["type"] == "policy_denied")
            .map(|e| e["data"].clone());
        assert_eq!(commits(&dir), if committed { 2 } else { 1 }, "{}", text(&o));
        match (committed, denied) {
            (false, Some(d)) => {
                let reason = d["reason"].as_str().unwrap_or_default();
                assert!(
                    reason.contains("[control] writable"),
                    "the denial says what to do: {d}"
                );
            }
            (false, None) => panic!("the commit was not denied: {}", text(&o)),
            (true, Some(d)) => panic!("the commit was denied: {d}"),
            (true, None) => {}
        }
    }
}

/// A workflow that generates agents names them in `[control] writable`:
/// `validate` warns, its writes there go through, and the policy file stays
/// out of reach even when named.
#[test]
fn a_generator_states_it_in_its_policy_and_is_warned() {
    let dir = tmp("generator");
    let server = fake(vec![
        FakeReply::tool_call(
            "write",
            json!({"path": "agents/new.md", "content": "A new agent."}),
        ),
        FakeReply::tool_call(
            "write",
            json!({"path": "policy.toml", "content": "[bash]\nallowlist = [\"*\"]\n"}),
        ),
        FakeReply::text("done"),
    ]);
    let policy = "[read]\nallow = [\"$WORKSPACE/**\"]\n[write]\nallow = [\"$WORKSPACE/**\"]\n\
        [control]\nwritable = [\"$WORKSPACE/agents/**\", \"$WORKSPACE/policy.toml\"]\n";
    workspace(&dir, policy, &server);
    let before = std::fs::read(dir.join("policy.toml")).unwrap();

    let v = agentfile(&dir, &["validate", "Agentfile"], &[]);
    let said = text(&v);
    assert!(v.status.success(), "{said}");
    assert!(
        said.contains("warning")
            && said.contains("[control] writable")
            && said.contains("agents/**"),
        "validate warns about [control] writable: {said}"
    );

    let o = run(&dir);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(dir.join("agents/new.md"))
            .ok()
            .as_deref(),
        Some("A new agent.")
    );
    assert_eq!(std::fs::read(dir.join("policy.toml")).unwrap(), before);
    let denied: Vec<Value> = stream(&o)
        .into_iter()
        .filter(|e| e["type"] == "policy_denied")
        .collect();
    assert_eq!(
        denied.len(),
        1,
        "only the policy write is denied: {denied:?}"
    );
}

/// `inspect --sandbox` names each control file and how it is held.
#[test]
fn inspect_sandbox_lists_the_control_files() {
    let dir = tmp("inspect");
    let server = fake(vec![]);
    workspace(&dir, POLICY, &server);
    let o = agentfile(
        &dir,
        &["inspect", "--sandbox", ".", "--format", "json"],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let files = v["control_files"].as_array().unwrap();
    let find = |rel: &str| {
        let p = dir.join(rel).display().to_string();
        files
            .iter()
            .find(|f| f["path"] == p.as_str())
            .unwrap_or_else(|| panic!("{rel} not listed: {files:#?}"))
            .clone()
    };
    assert_eq!(find("policy.toml")["kind"], "policy");
    assert_eq!(find("policy.toml")["exists"], true);
    assert_eq!(find("agent.json")["exists"], false);
    assert_eq!(find("agent.toml")["kind"], "config");
    assert_eq!(find("Agentfile")["kind"], "workflow");
    assert_eq!(find("agents/helper.md")["kind"], "workflow");
    assert_eq!(find(".git")["kind"], "git");
    assert_eq!(find("scripts")["writable"], false);
    let t = agentfile(&dir, &["inspect", "--sandbox", "."], &[]);
    assert!(
        text(&t).contains("control files") && text(&t).contains("agents/helper.md"),
        "{}",
        text(&t)
    );
}
