//! The published JSON Schemas (AIP-15's WORKFLOW.schema.json with its AIP-14,
//! -16 and -17 dependencies, bundled: no network), compiled once, and their
//! errors turned into messages a person can act on.
//!
//! A step is `allOf [stepCommon, oneOf [stepTool, stepBranch, …]]`, so a bad
//! branch step would only say "not valid under any of the schemas". When the
//! step names a kind, it is checked against that kind's schema instead, and
//! those errors (`branches` is missing, `next` is not a string) are reported.

use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Registry, Validator};
use serde_json::{Value, json};

pub use agentfile_plan::values::{human, schema_problem, validate_value};
pub use agentfile_syntax::schema::{Violation, describe, place};

const WORKFLOW: &str = include_str!("schemas/WORKFLOW.schema.json");
const IO: &str = include_str!("schemas/IO.schema.json");
const RUNNER: &str = include_str!("schemas/RUNNER.schema.json");
const TOOL: &str = include_str!("schemas/TOOL.schema.json");

const WORKFLOW_ID: &str = "https://agentproto.sh/schemas/aip-15/WORKFLOW.schema.json";
const TOOL_ID: &str = "https://agentproto.sh/docs/aip-14/TOOL.schema.json";

/// The step kinds, each with its definition in the schema.
pub const KINDS: &[(&str, &str)] = &[
    ("tool", "stepTool"),
    ("branch", "stepBranch"),
    ("parallel", "stepParallel"),
    ("suspend", "stepSuspend"),
    ("approval", "stepApproval"),
    ("map", "stepMap"),
    ("loop", "stepLoop"),
    ("subworkflow", "stepSubworkflow"),
];

/// Top-level fields the seed forbids: a workflow is orchestration only.
pub const FORBIDDEN: &[&str] = &["code", "run", "runner", "secrets", "network"];

struct Compiled {
    workflow: Validator,
    tool: Validator,
    kinds: Vec<(&'static str, Validator)>,
}

fn compiled() -> &'static Compiled {
    static C: OnceLock<Compiled> = OnceLock::new();
    C.get_or_init(|| {
        let parse = |s: &str| -> Value { serde_json::from_str(s).expect("bundled schema") };
        let io = parse(IO);
        let registry = Registry::new()
            .add(WORKFLOW_ID, parse(WORKFLOW))
            .and_then(|r| {
                r.add(
                    "https://agentproto.sh/schemas/aip-16/IO.schema.json",
                    io.clone(),
                )
            })
            // TOOL.schema.json refers to IO under /docs/.
            .and_then(|r| r.add("https://agentproto.sh/docs/aip-16/IO.schema.json", io))
            .and_then(|r| {
                r.add(
                    "https://agentproto.sh/schemas/aip-17/RUNNER.schema.json",
                    parse(RUNNER),
                )
            })
            .and_then(|r| r.add(TOOL_ID, parse(TOOL)))
            .and_then(|r| r.prepare())
            .expect("bundled schemas register");
        let build = |schema: Value| {
            jsonschema::options()
                .with_registry(&registry)
                .build(&schema)
                .expect("bundled schema compiles")
        };
        Compiled {
            workflow: build(json!({"$ref": WORKFLOW_ID})),
            tool: build(json!({"$ref": TOOL_ID})),
            kinds: KINDS
                .iter()
                .map(|(k, def)| {
                    (
                        *k,
                        build(json!({"$ref": format!("{WORKFLOW_ID}#/$defs/{def}")})),
                    )
                })
                .collect(),
        }
    })
}

/// Check a WORKFLOW.md front matter.
pub fn check_workflow(v: &Value) -> Vec<Violation> {
    let c = compiled();
    let mut out = Vec::new();
    collect(&c.workflow, v, "", &mut out);
    out
}

/// Check a TOOL.md front matter.
pub fn check_tool(v: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    collect(&compiled().tool, v, "", &mut out);
    out
}

fn collect(validator: &Validator, v: &Value, base: &str, out: &mut Vec<Violation>) {
    for e in validator.iter_errors(v) {
        let pointer = format!("{base}{}", e.instance_path().as_str());
        let instance = pointee(v, e.instance_path().as_str());
        match e.kind() {
            ValidationErrorKind::OneOfNotValid { .. } | ValidationErrorKind::AnyOf { .. }
                if is_step(instance) =>
            {
                step(instance.unwrap_or(&Value::Null), &pointer, out);
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for name in unexpected {
                    if pointer.is_empty() && FORBIDDEN.contains(&name.as_str()) {
                        // Reported by the front end as `forbidden-field`.
                        continue;
                    }
                    out.push(Violation {
                        pointer: format!("{pointer}/{}", agentfile_syntax::yaml::segment(name)),
                        at_key: true,
                        code: "schema",
                        message: format!("unknown field `{name}` in {}", place(&pointer)),
                        hint: Some(match pointer.as_str() {
                            "" => "the front matter's fields are: name, id, description, version, entry, inputs, outputs, result, steps, start, suspendable, triggers, requires, approval, risk_level, timeout_ms, max_steps, retry, cost_class, tags, metadata, inputsFiles, outputsFiles, runtime; put your own data under `metadata`".to_owned(),
                            _ => "remove it, or check its spelling".to_owned(),
                        }),
                    });
                }
            }
            ValidationErrorKind::Enum { options } if is_kind_of_step(&pointer, v, base) => {
                let got = instance.and_then(Value::as_str).unwrap_or("");
                let names: Vec<&str> = KINDS.iter().map(|(k, _)| *k).collect();
                let _ = options;
                out.push(Violation {
                    pointer,
                    at_key: false,
                    code: "unknown-kind",
                    message: match instance {
                        Some(Value::String(s)) => format!("unknown step kind `{s}`"),
                        _ => "a step's `kind` must be a string".to_owned(),
                    },
                    hint: Some(
                        match agentfile_plan::diag::suggest(got, names.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => format!("the kinds are: {}", names.join(", ")),
                        },
                    ),
                });
            }
            kind => out.push(describe(kind, &pointer, instance, &e.to_string())),
        }
    }
}

/// A value that looks like a step: a mapping with a `kind`.
fn is_step(v: Option<&Value>) -> bool {
    v.and_then(|v| v.get("kind")).is_some()
}

/// `pointer` is the `kind` of something in a `steps` list.
fn is_kind_of_step(pointer: &str, _root: &Value, _base: &str) -> bool {
    let mut segs = pointer.rsplit('/');
    segs.next() == Some("kind")
        && segs.next().is_some_and(|i| i.parse::<usize>().is_ok())
        && segs.next() == Some("steps")
}

/// A step whose kind-specific schema failed: check it against its kind's.
fn step(instance: &Value, pointer: &str, out: &mut Vec<Violation>) {
    let Some(kind) = instance.get("kind").and_then(Value::as_str) else {
        return;
    };
    // An unknown kind was reported by stepCommon's enum already.
    if let Some((_, v)) = compiled().kinds.iter().find(|(k, _)| *k == kind) {
        collect(v, instance, pointer, out);
    }
}

fn pointee<'v>(root: &'v Value, pointer: &str) -> Option<&'v Value> {
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Value {
        json!({
            "name": "x", "id": "xy", "description": "d", "version": "1.0.0",
            "inputs": {"type": "object"}, "outputs": {"type": "object"},
            "steps": [{"id": "aa", "kind": "tool", "tool": "read"}]
        })
    }

    #[test]
    fn a_minimal_workflow_is_valid() {
        assert_eq!(check_workflow(&minimal()), vec![]);
    }

    #[test]
    fn a_bad_branch_step_says_what_is_wrong_with_it() {
        let mut w = minimal();
        w["steps"] =
            json!([{"id": "aa", "kind": "branch", "branches": [{"when": true, "next": "bb"}]}]);
        let v = check_workflow(&w);
        assert_eq!(v.len(), 1, "{v:#?}");
        assert_eq!(v[0].pointer, "/steps/0/branches/0/when");
        assert!(
            v[0].message.contains("must be a string, not a boolean"),
            "{}",
            v[0].message
        );
    }

    #[test]
    fn unknown_kinds_and_fields() {
        let mut w = minimal();
        w["steps"][0]["kind"] = json!("tol");
        w["author"] = json!("me");
        w["runner"] = json!({});
        let v = check_workflow(&w);
        let mut codes: Vec<_> = v.iter().map(|v| (v.code, v.pointer.as_str())).collect();
        codes.sort();
        assert_eq!(
            codes,
            vec![("schema", "/author"), ("unknown-kind", "/steps/0/kind")],
            "{v:#?}"
        );
    }
}
