//! The cost of the kernel sandbox (CONTRACT §16): a `true` bash call through
//! the toolbox with and without it, and what a run pays once to set it up.
//! The whole-process figures come from `scripts/bench-sandbox.sh`.
//!
//! Run with `cargo bench --bench sandbox`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use agentfile::config::Config;
use agentfile::tools::confine::ToolSandbox;
use agentfile::tools::policy::{Policy, control};
use agentfile::tools::{MemoryStore, ToolContext, ToolSet, Toolbox};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn main() {
    if let Some(why) = agentfile::tools::confine::unavailable() {
        eprintln!(
            "the sandbox is unavailable here ({why}): the sandboxed figures measure the gated path"
        );
    }
    divan::main();
}

fn workspace() -> &'static PathBuf {
    static WS: OnceLock<PathBuf> = OnceLock::new();
    WS.get_or_init(|| {
        let d =
            std::env::temp_dir().join(format!("agentfile-bench-sandbox-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // The control files of a typical workflow folder, mounted read-only
        // into each sandboxed call.
        for f in ["Agentfile", "policy.toml", "agent.toml", ".git/config"] {
            let p = d.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        std::fs::create_dir_all(d.join(".git/hooks")).unwrap();
        d.canonicalize().unwrap()
    })
}

fn policy(sandbox: bool) -> Policy {
    let text = format!("[bash]\nallowlist = [\"true\"]\n\n[sandbox]\nenabled = {sandbox}\n");
    let mut p = Policy::parse(&text, Path::new("policy.toml")).unwrap();
    // As in a run: its control files held (read-only mounts in the sandbox,
    // the tripwire around every call, in both figures).
    let ws = workspace();
    p.control_for_run(control::control_files(&control::ControlInputs {
        workspace: ws.clone(),
        workflow_dir: ws.clone(),
        cwd: Some(ws.clone()),
        workflow_files: vec![ws.join("Agentfile")],
        ..control::ControlInputs::default()
    }));
    p
}

struct Bench {
    rt: tokio::runtime::Runtime,
    tb: Toolbox,
    cx: ToolContext,
}

fn bench(sandbox: bool) -> Bench {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ws = workspace();
    let memory = MemoryStore::open(&ws.join(".agentfile/sessions.db")).unwrap();
    let tb = rt
        .block_on(async { Toolbox::new(&Config::default(), policy(sandbox), ws, memory).unwrap() });
    let cx = ToolContext {
        workspace: ws.clone(),
        agent_id: "bench".into(),
        cancel: CancellationToken::new(),
    };
    Bench { rt, tb, cx }
}

fn call(b: &Bench) {
    let r =
        b.rt.block_on(b.tb.call("bash", json!({"command": "true"}), &b.cx));
    assert!(
        r.output.content.starts_with("exit code: 0"),
        "{}",
        r.output.content
    );
}

/// `true` through the bash tool, gated only.
#[divan::bench(sample_count = 300)]
fn bash_true_gated(bencher: divan::Bencher) {
    let b = bench(false);
    bencher.bench_local(|| call(&b));
}

/// `true` through the bash tool in the sandbox: namespaces, mounts, Landlock,
/// seccomp, and the three processes of a sandboxed program.
#[divan::bench(sample_count = 300)]
fn bash_true_sandboxed(bencher: divan::Bencher) {
    let b = bench(true);
    assert!(b.tb.tool_sandbox().is_on() || agentfile::tools::confine::unavailable().is_some());
    bencher.bench_local(|| call(&b));
}

/// What a run pays once: the policy's sandbox derived and the Landlock
/// ruleset built (the kernel probe is made once per process, before this).
#[divan::bench(sample_count = 200)]
fn setup_per_run(bencher: divan::Bencher) {
    let ws = workspace();
    let p = policy(true);
    let gate = Arc::new(p.bind(ws, None).unwrap());
    let env: Vec<(String, String)> = Vec::new();
    let _ = agentfile::tools::confine::unavailable();
    bencher.bench_local(|| ToolSandbox::new(&p, gate.clone(), &env, None));
}
