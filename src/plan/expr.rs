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
/// Deepest nesting accepted (parentheses and operators).
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
    let e = p.or()?;
    p.skip_ws();
    if p.pos < src.len() {
        let rest = &src[p.pos..];
        let hint = if rest.starts_with('=') {
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
            return Err(err(
                self.pos,
                1,
                format!("the expression nests deeper than {MAX_DEPTH} levels"),
                Some("simplify it, or move the logic into a tool step"),
            ));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        self.enter()?;
        let mut lhs = self.and()?;
        while self.eat("||") {
            let rhs = self.and()?;
            lhs = Expr::Binary {
                op: BinOp::Or,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            };
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.cmp()?;
        while self.eat("&&") {
            let rhs = self.cmp()?;
            lhs = Expr::Binary {
                op: BinOp::And,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            };
        }
        Ok(lhs)
    }

    fn cmp(&mut self) -> Result<Expr, ExprError> {
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
        self.pos += tok.len();
        let rhs = self.unary()?;
        Ok(Expr::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        })
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        self.skip_ws();
        if self.rest().starts_with('!') && !self.rest().starts_with("!=") {
            self.pos += 1;
            self.enter()?;
            let e = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(e)));
        }
        self.atom()
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
            '(' => {
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
                Ok(e)
            }
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
        let body = &self.src[start + 1..];
        let mut out = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.pos = start + 1 + i + 1;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, 'u')) => {
                        let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                        match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                            Some(ch) => out.push(ch),
                            None => {
                                return Err(err(
                                    start + 1 + i,
                                    6,
                                    format!("bad escape `\\u{hex}`"),
                                    None,
                                ));
                            }
                        }
                    }
                    Some((_, other)) => out.push(other),
                    None => break,
                },
                c => out.push(c),
            }
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
            let rest = self.rest();
            if rest.starts_with('.') {
                self.pos += 1;
                continue;
            }
            if let Some(r) = rest.strip_prefix('[') {
                let digits = r.chars().take_while(char::is_ascii_digit).count();
                if digits > 0 && r[digits..].starts_with(']') {
                    segs.push((self.pos + 1, r[..digits].to_owned()));
                    self.pos += digits + 2;
                    if self.rest().starts_with('.') {
                        self.pos += 1;
                        continue;
                    }
                    if self.rest().starts_with('[') {
                        // `[0][1]`: handled by the next turn of the loop.
                        let r2 = &self.rest()[1..];
                        let d2 = r2.chars().take_while(char::is_ascii_digit).count();
                        if d2 > 0 && r2[d2..].starts_with(']') {
                            segs.push((self.pos + 1, r2[..d2].to_owned()));
                            self.pos += d2 + 2;
                        }
                    }
                    break;
                }
                return Err(err(
                    self.pos,
                    1,
                    "an index must be digits in `[…]`",
                    Some("write `[0]`"),
                ));
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
            name => Root::Var(name.to_owned()),
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
}

impl Template {
    /// `text ${{ $steps.x.name }} text`.
    pub fn parse(s: &str) -> Result<Template, ExprError> {
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
            let e = parse(inner.trim()).map_err(|mut e| {
                e.offset += offset + inner_start + (inner.len() - inner.trim_start().len());
                e
            })?;
            parts.push(Part::Expr(e));
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
                Part::Expr(e) => match e.eval(scope) {
                    Value::String(s) => out.push_str(&s),
                    Value::Null => {}
                    v => out.push_str(&v.to_string()),
                },
                Part::Dsl(t) => out.push_str(&crate::agentfile::template::render(t, |n| {
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
                Part::Expr(e) => e.paths(),
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

/// Path roots a string must mean when it starts with them.
const ROOTS: &[&str] = &["$workflow.", "$steps.", "$input", "$item", "$index"];

/// Compile a JSON/YAML value: a string that is a whole expression becomes one
/// (so `$input.n` passes its value through with its type); a string holding
/// `${{ … }}` is a template; `{kind: literal, value: X}` is X; anything else is
/// a literal. A string that starts like a path (`$steps.`, `$input`, …) but
/// does not parse is an error; other text starting with `$` (`$5 off`) is
/// prose. Errors name the JSON pointer of the bad leaf.
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
            Err(e) if ROOTS.iter().any(|r| s.trim_start().starts_with(r)) => {
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
            if out.values().all(ValueExpr::is_literal) {
                ValueExpr::Literal(v.clone())
            } else {
                ValueExpr::Object(out)
            }
        }
        Value::Array(a) => {
            let items = a
                .iter()
                .enumerate()
                .map(|(i, x)| compile_at(x, format!("{pointer}/{i}")))
                .collect::<Result<Vec<_>, _>>()?;
            if items.iter().all(ValueExpr::is_literal) {
                ValueExpr::Literal(v.clone())
            } else {
                ValueExpr::Array(items)
            }
        }
        other => ValueExpr::Literal(other.clone()),
    })
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

    proptest! {
        #[test]
        fn parse_and_eval_never_panic(s in "\\PC{0,80}") {
            if let Ok(e) = parse(&s) {
                let _ = e.eval(&scope());
                prop_assert_eq!(parse(&e.to_string()), Ok(e));
            }
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
