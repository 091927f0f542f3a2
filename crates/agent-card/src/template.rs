//! Handlebars, bounded: the one way agentfile renders a template (an agent
//! file's `## System` and `## Rules`; nothing else in the workspace uses
//! handlebars).
//!
//! handlebars 6 has no limits of its own. An inline partial that includes
//! itself recurses until the stack overflows, which aborts the process; nine
//! nested `#each` over ten items render 10⁹ times and grow one string
//! towards gigabytes; its parser recurses once per level of nesting. So a
//! template is checked before it renders and metered while it renders:
//!
//! - **before**: the source may open at most [`MAX_BLOCKS`] blocks and nest
//!   brackets at most [`MAX_BRACKET_DEPTH`] deep inside one `{{…}}` (the
//!   parser's recursion); every partial is named as written (`{{> name}}`,
//!   not computed) and defined in the template; no inline partial includes
//!   itself, directly or through others; partial blocks (`{{#> name}}…`)
//!   are refused, because handlebars renders their content into a buffer
//!   of its own that no bound here sees;
//! - **while**: rendering costs steps — an element one, an element that
//!   copies data (a partial, `lookup`, a subexpression) more, by the size of
//!   the data — and every `#each` iteration costs its body's steps; past
//!   [`MAX_STEPS`] the render stops, as it does past [`MAX_OUTPUT`] bytes of
//!   text. The work of a render is thus bounded whatever the template and
//!   its data, including loops that print nothing.
//!
//! The render runs on a thread of its own with a large stack, so that even
//! the deepest template these rules let through cannot reach the end of the
//! caller's (a server's worker threads have 2 MiB).
//!
//! What it is not: a sandbox for helpers. Only handlebars' built-in helpers
//! exist (`each` is replaced by a metered copy with the same behaviour).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use handlebars::template::{Parameter, TemplateElement};
use handlebars::{
    BlockContext, BlockParams, Context, Handlebars, Helper, HelperDef, HelperResult, JsonRender,
    JsonValue, Output, RenderContext, RenderError, RenderErrorReason, Renderable, Template,
};
use serde_json::Value;

/// Blocks (`{{#…}}`, `{{else …}}`, `{{^…}}`) one template may open: the
/// parser and the renderer recurse once per level of nesting.
pub const MAX_BLOCKS: usize = 256;

/// Nesting of `(`, `[` and `{` inside one `{{…}}` (subexpressions, literal
/// arrays and objects), at most.
pub const MAX_BRACKET_DEPTH: usize = 32;

/// The most steps one render may take (an element rendered is about one
/// step; see the module's documentation).
pub const MAX_STEPS: u64 = 1_000_000;

/// The most text one render may produce.
pub const MAX_OUTPUT: usize = 1 << 20;

/// Bytes of data one step stands for when an element copies data.
const BYTES_PER_STEP: u64 = 256;

/// A partial with `key=value` arguments turns its context into a new
/// object (a string into an object of one entry per character): its copy
/// costs this many times more than a plain one.
const HASH_COPY_FACTOR: u64 = 64;

/// The stack of the thread that renders (reserved; touched only as needed).
const RENDER_STACK: usize = 64 << 20;

/// Why a template was not rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    /// What is wrong, in words, without the template's name: for
    /// [`FailureKind::Invalid`] a reason ("the partial `p` includes
    /// itself"), for [`FailureKind::Limit`] a predicate ("renders more than
    /// 1 MiB of text").
    pub message: String,
    pub hint: Option<String>,
    /// 1-based line and column in the template's source, when known.
    pub at: Option<(usize, usize)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The template is wrong (syntax, an unknown helper, a recursive
    /// partial…).
    Invalid,
    /// The template is fine but takes more than a bound allows.
    Limit,
}

impl Failure {
    fn invalid(message: impl Into<String>, hint: Option<&str>) -> Failure {
        Failure {
            kind: FailureKind::Invalid,
            message: message.into(),
            hint: hint.map(str::to_owned),
            at: None,
        }
    }

    fn limit(message: impl Into<String>, hint: &str) -> Failure {
        Failure {
            kind: FailureKind::Limit,
            message: message.into(),
            hint: Some(hint.to_owned()),
            at: None,
        }
    }
}

/// Render `src` over `data` with escaping off (the text is a prompt, not
/// HTML), within the bounds above.
pub fn render(src: &str, data: &Value) -> Result<String, Failure> {
    scan(src)?;
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("template".to_owned())
            .stack_size(RENDER_STACK)
            .spawn_scoped(scope, || render_here(src, data));
        match worker {
            Ok(worker) => worker.join().unwrap_or_else(|_| {
                Err(Failure::invalid(
                    "the template engine failed on it (a bug in handlebars)",
                    Some("simplify the template, or set `templateEngine: \"\"` to send the text as written"),
                ))
            }),
            // No thread: render on this one; the limits keep the stack it
            // needs small.
            Err(_) => render_here(src, data),
        }
    })
}

fn render_here(src: &str, data: &Value) -> Result<String, Failure> {
    let tpl = Template::compile(src).map_err(|e| from_render_error(&RenderError::from(e)))?;
    let partials = Partials::of(&tpl)?;
    let weight = data_weight(data);
    let costs = partials.costs(weight);
    let first = cost_of(&tpl, &costs, weight);
    let meter = Arc::new(Meter {
        costs,
        weight,
        steps: AtomicU64::new(0),
        exceeded: AtomicU8::new(NOT_EXCEEDED),
    });
    if !meter.charge(first) {
        return Err(steps_failure());
    }
    let mut hbs = Handlebars::new();
    hbs.register_escape_fn(handlebars::no_escape);
    hbs.register_helper(
        "each",
        Box::new(MeteredEach {
            meter: meter.clone(),
        }),
    );
    let ctx = Context::wraps(data).map_err(|e| from_render_error(&e))?;
    let mut rc = RenderContext::new(None);
    let mut out = Capped {
        text: String::new(),
        meter: &meter,
    };
    match tpl.render(&hbs, &ctx, &mut rc, &mut out) {
        Ok(()) => Ok(out.text),
        Err(e) => Err(match meter.exceeded.load(Ordering::Relaxed) {
            STEPS_EXCEEDED => steps_failure(),
            OUTPUT_EXCEEDED => Failure::limit(
                format!("renders more than {} of text", mib(MAX_OUTPUT)),
                "a prompt that long is a mistake: look for an `#each` inside another, or a partial included many times",
            ),
            _ => from_render_error(&e),
        }),
    }
}

fn steps_failure() -> Failure {
    Failure::limit(
        format!("takes more than {MAX_STEPS} steps to render"),
        "look for `#each` blocks nested inside each other, partials included many times, or a large `input` copied by partials and `lookup`",
    )
}

fn mib(bytes: usize) -> String {
    format!("{} MiB", bytes >> 20)
}

/// A handlebars error as a failure: its first line, without the prefixes.
fn from_render_error(e: &RenderError) -> Failure {
    let full = e.reason().to_string();
    let first = full.lines().next().unwrap_or("").trim();
    let reason = first
        .rsplit_once("Template error: ")
        .map_or(first, |(_, r)| r)
        .to_owned();
    let reason = if reason.starts_with("invalid handlebars syntax") {
        "an unclosed `{{#block}}` or a malformed `{{…}}`".to_owned()
    } else {
        reason
    };
    Failure {
        kind: FailureKind::Invalid,
        message: reason,
        hint: None,
        at: e.line_no.zip(e.column_no),
    }
}

// ---------------------------------------------------------------------------
// Before parsing: the source's nesting.

/// Refuse a source whose nesting the parser would recurse into too deeply.
fn scan(src: &str) -> Result<(), Failure> {
    let b = src.as_bytes();
    let mut blocks = 0usize;
    let mut i = 0;
    let (mut line, mut line_start) = (1usize, 0usize);
    while i + 1 < b.len() {
        if b[i] == b'\n' {
            line += 1;
            line_start = i + 1;
        }
        if !(b[i] == b'{' && b[i + 1] == b'{') {
            i += 1;
            continue;
        }
        let at = Some((line, src[line_start..i].chars().count() + 1));
        let open = i;
        i += 2;
        // `{{!-- … --}}` and `{{! … }}`: prose, skipped whole.
        if b.get(i) == Some(&b'!') {
            let end = if src[i..].starts_with("!--") {
                src[i..].find("--}}").map(|e| i + e + 4)
            } else {
                src[i..].find("}}").map(|e| i + e + 2)
            };
            i = end.unwrap_or(b.len());
            count_lines(b, open, i, &mut line, &mut line_start);
            continue;
        }
        let mut j = i;
        while j < b.len() && (b[j] == b'~' || b[j].is_ascii_whitespace() || b[j] == b'{') {
            j += 1;
        }
        let rest = &src[j..];
        if rest.starts_with('#') || rest.starts_with('^') || rest.starts_with("else") {
            blocks += 1;
            if blocks > MAX_BLOCKS {
                let mut f = Failure::limit(
                    format!("opens more than {MAX_BLOCKS} template blocks"),
                    "split the text, or set `templateEngine: \"\"` to send it as written",
                );
                f.at = at;
                return Err(f);
            }
        }
        // The brackets of this `{{…}}`, strings skipped, until the `}}`
        // that closes it at depth 0.
        let mut depth = 0usize;
        let mut quote: Option<u8> = None;
        while i < b.len() {
            let c = b[i];
            if let Some(q) = quote {
                if c == b'\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
                i += 1;
                continue;
            }
            match c {
                b'"' | b'\'' => quote = Some(c),
                b'(' | b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_BRACKET_DEPTH {
                        let mut f = Failure::limit(
                            format!(
                                "nests brackets more than {MAX_BRACKET_DEPTH} deep inside one `{{{{…}}}}`"
                            ),
                            "use fewer nested subexpressions, or set `templateEngine: \"\"` to send the text as written",
                        );
                        f.at = at;
                        return Err(f);
                    }
                }
                b')' | b']' => depth = depth.saturating_sub(1),
                b'}' if depth > 0 => depth -= 1,
                b'}' => {
                    i += if b.get(i + 1) == Some(&b'}') { 2 } else { 1 };
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        count_lines(b, open, i.min(b.len()), &mut line, &mut line_start);
    }
    Ok(())
}

fn count_lines(b: &[u8], from: usize, to: usize, line: &mut usize, line_start: &mut usize) {
    // `from` is a `{`, never a newline the caller counted already.
    for (k, &c) in b[from..to].iter().enumerate() {
        if c == b'\n' {
            *line += 1;
            *line_start = from + k + 1;
        }
    }
}

// ---------------------------------------------------------------------------
// After parsing: partials, and what rendering costs.

/// The inline partials of a template and the partials each one includes.
struct Partials<'t> {
    /// Name → the bodies defining it (an inline partial may be defined in
    /// several blocks; any of them may be the one in force).
    defs: HashMap<String, Vec<&'t Template>>,
    /// Name → the partials its bodies include (sorted, once each).
    edges: HashMap<String, Vec<String>>,
}

impl<'t> Partials<'t> {
    /// Collect and check every partial of `root`: named as written,
    /// defined, not recursive, no partial blocks.
    fn of(root: &'t Template) -> Result<Partials<'t>, Failure> {
        let mut p = Partials {
            defs: HashMap::new(),
            edges: HashMap::new(),
        };
        p.collect(root)?;
        // Every partial included must be defined here: nothing else is
        // registered, so a name that matched nothing here would fail when
        // rendered anyway — and checking it here keeps the graph below
        // complete.
        let mut refs = Vec::new();
        includes(root, &mut refs);
        for body in p.defs.values().flatten() {
            includes(body, &mut refs);
        }
        for name in refs {
            if !p.defs.contains_key(&name) {
                return Err(Failure::invalid(
                    format!("the partial `{name}` is not defined in this template"),
                    Some("define it first: `{{#*inline \"NAME\"}}…{{/inline}}`"),
                ));
            }
        }
        for (name, bodies) in &p.defs {
            let mut out = Vec::new();
            for body in bodies {
                includes(body, &mut out);
            }
            out.sort_unstable();
            out.dedup();
            p.edges.insert(name.clone(), out);
        }
        p.acyclic()?;
        Ok(p)
    }

    fn collect(&mut self, t: &'t Template) -> Result<(), Failure> {
        for e in &t.elements {
            match e {
                TemplateElement::HelperBlock(ht) => {
                    for sub in [&ht.template, &ht.inverse].into_iter().flatten() {
                        self.collect(sub)?;
                    }
                }
                TemplateElement::DecoratorBlock(dt) | TemplateElement::DecoratorExpression(dt) => {
                    if dt.name.as_name() == Some("inline") {
                        let name = match dt.params.first() {
                            Some(Parameter::Literal(JsonValue::String(s))) => s.clone(),
                            _ => {
                                return Err(Failure::invalid(
                                    "an inline partial's name must be a quoted string",
                                    Some("write `{{#*inline \"NAME\"}}…{{/inline}}`"),
                                ));
                            }
                        };
                        if let Some(body) = &dt.template {
                            self.defs.entry(name).or_default().push(body);
                        }
                    }
                    if let Some(body) = &dt.template {
                        self.collect(body)?;
                    }
                }
                TemplateElement::PartialExpression(dt) if literal_name(&dt.name).is_none() => {
                    return Err(Failure::invalid(
                        "a partial's name must be written out (`{{> name}}`), not computed",
                        None,
                    ));
                }
                TemplateElement::PartialBlock(dt) => {
                    let name = literal_name(&dt.name).unwrap_or_default();
                    return Err(Failure::invalid(
                        format!(
                            "partial blocks (`{{{{#> {name}}}}}…{{{{/{name}}}}}`) are not supported in agent templates"
                        ),
                        Some(
                            "include the partial with `{{> NAME}}` and pass what it needs as `key=value`",
                        ),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Refuse an inline partial that includes itself, directly or through
    /// others, naming the cycle.
    fn acyclic(&self) -> Result<(), Failure> {
        // 0 unvisited, 1 on the path, 2 done.
        let mut state: HashMap<&str, u8> = HashMap::new();
        let mut names: Vec<&str> = self.defs.keys().map(String::as_str).collect();
        names.sort_unstable();
        for start in names {
            if state.get(start).copied().unwrap_or(0) != 0 {
                continue;
            }
            // An explicit stack of (name, its includes, next index), so a
            // long chain of partials cannot exhaust this thread's stack.
            let mut path: Vec<(&str, Vec<&str>, usize)> = vec![(start, self.edges(start), 0)];
            state.insert(start, 1);
            while let Some((name, edges, next)) = path.last_mut() {
                let Some(&to) = edges.get(*next) else {
                    state.insert(*name, 2);
                    path.pop();
                    continue;
                };
                *next += 1;
                match state.get(to).copied().unwrap_or(0) {
                    1 => {
                        let from = path.iter().position(|(n, _, _)| *n == to).unwrap_or(0);
                        let mut cycle: Vec<&str> =
                            path[from..].iter().map(|(n, _, _)| *n).collect();
                        cycle.push(to);
                        let words = if cycle.len() == 2 {
                            format!("the partial `{to}` includes itself")
                        } else {
                            format!(
                                "the partial `{to}` includes itself through others ({})",
                                cycle.join(" → ")
                            )
                        };
                        return Err(Failure::invalid(
                            words,
                            Some(
                                "recursive partials are not supported: a template's partials must form no cycle",
                            ),
                        ));
                    }
                    0 => {
                        state.insert(to, 1);
                        let e = self.edges(to);
                        path.push((to, e, 0));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The partials that the bodies of `name` include.
    fn edges(&self, name: &str) -> Vec<&str> {
        self.edges
            .get(name)
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The steps one inclusion of each partial costs (its body, with the
    /// partials it includes), computed in dependency order: the graph has
    /// no cycle.
    fn costs(&self, weight: u64) -> HashMap<String, u64> {
        let mut costs: HashMap<String, u64> = HashMap::new();
        let mut names: Vec<&str> = self.defs.keys().map(String::as_str).collect();
        names.sort_unstable();
        for start in names {
            let mut stack = vec![start];
            while let Some(&name) = stack.last() {
                if costs.contains_key(name) {
                    stack.pop();
                    continue;
                }
                let pending: Vec<&str> = self
                    .edges(name)
                    .into_iter()
                    .filter(|e| !costs.contains_key(*e))
                    .collect();
                if pending.is_empty() {
                    let c = self
                        .defs
                        .get(name)
                        .into_iter()
                        .flatten()
                        .map(|b| cost_of(b, &costs, weight))
                        .max()
                        .unwrap_or(0);
                    costs.insert(name.to_owned(), c);
                    stack.pop();
                } else {
                    stack.extend(pending);
                }
            }
        }
        costs
    }
}

/// A partial's name as written, or `None` when it is computed.
fn literal_name(p: &Parameter) -> Option<String> {
    // As handlebars reads it (`Parameter::expand_as_name`).
    match p {
        Parameter::Literal(v) => Some(v.render()),
        _ => p.as_name().map(str::to_owned),
    }
}

/// The partials `t` includes, not counting those inside the inline
/// partials it defines (they are partials of their own).
fn includes(t: &Template, out: &mut Vec<String>) {
    for e in &t.elements {
        match e {
            TemplateElement::HelperBlock(ht) => {
                for sub in [&ht.template, &ht.inverse].into_iter().flatten() {
                    includes(sub, out);
                }
            }
            TemplateElement::DecoratorBlock(dt) | TemplateElement::DecoratorExpression(dt)
                if dt.name.as_name() != Some("inline") =>
            {
                if let Some(body) = &dt.template {
                    includes(body, out);
                }
            }
            TemplateElement::PartialExpression(dt) | TemplateElement::PartialBlock(dt) => {
                out.extend(literal_name(&dt.name));
            }
            _ => {}
        }
    }
}

/// How many bytes `data` takes as JSON, as steps of copying: what a copy
/// of any part of it costs at most.
fn data_weight(data: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    let _ = serde_json::to_writer(&mut n, data);
    1 + n.0 / BYTES_PER_STEP
}

/// The steps rendering `t` once costs, `#each` bodies counted once (each
/// further iteration is charged as it happens).
fn cost_of(t: &Template, partials: &HashMap<String, u64>, weight: u64) -> u64 {
    let mut total: u64 = 0;
    for e in &t.elements {
        let c = match e {
            TemplateElement::RawString(_) | TemplateElement::Comment(_) => 1,
            TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht) => {
                1 + copies(&ht.name, &ht.params, &ht.hash, weight)
            }
            TemplateElement::HelperBlock(ht) => {
                let body = [&ht.template, &ht.inverse]
                    .into_iter()
                    .flatten()
                    .fold(0u64, |acc, b| {
                        acc.saturating_add(cost_of(b, partials, weight))
                    });
                let derived = matches!(
                    ht.params.first(),
                    Some(Parameter::Literal(_) | Parameter::Subexpression(_))
                );
                (1 + copies(&ht.name, &ht.params, &ht.hash, weight))
                    .saturating_add(if derived { weight } else { 0 })
                    .saturating_add(body)
            }
            TemplateElement::PartialExpression(dt) | TemplateElement::PartialBlock(dt) => {
                let name = literal_name(&dt.name).unwrap_or_default();
                let copy = if dt.hash.is_empty() {
                    weight
                } else {
                    weight.saturating_mul(HASH_COPY_FACTOR)
                };
                let params = dt
                    .params
                    .iter()
                    .chain(dt.hash.values())
                    .map(|p| param_copies(p, weight))
                    .fold(0u64, u64::saturating_add);
                (1 + copy)
                    .saturating_add(params)
                    .saturating_add(partials.get(&name).copied().unwrap_or(0))
            }
            _ => 1,
        };
        total = total.saturating_add(c);
    }
    total
}

/// The copying a helper call does: `lookup` copies what it finds, and a
/// subexpression's helper may copy what it is given.
fn copies(
    name: &Parameter,
    params: &[Parameter],
    hash: &HashMap<String, Parameter>,
    weight: u64,
) -> u64 {
    let own = if name.as_name() == Some("lookup") {
        weight
    } else {
        0
    };
    params
        .iter()
        .chain(hash.values())
        .map(|p| param_copies(p, weight))
        .fold(own, u64::saturating_add)
}

fn param_copies(p: &Parameter, weight: u64) -> u64 {
    match p {
        Parameter::Subexpression(s) => {
            let inner = match s.as_element() {
                TemplateElement::Expression(ht) | TemplateElement::HtmlExpression(ht) => {
                    copies(&ht.name, &ht.params, &ht.hash, weight)
                }
                _ => 0,
            };
            (1 + weight).saturating_add(inner)
        }
        _ => 0,
    }
}

// ---------------------------------------------------------------------------
// While rendering: the meter, the capped output, the metered `each`.

const NOT_EXCEEDED: u8 = 0;
const STEPS_EXCEEDED: u8 = 1;
const OUTPUT_EXCEEDED: u8 = 2;

/// The steps taken so far, and which bound stopped the render.
struct Meter {
    costs: HashMap<String, u64>,
    weight: u64,
    steps: AtomicU64,
    exceeded: AtomicU8,
}

impl Meter {
    /// Take `n` steps; `false` (and the render must stop) past the bound.
    fn charge(&self, n: u64) -> bool {
        let before = self.steps.fetch_add(n, Ordering::Relaxed);
        if before.saturating_add(n) > MAX_STEPS {
            self.exceeded.store(STEPS_EXCEEDED, Ordering::Relaxed);
            return false;
        }
        true
    }
}

/// The render's text, refused past [`MAX_OUTPUT`].
struct Capped<'m> {
    text: String,
    meter: &'m Meter,
}

impl Output for Capped<'_> {
    fn write(&mut self, seg: &str) -> std::io::Result<()> {
        if self.text.len().saturating_add(seg.len()) > MAX_OUTPUT {
            self.meter
                .exceeded
                .store(OUTPUT_EXCEEDED, Ordering::Relaxed);
            return Err(std::io::Error::other("the rendered text is too long"));
        }
        self.text.push_str(seg);
        Ok(())
    }
}

/// handlebars' `each`, with every iteration charged to the meter: the body's
/// steps, and the copy of the item when the list is not in the data (a
/// literal, or a subexpression's value).
struct MeteredEach {
    meter: Arc<Meter>,
}

impl HelperDef for MeteredEach {
    fn call<'reg: 'rc, 'rc>(
        &self,
        h: &Helper<'rc>,
        r: &'reg Handlebars<'reg>,
        ctx: &'rc Context,
        rc: &mut RenderContext<'reg, 'rc>,
        out: &mut dyn Output,
    ) -> HelperResult {
        let value = h
            .param(0)
            .ok_or(RenderErrorReason::ParamNotFoundForIndex("each", 0))?;
        let Some(t) = h.template() else {
            return Ok(());
        };
        let path = value.context_path();
        // An iteration costs one step even when its body is empty.
        let per_item = (1 + cost_of(t, &self.meter.costs, self.meter.weight))
            .saturating_add(if path.is_none() { self.meter.weight } else { 0 });
        let over = || RenderError::from(RenderErrorReason::Other("too many steps".to_owned()));
        match value.value() {
            Value::Array(list) if !list.is_empty() || h.inverse().is_none() => {
                rc.push_block(block_for(path, value.value()));
                let len = list.len();
                for (i, v) in list.iter().enumerate() {
                    if !self.meter.charge(per_item) {
                        return Err(over());
                    }
                    if let Some(block) = rc.block_mut() {
                        let index = Value::from(i);
                        block.set_local_var("first", Value::Bool(i == 0));
                        block.set_local_var("last", Value::Bool(i + 1 == len));
                        block.set_local_var("index", index.clone());
                        update_block(block, path, i.to_string(), i == 0, v);
                        set_block_param(block, h, path, &index, v)?;
                    }
                    t.render(r, ctx, rc, out)?;
                }
                rc.pop_block();
                Ok(())
            }
            Value::Object(obj) if !obj.is_empty() || h.inverse().is_none() => {
                rc.push_block(block_for(path, value.value()));
                let len = obj.len();
                for (i, (k, v)) in obj.iter().enumerate() {
                    if !self.meter.charge(per_item) {
                        return Err(over());
                    }
                    if let Some(block) = rc.block_mut() {
                        let key = Value::String(k.clone());
                        block.set_local_var("first", Value::Bool(i == 0));
                        block.set_local_var("last", Value::Bool(i + 1 == len));
                        block.set_local_var("key", key.clone());
                        block.set_local_var("index", Value::from(i));
                        update_block(block, path, k.clone(), i == 0, v);
                        set_block_param(block, h, path, &key, v)?;
                    }
                    t.render(r, ctx, rc, out)?;
                }
                rc.pop_block();
                Ok(())
            }
            _ => match h.inverse() {
                Some(inverse) => inverse.render(r, ctx, rc, out),
                None if r.strict_mode() => Err(RenderError::strict_error(value.relative_path())),
                None => Ok(()),
            },
        }
    }
}

/// The block an `each` pushes (handlebars' `create_block`).
fn block_for<'rc>(path: Option<&Vec<String>>, value: &Value) -> BlockContext<'rc> {
    let mut block = BlockContext::new();
    match path {
        Some(p) => block.base_path_mut().clone_from(p),
        None => block.set_base_value(value.clone()),
    }
    block
}

/// Point the block at the current item (handlebars' `update_block_context`).
fn update_block(
    block: &mut BlockContext<'_>,
    base: Option<&Vec<String>>,
    relative: String,
    first: bool,
    value: &Value,
) {
    match base {
        Some(p) if first => {
            let mut v = Vec::with_capacity(p.len() + 1);
            v.extend_from_slice(p);
            v.push(relative);
            *block.base_path_mut() = v;
        }
        Some(_) => {
            if let Some(last) = block.base_path_mut().last_mut() {
                *last = relative;
            }
        }
        None => block.set_base_value(value.clone()),
    }
}

/// `as |item key|` (handlebars' `set_block_param`).
fn set_block_param<'rc>(
    block: &mut BlockContext<'rc>,
    h: &Helper<'rc>,
    base: Option<&Vec<String>>,
    key: &Value,
    value: &Value,
) -> Result<(), RenderError> {
    let item = |params: &mut BlockParams<'rc>, name: &'rc str| {
        if base.is_some() {
            params.add_path(name, Vec::new())
        } else {
            params.add_value(name, value.clone())
        }
    };
    if let Some(name) = h.block_param() {
        let mut params = BlockParams::new();
        item(&mut params, name)?;
        block.set_block_params(params);
    } else if let Some((name, key_name)) = h.block_param_pair() {
        let mut params = BlockParams::new();
        item(&mut params, name)?;
        params.add_value(key_name, key.clone())?;
        block.set_block_params(params);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(src: &str, data: Value) -> String {
        render(src, &data).unwrap_or_else(|f| panic!("{src}: {f:?}"))
    }

    fn fails(src: &str, data: Value) -> Failure {
        match render(src, &data) {
            Ok(s) => panic!("{src}: rendered {} bytes", s.len()),
            Err(f) => f,
        }
    }

    #[test]
    fn each_behaves_as_handlebars_does() {
        let data = json!({"a": [1, 2, 3], "o": {"x": 1, "y": 2}, "n": []});
        let cases = [
            "{{#each a}}{{@index}}:{{this}}{{#if @first}}F{{/if}}{{#if @last}}L{{/if}} {{/each}}",
            "{{#each o}}{{@key}}={{this}}/{{@index}} {{/each}}",
            "{{#each a as |v i|}}{{i}}={{v}},{{/each}}",
            "{{#each o as |v k|}}{{k}}={{v}},{{/each}}",
            "{{#each n}}x{{else}}empty{{/each}}",
            "{{#each missing}}x{{else}}none{{/each}}",
            "{{#each a}}{{#each ../o}}{{@../index}}{{@key}}{{/each}}{{/each}}",
            "{{#each a}}{{../a.[1]}}{{/each}}",
            "{{#each [1,2]}}{{this}}{{/each}}",
            "{{#each (lookup this \"a\")}}{{this}}{{/each}}",
            "{{#*inline \"p\"}}<{{this}}>{{/inline}}{{#each a}}{{> p}}{{/each}}",
        ];
        for src in cases {
            let mut hbs = Handlebars::new();
            hbs.register_escape_fn(handlebars::no_escape);
            let want = hbs.render_template(src, &data).unwrap();
            assert_eq!(ok(src, data.clone()), want, "{src}");
        }
    }

    #[test]
    fn a_recursive_partial_is_refused_not_run() {
        let f = fails("{{#*inline \"p\"}}x{{> p}}{{/inline}}{{> p}}", json!({}));
        assert_eq!(f.kind, FailureKind::Invalid);
        assert!(f.message.contains("`p` includes itself"), "{f:?}");
        let f = fails(
            "{{#*inline \"a\"}}{{> b}}{{/inline}}{{#*inline \"b\"}}{{#if x}}{{> a}}{{/if}}{{/inline}}{{> a}}",
            json!({}),
        );
        assert!(f.message.contains("a → b → a"), "{f:?}");
        // Defining a partial inside another is not including it.
        ok(
            "{{#*inline \"a\"}}{{#*inline \"b\"}}{{> a}}{{/inline}}A{{/inline}}{{> a}}",
            json!({}),
        );
    }

    #[test]
    fn computed_undefined_and_block_partials_are_refused() {
        for src in [
            "{{> (lookup this \"p\")}}",
            "{{> nowhere}}",
            "{{#> layout}}x{{/layout}}",
            "{{#*inline name}}x{{/inline}}",
        ] {
            assert_eq!(
                fails(src, json!({"p": "q", "name": "n"})).kind,
                FailureKind::Invalid,
                "{src}"
            );
        }
    }

    #[test]
    fn nested_loops_stop_at_the_step_bound() {
        let ten: Vec<u32> = (0..10).collect();
        let mut src = String::new();
        for _ in 0..9 {
            src.push_str("{{#each @root.a}}");
        }
        for _ in 0..9 {
            src.push_str("{{/each}}");
        }
        // Nothing printed: only the steps stop it.
        let f = fails(&src, json!({"a": ten}));
        assert_eq!(f.kind, FailureKind::Limit);
        assert!(f.message.contains("steps"), "{f:?}");
        // Printing: whichever bound comes first.
        let src = src.replace("{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}");
        assert_eq!(fails(&src, json!({"a": ten})).kind, FailureKind::Limit);
    }

    #[test]
    fn partials_expanding_exponentially_are_refused_before_rendering() {
        let mut src = String::from("{{#*inline \"p0\"}}x{{/inline}}");
        for i in 1..40 {
            src.push_str(&format!(
                "{{{{#*inline \"p{i}\"}}}}{{{{> p{j}}}}}{{{{> p{j}}}}}{{{{/inline}}}}",
                j = i - 1
            ));
        }
        src.push_str("{{> p39}}");
        assert_eq!(fails(&src, json!({})).kind, FailureKind::Limit);
    }

    #[test]
    fn output_is_capped() {
        let big = "x".repeat(200_000);
        let f = fails("{{a}}{{a}}{{a}}{{a}}{{a}}{{a}}", json!({ "a": big }));
        assert_eq!(f.kind, FailureKind::Limit);
        assert!(f.message.contains("MiB"), "{f:?}");
    }

    #[test]
    fn deep_sources_are_refused_before_parsing() {
        let deep = format!("{}{}", "{{#if a}}".repeat(300), "{{/if}}".repeat(300));
        let f = fails(&deep, json!({}));
        assert!(f.message.contains("blocks"), "{f:?}");
        let chain = format!("{{{{#if a}}}}{}{{{{/if}}}}", "{{else if b}}".repeat(300));
        assert!(fails(&chain, json!({})).message.contains("blocks"));
        let parens = format!("{{{{x {}y{}}}}}", "(a ".repeat(100), ")".repeat(100));
        assert!(fails(&parens, json!({})).message.contains("brackets"));
        let spaced = format!("{}{}", "{{~ #if a}}".repeat(300), "{{/if}}".repeat(300));
        assert!(fails(&spaced, json!({})).message.contains("blocks"));
    }

    /// The deepest template the scan lets through renders on a small stack
    /// as well as on the render thread's large one.
    #[test]
    fn the_deepest_allowed_template_renders() {
        let n = MAX_BLOCKS;
        let deep = format!("{}x{}", "{{#if a}}".repeat(n), "{{/if}}".repeat(n));
        assert_eq!(ok(&deep, json!({"a": true})), "x");
        let handle = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || render_here(&deep, &json!({"a": true})))
            .unwrap();
        assert_eq!(handle.join().unwrap().unwrap(), "x");
    }
}
