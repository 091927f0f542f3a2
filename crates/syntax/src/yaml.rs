//! YAML 1.2 front matter read into JSON values that remember where each
//! node was written, so a schema error at `/steps/2/retry/backoff` can point
//! at `WORKFLOW.md:31:18`.
//!
//! Built on saphyr-parser's event stream, without recursion. Every way a
//! document could grow in memory beyond its own size is bounded:
//!
//! - nesting depth ([`MAX_DEPTH`]), aliased copies included (an alias of
//!   a deep anchor inside another deep list would otherwise nest deeper at
//!   every layer), so nothing after the loader recurses deeply either;
//! - the values one document holds ([`MAX_VALUES`]), copies included;
//! - what aliases copy, in bytes ([`MAX_ALIAS_BYTES`]): each node's copy size
//!   (its text plus a value's size per value) is added up as it is read, so an
//!   alias costs its anchor's size at once, however deeply aliases nest
//!   (the "billion laughs"), and a large anchor aliased many times is refused
//!   before it is copied. Anchors themselves copy nothing: an alias finds its
//!   anchor's value where it was written;
//! - places are kept per node as (parent, key or index), not as whole JSON
//!   pointers, so a long key above many nodes is stored once.
//!
//! Scalars resolve by YAML 1.2's core schema: `on:` and `yes:` are strings,
//! `true` a boolean, `0x1F` an integer, quoted scalars always strings.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use saphyr_parser::{Event, Parser, ScalarStyle, Span as YSpan};
use serde_json::{Map, Number, Value};

/// Nesting deeper than this is refused (a step list inside a step inside a
/// list is three levels).
pub const MAX_DEPTH: usize = 200;

/// Values (scalars, lists, mappings, counting what aliases copy) a document
/// may hold: beyond it the document is refused. A large workflow holds a few
/// thousand. The loader needs about 100 bytes a value, but the schema checks
/// after it several KB for a value in the wrong place (a `{}` step), so this
/// bound is what keeps a 300 KB file of `[{},{},…]` from taking gigabytes.
pub const MAX_VALUES: usize = 100_000;

/// Bytes aliases may copy, in all: each alias costs its anchor's size (text
/// of every scalar and key, plus [`VALUE_BYTES`] per value), nested aliases
/// included. Beyond it the document is refused. The largest honest use
/// (a block of a few KB repeated tens of times) copies well under 1 MB;
/// 16 MiB keeps a 1 MB file from expanding into gigabytes (the "billion
/// laughs", or one large anchor aliased thousands of times).
pub const MAX_ALIAS_BYTES: usize = 16 << 20;

/// What one value costs a copy besides its text (a `serde_json::Value`).
pub const VALUE_BYTES: usize = std::mem::size_of::<Value>();

/// What a mapping key costs besides its text (its `String`).
pub const KEY_BYTES: usize = std::mem::size_of::<String>();

/// The bounds a document is held to ([`parse_with`]); every front end uses
/// [`Limits::DEFAULT`] (through [`parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Lists and mappings nested, aliased copies included.
    pub depth: usize,
    /// Values in the document, what aliases copy included.
    pub values: usize,
    /// Bytes aliases copy, in all.
    pub alias_bytes: usize,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        depth: MAX_DEPTH,
        values: MAX_VALUES,
        alias_bytes: MAX_ALIAS_BYTES,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Where one node was written: byte offsets into the whole file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    pub start: usize,
    pub end: usize,
    /// For a mapping's value: where its key starts.
    pub key: Option<(usize, usize)>,
}

/// No parent (the root), no key.
const NONE: u32 = u32::MAX;

/// A node's place in its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Index(u32),
    Key(Box<str>),
}

/// A [`Seg`] to look for, borrowed from a pointer.
#[derive(Clone, Copy)]
enum SegRef<'a> {
    Index(u32),
    Key(&'a str),
}

impl Seg {
    fn as_ref(&self) -> SegRef<'_> {
        match self {
            Seg::Index(i) => SegRef::Index(*i),
            Seg::Key(k) => SegRef::Key(k),
        }
    }
}

/// Indices before keys; indices by number, keys by bytes.
fn cmp_seg(a: SegRef<'_>, b: SegRef<'_>) -> Ordering {
    match (a, b) {
        (SegRef::Index(x), SegRef::Index(y)) => x.cmp(&y),
        (SegRef::Index(_), SegRef::Key(_)) => Ordering::Less,
        (SegRef::Key(_), SegRef::Index(_)) => Ordering::Greater,
        (SegRef::Key(x), SegRef::Key(y)) => x.cmp(y),
    }
}

/// One node written in the document: its parent, its place there, and where
/// it was written (file offsets as `u32`; [`parse`] refuses larger texts).
#[derive(Debug, Clone)]
struct Node {
    parent: u32,
    seg: Seg,
    start: u32,
    end: u32,
    /// The key's place (`NONE`, `NONE` when there is none).
    key: (u32, u32),
}

impl Node {
    fn at(&self) -> At {
        At {
            start: self.start as usize,
            end: self.end as usize,
            key: (self.key.0 != NONE).then_some((self.key.0 as usize, self.key.1 as usize)),
        }
    }
}

/// A parsed document: the value and the place of every node written, found
/// by JSON pointer (`/steps/0/id`).
#[derive(Debug, Default)]
pub struct Doc {
    /// Shared, so the front end can hold the tree while it reports against
    /// the document without copying a 10 MB value.
    pub value: Arc<Value>,
    /// Every node written, in the order they started (the root first).
    nodes: Vec<Node>,
    /// Node ids sorted by (parent, place): a pointer is found by binary
    /// search, one segment at a time.
    order: Vec<u32>,
}

impl Doc {
    /// How many values were written in the document (an alias counts one,
    /// what it copies none).
    pub fn written(&self) -> usize {
        self.nodes.len()
    }

    /// The place of the node at `pointer`, or of its nearest ancestor that has
    /// one (nodes copied by an alias have no place of their own).
    pub fn at(&self, pointer: &str) -> At {
        match self.walk(pointer).0 {
            Some(n) => self.nodes[n as usize].at(),
            None => At {
                start: 0,
                end: 0,
                key: None,
            },
        }
    }

    /// Whether `pointer` was written in the file (not defaulted or aliased).
    pub fn has(&self, pointer: &str) -> bool {
        self.walk(pointer).1
    }

    /// The deepest node written along `pointer`, and whether it is the one
    /// `pointer` names.
    fn walk(&self, pointer: &str) -> (Option<u32>, bool) {
        if self.nodes.is_empty() {
            return (None, false);
        }
        let mut cur = 0u32;
        if pointer.is_empty() {
            return (Some(cur), true);
        }
        let Some(rest) = pointer.strip_prefix('/') else {
            return (Some(cur), false);
        };
        for raw in rest.split('/') {
            let key = unescape(raw);
            let found = index_segment(&key)
                .and_then(|i| self.child(cur, SegRef::Index(i)))
                .or_else(|| self.child(cur, SegRef::Key(&key)));
            match found {
                Some(c) => cur = c,
                None => return (Some(cur), false),
            }
        }
        (Some(cur), true)
    }

    fn child(&self, parent: u32, seg: SegRef<'_>) -> Option<u32> {
        self.order
            .binary_search_by(|&id| {
                let n = &self.nodes[id as usize];
                n.parent
                    .cmp(&parent)
                    .then_with(|| cmp_seg(n.seg.as_ref(), seg))
            })
            .ok()
            .map(|i| self.order[i])
    }
}

/// A pointer segment that names a list index (`0`, `12`; not `01`).
fn index_segment(s: &str) -> Option<u32> {
    if s.is_empty() || (s.len() > 1 && s.starts_with('0')) || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse().ok()
}

/// Undo [`segment`]'s escaping.
fn unescape(s: &str) -> Cow<'_, str> {
    if s.contains('~') {
        Cow::Owned(s.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(s)
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

fn too_deep(at: usize, depth: usize) -> YamlError {
    YamlError {
        code: "too-deep",
        message: format!("the front matter nests more than {depth} levels deep"),
        start: at,
        end: at + 1,
        hint: Some("flatten the workflow: move deep steps into a sub-workflow".into()),
    }
}

fn too_many_values(at: usize, values: usize) -> YamlError {
    YamlError {
        code: "yaml-too-large",
        message: format!(
            "the front matter holds more than {values} values (what aliases copy included)"
        ),
        start: at,
        end: at + 1,
        hint: Some(
            "a workflow's own fields hold a few thousand at most: keep data in input files".into(),
        ),
    }
}

fn aliases_too_large(
    start: usize,
    end: usize,
    this: usize,
    before: usize,
    limit: usize,
) -> YamlError {
    YamlError {
        code: "yaml-too-large",
        message: format!(
            "aliases copy more than {} in all: this alias copies {} after {} copied by earlier ones",
            bytes(limit),
            bytes(this),
            bytes(before),
        ),
        start,
        end,
        hint: Some(
            "write the repeated part out, or alias it fewer times (the limit keeps a small file from expanding into gigabytes)"
                .into(),
        ),
    }
}

/// `123 bytes`, `4.5 KiB`, `1.2 MiB`, `16 MiB`.
fn bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} bytes")
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
    /// forward, so each conversion walks only the distance moved (either way).
    cursor: (usize, usize),
}

impl Offsets<'_> {
    fn byte(&mut self, chars: usize) -> usize {
        if self.ascii {
            return chars.min(self.text.len());
        }
        let (mut c, mut b) = self.cursor;
        while c > chars && b > 0 {
            b -= 1;
            while !self.text.is_char_boundary(b) {
                b -= 1;
            }
            c -= 1;
        }
        for ch in self.text[b..].chars() {
            if c >= chars {
                break;
            }
            c += 1;
            b += ch.len_utf8();
        }
        self.cursor = (c, b);
        b
    }
}

/// An open list or mapping.
struct Open {
    /// Its node (ids grow with depth, so the stack is sorted by them).
    node: u32,
    anchor: usize,
    /// What a copy of it costs so far (see [`MAX_ALIAS_BYTES`]).
    size: usize,
    /// Lists and mappings nested in it, itself included.
    height: usize,
    /// Values in it, itself included.
    values: usize,
    body: Body,
}

enum Body {
    Seq(Vec<Value>),
    Map {
        map: Map<String, Value>,
        /// A key read, waiting for its value.
        pending: Option<(String, (usize, usize))>,
    },
}

/// What an alias needs to know of its anchor.
#[derive(Clone, Copy)]
struct Anchor {
    node: u32,
    /// What a copy costs (see [`MAX_ALIAS_BYTES`]).
    size: usize,
    /// Lists and mappings nested in it (0 for a scalar).
    height: usize,
    /// Values in it, itself included.
    values: usize,
}

/// The loader's state between events.
struct Loader {
    limits: Limits,
    nodes: Vec<Node>,
    stack: Vec<Open>,
    root: Option<Value>,
    /// Anchor id → its node, the size of a copy of it and its height.
    anchors: HashMap<usize, Anchor>,
    /// Bytes copied by aliases so far.
    copied: usize,
    /// Values so far, written and copied.
    values: usize,
}

impl Loader {
    /// A node about to be added to the innermost open node, written at
    /// `start..end`. A mapping or sequence in a key's place is refused.
    fn node(&mut self, start: usize, end: usize) -> Result<u32, YamlError> {
        self.count(1, start)?;
        let (parent, seg, key) = match self.stack.last() {
            None => (NONE, Seg::Index(0), (NONE, NONE)),
            Some(open) => match &open.body {
                Body::Seq(items) => (
                    open.node,
                    Seg::Index(u32::try_from(items.len()).unwrap_or(u32::MAX)),
                    (NONE, NONE),
                ),
                Body::Map {
                    pending: Some((k, (ks, ke))),
                    ..
                } => (
                    open.node,
                    Seg::Key(k.as_str().into()),
                    (*ks as u32, *ke as u32),
                ),
                Body::Map { pending: None, .. } => {
                    return Err(YamlError {
                        code: "yaml-syntax",
                        message: "a mapping key must be a plain value, not a list or a mapping"
                            .into(),
                        start,
                        end: start + 1,
                        hint: None,
                    });
                }
            },
        };
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            parent,
            seg,
            start: start as u32,
            end: end.max(start) as u32,
            key,
        });
        Ok(id)
    }

    /// When the innermost open node is a mapping waiting for a key, that
    /// mapping.
    fn key_slot(&mut self) -> Option<&mut Open> {
        match self.stack.last_mut() {
            Some(
                open @ Open {
                    body: Body::Map { pending: None, .. },
                    ..
                },
            ) => Some(open),
            _ => None,
        }
    }

    /// Count `n` more values, the first of them written at `start`.
    fn count(&mut self, n: usize, start: usize) -> Result<(), YamlError> {
        if self.values.saturating_add(n) > self.limits.values {
            return Err(too_many_values(start, self.limits.values));
        }
        self.values += n;
        Ok(())
    }

    /// Attach a finished node to its parent (or make it the root): its copy
    /// size `size`, its `height` and the `values` in it.
    fn attach(
        &mut self,
        value: Value,
        size: usize,
        height: usize,
        values: usize,
    ) -> Result<(), YamlError> {
        let Some(open) = self.stack.last_mut() else {
            self.root = Some(value);
            return Ok(());
        };
        open.size = open.size.saturating_add(size);
        open.height = open.height.max(height + 1);
        open.values = open.values.saturating_add(values);
        match &mut open.body {
            Body::Seq(items) => items.push(value),
            Body::Map { map, pending } => {
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
                map.insert(k, value);
            }
        }
        Ok(())
    }

    /// The value of the finished node `node`, found where it was written:
    /// under its innermost open ancestor, or in the finished root.
    fn find(&self, node: u32) -> Option<&Value> {
        let mut path: Vec<&Seg> = Vec::new();
        let mut cur = node;
        let mut v = loop {
            let n = self.nodes.get(cur as usize)?;
            if n.parent == NONE {
                break self.root.as_ref()?;
            }
            if let Ok(i) = self.stack.binary_search_by_key(&n.parent, |o| o.node) {
                break match (&self.stack[i].body, &n.seg) {
                    (Body::Seq(items), Seg::Index(i)) => items.get(*i as usize)?,
                    (Body::Map { map, .. }, Seg::Key(k)) => map.get(&**k)?,
                    _ => return None,
                };
            }
            path.push(&n.seg);
            cur = n.parent;
        };
        for seg in path.iter().rev() {
            v = match (v, seg) {
                (Value::Array(items), Seg::Index(i)) => items.get(*i as usize)?,
                (Value::Object(map), Seg::Key(k)) => map.get(&**k)?,
                _ => return None,
            };
        }
        Some(v)
    }

    /// Count `size` more bytes copied by the alias at `start..end`.
    fn copy(&mut self, size: usize, start: usize, end: usize) -> Result<(), YamlError> {
        let total = self.copied.saturating_add(size);
        if total > self.limits.alias_bytes {
            return Err(aliases_too_large(
                start,
                end,
                size,
                self.copied,
                self.limits.alias_bytes,
            ));
        }
        self.copied = total;
        Ok(())
    }
}

/// Parse `text` (the front matter, which starts at byte `base` of the file).
pub fn parse(text: &str, base: usize) -> Result<Doc, YamlError> {
    parse_with(text, base, Limits::DEFAULT)
}

/// [`parse`] under other bounds (tests hold documents to small ones).
pub fn parse_with(text: &str, base: usize, limits: Limits) -> Result<Doc, YamlError> {
    if base.saturating_add(text.len()) >= NONE as usize {
        return Err(YamlError {
            code: "yaml-too-large",
            message: "the file is larger than 4 GiB".into(),
            start: base,
            end: base + 1,
            hint: None,
        });
    }
    let mut offsets = Offsets {
        text,
        ascii: text.is_ascii(),
        cursor: (0, 0),
    };
    let mut ld = Loader {
        limits,
        nodes: Vec::new(),
        stack: Vec::new(),
        root: None,
        anchors: HashMap::new(),
        copied: 0,
        values: 0,
    };
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
                return Err(scan_error(e.info(), at, limits.depth));
            }
        };
        let (start, end) = span(&mut offsets, &ys);
        match event {
            Event::StreamStart | Event::StreamEnd | Event::Nothing | Event::DocumentEnd => {}
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
            }
            Event::SequenceStart(anchor, _) => ld.open(anchor, Body::Seq(Vec::new()), start)?,
            Event::MappingStart(anchor, _) => {
                let body = Body::Map {
                    map: Map::new(),
                    pending: None,
                };
                ld.open(anchor, body, start)?;
            }
            Event::SequenceEnd | Event::MappingEnd => ld.close(end)?,
            Event::Alias(id) => ld.alias(id, start, end)?,
            Event::Scalar(text, style, anchor, tag) => {
                let value = resolve(&text, style, tag.as_deref().map(|t| t.suffix.as_str()))
                    .map_err(|e| YamlError {
                        code: "yaml-syntax",
                        message: e.to_string(),
                        start,
                        end,
                        hint: None,
                    })?;
                ld.scalar(value, anchor, start, end)?;
            }
        }
    }
    Ok(ld.finish())
}

/// The parser's own error at byte `at`: too deep for its recursion limit, or
/// not YAML.
fn scan_error(info: &str, at: usize, depth: usize) -> YamlError {
    if info.contains("recursion limit") {
        return too_deep(at, depth);
    }
    YamlError {
        code: "yaml-syntax",
        message: format!("the front matter is not valid YAML: {info}"),
        start: at,
        end: at + 1,
        hint: Some(
            "check the indentation (spaces, not tabs) and that every quote and bracket closes"
                .into(),
        ),
    }
}

/// An alias of an anchor not (yet) defined.
fn undefined_alias(start: usize, end: usize) -> YamlError {
    YamlError {
        code: "yaml-syntax",
        message: "an alias names an anchor that is not defined before it".into(),
        start,
        end,
        hint: None,
    }
}

/// The events of the stream, one method each.
impl Loader {
    /// A sequence or mapping opens at `start`.
    fn open(&mut self, anchor: usize, body: Body, start: usize) -> Result<(), YamlError> {
        if self.stack.len() >= self.limits.depth {
            return Err(too_deep(start, self.limits.depth));
        }
        let node = self.node(start, start)?;
        self.stack.push(Open {
            node,
            anchor,
            size: VALUE_BYTES,
            height: 1,
            values: 1,
            body,
        });
        Ok(())
    }

    /// The innermost sequence or mapping closes at `end`.
    fn close(&mut self, end: usize) -> Result<(), YamlError> {
        let Some(open) = self.stack.pop() else {
            return Ok(());
        };
        let n = &mut self.nodes[open.node as usize];
        n.end = n.end.max(end as u32);
        if open.anchor > 0 {
            let a = Anchor {
                node: open.node,
                size: open.size,
                height: open.height,
                values: open.values,
            };
            self.anchors.insert(open.anchor, a);
        }
        let value = match open.body {
            Body::Seq(items) => Value::Array(items),
            Body::Map { map, .. } => Value::Object(map),
        };
        self.attach(value, open.size, open.height, open.values)
    }

    /// An alias at `start..end`: a copy of its anchor's value, bounded in
    /// depth and bytes before it is made.
    fn alias(&mut self, id: usize, start: usize, end: usize) -> Result<(), YamlError> {
        let Some(&Anchor {
            node,
            size,
            height,
            values,
        }) = self.anchors.get(&id)
        else {
            return Err(undefined_alias(start, end));
        };
        let depth = self.limits.depth;
        if self.stack.len() + height > depth {
            let mut e = too_deep(start, depth);
            e.message = format!(
                "this alias copies {height} levels of lists and mappings {} levels deep: the front matter would nest more than {} levels deep",
                self.stack.len(),
                depth
            );
            e.end = end;
            return Err(e);
        }
        self.copy(size, start, end)?;
        let Some(v) = self.find(node).cloned() else {
            return Err(undefined_alias(start, end));
        };
        if let Some(open) = self.key_slot() {
            // An alias used as a key: its text, when it is a scalar.
            let Value::String(s) = v else {
                return Err(YamlError {
                    code: "yaml-syntax",
                    message: "a mapping key must be a plain value".into(),
                    start,
                    end,
                    hint: None,
                });
            };
            open.size = open.size.saturating_add(KEY_BYTES + s.len());
            if let Body::Map { pending, .. } = &mut open.body {
                *pending = Some((s, (start, end)));
            }
            return Ok(());
        }
        self.node(start, end)?;
        self.count(values - 1, start)?;
        self.attach(v, size, height, values)
    }

    /// A scalar, already resolved, at `start..end`: a key or a value.
    fn scalar(
        &mut self,
        value: Value,
        anchor: usize,
        start: usize,
        end: usize,
    ) -> Result<(), YamlError> {
        if let Some(open) = self.key_slot() {
            let key = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            open.size = open.size.saturating_add(KEY_BYTES + key.len());
            if let Body::Map { pending, .. } = &mut open.body {
                *pending = Some((key, (start, end)));
            }
            return Ok(());
        }
        let node = self.node(start, end)?;
        let size = VALUE_BYTES + value.as_str().map_or(0, str::len);
        if anchor > 0 {
            let a = Anchor {
                node,
                size,
                height: 0,
                values: 1,
            };
            self.anchors.insert(anchor, a);
        }
        self.attach(value, size, 0, 1)
    }

    /// The document: its value, and its nodes in the order lookups search.
    fn finish(self) -> Doc {
        let Loader { nodes, root, .. } = self;
        let mut order: Vec<u32> = (0..nodes.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            let (x, y) = (&nodes[a as usize], &nodes[b as usize]);
            x.parent
                .cmp(&y.parent)
                .then_with(|| cmp_seg(x.seg.as_ref(), y.seg.as_ref()))
        });
        Doc {
            value: Arc::new(root.unwrap_or(Value::Null)),
            nodes,
            order,
        }
    }
}

/// A scalar whose core-schema tag (`!!int`, `!!float`, `!!bool`, `!!null`)
/// does not fit its text.
#[derive(Debug)]
struct BadTag {
    text: String,
    tag: String,
}

impl std::fmt::Display for BadTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` is not a valid !!{}", self.text, self.tag)
    }
}

impl std::error::Error for BadTag {}

/// A scalar by YAML 1.2's core schema.
fn resolve(text: &str, style: ScalarStyle, tag: Option<&str>) -> Result<Value, BadTag> {
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
                Err(BadTag {
                    text: text.to_owned(),
                    tag: t.to_owned(),
                })
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

    #[test]
    fn aliases_copy_their_anchor_wherever_it_was_written() {
        // Anchored inside a mapping still open, in a finished sibling, in a
        // list, nested; used as a key.
        assert_eq!(
            v("a: {b: &x 1, c: *x}\nd: *x"),
            json!({"a": {"b": 1, "c": 1}, "d": 1})
        );
        assert_eq!(
            v("a: &l [1, &m {k: v}]\nb: [*l, *m]\n&kk key: 1"),
            json!({"a": [1, {"k": "v"}], "b": [[1, {"k": "v"}], {"k": "v"}], "key": 1})
        );
        assert_eq!(
            parse("a: &m {k: v}\nc: {*m : 2}", 0).unwrap_err().code,
            "yaml-syntax"
        );
        assert_eq!(
            v("x: &k name\ny: {*k : 2}"),
            json!({"x": "name", "y": {"name": 2}})
        );
        assert_eq!(
            v("a: &a {b: [1, 2]}\nc: [*a, *a]"),
            json!({"a": {"b": [1, 2]}, "c": [{"b": [1, 2]}, {"b": [1, 2]}]})
        );
        // A copy has the alias's place, not places of its own.
        let d = parse("a: &a {b: 1}\nc: *a\n", 0).unwrap();
        assert!(d.has("/c") && !d.has("/c/b") && d.has("/a/b"));
        assert_eq!(d.at("/c/b"), d.at("/c"));
    }

    #[test]
    fn a_large_anchor_aliased_many_times_is_refused_before_it_is_copied() {
        // 1 MB aliased 5,000 times would be 5 GB.
        let big = "x".repeat(1 << 20);
        let aliases = vec!["*a"; 5000].join(", ");
        let text = format!("a: &a {big}\nb: [{aliases}]\n");
        let e = parse(&text, 10).unwrap_err();
        assert_eq!(e.code, "yaml-too-large");
        assert!(e.message.contains("16 MiB"), "{}", e.message);
        assert_eq!(&text[e.start - 10..e.end - 10], "*a");
        // Just under the bound is fine.
        let n = MAX_ALIAS_BYTES / (big.len() + VALUE_BYTES);
        let aliases = vec!["*a"; n].join(", ");
        let d = parse(&format!("a: &a {big}\nb: [{aliases}]\n"), 0).unwrap();
        assert_eq!(d.value["b"].as_array().map(Vec::len), Some(n));
    }

    #[test]
    fn anchors_copy_nothing() {
        // 150 nested anchors around 1 MB: copied at each anchor, 150 MB.
        let mut text = format!("\"{}\"", "y".repeat(1 << 20));
        for i in 0..150 {
            text = format!("&a{i} [{text}]");
        }
        let d = parse(&text, 0).unwrap();
        assert!(d.value.is_array());
    }

    #[test]
    fn a_long_key_is_stored_once() {
        // A 1 MB key above 90,000 values: whole pointers would be 90 GB.
        let key = "k".repeat(1 << 20);
        let text = format!("? {key}\n: [{}]\n", vec!["1"; 90_000].join(","));
        let d = parse(&text, 0).unwrap();
        let at = d.at(&format!("/{key}/89999"));
        assert_eq!(&text[at.start..at.end], "1");
        assert!(d.has(&format!("/{key}/89999")) && !d.has(&format!("/{key}/90000")));
    }

    #[test]
    fn too_many_values() {
        let limits = Limits {
            values: 1000,
            ..Limits::DEFAULT
        };
        // The list itself is one.
        let text = format!("[{}]", vec!["1"; 1000].join(","));
        let e = parse_with(&text, 0, limits).unwrap_err();
        assert_eq!(e.code, "yaml-too-large");
        assert!(e.message.contains("more than 1000 values"), "{}", e.message);
        let text = format!("[{}]", vec!["1"; 999].join(","));
        assert_eq!(parse_with(&text, 0, limits).unwrap().written(), 1000);
        // What aliases copy counts: 10 + 1 + 100 × 11.
        let text = format!(
            "a: &a [{}]\nb: [{}]",
            ["1"; 9].join(","),
            vec!["*a"; 100].join(",")
        );
        let e = parse_with(&text, 0, limits).unwrap_err();
        assert!(e.message.contains("aliases copy included"), "{}", e.message);
        assert!(parse_with(&text.replace("*a", "1"), 0, limits).is_ok());
    }

    #[test]
    fn aliases_do_not_nest_past_the_depth_limit() {
        // Each layer aliases the last inside 150 more levels: 150, 300, 450…
        let mut text = String::new();
        for i in 0..4 {
            let inner = if i == 0 {
                "1".to_owned()
            } else {
                format!("*l{}", i - 1)
            };
            text += &format!(
                "l{i}: &l{i} {}{inner}{}\n",
                "[".repeat(150),
                "]".repeat(150)
            );
        }
        let e = parse(&text, 0).unwrap_err();
        assert_eq!(e.code, "too-deep");
        assert_eq!(&text[e.start..e.end], "*l0");
        // Within it, fine.
        let ok = "a: &a [[1]]\nb: [[*a]]\n";
        assert_eq!(v(ok)["b"], json!([[[[1]]]]));
        let limits = Limits {
            depth: 3,
            ..Limits::DEFAULT
        };
        assert_eq!(parse_with(ok, 0, limits).unwrap_err().code, "too-deep");
    }

    #[test]
    fn pointers_with_escapes_and_indices() {
        let text = "a/b: {c~d: [x, y]}\n'0': z\n";
        let d = parse(text, 0).unwrap();
        let at = d.at("/a~1b/c~0d/1");
        assert_eq!(&text[at.start..at.end], "y");
        assert!(d.has("/0") && !d.has("/a~1b/c~0d/01") && !d.has("/a~1b/c~0d/2"));
        assert_eq!(d.at("/nothing"), d.at(""));
        assert_eq!(parse("", 0).unwrap().at("/x").end, 0);
    }
}
