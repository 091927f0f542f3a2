//! Snapshot tests of the diagnostics: every folder under `fixtures/invalid/` and
//! `fixtures/warnings/` holds a workflow and `expected.txt`, the exact output of
//! `agentfile validate` run in that folder (arguments from `args` when present,
//! else `validate Agentfile`). `fixtures/valid/` folders also hold the
//! `inspect` output as JSON, Mermaid and text.
//!
//! Regenerate after an intended change with `UPDATE_SNAPSHOTS=1 cargo test`, then
//! read the diff: the snapshots are the spec of what users see.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use agentfile::diag::{CODES, Severity};

use crate::support::bin;

fn cases(group: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(group);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

fn args(case: &Path) -> Vec<String> {
    match std::fs::read_to_string(case.join("args")) {
        Ok(a) => a.split_whitespace().map(str::to_owned).collect(),
        Err(_) => vec!["validate".into(), "Agentfile".into()],
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(case: &Path, args: &[String]) -> Run {
    let out = Command::new(bin())
        .args(args)
        .current_dir(case)
        .env("NO_COLOR", "1")
        .output()
        .expect("run agentfile");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn updating() -> bool {
    std::env::var_os("UPDATE_SNAPSHOTS").is_some()
}

/// Compare `actual` with the snapshot file, or write it when updating.
fn check_snapshot(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if updating() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    match std::fs::read_to_string(path) {
        Ok(expected) if expected == actual => {}
        Ok(expected) => failures.push(format!(
            "{}: output differs\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        )),
        Err(_) => failures.push(format!(
            "{}: missing snapshot; run with UPDATE_SNAPSHOTS=1",
            path.display()
        )),
    }
}

/// Codes seen in `validate --format json` for a case.
fn codes(case: &Path) -> Vec<(String, String)> {
    let mut a = args(case);
    a.extend(["--format".to_owned(), "json".to_owned()]);
    let r = run(case, &a);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: JSON output does not parse: {e}\n{}",
            case.display(),
            r.stdout
        )
    });
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["diagnostics"].as_array().unwrap().clone())
        .map(|d| {
            (
                d["code"].as_str().unwrap().to_owned(),
                d["severity"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn invalid_workflows_report_exact_diagnostics() {
    let cases = cases("invalid");
    assert!(cases.len() >= 40, "only {} invalid fixtures", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let r = run(case, &args(case));
        if r.code != 2 {
            failures.push(format!(
                "{}: exit code {} (want 2)\n{}{}",
                case.display(),
                r.code,
                r.stdout,
                r.stderr
            ));
        }
        if !r.stdout.contains(": error: ") {
            failures.push(format!("{}: no error reported", case.display()));
        }
        check_snapshot(&case.join("expected.txt"), &r.stdout, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn warnings_do_not_fail_validation() {
    let mut failures = Vec::new();
    for case in &cases("warnings") {
        let r = run(case, &args(case));
        if r.code != 0 {
            failures.push(format!(
                "{}: exit code {} (want 0)\n{}",
                case.display(),
                r.code,
                r.stdout
            ));
        }
        if !r.stdout.contains(": warning: ") || r.stdout.contains(": error: ") {
            failures.push(format!(
                "{}: want warnings and no errors\n{}",
                case.display(),
                r.stdout
            ));
        }
        check_snapshot(&case.join("expected.txt"), &r.stdout, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn valid_workflows_inspect_as_snapshotted() {
    let mut failures = Vec::new();
    for case in &cases("valid") {
        let args = args(case);
        // The file `args` validates (`Agentfile` unless it says otherwise).
        let file = args.last().cloned().unwrap_or_else(|| "Agentfile".into());
        let r = run(case, &args);
        // A valid file with warnings (a third party's example) snapshots them.
        let expected = case.join("expected.txt");
        if expected.exists() {
            if r.code != 0 {
                failures.push(format!("{}: want exit 0\n{}", case.display(), r.stdout));
            }
            check_snapshot(&expected, &r.stdout, &mut failures);
        } else if r.code != 0 || r.stdout.contains("warning") {
            failures.push(format!(
                "{}: want clean validation\n{}",
                case.display(),
                r.stdout
            ));
        }
        // `inspect` with the same flags (`--extensions`), the file last.
        let inspect = |more: &[&str]| -> Vec<String> {
            let mut a: Vec<String> = vec!["inspect".into()];
            a.extend(args.iter().skip(1).filter(|x| **x != file).cloned());
            a.push(file.clone());
            a.extend(more.iter().map(|s| (*s).to_owned()));
            a
        };
        let r = run(case, &inspect(&["--format", "json"]));
        check_snapshot(&case.join("inspect.json"), &r.stdout, &mut failures);
        let r = run(case, &inspect(&["--format", "mermaid"]));
        check_snapshot(&case.join("inspect.mmd"), &r.stdout, &mut failures);
        let r = run(case, &inspect(&[]));
        check_snapshot(&case.join("inspect.txt"), &r.stdout, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Every diagnostic class has at least one fixture, with the declared severity,
/// and no fixture emits a code missing from the registry.
#[test]
fn every_diagnostic_class_has_a_fixture() {
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for group in ["invalid", "warnings"] {
        for case in cases(group) {
            seen.extend(codes(&case));
        }
    }
    let registry: BTreeSet<(String, String)> = CODES
        .iter()
        .map(|(c, s, _)| {
            let sev = match s {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            ((*c).to_owned(), sev.to_owned())
        })
        .collect();
    let missing: Vec<_> = registry.difference(&seen).collect();
    let unknown: Vec<_> = seen.difference(&registry).collect();
    assert!(
        missing.is_empty(),
        "diagnostic classes without a fixture: {missing:?}"
    );
    assert!(
        unknown.is_empty(),
        "codes emitted but not in diag::CODES: {unknown:?}"
    );
}
