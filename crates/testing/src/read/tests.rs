//! The test-file format, read: a valid file, then each problem as the
//! diagnostic a person sees.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::{Matcher, Options, load, parse, parse_with};

/// A folder with a workflow and a cassette, and where a test file goes:
/// `<root>/tests/x.test.yaml`.
struct Project {
    root: PathBuf,
}

impl Project {
    fn new(name: &str) -> Project {
        let root =
            std::env::temp_dir().join(format!("agentfile-testing-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("tests/cassettes")).unwrap();
        std::fs::write(root.join("Agentfile"), "NAME x\n").unwrap();
        std::fs::write(root.join("tests/cassettes/summarise.jsonl"), "").unwrap();
        Project { root }
    }

    fn file(&self) -> PathBuf {
        self.root.join("tests/x.test.yaml")
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Each diagnostic as `line:col code: message [hint]`.
fn problems(p: &Project, text: &str) -> Vec<String> {
    problems_with(p, text, Options::default())
}

fn problems_with(p: &Project, text: &str, options: Options) -> Vec<String> {
    let e = parse_with(&p.file(), text, options).expect_err("the file is invalid");
    e.diagnostics
        .iter()
        .map(|d| {
            let span = d.span.expect("a place");
            let (line, col) = e.sources.file(span.file).line_col(span.start);
            let hint = d
                .hint
                .as_deref()
                .map(|h| format!(" [{h}]"))
                .unwrap_or_default();
            format!("{line}:{col} {}: {}{hint}", d.code, d.message)
        })
        .collect()
}

const VALID: &str = r#"workflow: ../Agentfile
cases:
  - name: summarises the notes
    inputs: { path: notes.md, n: 3 }
    cassette: cassettes/summarise.jsonl
    expect:
      status: completed
      outputs:
        summary: { contains: "tally" }
        count: 3
        title: [{ matches: "^Notes" }, { schema: { type: string } }]
        fields: { equals: { a: [1, 2] } }
      tools: [read]
      max_turns: 10
      max_tokens: 5000
      max_cost_usd: 0.05
    judge: { output: summary, criteria: "names the missing tests" }
  - name: fails without input
    expect: { status: failed }
"#;

#[test]
fn a_valid_file_reads_into_cases() {
    let p = Project::new("valid");
    let t = parse(&p.file(), VALID).expect("valid");
    assert_eq!(t.path, p.file());
    assert_eq!(t.workflow, p.root.join("tests/../Agentfile"));
    assert_eq!(t.cases.len(), 2);
    let c = &t.cases[0];
    assert_eq!(c.name, "summarises the notes");
    assert_eq!(c.line, 3);
    assert_eq!(c.inputs["path"], json!("notes.md"));
    assert_eq!(c.inputs["n"], json!(3));
    assert_eq!(
        c.cassette.as_deref(),
        Some(p.root.join("tests/cassettes/summarise.jsonl").as_path())
    );
    let e = &c.expect;
    assert_eq!(e.status.as_deref(), Some("completed"));
    assert_eq!(e.outputs["summary"], [Matcher::Contains("tally".into())]);
    assert_eq!(e.outputs["count"], [Matcher::Equals(json!(3))]);
    assert_eq!(
        e.outputs["title"],
        [
            Matcher::Matches("^Notes".into()),
            Matcher::Schema(json!({"type": "string"}))
        ]
    );
    assert_eq!(e.outputs["fields"], [Matcher::Equals(json!({"a": [1, 2]}))]);
    assert_eq!(e.tools, ["read"]);
    assert_eq!((e.max_turns, e.max_tokens), (Some(10), Some(5000)));
    assert_eq!(e.max_cost_usd, Some(0.05));
    let j = c.judge.as_ref().expect("judge");
    assert_eq!(
        (j.output.as_str(), j.criteria.as_str()),
        ("summary", "names the missing tests")
    );
    let c = &t.cases[1];
    assert_eq!(
        (c.line, c.cassette.is_none(), c.judge.is_none()),
        (18, true, true)
    );
    assert_eq!(c.expect.status.as_deref(), Some("failed"));
    assert!(c.inputs.is_empty());
}

#[test]
fn load_reads_the_file() {
    let p = Project::new("load");
    std::fs::write(p.file(), format!("\u{feff}{VALID}")).unwrap();
    let t = load(&p.file()).expect("valid");
    assert_eq!(t.cases.len(), 2);
}

#[test]
fn unknown_keys_name_the_close_one() {
    let p = Project::new("unknown");
    let got = problems(
        &p,
        "workflow: ../Agentfile\ncases:\n  - name: a\n    expct: {}\n    inputs: {}\n    expect: { outputs: { s: { contain: x } }, statuss: failed }\n",
    );
    assert_eq!(
        got,
        [
            "4:5 unknown-field: unknown key `expct` in `cases[0]` [did you mean `expect`?]",
            "6:31 unknown-field: unknown key `contain` in `cases[0].expect.outputs.s` [did you mean `contains`?]",
            "6:47 unknown-field: unknown key `statuss` in `cases[0].expect` [did you mean `status`?]",
        ]
    );
    let got = problems(
        &p,
        "workflow: ../Agentfile\ncases:\n  - name: a\n    expect: { outputs: { s: { a: 1 } } }\n    zzzzzz: 1\n",
    );
    assert_eq!(
        got,
        [
            "4:31 unknown-field: unknown key `a` in `cases[0].expect.outputs.s` [a matcher is one of equals, contains, matches, schema; to expect this mapping itself, write `equals: { … }`]",
            "5:5 unknown-field: unknown key `zzzzzz` in `cases[0]` [the keys here are: name, inputs, cassette, expect, judge]",
        ]
    );
}

#[test]
fn wrong_types_say_what_was_wanted() {
    let p = Project::new("types");
    let got = problems(
        &p,
        "workflow: ../Agentfile\ncases:\n  - name: 42\n    inputs: [a]\n    expect:\n      max_turns: ten\n      max_tokens: -1\n      max_cost_usd: cheap\n      tools: read\n",
    );
    assert_eq!(
        got,
        [
            "3:11 test-file: `cases[0].name` must be a string, not a whole number [YAML reads `42` as a whole number; quote it: `name: \"42\"`]",
            "4:13 test-file: `cases[0].inputs` must be a mapping of input names to values, not a list",
            "6:18 test-file: `cases[0].expect.max_turns` must be a whole number, zero or more, not a string",
            "7:19 test-file: `cases[0].expect.max_tokens` must be a whole number, zero or more, not a whole number",
            "8:21 test-file: `cases[0].expect.max_cost_usd` must be a number of dollars, zero or more, not a string",
            "9:14 test-file: `cases[0].expect.tools` must be a list of tool names, not a string",
        ]
    );
}

#[test]
fn cases_need_unique_names() {
    let p = Project::new("names");
    let text = "workflow: ../Agentfile\ncases:\n  - name: a\n  - inputs: {}\n  - name: a\n  - name: \"  \"\n";
    assert_eq!(
        problems(&p, text),
        [
            "4:5 test-file: `cases[1]` has no `name` [add `name:` saying what the case checks]",
            "5:11 duplicate-name: two cases named `a` [a case's name is how reports and `--case` find it: make each one unique in its file]",
            "6:11 test-file: `cases[3].name` is empty",
        ]
    );
    let e = parse(&Project::new("names2").file(), text).unwrap_err();
    let dup = &e.diagnostics[1];
    let note = e
        .sources
        .file(dup.notes[0].0.file)
        .line_col(dup.notes[0].0.start);
    assert_eq!(
        (note, dup.notes[0].1.as_str()),
        ((3, 11), "first named here")
    );
}

#[test]
fn the_file_needs_a_workflow_and_cases() {
    let p = Project::new("top");
    assert_eq!(
        problems(&p, "# nothing\n"),
        [
            "1:1 test-file: the test file is empty [write `workflow: PATH` and a list of `cases:`, each with a `name`]"
        ]
    );
    assert_eq!(
        problems(&p, "- a\n"),
        ["1:1 test-file: a test file must be a mapping of `workflow:` and `cases:`, not a list"]
    );
    assert_eq!(
        problems(&p, "cases: []\n"),
        [
            "1:1 test-file: the test file has no `workflow` [add `workflow: PATH`, relative to the test file's folder]",
            "1:8 test-file: `cases` is empty [add `cases:` with a list of cases, each with a `name` and what to `expect`]",
        ]
    );
    assert_eq!(
        problems(&p, "workflow: ../Agentfile\ncases: {a: 1}\n"),
        ["2:8 test-file: `cases` must be a list, not a mapping"]
    );
}

#[test]
fn unknown_statuses_are_refused() {
    let p = Project::new("status");
    let got = problems(
        &p,
        "workflow: ../Agentfile\ncases:\n  - name: a\n    expect: { status: complete }\n  - name: b\n    expect: { status: green }\n  - name: c\n    expect: { status: fail }\n",
    );
    assert_eq!(
        got,
        [
            "4:23 unknown-status: unknown status `complete` [did you mean `completed`?]",
            "6:23 unknown-status: unknown status `green` [the statuses are: completed, failed, waiting_approval, suspended, cancelled]",
            "8:23 unknown-status: unknown status `fail` [did you mean `failed`?]",
        ]
    );
}

#[test]
fn a_matcher_is_one_kind() {
    let p = Project::new("kinds");
    let got = problems(
        &p,
        "workflow: ../Agentfile\ncases:\n  - name: a\n    expect:\n      outputs:\n        s: {}\n        t: { contains: a, matches: b }\n        u: []\n        v: [x, { contains: y }]\n        w: { contains: 5 }\n",
    );
    assert_eq!(
        got,
        [
            "6:12 test-file: `cases[0].expect.outputs.s` has no matcher [a matcher is one of equals, contains, matches, schema; to expect this mapping itself, write `equals: { … }`]",
            "7:27 test-file: `cases[0].expect.outputs.t` has two matchers in one mapping (`contains`, `matches`) [write a list, one matcher each: `[{ contains: … }, { matches: … }]`]",
            "8:12 test-file: `cases[0].expect.outputs.u` is an empty list of matchers [to expect an empty list, write `equals: []`]",
            "9:13 test-file: `cases[0].expect.outputs.v[0]` in a list of matchers is not a matcher [write each as `{ equals: … }`, `{ contains: … }`, `{ matches: … }` or `{ schema: … }`; to expect the list itself, write `equals: [ … ]`]",
            "10:24 test-file: `cases[0].expect.outputs.w.contains` must be a string, not a whole number [YAML reads `5` as a whole number; quote it: `contains: \"5\"`]",
        ]
    );
}

#[test]
fn patterns_and_schemas_are_checked_when_read() {
    let p = Project::new("compile");
    let got = problems(
        &p,
        "workflow: ../Agentfile\ncases:\n  - name: a\n    expect:\n      outputs:\n        s: { matches: \"tally (\" }\n        t: { schema: { type: 5 } }\n        u: { schema: text }\n",
    );
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(
        got[0].starts_with("6:23 bad-matcher: `cases[0].expect.outputs.s.matches` is not a regular expression: unclosed group ["),
        "{}",
        got[0]
    );
    assert!(
        got[1].starts_with(
            "7:22 bad-matcher: `cases[0].expect.outputs.t.schema` is not a valid JSON Schema: "
        ),
        "{}",
        got[1]
    );
    assert_eq!(
        got[2],
        "8:22 test-file: `cases[0].expect.outputs.u.schema` must be a JSON Schema (a mapping), not a string"
    );
}

#[test]
fn paths_must_exist() {
    let p = Project::new("paths");
    std::fs::write(p.root.join("tests/cassettes/other.jsonl"), "").unwrap();
    let text = "workflow: ../Agentfil\ncases:\n  - name: a\n    cassette: cassettes/summarize.jsonl\n  - name: b\n    cassette: nowhere/zzzzzzzz.jsonl\n";
    assert_eq!(
        problems(&p, text),
        [
            "1:11 missing-file: the workflow `../Agentfil` does not exist [did you mean `../Agentfile`?]",
            "4:15 missing-file: the cassette `cassettes/summarize.jsonl` does not exist [did you mean `cassettes/summarise.jsonl`?]",
            format!(
                "6:15 missing-file: the cassette `nowhere/zzzzzzzz.jsonl` does not exist [paths are relative to the test file's folder (`{}`)]",
                p.root.join("tests").display()
            )
            .as_str(),
        ]
    );
    // Recording writes cassettes: one not there yet is fine then.
    let lenient = Options {
        require_cassettes: false,
    };
    assert_eq!(
        problems_with(&p, text, lenient),
        [
            "1:11 missing-file: the workflow `../Agentfil` does not exist [did you mean `../Agentfile`?]"
        ]
    );
    let fixed = text.replace("Agentfil\n", "Agentfile\n");
    let t = parse_with(&p.file(), &fixed, lenient).expect("valid when recording");
    assert_eq!(
        t.cases[1].cassette.as_deref(),
        Some(p.root.join("tests/nowhere/zzzzzzzz.jsonl").as_path())
    );
    // The workflow is known to `validate` even when the rest is invalid.
    let e = parse(&p.file(), &fixed).unwrap_err();
    assert_eq!(e.workflow, Some(p.root.join("tests/../Agentfile")));
}

#[test]
fn the_judge_needs_output_and_criteria() {
    let p = Project::new("judge");
    assert_eq!(
        problems(
            &p,
            "workflow: ../Agentfile\ncases:\n  - name: a\n    judge: { output: summary }\n"
        ),
        [
            "4:12 test-file: `cases[0].judge` has no `criteria` [add `criteria:`, what the output must do]"
        ]
    );
}

#[test]
fn yaml_errors_and_unreadable_files() {
    let p = Project::new("yaml");
    let got = problems(&p, "workflow: ../Agentfile\ncases: [\n");
    assert_eq!(got.len(), 1);
    assert!(got[0].contains("yaml-syntax"), "{got:?}");
    let got = problems(&p, "workflow: a\nworkflow: b\n");
    assert!(got[0].starts_with("2:1 duplicate-key"), "{got:?}");

    std::fs::write(p.file(), b"workflow: \xff\n").unwrap();
    let e = load(&p.file()).unwrap_err();
    assert_eq!(e.diagnostics[0].code, "not-utf8");
    assert!(
        e.to_string().starts_with(&format!(
            "{}:1:11: error: the file is not UTF-8",
            p.file().display()
        )),
        "{e}"
    );
    let e = load(&p.root.join("tests/none.test.yaml")).unwrap_err();
    assert_eq!(e.diagnostics[0].code, "missing-file");
    let e = load(&p.root.join("tests")).unwrap_err();
    assert_eq!(e.diagnostics[0].code, "unreadable-file");
    assert!(e.to_string().ends_with(": invalid — 1 error"), "{e}");
}

#[test]
fn rendered_diagnostics_point_into_the_file() {
    let e = parse(
        Path::new("tests/x.test.yaml"),
        "workflow: ../Agentfile\ncases:\n  - name: a\n    expct: {}\n",
    )
    .unwrap_err();
    let shown = e.render(agentfile_plan::diag::Style::default());
    assert!(
        shown.starts_with(
            "tests/x.test.yaml:1:11: error: the workflow `../Agentfile` does not exist"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("tests/x.test.yaml:4:5: error: unknown key `expct` in `cases[0]`\n  |\n4 |     expct: {}\n  |     ^^^^^\n  = hint: did you mean `expect`?\n"),
        "{shown}"
    );
    assert!(
        shown.ends_with("tests/x.test.yaml: invalid — 2 errors\n"),
        "{shown}"
    );
}
