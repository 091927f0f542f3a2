//! The sandbox against real processes: what a program inside can and cannot do.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use agentfile_sandbox::{Sandbox, Spec, probe};

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    out: PathBuf,
    tmp: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    let home = root.join("home");
    let out = root.join("outside");
    let tmp = root.join("tmp");
    for d in [&ws, &home.join(".ssh"), &out, &tmp, &ws.join(".git/hooks")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(home.join(".ssh/id_ed25519"), "SECRET-KEY").unwrap();
    std::fs::write(home.join(".netrc"), "SECRET-NETRC").unwrap();
    Fixture {
        _dir: dir,
        ws,
        home,
        out,
        tmp,
    }
}

fn spec(f: &Fixture) -> Spec {
    Spec {
        writable: vec![f.ws.clone()],
        hidden: vec![f.home.join(".ssh"), f.home.join(".netrc")],
        read_only: vec![f.ws.join(".git/hooks")],
        exposed: None,
        tmp: f.tmp.clone(),
        proxy: false,
        ports: vec![],
        max_processes: None,
    }
}

async fn sh(sb: &Sandbox, cwd: &Path, line: &str) -> (i32, String, String) {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(line)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut guest = sb.command(&mut cmd).unwrap();
    let child = cmd.spawn().unwrap();
    guest.listeners().unwrap();
    let out = child.wait_with_output().await.unwrap();
    use std::os::unix::process::ExitStatusExt;
    let code = out
        .status
        .code()
        .unwrap_or(128 + out.status.signal().unwrap_or(0));
    (
        code,
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn skip() -> bool {
    if let Some(why) = probe().unavailable() {
        eprintln!("SKIPPED: the sandbox is unavailable here: {why}");
        return true;
    }
    false
}

#[tokio::test]
async fn files_network_and_processes_are_held() {
    if skip() {
        return;
    }
    let f = fixture();
    let sb = Sandbox::new(spec(&f)).unwrap();
    let (code, out, err) = sh(
        &sb,
        &f.ws,
        "echo hi > a.txt && cat a.txt && id -u && echo $$",
    )
    .await;
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.starts_with("hi\n"), "{out}");
    assert!(f.ws.join("a.txt").exists());
    // Writes outside are refused.
    let (code, _, err) = sh(&sb, &f.ws, &format!("echo x > {}/o.txt", f.out.display())).await;
    assert_ne!(code, 0, "{err}");
    assert!(!f.out.join("o.txt").exists());
    // Secrets read as empty or missing.
    let (_, out, _) = sh(
        &sb,
        &f.ws,
        &format!(
            "cat {0}/.ssh/id_ed25519; cat {0}/.netrc; ls -a {0}/.ssh",
            f.home.display()
        ),
    )
    .await;
    assert!(!out.contains("SECRET"), "{out}");
    // Hooks are read-only.
    let (code, _, _) = sh(&sb, &f.ws, "echo x > .git/hooks/pre-commit").await;
    assert_ne!(code, 0);
    assert!(!f.ws.join(".git/hooks/pre-commit").exists());
    // TMPDIR is writable.
    let (code, _, err) = sh(&sb, &f.ws, &format!("echo t > {}/t", f.tmp.display())).await;
    assert_eq!(code, 0, "{err}");
    // Exit codes and signals come back.
    assert_eq!(sh(&sb, &f.ws, "exit 7").await.0, 7);
    assert_eq!(sh(&sb, &f.ws, "kill -9 $$").await.0, 128 + 9);
    // No network beyond the sandbox's own loopback.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (code, _, _) = sh(&sb, &f.ws, &format!("exec 3<>/dev/tcp/127.0.0.1/{port}")).await;
    assert_ne!(code, 0);
    // A process left behind dies with the tool.
    let marker = f.ws.join("late");
    let t = std::time::Instant::now();
    sh(
        &sb,
        &f.ws,
        &format!(
            "(setsid sh -c 'sleep 1; touch {}' &) ; exit 0",
            marker.display()
        ),
    )
    .await;
    assert!(t.elapsed().as_millis() < 900);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_folder_inside_a_hidden_one_stays_visible_and_writable() {
    if skip() {
        return;
    }
    let f = fixture();
    let store = f.ws.join(".agentfile");
    let run = store.join("runs/s1");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(store.join("sessions.db"), "SECRET-DB").unwrap();
    let mut s = spec(&f);
    s.hidden.push(store.clone());
    s.exposed = Some((store.clone(), run.clone()));
    let sb = Sandbox::new(s).unwrap();
    let (code, out, err) = sh(&sb, &f.ws, "cat .agentfile/sessions.db; ls .agentfile; echo r > .agentfile/runs/s1/out && cat .agentfile/runs/s1/out").await;
    assert_eq!(code, 0, "{out} {err}");
    assert!(!out.contains("SECRET"), "{out}");
    assert_eq!(std::fs::read_to_string(run.join("out")).unwrap(), "r\n");
}

/// What the sandbox says it isolates from the rest of the machine is what
/// a program inside finds: the user's terminals, the host's SysV IPC, the
/// unix sockets in the socket folders, and the process table.
#[tokio::test]
async fn the_rest_of_the_machine_is_out_of_reach() {
    if skip() || probe().namespaces.is_some() {
        return;
    }
    let f = fixture();
    let sb = Sandbox::new(spec(&f)).unwrap();
    let iso = sb.isolation();

    // A terminal of the user, made here.
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
    let (code, out, err) = sh(
        &sb,
        &f.ws,
        &format!(
            "python3 -c \"
import os
try:
    os.open('{}', os.O_RDWR); print('OPENED')
except OSError as e: print('REFUSED', e.errno)
m, s = os.openpty(); os.write(m, b'x\\n'); print('OWN', os.read(s, 1))\"",
            tty.display()
        ),
    )
    .await;
    assert!(iso.terminals_isolated, "{iso:?}");
    assert!(out.contains("REFUSED"), "{code} {out} {err}");
    assert!(
        out.contains("OWN b'x'"),
        "a pty of its own works: {out} {err}"
    );
    // SAFETY: closing the descriptors openpty made.
    unsafe {
        libc::close(master);
        libc::close(slave);
    }

    // A SysV segment of the host, and one made inside.
    // SAFETY: shmget has no memory-safety preconditions.
    let id = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600) };
    assert!(id >= 0);
    let (_, out, err) = sh(
        &sb,
        &f.ws,
        &format!(
            "python3 -c \"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
r = libc.shmat({id}, None, 0)
print('ATTACHED' if r not in (None, 2**64 - 1) else 'REFUSED', ctypes.get_errno())
print('MADE', libc.shmget(0x5eed, 4096, 0o1600))\""
        ),
    )
    .await;
    // SAFETY: removing the segment made above.
    unsafe {
        libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
    }
    assert!(iso.ipc_isolated);
    assert!(out.contains("REFUSED"), "{out} {err}");
    // SAFETY: shmget only looks the key up.
    let left = unsafe { libc::shmget(0x5eed, 0, 0) };
    assert!(left < 0, "a segment made inside outlived the call: {out}");

    // A listener in a temporary folder outside the writable ones.
    let sock = f.out.join("db.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (_, out, err) = sh(
        &sb,
        &f.ws,
        &format!(
            "python3 -c \"
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('{}'); print('CONNECTED')
except OSError as e: print('REFUSED', e.errno)\"",
            sock.display()
        ),
    )
    .await;
    assert!(
        iso.socket_folders_hidden
            .iter()
            .any(|d| sock.starts_with(d))
            || iso.unix_sockets_isolated,
        "{iso:?}"
    );
    assert!(out.contains("REFUSED"), "{out} {err}");
    assert!(listener.accept().is_err());

    // More processes than the bound.
    if agentfile_sandbox::cgroup_controller().is_ok() {
        sb.set_max_processes(Some(20));
        let (_, out, err) = sh(
            &sb,
            &f.ws,
            "python3 -c \"
import os, time
n = 0
for i in range(40):
    try:
        if os.fork() == 0:
            time.sleep(2); os._exit(0)
        n += 1
    except OSError:
        break
print('STARTED', n)\"",
        )
        .await;
        assert_eq!(sb.isolation().max_processes, Some(20));
        let n: usize = out
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{out} {err}"));
        assert!(n < 20, "{n} processes started under a bound of 20");
    }
}
