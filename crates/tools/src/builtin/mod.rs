//! The built-in tools of the seed: what each does once the gate has allowed it.
//!
//! One file per family: [`fs`] (read, write, edit, ls), [`search`] (glob, grep),
//! [`bash`], [`web`] (web_fetch, web_search), [`memory`] (memory_read,
//! memory_write). This module holds what they share: the JSON Schemas offered to
//! the model, argument helpers and the result size cap ([`fit`], [`truncate`]):
//! every capped output — bash's streams, read, grep, web_fetch, and in the
//! toolbox anything else (MCP results, memory) — is cut by the same code, with
//! notes composed after the cut that state true sizes in bytes and are never
//! cut themselves.
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

use serde_json::Value;

use crate::policy::Tool;
use agentfile_llm::ToolDef;

/// The JSON Schema and description of a built-in tool (the data lives with
/// the tool-name table in the plan crate, which the front ends read too).
pub fn definition(tool: Tool) -> ToolDef {
    ToolDef {
        name: tool.name().to_owned(),
        description: tool.description().to_owned(),
        parameters: tool.parameters(),
    }
}

/// A built-in's argument the model got wrong. The text is part of the tool's
/// answer: the model reads it (after the tool's name) and tries again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgError {
    #[error("missing argument `{0}`")]
    Missing(String),
    /// Of the wrong JSON type: `want` is what it must be (`a string`), `got`
    /// what it is (`a number`).
    #[error("argument `{key}` must be {want}, not {got}")]
    Type {
        key: String,
        want: &'static str,
        got: &'static str,
    },
    #[error("argument `{0}` must be a whole number ≥ 0")]
    NotWhole(String),
}

impl ArgError {
    fn wrong(key: &str, want: &'static str, got: &Value) -> ArgError {
        ArgError::Type {
            key: key.to_owned(),
            want,
            got: kind(got),
        }
    }
}

/// A required string argument.
pub(crate) fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ArgError> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ArgError::wrong(key, "a string", other)),
        None => Err(ArgError::Missing(key.to_owned())),
    }
}

/// An optional string argument (`null` counts as absent).
pub(crate) fn opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ArgError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ArgError::wrong(key, "a string", other)),
    }
}

/// An optional boolean argument; models sometimes send `"true"`.
pub(crate) fn opt_bool(args: &Value, key: &str) -> Result<Option<bool>, ArgError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s == "true" => Ok(Some(true)),
        Some(Value::String(s)) if s == "false" => Ok(Some(false)),
        Some(other) => Err(ArgError::wrong(key, "true or false", other)),
    }
}

/// An optional non-negative integer argument; models sometimes send `"5"`.
pub(crate) fn opt_u64(args: &Value, key: &str) -> Result<Option<u64>, ArgError> {
    let not_whole = || ArgError::NotWhole(key.to_owned());
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
            .ok_or_else(not_whole),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| not_whole()),
        Some(other) => Err(ArgError::wrong(key, "a number", other)),
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

/// Bytes kept free under the result cap for the notes a tool appends, so that
/// no note is ever cut by the cap it reports on.
pub const NOTE_ROOM: usize = 1024;

/// [`NOTE_ROOM`], or a quarter of a small cap.
pub fn note_room(cap: usize) -> usize {
    NOTE_ROOM.min(cap / 4)
}

/// The longest prefix of `text` of at most `max` bytes that ends on a
/// character boundary.
pub fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// The one way tool output meets the result cap: `body` cut (on a character
/// boundary) so that it and its `notes`, each on its own line after it, fit in
/// `cap` bytes. The notes are composed by the caller *after* it knows what it
/// kept, so they state true sizes; they are never cut unless they alone exceed
/// the cap. `cut_note` is called with (bytes of `body` shown, bytes of `body`)
/// when the body itself had to be cut, to add a note saying so.
pub fn fit(
    body: &str,
    notes: &[String],
    cap: usize,
    cut_note: impl Fn(usize, usize) -> String,
) -> String {
    let notes_len = |notes: &[String]| notes.iter().map(|n| n.len() + 1).sum::<usize>();
    let mut notes: Vec<String> = notes.iter().filter(|n| !n.is_empty()).cloned().collect();
    let mut kept = body;
    if body.len() + 1 + notes_len(&notes) > cap {
        // Size the cut note for the worst case (every number as long as the
        // body's length) so the body can be cut once.
        let worst = cut_note(body.len(), body.len()).len() + 1;
        let room = cap.saturating_sub(notes_len(&notes) + worst + 1);
        kept = prefix(body, room);
        notes.insert(0, cut_note(kept.len(), body.len()));
    }
    let mut out = String::with_capacity(kept.len() + notes_len(&notes) + 1);
    out.push_str(kept);
    for n in &notes {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(n);
    }
    if out.len() > cap {
        // Only notes longer than the cap get here (a cap of a few bytes).
        return prefix(&out, cap).to_owned();
    }
    out
}

/// `text` cut to at most `cap` bytes (on a character boundary), with a note
/// saying how many of its bytes are shown. The toolbox applies it to every
/// result as the last word; the built-in tools fit their own output first (see
/// [`fit`]), so it cuts only what came whole from elsewhere (MCP tools,
/// memory), where `text` is all there is and its length is the true size.
pub fn truncate(text: String, cap: usize) -> String {
    if text.len() <= cap {
        return text;
    }
    fit(&text, &[], cap, |shown, total| {
        format!("[truncated: showed the first {shown} of {total} bytes]")
    })
}

/// A byte count for people: `512 bytes`, `64 KiB`, `1.5 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Index of the first `\n` in `bytes`, found with memchr (through
/// grep-searcher, which has it): the long-line paths of read and grep scan
/// gigabytes with it.
pub(crate) fn first_newline(bytes: &[u8]) -> Option<usize> {
    let (_, end) = grep_searcher::LineStep::new(b'\n', 0, bytes.len()).next(bytes)?;
    (bytes[end - 1] == b'\n').then_some(end - 1)
}

/// A list for a note: the first few items, then how many more.
pub(crate) fn some_names(names: &[String], max: usize) -> String {
    let mut s = names
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > max {
        s.push_str(&format!(" and {} more", names.len() - max));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_llm::schema::{SchemaTarget, clean};
    use serde_json::json;

    #[test]
    fn schemas_survive_cleaning_for_every_provider() {
        for tool in Tool::ALL {
            let def = definition(tool);
            for d in [
                SchemaTarget::Anthropic,
                SchemaTarget::OpenAi,
                SchemaTarget::Gemini,
            ] {
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
    fn truncation_keeps_char_boundaries_and_its_note() {
        let text = "héllo wörld ".repeat(100);
        let t = truncate(text.clone(), 80);
        assert!(t.len() <= 80, "{t}");
        assert!(t.starts_with("héllo"), "{t}");
        assert!(t.ends_with(&format!(" of {} bytes]", text.len())), "{t}");
        assert_eq!(truncate("short".to_owned(), 10), "short");
    }

    #[test]
    fn fit_never_cuts_a_note() {
        let body = "x".repeat(10_000);
        let notes = ["[a note that states the true size: 5 GiB]".to_owned()];
        let out = fit(&body, &notes, 1000, |s, t| format!("[{s} of {t}]"));
        assert!(out.len() <= 1000, "{}", out.len());
        assert!(out.ends_with(&notes[0]), "{out}");
        assert!(out.contains(" of 10000]"), "{out}");
        let small = fit("abc", &notes, 1000, |_, _| unreachable!());
        assert_eq!(small, format!("abc\n{}", notes[0]));
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(64 * 1024), "64 KiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }

    #[test]
    fn lenient_arguments() {
        let a = json!({"n": "5", "b": "true", "s": 3});
        assert_eq!(opt_u64(&a, "n").unwrap(), Some(5));
        assert_eq!(opt_bool(&a, "b").unwrap(), Some(true));
        assert!(str_arg(&a, "s").is_err());
        assert!(
            str_arg(&a, "missing")
                .unwrap_err()
                .to_string()
                .contains("missing")
        );
    }
}
