//! The built-in tools through the toolbox, as the executor calls them: file
//! tools, bash (timeouts, process groups, output caps, `[bash]` resource
//! limits), memory, the safe default policy, and errors as results.
//!
//! Tests that feed a tool something huge (a 1.5 GiB line, a 200 MiB line, a
//! command that writes without end) run again in a child of this binary under
//! an address-space limit ([`in_child_under_memory_limit`]), so a regression
//! fails the test rather than exhausting the machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentfile_config::Config;
use agentfile_tools::policy::Policy;
use agentfile_tools::{MemoryStore, ToolContext, ToolSet, Toolbox, ToolboxOptions};
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

/// Set in the child [`in_child_under_memory_limit`] starts.
const CHILD_VAR: &str = "AGENTFILE_TOOLS_TEST_CHILD";

/// Runs the calling test again, alone, in a child process of this test binary
/// whose address space is limited to `mib` MiB (`ulimit -v`), so that a
/// regression that takes memory in proportion to a hostile input fails the
/// test instead of the machine. Returns `true` in the child, which then does
/// the work; in the parent it checks that the child ran the test and passed,
/// and returns `false`.
fn in_child_under_memory_limit(test: &str, mib: u64) -> bool {
    if std::env::var_os(CHILD_VAR).is_some() {
        return true;
    }
    // The child's files go to a folder of the parent's, removed here whatever
    // became of the child (an aborted child runs no destructors).
    let scratch = Ws::new();
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -v {} && exec \"$0\" --exact {} --nocapture --test-threads=1",
            mib * 1024,
            crate::test_name(module_path!(), test)
        ))
        .arg(exe)
        .env(CHILD_VAR, "1")
        .env("TMPDIR", &scratch.root)
        // glibc reserves 64 MiB of address space per malloc arena; two keep
        // the child's baseline small and the same on any number of cores.
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .unwrap();
    drop(scratch);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{test} under a {mib} MiB address-space limit: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    false
}

/// A file of `len` bytes: `head` written, the rest a hole (no disk used).
fn sparse_file(path: &Path, head: &[u8], len: u64) {
    let f = std::fs::File::create(path).unwrap();
    use std::io::Write;
    (&f).write_all(head).unwrap();
    f.set_len(len).unwrap();
}

/// A file of `lines`, each `len` bytes of text plus `\n`, written in pieces.
fn long_lines_file(path: &Path, lines: &[(&str, u64)]) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let block = vec![b'x'; 1 << 20];
    for (text, len) in lines {
        f.write_all(text.as_bytes()).unwrap();
        let mut left = len - text.len() as u64;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            f.write_all(&block[..n]).unwrap();
            left -= n as u64;
        }
        f.write_all(b"\n").unwrap();
    }
    f.flush().unwrap();
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
    assert!(r.output.content.len() <= 1000, "{}", r.output.content.len());
    assert!(
        r.output
            .content
            .contains(&format!("which has {} bytes in all", big.len())),
        "{}",
        r.output.content
    );
    let r = tb
        .call("bash", json!({"command": "seq 1 100000"}), &c)
        .await;
    assert!(r.output.content.len() <= 1000, "{}", r.output.content.len());
    assert!(
        r.output
            .content
            .contains("[stdout: 575.1 KiB in all (588895 bytes); only the first "),
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

/// Whether any process on this machine runs `sleep ARG` (the background
/// job's pid as the tool saw it is of its sandbox's PID namespace, so jobs
/// are told apart by a duration of their own).
fn sleeping(arg: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            return false;
        };
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|w| w == arg.as_bytes()))
            && !gone(pid)
    })
}

async fn wait_no_sleeper(arg: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if !sleeping(arg) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A sleep duration no other process uses.
fn unique_sleep() -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    format!(
        "300.{}{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_whole_process_group() {
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let bg = unique_sleep();
    let started = Instant::now();
    let r = tb
        .call(
            "bash",
            json!({"command": format!("sleep {bg} & echo bg=$!; sleep 300"), "timeout": 1}),
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
    assert!(
        wait_no_sleeper(&bg).await,
        "background process `sleep {bg}` survived the timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_kills_the_whole_process_group() {
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let c = ws.ctx();
    let bg = unique_sleep();
    let cancel = c.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let r = tb
        .call(
            "bash",
            json!({"command": format!("sleep {bg} & echo bg=$!; sleep 300")}),
            &c,
        )
        .await;
    assert!(
        r.output.is_error && r.output.content.starts_with("cancelled"),
        "{}",
        r.output.content
    );
    assert!(
        wait_no_sleeper(&bg).await,
        "background process `sleep {bg}` survived cancellation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_jobs_do_not_outlive_the_call() {
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let bg = unique_sleep();
    let r = tb
        .call(
            "bash",
            json!({"command": format!("sleep {bg} > /dev/null 2>&1 & echo bg=$!")}),
            &ws.ctx(),
        )
        .await;
    assert!(
        r.output.content.starts_with("exit code: 0"),
        "{}",
        r.output.content
    );
    assert!(
        wait_no_sleeper(&bg).await,
        "background process `sleep {bg}` outlived the call"
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
    let reference = crate::repo().join("../shared/reference");
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

/// The address space the memory-limited tests run in. The test process
/// itself needs about a third of it (measured with `VmPeak`); the rest is
/// far less than any of the hostile inputs below.
const CHILD_MIB: u64 = 384;

/// A tokio runtime for the tests that first re-run themselves in a child.
fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn read_of_a_line_far_larger_than_the_cap_takes_the_cap_not_the_line() {
    if !in_child_under_memory_limit(
        "read_of_a_line_far_larger_than_the_cap_takes_the_cap_not_the_line",
        CHILD_MIB,
    ) {
        return;
    }
    // One 512 MiB line: 8 KiB of text, then a hole, which reads as NULs but
    // costs no disk. Holding it once would need more than the whole limit,
    // the binary and the stacks aside.
    let ws = Ws::new();
    let len: u64 = 1 << 29;
    sparse_file(&ws.path("huge.txt"), &[b'a'; 8192], len);
    let tb = toolbox(&ws, OPEN_POLICY);
    let c = ws.ctx();
    let cap = ToolboxOptions::default().max_result_bytes;
    for args in [
        json!({"path": "huge.txt", "offset": 1, "limit": 1}),
        json!({"path": "huge.txt"}),
    ] {
        let r = tb.call("read", args.clone(), &c).await_blocking();
        let out = &r.output.content;
        assert!(!r.output.is_error, "{args}: {out}");
        assert!(out.len() <= cap, "{args}: {} bytes", out.len());
        assert!(out.starts_with("aaaa"), "{args}");
        assert!(
            out.contains(&format!("the file has {len} bytes in all"))
                && out.contains("read again with offset=2"),
            "{args}: {}",
            &out[out.len() - 300..]
        );
    }
    // Going on after the line skips it in chunks.
    let r = tb
        .call("read", json!({"path": "huge.txt", "offset": 2}), &c)
        .await_blocking();
    assert_eq!(
        r.output.content, "`huge.txt` has 1 lines; nothing at offset 2",
        "{:?}",
        r.output
    );
}

/// Drive a future to completion on a fresh runtime (the memory-limited tests
/// are plain `#[test]`s, since they first re-run themselves in a child).
trait AwaitBlocking: std::future::Future + Sized {
    fn await_blocking(self) -> Self::Output {
        rt().block_on(self)
    }
}
impl<F: std::future::Future> AwaitBlocking for F {}

#[test]
fn grep_of_a_line_far_larger_than_the_cap_takes_the_cap_not_the_line() {
    if !in_child_under_memory_limit(
        "grep_of_a_line_far_larger_than_the_cap_takes_the_cap_not_the_line",
        CHILD_MIB,
    ) {
        return;
    }
    // A 200 MiB line (200 times the default 1 MiB line cap) between two short
    // ones; grep-searcher alone would grow its buffer past 256 MiB for it.
    let ws = Ws::new();
    long_lines_file(
        &ws.path("min.js"),
        &[
            ("first needle", 12),
            ("needle at the start of a long line ", 200 << 20),
            ("last needle", 11),
        ],
    );
    let tb = toolbox(&ws, OPEN_POLICY);
    let r = tb
        .call(
            "grep",
            json!({"pattern": "needle", "path": "min.js"}),
            &ws.ctx(),
        )
        .await_blocking();
    let out = &r.output.content;
    assert!(!r.output.is_error, "{out}");
    assert!(
        out.starts_with("min.js:1:first needle\nmin.js:2:needle at the start"),
        "{out}"
    );
    assert!(
        out.contains("min.js:3:last needle"),
        "line numbers survive the cut: {out}"
    );
    assert!(
        out.contains("[1 lines longer than 1 MiB were searched only in their first 1 MiB (the line cap), in `min.js`]"),
        "{out}"
    );
}

#[test]
fn grep_caps_are_configurable_and_say_what_they_skipped() {
    if !in_child_under_memory_limit(
        "grep_caps_are_configurable_and_say_what_they_skipped",
        CHILD_MIB,
    ) {
        return;
    }
    let ws = Ws::new();
    // The same shapes as above at a thousandth of the size, under caps a
    // thousand times smaller.
    long_lines_file(
        &ws.path("a.txt"),
        &[("needle early", 800), ("late needle", 200 << 10)],
    );
    let b = format!("{}\n", "y".repeat(80)).repeat(100) + "needle after the file cap\n";
    std::fs::write(ws.path("b.txt"), b).unwrap();
    std::fs::write(
        ws.path("c.txt"),
        format!("{}needle past the line cap\n", "z".repeat(3000)),
    )
    .unwrap();
    let options = ToolboxOptions {
        grep_max_line_bytes: 1024,
        grep_max_file_bytes: 4096 + 1024,
        ..ToolboxOptions::default()
    };
    let tb = toolbox_with(&ws, OPEN_POLICY, options);
    let c = ws.ctx();
    let grep = |pattern: &str| {
        tb.call("grep", json!({"pattern": pattern, "glob": "*.txt"}), &c)
            .await_blocking()
            .output
            .content
    };
    let out = grep("needle");
    assert!(out.starts_with("a.txt:1:needle early"), "{out}");
    assert!(out.contains("a.txt:2:late needle"), "{out}");
    assert!(!out.contains("past the line cap"), "{out}");
    assert!(!out.contains("after the file cap"), "{out}");
    assert!(
        out.contains("[2 lines longer than 1 KiB were searched only in their first 1 KiB (the line cap), in `a.txt`, `c.txt`]"),
        "{out}"
    );
    assert!(
        out.contains("[2 files were searched only in their first 5 KiB (the per-file cap): `a.txt` (200.8 KiB), `b.txt` (7.9 KiB)"),
        "{out}"
    );
}

#[test]
fn truncation_notes_state_the_true_size_and_are_never_cut() {
    if !in_child_under_memory_limit(
        "truncation_notes_state_the_true_size_and_are_never_cut",
        CHILD_MIB,
    ) {
        return;
    }
    let ws = Ws::new();
    let tb = toolbox(&ws, OPEN_POLICY);
    let c = ws.ctx();
    let cap = ToolboxOptions::default().max_result_bytes;

    let r = tb
        .call("bash", json!({"command": "yes | head -c 3000000"}), &c)
        .await_blocking();
    let out = &r.output.content;
    assert!(out.len() <= cap, "{}", out.len());
    assert!(
        out.starts_with("exit code: 0\n--- stdout ---\ny\ny\n"),
        "{}",
        &out[..40]
    );
    assert!(
        out.contains("\n[stdout: 2.9 MiB in all (3000000 bytes); only the first ")
            && out.ends_with(" bytes are shown]"),
        "{}",
        &out[out.len() - 200..]
    );

    let r = tb
        .call(
            "bash",
            json!({"command": "yes out | head -c 300000; yes err | head -c 200000 >&2"}),
            &c,
        )
        .await_blocking();
    let out = &r.output.content;
    assert!(out.len() <= cap, "{}", out.len());
    assert!(
        out.contains("[stdout: 293.0 KiB in all (300000 bytes);"),
        "{out}"
    );
    assert!(
        out.contains("[stderr: 195.3 KiB in all (200000 bytes);"),
        "{out}"
    );

    let text: String = (0..200_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(ws.path("big.txt"), &text).unwrap();
    let r = tb
        .call("read", json!({"path": "big.txt"}), &c)
        .await_blocking();
    let out = &r.output.content;
    assert!(out.len() <= cap, "{}", out.len());
    let shown_lines = out.lines().filter(|l| l.starts_with("line ")).count();
    assert!(
        out.ends_with(&format!(
            "which has {} bytes in all; the answer is capped at 64 KiB; more lines follow: read again with offset={} to continue]",
            text.len(),
            shown_lines + 1
        )),
        "{}",
        &out[out.len() - 300..]
    );

    let r = tb
        .call("grep", json!({"pattern": "line", "path": "big.txt"}), &c)
        .await_blocking();
    let out = &r.output.content;
    assert!(out.len() <= cap, "{}", out.len());
    assert!(
        out.contains("[output stopped at the 64 KiB cap after ")
            && out.ends_with("more may follow: narrow the search with path or glob]"),
        "{}",
        &out[out.len() - 300..]
    );
}

fn config_with_bash(edit: impl FnOnce(&mut agentfile_config::BashSection)) -> Config {
    let mut config = Config::default();
    edit(&mut config.bash);
    config
}

#[test]
fn bash_file_size_limit_stops_a_disk_filler_and_says_so() {
    if !in_child_under_memory_limit(
        "bash_file_size_limit_stops_a_disk_filler_and_says_so",
        CHILD_MIB,
    ) {
        return;
    }
    let ws = Ws::new();
    let config = config_with_bash(|b| b.max_file_bytes = 64 * 1024);
    let policy = Policy::parse(OPEN_POLICY, Path::new("policy.toml")).unwrap();
    let tb = Toolbox::new(&config, policy, &ws.root, MemoryStore::in_memory().unwrap()).unwrap();
    let c = ws.ctx();
    // Bounded writers (10 MB), so that without the limit the test fails
    // instead of filling the disk.
    for command in [
        "yes | head -c 10000000 > out.txt",
        "seq 1 2000000 > out.txt",
        "seq 1 2000000 > out.txt; echo went on",
        "python3 -c 'import signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); open(\"out.txt\", \"w\").write(\"x\" * 10**7)'",
    ] {
        let _ = std::fs::remove_file(ws.path("out.txt"));
        let r = tb
            .call("bash", json!({"command": command}), &c)
            .await_blocking();
        let out = &r.output.content;
        assert!(
            out.contains("the command hit the 64 KiB file-size limit ([bash] max_file_bytes)"),
            "{command}: {out}"
        );
        assert!(r.output.is_error, "{command}: {out}");
        let written = std::fs::metadata(ws.path("out.txt")).unwrap().len();
        assert!(written <= 64 * 1024, "{command}: {written} bytes written");
    }
    // Under the limit nothing is said.
    let r = tb
        .call("bash", json!({"command": "seq 1 100 > small.txt"}), &c)
        .await_blocking();
    assert_eq!(r.output.content, "exit code: 0");
    assert!(!r.output.is_error);
}

#[test]
fn bash_cpu_limit_stops_a_spinner_and_says_so() {
    if !in_child_under_memory_limit("bash_cpu_limit_stops_a_spinner_and_says_so", CHILD_MIB) {
        return;
    }
    let ws = Ws::new();
    let config = config_with_bash(|b| b.max_cpu_seconds = 1);
    let policy = Policy::parse(OPEN_POLICY, Path::new("policy.toml")).unwrap();
    let tb = Toolbox::new(&config, policy, &ws.root, MemoryStore::in_memory().unwrap()).unwrap();
    let started = Instant::now();
    let r = tb
        .call(
            "bash",
            json!({"command": "while :; do :; done", "timeout": 30}),
            &ws.ctx(),
        )
        .await_blocking();
    let out = &r.output.content;
    assert!(
        out.contains("the command hit the 1 s CPU-time limit ([bash] max_cpu_seconds)"),
        "{out}"
    );
    assert!(r.output.is_error);
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
}
