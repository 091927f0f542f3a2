//! One example per format under `examples/` (issue 45): each validates and
//! runs offline on the scripted fake model (`--provider fake --script`), on a
//! copy so the checkout stays clean. The Agentfile DSL's example is the demo,
//! which replays a cassette (`demo.rs`).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support;

/// (folder under examples/, the workflow in it, extra run arguments, an output
/// it must produce)
const EXAMPLES: &[(&str, &str, &[&str], &str)] = &[
    (
        "workflow-md",
        ".workflows/summarize",
        &[],
        "A note about the release, and the workflow that reads it.",
    ),
    (
        "workflow-yaml",
        "workflows/release-notes",
        &["--input", "CHANGES=faster start; a scripted model"],
        "outputs/notes.md",
    ),
    (
        "agent-md",
        "reviewer.agent.md",
        &["--input", "task=Review draft.txt"],
        "1. Say what the thing is. 2. Give a date. 3. Name who does it.",
    ),
    (
        "agentrc",
        "Agentfile",
        &["--input", "task=What does notes.txt say?"],
        "The notes say to ship on Friday, with the release notes due Thursday.",
    ),
];

fn bare(dir: &Path) -> Command {
    let mut c = Command::new(support::bin());
    c.current_dir(dir)
        .stdin(std::process::Stdio::null())
        .env("NO_COLOR", "1");
    for (k, _) in std::env::vars() {
        if k.starts_with("AGENTFILE_") || k.ends_with("_API_KEY") {
            c.env_remove(k);
        }
    }
    c
}

#[test]
fn every_format_has_an_example_that_validates_and_runs_offline() {
    for (folder, workflow, args, output) in EXAMPLES {
        let dir = support::tmp_dir(&format!("example-{folder}"));
        support::copy_dir(
            &support::repo().join("examples").join(folder),
            &dir,
            &[".agentfile", "outputs"],
        );
        let v = bare(&dir).args(["validate", workflow]).output().unwrap();
        assert_eq!(
            v.status.code(),
            Some(0),
            "{folder}: {}{}",
            String::from_utf8_lossy(&v.stdout),
            String::from_utf8_lossy(&v.stderr)
        );
        let o = bare(&dir)
            .args([
                "run",
                workflow,
                "--provider",
                "fake",
                "--script",
                "model.json",
            ])
            .args(*args)
            .args(["--output", "json"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{folder}: {err}");
        assert!(!err.contains("warning"), "{folder}: {err}");
        let r: Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{folder}: {e}: {err}"));
        assert_eq!(r["status"], "completed", "{folder}: {r}");
        assert!(r["outputs"].to_string().contains(output), "{folder}: {r}");
    }
}
