//! What the end-to-end suites share: the built binary, scratch folders, the
//! fake model on loopback, a config pointing at it, reading a run's result
//! and its session's events back, and copying a fixture project.
//!
//! Two parts live beside the crates they test and are included here too:
//! [`llm`] (the provider scenarios, `crates/llm/tests/providers/support.rs`)
//! and [`session`] (the three session stores and the throwaway PostgreSQL
//! cluster, `crates/session/tests/stores/support.rs`). [`registry`] is the
//! OCI registry and the outside checkers of signed packages.
#![allow(dead_code)] // each suite uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::Value;

#[path = "../../../crates/llm/tests/providers/support.rs"]
pub mod llm;
#[path = "../../../crates/session/tests/stores/support.rs"]
pub mod session;

/// `nats-server -js`, workers and commands on one NATS and one PostgreSQL
/// database, for the suites that run across processes.
pub mod cluster;
/// `agentfile mcp --http` processes spoken to by raw stateless 2026-07-28
/// requests.
pub mod mcp_http;

/// A real OCI registry on loopback, skopeo and the independent cosign
/// verifier (`tests/oci/verify_cosign.py`), for the package suite.
pub mod registry;

/// The environment variable the test configs name for the API key.
pub const KEY_VAR: &str = "AGENTFILE_TEST_KEY";

/// The checkout's root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The built `agentfile` binary.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agentfile")
}

/// The name libtest knows the test `f` of module `module` (its
/// `module_path!()`) by, for a test that runs one test of this binary again
/// in a child process (`--exact`): the module path without the crate's name.
pub fn test_name(module: &str, f: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{f}"),
        None => f.to_owned(),
    }
}

/// A fresh, empty folder `agentfile-<label>-<pid>-<n>` under the system's
/// temporary folder, canonical, left in place after the test (to look at
/// when one fails) until the next run of this binary removes it (see
/// [`sweep_earlier_runs`]). Every call gets its own: the suites share one
/// process.
pub fn tmp_dir(label: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(sweep_earlier_runs);
    let d = std::env::temp_dir().join(format!(
        "agentfile-{label}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d.canonicalize().unwrap()
}

/// Removes the folders [`tmp_dir`] made in earlier runs: those named
/// `agentfile-<label>-<pid>-<n>` whose process has ended and that nothing
/// touched for a quarter of an hour (a test's own child may make a folder
/// its parent reads after the child ends). A run left a few hundred behind,
/// and nothing else removed them; a run still going (another checkout's)
/// keeps its folders.
fn sweep_earlier_runs() {
    let stale = std::time::Duration::from_secs(15 * 60);
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("agentfile-")) else {
            continue;
        };
        let mut tail = rest.rsplitn(3, '-');
        let (Some(n), Some(pid), Some(_label)) = (tail.next(), tail.next(), tail.next()) else {
            continue;
        };
        let (Ok(_), Ok(pid)) = (n.parse::<u64>(), pid.parse::<u32>()) else {
            continue;
        };
        if pid == me || pid == 0 || pid > i32::MAX as u32 {
            continue;
        }
        // SAFETY: signal 0 sends nothing; it asks whether the process exists.
        let gone = unsafe { libc::kill(pid as i32, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        let untouched = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|e| e > stale));
        if gone && untouched && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// [`tmp_dir`] named for a suite and a test.
pub fn tmp(suite: &str, name: &str) -> PathBuf {
    tmp_dir(&format!("{suite}-{name}"))
}

/// A scratch folder removed when dropped.
pub struct Dir(pub PathBuf);

impl Dir {
    /// A fresh one, as [`tmp_dir`] makes it.
    pub fn new(label: &str) -> Dir {
        Dir(tmp_dir(label))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copy the folder `from` to `to`, recursively, leaving out entries named in
/// `skip` (at any depth).
pub fn copy_dir(from: &Path, to: &Path, skip: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(&name), skip);
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
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
/// An HTTP client for a test. The workspace builds reqwest without a TLS
/// provider of its own, so the binary's (ring) is installed first, as the
/// binary does.
pub fn http() -> reqwest::Client {
    http_builder().build().expect("an HTTP client")
}

/// [`http`]'s builder, for a client with settings of its own.
pub fn http_builder() -> reqwest::ClientBuilder {
    agentfile::llm::install_tls();
    reqwest::Client::builder()
}

/// [`http`], blocking.
pub fn blocking_http() -> reqwest::blocking::Client {
    agentfile::llm::install_tls();
    reqwest::blocking::Client::new()
}

pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Runtime::new().unwrap())
}

/// The fake model on loopback, answering with `replies`.
pub fn fake(replies: Vec<FakeReply>) -> FakeServer {
    runtime().block_on(FakeServer::start(replies)).unwrap()
}

/// One exchange with `agentfile COMMAND` (`serve`, `mcp`) on stdio: `lines`
/// written in order, then the reply with `id` 1 (`Null` if none came).
pub fn stdio_reply(dir: &Path, command: &str, lines: &[String]) -> Value {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(bin())
        .arg(command)
        .current_dir(dir)
        .env(KEY_VAR, "test-key-0123456789")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut reply = Value::Null;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["id"] == 1 {
            reply = v;
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    reply
}
