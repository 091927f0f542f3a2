//! The outcome of each case, written for a person (text), a program (JSON)
//! or a CI server (JUnit XML). Writing only: the reports are built by whoever
//! ran the cases.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Failure;

/// How one case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed,
    /// Expectations that did not hold (of the last failing run, under
    /// `--repeat`).
    Failed(Vec<Failure>),
    /// The case could not run: an invalid workflow, a model request the
    /// cassette does not hold…
    Error(String),
    /// Not run, and why (a judge without `--live`…).
    Skipped(String),
}

/// One case's report.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseReport {
    /// The test file.
    pub file: PathBuf,
    pub case: String,
    pub outcome: Outcome,
    /// All its runs together.
    pub duration: Duration,
    /// The session of its (last) run, for `agentfile sessions show`.
    pub session: Option<String>,
    /// Runs made (`--repeat N`) and how many passed.
    pub runs: u32,
    pub passed_runs: u32,
}

/// Cases by outcome.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    errors: usize,
    skipped: usize,
    time: Duration,
}

fn tally<'a>(reports: impl IntoIterator<Item = &'a CaseReport>) -> Tally {
    let mut t = Tally::default();
    for r in reports {
        match r.outcome {
            Outcome::Passed => t.passed += 1,
            Outcome::Failed(_) => t.failed += 1,
            Outcome::Error(_) => t.errors += 1,
            Outcome::Skipped(_) => t.skipped += 1,
        }
        t.time += r.duration;
    }
    t
}

/// One line per case (`✓` passed, `✗` failed, `!` error, `-` skipped), each
/// failure under it, then `N passed, M failed, K errors in X.XXs` (the
/// cases' times added up).
pub fn text(reports: &[CaseReport]) -> String {
    let mut out = String::new();
    for r in reports {
        let mark = match r.outcome {
            Outcome::Passed => '✓',
            Outcome::Failed(_) => '✗',
            Outcome::Error(_) => '!',
            Outcome::Skipped(_) => '-',
        };
        let mut about = format!("{:.2}s", r.duration.as_secs_f64());
        if r.runs > 1 {
            about = format!("{}/{} runs passed, {about}", r.passed_runs, r.runs);
        }
        if let Outcome::Skipped(why) = &r.outcome {
            about = format!("skipped: {why}");
        }
        let _ = writeln!(out, "{mark} {} › {} ({about})", r.file.display(), r.case);
        match &r.outcome {
            Outcome::Failed(failures) => {
                for f in failures {
                    let _ = writeln!(out, "    {}", f.what);
                    let _ = writeln!(out, "      expected {}", f.expected);
                    let _ = writeln!(out, "      actual   {}", f.actual);
                }
            }
            Outcome::Error(why) => {
                for line in why.lines() {
                    let _ = writeln!(out, "    {line}");
                }
            }
            Outcome::Passed | Outcome::Skipped(_) => {}
        }
        if let (Some(s), Outcome::Failed(_) | Outcome::Error(_)) = (&r.session, &r.outcome) {
            let _ = writeln!(out, "    session {s}");
        }
    }
    let t = tally(reports);
    let skipped = if t.skipped > 0 {
        format!(", {} skipped", t.skipped)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{} passed, {} failed, {} error{}{skipped} in {:.2}s",
        t.passed,
        t.failed,
        t.errors,
        if t.errors == 1 { "" } else { "s" },
        t.time.as_secs_f64()
    );
    out
}

/// `{"cases": [...], "passed": n, "failed": n, "errors": n, "skipped": n}`;
/// each case has `file`, `case`, `outcome` (passed, failed, error, skipped),
/// `duration_ms`, `session`, `runs`, `passed_runs`, and `failures`, `error`
/// or `reason` as its outcome has them.
pub fn json(reports: &[CaseReport]) -> Value {
    let cases: Vec<Value> = reports
        .iter()
        .map(|r| {
            let mut c = json!({
                "file": r.file.display().to_string(),
                "case": r.case,
                "duration_ms": u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX),
                "session": r.session,
                "runs": r.runs,
                "passed_runs": r.passed_runs,
            });
            let (outcome, key, detail) = match &r.outcome {
                Outcome::Passed => ("passed", None, Value::Null),
                Outcome::Failed(fs) => (
                    "failed",
                    Some("failures"),
                    fs.iter()
                        .map(
                            |f| json!({"what": f.what, "expected": f.expected, "actual": f.actual}),
                        )
                        .collect(),
                ),
                Outcome::Error(e) => ("error", Some("error"), json!(e)),
                Outcome::Skipped(why) => ("skipped", Some("reason"), json!(why)),
            };
            c["outcome"] = json!(outcome);
            if let Some(key) = key {
                c[key] = detail;
            }
            c
        })
        .collect();
    let t = tally(reports);
    json!({
        "cases": cases,
        "passed": t.passed,
        "failed": t.failed,
        "errors": t.errors,
        "skipped": t.skipped,
    })
}

/// JUnit XML: one `<testsuite>` per test file (in the order first seen), one
/// `<testcase>` per case with its `<failure>`, `<error>` or `<skipped>`.
pub fn junit(reports: &[CaseReport]) -> String {
    let mut files: Vec<&PathBuf> = Vec::new();
    for r in reports {
        if !files.contains(&&r.file) {
            files.push(&r.file);
        }
    }
    let all = tally(reports);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"agentfile test\" {}>",
        counts(reports.len(), &all)
    );
    for file in files {
        let cases: Vec<&CaseReport> = reports.iter().filter(|r| &r.file == file).collect();
        let name = attr(&file.display().to_string());
        let _ = writeln!(
            out,
            "  <testsuite name=\"{name}\" {}>",
            counts(cases.len(), &tally(cases.iter().copied()))
        );
        for r in cases {
            testcase(&mut out, r, &name);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// `tests="…" failures="…" errors="…" skipped="…" time="…"`.
fn counts(tests: usize, t: &Tally) -> String {
    format!(
        "tests=\"{tests}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\"",
        t.failed,
        t.errors,
        t.skipped,
        t.time.as_secs_f64()
    )
}

fn testcase(out: &mut String, r: &CaseReport, classname: &str) {
    let _ = write!(
        out,
        "    <testcase name=\"{}\" classname=\"{classname}\" time=\"{:.3}\"",
        attr(&r.case),
        r.duration.as_secs_f64()
    );
    let mut about = Vec::new();
    if r.runs > 1 {
        about.push(format!("{} of {} runs passed", r.passed_runs, r.runs));
    }
    if let Some(s) = &r.session {
        about.push(format!("session {s}"));
    }
    if matches!(r.outcome, Outcome::Passed) && about.is_empty() {
        out.push_str("/>\n");
        return;
    }
    out.push_str(">\n");
    match &r.outcome {
        Outcome::Passed => {}
        Outcome::Failed(failures) => {
            let message: Vec<&str> = failures.iter().map(|f| f.what.as_str()).collect();
            let mut body = String::new();
            for f in failures {
                let _ = writeln!(
                    body,
                    "{}\n  expected {}\n  actual   {}",
                    f.what, f.expected, f.actual
                );
            }
            let _ = writeln!(
                out,
                "      <failure message=\"{}\" type=\"expectation\">{}</failure>",
                attr(&message.join("; ")),
                text_node(&body)
            );
        }
        Outcome::Error(why) => {
            let first = why.lines().next().unwrap_or("");
            let _ = writeln!(
                out,
                "      <error message=\"{}\">{}</error>",
                attr(first),
                text_node(why)
            );
        }
        Outcome::Skipped(why) => {
            let _ = writeln!(out, "      <skipped message=\"{}\"/>", attr(why));
        }
    }
    if !about.is_empty() {
        let _ = writeln!(
            out,
            "      <system-out>{}</system-out>",
            text_node(&about.join("\n"))
        );
    }
    out.push_str("    </testcase>\n");
}

/// Characters XML 1.0 does not allow at all: control characters other
/// than tab, line feed and carriage return, and U+FFFE, U+FFFF.
fn allowed(c: char) -> bool {
    !matches!(c, '\0'..='\x08' | '\x0B' | '\x0C' | '\x0E'..='\x1F' | '\u{FFFE}' | '\u{FFFF}')
}

/// Text content: `&`, `<`, `>`, quotes escaped, forbidden characters dropped.
fn text_node(s: &str) -> String {
    escape(s, false)
}

/// An attribute value: as [`text_node`], and tab and line breaks as
/// character references (a parser would turn them into spaces).
fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().filter(|&c| allowed(c)) {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' if attribute => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reports() -> Vec<CaseReport> {
        let case = |file: &str, case: &str, outcome: Outcome, ms: u64| CaseReport {
            file: PathBuf::from(file),
            case: case.into(),
            outcome,
            duration: Duration::from_millis(ms),
            session: None,
            runs: 1,
            passed_runs: 0,
        };
        vec![
            CaseReport {
                passed_runs: 1,
                ..case("tests/a.test.yaml", "summarises", Outcome::Passed, 120)
            },
            CaseReport {
                session: Some("01JSESSION".into()),
                runs: 5,
                passed_runs: 3,
                ..case(
                    "tests/a.test.yaml",
                    "counts <tests> & \"more\"",
                    Outcome::Failed(vec![Failure {
                        what: "outputs.summary contains".into(),
                        expected: "\"tally\"".into(),
                        actual: "\"a\\nb\" \u{1}'x'".into(),
                    }]),
                    300,
                )
            },
            case(
                "tests/b.test.yaml",
                "broken",
                Outcome::Error("the workflow is invalid\nAgentfile:1:1: error: x".into()),
                5,
            ),
            case(
                "tests/b.test.yaml",
                "judged",
                Outcome::Skipped("a judge runs with --live".into()),
                0,
            ),
        ]
    }

    #[test]
    fn text_has_a_line_per_case_and_a_summary() {
        assert_eq!(
            text(&reports()),
            "✓ tests/a.test.yaml › summarises (0.12s)\n\
             ✗ tests/a.test.yaml › counts <tests> & \"more\" (3/5 runs passed, 0.30s)\n    \
             outputs.summary contains\n      \
             expected \"tally\"\n      \
             actual   \"a\\nb\" \u{1}'x'\n    \
             session 01JSESSION\n\
             ! tests/b.test.yaml › broken (0.01s)\n    \
             the workflow is invalid\n    \
             Agentfile:1:1: error: x\n\
             - tests/b.test.yaml › judged (skipped: a judge runs with --live)\n\
             1 passed, 1 failed, 1 error, 1 skipped in 0.42s\n"
        );
        assert_eq!(text(&[]), "0 passed, 0 failed, 0 errors in 0.00s\n");
    }

    #[test]
    fn json_counts_and_details() {
        let v = json(&reports());
        assert_eq!(
            (&v["passed"], &v["failed"], &v["errors"], &v["skipped"]),
            (
                &Value::from(1),
                &Value::from(1),
                &Value::from(1),
                &Value::from(1)
            )
        );
        let cases = v["cases"].as_array().unwrap();
        assert_eq!(cases[0]["outcome"], "passed");
        assert_eq!(cases[0]["duration_ms"], 120);
        assert!(cases[0].get("failures").is_none());
        assert_eq!(cases[1]["outcome"], "failed");
        assert_eq!(cases[1]["failures"][0]["what"], "outputs.summary contains");
        assert_eq!(
            (&cases[1]["runs"], &cases[1]["passed_runs"]),
            (&Value::from(5), &Value::from(3))
        );
        assert_eq!(cases[1]["session"], "01JSESSION");
        assert_eq!(cases[2]["outcome"], "error");
        assert!(
            cases[2]["error"]
                .as_str()
                .unwrap()
                .starts_with("the workflow")
        );
        assert_eq!(cases[3]["reason"], "a judge runs with --live");
    }

    #[test]
    fn junit_is_well_formed_and_escaped() {
        let xml = junit(&reports());
        well_formed(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"agentfile test\" tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\" time=\"0.425\">\n"), "{xml}");
        assert!(xml.contains("<testsuite name=\"tests/a.test.yaml\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"0.420\">"), "{xml}");
        assert!(
            xml.contains(
                "<testcase name=\"summarises\" classname=\"tests/a.test.yaml\" time=\"0.120\"/>"
            ),
            "{xml}"
        );
        assert!(
            xml.contains("<testcase name=\"counts &lt;tests&gt; &amp; &quot;more&quot;\""),
            "{xml}"
        );
        // The control character is gone; quotes and apostrophes escaped.
        assert!(
            xml.contains("actual   &quot;a\\nb&quot; &apos;x&apos;"),
            "{xml}"
        );
        assert!(!xml.contains('\u{1}'));
        assert!(
            xml.contains("<failure message=\"outputs.summary contains\" type=\"expectation\">"),
            "{xml}"
        );
        assert!(
            xml.contains("<system-out>3 of 5 runs passed\nsession 01JSESSION</system-out>"),
            "{xml}"
        );
        assert!(xml.contains("<error message=\"the workflow is invalid\">the workflow is invalid\nAgentfile:1:1: error: x</error>"), "{xml}");
        assert!(
            xml.contains("<skipped message=\"a judge runs with --live\"/>"),
            "{xml}"
        );
        assert_eq!(attr("a\nb\tc\r"), "a&#10;b&#9;c&#13;");
        assert_eq!(text_node("\u{0}a\u{1F}b\u{FFFE}"), "ab");
        well_formed(&junit(&[])).unwrap();
        // The check itself catches what it is for.
        for bad in [
            "<a><b></a></b>",
            "<a x=\"<\"/>",
            "<a>&</a>",
            "<a>&nbsp;</a>",
            "<a/><b/>",
            "<a x=y/>",
            "<a>\u{1}</a>",
        ] {
            assert!(well_formed(bad).is_err(), "{bad}");
        }
    }

    /// A small check of XML well-formedness: one root element, tags closed in
    /// order, attribute values quoted, and `<`, `&` only where markup allows.
    fn well_formed(xml: &str) -> Result<(), String> {
        let body = match xml.strip_prefix("<?xml") {
            Some(rest) => &rest[rest.find("?>").ok_or("unclosed declaration")? + 2..],
            None => xml,
        };
        let mut stack: Vec<&str> = Vec::new();
        let mut roots = 0;
        let mut rest = body;
        while let Some(lt) = rest.find('<') {
            check_text(&rest[..lt])?;
            if stack.is_empty() && !rest[..lt].trim().is_empty() {
                return Err(format!("text outside the root: {:?}", &rest[..lt]));
            }
            let gt = rest[lt..].find('>').ok_or("unclosed tag")? + lt;
            let tag = &rest[lt + 1..gt];
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else {
                let self_closing = tag.ends_with('/');
                let tag = tag.trim_end_matches('/');
                let name_end = tag.find(char::is_whitespace).unwrap_or(tag.len());
                let name = &tag[..name_end];
                if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '-') {
                    return Err(format!("bad element name {name:?}"));
                }
                check_attributes(&tag[name_end..])?;
                if stack.is_empty() {
                    roots += 1;
                }
                if !self_closing {
                    stack.push(name);
                }
            }
            rest = &rest[gt + 1..];
        }
        if !rest.trim().is_empty() {
            return Err("text after the root".into());
        }
        match (stack.as_slice(), roots) {
            ([], 1) => Ok(()),
            (open, n) => Err(format!("{n} roots, unclosed {open:?}")),
        }
    }

    fn check_text(s: &str) -> Result<(), String> {
        if s.contains('>') {
            // Allowed by XML, but this writer always escapes it.
            return Err(format!("unescaped `>` in {s:?}"));
        }
        let mut rest = s;
        while let Some(amp) = rest.find('&') {
            let semi = rest[amp..].find(';').ok_or("`&` without `;`")? + amp;
            let entity = &rest[amp + 1..semi];
            let known = ["amp", "lt", "gt", "quot", "apos"].contains(&entity)
                || entity
                    .strip_prefix('#')
                    .is_some_and(|n| n.parse::<u32>().is_ok());
            if !known {
                return Err(format!("unknown entity &{entity};"));
            }
            rest = &rest[semi + 1..];
        }
        if let Some(c) = s.chars().find(|&c| !allowed(c)) {
            return Err(format!("forbidden character {c:?}"));
        }
        Ok(())
    }

    /// ` a="x" b="y"`: each a name, `=`, a double-quoted value without `<`
    /// or `"` inside.
    fn check_attributes(mut s: &str) -> Result<(), String> {
        loop {
            s = s.trim_start();
            if s.is_empty() {
                return Ok(());
            }
            let eq = s
                .find('=')
                .ok_or(format!("attribute without value: {s:?}"))?;
            let name = &s[..eq];
            if !name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!("bad attribute name {name:?}"));
            }
            let value = s[eq + 1..].strip_prefix('"').ok_or("unquoted attribute")?;
            let end = value.find('"').ok_or("unclosed attribute")?;
            let v = &value[..end];
            if v.contains('<') || v.contains('\n') || v.contains('\t') {
                return Err(format!("raw markup or whitespace in attribute {v:?}"));
            }
            check_text(v)?;
            s = &value[end + 1..];
        }
    }
}
