//! The kernel sandbox of tools (CONTRACT §16), end to end: what a run says
//! about it, what it does where the kernel lacks Landlock, the egress proxy
//! of a command tool, and ordinary work (builds and test suites) inside it.
//! The escape corpus is `crates/tools/tests/tools/sandbox_escapes.rs`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use agentfile::config::Config;
use agentfile::llm::fake::{FakeReply, FakeServer};
use agentfile::tools::policy::Policy;
use agentfile::tools::{MemoryStore, ToolContext, ToolSet, Toolbox, ToolboxOptions};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support;

fn skip() -> bool {
    if let Some(why) = agentfile::tools::confine::unavailable() {
        eprintln!("SKIPPED: the sandbox is unavailable on this machine: {why}");
        return true;
    }
    false
}

fn tmp(name: &str) -> PathBuf {
    let d = support::tmp("sandbox", name);
    std::fs::create_dir_all(d.join("ws")).unwrap();
    std::fs::create_dir_all(d.join("outside")).unwrap();
    d
}

/// A run of one goal whose model calls bash with `command`, then answers.
fn run_bash(dir: &Path, policy: &str, command: &str, env: &[(&str, &str)]) -> (Vec<Value>, Output) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(FakeServer::start(vec![
            FakeReply::tool_call("bash", json!({"command": command})),
            FakeReply::text("done"),
        ]))
        .unwrap();
    support::config(dir, &server);
    std::fs::write(dir.join("policy.toml"), policy).unwrap();
    let (config, policy, ws) = (
        dir.join("agent.toml"),
        dir.join("policy.toml"),
        dir.join("ws"),
    );
    let o = support::agentfile(
        dir,
        &[
            "run",
            "--goal",
            "do it",
            "--config",
            config.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
            "--output",
            "stream-json",
        ],
        env,
    );
    let events = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    drop(server);
    (events, o)
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

const BASH_POLICY: &str = "[bash]\nallowlist = [\"python3 *\"]\n";

#[test]
fn a_run_says_what_is_enforced_and_its_programs_are_held() {
    if skip() {
        return;
    }
    let dir = tmp("held");
    let out = dir.join("outside/escaped.txt");
    let cmd = format!(
        "python3 -c \"open('inside.txt','w').write('ok'); open('{}','w')\"",
        out.display()
    );
    let (events, o) = run_bash(&dir, BASH_POLICY, &cmd, &[]);
    let started = of_type(&events, "run_started");
    assert_eq!(started.len(), 1, "{}", String::from_utf8_lossy(&o.stderr));
    let sb = &started[0]["data"]["sandbox"];
    assert_eq!(sb["enforced"], true, "{sb}");
    assert!(
        sb["fs"].as_str().unwrap().starts_with("landlock (ABI "),
        "{sb}"
    );
    assert_eq!(sb["net"], "none");
    assert!(sb.get("reason").is_none());
    assert!(
        of_type(&events, "warning")
            .iter()
            .all(|w| !w.to_string().contains("sandbox"))
    );
    // The write inside happened; the one outside did not.
    assert_eq!(
        std::fs::read_to_string(dir.join("ws/inside.txt")).unwrap(),
        "ok"
    );
    assert!(!out.exists());
    let result = of_type(&events, "tool_result");
    // Refused by Landlock, or (before Landlock ABI 9, the folder lying in
    // /tmp) not there at all: /tmp is hidden but for the writable folders.
    let content = result[0]["data"]["content"].as_str().unwrap();
    assert!(
        content.contains("PermissionError") || content.contains("FileNotFoundError"),
        "{}",
        result[0]
    );
}

/// A SIGKILLed agentfile takes its tools' processes with it: the relay dies
/// with its parent, init with the relay, and the PID namespace with init.
#[test]
fn a_killed_run_leaves_no_process_behind() {
    if skip() {
        return;
    }
    use std::io::BufRead;
    let dir = tmp("killed");
    let marker = format!("31.{}", std::process::id());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(FakeServer::start(vec![
            FakeReply::tool_call(
                "bash",
                json!({"command": format!("python3 -c \"import subprocess, time; subprocess.Popen(['setsid', 'sleep', '{marker}']); time.sleep(60)\"")}),
            ),
            FakeReply::text("done"),
        ]))
        .unwrap();
    support::config(&dir, &server);
    std::fs::write(dir.join("policy.toml"), BASH_POLICY).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["run", "--goal", "do it", "--config"])
        .arg(dir.join("agent.toml"))
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .arg("--workspace")
        .arg(dir.join("ws"))
        .args(["--output", "stream-json"])
        .env(support::KEY_VAR, "test-key-0123456789")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let sleeping = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|w| w == marker.as_bytes()))
        })
    };
    // Wait for the tool to start its grandchild.
    assert!(lines.any(|l| l.unwrap().contains("\"type\":\"tool_call\"")));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !sleeping() {
        assert!(
            std::time::Instant::now() < deadline,
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sleeping() {
        assert!(
            std::time::Instant::now() < deadline,
            "`sleep {marker}` outlived the killed run"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(server);
}

#[test]
fn without_landlock_the_run_says_so_once_and_tools_run_gated_only() {
    let dir = tmp("no-landlock");
    let (events, o) = run_bash(
        &dir,
        BASH_POLICY,
        "python3 -c \"open('made.txt','w')\"",
        &[("AGENTFILE_SANDBOX_SIMULATE", "no-landlock")],
    );
    let sb = &of_type(&events, "run_started")[0]["data"]["sandbox"];
    assert_eq!(sb["enforced"], false, "{sb}");
    assert!(
        sb["reason"]
            .as_str()
            .unwrap()
            .contains("Landlock is not supported by this kernel (simulated)"),
        "{sb}"
    );
    let notices: Vec<String> = of_type(&events, "warning")
        .iter()
        .map(|w| w["data"]["message"].as_str().unwrap().to_owned())
        .filter(|m| m.starts_with("sandbox: unavailable: "))
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].contains("tools run gated by the policy only"),
        "{}",
        notices[0]
    );
    // The tool ran, gated only.
    assert!(
        dir.join("ws/made.txt").exists(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn without_landlock_a_required_sandbox_refuses_every_program() {
    let dir = tmp("required");
    let policy = format!("{BASH_POLICY}\n[sandbox]\nrequired = true\n");
    let (events, _) = run_bash(
        &dir,
        &policy,
        "python3 -c \"open('made.txt','w')\"",
        &[("AGENTFILE_SANDBOX_SIMULATE", "no-landlock")],
    );
    let notices: Vec<&Value> = of_type(&events, "warning")
        .into_iter()
        .filter(|w| w.to_string().contains("sandbox: unavailable"))
        .collect();
    assert_eq!(notices.len(), 1);
    assert!(
        notices[0]
            .to_string()
            .contains("programs will not be started ([sandbox] required = true)")
    );
    let denied = of_type(&events, "policy_denied");
    assert_eq!(denied.len(), 1, "{events:#?}");
    assert_eq!(denied[0]["data"]["rule"], "[sandbox] required = true");
    assert!(!dir.join("ws/made.txt").exists());

    // `inspect --sandbox` says the same.
    let o = Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["inspect", "--sandbox", "--format", "json", "--policy"])
        .arg(dir.join("policy.toml"))
        .arg("--workspace")
        .arg(dir.join("ws"))
        .env("AGENTFILE_SANDBOX_SIMULATE", "no-landlock")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["enforced"], false);
    assert_eq!(v["simulated"], json!(["no-landlock"]));
    assert!(
        v["when_unavailable"]
            .as_str()
            .unwrap()
            .contains("not started"),
        "{v}"
    );
}

/// A kernel that refuses unprivileged user namespaces (Ubuntu's AppArmor
/// default, many containers), simulated: the sandbox is partial — Landlock
/// for files and TCP, seccomp for UDP — and says so once.
#[test]
fn without_user_namespaces_the_sandbox_is_partial_and_still_holds() {
    if skip() {
        return;
    }
    let dir = tmp("partial");
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "CANARY-PARTIAL").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let out = dir.join("outside/escaped.txt");
    std::fs::write(
        dir.join("ws/check.py"),
        format!(
            "import os, socket\nopen('inside.txt', 'w').write('ok')\nfor name, f in [\n    ('write', lambda: open('{}', 'w')),\n    ('secret', lambda: print(open(os.path.expanduser('~/.ssh/id_ed25519')).read())),\n    ('tcp', lambda: socket.create_connection(('127.0.0.1', {port}), 2)),\n    ('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {}))),\n]:\n    try:\n        f()\n        print(name, 'ESCAPED')\n    except OSError as e:\n        print(name, 'BLOCKED', e)\n",
            out.display(),
            udp.local_addr().unwrap().port()
        ),
    )
    .unwrap();
    let (events, o) = run_bash(
        &dir,
        BASH_POLICY,
        "python3 check.py",
        &[
            ("AGENTFILE_SANDBOX_SIMULATE", "no-userns"),
            ("HOME", home.to_str().unwrap()),
        ],
    );
    let sb = &of_type(&events, "run_started")[0]["data"]["sandbox"];
    assert_eq!(sb["enforced"], true, "{sb}");
    assert!(
        sb["fs"].as_str().unwrap().ends_with(", without namespaces"),
        "{sb}"
    );
    assert_eq!(sb["net"], "no TCP (Landlock), no UDP (seccomp)");
    assert!(
        sb["reason"]
            .as_str()
            .unwrap()
            .starts_with("partial: unprivileged user namespaces are disabled (simulated)"),
        "{sb}"
    );
    let notices: Vec<&Value> = of_type(&events, "warning")
        .into_iter()
        .filter(|w| w.to_string().contains("sandbox: partial"))
        .collect();
    assert_eq!(notices.len(), 1, "{events:#?}");
    let result = of_type(&events, "tool_result");
    let text = result[0]["data"]["content"].as_str().unwrap();
    for what in ["write", "secret", "tcp", "udp"] {
        assert!(
            text.contains(&format!("{what} BLOCKED")),
            "{what}: {text}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(!text.contains("CANARY"), "{text}");
    assert!(!out.exists());
    assert!(listener.accept().is_err(), "the connection was made");
    assert!(
        udp.recv_from(&mut [0u8; 16]).is_err(),
        "the datagram arrived"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("ws/inside.txt")).unwrap(),
        "ok"
    );
}

/// Without namespaces, allowed hosts are still reached only through the
/// proxy, which now listens on this machine's loopback.
#[test]
fn without_user_namespaces_allowed_hosts_go_through_the_proxy() {
    if skip() {
        return;
    }
    let dir = tmp("partial-proxy");
    std::fs::write(dir.join("ws/fetch.py"), FETCH).unwrap();
    let (allowed, allowed_hits) = http_server("hello through the partial proxy");
    let (other, other_hits) = http_server("never");
    let policy = format!(
        "[bash]\nallowlist = [\"python3 *\"]\n[web_fetch]\nallow_domains = [\"127.0.0.1:{allowed}\"]\n"
    );
    let (events, _) = run_bash(
        &dir,
        &policy,
        &format!(
            "python3 fetch.py http://127.0.0.1:{allowed}/; python3 fetch.py http://127.0.0.1:{other}/"
        ),
        &[("AGENTFILE_SANDBOX_SIMULATE", "no-userns")],
    );
    let sb = &of_type(&events, "run_started")[0]["data"]["sandbox"];
    assert!(
        sb["net"]
            .as_str()
            .unwrap()
            .starts_with("proxy ([web_fetch] hosts) at 127.0.0.1:"),
        "{sb}"
    );
    let text = of_type(&events, "tool_result")[0]["data"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("hello through the partial proxy"), "{text}");
    assert!(text.contains("FAILED HTTP Error 403"), "{text}");
    assert_eq!(allowed_hits.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(other_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn inspect_sandbox_lists_what_is_enforced() {
    if skip() {
        return;
    }
    let dir = tmp("inspect");
    std::fs::write(
        dir.join("policy.toml"),
        "[write]\nallow = [\"$WORKSPACE/src/**\"]\n[edit]\nallow = [\"$WORKSPACE/src/**\"]\n[read]\ndeny = [\"~/notes/**\", \"**/*.pem\"]\n[web_fetch]\nallow_domains = [\"docs.rs\"]\n[sandbox]\nwritable = [\"$WORKSPACE/target\"]\nports = [5432]\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["inspect", "--sandbox", "--format", "json", "--policy"])
        .arg(dir.join("policy.toml"))
        .arg("--workspace")
        .arg(dir.join("ws"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v["enforced"], true, "{v:#}");
    let ws = dir.join("ws");
    let writable: Vec<&str> = v["writable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(
        writable.contains(&ws.join("src").to_str().unwrap()),
        "{writable:?}"
    );
    assert!(
        writable.contains(&ws.join("target").to_str().unwrap()),
        "{writable:?}"
    );
    assert!(!writable.contains(&ws.to_str().unwrap()), "{writable:?}");
    assert_eq!(v["net"], "proxy ([web_fetch] hosts), loopback ports 5432");
    assert!(v["gate_only"].to_string().contains("**/*.pem"), "{v}");
    assert!(
        v["processes"]["seccomp_refuses"]
            .to_string()
            .contains("ptrace")
    );
    // Text too.
    let o = Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["inspect", "--sandbox", "--policy"])
        .arg(dir.join("policy.toml"))
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("sandbox: enforced\n"), "{text}");
    assert!(
        text.contains("network: proxy ([web_fetch] hosts)"),
        "{text}"
    );
}

// ---- through the toolbox: the command-tool and bash paths of a run ----

fn toolbox(ws: &Path, policy: &str) -> Toolbox {
    let policy = Policy::parse(policy, Path::new("policy.toml")).unwrap();
    let memory = MemoryStore::open(&ws.join(".agentfile/sessions.db")).unwrap();
    let options = ToolboxOptions {
        bash_timeout: Duration::from_secs(300),
        ..ToolboxOptions::default()
    };
    Toolbox::with_options(&Config::default(), policy, ws, memory, options).unwrap()
}

fn ctx(ws: &Path) -> ToolContext {
    ToolContext {
        workspace: ws.to_owned(),
        agent_id: "sandbox".into(),
        cancel: CancellationToken::new(),
    }
}

/// A one-response HTTP server on loopback; counts its connections.
fn http_server(body: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut s = s;
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, hits)
}

const FETCH: &str = "import sys, urllib.request\ntry:\n    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\nexcept Exception as e:\n    print('FAILED', e)\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_tool_reaches_allowed_hosts_through_the_proxy_and_no_others() {
    if skip() {
        return;
    }
    let dir = tmp("proxy");
    let ws = dir.join("ws");
    std::fs::write(ws.join("fetch.py"), FETCH).unwrap();
    let (allowed, allowed_hits) = http_server("hello from the allowed host");
    let (other, other_hits) = http_server("should never be read");
    let policy = format!(
        "[bash]\nallowlist = [\"python3 fetch.py *\"]\n[web_fetch]\nallow_domains = [\"127.0.0.1:{allowed}\"]\n"
    );
    let tb = toolbox(&ws, &policy);
    assert_eq!(tb.tool_sandbox().info().net, "proxy ([web_fetch] hosts)");
    let fetch = |port: u16| {
        vec![
            "python3".to_owned(),
            "fetch.py".to_owned(),
            format!("http://127.0.0.1:{port}/data"),
        ]
    };
    let r = tb.run_command(&fetch(allowed), Vec::new(), &ctx(&ws)).await;
    assert!(r.denied.is_none());
    assert!(
        r.output.content.contains("hello from the allowed host"),
        "{}",
        r.output.content
    );
    assert_eq!(allowed_hits.load(std::sync::atomic::Ordering::SeqCst), 1);

    // Another host: the proxy refuses it with the rule, and nothing reaches it.
    let r = tb.run_command(&fetch(other), Vec::new(), &ctx(&ws)).await;
    assert!(
        r.output.content.contains("FAILED HTTP Error 403"),
        "{}",
        r.output.content
    );
    assert_eq!(other_hits.load(std::sync::atomic::Ordering::SeqCst), 0);

    // Around the proxy: no route at all.
    std::fs::write(
        ws.join("direct.py"),
        "import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', int(sys.argv[1])), 3)\n    print('CONNECTED')\nexcept OSError as e:\n    print('FAILED', e)\n",
    )
    .unwrap();
    let tb = toolbox(
        &ws,
        &format!(
            "[bash]\nallowlist = [\"python3 *\"]\n[web_fetch]\nallow_domains = [\"127.0.0.1:{allowed}\"]\n"
        ),
    );
    let r = tb
        .call(
            "bash",
            json!({"command": format!("python3 direct.py {allowed}")}),
            &ctx(&ws),
        )
        .await;
    assert!(r.output.content.contains("FAILED"), "{}", r.output.content);
    assert_eq!(allowed_hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// Each connection through the proxy is judged as a web_fetch call is, so
/// the section's rate limit counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_counts_connections_against_the_rate_limit() {
    if skip() {
        return;
    }
    let dir = tmp("proxy-rate");
    let ws = dir.join("ws");
    std::fs::write(ws.join("fetch.py"), FETCH).unwrap();
    let (port, hits) = http_server("counted");
    let policy = format!(
        "[bash]\nallowlist = [\"python3 *\"]\n[web_fetch]\nallow_domains = [\"127.0.0.1:{port}\"]\nrate_limit = 1\n"
    );
    let tb = toolbox(&ws, &policy);
    let url = format!("http://127.0.0.1:{port}/");
    let r = tb
        .call(
            "bash",
            json!({"command": format!("python3 fetch.py {url}; python3 fetch.py {url}")}),
            &ctx(&ws),
        )
        .await;
    let text = r.output.content;
    assert_eq!(text.matches("counted").count(), 1, "{text}");
    assert!(text.contains("FAILED HTTP Error 403"), "{text}");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_port_reaches_the_host_loopback() {
    if skip() {
        return;
    }
    let dir = tmp("ports");
    let ws = dir.join("ws");
    std::fs::write(ws.join("fetch.py"), FETCH).unwrap();
    let (port, hits) = http_server("from a forwarded port");
    let policy = format!("[bash]\nallowlist = [\"python3 *\"]\n[sandbox]\nports = [{port}]\n");
    let tb = toolbox(&ws, &policy);
    let r = tb
        .call(
            "bash",
            json!({"command": format!("python3 fetch.py http://127.0.0.1:{port}/")}),
            &ctx(&ws),
        )
        .await;
    assert!(
        r.output.content.contains("from a forwarded port"),
        "{}",
        r.output.content
    );
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

fn have(prog: &str) -> Option<PathBuf> {
    std::env::var("PATH")
        .ok()?
        .split(':')
        .map(|d| Path::new(d).join(prog))
        .find(|p| p.exists())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builds_and_test_suites_run_in_the_sandbox() {
    if skip() {
        return;
    }
    let dir = tmp("work");
    let ws = dir.join("ws");
    let policy = "[bash]\nallowlist = [\"cargo *\", \"npm *\", \"python3 *\", \"*/python *\"]\n";
    let tb = toolbox(&ws, policy);
    let run = |cmd: String| {
        let tb = &tb;
        let ws = ws.clone();
        async move {
            let r = tb
                .call("bash", json!({"command": cmd, "timeout": 300}), &ctx(&ws))
                .await;
            assert!(r.denied.is_none(), "{}", r.output.content);
            r.output.content
        }
    };
    // A server bound inside the sandbox, reached from inside.
    std::fs::write(
        ws.join("serve.py"),
        "import http.server, threading, urllib.request\ns = http.server.HTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\nthreading.Thread(target=s.serve_forever, daemon=True).start()\nprint(urllib.request.urlopen(f'http://127.0.0.1:{s.server_port}/serve.py').status)\n",
    )
    .unwrap();
    let out = run("python3 serve.py".into()).await;
    assert!(
        out.starts_with("exit code: 0") && out.contains("200"),
        "{out}"
    );
    // Caches go to the run's temporary folder (those under `~` are read-only).
    let out = run("python3 -c \"import os; p = os.environ['XDG_CACHE_HOME']; d = os.path.join(p, 'tool'); os.makedirs(d, exist_ok=True); open(os.path.join(d, 'x'), 'w'); print('cache', p.startswith(os.environ['TMPDIR']))\"".into()).await;
    assert!(
        out.starts_with("exit code: 0") && out.contains("cache True"),
        "{out}"
    );
    // POSIX semaphores and shared memory (`/dev/shm`, private to the run).
    let out = run(
        "python3 -c \"import multiprocessing as m; l = m.Lock(); l.acquire(); print('locked')\""
            .into(),
    )
    .await;
    assert!(
        out.starts_with("exit code: 0") && out.contains("locked"),
        "{out}"
    );

    // cargo test on a crate with no dependencies.
    if have("cargo").is_some() {
        let krate = ws.join("crate");
        std::fs::create_dir_all(krate.join("src")).unwrap();
        std::fs::write(
            krate.join("Cargo.toml"),
            "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .unwrap();
        std::fs::write(krate.join("src/lib.rs"), "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[test]\nfn adds() { assert_eq!(add(2, 2), 4); }\n").unwrap();
        let out = run("cargo test --offline --manifest-path crate/Cargo.toml".into()).await;
        assert!(
            out.starts_with("exit code: 0") && out.contains("test adds ... ok"),
            "{out}"
        );
    } else {
        eprintln!("cargo not on PATH: cargo test not tried");
    }
    // npm test of a package without dependencies.
    if have("npm").is_some() {
        std::fs::create_dir_all(ws.join("pkg")).unwrap();
        std::fs::write(
            ws.join("pkg/package.json"),
            "{\"name\":\"pkg\",\"version\":\"1.0.0\",\"scripts\":{\"test\":\"node test.js\"}}\n",
        )
        .unwrap();
        std::fs::write(
            ws.join("pkg/test.js"),
            "require('assert').strictEqual(1 + 1, 2); console.log('npm-tests-pass');\n",
        )
        .unwrap();
        let out = run("npm test --prefix pkg".into()).await;
        assert!(
            out.starts_with("exit code: 0") && out.contains("npm-tests-pass"),
            "{out}"
        );
    } else {
        eprintln!("npm not on PATH: npm test not tried");
    }
    // pytest, from the test virtualenv (scripts/test.sh installs it there).
    let python = std::env::var("AGENTFILE_PY").ok().filter(|py| {
        Command::new(py)
            .args(["-c", "import pytest"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    match python {
        Some(python) => {
            std::fs::write(
                ws.join("test_it.py"),
                "def test_adds():\n    assert 1 + 1 == 2\n",
            )
            .unwrap();
            let out = run(format!("{python} -m pytest -q test_it.py")).await;
            assert!(
                out.starts_with("exit code: 0") && out.contains("1 passed"),
                "{out}"
            );
        }
        None => eprintln!("no pytest: pytest not tried"),
    }
}

// ---- what `inspect --sandbox` says is isolated, held to the truth ----

/// Run `line` through the toolbox's bash; its output.
async fn bash_out(tb: &Toolbox, ws: &Path, line: &str) -> String {
    let r = tb
        .call("bash", json!({"command": line, "timeout": 60}), &ctx(ws))
        .await;
    assert!(r.denied.is_none(), "{:?}", r.denied);
    r.output.content
}

/// The same without user namespaces (simulated, in a process of its own:
/// the probe is once per process).
#[test]
fn inspect_sandbox_tells_the_truth_about_isolation_when_partial() {
    if skip() {
        return;
    }
    let o = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::support::test_name(
                module_path!(),
                "inspect_sandbox_tells_the_truth_about_isolation",
            )
            .as_str(),
            "--nocapture",
        ])
        .env("AGENTFILE_SANDBOX_SIMULATE", "no-userns")
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{all}");
    assert!(all.contains("1 passed"), "{all}");
}

/// The description's `isolation` (unix sockets, IPC, terminals, process
/// count), then the attempt each one is about: what it calls isolated is
/// stopped, and what it says still gets through does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_sandbox_tells_the_truth_about_isolation() {
    if skip() {
        return;
    }
    let dir = tmp("isolation");
    let ws = dir.join("ws");
    let tb = toolbox(&ws, "[bash]\nallowlist = [\"python3 *\"]\n");
    let d = tb.tool_sandbox().describe();
    let iso = &d["isolation"];
    let text = tb.tool_sandbox().describe_text();
    for label in ["unix sockets:", "IPC:", "terminals:", "process count:"] {
        assert!(text.contains(label), "{text}");
    }

    // Terminals: one of the user's, made here with openpty.
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors into the integers we own.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0);
    let tty = std::fs::read_link(format!("/proc/self/fd/{slave}")).unwrap();
    let out = bash_out(
        &tb,
        &ws,
        &format!(
            "python3 -c \"
import os
try:
    os.open('{}', os.O_RDWR | os.O_NOCTTY); print('REACHED')
except OSError as e: print('STOPPED', e.errno)\"",
            tty.display()
        ),
    )
    .await;
    // SAFETY: closing what openpty made.
    unsafe {
        libc::close(master);
        libc::close(slave);
    }
    assert_eq!(
        iso["terminals"]["isolated"] == true,
        out.contains("STOPPED"),
        "terminals: {} / {out}",
        iso["terminals"]
    );

    // IPC: a segment of this machine's.
    // SAFETY: shmget has no memory-safety preconditions.
    let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o666) };
    assert!(id >= 0);
    let out = bash_out(
        &tb,
        &ws,
        &format!(
            "python3 -c \"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
p = libc.shmat({id}, None, 0)
print('STOPPED' if p in (None, 2**64 - 1) else 'REACHED', ctypes.get_errno())\""
        ),
    )
    .await;
    // SAFETY: removing the segment made above.
    unsafe {
        libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
    }
    assert_eq!(
        iso["ipc"]["isolated"] == true,
        out.contains("STOPPED"),
        "ipc: {} / {out}",
        iso["ipc"]
    );

    // Unix sockets: one in a temporary folder outside the workspace, and
    // one in a folder neither writable nor hidden (this build's target).
    let hidden: Vec<PathBuf> = iso["unix_sockets"]["hidden_folders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect();
    let isolated = iso["unix_sockets"]["isolated"] == true;
    let elsewhere = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(format!("isolation-{}", std::process::id()));
    std::fs::create_dir_all(&elsewhere).unwrap();
    for sock in [dir.join("outside/db.sock"), elsewhere.join("db.sock")] {
        let _ = std::fs::remove_file(&sock);
        let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        l.set_nonblocking(true).unwrap();
        let out = bash_out(
            &tb,
            &ws,
            &format!(
                "python3 -c \"
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('{}'); print('REACHED')
except OSError as e: print('STOPPED', e.errno)\"",
                sock.display()
            ),
        )
        .await;
        let held = isolated || hidden.iter().any(|h| sock.starts_with(h));
        assert_eq!(
            held,
            out.contains("STOPPED"),
            "{}: {} / {out}",
            sock.display(),
            iso["unix_sockets"]
        );
        assert_eq!(held, l.accept().is_err());
    }
    let _ = std::fs::remove_dir_all(&elsewhere);

    // Processes: past the bound, fork fails.
    if iso["processes"]["bounded"] == true {
        let max = iso["processes"]["max"].as_u64().unwrap();
        let want = max + 10;
        let out = bash_out(
            &tb,
            &ws,
            &format!(
                "python3 -c \"
import os, time
n = 0
for i in range({want}):
    try:
        if os.fork() == 0:
            time.sleep(3); os._exit(0)
        n += 1
    except OSError:
        break
print('STARTED', n)\""
            ),
        )
        .await;
        let n: u64 = out
            .split("STARTED ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{out}"));
        assert!(n < max, "{n} processes under a bound of {max}");
    } else {
        assert!(
            iso["processes"]["how"]
                .as_str()
                .unwrap()
                .contains("NOT bounded")
                || iso["processes"]["how"]
                    .as_str()
                    .unwrap()
                    .contains("not bounded"),
            "{}",
            iso["processes"]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
