//! The built-in tools through the toolbox, as the executor calls them: file
//! tools, bash (timeouts, process groups, output caps), memory, the safe
//! default policy, and errors as results.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentfile::config::Config;
use agentfile::tools::policy::Policy;
use agentfile::tools::{MemoryStore, ToolContext, ToolSet, Toolbox, ToolboxOptions};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Ws {
    root: PathBuf,
}

impl Ws {
    fn new() -> Ws {
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "agentfile-tools-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("src")).unwrap();
        let root = root.canonicalize().unwrap();
        std::fs::write(root.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
        std::fs::write(
            root.join("src/lib.rs"),
            "pub fn one() {}\npub fn two() {}\n",
        )
        .unwrap();
        Ws { root }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p)
    }

    fn ctx(&self) -> ToolContext {
        ToolContext {
            workspace: self.root.clone(),
            agent_id: "tester".to_owned(),
            cancel: CancellationToken::new(),
        }
    }
}

impl Drop for Ws {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A policy that lets bash run anything structurally sound (no allowlist,
/// default_deny off): these tests are about what the tools do.
const OPEN_POLICY: &str = r#"
default_deny = false
[bash]
enabled = true
denylist = ["sudo *"]
[memory_read]
[memory_write]
"#;

fn toolbox(ws: &Ws, policy: &str) -> Toolbox {
    toolbox_with(ws, policy, ToolboxOptions::default())
}

fn toolbox_with(ws: &Ws, policy: &str, options: ToolboxOptions) -> Toolbox {
    let policy = Policy::parse(policy, Path::new("policy.toml")).unwrap();
    let memory = MemoryStore::in_memory().unwrap();
    Toolbox::with_options(&Config::default(), policy, &ws.root, memory, options).unwrap()
}

#[tokio::test]
async fn read_write_edit() {
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let c = ws.ctx();

    let r = tb.call("read", json!({"path": "notes.txt"}), &c).await;
    assert_eq!(r.output.content, "alpha\nbeta\ngamma\n");
    assert!(!r.output.is_error);
    let r = tb
        .call(
            "read",
            json!({"path": "notes.txt", "offset": 2, "limit": 1}),
            &c,
        )
        .await;
    assert!(
        r.output.content.starts_with("beta\n"),
        "{}",
        r.output.content
    );
    assert!(
        r.output.content.contains("offset=3"),
        "{}",
        r.output.content
    );
    let r = tb.call("read", json!({"path": "missing.txt"}), &c).await;
    assert!(
        r.output.is_error && r.output.content.contains("does not exist"),
        "{:?}",
        r.output
    );
    assert!(r.denied.is_none());
    let r = tb.call("read", json!({"path": "src"}), &c).await;
    assert!(
        r.output.is_error && r.output.content.contains("directory"),
        "{:?}",
        r.output
    );

    let r = tb
        .call(
            "write",
            json!({"path": "deep/er/new.txt", "content": "x\n"}),
            &c,
        )
        .await;
    assert!(!r.output.is_error, "{:?}", r.output);
    assert_eq!(
        std::fs::read_to_string(ws.path("deep/er/new.txt")).unwrap(),
        "x\n"
    );

    let r = tb
        .call(
            "edit",
            json!({"path": "notes.txt", "old": "delta", "new": "x"}),
            &c,
        )
        .await;
    assert!(
        r.output.is_error && r.output.content.contains("not found"),
        "{:?}",
        r.output
    );
    std::fs::write(ws.path("dup.txt"), "a a a").unwrap();
    let r = tb
        .call(
            "edit",
            json!({"path": "dup.txt", "old": "a", "new": "b"}),
            &c,
        )
        .await;
    assert!(
        r.output.is_error && r.output.content.contains("3 times"),
        "{:?}",
        r.output
    );
    let r = tb
        .call(
            "edit",
            json!({"path": "dup.txt", "old": "a", "new": "b", "replace_all": true}),
            &c,
        )
        .await;
    assert!(!r.output.is_error, "{:?}", r.output);
    assert_eq!(
        std::fs::read_to_string(ws.path("dup.txt")).unwrap(),
        "b b b"
    );
    let r = tb
        .call(
            "edit",
            json!({"path": "notes.txt", "old": "beta\n", "new": "BETA\n"}),
            &c,
        )
        .await;
    assert!(!r.output.is_error, "{:?}", r.output);
    assert_eq!(
        std::fs::read_to_string(ws.path("notes.txt")).unwrap(),
        "alpha\nBETA\ngamma\n"
    );
}

#[tokio::test]
async fn results_past_the_cap_are_truncated_with_a_note() {
    let ws = Ws::new();
    let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(ws.path("big.txt"), &big).unwrap();
    let options = ToolboxOptions {
        max_result_bytes: 1000,
        ..ToolboxOptions::default()
    };
    let tb = toolbox_with(&ws, OPEN_POLICY, options);
    let c = ws.ctx();
    let r = tb.call("read", json!({"path": "big.txt"}), &c).await;
    assert!(r.output.content.len() < 1200, "{}", r.output.content.len());
    assert!(
        r.output.content.contains("more bytes"),
        "{}",
        r.output.content
    );
    let r = tb
        .call("bash", json!({"command": "seq 1 100000"}), &c)
        .await;
    assert!(r.output.content.len() < 1200, "{}", r.output.content.len());
    assert!(
        r.output.content.contains("[truncated: "),
        "{}",
        r.output.content
    );
    assert!(
        r.output.content.starts_with("exit code: 0"),
        "{}",
        r.output.content
    );
}

#[tokio::test]
async fn ls_glob_grep() {
    let ws = Ws::new();
    std::fs::write(ws.path(".gitignore"), "ignored.rs\n").unwrap();
    std::fs::write(ws.path("src/ignored.rs"), "pub fn one() {}\n").unwrap();
    std::fs::create_dir_all(ws.path("src/deep")).unwrap();
    std::fs::write(ws.path("src/deep/mod.rs"), "fn three() {}\n").unwrap();
    let tb = toolbox(&ws, OPEN_POLICY);
    let c = ws.ctx();

    let r = tb.call("ls", json!({}), &c).await;
    assert!(
        r.output.content.contains("src/") && r.output.content.contains("notes.txt  (17 bytes)"),
        "{}",
        r.output.content
    );

    let r = tb.call("glob", json!({"pattern": "src/*.rs"}), &c).await;
    assert_eq!(
        r.output.content, "src/lib.rs",
        "one segment only; ignored files skipped"
    );
    let r = tb.call("glob", json!({"pattern": "**/*.rs"}), &c).await;
    assert_eq!(r.output.content, "src/deep/mod.rs\nsrc/lib.rs");
    let r = tb
        .call(
            "glob",
            json!({"pattern": "**/*.rs", "respect_gitignore": false}),
            &c,
        )
        .await;
    assert_eq!(
        r.output.content,
        "src/deep/mod.rs\nsrc/ignored.rs\nsrc/lib.rs"
    );

    let r = tb
        .call("grep", json!({"pattern": "fn (one|three)"}), &c)
        .await;
    assert_eq!(
        r.output.content,
        "src/deep/mod.rs:1:fn three() {}\nsrc/lib.rs:1:pub fn one() {}"
    );
    let r = tb
        .call(
            "grep",
            json!({"pattern": "TWO", "path": "src/lib.rs", "case_insensitive": true, "context": 1}),
            &c,
        )
        .await;
    assert_eq!(
        r.output.content,
        "src/lib.rs-1-pub fn one() {}\nsrc/lib.rs:2:pub fn two() {}"
    );
    let r = tb
        .call("grep", json!({"pattern": "fn", "glob": "mod.rs"}), &c)
        .await;
    assert_eq!(r.output.content, "src/deep/mod.rs:1:fn three() {}");
    let r = tb.call("grep", json!({"pattern": "("}), &c).await;
    assert!(
        r.output.is_error && r.output.content.contains("regular expression"),
        "{:?}",
        r.output
    );
}

#[tokio::test]
async fn bash_runs_in_the_workspace_with_its_exit_code() {
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let r = tb
        .call(
            "bash",
            json!({"command": "pwd; echo err >&2; exit 3"}),
            &ws.ctx(),
        )
        .await;
    assert!(r.denied.is_none());
    assert!(
        !r.output.is_error,
        "a non-zero exit is a result, not an error"
    );
    let expected = format!(
        "exit code: 3\n--- stdout ---\n{}\n--- stderr ---\nerr",
        ws.root.display()
    );
    assert_eq!(r.output.content, expected);
}

/// Whether a process is gone (or a zombie waiting to be reaped).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

async fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn background_pid(output: &str) -> i32 {
    output
        .lines()
        .find_map(|l| l.strip_prefix("bg="))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no bg= line in {output}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_whole_process_group() {
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let started = Instant::now();
    let r = tb
        .call(
            "bash",
            json!({"command": "sleep 300 & echo bg=$!; sleep 300", "timeout": 1}),
            &ws.ctx(),
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the call did not stop"
    );
    assert!(r.output.is_error);
    assert!(
        r.output.content.starts_with("timed out after 1 s"),
        "{}",
        r.output.content
    );
    let pid = background_pid(&r.output.content);
    assert!(
        wait_gone(pid).await,
        "background process {pid} survived the timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_kills_the_whole_process_group() {
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let c = ws.ctx();
    let cancel = c.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let r = tb
        .call(
            "bash",
            json!({"command": "sleep 300 & echo bg=$!; sleep 300"}),
            &c,
        )
        .await;
    assert!(
        r.output.is_error && r.output.content.starts_with("cancelled"),
        "{}",
        r.output.content
    );
    let pid = background_pid(&r.output.content);
    assert!(
        wait_gone(pid).await,
        "background process {pid} survived cancellation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_jobs_do_not_outlive_the_call() {
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let r = tb
        .call(
            "bash",
            json!({"command": "sleep 300 > /dev/null 2>&1 & echo bg=$!"}),
            &ws.ctx(),
        )
        .await;
    assert!(
        r.output.content.starts_with("exit code: 0"),
        "{}",
        r.output.content
    );
    let pid = background_pid(&r.output.content);
    assert!(
        wait_gone(pid).await,
        "background process {pid} outlived the call"
    );
}

#[tokio::test]
async fn memory_persists_per_agent_across_toolboxes() {
    let ws = Ws::new();
    let db = ws.path("state/sessions.db");
    let policy = || Policy::parse(OPEN_POLICY, Path::new("policy.toml")).unwrap();
    let c = ws.ctx();
    {
        let tb = Toolbox::new(
            &Config::default(),
            policy(),
            &ws.root,
            MemoryStore::open(&db).unwrap(),
        )
        .unwrap();
        let r = tb
            .call(
                "memory_write",
                json!({"key": "plan", "value": "step 2"}),
                &c,
            )
            .await;
        assert_eq!(r.output.content, "stored 6 bytes under `plan`");
    }
    let tb = Toolbox::new(
        &Config::default(),
        policy(),
        &ws.root,
        MemoryStore::open(&db).unwrap(),
    )
    .unwrap();
    let r = tb.call("memory_read", json!({"key": "plan"}), &c).await;
    assert_eq!(r.output.content, "step 2");
    let other = ToolContext {
        agent_id: "someone-else".to_owned(),
        ..ws.ctx()
    };
    let r = tb.call("memory_read", json!({"key": "plan"}), &other).await;
    assert!(
        r.output.is_error && r.output.content.contains("nothing is stored"),
        "{:?}",
        r.output
    );
    let r = tb.call("memory_read", json!({"key": "nope"}), &c).await;
    assert!(
        r.output.content.contains("stored keys: plan"),
        "{:?}",
        r.output
    );
}

#[tokio::test]
async fn the_safe_default_keeps_to_the_workspace() {
    let ws = Ws::new();
    let memory = MemoryStore::in_memory().unwrap();
    let tb = Toolbox::new(&Config::default(), Policy::safe_default(), &ws.root, memory).unwrap();
    let names: Vec<String> = tb.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(
        names,
        [
            "read",
            "write",
            "edit",
            "glob",
            "grep",
            "ls",
            "memory_read",
            "memory_write"
        ]
    );
    let c = ws.ctx();
    let r = tb.call("bash", json!({"command": "ls"}), &c).await;
    let d = r.denied.expect("bash is off by default");
    assert_eq!(d.rule, "no policy file: bash is off by default");
    assert!(
        r.output
            .content
            .starts_with("denied by policy (no policy file: bash is off by default)")
    );
    let r = tb.call("read", json!({"path": "../outside.txt"}), &c).await;
    assert_eq!(
        r.denied.map(|d| d.rule).as_deref(),
        Some("no policy file: read is limited to the workspace")
    );
    let r = tb
        .call("web_fetch", json!({"url": "https://example.com/"}), &c)
        .await;
    assert!(r.denied.is_some());
    let r = tb.call("read", json!({"path": "notes.txt"}), &c).await;
    assert!(r.denied.is_none() && !r.output.is_error);
}

#[tokio::test]
async fn tool_errors_are_results() {
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let c = ws.ctx();
    let r = tb.call("raed", json!({"path": "x"}), &c).await;
    assert!(
        r.output.is_error && r.output.content.contains("did you mean `read`"),
        "{:?}",
        r.output
    );
    let r = tb.call("read", json!({"path": 5}), &c).await;
    assert!(
        r.output.is_error && r.output.content.contains("must be a string"),
        "{:?}",
        r.output
    );
    let r = tb.call("read", json!(["x"]), &c).await;
    assert!(r.output.is_error, "{:?}", r.output);
    let r = tb.call("web_search", json!({"query": "rust"}), &c).await;
    assert!(r.output.is_error, "{:?}", r.output);
    let r = tb
        .call("bash", json!({"command": "echo \"unterminated"}), &c)
        .await;
    assert_eq!(
        r.denied.map(|d| d.rule).as_deref(),
        Some("bash: the command cannot be checked")
    );
}

#[test]
fn a_policy_beside_the_workflow_is_used_and_an_invalid_one_stops_everything() {
    let ws = Ws::new();
    std::fs::write(ws.path("Agentfile"), "NAME x\n").unwrap();
    std::fs::write(ws.path("policy.toml"), "[bash]\nallowlist = [\"ls *\"\n").unwrap();
    let e = Policy::load(None, &ws.root).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:2:", ws.path("policy.toml").display())),
        "{e}"
    );
    std::fs::write(
        ws.path("policy.toml"),
        "default_deny = true\n[bash]\nallowlist = [\"ls *\"]\n",
    )
    .unwrap();
    let p = Policy::load(None, &ws.root).unwrap();
    assert_eq!(p.source(), Some(ws.path("policy.toml").as_path()));
}

/// The predecessor's policies load and mean what they say, made safe: the
/// seed-shaped one (`[read]`, default_deny) and the `[tools.read]` one
/// (default_deny = false: the workspace, bash with only a denylist).
#[tokio::test]
async fn reference_policies_behave() {
    let reference = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference");
    assert!(reference.is_dir(), "{} is missing", reference.display());
    let ws = Ws::new();
    let c = ws.ctx();
    let load = |rel: &str| {
        let policy = Policy::from_file(&reference.join(rel)).unwrap();
        Toolbox::new(
            &Config::default(),
            policy,
            &ws.root,
            MemoryStore::in_memory().unwrap(),
        )
        .unwrap()
    };

    let brainstorm = load("headless-agent-v0.1.0/brainstorm/policy.toml");
    let names: Vec<String> = brainstorm
        .definitions()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(
        names,
        [
            "read",
            "write",
            "edit",
            "glob",
            "grep",
            "ls",
            "bash",
            "web_fetch",
            "memory_read",
            "memory_write"
        ]
    );
    let r = brainstorm
        .call("bash", json!({"command": "git log --oneline -1"}), &c)
        .await;
    assert!(r.denied.is_none(), "{:?}", r.denied);
    let r = brainstorm
        .call("bash", json!({"command": "sudo ls"}), &c)
        .await;
    assert_eq!(
        r.denied.map(|d| d.rule).as_deref(),
        Some("bash.denylist \"sudo *\"")
    );
    let r = brainstorm
        .call("bash", json!({"command": "python3 -V"}), &c)
        .await;
    assert_eq!(r.denied.map(|d| d.rule).as_deref(), Some("bash.allowlist"));
    let r = brainstorm
        .call("read", json!({"path": "/etc/hostname"}), &c)
        .await;
    assert_eq!(
        r.denied.map(|d| d.rule).as_deref(),
        Some("default_deny = true")
    );

    let v010 = load("headless-agent-v0.1.0/examples/policy.toml");
    let r = v010
        .call("bash", json!({"command": "python3 -c 'print(1)'"}), &c)
        .await;
    assert!(
        r.denied.is_none(),
        "no allowlist and default_deny = false: {:?}",
        r.denied
    );
    let r = v010
        .call("bash", json!({"command": "rm -rf build"}), &c)
        .await;
    assert_eq!(
        r.denied.map(|d| d.rule).as_deref(),
        Some("tools.bash.denylist \"rm -rf *\"")
    );
    let r = v010
        .call("read", json!({"path": "/etc/hostname"}), &c)
        .await;
    assert_eq!(
        r.denied.map(|d| d.rule).as_deref(),
        Some("tools.read: outside the workspace")
    );

    let head = load("headless-agent-head/examples/policy.toml");
    assert!(
        head.warnings().iter().any(|w| w.contains("[security]")),
        "{:?}",
        head.warnings()
    );
    let r = head
        .call("bash", json!({"command": "chmod 777 notes.txt"}), &c)
        .await;
    assert_eq!(
        r.denied.map(|d| d.rule).as_deref(),
        Some("bash.denylist \"chmod 777 *\"")
    );
}
