//! The plan's expressions: parsed once, evaluated without panicking on any
//! value.
//!
//! The grammar is AIP-15's minimum (`== != < <= > >= && || !`, parentheses,
//! string/number/bool/null literals, paths), which every front end compiles
//! into. Paths come in both spellings: the seed's `$workflow.inputs.x` and
//! `$steps.<id>.outputs.x`, and the revised `$input.x`, `$steps.<id>.x`,
//! `$item`, `$index`; a bare `$name` is an Agentfile DSL variable.
//!
//! Evaluation is total: a missing path is `null`; `==`/`!=` compare JSON values
//! (numbers numerically, so `1 == 1.0`); ordering works on two numbers or two
//! strings and is false otherwise; `&&`, `||`, `!` use [`truthy`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest expression source accepted.
pub const MAX_SOURCE: usize = 64 * 1024;
/// Deepest nesting accepted: parentheses, `!`, and operators, a flat chain
/// (`a && b && …`) counting one level per operator, because evaluating,
/// printing and dropping an expression recurse that deep.
pub const MAX_DEPTH: usize = 256;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Expr {
    Literal(Value),
    Path(Path),
    Not(Box<Expr>),
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BinOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    fn as_str(self) -> &'static str {
        match self {
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

/// A reference to a value in scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Path {
    pub root: Root,
    /// Field names; array indices as digits.
    pub fields: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Root {
    /// The workflow's inputs.
    Input,
    /// A step's output, by id.
    Step(String),
    /// The current map item.
    Item,
    /// The current map item's index.
    Index,
    /// An Agentfile DSL variable.
    Var(String),
}

/// Where an expression is wrong, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    /// Byte offset of the offending token in the source.
    pub offset: usize,
    pub len: usize,
    pub message: String,
    pub hint: Option<String>,
}

impl std::error::Error for ExprError {}

impl ExprError {
    /// Clamp the span into `src` and widen it to char boundaries, so a caller
    /// can always slice `src[offset..offset + len]` to underline it.
    fn within(mut self, src: &str) -> Self {
        let mut start = self.offset.min(src.len());
        while !src.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = self
            .offset
            .saturating_add(self.len)
            .min(src.len())
            .max(start);
        while !src.is_char_boundary(end) {
            end += 1;
        }
        self.offset = start;
        self.len = end - start;
        self
    }
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at column {})", self.message, self.offset + 1)?;
        if let Some(h) = &self.hint {
            write!(f, "; {h}")?;
        }
        Ok(())
    }
}

/// What an expression reads.
pub trait Lookup {
    fn lookup(&self, root: &Root) -> Option<Cow<'_, Value>>;
}

/// `null`, `false`, `0` and `""` are false; everything else is true.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn err(offset: usize, len: usize, message: impl Into<String>, hint: Option<&str>) -> ExprError {
    ExprError {
        offset,
        len,
        message: message.into(),
        hint: hint.map(str::to_owned),
    }
}

/// Parse a whole expression.
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    parse_whole(src).map_err(|e| e.within(src))
}

fn parse_whole(src: &str) -> Result<Expr, ExprError> {
    if src.len() > MAX_SOURCE {
        return Err(err(
            0,
            0,
            format!(
                "the expression is {} bytes long; the limit is {MAX_SOURCE}",
                src.len()
            ),
            Some("move the logic into a tool step"),
        ));
    }
    let mut p = Parser {
        src,
        pos: 0,
        depth: 0,
    };
    let (e, _) = p.or()?;
    p.skip_ws();
    if p.pos < src.len() {
        let rest = &src[p.pos..];
        let hint = if ["==", "!=", "<", ">"].iter().any(|op| rest.starts_with(op)) {
            // `a == b == c`, `0 < x < 9`: the comparison has one operand too many.
            Some("comparisons do not chain: join them with `&&`")
        } else if rest.starts_with('=') {
            Some("to compare, write `==`")
        } else {
            Some("join conditions with `&&` or `||`")
        };
        return Err(err(
            p.pos,
            rest.chars().next().map_or(1, char::len_utf8),
            format!(
                "unexpected `{}` after a complete expression",
                first_token(rest)
            ),
            hint,
        ));
    }
    Ok(e)
}

fn first_token(s: &str) -> &str {
    let end = s
        .char_indices()
        .enumerate()
        .find(|(n, (i, c))| *n >= 40 || (*i > 0 && (c.is_whitespace() || "()".contains(*c))))
        .map_or(s.len(), |(_, (i, _))| i);
    &s[..end]
}

/// An expression and its height (operators on its longest root-to-leaf
/// path). Evaluating, printing and dropping recurse that deep, so it is what
/// [`MAX_DEPTH`] bounds: nesting and flat chains (`a && b && …`) alike.
type Parsed = (Expr, usize);

fn too_deep(at: usize) -> ExprError {
    err(
        at,
        1,
        format!(
            "the expression nests deeper than {MAX_DEPTH} levels (parentheses, `!` and chained operators each count)"
        ),
        Some("simplify it, or move the logic into a tool step"),
    )
}

fn binary(op: BinOp, at: usize, (lhs, lh): Parsed, (rhs, rh): Parsed) -> Result<Parsed, ExprError> {
    let h = lh.max(rh) + 1;
    if h > MAX_DEPTH {
        return Err(too_deep(at));
    }
    Ok((
        Expr::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
        h,
    ))
}

/// `\uXXXX` (or a `\uD8xx\uDCxx` surrogate pair) at the start of `s`: the
/// character and the bytes it used.
fn unicode_escape(s: &str) -> Option<(char, usize)> {
    fn hex4(s: &str) -> Option<u32> {
        let h = s.strip_prefix("\\u")?.get(..4)?;
        // `from_str_radix` alone would accept a sign (`+041`).
        h.bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then(|| u32::from_str_radix(h, 16).ok())
            .flatten()
    }
    let hi = hex4(s)?;
    if (0xD800..0xDC00).contains(&hi) {
        let lo = hex4(s.get(6..)?)?;
        if !(0xDC00..0xE000).contains(&lo) {
            return None;
        }
        let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
        return char::from_u32(c).map(|c| (c, 12));
    }
    char::from_u32(hi).map(|c| (c, 6))
}

struct Parser<'s> {
    src: &'s str,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn skip_ws(&mut self) {
        let t = self.rest().trim_start();
        self.pos = self.src.len() - t.len();
    }

    fn eat(&mut self, tok: &str) -> bool {
        self.skip_ws();
        if self.rest().starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }

    fn enter(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(too_deep(self.pos));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Parsed, ExprError> {
        self.enter()?;
        let mut lhs = self.and()?;
        while self.eat("||") {
            let at = self.pos - 2;
            let rhs = self.and()?;
            lhs = binary(BinOp::Or, at, lhs, rhs)?;
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn and(&mut self) -> Result<Parsed, ExprError> {
        let mut lhs = self.cmp()?;
        while self.eat("&&") {
            let at = self.pos - 2;
            let rhs = self.cmp()?;
            lhs = binary(BinOp::And, at, lhs, rhs)?;
        }
        Ok(lhs)
    }

    fn cmp(&mut self) -> Result<Parsed, ExprError> {
        let lhs = self.unary()?;
        self.skip_ws();
        let op = [
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
            ("<=", BinOp::Le),
            (">=", BinOp::Ge),
            ("<", BinOp::Lt),
            (">", BinOp::Gt),
        ]
        .into_iter()
        .find(|(t, _)| self.rest().starts_with(t));
        let Some((tok, op)) = op else {
            if self.rest().starts_with('=') && !self.rest().starts_with("==") {
                return Err(err(
                    self.pos,
                    1,
                    "`=` is not an operator",
                    Some("did you mean `==`?"),
                ));
            }
            return Ok(lhs);
        };
        let at = self.pos;
        self.pos += tok.len();
        let rhs = self.unary()?;
        binary(op, at, lhs, rhs)
    }

    fn unary(&mut self) -> Result<Parsed, ExprError> {
        self.skip_ws();
        if self.rest().starts_with('!') && !self.rest().starts_with("!=") {
            let at = self.pos;
            self.pos += 1;
            self.enter()?;
            let (e, h) = self.unary()?;
            self.depth -= 1;
            if h + 1 > MAX_DEPTH {
                return Err(too_deep(at));
            }
            return Ok((Expr::Not(Box::new(e)), h + 1));
        }
        if self.rest().starts_with('(') {
            self.pos += 1;
            let e = self.or()?;
            if !self.eat(")") {
                return Err(err(
                    self.pos,
                    1,
                    "missing `)`",
                    Some("close the parenthesis"),
                ));
            }
            return Ok(e);
        }
        self.atom().map(|e| (e, 0))
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        self.skip_ws();
        let start = self.pos;
        let rest = self.rest();
        let Some(c) = rest.chars().next() else {
            return Err(err(
                start,
                0,
                "an expression ends too early",
                Some("finish the condition"),
            ));
        };
        match c {
            '$' => self.path().map(Expr::Path),
            '"' | '\'' => self.string(c).map(|s| Expr::Literal(Value::String(s))),
            '-' | '0'..='9' => {
                let end = rest
                    .char_indices()
                    .find(|(_, ch)| !(ch.is_ascii_digit() || "+-.eE".contains(*ch)))
                    .map_or(rest.len(), |(i, _)| i);
                let text = &rest[..end];
                match serde_json::from_str::<serde_json::Number>(text) {
                    Ok(n) => {
                        self.pos += end;
                        Ok(Expr::Literal(Value::Number(n)))
                    }
                    Err(_) => Err(err(start, end, format!("`{text}` is not a number"), None)),
                }
            }
            _ => {
                let end = rest
                    .char_indices()
                    .find(|(_, ch)| !(ch.is_alphanumeric() || *ch == '_'))
                    .map_or(rest.len(), |(i, _)| i);
                let word = &rest[..end];
                let v = match word {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    "null" => Value::Null,
                    "" => {
                        return Err(err(
                            start,
                            c.len_utf8(),
                            format!("unexpected `{c}`"),
                            Some(
                                "expected a value: a `$path`, a number, a quoted string, true, false or null",
                            ),
                        ));
                    }
                    w => {
                        return Err(err(
                            start,
                            end,
                            format!("`{w}` is not a value"),
                            Some(
                                "quote text (\"…\"), or start a path with `$` (`$input.x`, `$steps.<id>.x`)",
                            ),
                        ));
                    }
                };
                self.pos += end;
                Ok(Expr::Literal(v))
            }
        }
    }

    fn string(&mut self, quote: char) -> Result<String, ExprError> {
        let start = self.pos;
        let body_at = start + 1;
        let body = &self.src[body_at..];
        let mut out = String::new();
        let mut i = 0;
        while let Some(c) = body[i..].chars().next() {
            if c == quote {
                self.pos = body_at + i + 1;
                return Ok(out);
            }
            if c != '\\' {
                out.push(c);
                i += c.len_utf8();
                continue;
            }
            let Some(e) = body[i + 1..].chars().next() else {
                break;
            };
            let ch = match e {
                '"' | '\'' | '\\' | '/' => e,
                'b' => '\u{8}',
                'f' => '\u{c}',
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'u' => {
                    let (ch, used) = unicode_escape(&body[i..]).ok_or_else(|| {
                        let len = body[i..].chars().take(6).map(char::len_utf8).sum();
                        err(
                            body_at + i,
                            len,
                            "a `\\u` escape needs four hex digits naming a character",
                            Some("write `\\u00e9`, or a surrogate pair `\\ud83d\\ude00`"),
                        )
                    })?;
                    out.push(ch);
                    i += used;
                    continue;
                }
                other => {
                    return Err(err(
                        body_at + i,
                        1 + other.len_utf8(),
                        format!("unknown escape `\\{other}`"),
                        Some(r#"the escapes are JSON's: \" \' \\ \/ \b \f \n \r \t \uXXXX"#),
                    ));
                }
            };
            out.push(ch);
            i += 1 + e.len_utf8();
        }
        Err(err(
            start,
            self.src.len() - start,
            "a string is not closed",
            Some("add the closing quote"),
        ))
    }

    fn path(&mut self) -> Result<Path, ExprError> {
        let start = self.pos;
        self.pos += 1;
        let mut segs: Vec<(usize, String)> = Vec::new();
        loop {
            let rest = self.rest();
            let end = rest
                .char_indices()
                .find(|(_, ch)| !(ch.is_alphanumeric() || *ch == '_' || *ch == '-'))
                .map_or(rest.len(), |(i, _)| i);
            if end == 0 {
                return Err(err(
                    self.pos,
                    1,
                    "a path segment is missing",
                    Some("paths look like `$input.name` or `$steps.<id>.field`"),
                ));
            }
            segs.push((self.pos, rest[..end].to_owned()));
            self.pos += end;
            // Any number of `[i]` (`rows[0][1]`), each one more segment.
            while let Some(r) = self.rest().strip_prefix('[') {
                let digits = r.bytes().take_while(u8::is_ascii_digit).count();
                if digits == 0 || !r[digits..].starts_with(']') {
                    return Err(err(
                        self.pos,
                        1,
                        "an index must be digits in `[…]`",
                        Some("write `[0]`"),
                    ));
                }
                segs.push((self.pos + 1, r[..digits].to_owned()));
                self.pos += digits + 2;
            }
            if self.rest().starts_with('.') {
                self.pos += 1;
                continue;
            }
            break;
        }
        let (first_at, first) = segs.remove(0);
        let mut fields = segs.into_iter().map(|(_, s)| s);
        let root = match first.as_str() {
            "workflow" => match fields.next().as_deref() {
                Some("inputs") | Some("input") => Root::Input,
                _ => {
                    return Err(err(
                        first_at,
                        first.len(),
                        "`$workflow` is followed by `.inputs`",
                        Some("write `$workflow.inputs.<name>` (or `$input.<name>`)"),
                    ));
                }
            },
            "input" | "inputs" => Root::Input,
            "item" => Root::Item,
            "index" => Root::Index,
            "steps" => match fields.next() {
                Some(id) => Root::Step(id),
                None => {
                    return Err(err(
                        start,
                        self.pos - start,
                        "`$steps` needs a step id",
                        Some("write `$steps.<id>` or `$steps.<id>.<field>`"),
                    ));
                }
            },
            "step" | "step_outputs" => {
                return Err(err(
                    first_at,
                    first.len(),
                    format!("unknown path root `${first}`"),
                    Some("did you mean `$steps.`?"),
                ));
            }
            // The DSL's rule for a name (src/agentfile/template.rs): a letter or
            // `_` first, so `$5` and `$100` are prose, not variables.
            name if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => {
                Root::Var(name.to_owned())
            }
            name => {
                return Err(err(
                    start,
                    1 + name.len(),
                    format!("`${name}` is not a path: a name starts with a letter or `_`"),
                    Some("quote text that holds a `$` (\"$5\")"),
                ));
            }
        };
        let mut fields: Vec<String> = fields.collect();
        // The seed's `$steps.<id>.outputs.x` means the revised `$steps.<id>.x`.
        if matches!(root, Root::Step(_)) && fields.first().is_some_and(|f| f == "outputs") {
            fields.remove(0);
        }
        Ok(Path { root, fields })
    }
}

fn get<'v>(v: &'v Value, field: &str) -> Option<&'v Value> {
    match v {
        Value::Object(o) => o.get(field),
        Value::Array(a) => field.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    }
}

impl Path {
    /// The value at this path's fields below `root` (the value its root
    /// names), by reference; `None` where [`Path::eval`] gives `null` for a
    /// missing field.
    pub fn within<'v>(&self, root: &'v Value) -> Option<&'v Value> {
        let mut v = root;
        for f in &self.fields {
            v = get(v, f)?;
        }
        Some(v)
    }

    pub fn eval(&self, scope: &dyn Lookup) -> Value {
        let Some(root) = scope.lookup(&self.root) else {
            return Value::Null;
        };
        let mut v: &Value = &root;
        for f in &self.fields {
            match get(v, f) {
                Some(next) => v = next,
                None => return Value::Null,
            }
        }
        v.clone()
    }
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn order(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

impl Expr {
    /// Evaluate; never panics and never fails (see the module doc). Depth is
    /// bounded by the parser, so the recursion is too.
    pub fn eval(&self, scope: &dyn Lookup) -> Value {
        match self {
            Expr::Literal(v) => v.clone(),
            Expr::Path(p) => p.eval(scope),
            Expr::Not(e) => Value::Bool(!truthy(&e.eval(scope))),
            Expr::Binary { op, lhs, rhs } => {
                use std::cmp::Ordering::*;
                let b = match op {
                    BinOp::And => truthy(&lhs.eval(scope)) && truthy(&rhs.eval(scope)),
                    BinOp::Or => truthy(&lhs.eval(scope)) || truthy(&rhs.eval(scope)),
                    _ => {
                        let (a, b) = (lhs.eval(scope), rhs.eval(scope));
                        match op {
                            BinOp::Eq => equal(&a, &b),
                            BinOp::Ne => !equal(&a, &b),
                            BinOp::Lt => order(&a, &b) == Some(Less),
                            BinOp::Le => matches!(order(&a, &b), Some(Less | Equal)),
                            BinOp::Gt => order(&a, &b) == Some(Greater),
                            BinOp::Ge => matches!(order(&a, &b), Some(Greater | Equal)),
                            BinOp::And | BinOp::Or => false,
                        }
                    }
                };
                Value::Bool(b)
            }
        }
    }

    /// Every path it reads, in source order.
    pub fn paths(&self) -> Vec<&Path> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'e>(&'e self, out: &mut Vec<&'e Path>) {
        match self {
            Expr::Literal(_) => {}
            Expr::Path(p) => out.push(p),
            Expr::Not(e) => e.collect(out),
            Expr::Binary { lhs, rhs, .. } => {
                lhs.collect(out);
                rhs.collect(out);
            }
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.root {
            Root::Input => f.write_str("$input")?,
            // `$steps.a.outputs.x` parses as field `x`, so a field really
            // named `outputs` is written in the seed's spelling to survive.
            Root::Step(id) if self.fields.first().is_some_and(|f| f == "outputs") => {
                write!(f, "$steps.{id}.outputs")?
            }
            Root::Step(id) => write!(f, "$steps.{id}")?,
            Root::Item => f.write_str("$item")?,
            Root::Index => f.write_str("$index")?,
            Root::Var(n) => write!(f, "${n}")?,
        }
        for field in &self.fields {
            write!(f, ".{field}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Literal(v) => write!(f, "{v}"),
            Expr::Path(p) => write!(f, "{p}"),
            Expr::Not(e) => write!(f, "!{e}"),
            Expr::Binary { op, lhs, rhs } => write!(f, "({lhs} {} {rhs})", op.as_str()),
        }
    }
}

/// A string with `${{ expr }}` pieces, or an Agentfile DSL `$name` template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Template {
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Text(String),
    Expr(Expr),
    /// DSL text whose `$names` are filled by the DSL's rules at render time
    /// (they depend on which names are defined).
    Dsl(String),
    /// `${{ raw(expr) }}`: in a command line a shell parses, the value
    /// spliced as shell code rather than quoted as one word; elsewhere the
    /// same as an expression.
    Raw(Expr),
}

impl Template {
    /// `text ${{ $steps.x.name }} text`.
    pub fn parse(s: &str) -> Result<Template, ExprError> {
        Self::parse_spans(s).map_err(|e| e.within(s))
    }

    fn parse_spans(s: &str) -> Result<Template, ExprError> {
        let mut parts = Vec::new();
        let mut rest = s;
        let mut offset = 0;
        while let Some(i) = rest.find("${{") {
            if i > 0 {
                parts.push(Part::Text(rest[..i].to_owned()));
            }
            let inner_start = i + 3;
            let Some(close) = rest[inner_start..].find("}}") else {
                return Err(err(
                    offset + i,
                    3,
                    "`${{` is not closed",
                    Some("end the expression with `}}`"),
                ));
            };
            let inner = &rest[inner_start..inner_start + close];
            let trimmed = inner.trim();
            let lead = inner.len() - inner.trim_start().len();
            let (src, at, raw) = match raw_inner(trimmed) {
                // `raw(` … `)`: the expression between the parentheses.
                Some(body) => (body, lead + (trimmed.len() - body.len() - 1), true),
                None => (trimmed, lead, false),
            };
            let e = parse(src.trim()).map_err(|mut e| {
                e.offset += offset + inner_start + at + (src.len() - src.trim_start().len());
                if !raw && trimmed.starts_with("raw") {
                    e.hint = Some(
                        "`raw(…)` takes the whole interpolation: `${{ raw($input.x) }}`".to_owned(),
                    );
                }
                e
            })?;
            parts.push(if raw { Part::Raw(e) } else { Part::Expr(e) });
            let used = inner_start + close + 2;
            offset += used;
            rest = &rest[used..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Template { parts })
    }

    /// An Agentfile DSL template (`Write about $topic`).
    pub fn parse_dsl(s: &str) -> Template {
        Template {
            parts: vec![Part::Dsl(s.to_owned())],
        }
    }

    pub fn render(&self, scope: &dyn Lookup) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Expr(e) | Part::Raw(e) => match e.eval(scope) {
                    Value::String(s) => out.push_str(&s),
                    Value::Null => {}
                    v => out.push_str(&v.to_string()),
                },
                Part::Dsl(t) => out.push_str(&crate::template::render(t, |n| {
                    scope
                        .lookup(&Root::Var(n.to_owned()))
                        .map(|v| match v.as_ref() {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                })),
            }
        }
        out
    }

    pub fn paths(&self) -> Vec<&Path> {
        self.parts
            .iter()
            .flat_map(|p| match p {
                Part::Expr(e) | Part::Raw(e) => e.paths(),
                _ => Vec::new(),
            })
            .collect()
    }
}

/// A value with expressions inside: a step's inputs, a subworkflow's inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValueExpr {
    Literal(Value),
    Expr(Expr),
    Template(Template),
    Array(Vec<ValueExpr>),
    Object(BTreeMap<String, ValueExpr>),
}

/// Path roots (and the misspelling `step`): a string whose first word after
/// `$` is one of these means a path, so if it does not parse it is an error.
const ROOTS: &[&str] = &[
    "workflow", "steps", "step", "input", "inputs", "item", "index",
];

/// The word after a leading `$` (`$steps.x` → `steps`).
fn root_word(s: &str) -> &str {
    let s = s.trim_start().strip_prefix('$').unwrap_or("");
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The same object or array with literal children, unwrapped: a child may
/// have been `{kind: literal, value: X}`, which stands for `X`.
fn literal_of(x: &ValueExpr) -> Option<&Value> {
    match x {
        ValueExpr::Literal(v) => Some(v),
        _ => None,
    }
}

/// Compile a JSON/YAML value: a string that is a whole expression becomes one
/// (so `$input.n` passes its value through with its type); a string holding
/// `${{ … }}` is a template; `{kind: literal, value: X}` is X; anything else is
/// a literal. A string whose first word after `$` is a path root (`$steps`,
/// `$input`, `$workflow`, `$item`, `$index`, and the misspelling `$step`) but
/// does not parse is an error; other text starting with `$` (`$5 off`,
/// `$100`, `$items are listed`, `$HOME/bin`) is prose, except a lone `$name`,
/// which is a DSL variable. Errors name the JSON pointer of the bad leaf.
pub fn compile_value(v: &Value) -> Result<ValueExpr, (String, ExprError)> {
    compile_at(v, String::new())
}

fn compile_at(v: &Value, pointer: String) -> Result<ValueExpr, (String, ExprError)> {
    Ok(match v {
        Value::String(s) if s.contains("${{") => {
            ValueExpr::Template(Template::parse(s).map_err(|e| (pointer.clone(), e))?)
        }
        Value::String(s) if s.trim_start().starts_with('$') => match parse(s) {
            Ok(e) => ValueExpr::Expr(e),
            Err(e) if ROOTS.contains(&root_word(s)) => {
                return Err((pointer, e));
            }
            Err(_) => ValueExpr::Literal(v.clone()),
        },
        Value::Object(o)
            if o.len() == 2 && o.get("kind") == Some(&Value::String("literal".into())) =>
        {
            match o.get("value") {
                Some(x) => ValueExpr::Literal(x.clone()),
                None => ValueExpr::Literal(v.clone()),
            }
        }
        Value::Object(o) => {
            let mut out = BTreeMap::new();
            for (k, x) in o {
                let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.insert(k.clone(), compile_at(x, p)?);
            }
            // Rebuilt in the source's key order, with wrappers unwrapped.
            let literal: Option<serde_json::Map<String, Value>> = o
                .keys()
                .map(|k| Some((k.clone(), literal_of(out.get(k)?)?.clone())))
                .collect();
            match literal {
                Some(m) => ValueExpr::Literal(Value::Object(m)),
                None => ValueExpr::Object(out),
            }
        }
        Value::Array(a) => {
            let items = a
                .iter()
                .enumerate()
                .map(|(i, x)| compile_at(x, format!("{pointer}/{i}")))
                .collect::<Result<Vec<_>, _>>()?;
            match items.iter().map(literal_of).collect::<Option<Vec<_>>>() {
                Some(vs) => ValueExpr::Literal(Value::Array(vs.into_iter().cloned().collect())),
                None => ValueExpr::Array(items),
            }
        }
        other => ValueExpr::Literal(other.clone()),
    })
}

/// A path written without `${{ }}` inside longer text (`Brief these notes:
/// $steps.readit`): text, not a reference, so it would reach the step as
/// the characters `$steps.readit`. `start..end` is its byte range in the
/// text; `path` the path as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BareRef {
    pub start: usize,
    pub end: usize,
    pub path: String,
}

/// The paths written bare inside `text` (outside its `${{ … }}` pieces),
/// when `text` is not itself one whole expression (which
/// [`compile_value`] reads as a path). Only what can only be meant as a
/// reference counts: `$steps.`, `$step.`, `$input.`, `$inputs.`,
/// `$workflow.` followed by a name, and `$item`/`$index` standing as a word;
/// `$5`, `$HOME`, `$items` and `$$` are prose.
pub fn bare_references(text: &str) -> Vec<BareRef> {
    let mut out = Vec::new();
    if text.trim_start().starts_with('$') && parse(text).is_ok() {
        return out;
    }
    let b = text.as_bytes();
    let name_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"${{") {
            match text[i + 3..].find("}}") {
                Some(close) => {
                    i += 3 + close + 2;
                    continue;
                }
                None => break,
            }
        }
        if b[i] != b'$' || (i > 0 && b[i - 1] == b'$') {
            i += 1;
            continue;
        }
        let from = i + 1;
        let mut j = from;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
            j += 1;
        }
        let root = &text[from..j];
        let dotted = matches!(root, "steps" | "step" | "input" | "inputs" | "workflow");
        let word = matches!(root, "item" | "index");
        let continues = |k: usize| {
            k + 1 < b.len()
                && ((b[k] == b'.' && (b[k + 1].is_ascii_alphabetic() || b[k + 1] == b'_'))
                    || (b[k] == b'[' && b[k + 1].is_ascii_digit()))
        };
        let ok = if dotted {
            continues(j)
        } else {
            word && b.get(j).is_none_or(|c| !name_char(*c))
        };
        if !ok {
            i = j.max(i + 1);
            continue;
        }
        // The path's fields: `.name` and `[digits]`.
        while continues(j) {
            if b[j] == b'.' {
                j += 1;
                while j < b.len() && name_char(b[j]) {
                    j += 1;
                }
            } else {
                let mut k = j + 1;
                while k < b.len() && b[k].is_ascii_digit() {
                    k += 1;
                }
                if b.get(k) != Some(&b']') {
                    break;
                }
                j = k + 1;
            }
        }
        // A name does not end in `-` (`$steps.a-` then prose).
        while j > from && b[j - 1] == b'-' {
            j -= 1;
        }
        out.push(BareRef {
            start: i,
            end: j,
            path: text[i..j].to_owned(),
        });
        i = j;
    }
    out
}

impl ValueExpr {
    pub fn eval(&self, scope: &dyn Lookup) -> Value {
        match self {
            ValueExpr::Literal(v) => v.clone(),
            ValueExpr::Expr(e) => e.eval(scope),
            ValueExpr::Template(t) => Value::String(t.render(scope)),
            ValueExpr::Array(a) => Value::Array(a.iter().map(|x| x.eval(scope)).collect()),
            ValueExpr::Object(o) => {
                Value::Object(o.iter().map(|(k, x)| (k.clone(), x.eval(scope))).collect())
            }
        }
    }

    pub fn paths(&self) -> Vec<&Path> {
        match self {
            ValueExpr::Literal(_) => Vec::new(),
            ValueExpr::Expr(e) => e.paths(),
            ValueExpr::Template(t) => t.paths(),
            ValueExpr::Array(a) => a.iter().flat_map(ValueExpr::paths).collect(),
            ValueExpr::Object(o) => o.values().flat_map(ValueExpr::paths).collect(),
        }
    }

    pub fn is_literal(&self) -> bool {
        matches!(self, ValueExpr::Literal(_))
    }
}

/// The expression inside `raw(…)`, when `inner` (the trimmed text between
/// `${{` and `}}`) is such a call.
pub(crate) fn raw_inner(inner: &str) -> Option<&str> {
    let rest = inner.strip_prefix("raw")?.trim_start();
    let body = rest.strip_prefix('(')?.strip_suffix(')')?;
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    struct S(Value);

    impl Lookup for S {
        fn lookup(&self, root: &Root) -> Option<Cow<'_, Value>> {
            match root {
                Root::Input => Some(Cow::Borrowed(&self.0["input"])),
                Root::Step(id) => self.0["steps"].get(id).map(Cow::Borrowed),
                Root::Item => self.0.get("item").map(Cow::Borrowed),
                Root::Index => Some(Cow::Owned(json!(2))),
                Root::Var(n) => self.0["vars"].get(n).map(Cow::Borrowed),
            }
        }
    }

    fn scope() -> S {
        S(json!({
            "input": {"tier": "free", "n": 3, "flag": true},
            "steps": {"parse": {"tier": "paid", "lines": ["a", "b"], "score": 0.75}, "fetch-page": {"html": "<p>"}},
            "item": {"name": "x"},
            "vars": {"topic": "cats"}
        }))
    }

    fn ev(src: &str) -> Value {
        parse(src)
            .unwrap_or_else(|e| panic!("{src}: {e}"))
            .eval(&scope())
    }

    #[test]
    fn both_spellings_and_the_minimum_grammar() {
        assert_eq!(ev("$workflow.inputs.tier == \"free\""), json!(true));
        assert_eq!(ev("$input.tier == 'free'"), json!(true));
        assert_eq!(ev("$steps.parse.outputs.tier == \"paid\""), json!(true));
        assert_eq!(ev("$steps.parse.tier != \"paid\""), json!(false));
        assert_eq!(ev("$steps.parse.score < 0.8"), json!(true));
        assert_eq!(ev("$steps.parse.score >= 0.8 || $input.flag"), json!(true));
        assert_eq!(ev("!($input.n > 2) && true"), json!(false));
        assert_eq!(ev("$steps.fetch-page.outputs.html"), json!("<p>"));
        assert_eq!(ev("$steps.parse.lines.1"), json!("b"));
        assert_eq!(ev("$steps.parse.lines[0]"), json!("a"));
        assert_eq!(ev("$item.name"), json!("x"));
        assert_eq!(ev("$index == 2"), json!(true));
        assert_eq!(ev("$topic"), json!("cats"));
        assert_eq!(ev("$steps.missing.x == null"), json!(true));
        assert_eq!(ev("$input.n == 3.0"), json!(true));
        assert_eq!(ev("\"a\" < 1"), json!(false));
    }

    #[test]
    fn errors_point_at_the_token_and_hint() {
        let e = parse("$input.x = 1").unwrap_err();
        assert_eq!(e.offset, 9);
        assert_eq!(e.hint.as_deref(), Some("did you mean `==`?"));
        let e = parse("$step.x == 1").unwrap_err();
        assert_eq!(e.hint.as_deref(), Some("did you mean `$steps.`?"));
        assert!(parse("($input.x == 1").is_err());
        assert!(parse("$workflow.foo").is_err());
        assert!(parse(&"(".repeat(10_000)).is_err());
    }

    #[test]
    fn values_and_templates() {
        let v = compile_value(&json!({
            "url": "$workflow.inputs.tier",
            "n": {"kind": "literal", "value": 42},
            "msg": "tier ${{ $steps.parse.tier }}!",
            "prose": "$5 off",
        }))
        .unwrap();
        assert_eq!(
            v.eval(&scope()),
            json!({"url": "free", "n": 42, "msg": "tier paid!", "prose": "$5 off"})
        );
        let (ptr, _) = compile_value(&json!({"a": ["$steps."]})).unwrap_err();
        assert_eq!(ptr, "/a/0");
        let t = Template::parse_dsl("About $topic.");
        assert_eq!(t.render(&scope()), "About cats.");
    }

    /// Every expression and input mapping in AIP-15's EXAMPLES.md (the
    /// reference workflows), with what each must read and mean.
    #[test]
    fn the_aip15_examples_parse_and_mean_the_right_thing() {
        let scope = S(json!({
            "input": {"productUrl": "https://x", "email": "a@b", "customerEmail": "c@d",
                      "customerId": "cus_1", "productSku": "sku", "orderId": "o1",
                      "emails": ["a", "b"], "brief": "b", "title": "t", "content": "c",
                      "_workflowFsRoot": "/fs", "query": "q", "recipient": "r"},
            "steps": {"fetch": {"tiers": [1]}, "summarise": {"markdown": "# m"},
                      "enrich": {"companySize": 500, "stripe": 1, "hubspot": 2, "linear": 3},
                      "draft": {"fileId": "f1"},
                      "wait-payment": {"eventName": "stripe.charge.succeeded"},
                      "reserve": {"reservationId": "r1"}, "charge": {"chargeId": "ch"},
                      "evaluate": {"score": 0.79, "feedback": "more"},
                      "generate": {"copy": "c"}, "pull": {"rows": [1, 2]},
                      "search": {"ads": []}, "shortlist": {"items": [{"url": "u"}], "count": 1},
                      "details": [{"x": 1}], "report": {"path": "/r"}, "notify": {"ok": true}},
            "item": {"url": "u"}
        }));
        // Conditions (`when`, `while`, `over`).
        for (src, want) in [
            ("$steps.enrich.companySize >= 500", json!(true)),
            ("true", json!(true)),
            (
                "$steps.wait-payment.eventName == \"stripe.charge.succeeded\"",
                json!(true),
            ),
            ("$steps.evaluate.score < 0.8", json!(true)),
            ("$input.emails", json!(["a", "b"])),
            ("$steps.shortlist.items", json!([{"url": "u"}])),
        ] {
            let e = parse(src).unwrap_or_else(|e| panic!("{src}: {e}"));
            assert_eq!(e.eval(&scope), want, "{src}");
            assert_eq!(parse(&e.to_string()).as_ref(), Ok(&e), "{src}");
        }
        // Input mappings and the result mapping, one per step.
        for (mapping, want) in [
            (
                json!({"productUrl": "$input.productUrl"}),
                json!({"productUrl": "https://x"}),
            ),
            (
                json!({"content": "$steps.fetch.tiers"}),
                json!({"content": [1]}),
            ),
            (
                json!({"filename": "pricing.md", "line": "$steps.summarise.markdown"}),
                json!({"filename": "pricing.md", "line": "# m"}),
            ),
            (
                json!({"stripe": "$steps.enrich.stripe", "hubspot": "$steps.enrich.hubspot",
                       "linear": "$steps.enrich.linear"}),
                json!({"stripe": 1, "hubspot": 2, "linear": 3}),
            ),
            (
                json!({"customerId": "$input.customerId", "sku": "$input.productSku"}),
                json!({"customerId": "cus_1", "sku": "sku"}),
            ),
            (json!(["$steps.draft.fileId"]), json!(["f1"])),
            (
                json!({"message": "Contract draft pending review for >24h"}),
                json!({"message": "Contract draft pending review for >24h"}),
            ),
            (
                json!({"to": "$input.email", "subject": "Welcome — set up your workspace",
                       "body": "<…template…>"}),
                json!({"to": "a@b", "subject": "Welcome — set up your workspace",
                       "body": "<…template…>"}),
            ),
            (
                json!({"reservationId": "$steps.reserve.reservationId"}),
                json!({"reservationId": "r1"}),
            ),
            (
                json!({"chargeId": "$steps.charge.chargeId"}),
                json!({"chargeId": "ch"}),
            ),
            (json!({"email": "$item"}), json!({"email": {"url": "u"}})),
            (
                json!({"brief": "$input.brief", "previousAttempt": "$steps.evaluate.feedback"}),
                json!({"brief": "b", "previousAttempt": "more"}),
            ),
            (
                json!({"copy": "$steps.generate.copy"}),
                json!({"copy": "c"}),
            ),
            (
                json!({"title": "$input.title", "content": "$input.content",
                       "_workflowFsRoot": "$input._workflowFsRoot"}),
                json!({"title": "t", "content": "c", "_workflowFsRoot": "/fs"}),
            ),
            (json!({"rows": "$steps.pull.rows"}), json!({"rows": [1, 2]})),
            (json!({"query": "$input.query"}), json!({"query": "q"})),
            (json!({"ref": "$item.url"}), json!({"ref": "u"})),
            (
                json!({"items": "$steps.shortlist.items", "details": "$steps.details"}),
                json!({"items": [{"url": "u"}], "details": [{"x": 1}]}),
            ),
            (
                json!({"to": "$input.recipient", "document": "$steps.report.path"}),
                json!({"to": "r", "document": "/r"}),
            ),
            (
                json!({"count": "$steps.shortlist.count", "reportPath": "$steps.report.path",
                       "delivery": "$steps.notify"}),
                json!({"count": 1, "reportPath": "/r", "delivery": {"ok": true}}),
            ),
        ] {
            let v =
                compile_value(&mapping).unwrap_or_else(|(p, e)| panic!("{mapping} at {p}: {e}"));
            assert_eq!(v.eval(&scope), want, "{mapping}");
        }
    }

    #[test]
    fn a_literal_wrapper_is_unwrapped_even_when_everything_around_it_is_literal() {
        let v =
            compile_value(&json!({"n": {"kind": "literal", "value": "$input.x"}, "m": 1})).unwrap();
        assert_eq!(v.eval(&scope()), json!({"n": "$input.x", "m": 1}));
        let v = compile_value(&json!([{"kind": "literal", "value": 42}])).unwrap();
        assert_eq!(v.eval(&scope()), json!([42]));
        assert!(v.is_literal());
    }

    #[test]
    fn a_long_flat_chain_is_bounded_like_nesting() {
        // 20,000 `&&` within 64 KiB: left unbounded, evaluating, printing or
        // dropping it recursed 20,000 deep and overflowed the stack (abort).
        let src = format!("{}1", "1&&".repeat(20_000));
        assert!(src.len() <= MAX_SOURCE);
        let e = parse(&src).unwrap_err();
        assert!(e.message.contains("deeper than"), "{e}");
        let src = format!("{}1", "1 || ".repeat(MAX_DEPTH - 1));
        assert_eq!(parse(&src).map(|e| e.eval(&scope())), Ok(json!(true)));
    }

    #[test]
    fn indices_chain_in_any_order() {
        let s = S(json!({"input": {"m": [[1, [2, {"x": 3}]]]}, "steps": {}, "vars": {}}));
        let at = |src: &str| parse(src).unwrap_or_else(|e| panic!("{src}: {e}")).eval(&s);
        assert_eq!(at("$input.m[0][1][1].x"), json!(3));
        assert_eq!(at("$input.m[0][1][0]"), json!(2));
        assert_eq!(at("$input.m.0[1].1.x"), json!(3));
    }

    #[test]
    fn a_field_named_outputs_survives_printing() {
        for src in [
            "$steps.a.outputs.outputs",
            "$steps.a.outputs.outputs.x",
            "$steps.a",
        ] {
            let e = parse(src).unwrap();
            assert_eq!(parse(&e.to_string()), Ok(e), "{src}");
        }
    }

    #[test]
    fn strings_take_json_escapes() {
        let lit = |src: &str| parse(src).map(|e| e.eval(&scope()));
        assert_eq!(lit(r#""a\bb\fc\/""#), Ok(json!("a\u{8}b\u{c}c/")));
        assert_eq!(lit(r#""\ud83d\ude00""#), Ok(json!("😀")));
        assert_eq!(lit(r#"'it\'s'"#), Ok(json!("it's")));
        let e = parse(r#""\q""#).unwrap_err();
        assert_eq!((e.offset, e.len), (1, 2));
        assert!(parse(r#""\u+041""#).is_err());
        let e = Expr::Literal(json!("\u{8}\u{1f}\"\\"));
        assert_eq!(parse(&e.to_string()), Ok(e));
    }

    #[test]
    fn bare_paths_in_text_are_found_and_prose_is_not() {
        let found =
            |t: &str| -> Vec<String> { bare_references(t).into_iter().map(|r| r.path).collect() };
        assert_eq!(found("Brief these notes: $steps.readit"), ["$steps.readit"]);
        assert_eq!(
            found("Use $input.topic, then $steps.a.outputs.x[0]."),
            ["$input.topic", "$steps.a.outputs.x[0]"]
        );
        assert_eq!(found("each $item and $index here"), ["$item", "$index"]);
        assert_eq!(found("a $workflow.inputs.x-"), ["$workflow.inputs.x"]);
        for prose in [
            "$steps.readit",
            "${{ $steps.readit }} is fine",
            "costs $5, $HOME/bin, $items, $steps alone, $$steps.x, $input",
            "$input.x == 'a'",
            "",
        ] {
            assert!(found(prose).is_empty(), "{prose}: {:?}", found(prose));
        }
        assert_eq!(found("…—é $steps.x …"), ["$steps.x"]);
        for s in ["…", "a…b", "$…", "$steps.…", "$item…", "${{…"] {
            let _ = found(s);
        }
        let r = &bare_references("x $steps.readit y")[0];
        assert_eq!((r.start, r.end), (2, 15));
    }

    #[test]
    fn prose_with_a_dollar_stays_prose() {
        let v = compile_value(&json!({
            "price": "$100",
            "a": "$5 off",
            "b": "$items are listed below",
            "c": "$HOME/bin",
        }))
        .unwrap();
        assert!(v.is_literal(), "{v:?}");
        // A real root that does not parse is still an error at its pointer.
        let (ptr, e) = compile_value(&json!({"x": "$input.a = 1"})).unwrap_err();
        assert_eq!(
            (ptr.as_str(), e.hint.as_deref()),
            ("/x", Some("did you mean `==`?"))
        );
        assert!(compile_value(&json!("$steps")).is_err());
    }

    #[test]
    fn chained_comparisons_get_a_useful_hint() {
        let e = parse("$input.a == 1 == 2").unwrap_err();
        assert_eq!(e.offset, 14);
        assert_eq!(
            e.hint.as_deref(),
            Some("comparisons do not chain: join them with `&&`")
        );
    }

    #[test]
    fn error_spans_can_be_sliced() {
        for src in [
            "(1",
            "($input.x €",
            "$€",
            "$input.x[",
            "'abc",
            "!",
            "$input.x ==",
            "\"\\u12",
        ] {
            let e = parse(src).unwrap_err();
            assert!(
                src.get(e.offset..e.offset + e.len).is_some(),
                "{e:?} in {src:?}"
            );
        }
    }

    #[test]
    fn expr_error_is_an_error() {
        fn takes(_: &dyn std::error::Error) {}
        takes(&parse("=").unwrap_err());
    }

    proptest! {
        #[test]
        fn parse_and_eval_never_panic(s in "\\PC{0,80}") {
            if let Ok(e) = parse(&s) {
                let _ = e.eval(&scope());
                prop_assert_eq!(parse(&e.to_string()), Ok(e));
            }
        }

        #[test]
        fn bare_references_never_panic(
            s in "\\PC{0,60}|[a-z$.{}()\\[\\]0-9 €é…'\"`#<\\\\\n]{0,60}"
        ) {
            for r in bare_references(&s) {
                prop_assert!(s.get(r.start..r.end) == Some(r.path.as_str()));
            }
        }

        #[test]
        fn error_spans_lie_on_char_boundaries_inside_the_source(s in "\\PC{0,40}|[\\x00-\\x7f€é(\\[\\]$.]{0,40}") {
            for src in [s.clone(), format!("prefix ${{{{ {s} }}}} tail")] {
                for e in [parse(&src).err(), Template::parse(&src).err()].into_iter().flatten() {
                    prop_assert!(e.offset + e.len <= src.len(), "{:?} in {:?}", e, src);
                    prop_assert!(
                        src.is_char_boundary(e.offset) && src.is_char_boundary(e.offset + e.len),
                        "{:?} in {:?}", e, src
                    );
                }
            }
        }

        /// Soups of the grammar's own pieces reach deeper than random text:
        /// nesting, chains of operators, paths with odd segments.
        #[test]
        fn token_soups_parse_eval_and_round_trip(parts in proptest::collection::vec(
            proptest::sample::select(&[
                "$input.x", "$steps.a-b.c", "$steps.a", "$item", "$index", "$workflow.inputs.x",
                "$steps.s.outputs.y", "$", "$.", "$steps.", "==", "!=", "<", "<=", ">", ">=",
                "&&", "||", "!", "(", ")", "[", "]", "[0]", ".", "null", "true", "false", "1",
                "-2.5", "1e400", "\"s\"", "'q'", "\"\\\"\"", "${{", "}}", " ", "\t", "é",
            ][..]),
            0..40,
        )) {
            let src = parts.concat();
            if let Ok(e) = parse(&src) {
                let _ = e.eval(&scope());
                prop_assert_eq!(parse(&e.to_string()), Ok(e));
            }
            if let Ok(t) = Template::parse(&src) {
                let _ = t.render(&scope());
            }
        }

        #[test]
        fn any_string_literal_round_trips(s in "[\\x00-\\x1f\"'\\\\a-z€😀]{0,20}|\\PC{0,20}") {
            let e = Expr::Literal(Value::String(s));
            prop_assert_eq!(parse(&e.to_string()), Ok(e));
        }

        /// A DSL template renders exactly as the DSL's own renderer would,
        /// for text full of `$`, `$$`, hyphens and defined/undefined names.
        #[test]
        fn dsl_templates_render_as_the_dsl_does(
            text in "([a-z_ .-]|\\$|\\$\\$|topic|topic-x|n1){0,30}",
            defined in proptest::collection::btree_map("topic|topic-x|n1|x|_", "[a-z$ ]{0,5}", 0..4),
        ) {
            struct Vars(Value);
            impl Lookup for Vars {
                fn lookup(&self, root: &Root) -> Option<Cow<'_, Value>> {
                    match root {
                        Root::Var(n) => self.0.get(n).map(Cow::Borrowed),
                        _ => None,
                    }
                }
            }
            let vars = Vars(json!(defined));
            let want = crate::template::render(&text, |n| defined.get(n).cloned());
            prop_assert_eq!(Template::parse_dsl(&text).render(&vars), want);
        }

        #[test]
        fn built_expressions_round_trip(
            a in "[a-z][a-z0-9-]{0,6}",
            n in -1000i64..1000,
            s in "[ -~]{0,10}",
        ) {
            for src in [
                format!("$steps.{a}.x == {n}"),
                format!("!($input.{a} < \"{}\") || $item", s.replace(['"', '\\'], "")),
                format!("$steps.{a} != null && {n} >= $index"),
            ] {
                let e = parse(&src).unwrap();
                prop_assert_eq!(parse(&e.to_string()), Ok(e.clone()));
                let _ = e.eval(&scope());
            }
        }
    }
}
