//! YAML 1.2 front matter read into JSON values that remember where each
//! node was written, so a schema error at `/steps/2/retry/backoff` can point
//! at `WORKFLOW.md:31:18`.
//!
//! Built on saphyr-parser's event stream, without recursion: nesting depth,
//! alias expansion and the number of values are bounded, so no input can
//! overflow the stack or expand a few lines into gigabytes. Scalars resolve by
//! YAML 1.2's core schema: `on:` and `yes:` are strings, `true` a boolean,
//! `0x1F` an integer, quoted scalars always strings.

use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span as YSpan};
use serde_json::{Map, Number, Value};

/// Nesting deeper than this is refused (a step list inside a step inside a
/// list is three levels).
pub const MAX_DEPTH: usize = 200;

/// Values an alias may expand into, in all: beyond it the document is refused
/// (the "billion laughs" of nested aliases).
pub const MAX_ALIAS_VALUES: usize = 100_000;

/// Where one node was written: byte offsets into the whole file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    pub start: usize,
    pub end: usize,
    /// For a mapping's value: where its key starts.
    pub key: Option<(usize, usize)>,
}

/// A parsed document: the value and the place of every node, by JSON
/// pointer (`/steps/0/id`).
#[derive(Debug, Default)]
pub struct Doc {
    /// Shared, so the front end can hold the tree while it reports against
    /// the document without copying a 10 MB value.
    pub value: Arc<Value>,
    spans: FxHashMap<String, At>,
}

impl Doc {
    /// The place of the node at `pointer`, or of its nearest ancestor that has
    /// one (nodes copied by an alias have no place of their own).
    pub fn at(&self, pointer: &str) -> At {
        let mut p = pointer;
        loop {
            if let Some(a) = self.spans.get(p) {
                return *a;
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => {
                    return self.spans.get("").copied().unwrap_or(At {
                        start: 0,
                        end: 0,
                        key: None,
                    });
                }
            }
        }
    }

    /// Whether `pointer` was written in the file (not defaulted or aliased).
    pub fn has(&self, pointer: &str) -> bool {
        self.spans.contains_key(pointer)
    }
}

/// Why a document could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    pub code: &'static str,
    pub message: String,
    pub start: usize,
    pub end: usize,
    pub hint: Option<String>,
}

fn too_deep(at: usize) -> YamlError {
    YamlError {
        code: "too-deep",
        message: format!("the front matter nests more than {MAX_DEPTH} levels deep"),
        start: at,
        end: at + 1,
        hint: Some("flatten the workflow: move deep steps into a sub-workflow".into()),
    }
}

/// Escape one JSON pointer segment.
pub fn segment(s: &str) -> String {
    if s.contains(['~', '/']) {
        s.replace('~', "~0").replace('/', "~1")
    } else {
        s.to_owned()
    }
}

/// Character index → byte offset, for saphyr's markers (which count
/// characters).
struct Offsets<'a> {
    text: &'a str,
    ascii: bool,
    /// (char index, byte offset) of the last conversion: markers mostly move
    /// forward, so each conversion scans only the distance moved.
    cursor: (usize, usize),
}

impl Offsets<'_> {
    fn byte(&mut self, chars: usize) -> usize {
        if self.ascii {
            return chars.min(self.text.len());
        }
        let (mut c, mut b) = self.cursor;
        if chars < c {
            (c, b) = (0, 0);
        }
        for ch in self.text[b..].chars() {
            if c == chars {
                break;
            }
            c += 1;
            b += ch.len_utf8();
        }
        self.cursor = (c, b);
        b
    }
}

enum Frame {
    Seq {
        items: Vec<Value>,
        pointer: String,
        start: usize,
        anchor: usize,
        key: Option<(usize, usize)>,
    },
    Map {
        map: Map<String, Value>,
        pointer: String,
        start: usize,
        anchor: usize,
        key: Option<(usize, usize)>,
        /// A key read, waiting for its value.
        pending: Option<(String, (usize, usize))>,
    },
}

impl Frame {
    fn pointer(&self) -> &str {
        match self {
            Frame::Seq { pointer, .. } | Frame::Map { pointer, .. } => pointer,
        }
    }
}

/// Parse `text` (the front matter, which starts at byte `base` of the file).
pub fn parse(text: &str, base: usize) -> Result<Doc, YamlError> {
    let mut offsets = Offsets {
        text,
        ascii: text.is_ascii(),
        cursor: (0, 0),
    };
    let mut doc = Doc::default();
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Value> = HashMap::new();
    let mut alias_budget = MAX_ALIAS_VALUES;
    let mut root: Option<Value> = None;
    let mut documents = 0;
    let mut parser = Parser::new_from_str(text);
    let span = |offsets: &mut Offsets<'_>, s: &YSpan| {
        (
            base + offsets.byte(s.start.index()),
            base + offsets.byte(s.end.index()),
        )
    };
    while let Some(next) = parser.next_event() {
        let (event, ys) = match next {
            Ok(e) => e,
            Err(e) => {
                let at = base + offsets.byte(e.marker().index());
                if e.info().contains("recursion limit") {
                    return Err(too_deep(at));
                }
                return Err(YamlError {
                    code: "yaml-syntax",
                    message: format!("the front matter is not valid YAML: {}", e.info()),
                    start: at,
                    end: at + 1,
                    hint: Some(
                        "check the indentation (spaces, not tabs) and that every quote and bracket closes"
                            .into(),
                    ),
                });
            }
        };
        let (start, end) = span(&mut offsets, &ys);
        // A node: where it goes and what it holds.
        let placed = match event {
            Event::StreamStart | Event::StreamEnd | Event::Nothing | Event::DocumentEnd => continue,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(YamlError {
                        code: "yaml-syntax",
                        message: "the front matter holds more than one YAML document".into(),
                        start,
                        end: start + 3,
                        hint: Some("keep one mapping between the two `---` lines".into()),
                    });
                }
                continue;
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(too_deep(start));
                }
                let (pointer, key) = child_place(&stack, start)?;
                let is_map = matches!(event, Event::MappingStart(..));
                stack.push(if is_map {
                    Frame::Map {
                        map: Map::new(),
                        pointer,
                        start,
                        anchor,
                        key,
                        pending: None,
                    }
                } else {
                    Frame::Seq {
                        items: Vec::new(),
                        pointer,
                        start,
                        anchor,
                        key,
                    }
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = stack.pop() else {
                    continue;
                };
                let (value, pointer, s, anchor, key) = match frame {
                    Frame::Seq {
                        items,
                        pointer,
                        start,
                        anchor,
                        key,
                    } => (Value::Array(items), pointer, start, anchor, key),
                    Frame::Map {
                        map,
                        pointer,
                        start,
                        anchor,
                        key,
                        ..
                    } => (Value::Object(map), pointer, start, anchor, key),
                };
                doc.spans.insert(
                    pointer,
                    At {
                        start: s,
                        end: end.max(s),
                        key,
                    },
                );
                if anchor > 0 {
                    anchors.insert(anchor, value.clone());
                }
                value
            }
            Event::Alias(id) => {
                let Some(v) = anchors.get(&id) else {
                    return Err(YamlError {
                        code: "yaml-syntax",
                        message: "an alias names an anchor that is not defined before it".into(),
                        start,
                        end,
                        hint: None,
                    });
                };
                let size = count_values(v, alias_budget.saturating_add(1));
                if size > alias_budget {
                    return Err(YamlError {
                        code: "yaml-syntax",
                        message: format!("aliases expand to more than {MAX_ALIAS_VALUES} values"),
                        start,
                        end,
                        hint: Some(
                            "write the repeated parts out, or use fewer nested aliases".into(),
                        ),
                    });
                }
                alias_budget -= size;
                let v = v.clone();
                if let Some(pending) = key_slot(&mut stack) {
                    // An alias used as a key: its text, when it is a scalar.
                    match v {
                        Value::String(s) => *pending = Some((s, (start, end))),
                        _ => {
                            return Err(YamlError {
                                code: "yaml-syntax",
                                message: "a mapping key must be a plain value".into(),
                                start,
                                end,
                                hint: None,
                            });
                        }
                    }
                    continue;
                }
                let (pointer, key) = child_place(&stack, start)?;
                doc.spans.insert(pointer, At { start, end, key });
                v
            }
            Event::Scalar(text, style, anchor, tag) => {
                let value = resolve(&text, style, tag.as_deref().map(|t| t.suffix.as_str()))
                    .map_err(|message| YamlError {
                        code: "yaml-syntax",
                        message,
                        start,
                        end,
                        hint: None,
                    })?;
                if let Some(pending) = key_slot(&mut stack) {
                    let key = match value {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    *pending = Some((key, (start, end)));
                    continue;
                }
                let (pointer, key) = child_place(&stack, start)?;
                doc.spans.insert(pointer, At { start, end, key });
                if anchor > 0 {
                    anchors.insert(anchor, value.clone());
                }
                value
            }
        };
        // Attach the finished node to its parent (or make it the root).
        match stack.last_mut() {
            None => root = Some(placed),
            Some(Frame::Seq { items, .. }) => items.push(placed),
            Some(Frame::Map { map, pending, .. }) => {
                let (k, kspan) = pending.take().unwrap_or_default();
                if map.contains_key(&k) {
                    return Err(YamlError {
                        code: "duplicate-key",
                        message: format!("key `{k}` appears twice in one mapping"),
                        start: kspan.0,
                        end: kspan.1,
                        hint: Some("keep one of them; YAML does not merge repeated keys".into()),
                    });
                }
                map.insert(k, placed);
            }
        }
    }
    doc.value = Arc::new(root.unwrap_or(Value::Null));
    Ok(doc)
}

/// When the innermost open node is a mapping waiting for a key, the slot the
/// key goes in.
fn key_slot(stack: &mut [Frame]) -> Option<&mut Option<(String, (usize, usize))>> {
    match stack.last_mut() {
        Some(Frame::Map { pending, .. }) if pending.is_none() => Some(pending),
        _ => None,
    }
}

/// The pointer (and key place) of a node about to be added to the innermost
/// open node. A mapping or sequence in a key's place is refused.
fn child_place(
    stack: &[Frame],
    start: usize,
) -> Result<(String, Option<(usize, usize)>), YamlError> {
    match stack.last() {
        None => Ok((String::new(), None)),
        Some(Frame::Seq { items, pointer, .. }) => Ok((format!("{pointer}/{}", items.len()), None)),
        Some(f @ Frame::Map { pending, .. }) => match pending {
            Some((k, kspan)) => Ok((format!("{}/{}", f.pointer(), segment(k)), Some(*kspan))),
            None => Err(YamlError {
                code: "yaml-syntax",
                message: "a mapping key must be a plain value, not a list or a mapping".into(),
                start,
                end: start + 1,
                hint: None,
            }),
        },
    }
}

/// Values in `v`, counted up to `limit`.
fn count_values(v: &Value, limit: usize) -> usize {
    let mut n = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        n += 1;
        if n >= limit {
            return n;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(o) => stack.extend(o.values()),
            _ => {}
        }
    }
    n
}

/// A scalar by YAML 1.2's core schema.
fn resolve(text: &str, style: ScalarStyle, tag: Option<&str>) -> Result<Value, String> {
    let plain = matches!(style, ScalarStyle::Plain);
    match tag {
        Some("str") => return Ok(Value::String(text.to_owned())),
        Some(t @ ("int" | "float" | "bool" | "null")) => {
            let v = core(text);
            let ok = matches!(
                (t, &v),
                ("int", Value::Number(n)) if n.is_i64() || n.is_u64()
            ) || matches!((t, &v), ("float", Value::Number(_)))
                || matches!((t, &v), ("bool", Value::Bool(_)))
                || matches!((t, &v), ("null", Value::Null));
            return if ok {
                Ok(v)
            } else {
                Err(format!("`{text}` is not a valid !!{t}"))
            };
        }
        _ => {}
    }
    if !plain {
        return Ok(Value::String(text.to_owned()));
    }
    Ok(core(text))
}

fn core(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let (sign, digits) = match text.as_bytes().first() {
        Some(b'-') => (-1i128, &text[1..]),
        Some(b'+') => (1, &text[1..]),
        _ => (1, text),
    };
    let int = |radix: u32, s: &str| -> Option<Value> {
        if s.is_empty() || !s.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        let n = i128::from_str_radix(s, radix).ok()? * sign;
        if let Ok(i) = i64::try_from(n) {
            Some(Value::Number(i.into()))
        } else if let Ok(u) = u64::try_from(n) {
            Some(Value::Number(u.into()))
        } else {
            Number::from_f64(n as f64).map(Value::Number)
        }
    };
    if let Some(v) = int(10, digits) {
        return v;
    }
    if text.len() > 2 && (text.starts_with("0x") || text.starts_with("0o")) {
        let radix = if text.starts_with("0x") { 16 } else { 8 };
        if let Some(v) = int(radix, &text[2..]) {
            return v;
        }
    }
    if is_float(digits)
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_owned())
}

/// `[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?` or `\.[0-9]+(…)?`, unsigned.
fn is_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - s
    };
    let whole = digits(&mut i);
    let mut frac = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        frac = digits(&mut i);
    } else if whole == 0 {
        return false;
    }
    if whole == 0 && frac == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(s: &str) -> Value {
        (*parse(s, 0).unwrap().value).clone()
    }

    #[test]
    fn core_schema_scalars() {
        assert_eq!(
            v("a: 1\nb: -2.5\nc: true\nd: on\ne: ~\nf: '1'\ng: 0x1F\nh: 1e3\ni: yes\nj: .5"),
            json!({"a": 1, "b": -2.5, "c": true, "d": "on", "e": null, "f": "1",
                   "g": 31, "h": 1000.0, "i": "yes", "j": 0.5})
        );
        assert_eq!(v("on: [push]"), json!({"on": ["push"]}));
        assert_eq!(v("a: !!str 12"), json!({"a": "12"}));
        assert_eq!(v("a: 1.2.3"), json!({"a": "1.2.3"}));
    }

    #[test]
    fn places_by_pointer() {
        let text = "name: x\nsteps:\n  - id: a\n    next: b\n";
        let d = parse(text, 4).unwrap();
        let at = d.at("/steps/0/next");
        assert_eq!(&text[at.start - 4..at.end - 4], "b");
        assert_eq!(at.key.map(|k| &text[k.0 - 4..k.1 - 4]), Some("next"));
        // Not written: the nearest ancestor.
        assert_eq!(d.at("/steps/0/retry/backoff"), d.at("/steps/0"));
    }

    #[test]
    fn non_ascii_offsets_are_bytes() {
        let text = "a: \"é\"\nb: x\n";
        let d = parse(text, 0).unwrap();
        let at = d.at("/b");
        assert_eq!(&text[at.start..at.end], "x");
    }

    #[test]
    fn refusals() {
        assert_eq!(parse("a: 1\na: 2", 0).unwrap_err().code, "duplicate-key");
        let deep = format!("{}1{}", "[".repeat(500), "]".repeat(500));
        assert_eq!(parse(&deep, 0).unwrap_err().code, "too-deep");
        let laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]";
        assert!(parse(laughs, 0).unwrap_err().message.contains("aliases"));
        assert_eq!(parse("a: [1, 2", 0).unwrap_err().code, "yaml-syntax");
        assert_eq!(parse("? [a]\n: 1", 0).unwrap_err().code, "yaml-syntax");
    }
}
