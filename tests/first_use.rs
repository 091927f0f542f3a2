//! What a new user meets first, end to end through the real binary against the
//! loopback fake provider: provider and endpoint selection, one-shot runs
//! (`--goal`, `run -`, `--allow`), and the live display on a real terminal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("agentfile-first-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fake(replies: Vec<FakeReply>) -> (tokio::runtime::Runtime, FakeServer) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(replies)).unwrap();
    (rt, server)
}

/// The binary with a clean provider environment (no inherited AGENTFILE_*).
fn agentfile(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.current_dir(cwd).env("NO_COLOR", "1");
    for (k, _) in std::env::vars() {
        if k.starts_with("AGENTFILE_") {
            c.env_remove(k);
        }
    }
    c
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

const ONE_GOAL: &str = "NAME hello\nGOAL greet \"Say hello\"\nRUN main USING greet\n";

#[test]
fn a_provider_switch_keeps_the_configured_endpoint_and_the_header_names_it() {
    let (_rt, server) = fake(vec![FakeReply::text("hello from gemini format")]);
    let dir = tmp("switch");
    std::fs::write(dir.join("Agentfile"), ONE_GOAL).unwrap();
    // The endpoint comes from the environment, as for a local server.
    let o = agentfile(&dir)
        .args([
            "run",
            "Agentfile",
            "--provider",
            "gemini",
            "--model",
            "gemini-2.5-flash",
            "--output",
            "json",
        ])
        .env("AGENTFILE_BASE_URL", server.base_url())
        .env("GEMINI_API_KEY", "test-key-0123456789")
        .output()
        .unwrap();
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["outputs"]["greet"], "hello from gemini format");
    assert!(
        server.requests()[0]
            .path
            .ends_with(":streamGenerateContent")
            || server.requests()[0].path.contains("generateContent"),
        "{:?}",
        server.requests()[0].path
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("gemini/gemini-2.5-flash at {}", server.base_url())),
        "{err}"
    );
}

#[test]
fn base_url_flag_points_a_provider_at_a_server() {
    let (_rt, server) = fake(vec![FakeReply::text("hi")]);
    let dir = tmp("base-url");
    std::fs::write(dir.join("Agentfile"), ONE_GOAL).unwrap();
    let o = agentfile(&dir)
        .args([
            "run",
            "Agentfile",
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
            "--base-url",
            &server.base_url(),
            "--output",
            "stream-json",
        ])
        .env("OPENAI_API_KEY", "test-key-0123456789")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let first: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "run_started");
    assert_eq!(first["data"]["endpoint"], json!(server.base_url()));
    assert!(o.status.success(), "{stdout}");
}
