//! The Agentfile syntax tree: what was written, with a span on every node.
//!
//! It holds no meaning yet (no resolved references, no loaded files): that is the
//! validator's job, which turns a tree into a [`agentfile_plan::Plan`].

use agentfile_plan::diag::Span;

/// A name as written, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A string literal: its value (escapes processed) and where its raw content sits
/// in the file, so `$variables` inside it can be pointed at exactly.
#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    pub value: String,
    /// The whole literal, quotes included.
    pub span: Span,
    /// Byte range of the raw content between the quotes (after the optional
    /// newline that follows an opening `"""`).
    pub content: Span,
}

/// Where a prompt or outcome comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Inline(Text),
    /// `FROM path`: the path as written, relative to the Agentfile.
    From {
        path: String,
        span: Span,
    },
}

impl Source {
    pub fn span(&self) -> Span {
        match self {
            Source::Inline(t) => t.span,
            Source::From { span, .. } => *span,
        }
    }
}

/// An iteration limit: `WITHIN 5` or `WITHIN $max`.
#[derive(Debug, Clone, PartialEq)]
pub enum Limit {
    /// The digits as written; the validator checks the range.
    Count {
        digits: String,
        span: Span,
    },
    Var(Ident),
    /// Anything else that followed WITHIN (`"5"`, `2.5`, `-1`); always invalid,
    /// kept so the validator can say why.
    Other {
        text: String,
        span: Span,
    },
}

pub use agentfile_plan::Supervision;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Text(Text),
    /// A bare word: number, identifier or other run of characters.
    Word {
        text: String,
        span: Span,
    },
}

impl Value {
    pub fn as_str(&self) -> &str {
        match self {
            Value::Text(t) => &t.value,
            Value::Word { text, .. } => text,
        }
    }

    pub fn span(&self) -> Span {
        match self {
            Value::Text(t) => t.span,
            Value::Word { span, .. } => *span,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub name: Ident,
    pub default: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub name: Ident,
    pub source: Source,
    pub requires: Option<Text>,
    pub outputs: Vec<Ident>,
    pub supervision: Option<(Supervision, Span)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoalKind {
    Goal,
    Converge,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    pub kind: GoalKind,
    pub name: Ident,
    pub source: Source,
    pub outputs: Vec<Ident>,
    pub using: Vec<Ident>,
    pub within: Option<Limit>,
    pub supervision: Option<(Supervision, Span)>,
    /// The keyword, for "defined here" notes.
    pub keyword: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    Run,
    Loop,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub kind: StepKind,
    pub name: Ident,
    pub goals: Vec<Ident>,
    pub within: Option<Limit>,
    pub keyword: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `NAME x`; the name may also be written as a string.
    Name {
        value: Value,
        keyword: Span,
    },
    Input(Input),
    Agent(Agent),
    Goal(Goal),
    Step(Step),
    /// A `SUPERVISED [HUMAN]` / `UNSUPERVISED` line: applies to the goals after it.
    Supervision {
        mode: Supervision,
        span: Span,
    },
    /// `SECURITY mode`.
    Security {
        mode: Ident,
        keyword: Span,
    },
}

/// A parsed Agentfile: its statements in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct File {
    pub items: Vec<Item>,
    /// Names whose definitions failed to parse; uses of them are not reported
    /// again as undefined.
    pub broken: Vec<String>,
    /// RUN/LOOP statements written, parsed or not (so a broken step does not
    /// also cause "no steps").
    pub steps_attempted: usize,
}
