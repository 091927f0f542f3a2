//! The built-in tools of the seed: what each does once the gate has allowed it.
//!
//! One file per family: [`fs`] (read, write, edit, ls), [`search`] (glob, grep),
//! [`bash`], [`web`] (web_fetch, web_search), [`memory`] (memory_read,
//! memory_write). This module holds what they share: the JSON Schemas offered to
//! the model, argument helpers and the result size cap.
//!
//! What these are not: judges. None of them checks a permission; the toolbox has
//! asked the gate before calling them, and they act on the resolved path or URL
//! the gate handed back. The one exception is deliberate and narrow: glob, grep
//! and ls filter what they *list* through the gate's read check, so a listing
//! never shows what `read` could not read, and web_fetch asks the gate again for
//! every redirect hop and resolved address.

pub mod bash;
pub mod fs;
pub mod memory;
pub mod search;
pub mod web;

use serde_json::{Value, json};

use crate::llm::ToolDef;
use crate::tools::policy::Tool;

/// The JSON Schema and description of a built-in tool.
pub fn definition(tool: Tool) -> ToolDef {
    let (description, parameters) = match tool {
        Tool::Read => (
            "Read a text file. Paths are relative to the workspace. Long files are cut at a size cap; use offset/limit (in lines) to read further.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to read."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to return."}
                },
                "required": ["path"]
            }),
        ),
        Tool::Write => (
            "Create or overwrite a file with the given content, creating parent directories as needed.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write."},
                    "content": {"type": "string", "description": "The whole new content."}
                },
                "required": ["path", "content"]
            }),
        ),
        Tool::Edit => (
            "Replace exact text in a file. `old` must occur exactly once (include surrounding lines to make it unique) unless replace_all is true.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit."},
                    "old": {"type": "string", "description": "Exact text to find, whitespace included."},
                    "new": {"type": "string", "description": "Text to put in its place."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one."}
                },
                "required": ["path", "old", "new"]
            }),
        ),
        Tool::Glob => (
            "Find files by name pattern: `*` matches within one path segment, `**` any number of segments (e.g. `src/**/*.rs`). Honours .gitignore unless respect_gitignore is false.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern, relative to path."},
                    "path": {"type": "string", "description": "Directory to search (default: the workspace)."},
                    "respect_gitignore": {"type": "boolean", "description": "Skip files ignored by .gitignore (default true)."}
                },
                "required": ["pattern"]
            }),
        ),
        Tool::Grep => (
            "Search file contents with a regular expression (Rust regex syntax) in a file or a directory tree. Prints path:line:text, with context lines when asked.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {"type": "string", "description": "File or directory (default: the workspace)."},
                    "glob": {"type": "string", "description": "Only search files whose path matches this glob (e.g. `*.rs`)."},
                    "case_insensitive": {"type": "boolean"},
                    "fixed_strings": {"type": "boolean", "description": "Treat pattern as literal text."},
                    "context": {"type": "integer", "minimum": 0, "maximum": 10, "description": "Lines of context before and after each match."},
                    "respect_gitignore": {"type": "boolean", "description": "Skip files ignored by .gitignore (default true)."}
                },
                "required": ["pattern"]
            }),
        ),
        Tool::Ls => (
            "List a directory: names, with `/` after directories and sizes of files.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory (default: the workspace)."}
                }
            }),
        ),
        Tool::Bash => (
            "Run a bash command in the workspace and return its exit code, stdout and stderr. Only commands the policy allows run; each command of a line (after ;, &&, |, inside $(...)) is checked. Runs with a timeout and without secrets in its environment.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line."},
                    "timeout": {"type": "integer", "minimum": 1, "description": "Seconds before the command is killed (capped by the runtime)."}
                },
                "required": ["command"]
            }),
        ),
        Tool::WebFetch => (
            "Fetch a web page over http(s) and return it as readable text (HTML reduced to text).",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "Absolute http or https URL."}
                },
                "required": ["url"]
            }),
        ),
        Tool::WebSearch => (
            "Search the web and return titles, URLs and snippets.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 20}
                },
                "required": ["query"]
            }),
        ),
        Tool::MemoryRead => (
            "Read a value this agent stored earlier (it persists across runs). Without a value for the key, the stored keys are listed.",
            json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string"}
                },
                "required": ["key"]
            }),
        ),
        Tool::MemoryWrite => (
            "Store a value under a key for this agent; it persists across runs and replaces any earlier value.",
            json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string"},
                    "value": {"type": "string"}
                },
                "required": ["key", "value"]
            }),
        ),
    };
    ToolDef {
        name: tool.name().to_owned(),
        description: description.to_owned(),
        parameters,
    }
}

/// A required string argument.
pub(crate) fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "argument `{key}` must be a string, not {}",
            kind(other)
        )),
        None => Err(format!("missing argument `{key}`")),
    }
}

/// An optional string argument (`null` counts as absent).
pub(crate) fn opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!(
            "argument `{key}` must be a string, not {}",
            kind(other)
        )),
    }
}

/// An optional boolean argument; models sometimes send `"true"`.
pub(crate) fn opt_bool(args: &Value, key: &str) -> Result<Option<bool>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s == "true" => Ok(Some(true)),
        Some(Value::String(s)) if s == "false" => Ok(Some(false)),
        Some(other) => Err(format!(
            "argument `{key}` must be true or false, not {}",
            kind(other)
        )),
    }
}

/// An optional non-negative integer argument; models sometimes send `"5"`.
pub(crate) fn opt_u64(args: &Value, key: &str) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                    .map(|f| f as u64)
            })
            .map(Some)
            .ok_or_else(|| format!("argument `{key}` must be a whole number ≥ 0")),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("argument `{key}` must be a whole number ≥ 0")),
        Some(other) => Err(format!(
            "argument `{key}` must be a number, not {}",
            kind(other)
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `text` cut to at most `cap` bytes (on a character boundary) with a note
/// saying how much was left out.
pub fn truncate(text: String, cap: usize) -> String {
    if text.len() <= cap {
        return text;
    }
    let mut cut = cap;
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = text.len() - cut;
    let mut out = text;
    out.truncate(cut);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!("[truncated: {more} more bytes]"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::schema::{Dialect, clean};

    #[test]
    fn schemas_survive_cleaning_for_every_provider() {
        for tool in Tool::ALL {
            let def = definition(tool);
            for d in [Dialect::Anthropic, Dialect::OpenAi, Dialect::Gemini] {
                let cleaned = clean(&def.parameters, d);
                assert_eq!(cleaned["type"], "object", "{tool} {d:?}");
                let required = def.parameters["required"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for r in required {
                    let name = r.as_str().unwrap();
                    assert!(
                        cleaned["properties"].get(name).is_some(),
                        "{tool} lost `{name}` for {d:?}: {cleaned}"
                    );
                }
            }
        }
    }

    #[test]
    fn truncation_keeps_char_boundaries() {
        let t = truncate("héllo wörld".to_owned(), 2);
        assert!(t.starts_with('h'));
        assert!(t.ends_with("more bytes]"), "{t}");
        assert_eq!(truncate("short".to_owned(), 10), "short");
    }

    #[test]
    fn lenient_arguments() {
        let a = json!({"n": "5", "b": "true", "s": 3});
        assert_eq!(opt_u64(&a, "n").unwrap(), Some(5));
        assert_eq!(opt_bool(&a, "b").unwrap(), Some(true));
        assert!(str_arg(&a, "s").is_err());
        assert!(str_arg(&a, "missing").unwrap_err().contains("missing"));
    }
}
