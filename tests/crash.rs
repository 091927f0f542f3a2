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
    let d = std::env::temp_dir().join(format!("agentfile-crash-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("ws")).unwrap();
    d
}

struct Setup {
    dir: PathBuf,
    server: FakeServer,
}

fn setup(rt: &tokio::runtime::Runtime, name: &str) -> Setup {
    let dir = tmp(name);
    std::fs::write(dir.join("Agentfile"), WORKFLOW).unwrap();
    std::fs::write(
        dir.join("policy.toml"),
        "[write]\nallow = [\"$WORKSPACE/**\"]\n",
    )
    .unwrap();
    let server = rt.block_on(FakeServer::start(model())).unwrap();
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
        // Spread the kills across the run (its length measured above).
        std::thread::sleep(total.mul_f64(i as f64 / (points + 1) as f64));
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
        // Only the interrupted goal's calls may be repeated: at most one goal's
        // two turns beyond the clean run.
        let total_calls = s.server.request_count();
        assert!(
            total_calls <= clean_calls + 2,
            "kill {i}: {total_calls} model calls, clean run made {clean_calls}"
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
    assert!(
        resumed_runs >= 15,
        "only {resumed_runs} of {points} kills interrupted a run"
    );
}
