//! What a new user meets first, end to end through the real binary against the
//! loopback fake provider: provider and endpoint selection, one-shot runs
//! (`--goal`, `run -`, `--allow`), and the live display on a real terminal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};

fn tmp(name: &str) -> PathBuf {
    crate::support::tmp("first", name)
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

/// A workflow whose model streams three lines, runs a slow command, then ends.
fn live_script() -> Vec<FakeReply> {
    vec![
        FakeReply {
            text: Some("Looking around.\nFirst I will wait a little.\nThen report.\n".into()),
            ..FakeReply::tool_call("bash", json!({"command": "sleep 1"}))
        }
        .with_chunk_delay(std::time::Duration::from_millis(40)),
        FakeReply::text("All quiet here."),
    ]
}

fn live_workspace(name: &str, server: &FakeServer) -> PathBuf {
    let dir = tmp(name);
    std::fs::write(dir.join("Agentfile"), ONE_GOAL).unwrap();
    std::fs::write(
        dir.join("policy.toml"),
        "[bash]\nenabled = true\nallowlist = [\"sleep *\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"AGENTFILE_TEST_KEY\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    dir
}

/// Run the binary with stdin, stdout and stderr on a pseudo-terminal and return
/// everything the terminal received.
#[cfg(unix)]
fn on_a_terminal(cmd: &mut Command) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two new descriptors into the out-parameters.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(rc, 0, "openpty failed");
    // SAFETY: both descriptors are fresh and owned here.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let child = cmd
        .env("TERM", "xterm-256color")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    // The builder keeps its copies of the terminal's slave side open; replace
    // them, so the master reads end of file once the child is gone.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut reader = std::fs::File::from(master);
    let collected = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let c = collected.clone();
    let pump = std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        // Ends with EIO once the child and every copy of the slave are gone.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            c.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let mut child = child;
    let status = child.wait().unwrap();
    let _ = pump.join();
    let out = String::from_utf8_lossy(&collected.lock().unwrap()).into_owned();
    (status, out)
}

#[cfg(unix)]
#[test]
fn the_live_display_shows_streamed_text_and_the_running_tool_call_on_a_terminal() {
    let (_rt, server) = fake(live_script());
    let dir = live_workspace("live-tty", &server);
    let mut cmd = agentfile(&dir);
    cmd.args(["run", "Agentfile"])
        .env("AGENTFILE_TEST_KEY", "test-key-0123456789")
        .env_remove("NO_COLOR");
    let (status, screen) = on_a_terminal(&mut cmd);
    assert!(status.success(), "{screen}");
    // The streamed lines, each printed as it completed.
    for line in [
        "Looking around.",
        "First I will wait a little.",
        "Then report.",
    ] {
        assert!(
            screen.contains(&format!("greet │ {line}")),
            "{line}: {screen}"
        );
    }
    // The status area showed the command while it ran, with the counters.
    assert!(screen.contains("⚙ bash"), "{screen}");
    assert!(screen.contains("sleep 1"), "{screen}");
    assert!(screen.contains("tool call"), "{screen}");
    // Drawn in place: cursor movement and line clearing.
    assert!(screen.contains("\x1b["), "{screen:?}");
    // The output, on stdout (the same terminal), at the end.
    assert!(screen.contains("All quiet here."), "{screen}");
}

#[test]
fn without_a_terminal_progress_is_plain_lines() {
    let (_rt, server) = fake(live_script());
    let dir = live_workspace("live-plain", &server);
    let o = agentfile(&dir)
        .args(["run", "Agentfile"])
        .env("AGENTFILE_TEST_KEY", "test-key-0123456789")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains('\x1b'), "no escape sequences: {err:?}");
    assert!(!err.contains('\r'), "no redraws: {err:?}");
    assert!(!err.contains("⚙"), "no status area: {err}");
    assert!(err.contains("bash {\"command\":\"sleep 1\"}"), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "All quiet here.\n");
}

fn fake_config(dir: &Path, server: &FakeServer) {
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"AGENTFILE_TEST_KEY\"\n",
            server.base_url()
        ),
    )
    .unwrap();
}

#[test]
fn a_goal_runs_without_a_workflow_file_with_tools_allowed_on_the_command_line() {
    let (_rt, server) = fake(vec![
        FakeReply::tool_call("ls", json!({"path": "."})),
        FakeReply::text("There is notes.txt."),
    ]);
    let dir = tmp("goal");
    fake_config(&dir, &server);
    std::fs::write(dir.join("notes.txt"), "hi").unwrap();
    // A policy that enables nothing: only --allow makes `ls` possible.
    std::fs::write(dir.join("policy.toml"), "default_deny = true\n").unwrap();
    let o = agentfile(&dir)
        .args([
            "run",
            "--goal",
            "list the files, and say $HOME is not a variable",
            "--allow",
            "ls",
            "--output",
            "json",
        ])
        .env("AGENTFILE_TEST_KEY", "test-key-0123456789")
        .output()
        .unwrap();
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["outputs"]["goal"], "There is notes.txt.");
    let reqs = server.requests();
    let first = reqs[0].body.to_string();
    assert!(
        first.contains("list the files, and say $HOME is not a variable"),
        "{first}"
    );
    let second = reqs[1].body.to_string();
    assert!(second.contains("notes.txt"), "ls ran: {second}");

    // Without --allow the same call is refused by the policy file.
    let (_rt2, server2) = fake(vec![
        FakeReply::tool_call("ls", json!({"path": "."})),
        FakeReply::text("Could not list."),
    ]);
    fake_config(&dir, &server2);
    let o = agentfile(&dir)
        .args(["run", "--goal", "list the files", "--output", "json"])
        .env("AGENTFILE_TEST_KEY", "test-key-0123456789")
        .output()
        .unwrap();
    assert_eq!(result_of(&o)["status"], "completed");
    assert!(!server2.requests()[1].body.to_string().contains("notes.txt"));
}

#[test]
fn allow_is_refused_where_the_policy_file_denies() {
    let dir = tmp("allow-denied");
    std::fs::write(
        dir.join("policy.toml"),
        "[bash]\nenabled = true\nallowlist = [\"ls *\"]\ndenylist = [\"rm *\"]\n",
    )
    .unwrap();
    let (_rt, server) = fake(vec![FakeReply::text("unused")]);
    fake_config(&dir, &server);
    let o = agentfile(&dir)
        .args(["run", "--goal", "clean up", "--allow", "bash:rm -rf *"])
        .env("AGENTFILE_TEST_KEY", "test-key-0123456789")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--allow") && err.contains("rm"), "{err}");
    assert_eq!(server.request_count(), 0, "refused before any model call");
}

#[test]
fn a_workflow_can_come_from_standard_input() {
    let (_rt, server) = fake(vec![FakeReply::text("piped hello")]);
    let dir = tmp("stdin");
    fake_config(&dir, &server);
    let mut child = agentfile(&dir)
        .args(["run", "-", "--input", "who=world", "--output", "json"])
        .env("AGENTFILE_TEST_KEY", "test-key-0123456789")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"NAME piped\nINPUT who\nGOAL hi \"Greet $who\"\nRUN main USING hi\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["outputs"]["hi"], "piped hello");
    assert!(
        server.requests()[0]
            .body
            .to_string()
            .contains("Greet world")
    );

    // Garbage on stdin is a validation error (exit 2) naming where.
    let mut child = agentfile(&dir)
        .args(["run", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"GOAL\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("(stdin):1:"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
