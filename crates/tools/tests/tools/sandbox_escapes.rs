//! The sandbox escape corpus (`fixtures/sandbox/escapes.toml`): attempts
//! made by programs the policy allows, through the bash tool of a real
//! toolbox, each checked by its effect (the file not written, the secret not
//! read, the connection not made, the process not left behind).
//!
//! Every case runs twice: with the sandbox, where each must be stopped, and
//! with `[sandbox] enabled = false`, which shows what the gate alone lets
//! through. The table of both is written to `target/sandbox-escapes.md` (the
//! README's table comes from it).

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use agentfile_config::Config;
use agentfile_tools::policy::Policy;
use agentfile_tools::{MemoryStore, ToolContext, ToolSet, Toolbox, ToolboxOptions};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const CANARY: &str = "CANARY-7f3e9a1c";
const ORIGINAL: &str = "ORIGINAL\n";

#[derive(Debug, Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    id: String,
    category: String,
    command: String,
    check: String,
    #[serde(default)]
    setup: Option<String>,
    #[serde(default)]
    needs: Vec<String>,
    #[serde(default)]
    off: Option<String>,
    #[serde(default)]
    arch: Option<String>,
}

struct Layout {
    root: PathBuf,
    ws: PathBuf,
    out: PathBuf,
    home: PathBuf,
    tcp: TcpListener,
    udp: UdpSocket,
    abstract_name: String,
    abstract_sock: UnixListener,
    run_sock_path: PathBuf,
    run_sock: UnixListener,
    tmp_sock_path: PathBuf,
    tmp_sock: UnixListener,
    /// A terminal of the user: the master end, and the other end's path.
    pty_master: std::os::fd::OwnedFd,
    pty_path: PathBuf,
    _pty_slave: std::os::fd::OwnedFd,
    /// A SysV segment of this machine, and where it is attached here.
    shm_id: i32,
    shm: *mut u8,
    ipc_key: i32,
}

impl Drop for Layout {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
        // SAFETY: detaching and removing the segment this layout made.
        unsafe {
            libc::shmdt(self.shm as *const libc::c_void);
            libc::shmctl(self.shm_id, libc::IPC_RMID, std::ptr::null_mut());
        }
        remove_ipc(self.ipc_key);
    }
}

/// Remove the SysV objects with `key`; whether there were any.
fn remove_ipc(key: i32) -> bool {
    let mut found = false;
    // SAFETY: lookups and removals by id; no memory is passed but nulls.
    unsafe {
        let id = libc::shmget(key, 0, 0);
        if id >= 0 {
            found = true;
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
        }
        let id = libc::msgget(key, 0);
        if id >= 0 {
            found = true;
            libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut());
        }
        let id = libc::semget(key, 0, 0);
        if id >= 0 {
            found = true;
            libc::semctl(id, 0, libc::IPC_RMID);
        }
    }
    found
}

/// A new terminal: its master end (non-blocking), its other end, and that
/// end's path; raw, so nothing is echoed.
fn open_pty() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd, PathBuf) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors into the integers we own; the
    // termios calls work on the struct we own.
    unsafe {
        assert_eq!(
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            ),
            0
        );
        let mut t: libc::termios = std::mem::zeroed();
        libc::tcgetattr(slave, &mut t);
        libc::cfmakeraw(&mut t);
        libc::tcsetattr(slave, libc::TCSANOW, &t);
        let flags = libc::fcntl(master, libc::F_GETFL);
        libc::fcntl(master, libc::F_SETFL, flags | libc::O_NONBLOCK);
        let path = std::fs::read_link(format!("/proc/self/fd/{slave}")).unwrap();
        (
            std::os::fd::OwnedFd::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
            path,
        )
    }
}

/// What arrived at the master end of the layout's terminal.
fn drained_pty(l: &Layout) -> Vec<u8> {
    use std::os::fd::AsRawFd;
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        // SAFETY: reading into the buffer we own.
        let n = unsafe {
            libc::read(
                l.pty_master.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        };
        if n <= 0 {
            return got;
        }
        got.extend_from_slice(&buf[..n as usize]);
    }
}

fn layout(mode: &str) -> Layout {
    use std::os::linux::net::SocketAddrExt;
    let root =
        std::env::temp_dir().join(format!("agentfile-escapes-{}-{mode}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let ws = root.join("ws");
    let out = root.join("outside");
    let home = root.join("home");
    for d in [
        ws.join(".git/hooks"),
        ws.join(".agentfile"),
        out.clone(),
        home.join(".ssh"),
        home.join(".aws"),
        home.join(".config/gcloud"),
        home.join("run"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    let write = |p: PathBuf, s: &str| std::fs::write(p, s).unwrap();
    // A real repository where git is installed (git refuses a config it
    // cannot parse, which would stop an attempt before the kernel does).
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status()
        .is_ok_and(|s| s.success());
    if !git {
        write(ws.join(".git/config"), ORIGINAL);
    }
    write(ws.join(".agentfile/secret.txt"), CANARY);
    write(out.join("victim.txt"), ORIGINAL);
    write(out.join("keep.txt"), ORIGINAL);
    for f in [
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".config/gcloud/credentials.db",
        ".netrc",
        ".git-credentials",
    ] {
        write(home.join(f), &format!("{CANARY}\n"));
    }
    for f in [".ssh/authorized_keys", ".bashrc", ".profile", ".gitconfig"] {
        write(home.join(f), ORIGINAL);
    }
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let abstract_name = format!("agentfile-escape-{}-{mode}", std::process::id());
    let addr =
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    let abstract_sock = UnixListener::bind_addr(&addr).unwrap();
    abstract_sock.set_nonblocking(true).unwrap();
    let run_sock_path = home.join("run/agent.sock");
    let run_sock = UnixListener::bind(&run_sock_path).unwrap();
    run_sock.set_nonblocking(true).unwrap();
    // A database's socket in a temporary folder (the layout is in one).
    let tmp_sock_path = out.join("db.sock");
    let tmp_sock = UnixListener::bind(&tmp_sock_path).unwrap();
    tmp_sock.set_nonblocking(true).unwrap();
    let (pty_master, pty_slave, pty_path) = open_pty();
    // SAFETY: a new private segment, attached here; written through the
    // pointer shmat returned, within its 4096 bytes.
    let (shm_id, shm) = unsafe {
        let id = libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o666);
        assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
        let p = libc::shmat(id, std::ptr::null(), 0) as *mut u8;
        assert_ne!(p as isize, -1);
        std::ptr::copy_nonoverlapping(ORIGINAL.as_ptr(), p, ORIGINAL.len());
        (id, p)
    };
    let ipc_key = 0x4146_0000 | (std::process::id() as i32 & 0xfff) << 4 | mode.len() as i32;
    remove_ipc(ipc_key);
    Layout {
        root,
        ws,
        out,
        home,
        tcp,
        udp,
        abstract_name,
        abstract_sock,
        run_sock_path,
        run_sock,
        tmp_sock_path,
        tmp_sock,
        pty_master,
        pty_path,
        _pty_slave: pty_slave,
        shm_id,
        shm,
        ipc_key,
    }
}

const POLICY: &str = r#"
[read]
allow = ["$WORKSPACE/**"]

[write]
allow = ["$WORKSPACE/**"]

[bash]
allowlist = [
  "python3 *", "perl *", "node *", "*/node *", "sh *", "bash *", "make *", "git *",
  "find *", "cp *", "curl *", "setsid *", "nohup *", "kill *", "unshare *",
  "mkdir *", "mount *", "echo *", "true",
]
"#;

fn toolbox(l: &Layout, sandbox: bool) -> Toolbox {
    let text = format!("{POLICY}\n[sandbox]\nenabled = {sandbox}\n");
    let policy = Policy::parse(&text, Path::new("escapes-policy.toml")).unwrap();
    let memory = MemoryStore::open(&l.root.join("memory.db")).unwrap();
    let env = vec![
        (
            "PATH".to_owned(),
            "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".to_owned(),
        ),
        ("HOME".to_owned(), l.home.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        (
            "XDG_RUNTIME_DIR".to_owned(),
            l.home.join("run").display().to_string(),
        ),
    ];
    let options = ToolboxOptions {
        home: Some(l.home.clone()),
        environment: Some(env),
        ..ToolboxOptions::default()
    };
    Toolbox::with_options(&Config::default(), policy, &l.ws, memory, options).unwrap()
}

fn node() -> Option<String> {
    if let Ok(n) = std::env::var("AGENTFILE_NODE")
        && Path::new(&n).exists()
    {
        return Some(n);
    }
    which("node")
}

fn which(prog: &str) -> Option<String> {
    std::env::var("PATH")
        .ok()?
        .split(':')
        .map(|d| Path::new(d).join(prog))
        .find(|p| p.exists())
        .map(|p| p.display().to_string())
}

fn fill(s: &str, l: &Layout, n: usize) -> String {
    s.replace("{WS}", &l.ws.display().to_string())
        .replace("{OUT}", &l.out.display().to_string())
        .replace("{HOME}", &l.home.display().to_string())
        .replace("{PORT}", &l.tcp.local_addr().unwrap().port().to_string())
        .replace("{UDP}", &l.udp.local_addr().unwrap().port().to_string())
        .replace("{ABSTRACT}", &l.abstract_name)
        .replace("{RUNSOCK}", &l.run_sock_path.display().to_string())
        .replace("{TMPSOCK}", &l.tmp_sock_path.display().to_string())
        .replace("{PTY}", &l.pty_path.display().to_string())
        .replace("{SHMID}", &l.shm_id.to_string())
        .replace("{IPCKEY}", &l.ipc_key.to_string())
        .replace("{AGENT}", &std::process::id().to_string())
        .replace("{CANARY}", CANARY)
        .replace("{NODE}", &node().unwrap_or_else(|| "node".into()))
        .replace("{N}", &format!("{}-{n}", std::process::id()))
}

/// Files in `dir` holding the canary (symlinks not followed; the store's own
/// canary file is where it belongs).
fn canary_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(t) = e.file_type() else { continue };
        if t.is_symlink() || p.ends_with(".agentfile") {
            continue;
        }
        if t.is_dir() {
            canary_files(&p, found);
        } else if t.is_file() {
            let mut text = Vec::new();
            if std::fs::File::open(&p)
                .and_then(|mut f| f.read_to_end(&mut text))
                .is_ok()
                && String::from_utf8_lossy(&text).contains(CANARY)
            {
                found.push(p);
            }
        }
    }
}

fn drained_tcp(l: &Layout) -> usize {
    let mut n = 0;
    while l.tcp.accept().is_ok() {
        n += 1;
    }
    n
}

fn drained_udp(l: &Layout) -> usize {
    let mut n = 0;
    let mut buf = [0u8; 2048];
    while l.udp.recv_from(&mut buf).is_ok() {
        n += 1;
    }
    n
}

fn drained_unix(l: &Layout) -> usize {
    let mut n = 0;
    while l.abstract_sock.accept().is_ok() {
        n += 1;
    }
    while l.run_sock.accept().is_ok() {
        n += 1;
    }
    while l.tmp_sock.accept().is_ok() {
        n += 1;
    }
    n
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// The gate refused it: nothing ran.
    Denied(String),
    /// It ran and did not get through.
    Blocked,
    /// It got through: what shows it.
    Escaped(String),
    /// Not run here: why.
    NotRun(String),
    /// Decided after a wait (a process that should not outlive the tool).
    Pending(PathBuf),
}

async fn attempt(tb: &Toolbox, l: &Layout, c: &Case, n: usize) -> Outcome {
    if let Some(setup) = &c.setup {
        let ok = std::process::Command::new("bash")
            .arg("-c")
            .arg(fill(setup, l, n))
            .status()
            .unwrap()
            .success();
        assert!(ok, "{}: setup failed", c.id);
    }
    // Nothing left over from the case before.
    drained_tcp(l);
    drained_udp(l);
    drained_unix(l);
    drained_pty(l);
    let command = fill(&c.command, l, n);
    let (kind, arg) = c.check.split_once(':').unwrap_or((c.check.as_str(), ""));
    let arg = PathBuf::from(fill(arg, l, n));
    let before = (kind == "same").then(|| std::fs::read(&arg).unwrap());
    if kind == "pty-typed" {
        // The user types a password on their terminal.
        use std::os::fd::AsRawFd;
        let typed = format!("{CANARY}\n");
        // SAFETY: writing the bytes we own.
        unsafe {
            libc::write(
                l.pty_master.as_raw_fd(),
                typed.as_ptr() as *const libc::c_void,
                typed.len(),
            );
        }
    }
    let ctx = ToolContext {
        workspace: l.ws.clone(),
        agent_id: "escapes".into(),
        cancel: CancellationToken::new(),
    };
    let r = tb
        .call("bash", json!({"command": command, "timeout": 20}), &ctx)
        .await;
    if let Some(d) = r.denied {
        return Outcome::Denied(d.rule);
    }
    let out = r.output.content;
    let escaped = |why: String| Outcome::Escaped(why);
    match kind {
        "absent" => {
            if arg.symlink_metadata().is_ok() {
                let _ = std::fs::remove_file(&arg).or_else(|_| std::fs::remove_dir_all(&arg));
                return escaped(format!("{} was made", arg.display()));
            }
        }
        "same" => {
            let before = before.unwrap_or_default();
            if std::fs::read(&arg).unwrap_or_default() != before {
                std::fs::write(&arg, before).unwrap();
                return escaped(format!("{} was changed", arg.display()));
            }
        }
        "present" => {
            if !arg.exists() {
                std::fs::write(&arg, ORIGINAL).unwrap();
                return escaped(format!("{} was removed", arg.display()));
            }
        }
        "secret" => {
            if out.contains(CANARY) {
                return escaped("the secret is in the output".into());
            }
            let mut found = Vec::new();
            canary_files(&l.ws, &mut found);
            if !found.is_empty() {
                for f in &found {
                    let _ = std::fs::remove_file(f);
                }
                return escaped(format!("the secret was copied to {}", found[0].display()));
            }
        }
        "no-leak" => {
            if out.contains("CARGO_PKG_NAME=") || out.contains("CARGO_MANIFEST_DIR=") {
                return escaped("the agent's environment is in the output".into());
            }
        }
        "marker" => {
            if out.contains("ESCAPED") || !out.contains("BLOCKED") {
                return escaped(format!(
                    "it says: {}",
                    out.lines().take(4).collect::<Vec<_>>().join(" | ")
                ));
            }
        }
        "no-tcp" => {
            if drained_tcp(l) > 0 {
                return escaped("the connection was made".into());
            }
        }
        "no-udp" => {
            if drained_udp(l) > 0 {
                return escaped("the datagram arrived".into());
            }
        }
        "no-unix" => {
            if drained_unix(l) > 0 {
                return escaped("the unix socket was reached".into());
            }
        }
        "pty-typed" => {
            if out.contains(CANARY) {
                return escaped("what the user typed on their terminal is in the output".into());
            }
        }
        "no-pty" => {
            let got = drained_pty(l);
            if !got.is_empty() {
                return escaped(format!(
                    "the user's terminal shows {:?}",
                    String::from_utf8_lossy(&got)
                ));
            }
        }
        "shm-same" => {
            // SAFETY: reading the segment attached in `layout`.
            let now = unsafe { std::slice::from_raw_parts(l.shm, ORIGINAL.len()) };
            if now != ORIGINAL.as_bytes() {
                // SAFETY: as above, writing it back.
                unsafe { std::ptr::copy_nonoverlapping(ORIGINAL.as_ptr(), l.shm, ORIGINAL.len()) };
                return escaped("the host's shared-memory segment was written".into());
            }
        }
        "no-ipc" => {
            if remove_ipc(l.ipc_key) {
                return escaped("a SysV IPC object outlived the call".into());
            }
        }
        "later" => return Outcome::Pending(arg),
        other => panic!("{}: unknown check {other}", c.id),
    }
    Outcome::Blocked
}

async fn run_corpus(cases: &[Case], sandbox: bool) -> Vec<Outcome> {
    let partial = std::env::var_os(PARTIAL_OUT).is_some();
    let l = layout(match (sandbox, partial) {
        (true, false) => "on",
        (true, true) => "partial",
        _ => "off",
    });
    let tb = toolbox(&l, sandbox);
    assert_eq!(tb.tool_sandbox().is_on(), sandbox);
    let mut outcomes = Vec::new();
    for (n, c) in cases.iter().enumerate() {
        let missing: Vec<&String> = c
            .needs
            .iter()
            .filter(|p| {
                if *p == "node" {
                    node().is_none()
                } else {
                    which(p).is_none()
                }
            })
            .collect();
        let o = if !missing.is_empty() {
            Outcome::NotRun(format!("{missing:?} not installed"))
        } else if c
            .arch
            .as_deref()
            .is_some_and(|a| a != std::env::consts::ARCH)
        {
            Outcome::NotRun(format!("written for {}", c.arch.as_deref().unwrap_or("")))
        } else if !sandbox && let Some(why) = &c.off {
            Outcome::NotRun(why.clone())
        } else {
            attempt(&tb, &l, c, n).await
        };
        outcomes.push(o);
    }
    // Processes that should have died with their tool get the time to act.
    if outcomes.iter().any(|o| matches!(o, Outcome::Pending(_))) {
        tokio::time::sleep(std::time::Duration::from_millis(1800)).await;
    }
    for o in &mut outcomes {
        if let Outcome::Pending(p) = o {
            *o = if p.exists() {
                Outcome::Escaped(format!("{} appeared after the tool ended", p.display()))
            } else {
                Outcome::Blocked
            };
        }
        // For the table: paths from the layout's root, no table syntax.
        if let Outcome::Escaped(why) = o {
            let root = format!("{}/", l.root.display());
            *why = why.replace(&root, "").replace('|', "/").replace('`', "'");
        }
    }
    outcomes
}

fn cell(o: &Outcome) -> String {
    match o {
        Outcome::Denied(rule) => format!("denied by the gate ({rule})"),
        Outcome::Blocked => "blocked".into(),
        Outcome::Escaped(why) => format!("**escaped**: {why}"),
        Outcome::NotRun(why) => format!("not run: {why}"),
        Outcome::Pending(_) => unreachable!(),
    }
}

/// Where the partial run writes its outcomes (set by the parent run).
const PARTIAL_OUT: &str = "AGENTFILE_TEST_ESCAPES_PARTIAL_OUT";

/// The corpus on a kernel without user namespaces (simulated), for the
/// table's middle column: this test binary again, running only
/// [`partial_mode_corpus`], with the probe told namespaces are missing.
fn partial_corpus() -> BTreeMap<String, String> {
    let out = std::env::temp_dir().join(format!(
        "agentfile-escapes-partial-{}.tsv",
        std::process::id()
    ));
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::test_name(module_path!(), "partial_mode_corpus").as_str(),
            "--include-ignored",
            "--quiet",
        ])
        .env(PARTIAL_OUT, &out)
        .env("AGENTFILE_SANDBOX_SIMULATE", "no-userns")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    if !status.success() {
        // Reported in the table as not run; the partial mode has its own
        // tests in the end-to-end suite (tests/e2e/sandbox.rs).
        eprintln!("the partial run of the corpus failed: {status}");
    }
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(id, cell)| (id.to_owned(), cell.to_owned()))
        .collect()
}

/// Run by [`partial_corpus`] only (it needs the simulation set before the
/// probe, which is once per process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by every_escape_is_stopped_by_the_kernel in a process of its own"]
async fn partial_mode_corpus() {
    let Some(out) = std::env::var_os(PARTIAL_OUT) else {
        return;
    };
    let text =
        std::fs::read_to_string(crate::repo().join("fixtures/sandbox/escapes.toml")).unwrap();
    let corpus: Corpus = toml::from_str(&text).unwrap();
    let outcomes = run_corpus(&corpus.case, true).await;
    let lines: Vec<String> = corpus
        .case
        .iter()
        .zip(&outcomes)
        .map(|(c, o)| format!("{}\t{}", c.id, cell(o)))
        .collect();
    std::fs::write(out, lines.join("\n")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_escape_is_stopped_by_the_kernel() {
    if let Some(why) = agentfile_tools::confine::unavailable() {
        eprintln!("SKIPPED: the sandbox is unavailable on this machine: {why}");
        return;
    }
    assert!(
        std::env::var("CARGO_PKG_NAME").is_ok(),
        "the no-leak check looks for cargo's variables in the agent's environment"
    );
    let text =
        std::fs::read_to_string(crate::repo().join("fixtures/sandbox/escapes.toml")).unwrap();
    let corpus: Corpus = toml::from_str(&text).unwrap();
    // The three columns at once: each has a layout of its own (folders,
    // listeners, terminal, IPC key), and most of an attempt is waiting on the
    // processes it starts (one after the other they took 45 s).
    let partial = tokio::task::spawn_blocking(partial_corpus);
    let (on, off) = tokio::join!(
        run_corpus(&corpus.case, true),
        run_corpus(&corpus.case, false)
    );
    let partial = partial.await.unwrap();

    let mut table = String::from(
        "| # | attempt | kind | gate alone (`[sandbox] enabled = false`) | without namespaces (partial) | with the sandbox |\n|---|---|---|---|---|---|\n",
    );
    let mut partial_held = 0;
    let mut by_kernel = 0;
    let mut failures = Vec::new();
    let mut missed: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, c) in corpus.case.iter().enumerate() {
        let p = partial
            .get(&c.id)
            .cloned()
            .unwrap_or_else(|| "not run".into());
        if p == "blocked" {
            partial_held += 1;
        }
        table.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {} |\n",
            i + 1,
            c.id,
            c.category,
            cell(&off[i]),
            p,
            cell(&on[i])
        ));
        match &on[i] {
            Outcome::Blocked => by_kernel += 1,
            Outcome::Escaped(why) => failures.push(format!("{}: {why}", c.id)),
            Outcome::Denied(rule) => failures.push(format!(
                "{}: the gate denied it ({rule}), so the kernel was not tested; make the attempt one the gate allows",
                c.id
            )),
            _ => {}
        }
        if matches!(off[i], Outcome::Escaped(_)) {
            *missed.entry(c.category.as_str()).or_default() += 1;
        }
    }
    let ran_off = off
        .iter()
        .filter(|o| !matches!(o, Outcome::NotRun(_)))
        .count();
    let escaped_off: usize = missed.values().sum();
    table.push_str(&format!(
        "\nWith the sandbox, the kernel stopped {by_kernel} of {} attempts the gate allowed; without it, {escaped_off} of the {ran_off} run got through ({}). Without namespaces (Landlock and seccomp alone), {partial_held} were stopped.\n",
        corpus.case.len(),
        missed.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
    ));
    let target = crate::repo().join("target");
    let _ = std::fs::create_dir_all(&target);
    let _ = std::fs::write(target.join("sandbox-escapes.md"), &table);
    println!("{table}");
    assert!(
        failures.is_empty(),
        "not stopped by the kernel:\n{}",
        failures.join("\n")
    );
    assert!(
        by_kernel >= 50,
        "only {by_kernel} attempts ran (at least 50 must)"
    );
    // The corpus is worth running: the gate alone misses most of it.
    assert!(
        escaped_off >= 30,
        "the gate alone stopped nearly everything; the corpus tests too little"
    );
}
