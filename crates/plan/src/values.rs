//! Values checked and typed against a JSON Schema a workflow declares: the
//! run's inputs (`--input n=5` read as the number 5 when `n` is an integer),
//! a model's structured output, a run's result. Every front end that declares
//! schemas and the engine that enforces them share these; none of it knows a
//! format.

use std::collections::BTreeMap;

use serde_json::Value;

/// Input values given as text (`--input k=v`), read as the types the
/// workflow's `inputs` schema declares: `n=5` is the number 5 when `n` is an
/// integer, `tags=["a"]` a list when `tags` is an array; a string property
/// keeps the text as it is.
pub fn typed_inputs(
    schema: Option<&Value>,
    given: &BTreeMap<String, String>,
) -> serde_json::Map<String, Value> {
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    given
        .iter()
        .map(|(k, v)| {
            let types: Vec<&str> = match props.and_then(|p| p.get(k)).and_then(|p| p.get("type")) {
                Some(Value::String(t)) => vec![t.as_str()],
                Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            let typed = if types.is_empty() || types.contains(&"string") {
                None
            } else {
                serde_json::from_str::<Value>(v.trim()).ok()
            };
            (k.clone(), typed.unwrap_or_else(|| Value::String(v.clone())))
        })
        .collect()
}

/// Text fields of `value` read as the JSON types `schema` declares for them
/// (a model's structured output arrives as strings: `"0.9"` for a number).
pub fn coerce(schema: &Value, value: &mut Value) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let Value::Object(fields) = value else {
        return;
    };
    for (k, v) in fields.iter_mut() {
        let Some(Value::String(text)) = Some(&*v) else {
            continue;
        };
        let wants_text = match props.get(k).and_then(|p| p.get("type")) {
            Some(Value::String(t)) => t == "string",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
            _ => true,
        };
        if !wants_text && let Ok(parsed) = serde_json::from_str::<Value>(text.trim()) {
            *v = parsed;
        }
    }
}

/// Is `instance` valid against `schema` (a JSON Schema the workflow declares)?
/// The problems, as `pointer: message` lines, when not.
pub fn validate_value(schema: &Value, instance: &Value) -> Result<(), Vec<String>> {
    let validator = match jsonschema::validator_for(schema) {
        Ok(v) => v,
        Err(e) => return Err(vec![format!("the schema itself is invalid: {e}")]),
    };
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .take(10)
        .map(|e| {
            let p = e.instance_path().as_str();
            if p.is_empty() {
                e.to_string()
            } else {
                format!("{}: {e}", human(p))
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Whether a JSON Schema document compiles.
pub fn schema_problem(schema: &Value) -> Option<String> {
    jsonschema::validator_for(schema)
        .err()
        .map(|e| e.to_string())
}

/// `/steps/2/retry` → `steps[2].retry`.
pub fn human(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if seg.parse::<usize>().is_ok() {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}
