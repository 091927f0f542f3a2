//! What the end-to-end suites of the file formats share: a scratch folder, a
//! config pointing at the fake model, the built binary run in a folder, and
//! reading its result and its session's events back.
#![allow(dead_code)] // each suite uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::Value;

/// The environment variable the test configs name for the API key.
pub const KEY_VAR: &str = "AGENTFILE_TEST_KEY";

/// The checkout's root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh, empty folder `agentfile-<suite>-<name>-<pid>` under the system's
/// temporary folder, canonical.
pub fn tmp(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("agentfile-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.canonicalize().unwrap()
}

/// `agent.toml` in `dir`: the OpenAI dialect at the fake model `server`.
pub fn config(dir: &Path, server: &FakeServer) {
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n",
            server.base_url()
        ),
    )
    .unwrap();
}

/// The built binary with `args`, run in `dir` with no standard input, the
/// test key set, colours off, and the variables the suites' workflows read
/// cleared unless `env` sets them.
pub fn agentfile(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .env(KEY_VAR, "test-key-0123456789")
        .env("NO_COLOR", "1");
    for var in ["RUST_LOG", "INPUT_PATH", "CHANGES", "AGENTFILE_TEST_ABSENT"] {
        c.env_remove(var);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Standard output then standard error, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Standard output as the run's JSON result.
pub fn result_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not a result ({e}):\n{}", text(o)))
}

/// The session's events, as stored (`sessions show --format json`).
pub fn events(dir: &Path, session: &str) -> Vec<Value> {
    let o = agentfile(dir, &["sessions", "show", session, "--format", "json"], &[]);
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    v["events"].as_array().unwrap().clone()
}

/// One runtime per test process for the fake model's server.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Runtime::new().unwrap())
}

/// The fake model on loopback, answering with `replies`.
pub fn fake(replies: Vec<FakeReply>) -> FakeServer {
    runtime().block_on(FakeServer::start(replies)).unwrap()
}
