//! The README's first command — `agentfile run examples/demo` — works on a fresh
//! checkout with no API key: the model's answers replay from the recorded
//! cassette and the tools run for real. Run here on a copy of the demo folder so
//! the checkout stays clean. If this fails after a change to prompts or tool
//! schemas, re-record with `scripts/record-demo.sh`.

use std::process::Command;

use crate::support;

#[test]
fn the_demo_runs_offline_from_its_cassette() {
    let src = support::repo().join("examples/demo");
    let dir = support::tmp_dir("demo");
    support::copy_dir(&src, &dir.join("demo"), &[".agentfile", "REPORT.md"]);
    for round in 0..2 {
        let o = Command::new(support::bin())
            .args(["run", "demo", "--output", "json"])
            .current_dir(&dir)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(0),
            "round {round}: {stderr}\n{}",
            String::from_utf8_lossy(&o.stdout)
        );
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["status"], "completed");
        assert_eq!(r["outputs"]["report"]["report_path"], "REPORT.md");
        assert_eq!(r["usage"]["tool_calls"], 6);
        let report = std::fs::read_to_string(dir.join("demo/REPORT.md")).unwrap();
        assert!(report.contains("tally.py"), "{report}");
    }
}

/// The demo keeps its session store in its own folder: a run in text says
/// so at the end — the session, where it is stored, and the command that
/// shows it from where the run was started (which works) — and a run with
/// `--output json` keeps its stderr to progress.
#[test]
fn a_run_says_where_its_session_is_stored_and_how_to_see_it() {
    let src = support::repo().join("examples/demo");
    let dir = support::tmp_dir("demo-stored");
    support::copy_dir(&src, &dir.join("demo"), &[".agentfile", "REPORT.md"]);
    let agentfile = |args: &[&str]| {
        Command::new(support::bin())
            .args(args)
            .current_dir(&dir)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let o = agentfile(&["run", "demo"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    let id = last
        .strip_prefix("session ")
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no session line at the end: {stderr}"));
    assert_eq!(
        last,
        format!(
            "session {id} stored in demo/.agentfile/sessions.db — see it with \
             `agentfile sessions show {id} --workspace demo`"
        )
    );
    assert!(dir.join("demo/.agentfile/sessions.db").is_file());
    let shown = agentfile(&["sessions", "show", id, "--workspace", "demo"]);
    assert_eq!(
        shown.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert!(String::from_utf8_lossy(&shown.stdout).contains("status completed"));

    let o = agentfile(&["run", "demo", "--output", "json"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("stored in"));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["status"], "completed");
}
