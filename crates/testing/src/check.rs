//! Judging a finished run against a case's expectations: every expectation
//! that does not hold, each with what was expected and what the run did.

use std::borrow::Cow;

use agentfile_plan::values::validate_value;
use agentfile_wire::events::{Event, EventBody, RunResult};
use serde_json::Value;

use crate::{Expect, Matcher};

/// What a finished case run produced.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    pub result: &'a RunResult,
    pub events: &'a [Event],
}

/// One expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The expectation: `status`, `outputs.summary contains`, `tools`,
    /// `max_turns`…
    pub what: String,
    pub expected: String,
    /// What the run did, cut to about 200 characters.
    pub actual: String,
}

/// Values longer than this many characters are cut, with `…`.
const SHORT: usize = 200;

/// Every expectation of `expect` that `observed` does not meet; empty when
/// the case passed.
///
/// An output is found by its name in the result's outputs, or else as
/// `goal.field` inside a goal's object of fields.
pub fn check(expect: &Expect, observed: &Observed<'_>) -> Vec<Failure> {
    let result = observed.result;
    let mut out = Vec::new();
    let mut fail = |what: String, expected: String, actual: String| {
        out.push(Failure {
            what,
            expected: short(&expected),
            actual: short(&actual),
        });
    };
    if let Some(want) = &expect.status
        && *want != result.status
    {
        fail("status".into(), want.clone(), result.status.clone());
    }
    for (name, matchers) in &expect.outputs {
        let Some(value) = output(result, name) else {
            let expected = matchers.iter().map(describe).collect::<Vec<_>>().join("; ");
            fail(format!("outputs.{name}"), expected, "missing".into());
            continue;
        };
        for m in matchers {
            if let Some(actual) = mismatch(m, value) {
                fail(format!("outputs.{name} {}", kind(m)), describe(m), actual);
            }
        }
    }
    let called: Vec<&str> = observed
        .events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCall { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    for tool in &expect.tools {
        if !called.contains(&tool.as_str()) {
            fail(
                "tools".into(),
                format!("a call of `{tool}`"),
                calls(&called),
            );
        }
    }
    ceilings(expect, observed, &mut fail);
    out
}

/// `max_turns`, `max_tokens`, `max_cost_usd`.
fn ceilings(
    expect: &Expect,
    observed: &Observed<'_>,
    fail: &mut impl FnMut(String, String, String),
) {
    let usage = &observed.result.usage;
    if let Some(max) = expect.max_turns {
        let turns = observed
            .events
            .iter()
            .filter(|e| matches!(e.body, EventBody::LlmResponse { .. }))
            .count() as u64;
        if turns > max {
            fail(
                "max_turns".into(),
                format!("at most {max}"),
                turns.to_string(),
            );
        }
    }
    if let Some(max) = expect.max_tokens {
        let tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        if tokens > max {
            let actual = format!(
                "{tokens} ({} in, {} out)",
                usage.input_tokens, usage.output_tokens
            );
            fail("max_tokens".into(), format!("at most {max}"), actual);
        }
    }
    if let Some(max) = expect.max_cost_usd {
        let expected = format!("at most {}", dollars(max));
        match usage.cost_usd {
            Some(cost) if cost <= max => {}
            Some(cost) => fail("max_cost_usd".into(), expected, dollars(cost)),
            // A ceiling that cannot be checked is not met.
            None => fail(
                "max_cost_usd".into(),
                expected,
                "unknown: a model of the run has no known price".into(),
            ),
        }
    }
}

/// The output `name`: a key of the outputs, else `goal.field`.
pub fn output<'r>(result: &'r RunResult, name: &str) -> Option<&'r Value> {
    if let Some(v) = result.outputs.get(name) {
        return Some(v);
    }
    let (goal, field) = name.split_once('.')?;
    result.outputs.get(goal)?.get(field)
}

fn kind(m: &Matcher) -> &'static str {
    match m {
        Matcher::Equals(_) => "equals",
        Matcher::Contains(_) => "contains",
        Matcher::Matches(_) => "matches",
        Matcher::Schema(_) => "schema",
    }
}

/// What a matcher expects, in a few words.
fn describe(m: &Matcher) -> String {
    match m {
        Matcher::Equals(v) => json(v),
        Matcher::Contains(s) => json(&Value::String(s.clone())),
        Matcher::Matches(p) => format!("/{p}/"),
        Matcher::Schema(s) => format!("valid against {}", json(s)),
    }
}

/// Why `value` does not meet `m`, shown as the actual value; `None` when it
/// does.
fn mismatch(m: &Matcher, value: &Value) -> Option<String> {
    match m {
        Matcher::Equals(want) => (!same(want, value)).then(|| json(value)),
        Matcher::Contains(part) => (!text(value).contains(part.as_str())).then(|| json(value)),
        Matcher::Matches(pattern) => match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(&text(value)) => None,
            Ok(_) => Some(json(value)),
            Err(e) => Some(format!("the pattern does not compile: {e}")),
        },
        Matcher::Schema(schema) => validate_value(schema, value)
            .err()
            .map(|errors| errors.into_iter().next().unwrap_or_default()),
    }
}

/// JSON equality where `1` and `1.0` are one number.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.is_f64() || y.is_f64()) && x.as_f64() == y.as_f64()
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| same(a, b)))
        }
        _ => a == b,
    }
}

/// An output as text: a string as it is, anything else as compact JSON.
fn text(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(json(other)),
    }
}

/// Compact JSON (a string quoted, so its line breaks show as `\n`).
fn json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// `read, bash` or `no tool was called`.
fn calls(called: &[&str]) -> String {
    if called.is_empty() {
        return "no tool was called".into();
    }
    let mut names: Vec<&str> = called.to_vec();
    names.sort_unstable();
    names.dedup();
    format!("called {}", names.join(", "))
}

/// `$0.05`, `$0.000123`.
fn dollars(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("${s}")
}

/// `s` cut to [`SHORT`] characters, with `…` when cut.
pub(crate) fn short(s: &str) -> String {
    match s.char_indices().nth(SHORT) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agentfile_wire::events::{TerminationReason, Usage};
    use serde_json::json;

    use super::*;

    fn result(outputs: Value, usage: Usage) -> RunResult {
        RunResult {
            kind: "result".into(),
            session_id: "s1".into(),
            status: "completed".into(),
            outputs: serde_json::from_value::<BTreeMap<String, Value>>(outputs).unwrap(),
            usage,
            termination_reason: TerminationReason::Completed,
            error: None,
            exit_code: 0,
            waiting_for: Vec::new(),
        }
    }

    fn event(body: EventBody) -> Event {
        Event {
            schema_version: 1,
            session_id: "s1".into(),
            seq: 1,
            ts: "2026-01-01T00:00:00.000Z".into(),
            step: None,
            goal: None,
            agent: None,
            iteration: None,
            node: None,
            node_kind: None,
            replayed: false,
            body,
        }
    }

    fn tool_call(tool: &str) -> Event {
        event(EventBody::ToolCall {
            id: "c".into(),
            tool: tool.into(),
            arguments: json!({}),
        })
    }

    fn response() -> Event {
        event(EventBody::LlmResponse {
            model: "m".into(),
            turn: 1,
            input_tokens: 1,
            output_tokens: 1,
            latency_ms: 1,
            cost_usd: None,
            stop_reason: "end_turn".into(),
            text: String::new(),
            tool_calls: Vec::new(),
        })
    }

    fn outputs(pairs: &[(&str, Vec<Matcher>)]) -> Expect {
        Expect {
            outputs: pairs
                .iter()
                .map(|(k, m)| ((*k).to_owned(), m.clone()))
                .collect(),
            ..Expect::default()
        }
    }

    /// The failures of `expect` against a run with these outputs and no
    /// events, as `what | expected | actual`.
    fn failures(expect: &Expect, out: Value) -> Vec<String> {
        let r = result(out, Usage::default());
        check(
            expect,
            &Observed {
                result: &r,
                events: &[],
            },
        )
        .into_iter()
        .map(|f| format!("{} | {} | {}", f.what, f.expected, f.actual))
        .collect()
    }

    #[test]
    fn each_matcher_passes_and_fails() {
        let out = json!({
            "summary": "the tally is 3",
            "count": 3,
            "report": {"score": 0.9, "ok": true},
        });
        let pass = outputs(&[
            ("summary", vec![Matcher::Equals(json!("the tally is 3"))]),
            ("count", vec![Matcher::Equals(json!(3.0))]),
            ("summary", vec![Matcher::Contains("tally".into())]),
            ("report", vec![Matcher::Contains("\"ok\":true".into())]),
            ("count", vec![Matcher::Matches("^\\d+$".into())]),
            (
                "report.score",
                vec![Matcher::Schema(json!({"type": "number", "maximum": 1}))],
            ),
        ]);
        assert_eq!(failures(&pass, out.clone()), Vec::<String>::new());
        let fail = outputs(&[
            (
                "summary",
                vec![
                    Matcher::Equals(json!("the tally is 4")),
                    Matcher::Contains("missing".into()),
                    Matcher::Matches("^tally".into()),
                ],
            ),
            ("count", vec![Matcher::Equals(json!("3"))]),
            (
                "report",
                vec![Matcher::Schema(json!({"required": ["reason"]}))],
            ),
        ]);
        assert_eq!(
            failures(&fail, out),
            [
                "outputs.count equals | \"3\" | 3",
                "outputs.report schema | valid against {\"required\":[\"reason\"]} | \"reason\" is a required property",
                "outputs.summary equals | \"the tally is 4\" | \"the tally is 3\"",
                "outputs.summary contains | \"missing\" | \"the tally is 3\"",
                "outputs.summary matches | /^tally/ | \"the tally is 3\"",
            ]
        );
    }

    #[test]
    fn an_output_not_produced_is_missing() {
        let e = outputs(&[(
            "summary",
            vec![Matcher::Contains("a".into()), Matcher::Matches("b".into())],
        )]);
        assert_eq!(
            failures(&e, json!({"other": 1})),
            ["outputs.summary | \"a\"; /b/ | missing"]
        );
    }

    #[test]
    fn status_tools_and_ceilings() {
        let usage = Usage {
            input_tokens: 4000,
            output_tokens: 1500,
            cost_usd: Some(0.0712),
            turns: 3,
            tool_calls: 2,
        };
        let mut r = result(json!({}), usage);
        r.status = "failed".into();
        let events = [
            response(),
            tool_call("bash"),
            response(),
            tool_call("read"),
            response(),
        ];
        let expect = Expect {
            status: Some("completed".into()),
            tools: vec!["read".into(), "write".into()],
            max_turns: Some(2),
            max_tokens: Some(5000),
            max_cost_usd: Some(0.05),
            ..Expect::default()
        };
        let got: Vec<String> = check(
            &expect,
            &Observed {
                result: &r,
                events: &events,
            },
        )
        .into_iter()
        .map(|f| format!("{} | {} | {}", f.what, f.expected, f.actual))
        .collect();
        assert_eq!(
            got,
            [
                "status | completed | failed",
                "tools | a call of `write` | called bash, read",
                "max_turns | at most 2 | 3",
                "max_tokens | at most 5000 | 5500 (4000 in, 1500 out)",
                "max_cost_usd | at most $0.05 | $0.0712",
            ]
        );
        // Within every ceiling, the right status, the tools called: passes.
        r.status = "completed".into();
        let within = Expect {
            tools: vec!["read".into()],
            max_turns: Some(3),
            max_tokens: Some(5500),
            max_cost_usd: Some(0.08),
            ..expect
        };
        assert!(
            check(
                &within,
                &Observed {
                    result: &r,
                    events: &events
                }
            )
            .is_empty()
        );
        // A cost nobody knows is not within a ceiling.
        r.usage.cost_usd = None;
        let got = check(
            &within,
            &Observed {
                result: &r,
                events: &[],
            },
        );
        assert_eq!(
            got.iter().map(|f| f.what.as_str()).collect::<Vec<_>>(),
            ["tools", "max_cost_usd"]
        );
        assert_eq!(got[0].actual, "no tool was called");
        assert!(got[1].actual.starts_with("unknown"), "{}", got[1].actual);
    }

    #[test]
    fn long_values_are_cut() {
        let long = "x".repeat(500);
        let e = outputs(&[("s", vec![Matcher::Contains("y".into())])]);
        let r = result(json!({ "s": long }), Usage::default());
        let f = &check(
            &e,
            &Observed {
                result: &r,
                events: &[],
            },
        )[0];
        assert_eq!(f.actual.chars().count(), 201);
        assert!(f.actual.ends_with('…'));
        assert_eq!(short("é".repeat(200).as_str()), "é".repeat(200));
    }
}
