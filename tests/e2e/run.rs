//! `agentfile run` end to end: the real binary, the real tools and policy, a
//! session store on disk, and the fake provider on loopback speaking the OpenAI
//! wire format. The centrepiece runs the seed's TDD workflow
//! (`../shared/reference/headless-agent-v0.1.0/brainstorm`) to completion in a
//! temporary workspace — the model writes a test, a Makefile and the code, runs
//! `make test` through bash, and the loop converges on each of the three
//! conditions in turn.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};

const KEY_VAR: &str = "AGENTFILE_TEST_KEY";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn brainstorm() -> PathBuf {
    let p = repo().join("../shared/reference/headless-agent-v0.1.0/brainstorm");
    assert!(
        p.is_dir(),
        "{} is missing: tests need shared/ beside the checkout",
        p.display()
    );
    p
}

fn tmp(name: &str) -> PathBuf {
    crate::support::tmp("run", name)
}

/// A config pointing the OpenAI provider at the fake server.
fn config(dir: &Path, server: &FakeServer) -> PathBuf {
    let p = dir.join("agent.toml");
    std::fs::write(
        &p,
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    p
}

fn agentfile(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(args)
        .current_dir(cwd)
        .env(KEY_VAR, "test-key-0123456789")
        .env("NO_COLOR", "1")
        .output()
        .expect("run agentfile")
}

fn result_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not a result ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn write(path: &str, content: &str) -> FakeReply {
    FakeReply::tool_call("write", json!({"path": path, "content": content}))
}

fn bash(command: &str) -> FakeReply {
    FakeReply::tool_call("bash", json!({"command": command}))
}

fn text(t: &str) -> FakeReply {
    FakeReply::text(t)
}

const E2E_TEST: &str = "#!/bin/sh\nout=$(sh ./greet.sh World)\n[ \"$out\" = \"Hello, World!\" ] || { echo \"FAIL: got '$out'\"; exit 1; }\necho PASS\n";
const MAKEFILE: &str = "test:\n\tsh tests/e2e/greet_test.sh\n";
const GREET: &str = "#!/bin/sh\necho \"Hello, $1!\"\n";

/// The setup step: analysis by two agents and a synthesis, then the tests.
fn setup() -> Vec<FakeReply> {
    vec![
        text("Creative: greet.sh NAME prints Hello, NAME!"),
        text("Skeptic: watch for a missing argument."),
        text("Summary: a greet.sh script that prints `Hello, NAME!`."),
        write("tests/e2e/greet_test.sh", E2E_TEST),
        text("Wrote the end-to-end test."),
        write("Makefile", MAKEFILE),
        text("Wrote a Makefile whose `test` target runs the tests."),
    ]
}

/// One loop iteration that finds the failure and fixes it.
fn failing_iteration() -> Vec<FakeReply> {
    vec![
        bash("make test"),
        text("The test fails: greet.sh does not exist."),
        text("Creative: create greet.sh."),
        text("Skeptic: quote the argument."),
        text("Create greet.sh printing Hello, $1!"),
        write("greet.sh", GREET),
        text("Created greet.sh."),
    ]
}

fn verify() -> Vec<FakeReply> {
    vec![bash("make test"), text("All end-to-end tests pass.")]
}

fn run_tdd(name: &str, loop_tail: Vec<FakeReply>) -> (Value, FakeServer, PathBuf) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut script = setup();
    script.extend(failing_iteration());
    script.extend(loop_tail);
    script.extend(verify());
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let dir = tmp(name);
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let cfg = config(&dir, &server);
    let o = agentfile(
        &[
            "run",
            brainstorm().join("Agentfile").to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
            "--input",
            "feature_request=a greet.sh script that prints Hello, NAME!",
            "--output",
            "json",
        ],
        &dir,
    );
    let r = result_of(&o);
    assert_eq!(
        r["status"],
        "completed",
        "{r:#}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0));
    // The model's files exist and the code works.
    assert_eq!(std::fs::read_to_string(ws.join("greet.sh")).unwrap(), GREET);
    let check = Command::new("sh")
        .arg("tests/e2e/greet_test.sh")
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    std::mem::forget(rt);
    (r, server, ws)
}

/// The loop's `step_complete` reason, from the session's events.
fn loop_stop(ws: &Path, session: &str) -> String {
    let o = agentfile(&["sessions", "show", session, "--format", "json"], ws);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "step_complete" && e["step"] == "implementation")
        .map(|e| e["data"]["stop"].as_str().unwrap().to_owned())
        .unwrap()
}

#[test]
fn tdd_workflow_converges_explicitly() {
    let (r, server, ws) = run_tdd(
        "tdd-explicit",
        vec![
            bash("make test"),
            FakeReply::tool_call("signal_done", json!({"reason": "PASS"})),
            text("All tests pass."),
        ],
    );
    assert_eq!(
        loop_stop(&ws, r["session_id"].as_str().unwrap()),
        "explicit"
    );
    // `make test` really ran: its failure reached the model after the first run…
    let reqs = server.requests();
    let after_first_run = reqs[8].body.to_string();
    assert!(after_first_run.contains("greet.sh"), "{after_first_run}");
    // …and its success after the fix.
    let after_fix = reqs[15].body.to_string();
    assert!(after_fix.contains("PASS"), "{after_fix}");
    assert_eq!(r["outputs"]["verified"], "All end-to-end tests pass.");
}

#[test]
fn tdd_workflow_converges_when_an_iteration_makes_no_tool_calls() {
    let quiet = vec![
        text("All tests pass now."),
        text("Creative: nothing fails."),
        text("Skeptic: nothing fails."),
        text("No failures to analyze."),
        text("Nothing to fix."),
    ];
    let (r, _, ws) = run_tdd("tdd-notools", quiet);
    assert_eq!(
        loop_stop(&ws, r["session_id"].as_str().unwrap()),
        "no_tool_calls"
    );
}

#[test]
fn tdd_workflow_converges_when_outputs_stop_changing() {
    // The same outputs as the first iteration, with tool calls.
    let same = vec![
        bash("make test"),
        text("The test fails: greet.sh does not exist."),
        text("Creative: create greet.sh."),
        text("Skeptic: quote the argument."),
        text("Create greet.sh printing Hello, $1!"),
        write("greet.sh", GREET),
        text("Created greet.sh."),
    ];
    let (r, _, ws) = run_tdd("tdd-unchanged", same);
    assert_eq!(
        loop_stop(&ws, r["session_id"].as_str().unwrap()),
        "unchanged"
    );
}

/// Ctrl-C (SIGINT) stops a run at once: exit 130, `run_cancelled` stored, and the
/// session resumable.
#[test]
fn stop_signals_cancel_with_their_exit_codes() {
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        cancel_by(signal, code);
    }
}

fn cancel_by(signal: i32, code: i32) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(FakeServer::start(vec![
            FakeReply::text("slow").with_latency(std::time::Duration::from_secs(20)),
        ]))
        .unwrap();
    let dir = tmp(&format!("signal-{signal}"));
    std::fs::write(
        dir.join("Agentfile"),
        "NAME slow\nGOAL g \"Take your time\"\nRUN main USING g\n",
    )
    .unwrap();
    let cfg = config(&dir, &server);
    let child = Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args([
            "run",
            "Agentfile",
            "--config",
            cfg.to_str().unwrap(),
            "--output",
            "json",
        ])
        .current_dir(&dir)
        .env(KEY_VAR, "test-key-0123456789")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the model call is in flight, then interrupt.
    let started = std::time::Instant::now();
    while server.request_count() == 0 && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on a child we own.
    unsafe { libc::kill(child.id() as i32, signal) };
    let o = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "cancellation took {:?}",
        started.elapsed()
    );
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = result_of(&o);
    assert_eq!(r["status"], "cancelled");
    let list = agentfile(&["sessions", "list", "--format", "json"], &dir);
    let sessions: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(sessions[0]["status"], "cancelled");
}

/// A supervised goal in a non-interactive run stops the run (exit 3) and leaves
/// the session waiting; `sessions approve` records the decision and `sessions
/// resume` finishes it without asking the model again for what was done.
#[test]
fn approval_survives_between_processes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(FakeServer::start(vec![
            text("Prepared the release notes."),
            text("Deployed."),
        ]))
        .unwrap();
    let dir = tmp("approve");
    std::fs::write(
        dir.join("Agentfile"),
        "NAME release\nGOAL prepare \"Prepare\"\nGOAL deploy \"Deploy\" SUPERVISED HUMAN\nRUN main USING prepare, deploy\n",
    )
    .unwrap();
    let cfg = config(&dir, &server);
    let cfg = cfg.to_str().unwrap();
    let o = agentfile(
        &["run", "Agentfile", "--config", cfg, "--output", "json"],
        &dir,
    );
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = result_of(&o);
    assert_eq!(r["termination_reason"], "approval_unavailable");
    let id = r["session_id"].as_str().unwrap().to_owned();
    assert_eq!(server.request_count(), 1);

    let list = agentfile(
        &["sessions", "list", "--format", "json", "--config", cfg],
        &dir,
    );
    let sessions: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(sessions[0]["status"], "waiting_approval");

    let a = agentfile(&["sessions", "approve", &id, "--config", cfg], &dir);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let o = agentfile(
        &[
            "sessions", "resume", &id, "--config", cfg, "--output", "json",
        ],
        &dir,
    );
    let r = result_of(&o);
    assert_eq!(
        r["status"],
        "completed",
        "{r:#}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(r["outputs"]["prepare"], "Prepared the release notes.");
    assert_eq!(r["outputs"]["deploy"], "Deployed.");
    assert_eq!(server.request_count(), 2, "`prepare` was not asked again");

    // A second approval is refused: nothing is pending.
    let again = agentfile(&["sessions", "approve", &id, "--config", cfg], &dir);
    assert!(!again.status.success());
}

/// A session remembers its plan's fingerprint: resuming after the workflow
/// changed is refused (exit 2) with what changed, unless `--force-changed`.
#[test]
fn resume_refuses_a_changed_workflow_unless_forced() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(FakeServer::start(vec![
            text("Prepared the release notes."),
            text("Deployed."),
        ]))
        .unwrap();
    let dir = tmp("changed");
    let original = "NAME release\nGOAL prepare \"Prepare\"\nGOAL deploy \"Deploy\" SUPERVISED HUMAN\nRUN main USING prepare, deploy\n";
    std::fs::write(dir.join("Agentfile"), original).unwrap();
    let cfg = config(&dir, &server);
    let cfg = cfg.to_str().unwrap();
    let o = agentfile(
        &["run", "Agentfile", "--config", cfg, "--output", "json"],
        &dir,
    );
    assert_eq!(o.status.code(), Some(3));
    let id = result_of(&o)["session_id"].as_str().unwrap().to_owned();
    let a = agentfile(&["sessions", "approve", &id, "--config", cfg], &dir);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));

    std::fs::write(
        dir.join("Agentfile"),
        original.replace("\"Deploy\"", "\"Deploy to production\""),
    )
    .unwrap();
    let o = agentfile(
        &[
            "sessions", "resume", &id, "--config", cfg, "--output", "json",
        ],
        &dir,
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("goal `deploy` changed"), "{err}");
    assert!(err.contains("--force-changed"), "{err}");
    assert_eq!(server.request_count(), 1, "nothing ran");

    let o = agentfile(
        &[
            "sessions",
            "resume",
            &id,
            "--config",
            cfg,
            "--output",
            "json",
            "--force-changed",
        ],
        &dir,
    );
    let r = result_of(&o);
    assert_eq!(
        r["status"],
        "completed",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(r["outputs"]["deploy"], "Deployed.");
}
