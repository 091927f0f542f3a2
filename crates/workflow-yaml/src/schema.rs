//! The published `workflow.schema.json`, bundled and compiled once, and its
//! errors as findings a person can act on.
//!
//! A step is `oneOf [agentStep, shellStep]`, which alone would only say "not
//! valid under any of the schemas"; each step is checked against the one its
//! fields name instead (`action:` makes a shell step), so the errors say what
//! is wrong with it.

use std::collections::HashSet;
use std::sync::OnceLock;

use jsonschema::Validator;
use jsonschema::error::ValidationErrorKind;
use serde_json::{Value, json};

use super::Finding;
use agentfile_syntax::schema::describe;
use agentfile_syntax::yaml::segment;

const WORKFLOW: &str = include_str!("schemas/workflow.schema.json");

const TOP_FIELDS: &str =
    "specVersion, name, version, description, trigger, execution, output, steps";
const AGENT_FIELDS: &str = "id, name, agent, skill, input, goal, produces, gate";
const SHELL_FIELDS: &str = "id, name, action, script, goal";

struct Compiled {
    top: Validator,
    agent: Validator,
    shell: Validator,
}

fn compiled() -> &'static Compiled {
    static C: OnceLock<Compiled> = OnceLock::new();
    C.get_or_init(|| {
        let full: Value = serde_json::from_str(WORKFLOW).expect("bundled schema");
        // The top level with steps checked one by one (below).
        let mut top = full.clone();
        top["properties"]["steps"]["items"] = json!({"type": "object"});
        let defs = full["definitions"].clone();
        let def = |name: &str| {
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "definitions": defs,
                "allOf": [{"$ref": format!("#/definitions/{name}")}],
            })
        };
        let build = |s: &Value| jsonschema::validator_for(s).expect("bundled schema compiles");
        Compiled {
            top: build(&top),
            agent: build(&def("agentStep")),
            shell: build(&def("shellStep")),
        }
    })
}

/// Every schema violation of a workflow.yaml.
pub(super) fn check(v: &Value) -> Vec<Finding> {
    let c = compiled();
    let mut out = Vec::new();
    collect(&c.top, v, "", &mut out);
    if let Some(Value::Array(steps)) = v.get("steps") {
        for (i, s) in steps.iter().enumerate() {
            if !s.is_object() {
                continue;
            }
            let validator = if super::is_shell(s) {
                &c.shell
            } else {
                &c.agent
            };
            collect(validator, s, &format!("/steps/{i}"), &mut out);
        }
    }
    out
}

fn collect(validator: &Validator, v: &Value, base: &str, out: &mut Vec<Finding>) {
    let first = out.len();
    let errors: Vec<_> = validator.iter_errors(v).collect();
    let pointer_of =
        |e: &jsonschema::ValidationError<'_>| format!("{base}{}", e.instance_path().as_str());
    // Required fields missing, by the object's pointer: an unknown field that
    // is a misspelling of one is reported once, as the misspelling.
    // (Sets: a document of many steps has as many errors, and each is
    // looked up here.)
    let missing: HashSet<(String, String)> = errors
        .iter()
        .filter_map(|e| match e.kind() {
            ValidationErrorKind::Required { property } => {
                Some((pointer_of(e), property.as_str()?.to_owned()))
            }
            _ => None,
        })
        .collect();
    let mut misspelt: HashSet<(String, String)> = HashSet::new();
    // A value of the wrong type is reported once, not again as "not one of".
    let mistyped: HashSet<String> = errors
        .iter()
        .filter(|e| matches!(e.kind(), ValidationErrorKind::Type { .. }))
        .map(pointer_of)
        .collect();
    for e in &errors {
        let rel = e.instance_path().as_str().to_owned();
        let pointer = format!("{base}{rel}");
        let instance = v.pointer(&rel);
        match e.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let known = Known {
                    missing: &missing,
                    misspelt: &mut misspelt,
                };
                unknown_fields(unexpected, &pointer, v, known, out);
            }
            ValidationErrorKind::Type { .. }
                if pointer.ends_with("/input")
                    && instance
                        .and_then(Value::as_array)
                        .is_some_and(|a| a.iter().all(Value::is_string)) =>
            {
                out.push(
                    Finding::error(
                        pointer,
                        "list-input",
                        "`input` is a list; the spec writes several files one per line in a string",
                    )
                    .hint("write `input: |` followed by one path per line")
                    .tolerable(),
                );
            }
            ValidationErrorKind::Required { property }
                if pointer.is_empty() && property.as_str() == Some("specVersion") =>
            {
                out.push(
                    Finding::error(
                        "",
                        "schema",
                        "the workflow is missing the required field `specVersion`",
                    )
                    .hint("add `specVersion: \"1.0\"`")
                    .tolerable(),
                );
            }
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or("?");
                out.push(
                    Finding::error(
                        pointer.clone(),
                        "schema",
                        format!(
                            "{} is missing the required field `{name}`",
                            place(&pointer, v)
                        ),
                    )
                    .hint(required_hint(&pointer, name)),
                );
            }
            ValidationErrorKind::Enum { .. } if mistyped.contains(&pointer) => {}
            kind => out.push(other_error(kind, &pointer, instance, &e.to_string())),
        }
    }
    // Only this call's findings, so that a call per step stays linear.
    if !misspelt.is_empty() {
        let mut i = 0;
        out.retain(|f| {
            i += 1;
            let want = f
                .message
                .rsplit_once("missing the required field `")
                .and_then(|(_, rest)| rest.strip_suffix('`'));
            i <= first
                || f.code != "schema"
                || !want.is_some_and(|w| misspelt.contains(&(f.pointer.clone(), w.to_owned())))
        });
    }
}

/// The required fields missing, and those found misspelt, by the object's
/// pointer and the field's name.
struct Known<'a> {
    missing: &'a HashSet<(String, String)>,
    misspelt: &'a mut HashSet<(String, String)>,
}

/// Fields the schema does not know at `pointer`: a misspelling of a missing
/// required field is an error (and recorded in `misspelt`, so the missing
/// field is not reported again); any other is tolerable, with a suggestion.
fn unknown_fields(
    unexpected: &[String],
    pointer: &str,
    v: &Value,
    known: Known<'_>,
    out: &mut Vec<Finding>,
) {
    let fields = match pointer {
        "" => TOP_FIELDS,
        "/trigger" => "type, input_var",
        "/execution" => "preferred",
        "/output" => "directory",
        p if p.ends_with("/script") => "bash, pwsh",
        p if super::is_shell(v) && p.starts_with("/steps/") => SHELL_FIELDS,
        _ => AGENT_FIELDS,
    };
    for name in unexpected {
        let near = agentfile_plan::diag::suggest(name, fields.split(", "));
        if let Some(want) = near
            && known
                .missing
                .contains(&(pointer.to_owned(), want.to_owned()))
        {
            // Not tolerable: the field it stands for is missing.
            known.misspelt.insert((pointer.to_owned(), want.to_owned()));
            out.push(
                Finding::error(
                    format!("{pointer}/{}", segment(name)),
                    "unknown-field",
                    format!("unknown field `{name}` in {}", place(pointer, v)),
                )
                .hint(format!(
                    "did you mean `{want}`? Rename it: `{want}` is required here"
                ))
                .at_key(),
            );
            continue;
        }
        out.push(
            Finding::error(
                format!("{pointer}/{}", segment(name)),
                "unknown-field",
                format!("unknown field `{name}` in {}", place(pointer, v)),
            )
            .hint(match near {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("the fields here are: {fields}"),
            })
            .tolerable()
            .at_key(),
        );
    }
}

/// Any other schema error, described for a reader.
fn other_error(
    kind: &ValidationErrorKind,
    pointer: &str,
    instance: Option<&Value>,
    text: &str,
) -> Finding {
    let d = describe(kind, pointer, instance, text);
    let hint = match kind {
        ValidationErrorKind::Pattern { .. } if pointer == "/name" => {
            Some(name_hint(instance.and_then(Value::as_str).unwrap_or("")))
        }
        _ => d.hint.or_else(|| hint_for(pointer)),
    };
    Finding {
        pointer: d.pointer,
        at_key: d.at_key,
        line: None,
        code: d.code,
        message: d.message,
        hint,
        tolerable: false,
        warning: false,
    }
}

/// What to add for a missing required field.
fn required_hint(pointer: &str, name: &str) -> String {
    let step = pointer.starts_with("/steps/");
    match (name, step) {
        ("name", false) => "add `name:`, lowercase and hyphenated, such as `name: release-notes`",
        ("version", _) => "add `version: 1.0.0` (semantic versioning)",
        ("description", _) => "add `description:` saying what the workflow does",
        ("trigger", _) => "add `trigger: { type: command, input_var: AGENT_INPUT }`",
        ("steps", _) => "add `steps:` with at least one step",
        ("type", _) => "add `type:` (natural-language, file, schedule or command)",
        ("id", true) => "add `id:`, lowercase and hyphenated, unique in the workflow",
        ("name", true) => "add `name:`, a short human-readable name for the step",
        ("agent", true) => "add `agent: agents/<name>.md`",
        ("input", true) => "add `input: $VAR` (the trigger's input_var) or the path of a file",
        ("goal", true) => "add `goal:` saying what the step should achieve",
        ("produces", true) => "add `produces: outputs/<name>.md`, the artifact the step writes",
        ("action", true) => "add `action: shell` (a step with `script:` is a shell step)",
        ("script", true) => "add `script: { bash: scripts/<name>.sh }`",
        _ => return format!("add `{name}:`"),
    }
    .to_owned()
}

/// The hint for a `name` that is not lowercase and hyphenated, with the
/// name so written when that makes one.
fn name_hint(got: &str) -> String {
    let mut slug = String::new();
    for c in got.trim().chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    let example = if slug.starts_with(|c: char| c.is_ascii_lowercase()) {
        slug
    } else {
        "release-notes"
    };
    format!("use lowercase letters, digits and dashes, starting with a letter: `name: {example}`")
}

/// What a field wants, for errors `describe` has no hint for.
fn hint_for(pointer: &str) -> Option<String> {
    let field = pointer.rsplit('/').next()?;
    Some(match field {
        "gate" => "the only gate is `human-approval`".to_owned(),
        "action" => "a shell step has `action: shell`".to_owned(),
        "type" if pointer == "/trigger/type" => {
            "a trigger type is natural-language, file, schedule or command".to_owned()
        }
        "preferred" => "`execution.preferred` is `ide` or `cli`".to_owned(),
        "specVersion" => "write `specVersion: \"1.0\"`".to_owned(),
        i if pointer == format!("/steps/{i}") => {
            "a step is a mapping: `- id: …` with `agent:`, `input:`, `goal:` and `produces:`, or `action: shell` and `script:`"
                .to_owned()
        }
        _ => return None,
    })
}

/// How a place is named in a message: `the workflow`, `step `x``.
fn place(pointer: &str, v: &Value) -> String {
    if pointer.is_empty() {
        return "the workflow".to_owned();
    }
    if pointer.starts_with("/steps/")
        && pointer.matches('/').count() == 2
        && let Some(id) = v.get("id").and_then(Value::as_str)
    {
        return format!("step `{id}`");
    }
    agentfile_syntax::schema::place(pointer)
}
