//! Sessions survive a crash: a multi-goal workflow (RUN, LOOP, RUN) runs against
//! the fake provider and is killed with SIGKILL at 22 points spread across the
//! run; each is resumed with `agentfile sessions resume`, and must end with the
//! same outputs as an uninterrupted run, without asking the model again for any
//! goal that had completed before the kill, and with a sound database.
//!
//! The fake model answers by *what it is asked* (rules matching the goal named
//! in the prompt), not by call order, because a resumed run asks again what the
//! interrupted goal had asked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentfile::llm::fake::{FakeReply, FakeServer};
use agentfile::session::SessionStore;
use agentfile::session::sqlite::SqliteStore;
use serde_json::{Value, json};

const KEY_VAR: &str = "AGENTFILE_CRASH_KEY";
const GOALS: &[&str] = &["g1", "g2", "g3", "check", "fix", "g4", "g5"];
const WORKFLOW: &str = "NAME crashy\n\
GOAL g1 \"Write part one\"\nGOAL g2 \"Write part two after $g1\"\nGOAL g3 \"Write part three\"\n\
GOAL check \"Check the parts\"\nGOAL fix \"Fix what check found\"\n\
GOAL g4 \"Summarise $fix\"\nGOAL g5 \"Conclude\"\n\
RUN first USING g1, g2, g3\nLOOP refine USING check, fix WITHIN 3\nRUN last USING g4, g5\n";

/// Each goal: first a `write` of `<goal>.txt`, then (once the tool result is in
/// the conversation) a fixed answer. Loop goals answer the same every
/// iteration, so the loop converges on unchanged outputs at iteration 2.
fn model() -> Vec<FakeReply> {
    let mut rules = Vec::new();
    for g in GOALS {
        let marker = format!("goal `{g}`");
        rules.push(
            FakeReply::text(format!("{g} is done"))
                .when([marker.clone(), "\"role\":\"tool\"".to_owned()])
                .with_latency(Duration::from_millis(25)),
        );
        rules.push(
            FakeReply::tool_call(
                "write",
                json!({"path": format!("{g}.txt"), "content": format!("{g}\n")}),
            )
            .when([marker])
            .with_latency(Duration::from_millis(25)),
        );
    }
    rules
}

fn tmp(name: &str) -> PathBuf {
    let d = crate::support::tmp("crash", name);
    std::fs::create_dir_all(d.join("ws")).unwrap();
    d
}

struct Setup {
    dir: PathBuf,
    server: FakeServer,
}

fn setup(rt: &tokio::runtime::Runtime, name: &str) -> Setup {
    setup_with(rt, name, model())
}

fn setup_with(rt: &tokio::runtime::Runtime, name: &str, replies: Vec<FakeReply>) -> Setup {
    let dir = tmp(name);
    std::fs::write(dir.join("Agentfile"), WORKFLOW).unwrap();
    std::fs::write(
        dir.join("policy.toml"),
        "[write]\nallow = [\"$WORKSPACE/**\"]\n",
    )
    .unwrap();
    let server = rt.block_on(FakeServer::start(replies)).unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[agent]\nworkspace = \"ws\"\n[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    Setup { dir, server }
}

fn agentfile(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.current_dir(dir)
        .env(KEY_VAR, "test-key-0123456789")
        .env("NO_COLOR", "1");
    c
}

fn result(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not a result ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Goals named in the prompt of each request, in order.
fn goals_asked(server: &FakeServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r| {
            let body = r.body.to_string();
            GOALS
                .iter()
                .find(|g| body.contains(&format!("goal `{g}`")))
                .map(|g| g.to_string())
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn killed_runs_resume_to_the_same_outputs() {
    let rt = tokio::runtime::Runtime::new().unwrap();

    // The reference: one uninterrupted run.
    let clean = setup(&rt, "clean");
    let started = Instant::now();
    let o = agentfile(&clean.dir)
        .args(["run", "Agentfile", "--output", "json"])
        .output()
        .unwrap();
    let total = started.elapsed();
    let reference = result(&o);
    assert_eq!(reference["status"], "completed", "{reference:#}");
    let clean_calls = clean.server.request_count();
    assert_eq!(
        clean_calls,
        2 * (GOALS.len() + 2),
        "two turns per goal, loop goals twice"
    );

    let points = 22;
    let mut resumed_runs = 0;
    for i in 1..=points {
        let s = setup(&rt, &format!("kill{i}"));
        let mut child = agentfile(&s.dir)
            .args(["run", "Agentfile", "--output", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Spread the kills across the run by its progress — the model calls
        // it has made — not by the clean run's wall time, which a busy
        // machine stretches and shrinks: kill i lands just after call
        // `target` reached the model (1 to the next-to-last call), a
        // millisecond or two later for some.
        let target = 1 + (i - 1) * (clean_calls - 1) / points;
        let deadline = Instant::now() + total.max(Duration::from_secs(1)) * 20;
        while s.server.request_count() < target && Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(Duration::from_millis((i % 3) as u64));
        let _ = child.kill(); // SIGKILL
        let finished = child.wait_with_output().unwrap();
        let calls_at_kill = s.server.request_count();

        let list = agentfile(&s.dir)
            .args(["sessions", "list", "--format", "json"])
            .output()
            .unwrap();
        let sessions: Value = serde_json::from_slice(&list.stdout).unwrap_or(json!([]));
        let Some(id) = sessions
            .as_array()
            .and_then(|a| a.first())
            .and_then(|m| m["id"].as_str())
            .map(str::to_owned)
        else {
            // Killed before the session existed: nothing to resume; a fresh run must work.
            let o = agentfile(&s.dir)
                .args(["run", "Agentfile", "--output", "json"])
                .output()
                .unwrap();
            assert_eq!(result(&o)["outputs"], reference["outputs"]);
            continue;
        };
        if finished.status.success() {
            // The run beat the kill; it must be complete and correct.
            assert_eq!(result(&finished)["outputs"], reference["outputs"]);
            continue;
        }
        if sessions[0]["status"] == "completed" {
            // Killed after `run_complete` was stored but before the process
            // exited: the run is over, and there is nothing to resume.
            continue;
        }

        // Goals that had completed before the kill, from the stored events.
        let show = agentfile(&s.dir)
            .args(["sessions", "show", &id, "--format", "json"])
            .output()
            .unwrap();
        let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
        let completed: Vec<String> = shown["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "goal_complete" && e.get("agent").is_none())
            .map(|e| e["goal"].as_str().unwrap().to_owned())
            .collect();

        let o = agentfile(&s.dir)
            .args(["sessions", "resume", &id, "--output", "json"])
            .output()
            .unwrap();
        let r = result(&o);
        assert_eq!(
            r["status"],
            "completed",
            "kill {i}: {r:#}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(r["outputs"], reference["outputs"], "kill {i}");
        assert_eq!(r["session_id"], id.as_str());
        resumed_runs += 1;

        // No completed goal was asked again after the kill. (Loop goals are
        // asked again only for iterations that had not completed.)
        let asked_after: Vec<String> = goals_asked(&s.server)[calls_at_kill..].to_vec();
        for g in &completed {
            if g == "check" || g == "fix" {
                continue;
            }
            assert!(
                !asked_after.contains(g),
                "kill {i}: completed goal `{g}` was asked again: {asked_after:?}"
            );
        }
        // Only calls of goals the store did not see complete may be repeated:
        // the interrupted goal's (at most its two turns) and any call whose
        // answer was not stored yet when the process died (the run's events
        // are committed in the background, so the store holds a prefix of
        // them, and a call sent just before the kill is not in it).
        let stored_answers = shown["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "llm_response")
            .count();
        let unrecorded = calls_at_kill.saturating_sub(stored_answers);
        let total_calls = s.server.request_count();
        assert!(
            total_calls <= clean_calls + unrecorded + 2,
            "kill {i}: {total_calls} model calls, clean run made {clean_calls}, {unrecorded} unrecorded at the kill"
        );

        // The database is sound.
        let store = SqliteStore::open(&s.dir.join("ws/.agentfile/sessions.db")).unwrap();
        assert!(
            store.integrity_check().unwrap().is_empty(),
            "kill {i}: integrity_check failed"
        );
        let events = store.events(&id, 0).unwrap();
        for (n, e) in events.iter().enumerate() {
            assert_eq!(e.seq, n as u64 + 1, "kill {i}: seq is dense");
        }
    }
    eprintln!("{resumed_runs} of {points} kills interrupted a run");
    assert!(
        resumed_runs >= 15,
        "only {resumed_runs} of {points} kills interrupted a run"
    );
}

/// The first session listed, as JSON.
fn first_session(dir: &Path) -> Option<Value> {
    let list = agentfile(dir)
        .args(["sessions", "list", "--format", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&list.stdout).ok()?;
    v.as_array()?.first().cloned()
}

/// A run killed with SIGKILL never writes its end; its session must not say
/// `running` forever. `sessions list` and `sessions show` see that its owner
/// is gone and say `interrupted` (resumable; `killed_runs_resume_to_the_same_outputs`
/// resumes such sessions).
#[test]
fn a_killed_run_reads_interrupted() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A slow answer, so the kill lands while the model is asked.
    let replies = vec![FakeReply::text("slow").with_latency(Duration::from_secs(600))];
    let s = setup_with(&rt, "sigkill-status", replies);
    let mut child = agentfile(&s.dir)
        .args(["run", "Agentfile", "--output", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the run is under way: its session says running.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if first_session(&s.dir).is_some_and(|m| m["status"] == "running") {
            break;
        }
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let db = s.dir.join("ws/.agentfile/sessions.db");
    let stored = || -> String {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.query_row("SELECT status FROM sessions", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(stored(), "running", "what the killed process left behind");

    // A server starting in that workspace writes the truth down.
    let served = agentfile(&s.dir)
        .args(["serve", "--workspace", "ws"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(served.success());
    assert_eq!(stored(), "interrupted");

    let meta = first_session(&s.dir).unwrap();
    assert_eq!(meta["status"], "interrupted", "{meta:#}");
    let id = meta["id"].as_str().unwrap().to_owned();
    let show = agentfile(&s.dir)
        .args(["sessions", "show", &id, "--format", "json"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["session"]["status"], "interrupted");
    let text = agentfile(&s.dir)
        .args(["sessions", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("interrupted"), "{text}");
}

/// A workflow whose one goal makes the model write a file of `size` bytes: the
/// call's arguments (a `tool_call` event of that size) are what fills the disk.
fn filling(rt: &tokio::runtime::Runtime, name: &str, size: usize, session: &str) -> Setup {
    let replies = vec![
        FakeReply::text("written").when(["\"role\":\"tool\""]),
        FakeReply::tool_call(
            "write",
            json!({"path": "big.txt", "content": "x".repeat(size)}),
        ),
    ];
    let s = setup_with(rt, name, replies);
    std::fs::write(
        s.dir.join("Agentfile"),
        "NAME filler\nGOAL fill \"Write big.txt\"\nRUN main USING fill\n",
    )
    .unwrap();
    let toml = std::fs::read_to_string(s.dir.join("agent.toml")).unwrap();
    std::fs::write(s.dir.join("agent.toml"), format!("{toml}{session}")).unwrap();
    s
}

/// What a run that filled the disk must look like: failed (exit 1) with one
/// clear "disk full" error, not one per event.
fn assert_failed_once_for_disk_full(o: &Output) {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    let r = result(o);
    assert_eq!(r["status"], "failed", "{r:#}");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.contains("disk full"), "{error}");
    let mentions = stdout.matches("disk full").count() + stderr.matches("disk full").count();
    assert_eq!(mentions, 1, "{stdout}\n{stderr}");
}

/// Unmounts a tmpfs when dropped, even when the test fails.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The SQLite store on a real full disk (a 1 MiB tmpfs, so this needs root to
/// mount it; elsewhere it says so and checks nothing).
#[test]
fn a_full_disk_fails_the_run_once_and_keeps_the_database() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let full = tmp("full-mount");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&full)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let _mount = Mount(full.clone());
    let db = full.join("sessions.db");
    let s = filling(
        &rt,
        "full-sqlite",
        2 << 20,
        &format!("[session]\npath = \"{}\"\n", db.display()),
    );
    let o = agentfile(&s.dir)
        .args(["run", "Agentfile", "--output", "json"])
        .output()
        .unwrap();
    assert_failed_once_for_disk_full(&o);

    // What was stored before is intact and readable.
    let store = SqliteStore::open(&db).unwrap();
    assert!(store.integrity_check().unwrap().is_empty());
    let meta = &store.list(None, 1).unwrap()[0];
    let events = store.events(&meta.id, 0).unwrap();
    assert_eq!(events[0].kind(), "run_started");
    for (n, e) in events.iter().enumerate() {
        assert_eq!(e.seq, n as u64 + 1);
    }
    // Its end could not be written; its owner is gone, so it is resumable.
    assert_eq!(first_session(&s.dir).unwrap()["status"], "interrupted");
}

/// The file store under a file size limit (`ulimit -f`, which needs no
/// privileges): the write that does not fit fails with EFBIG, reported as a
/// full disk, and the log keeps only whole events.
#[test]
fn a_file_size_limit_fails_the_run_once_and_keeps_the_log() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let s = filling(
        &rt,
        "full-file",
        2 << 20,
        "[session]\nstore = \"file\"\npath = \"sessions\"\n",
    );
    // 512 KiB per file; SIGXFSZ ignored so the write fails instead of killing.
    let o = Command::new("bash")
        .arg("-c")
        .arg("ulimit -f 512; trap '' XFSZ; exec \"$0\" run Agentfile --output json")
        .arg(env!("CARGO_BIN_EXE_agentfile"))
        .current_dir(&s.dir)
        .env(KEY_VAR, "test-key-0123456789")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_failed_once_for_disk_full(&o);
    let store = agentfile::session::FileStore::open(&s.dir.join("ws/sessions")).unwrap();
    let meta = &store.list(None, 1).unwrap()[0];
    let events = store.events(&meta.id, 0).unwrap();
    assert_eq!(events[0].kind(), "run_started");
    let log = std::fs::read(s.dir.join(format!("ws/sessions/{}.events.jsonl", meta.id))).unwrap();
    assert!(log.ends_with(b"\n"), "a torn line was left behind");
    assert_eq!(first_session(&s.dir).unwrap()["status"], "interrupted");
}

/// The same crash and resume through the PostgreSQL store
/// (`AGENTFILE_SESSION_STORE=postgres`, the URL in `AGENTFILE_DATABASE_URL`):
/// a run killed after some goals completed resumes to the reference outputs,
/// without asking again for what had completed, its log dense.
#[test]
fn a_killed_run_resumes_from_postgres() {
    use agentfile::session::{PgStore, SessionStatus};
    if !crate::support::session::pg::available() {
        return;
    }
    let cluster = crate::support::session::pg::shared();
    let url = cluster.url(&cluster.create_database());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let on_pg = |dir: &Path| {
        let mut c = agentfile(dir);
        c.env("AGENTFILE_SESSION_STORE", "postgres")
            .env("AGENTFILE_DATABASE_URL", &url);
        c
    };

    let clean = setup(&rt, "pg-clean");
    let o = on_pg(&clean.dir)
        .args(["run", "Agentfile", "--output", "json"])
        .output()
        .unwrap();
    let reference = result(&o);
    assert_eq!(reference["status"], "completed", "{reference:#}");
    assert!(
        !clean.dir.join("ws/.agentfile/sessions.db").exists(),
        "nothing went to SQLite"
    );

    let s = setup(&rt, "pg-kill");
    let store = PgStore::open(&url).unwrap();
    let before: Vec<String> = store
        .list(None, 100)
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    let mut child = on_pg(&s.dir)
        .args(["run", "Agentfile", "--output", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill once two goals have completed.
    let deadline = Instant::now() + Duration::from_secs(120);
    let id = loop {
        assert!(Instant::now() < deadline, "the run never got going");
        let ours = store
            .list(None, 100)
            .unwrap()
            .into_iter()
            .find(|m| !before.contains(&m.id));
        if let Some(m) = ours {
            let done = store
                .events(&m.id, 0)
                .unwrap()
                .iter()
                .filter(|e| e.kind() == "goal_complete" && e.agent.is_none())
                .count();
            if done >= 2 {
                break m.id;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = child.kill();
    let _ = child.wait();
    let calls_at_kill = s.server.request_count();
    let meta = store.get(&id).unwrap();
    if meta.status == SessionStatus::Completed {
        return; // the run beat the kill
    }
    assert_eq!(meta.status, SessionStatus::Interrupted);
    let completed: Vec<String> = store
        .events(&id, 0)
        .unwrap()
        .iter()
        .filter(|e| e.kind() == "goal_complete" && e.agent.is_none())
        .filter_map(|e| e.goal.clone())
        .collect();

    let o = on_pg(&s.dir)
        .args(["sessions", "resume", &id, "--output", "json"])
        .output()
        .unwrap();
    let r = result(&o);
    assert_eq!(
        r["status"],
        "completed",
        "{r:#}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(r["outputs"], reference["outputs"]);
    let asked_after: Vec<String> = goals_asked(&s.server)[calls_at_kill..].to_vec();
    for g in completed.iter().filter(|g| *g != "check" && *g != "fix") {
        assert!(
            !asked_after.contains(g),
            "completed goal `{g}` was asked again: {asked_after:?}"
        );
    }
    for (n, e) in store.events(&id, 0).unwrap().iter().enumerate() {
        assert_eq!(e.seq, n as u64 + 1, "seq is dense");
    }
    assert_eq!(store.get(&id).unwrap().status, SessionStatus::Completed);
}
