//! The `validate`, `inspect` and `list` commands, run as a user would run them:
//! the built binary, real files, exit codes and stdout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.env("NO_COLOR", "1");
    c
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The public reference material beside the checkout (`../shared/reference`).
fn reference() -> PathBuf {
    let p = repo().join("../shared/reference");
    assert!(
        p.is_dir(),
        "{} is missing: the tests need shared/ beside the checkout",
        p.display()
    );
    p
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(o)))
}

/// Every `Agentfile` and `*.agent` under a folder.
fn agentfiles(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(agentfiles(&p));
        } else if p.file_name().is_some_and(|n| n == "Agentfile")
            || p.extension().is_some_and(|x| x == "agent")
        {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn every_reference_agentfile_validates() {
    let files = agentfiles(&reference());
    assert!(files.len() >= 8, "found only {files:?}");
    for f in &files {
        // Workflows with a config beside them are validated with it.
        let dir = f.parent().unwrap();
        let mut cmd = bin();
        cmd.arg("validate").arg(f);
        for cfg in ["agent.toml", "agent.json"] {
            if dir.join(cfg).is_file() {
                cmd.arg("--config").arg(dir.join(cfg));
                break;
            }
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}:\n{}", f.display(), stdout(&o));
        assert!(!stdout(&o).contains("error"), "{}", stdout(&o));
    }
}

#[test]
fn reference_configs_load() {
    let r = reference();
    for cfg in [
        "headless-agent-v0.1.0/examples/agent.json",
        "headless-agent-head/examples/agent.toml",
    ] {
        let o = bin()
            .args(["validate", "--config"])
            .arg(r.join(cfg))
            .arg(r.join("headless-agent-v0.1.0/examples/01-hello-world.agent"))
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{cfg}: {}{}",
            stdout(&o),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn inspect_json_of_the_seed_tdd_workflow() {
    let o = bin()
        .args(["inspect", "--format", "json"])
        .arg(reference().join("headless-agent-v0.1.0/brainstorm"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let plan = json(&o);
    assert_eq!(plan["name"], "implement-feature");
    let steps = plan["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[1]["kind"], "loop");
    assert_eq!(steps[1]["within"]["input"], "max_iterations");
    assert_eq!(steps[1]["within"]["default"], 10);
    let analyze = plan["goals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "analyze")
        .unwrap();
    assert_eq!(
        analyze["agents"],
        serde_json::json!(["creative", "devils_advocate"])
    );
    assert_eq!(analyze["reads"], serde_json::json!(["feature_request"]));
    assert_eq!(analyze["source"]["kind"], "file");
    let creative = plan["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "creative")
        .unwrap();
    assert!(
        creative["prompt"]
            .as_str()
            .unwrap()
            .contains("novel solutions")
    );
    assert_eq!(
        plan["inputs"][0],
        serde_json::json!({"name": "feature_request", "default": null, "required": true})
    );
}

#[test]
fn inspect_text_and_mermaid() {
    let path = reference().join("headless-agent-v0.1.0/brainstorm/Agentfile");
    let text = stdout(&bin().arg("inspect").arg(&path).output().unwrap());
    assert!(text.contains("LOOP implementation (at most $max_iterations (default 10) iterations): run_tests → analyze_failures → fix"), "{text}");
    assert!(text.contains("agents creative, devils_advocate"), "{text}");
    let mm = stdout(
        &bin()
            .args(["inspect", "--format", "mermaid"])
            .arg(&path)
            .output()
            .unwrap(),
    );
    assert!(mm.starts_with("flowchart TD\n"), "{mm}");
    assert!(
        mm.contains("-. \"until converged, ≤ $max_iterations (default 10)\" .->"),
        "{mm}"
    );
}

#[test]
fn inspect_of_an_invalid_file_explains_on_stderr() {
    let o = bin()
        .arg("inspect")
        .arg(repo().join("fixtures/invalid/undefined-goal/Agentfile"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("undefined goal `analyse`"));
}

#[test]
fn validate_many_files_reports_all_and_fails_on_any_error() {
    let good = reference().join("headless-agent-v0.1.0/examples/01-hello-world.agent");
    let bad = repo().join("fixtures/invalid/every-error-at-once/Agentfile");
    let o = bin().arg("validate").arg(&good).arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let out = stdout(&o);
    assert!(out.contains("01-hello-world.agent: ok"), "{out}");
    assert!(out.contains("invalid — 9 errors"), "{out}");

    let o = bin()
        .args(["validate", "--format", "json"])
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let r = json(&o);
    assert_eq!(r["ok"], false);
    assert_eq!(r["errors"], 9);
    assert_eq!(r["files"][0]["ok"], true);
    let d = &r["files"][1]["diagnostics"][0];
    assert_eq!(d["code"], "missing-name");
    assert_eq!(d["line"], 1);
    assert_eq!(d["column"], 1);
}

#[test]
fn missing_path_and_bad_flags_are_usage_errors() {
    let o = bin()
        .args(["validate", "/no/such/Agentfile"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stdout(&o).contains("cannot read workflow file"),
        "{}",
        stdout(&o)
    );
    let o = bin()
        .args(["validate", "--format", "yaml", "x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("yaml"));
    let o = bin().arg("frobnicate").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn dialect_flag_overrides_detection() {
    let f = repo().join("fixtures/invalid/ambiguous-dialect/Agentfile");
    let o = bin()
        .args(["validate", "--dialect", "agentfile"])
        .arg(&f)
        .output()
        .unwrap();
    // Read as the DSL, `CMD` is now an unknown statement rather than ambiguous.
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("found `CMD`"), "{}", stdout(&o));
}

#[test]
fn config_beside_the_workflow_checks_profiles() {
    let dir = repo().join("fixtures/valid/full-dialect");
    let o = bin()
        .arg("validate")
        .arg(dir.join("Agentfile"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        !stdout(&o).contains("unchecked-profile") && !stdout(&o).contains("warning"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn list_finds_every_workflow_with_inputs() {
    let o = bin()
        .args(["list", "--format", "json"])
        .arg(reference())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let l = json(&o);
    let ws = l["workflows"].as_array().unwrap();
    let tdd = ws
        .iter()
        .find(|w| w["name"] == "implement-feature")
        .unwrap();
    assert_eq!(tdd["valid"], true);
    assert_eq!(
        tdd["inputs"][1],
        serde_json::json!({"name": "max_iterations", "default": "10", "required": false})
    );
    assert!(ws.iter().any(|w| w["dialect"] == "workflow-yaml"), "{l:#}");
    assert!(ws.iter().filter(|w| w["dialect"] == "agentfile").count() >= 8);

    let text = stdout(&bin().arg("list").arg(reference()).output().unwrap());
    assert!(text.contains("implement-feature"), "{text}");
    assert!(
        text.contains("inputs: feature_request, max_iterations=10"),
        "{text}"
    );
    assert!(text.contains("not supported yet"), "{text}");
}
