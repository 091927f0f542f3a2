//! JSON Schema violations told the way a person fixes them: `steps[2]` is
//! missing the required field `next`, not "not valid under any of the
//! schemas". The front ends that check YAML against a published schema
//! (WORKFLOW.md, workflow.yaml) share this wording.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

use agentfile_plan::values::human;

/// One schema violation, at a JSON pointer into the front matter.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub pointer: String,
    /// Point at the key of the node rather than its value (unknown fields).
    pub at_key: bool,
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

pub fn place(pointer: &str) -> String {
    if pointer.is_empty() {
        "the front matter".to_owned()
    } else {
        format!("`{}`", human(pointer))
    }
}

fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None | Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "a boolean",
        Some(Value::Number(n)) if n.is_f64() => "a number",
        Some(Value::Number(_)) => "an integer",
        Some(Value::String(_)) => "a string",
        Some(Value::Array(_)) => "a list",
        Some(Value::Object(_)) => "a mapping",
    }
}

pub fn describe(
    kind: &ValidationErrorKind,
    pointer: &str,
    instance: Option<&Value>,
    fallback: &str,
) -> Violation {
    let field = pointer.rsplit('/').next().unwrap_or("");
    let mut hint = None;
    let message = match kind {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or("?");
            hint = Some(match (pointer, name) {
                ("", "version") => "add `version: 1.0.0` (semantic versioning)".to_owned(),
                ("", "inputs" | "outputs") => {
                    format!("add `{name}:` with a JSON Schema, e.g. `{name}: {{ type: object }}`")
                }
                _ => format!("add `{name}:`"),
            });
            format!("{} is missing the required field `{name}`", place(pointer))
        }
        ValidationErrorKind::Type { kind } => {
            let want = match kind {
                TypeKind::Single(t) => format!("{t:?}").to_lowercase(),
                TypeKind::Multiple(ts) => {
                    let names: Vec<String> = (*ts)
                        .into_iter()
                        .map(|t| format!("{t:?}").to_lowercase())
                        .collect();
                    names.join(" or ")
                }
            };
            if matches!(
                instance,
                Some(Value::Bool(_)) | Some(Value::Number(_)) | Some(Value::Null)
            ) && want == "string"
            {
                let text = instance.map(Value::to_string).unwrap_or_default();
                hint = Some(format!(
                    "YAML reads `{text}` as {}; quote it to make it a string: `{field}: \"{text}\"`",
                    type_name(instance)
                ));
            }
            format!(
                "{} must be {}, not {}",
                place(pointer),
                article(&want),
                type_name(instance)
            )
        }
        ValidationErrorKind::Pattern { pattern } => {
            let got = instance.and_then(Value::as_str).unwrap_or("");
            hint = Some(match field {
                "id" => "use lowercase letters, digits and dashes, starting with a letter (`fetch-page`)".to_owned(),
                "version" => "use semantic versioning: `1.0.0`".to_owned(),
                _ => format!("it must match `{pattern}`"),
            });
            format!("{} `{got}` is not in the required form", place(pointer))
        }
        ValidationErrorKind::Enum { options } => {
            let list: Vec<String> = options
                .as_array()
                .map(|a| a.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            format!(
                "{} is {}, which is not one of: {}",
                place(pointer),
                instance.map(Value::to_string).unwrap_or_default(),
                list.join(", ")
            )
        }
        ValidationErrorKind::MinItems { limit } => {
            format!(
                "{} needs at least {limit} item{}",
                place(pointer),
                if *limit == 1 { "" } else { "s" }
            )
        }
        ValidationErrorKind::MaxItems { limit } => {
            format!("{} may hold at most {limit} items", place(pointer))
        }
        ValidationErrorKind::OneOfNotValid { .. } if pointer.contains("/triggers/") => {
            hint = Some("a trigger is {kind: manual}, {kind: schedule, cron}, {kind: webhook, path: /…} or {kind: event, name}".to_owned());
            format!("{} is not a valid trigger", place(pointer))
        }
        _ => {
            // The crate's own wording, with our place in front.
            let text = fallback.to_string();
            if pointer.is_empty() {
                text
            } else {
                format!("{}: {text}", place(pointer))
            }
        }
    };
    Violation {
        pointer: pointer.to_owned(),
        at_key: false,
        code: "schema",
        message,
        hint,
    }
}

fn article(t: &str) -> String {
    match t {
        "object" => "a mapping".to_owned(),
        "array" => "a list".to_owned(),
        "integer" => "an integer".to_owned(),
        t if t.contains(" or ") => t.to_owned(),
        t => format!("a {t}"),
    }
}
