//! `agentfile test` (CONTRACT §19): the test file of each format's example
//! passes offline, a failing expectation exits 1 with the expected and actual
//! values, an invalid test file exits 2 with `file:line:col`, an edited prompt
//! names the request field that left the cassette, `--record` writes a
//! cassette, the user's files never change, and the JUnit report is read back
//! by a JUnit parser (Python's `junitparser`).

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{self, copy_dir, repo, tmp_dir};

fn test_cmd(dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(support::bin());
    c.arg("test")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .env("NO_COLOR", "1");
    for (k, _) in std::env::vars() {
        if k.starts_with("AGENTFILE_") || k.ends_with("_API_KEY") {
            c.env_remove(k);
        }
    }
    c.output().unwrap()
}

fn example(name: &str) -> std::path::PathBuf {
    let dir = tmp_dir(&format!("test-cmd-{name}"));
    copy_dir(
        &repo().join("examples").join(name),
        &dir,
        &[".agentfile", "outputs", "REPORT.md", "artifacts"],
    );
    dir
}

/// A listing of a folder's files with their contents, to see that nothing
/// changed.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn each_formats_example_passes_its_tests_offline_and_changes_no_file() {
    for name in [
        "demo",
        "workflow-md",
        "workflow-yaml",
        "agent-md",
        "agentrc",
    ] {
        let dir = example(name);
        let before = snapshot(&dir);
        let o = test_cmd(&dir, &[]);
        let text = support::text(&o);
        assert_eq!(o.status.code(), Some(0), "{name}: {text}");
        assert!(
            text.contains("1 passed, 0 failed, 0 errors"),
            "{name}: {text}"
        );
        assert_eq!(
            snapshot(&dir),
            before,
            "{name}: the test changed the user's files"
        );
    }
}

#[test]
fn a_failing_expectation_exits_1_with_the_expected_and_actual_values() {
    let dir = example("workflow-md");
    let file = dir.join("tests/summarize.test.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "{ contains: \"release\" }",
            "{ equals: \"a different answer\" }",
        ),
    )
    .unwrap();
    let o = test_cmd(&dir, &[]);
    let out = support::text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("outputs.result"), "{out}");
    assert!(out.contains("expected \"a different answer\""), "{out}");
    assert!(
        out.contains("actual   \"A note about the release, and the workflow that reads it.\""),
        "{out}"
    );
    assert!(out.contains("0 passed, 1 failed"), "{out}");
}

#[test]
fn an_invalid_test_file_exits_2_with_line_and_column_and_runs_nothing() {
    let dir = example("workflow-md");
    let file = dir.join("tests/summarize.test.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("status: completed", "stauts: completed"),
    )
    .unwrap();
    let o = test_cmd(&dir, &[]);
    let out = support::text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("tests/summarize.test.yaml:8:7: error: unknown key `stauts`"),
        "{out}"
    );
    assert!(out.contains("did you mean `status`?"), "{out}");
    assert!(!out.contains("passed"), "nothing ran: {out}");
    // `validate` reads test files the same way.
    let v = Command::new(support::bin())
        .args(["validate", "tests/summarize.test.yaml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(v.status.code(), Some(2), "{}", support::text(&v));
    assert!(support::text(&v).contains(":8:7:"), "{}", support::text(&v));
}

#[test]
fn an_edited_prompt_names_the_request_field_the_cassette_does_not_hold() {
    let dir = example("workflow-md");
    let wf = dir.join(".workflows/summarize/WORKFLOW.md");
    let text = std::fs::read_to_string(&wf).unwrap();
    std::fs::write(&wf, text.replace("in one sentence", "in two sentences")).unwrap();
    let o = test_cmd(&dir, &[]);
    let out = support::text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("1 error"), "{out}");
    assert!(
        out.contains(
            "differs from the next recorded request (line 1) at `messages[0].content[0].text`"
        ),
        "{out}"
    );
    assert!(out.contains("got \"Say in two sentences"), "{out}");
}

#[test]
fn record_writes_the_cassette_that_replay_then_passes() {
    let dir = example("agentrc");
    std::fs::remove_dir_all(dir.join("tests/cassettes")).unwrap();
    // Replay without the cassette: the file is invalid (it names a missing one).
    let o = test_cmd(&dir, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", support::text(&o));
    assert!(
        support::text(&o).contains("cassettes/notes-reader.jsonl"),
        "{}",
        support::text(&o)
    );
    let o = test_cmd(
        &dir,
        &["--record", "--provider", "fake", "--script", "model.json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", support::text(&o));
    let cassette = std::fs::read_to_string(dir.join("tests/cassettes/notes-reader.jsonl")).unwrap();
    assert_eq!(cassette.lines().count(), 2, "two model calls: {cassette}");
    let o = test_cmd(&dir, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", support::text(&o));
}

#[test]
fn the_junit_report_is_read_back_by_a_junit_parser() {
    let Ok(python) = std::env::var("AGENTFILE_PY") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "AGENTFILE_PY is not set: scripts/test.sh installs the venv with junitparser"
        );
        eprintln!("skipped: AGENTFILE_PY is not set");
        return;
    };
    let dir = example("workflow-md");
    // Two cases: one passes, one fails.
    let file = dir.join("tests/summarize.test.yaml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(
        "  - name: expects <another> & \"quoted\" answer\n    cassette: cassettes/summarize.jsonl\n    expect:\n      outputs:\n        result: { matches: \"^Nothing\" }\n",
    );
    std::fs::write(&file, text).unwrap();
    let o = test_cmd(
        &dir,
        &["--format", "junit", "--output", "report.xml", "--jobs", "2"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", support::text(&o));
    assert!(
        support::text(&o).contains("1 passed, 1 failed, 0 errors (report in report.xml)"),
        "{}",
        support::text(&o)
    );
    let read = Command::new(python)
        .current_dir(&dir)
        .args([
            "-c",
            "import junitparser, json\n\
             xml = junitparser.JUnitXml.fromfile('report.xml')\n\
             cases = [(c.name, [type(r).__name__ for r in c.result]) for s in xml for c in s]\n\
             print(json.dumps({'tests': xml.tests, 'failures': xml.failures, 'errors': xml.errors, 'cases': sorted(cases)}))",
        ])
        .output()
        .unwrap();
    assert!(read.status.success(), "{}", support::text(&read));
    let v: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(v["tests"], 2, "{v}");
    assert_eq!(v["failures"], 1, "{v}");
    assert_eq!(v["errors"], 0, "{v}");
    assert_eq!(
        v["cases"],
        serde_json::json!([
            ["expects <another> & \"quoted\" answer", ["Failure"]],
            ["says what the files are", []]
        ]),
        "{v}"
    );
}

/// `--live` asks the configured model, and a case's judge grades an output
/// with it: here the scripted model, which answers the workflow's request in
/// order and the judge's by what it is asked (`when`).
#[test]
fn live_runs_ask_the_model_and_the_judge_grades_an_output() {
    let dir = example("workflow-md");
    let file = dir.join("tests/summarize.test.yaml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("    judge: { output: result, criteria: \"names the release\" }\n");
    std::fs::write(&file, text).unwrap();
    // The script lives outside the workspace: a file added there would change
    // what `ls` shows the model, and the cassette with it.
    let script = tmp_dir("test-cmd-live-script").join("live.json");
    for (verdict, code, shown) in [
        (
            r#"{\"pass\": true, \"reason\": \"it names the release\"}"#,
            0,
            "1 passed",
        ),
        (
            r#"{\"pass\": false, \"reason\": \"it never says which release\"}"#,
            1,
            "judged not met: it never says which release",
        ),
    ] {
        std::fs::write(
            &script,
            format!(
                r#"[{{"when": ["You grade one output"], "text": "{verdict}"}},
                    {{"text": "A note about the release, and the workflow that reads it."}}]"#
            ),
        )
        .unwrap();
        let o = test_cmd(
            &dir,
            &[
                "--live",
                "--provider",
                "fake",
                "--script",
                script.to_str().unwrap(),
            ],
        );
        let out = support::text(&o);
        assert_eq!(o.status.code(), Some(code), "{out}");
        assert!(out.contains(shown), "{out}");
    }
    // Replayed, the judge is not asked (it would need a live model).
    let o = test_cmd(&dir, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", support::text(&o));
}
