//! Shared helpers for the session store tests: temporary folders under
//! `target/`, both backends behind one switch, and event logs to append.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use agentfile::protocol::events::{Event, EventBody, LoopStop, ToolCallInfo, Usage, rfc3339};
use agentfile::session::{
    FileStore, Owner, OwnerRecord, SessionMeta, SessionStatus, SessionStore, SqliteStore,
};
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

/// The two backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    File,
}

impl Kind {
    /// A store in `dir` (the same files for every call with the same `dir`).
    pub fn open(self, dir: &Path) -> Box<dyn SessionStore> {
        match self {
            Kind::Sqlite => Box::new(SqliteStore::open(&dir.join("sessions.db")).unwrap()),
            Kind::File => Box::new(FileStore::open(&dir.join("sessions")).unwrap()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Sqlite => "sqlite",
            Kind::File => "file",
        }
    }

    pub fn parse(name: &str) -> Kind {
        match name {
            "sqlite" => Kind::Sqlite,
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
            body: EventBody::LlmRequest {
                model: "fake-model".into(),
                turn: seq as u32,
                messages: 3,
                tools: 4,
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
