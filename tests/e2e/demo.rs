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
