//! Shared helpers for the session store tests: temporary folders under
//! `target/`, the three backends behind one switch (PostgreSQL in a throwaway
//! cluster, see [`pg`]), and event logs to append.
//!
//! The end-to-end suite includes this file too (`tests/e2e/support`): its
//! crash, daemon and cluster tests use the throwaway cluster.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use agentfile_session::{
    FileStore, Owner, OwnerRecord, PgStore, SessionMeta, SessionStatus, SessionStore, SqliteStore,
};
use agentfile_wire::events::{Event, EventBody, LoopStop, ToolCallInfo, Usage, rfc3339};
use serde_json::json;

/// A folder under `target/tmp` (a real disk, so fsync means something),
/// removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "session-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The three backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    File,
    /// A database of the test process's throwaway cluster, one per `dir`.
    Postgres,
}

impl Kind {
    /// A store in `dir` (the same files for every call with the same `dir`).
    pub fn open(self, dir: &Path) -> Box<dyn SessionStore> {
        match self {
            Kind::Sqlite => Box::new(SqliteStore::open(&dir.join("sessions.db")).unwrap()),
            Kind::File => Box::new(FileStore::open(&dir.join("sessions")).unwrap()),
            Kind::Postgres => Box::new(PgStore::open(&pg::url_for(dir)).unwrap()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Sqlite => "sqlite",
            Kind::File => "file",
            Kind::Postgres => "postgres",
        }
    }

    pub fn parse(name: &str) -> Kind {
        match name {
            "sqlite" => Kind::Sqlite,
            "postgres" => Kind::Postgres,
            _ => Kind::File,
        }
    }
}

/// A fixed time per `n`, so everything derived from it is deterministic.
pub fn ts(n: u64) -> String {
    rfc3339(UNIX_EPOCH + Duration::from_millis(1_795_341_600_000 + n * 1_370))
}

pub fn meta(id: &str) -> SessionMeta {
    meta_at(id, 0)
}

/// A new session's meta, created at time `n`.
pub fn meta_at(id: &str, n: u64) -> SessionMeta {
    SessionMeta {
        id: id.to_owned(),
        workflow: "demo".into(),
        path: "/work/demo/Agentfile".into(),
        workspace: "/work/demo".into(),
        inputs: BTreeMap::from([("topic".into(), "crash safety ✓".into())]),
        status: SessionStatus::Queued,
        created_at: ts(n),
        updated_at: ts(n),
        last_seq: 0,
    }
}

/// Builds a session's events with dense `seq`s.
pub struct Log {
    pub id: String,
    pub events: Vec<Event>,
    step: Option<String>,
    goal: Option<String>,
    agent: Option<String>,
    iteration: Option<u32>,
}

impl Log {
    pub fn new(id: &str) -> Log {
        Log {
            id: id.to_owned(),
            events: Vec::new(),
            step: None,
            goal: None,
            agent: None,
            iteration: None,
        }
    }

    /// Set the context of the events pushed next.
    pub fn at(
        &mut self,
        step: Option<&str>,
        goal: Option<&str>,
        agent: Option<&str>,
        iteration: Option<u32>,
    ) -> &mut Log {
        self.step = step.map(str::to_owned);
        self.goal = goal.map(str::to_owned);
        self.agent = agent.map(str::to_owned);
        self.iteration = iteration;
        self
    }

    pub fn next_seq(&self) -> u64 {
        self.events.len() as u64 + 1
    }

    pub fn push(&mut self, body: EventBody) -> Event {
        let seq = self.next_seq();
        let e = Event {
            schema_version: 1,
            session_id: self.id.clone(),
            seq,
            ts: ts(seq),
            step: self.step.clone(),
            goal: self.goal.clone(),
            agent: self.agent.clone(),
            iteration: self.iteration,
            node: None,
            node_kind: None,
            replayed: false,
            body,
        };
        self.events.push(e.clone());
        e
    }
}

pub fn run_started() -> EventBody {
    EventBody::RunStarted {
        workflow: "demo".into(),
        path: "/work/demo/Agentfile".into(),
        inputs: BTreeMap::from([("topic".into(), "crash safety ✓".into())]),
        provider: "fake".into(),
        model: "fake-model".into(),
        endpoint: None,
        workspace: "/work/demo".into(),
        resumed_from_seq: None,
        fingerprint: None,
        digests: BTreeMap::new(),
        trigger: None,
        sandbox: None,
        forked_from: None,
        replay_of: None,
        package: None,
    }
}

pub fn usage() -> Usage {
    Usage {
        input_tokens: 1200,
        output_tokens: 345,
        cost_usd: Some(0.1 + 0.2),
        turns: 4,
        tool_calls: 2,
    }
}

/// A run that uses every event type, with awkward content: floats that do
/// not round-trip naively, unicode, a large tool result, and tool arguments
/// that look like the SQLite store's own blob markers.
pub fn full_run(id: &str) -> Vec<Event> {
    let big = "line of tool output ✓ \"quoted\" \\ backslash\n".repeat(3000);
    let mut log = Log::new(id);
    log.push(run_started());
    log.at(Some("s1"), None, None, None)
        .push(EventBody::StepStarted {
            kind: "loop".into(),
            goals: vec!["g1".into()],
            limit: Some(3),
        });
    log.at(Some("s1"), None, None, Some(1))
        .push(EventBody::LoopIteration { limit: 3 });
    log.at(Some("s1"), Some("g1"), None, Some(1))
        .push(EventBody::ApprovalRequired {
            reason: "SUPERVISED".into(),
            deadline_ms: None,
        });
    log.push(EventBody::ApprovalResolved {
        approved: true,
        note: Some("ok 👍".into()),
    });
    log.push(EventBody::GoalStarted {
        outcome: "Do the thing about crash safety ✓".into(),
        agents: vec!["a".into(), "b".into()],
    });
    log.at(Some("s1"), Some("g1"), Some("a"), Some(1))
        .push(EventBody::AgentStarted {
            role: "agent".into(),
        });
    log.push(EventBody::LlmRequest {
        model: "fake-model".into(),
        turn: 1,
        messages: 2,
        tools: 5,
        digests: Default::default(),
    });
    let args = json!({
        "path": "src/lib.rs",
        "content": big.clone(),
        "tricky": {"$blob": "not a reference"},
        "nested": [{"$lit": 1}, 1.5e300, -0.0, 0.1, 1.0 / 3.0, 2f64.sqrt(), 5e-324, u64::MAX],
    });
    log.push(EventBody::LlmResponse {
        model: "fake-model".into(),
        turn: 1,
        input_tokens: 100,
        output_tokens: 20,
        latency_ms: 1234,
        cost_usd: Some(0.000123456789),
        stop_reason: "tool_use".into(),
        text: "Writing the file — ünïcödé".into(),
        tool_calls: vec![ToolCallInfo {
            id: "c1".into(),
            name: "write".into(),
            arguments: args.clone(),
        }],
    });
    log.push(EventBody::ToolCall {
        id: "c1".into(),
        tool: "write".into(),
        arguments: args,
    });
    log.push(EventBody::ToolResult {
        id: "c1".into(),
        tool: "write".into(),
        content: big.clone(),
        is_error: false,
        duration_ms: 7,
    });
    log.push(EventBody::PolicyDenied {
        id: "c2".into(),
        tool: "bash".into(),
        rule: "bash: deny rm".into(),
        reason: "rm is denied".into(),
    });
    log.push(EventBody::ToolResult {
        id: "c2".into(),
        tool: "bash".into(),
        content: "denied".into(),
        is_error: true,
        duration_ms: 0,
    });
    log.at(Some("s1"), Some("g1"), None, Some(1))
        .push(EventBody::GoalComplete {
            output: big.clone(),
            fields: BTreeMap::from([("verdict".into(), json!({"ok": true, "score": 0.3}))]),
            converged: Some(LoopStop::Unchanged),
            tool_calls: 2,
            done: false,
        });
    log.at(Some("s1"), None, None, None)
        .push(EventBody::StepComplete {
            iterations: Some(1),
            stop: Some(LoopStop::Unchanged),
            output: None,
            next: None,
        });
    log.at(None, None, None, None).push(EventBody::Warning {
        message: "w".into(),
    });
    log.push(EventBody::Error {
        message: "e".into(),
    });
    log.push(EventBody::RunComplete {
        outputs: BTreeMap::from([("g1".into(), json!(big))]),
        usage: usage(),
    });
    log.events
}

/// `n` small, ordinary events (the shape most of a real log has).
pub fn small_events(id: &str, first_seq: u64, n: u64) -> Vec<Event> {
    (first_seq..first_seq + n)
        .map(|seq| Event {
            schema_version: 1,
            session_id: id.to_owned(),
            seq,
            ts: ts(seq),
            step: Some("step".into()),
            goal: Some("goal".into()),
            agent: Some("agent".into()),
            iteration: None,
            node: None,
            node_kind: None,
            replayed: false,
            body: EventBody::LlmRequest {
                model: "fake-model".into(),
                turn: seq as u32,
                messages: 3,
                tools: 4,
                digests: Default::default(),
            },
        })
        .collect()
}

/// Serialise for byte-for-byte comparison.
pub fn wire(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect()
}

/// An owner on this machine whose process has exited: the pid of a child that
/// ran and was reaped, in this boot and pid namespace.
pub fn dead_owner(heartbeat_at: &str) -> OwnerRecord {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let me = Owner::current();
    let scope = me.start.rsplit_once('/').map(|(s, _)| s).unwrap_or("");
    OwnerRecord {
        owner: Owner {
            pid,
            host: me.host.clone(),
            start: format!("{scope}/1"),
        },
        heartbeat_at: heartbeat_at.to_owned(),
    }
}

/// An owner on another machine (another boot), last heard from at `heartbeat_at`.
pub fn remote_owner(heartbeat_at: &str) -> OwnerRecord {
    OwnerRecord {
        owner: Owner {
            pid: 4242,
            host: "elsewhere".into(),
            start: "another-boot/1/12345".into(),
        },
        heartbeat_at: heartbeat_at.to_owned(),
    }
}

/// `ago` before now, as the stores write times.
pub fn ago(ago: Duration) -> String {
    rfc3339(std::time::SystemTime::now() - ago)
}

/// Throwaway PostgreSQL clusters for the tests: the server binaries Debian's
/// `postgresql` package installs (`/usr/lib/postgresql/*/bin`), a data folder
/// under `/tmp`, a free port on 127.0.0.1, `fsync=off`. One cluster is shared
/// by the whole test process ([`shared`]) and every test gets a fresh database
/// in it; tests that stop the server start their own ([`Cluster::start`]).
///
/// initdb and postgres refuse to run as root, so as root they run as the
/// `postgres` user (`runuser`). Each cluster has a watchdog, a shell loop that
/// stops the server and removes its folder once the test process is gone, so
/// a test binary that is killed or exits without running destructors leaves
/// nothing behind.
pub mod pg {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, OnceLock};

    /// The newest installed server's `bin` folder.
    pub fn bin_dir() -> Option<PathBuf> {
        let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| {
                let e = e.ok()?;
                let version: u32 = e.file_name().to_str()?.parse().ok()?;
                let bin = e.path().join("bin");
                bin.join("initdb").is_file().then_some((version, bin))
            })
            .collect();
        found.sort();
        found.pop().map(|(_, b)| b)
    }

    /// Whether the PostgreSQL cases can run; says loudly why not.
    pub fn available() -> bool {
        if bin_dir().is_some() {
            return true;
        }
        eprintln!(
            "SKIPPED: PostgreSQL not installed (no /usr/lib/postgresql/*/bin/initdb; \
             `apt-get install postgresql`, or run scripts/test.sh, which installs it)"
        );
        false
    }

    fn as_root() -> bool {
        // SAFETY: geteuid has no preconditions and cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    /// `program args…`, as the `postgres` user when we are root.
    fn server_command(program: &Path) -> Command {
        if as_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn run(mut c: Command, what: &str) -> Result<(), String> {
        let out = c
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{what}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{what} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port on 127.0.0.1")
    }

    /// One running (or stopped) PostgreSQL server.
    pub struct Cluster {
        pub base: PathBuf,
        pub port: u16,
        bin: PathBuf,
        watchdog: Option<std::process::Child>,
    }

    impl Cluster {
        /// initdb and start a new cluster.
        pub fn start() -> Result<Cluster, String> {
            static N: AtomicU64 = AtomicU64::new(0);
            let bin = bin_dir().ok_or("PostgreSQL is not installed")?;
            let base = PathBuf::from(format!(
                "/tmp/agentfile-pg-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&base);
            std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
            if as_root() {
                let mut c = Command::new("chown");
                c.args(["postgres:postgres"]).arg(&base);
                run(c, "chown")?;
            }
            let mut cluster = Cluster {
                port: free_port(),
                base,
                bin,
                watchdog: None,
            };
            // The watchdog first, so even a failed start is cleaned up.
            let script = format!(
                "while [ -d /proc/{pid} ]; do sleep 1; done; \
                 '{pg_ctl}' -D '{data}' stop -m immediate >/dev/null 2>&1; rm -rf '{base}'",
                pid = std::process::id(),
                pg_ctl = cluster.bin.join("pg_ctl").display(),
                data = cluster.data().display(),
                base = cluster.base.display(),
            );
            let mut w = server_command(Path::new("/bin/sh"));
            w.args(["-c", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            cluster.watchdog = w.spawn().ok();
            let mut init = server_command(&cluster.bin.join("initdb"));
            init.arg("-D")
                .arg(cluster.data())
                .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
                .arg("--no-locale");
            run(init, "initdb")?;
            cluster.resume()?;
            Ok(cluster)
        }

        fn data(&self) -> PathBuf {
            self.base.join("data")
        }

        /// Start the server (again), and wait until it accepts connections.
        pub fn resume(&self) -> Result<(), String> {
            let mut c = server_command(&self.bin.join("pg_ctl"));
            c.arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.base.join("log"))
                .args(["-w", "-t", "60", "-o"])
                .arg(format!(
                    "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} \
                     -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
                     -c max_connections=400",
                    self.port,
                    self.base.display()
                ))
                .arg("start")
                .stdout(Stdio::null());
            run(c, "pg_ctl start")
        }

        /// `pg_ctl stop -m fast`: connections are closed, as a restarting
        /// server closes them.
        pub fn stop(&self) -> Result<(), String> {
            let mut c = server_command(&self.bin.join("pg_ctl"));
            c.arg("-D")
                .arg(self.data())
                .args(["-w", "-m", "fast", "stop"])
                .stdout(Stdio::null());
            run(c, "pg_ctl stop")
        }

        /// Run SQL as the superuser in database `db`.
        pub fn psql(&self, db: &str, sql: &str) -> Result<String, String> {
            let out = Command::new(self.bin.join("psql"))
                .args([
                    "-X",
                    "-q",
                    "-t",
                    "-A",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-h",
                    "127.0.0.1",
                ])
                .args([
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                    "-d",
                    db,
                    "-c",
                    sql,
                ])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("psql: {e}"))?;
            if !out.status.success() {
                return Err(format!("psql: {}", String::from_utf8_lossy(&out.stderr)));
            }
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }

        /// A new, empty database; its name.
        pub fn create_database(&self) -> String {
            static N: AtomicU64 = AtomicU64::new(0);
            let name = format!(
                "t_{}_{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            );
            self.psql("postgres", &format!("CREATE DATABASE {name}"))
                .unwrap();
            name
        }

        pub fn url(&self, db: &str) -> String {
            format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
        }
    }

    impl Drop for Cluster {
        fn drop(&mut self) {
            let mut c = server_command(&self.bin.join("pg_ctl"));
            c.arg("-D")
                .arg(self.data())
                .args(["-m", "immediate", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let _ = c.status();
            if let Some(mut w) = self.watchdog.take() {
                let _ = w.kill();
                let _ = w.wait();
            }
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }

    /// The test process's cluster, started on first use.
    pub fn shared() -> &'static Cluster {
        static SHARED: OnceLock<Cluster> = OnceLock::new();
        SHARED.get_or_init(|| Cluster::start().unwrap_or_else(|e| panic!("PostgreSQL: {e}")))
    }

    /// The URL of the database that belongs to the test folder `dir`, created
    /// on first use and written to `dir/pg_url`, so every store opened on `dir`
    /// (in this process or a child) sees the same database.
    pub fn url_for(dir: &Path) -> String {
        static LOCK: Mutex<()> = Mutex::new(());
        let _guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let file = dir.join("pg_url");
        if let Ok(url) = std::fs::read_to_string(&file) {
            return url;
        }
        let cluster = shared();
        let url = cluster.url(&cluster.create_database());
        std::fs::write(&file, &url).unwrap();
        url
    }
}
