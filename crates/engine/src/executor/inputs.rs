//! A run's inputs, bound to its plan.
//!
//! Inputs are JSON values from the edge inward: the CLI's `--input k=v` gives a
//! string, `--inputs-json` and the servers give whatever JSON the caller sent.
//! Binding checks them against the plan (unknown names, missing required
//! inputs, loop limits, the declared schema) and fills defaults; the values
//! themselves stay as given. Where the plan declares an input's type, a string
//! is read as that type ([`typed_inputs`]: `"5"` for a number); where it
//! declares none, or a string, the input is its text ([`input_text`]).
//!
//! What is recorded — the `run_started` event, the session's metadata — is each
//! input's text, as it always was: the wire and the store keep strings.

use std::collections::BTreeMap;

use serde_json::Value;

use agentfile_plan::{Limit, NodeKind, Plan};

/// A run's inputs by name.
pub type Inputs = BTreeMap<String, Value>;

/// Why inputs do not bind to a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// A name the workflow does not declare; `hint` suggests one.
    #[error("unknown input `{name}`; {hint}")]
    Unknown { name: String, hint: String },
    /// Required inputs not given; `flags` says how to pass each.
    #[error(
        "missing required input{} {}; pass {}",
        if .names.len() == 1 { "" } else { "s" },
        quoted(.names),
        .flags.join(" ")
    )]
    Missing {
        names: Vec<String>,
        flags: Vec<String>,
    },
    /// An input a loop is limited by that is not a positive whole number.
    #[error("input `{input}` is a loop limit and must be a positive whole number, not `{value}`")]
    LoopLimit { input: String, value: String },
    /// The typed inputs break the workflow's `inputs` schema.
    #[error(
        "the inputs do not match the workflow's `inputs` schema: {}",
        .problems.join("; ")
    )]
    Schema { problems: Vec<String> },
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An input's text: a string as it is, any other value as JSON.
pub fn input_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Every input's text ([`input_text`]), as events and sessions record them.
pub fn inputs_text(inputs: &Inputs) -> BTreeMap<String, String> {
    inputs
        .iter()
        .map(|(k, v)| (k.clone(), input_text(v)))
        .collect()
}

/// Inputs recorded as text (a stored session's), as values.
pub fn inputs_from_text(inputs: &BTreeMap<String, String>) -> Inputs {
    inputs
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect()
}

/// The JSON types `schema` declares for input `name` (none when it declares none).
fn declared_types<'a>(schema: Option<&'a Value>, name: &str) -> Vec<&'a str> {
    let ty = schema
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.get(name))
        .and_then(|p| p.get("type"));
    match ty {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn wants_text(types: &[&str]) -> bool {
    types.is_empty() || types.contains(&"string")
}

/// Does the plan read input `name` as text (no declared type, or a string
/// among its types)? Any value given for it is then its [`input_text`].
pub fn reads_as_text(plan: &Plan, name: &str) -> bool {
    wants_text(&declared_types(plan.input_schema.as_ref(), name))
}

/// The inputs as the JSON types `schema` declares for them: an input declared
/// (or defaulting to) a string is its text; one declared as another type keeps
/// a JSON value as given and reads a string as JSON (`"5"` → `5`), keeping
/// the string when it is not JSON. Reading an input's text back gives the
/// same value, so a resumed run (whose session stored the text) sees what
/// the first run saw.
pub fn typed_inputs(schema: Option<&Value>, inputs: &Inputs) -> serde_json::Map<String, Value> {
    inputs
        .iter()
        .map(|(k, v)| {
            let typed = if wants_text(&declared_types(schema, k)) {
                Value::String(input_text(v))
            } else {
                match v {
                    Value::String(s) => {
                        serde_json::from_str::<Value>(s.trim()).unwrap_or_else(|_| v.clone())
                    }
                    other => other.clone(),
                }
            };
            (k.clone(), typed)
        })
        .collect()
}

/// Check inputs against the plan: unknown names and missing required inputs are
/// errors (before any model call); defaults fill the rest; loop-limit inputs must
/// be positive whole numbers.
pub fn bind_inputs(plan: &Plan, given: &Inputs) -> Result<Inputs, BindError> {
    bind_inputs_with(plan, given, &agentfile_tools::secrets::Secrets::default())
}

/// [`bind_inputs`], with the config's `secrets`: a trigger variable the config
/// names as holding a key is never read from the environment either.
pub fn bind_inputs_with(
    plan: &Plan,
    given: &Inputs,
    secrets: &agentfile_tools::secrets::Secrets,
) -> Result<Inputs, BindError> {
    check_names(plan, given)?;
    let mut out = Inputs::new();
    let mut missing = Vec::new();
    if let Some((name, root)) = plan.root.input().and_then(|k| given.get_key_value(k)) {
        out.insert(name.clone(), root.clone());
    }
    for i in &plan.inputs {
        // workflow.yaml's trigger variable: given, else from the environment
        // (never a variable named like a secret).
        let from_env = || {
            i.env
                .as_deref()
                .filter(|v| !secrets.is_secret(v))
                .and_then(|v| std::env::var(v).ok())
                .filter(|v| !v.is_empty())
                .map(Value::String)
        };
        match given
            .get(&i.name)
            .cloned()
            .or_else(from_env)
            .or_else(|| i.default.clone().map(Value::String))
        {
            Some(v) => {
                out.insert(i.name.clone(), v);
            }
            None if i.required => missing.push(i.name.as_str()),
            // Optional, without a default (a WORKFLOW.md input outside
            // `required`): absent.
            None => {}
        }
    }
    if !missing.is_empty() {
        return Err(missing_error(plan, &missing, secrets));
    }
    check_loop_limits(plan, &out)?;
    if let Some(schema) = &plan.input_schema {
        let typed = Value::Object(typed_inputs(Some(schema), &out));
        if let Err(problems) = agentfile_plan::values::validate_value(schema, &typed) {
            return Err(BindError::Schema { problems });
        }
    }
    Ok(out)
}

/// Every given name is an input of the plan (or its reserved root input).
fn check_names(plan: &Plan, given: &Inputs) -> Result<(), BindError> {
    let known: Vec<&str> = plan.inputs.iter().map(|i| i.name.as_str()).collect();
    let root_input = plan.root.input();
    for k in given.keys() {
        let reserved = root_input == Some(k.as_str());
        if !(known.contains(&k.as_str()) || reserved) {
            let hint = match agentfile_plan::diag::suggest(k, known.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None if known.is_empty() => "the workflow takes no inputs".to_owned(),
                None => format!("the workflow's inputs are: {}", known.join(", ")),
            };
            return Err(BindError::Unknown {
                name: k.clone(),
                hint,
            });
        }
    }
    Ok(())
}

/// The missing inputs, each with the flag (or variable) that would give it.
fn missing_error(
    plan: &Plan,
    missing: &[&str],
    secrets: &agentfile_tools::secrets::Secrets,
) -> BindError {
    let flags = missing
        .iter()
        .map(|m| {
            match plan
                .inputs
                .iter()
                .find(|i| i.name == *m)
                .and_then(|i| i.env.as_deref())
            {
                Some(v) if !secrets.is_secret(v) => {
                    format!("--input {m}=… (or set {v} in the environment)")
                }
                _ => format!("--input {m}=…"),
            }
        })
        .collect();
    BindError::Missing {
        names: missing.iter().map(|m| (*m).to_owned()).collect(),
        flags,
    }
}

/// Inputs that limit a loop (or a goal's WITHIN) are positive whole numbers.
fn check_loop_limits(plan: &Plan, inputs: &Inputs) -> Result<(), BindError> {
    let mut limits: Vec<&Limit> = plan
        .goals
        .iter()
        .filter_map(|g| g.within.as_ref())
        .collect();
    plan.graph.walk(&mut |n| {
        if let NodeKind::Loop { max, .. } = &n.kind {
            limits.push(max);
        }
    });
    for l in limits {
        if let Limit::Input { input, .. } = l
            && let Some(v) = inputs.get(input).map(input_text)
            && !v.trim().parse::<u32>().is_ok_and(|n| n > 0)
        {
            return Err(BindError::LoopLimit {
                input: input.clone(),
                value: v,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "opts": {"type": "object"},
                "name": {"type": "string"},
                "either": {"type": ["string", "object"]}
            }
        })
    }

    fn given(pairs: &[(&str, Value)]) -> Inputs {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn json_values_keep_their_type() {
        let inputs = given(&[
            ("n", json!(5)),
            ("tags", json!(["a", "b"])),
            ("opts", json!({"deep": {"x": [1, 2]}})),
        ]);
        let typed = typed_inputs(Some(&schema()), &inputs);
        assert_eq!(typed["n"], json!(5));
        assert_eq!(typed["tags"], json!(["a", "b"]));
        assert_eq!(typed["opts"], json!({"deep": {"x": [1, 2]}}));
    }

    #[test]
    fn strings_are_read_as_the_declared_type() {
        let inputs = given(&[
            ("n", json!(" 5 ")),
            ("tags", json!(r#"["a"]"#)),
            ("opts", json!("not json")),
            ("name", json!("7")),
        ]);
        let typed = typed_inputs(Some(&schema()), &inputs);
        assert_eq!(typed["n"], json!(5));
        assert_eq!(typed["tags"], json!(["a"]));
        // Not JSON: the string stays (and the schema check says why it fails).
        assert_eq!(typed["opts"], json!("not json"));
        // Declared a string: stays one.
        assert_eq!(typed["name"], json!("7"));
    }

    #[test]
    fn undeclared_and_string_inputs_are_text() {
        // As before values were JSON: a number for a string input, or any value
        // for an input without a declared type, is its text.
        let inputs = given(&[
            ("name", json!(7)),
            ("either", json!({"a": 1})),
            ("other", json!(true)),
        ]);
        let typed = typed_inputs(Some(&schema()), &inputs);
        assert_eq!(typed["name"], json!("7"));
        assert_eq!(typed["either"], json!(r#"{"a":1}"#));
        assert_eq!(typed["other"], json!("true"));
        let untyped = typed_inputs(None, &given(&[("n", json!(5))]));
        assert_eq!(untyped["n"], json!("5"));
    }

    fn plan() -> Plan {
        serde_json::from_value(json!({
            "schema_version": 1,
            "name": "typed",
            "format": "test",
            "path": "typed",
            "inputs": [
                {"name": "n", "default": null, "required": true},
                {"name": "tags", "default": "[\"x\"]", "required": false},
                {"name": "opts", "default": null, "required": true},
                {"name": "name", "default": null, "required": false}
            ],
            "agents": [],
            "goals": [],
            "graph": {"id": "main", "kind": "sequence", "nodes": []},
            "input_schema": schema()
        }))
        .expect("a plan")
    }

    #[test]
    fn binding_keeps_json_values() {
        let plan = plan();
        let opts = json!({"deep": {"list": [1, "two", null]}});
        let bound = bind_inputs(&plan, &given(&[("n", json!(3)), ("opts", opts.clone())])).unwrap();
        assert_eq!(bound["n"], json!(3));
        assert_eq!(
            bound["opts"], opts,
            "an object binds as it is, not as its text"
        );
        // A default is text, read as the declared type when the run starts.
        assert_eq!(bound["tags"], json!(r#"["x"]"#));
        assert_eq!(
            typed_inputs(plan.input_schema.as_ref(), &bound)["tags"],
            json!(["x"])
        );
        // `--input n=5`: a string read as the declared number.
        let bound =
            bind_inputs(&plan, &given(&[("n", json!("5")), ("opts", json!("{}"))])).unwrap();
        assert_eq!(
            typed_inputs(plan.input_schema.as_ref(), &bound)["n"],
            json!(5)
        );
        // The schema judges the typed values.
        let e = bind_inputs(&plan, &given(&[("n", json!(1.5)), ("opts", json!({}))])).unwrap_err();
        assert!(
            matches!(&e, BindError::Schema { .. })
                && e.to_string()
                    .starts_with("the inputs do not match the workflow's `inputs` schema: "),
            "{e}"
        );
        let e = bind_inputs(&plan, &given(&[("n", json!(1))])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "missing required input `opts`; pass --input opts=…"
        );
        let e = bind_inputs(&plan, &given(&[("nn", json!(1))])).unwrap_err();
        assert_eq!(e.to_string(), "unknown input `nn`; did you mean `n`?");
    }

    #[test]
    fn a_value_read_back_from_its_text_is_the_same() {
        let inputs = given(&[
            ("n", json!(5)),
            ("tags", json!(["a", "b"])),
            ("opts", json!({"z": 1.25, "a": [null, {"k": "v"}]})),
            ("name", json!(7)),
        ]);
        let fresh = typed_inputs(Some(&schema()), &inputs);
        let stored = inputs_from_text(&inputs_text(&inputs));
        assert_eq!(fresh, typed_inputs(Some(&schema()), &stored));
    }

    #[test]
    fn text_is_what_events_record() {
        let inputs = given(&[
            ("s", json!("a b")),
            ("n", json!(1.5)),
            ("o", json!({"k": [true]})),
        ]);
        let text = inputs_text(&inputs);
        assert_eq!(text["s"], "a b");
        assert_eq!(text["n"], "1.5");
        assert_eq!(text["o"], r#"{"k":[true]}"#);
        assert_eq!(
            inputs_from_text(&text)["o"],
            json!(r#"{"k":[true]}"#),
            "a stored input comes back as its text"
        );
    }

    #[test]
    fn error_text() {
        let e = BindError::Missing {
            names: vec!["a".into(), "b".into()],
            flags: vec!["--input a=…".into(), "--input b=…".into()],
        };
        assert_eq!(
            e.to_string(),
            "missing required inputs `a`, `b`; pass --input a=… --input b=…"
        );
        let e = BindError::Missing {
            names: vec!["a".into()],
            flags: vec!["--input a=…".into()],
        };
        assert_eq!(
            e.to_string(),
            "missing required input `a`; pass --input a=…"
        );
        let e = BindError::LoopLimit {
            input: "n".into(),
            value: "0".into(),
        };
        assert_eq!(
            e.to_string(),
            "input `n` is a loop limit and must be a positive whole number, not `0`"
        );
        let e = BindError::Schema {
            problems: vec!["x".into(), "y".into()],
        };
        assert_eq!(
            e.to_string(),
            "the inputs do not match the workflow's `inputs` schema: x; y"
        );
    }
}
