//! The Agentfile parser: tokens in, a [`File`] and syntax diagnostics out.
//!
//! One statement per line. On a syntax error the parser records a diagnostic and
//! skips to the next line, so one run reports every broken line. After a comma
//! (in `USING a,` or `-> x,`) newlines are skipped, so long lists may wrap.
//!
//! Clauses after a GOAL/CONVERGE/AGENT's prompt (`-> outs`, `USING`, `WITHIN`,
//! `REQUIRES`, `SUPERVISED …`) may come in any order, each at most once; files in
//! the wild write `-> x USING a` and `USING a -> x` alike.

use super::ast::*;
use super::lexer::{Keyword, Token, TokenKind, is_ident, tokenize};
use agentfile_plan::diag::{Diagnostic, FileId, Span, suggest};

/// Parse one Agentfile. Never panics; every syntax problem becomes a diagnostic.
pub fn parse(file: FileId, src: &str) -> (File, Vec<Diagnostic>) {
    let mut p = Parser {
        src,
        file,
        toks: tokenize(src),
        pos: 0,
        diags: Vec::new(),
    };
    let mut items = Vec::new();
    let mut broken = Vec::new();
    let mut steps_attempted = 0;
    loop {
        p.skip_newlines();
        if p.at(TokenKind::Eof) {
            break;
        }
        // The name a broken definition would have defined, so the validator does
        // not report every later use of it as undefined.
        let first = p.peek();
        let kw = match first.kind {
            TokenKind::Keyword(k) => Some(k),
            // `goal x "…"`: reported as a lowercase keyword, but `x` is still meant.
            TokenKind::Ident => Keyword::from_word(&p.text(first).to_ascii_uppercase()),
            _ => None,
        };
        if matches!(kw, Some(Keyword::Run | Keyword::Loop)) {
            steps_attempted += 1;
        }
        let defines = match (kw, p.toks.get(p.pos + 1)) {
            (Some(k), Some(next))
                if next.kind == TokenKind::Ident
                    && matches!(
                        k,
                        Keyword::Input | Keyword::Agent | Keyword::Goal | Keyword::Converge
                    ) =>
            {
                Some(p.text(*next).to_owned())
            }
            _ => None,
        };
        match p.statement() {
            Ok(item) => {
                items.push(item);
                if !p.at(TokenKind::Newline) && !p.at(TokenKind::Eof) {
                    let t = p.peek();
                    let d = p.unexpected(t, "the end of the line");
                    p.diags.push(d);
                    p.skip_line();
                }
            }
            Err(d) => {
                p.diags.push(*d);
                p.skip_line();
                broken.extend(defines);
            }
        }
    }
    (
        File {
            items,
            broken,
            steps_attempted,
        },
        p.diags,
    )
}

type PResult<T> = Result<T, Box<Diagnostic>>;

struct Parser<'a> {
    src: &'a str,
    file: FileId,
    toks: Vec<Token>,
    pos: usize,
    diags: Vec<Diagnostic>,
}

const STATEMENTS: &str =
    "NAME, INPUT, AGENT, GOAL, CONVERGE, RUN, LOOP, SUPERVISED, UNSUPERVISED or SECURITY";

impl<'a> Parser<'a> {
    fn peek(&self) -> Token {
        // tokenize() always ends with Eof and we never advance past it.
        self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn at(&self, kind: TokenKind) -> bool {
        self.peek().kind == kind
    }

    fn at_kw(&self, kw: Keyword) -> bool {
        self.at(TokenKind::Keyword(kw))
    }

    fn bump(&mut self) -> Token {
        let t = self.peek();
        if t.kind != TokenKind::Eof {
            self.pos += 1;
        }
        t
    }

    fn bump_span(&mut self) -> Span {
        let t = self.bump();
        self.span(t)
    }

    fn span(&self, t: Token) -> Span {
        Span::new(self.file, t.start as usize, t.end as usize)
    }

    fn text(&self, t: Token) -> &'a str {
        &self.src[t.start as usize..t.end as usize]
    }

    fn skip_newlines(&mut self) {
        while self.at(TokenKind::Newline) {
            self.bump();
        }
    }

    fn skip_line(&mut self) {
        while !self.at(TokenKind::Newline) && !self.at(TokenKind::Eof) {
            self.bump();
        }
    }

    fn at_line_end(&self) -> bool {
        matches!(self.peek().kind, TokenKind::Newline | TokenKind::Eof)
    }

    /// What a token looks like in a message.
    fn describe(&self, t: Token) -> String {
        match t.kind {
            TokenKind::Newline => "the end of the line".into(),
            TokenKind::Eof => "the end of the file".into(),
            TokenKind::Keyword(k) => format!("keyword `{}`", k.as_str()),
            TokenKind::Str { .. } | TokenKind::TripleStr { .. } => "a string".into(),
            TokenKind::Comma => "`,`".into(),
            TokenKind::Arrow => "`->`".into(),
            _ => format!("`{}`", agentfile_config::text::shorten(self.text(t), 40)),
        }
    }

    fn unexpected(&self, t: Token, expected: &str) -> Diagnostic {
        let span = if matches!(t.kind, TokenKind::Newline | TokenKind::Eof) {
            // Point just past the last thing on the line.
            let prev_end = self.toks[..self.pos]
                .last()
                .map(|p| p.end as usize)
                .unwrap_or(0);
            Span::new(self.file, prev_end, prev_end + 1)
        } else {
            self.span(t)
        };
        let d = Diagnostic::error(
            "syntax",
            span,
            format!("expected {expected}, found {}", self.describe(t)),
        );
        self.keyword_hint(d, t)
    }

    /// Hints for the common slips: lowercase keywords, misspelt keywords.
    fn keyword_hint(&self, d: Diagnostic, t: Token) -> Diagnostic {
        if !matches!(t.kind, TokenKind::Ident | TokenKind::Word) {
            return d;
        }
        let w = self.text(t);
        let upper = w.to_ascii_uppercase();
        if Keyword::from_word(&upper).is_some() {
            return d.with_hint(format!("keywords are uppercase: write `{upper}`"));
        }
        if w.chars().all(|c| c.is_ascii_uppercase())
            && let Some(k) = suggest(w, Keyword::ALL.iter().map(|k| k.as_str()))
        {
            return d.with_hint(format!("did you mean `{k}`?"));
        }
        d
    }

    fn statement(&mut self) -> PResult<Item> {
        let t = self.peek();
        let kw = match t.kind {
            TokenKind::Keyword(k) => k,
            _ => {
                let found = self.describe(t);
                let d = Diagnostic::error(
                    "unknown-statement",
                    self.span(t),
                    format!("expected a statement ({STATEMENTS}), found {found}"),
                );
                return Err(Box::new(self.keyword_hint(d, t)));
            }
        };
        let kspan = self.bump_span();
        match kw {
            Keyword::Name => {
                let value = self.value("a workflow name after NAME")?;
                Ok(Item::Name {
                    value,
                    keyword: kspan,
                })
            }
            Keyword::Input => {
                let name = self.ident("an input name after INPUT")?;
                let default = if self.at_kw(Keyword::Default) {
                    self.bump();
                    Some(self.value("a value after DEFAULT")?)
                } else {
                    None
                };
                Ok(Item::Input(Input { name, default }))
            }
            Keyword::Agent => self.agent(),
            Keyword::Goal => self.goal(GoalKind::Goal, kspan),
            Keyword::Converge => self.goal(GoalKind::Converge, kspan),
            Keyword::Run | Keyword::Loop => self.step(kw, kspan),
            Keyword::Supervised => {
                let mut span = kspan;
                let mode = if self.at_kw(Keyword::Human) {
                    span = span.to(self.bump_span());
                    Supervision::SupervisedHuman
                } else {
                    Supervision::Supervised
                };
                Ok(Item::Supervision { mode, span })
            }
            Keyword::Unsupervised => Ok(Item::Supervision {
                mode: Supervision::Unsupervised,
                span: kspan,
            }),
            Keyword::Security => {
                let mode = self.ident("a security mode after SECURITY")?;
                Ok(Item::Security {
                    mode,
                    keyword: kspan,
                })
            }
            Keyword::From
            | Keyword::Using
            | Keyword::Within
            | Keyword::Default
            | Keyword::Requires
            | Keyword::Human => Err(Box::new(
                Diagnostic::error(
                    "syntax",
                    kspan,
                    format!(
                        "`{}` cannot start a statement; expected {STATEMENTS}",
                        kw.as_str()
                    ),
                )
                .with_hint("it continues the statement on the line above; join the lines"),
            )),
        }
    }

    fn ident(&mut self, expected: &str) -> PResult<Ident> {
        let t = self.peek();
        match t.kind {
            TokenKind::Ident => {
                self.bump();
                Ok(Ident {
                    name: self.text(t).to_owned(),
                    span: self.span(t),
                })
            }
            TokenKind::Keyword(k) => Err(Box::new(
                Diagnostic::error(
                    "syntax",
                    self.span(t),
                    format!("expected {expected}, found keyword `{}`", k.as_str()),
                )
                .with_hint(format!(
                    "`{}` is reserved; pick another name, such as `{}`",
                    k.as_str(),
                    k.as_str().to_ascii_lowercase()
                )),
            )),
            TokenKind::Word | TokenKind::Number => {
                let w = self.text(t);
                Err(Box::new(
                    Diagnostic::error(
                        "syntax",
                        self.span(t),
                        format!(
                            "expected {expected}, found `{}`",
                            agentfile_config::text::shorten(w, 40)
                        ),
                    )
                    .with_hint(
                        "names are letters, digits, `_` and `-`, and start with a letter or `_`",
                    ),
                ))
            }
            TokenKind::Str { .. } | TokenKind::TripleStr { .. } => Err(Box::new(
                self.unexpected(t, expected)
                    .with_hint("give it a name before the text, such as `GOAL summarize \"…\"`"),
            )),
            _ => Err(Box::new(self.unexpected(t, expected))),
        }
    }

    /// `a, b, c` — at least one name.
    fn ident_list(&mut self, what: &str) -> PResult<Vec<Ident>> {
        let mut out = vec![self.ident(what)?];
        loop {
            if self.at(TokenKind::Comma) {
                let comma = self.bump();
                // A list may wrap after a comma, onto a line that continues it.
                let mut ahead = self.pos;
                while self
                    .toks
                    .get(ahead)
                    .is_some_and(|t| t.kind == TokenKind::Newline)
                {
                    ahead += 1;
                }
                if ahead != self.pos
                    && self
                        .toks
                        .get(ahead)
                        .is_some_and(|t| t.kind == TokenKind::Ident)
                {
                    self.pos = ahead;
                }
                if !self.at(TokenKind::Ident) {
                    let t = self.peek();
                    let mut d = self.unexpected(t, "a name after `,`");
                    if self.at_line_end() {
                        d.span = Some(self.span(comma));
                        d = d.with_hint("remove the trailing `,`");
                    }
                    return Err(Box::new(d));
                }
                out.push(self.ident(what)?);
            } else if self.at(TokenKind::Ident) {
                // `USING a b`: say what is missing and keep the whole list.
                let t = self.peek();
                let prev = out.last().map(|i| i.name.clone()).unwrap_or_default();
                self.diags.push(
                    Diagnostic::error(
                        "syntax",
                        self.span(t),
                        format!("expected `,` between `{prev}` and `{}`", self.text(t)),
                    )
                    .with_hint(format!("write `{prev}, {}`", self.text(t))),
                );
                out.push(self.ident(what)?);
            } else {
                return Ok(out);
            }
        }
    }

    fn string(&mut self, t: Token) -> PResult<Text> {
        let raw = self.text(t);
        let span = self.span(t);
        match t.kind {
            TokenKind::Str { terminated } => {
                if !terminated {
                    return Err(Box::new(
                        Diagnostic::error("unterminated-string", span, "unterminated string")
                            .with_hint(
                                "close it with `\"` on the same line, or use `\"\"\"` for text over several lines",
                            ),
                    ));
                }
                let inner = &raw[1..raw.len() - 1];
                let value = self.unescape(inner, t.start as usize + 1);
                Ok(Text {
                    value,
                    span,
                    content: Span::new(self.file, t.start as usize + 1, t.end as usize - 1),
                })
            }
            TokenKind::TripleStr { terminated } => {
                if !terminated {
                    return Err(Box::new(
                        Diagnostic::error(
                            "unterminated-string",
                            Span::new(self.file, t.start as usize, t.start as usize + 3),
                            "unterminated `\"\"\"` string: it runs to the end of the file",
                        )
                        .with_hint("close it with `\"\"\"`"),
                    ));
                }
                let mut start = t.start as usize + 3;
                let end = t.end as usize - 3;
                let mut inner = &self.src[start..end];
                // An optional newline after the opening quotes is not content…
                if let Some(rest) = inner
                    .strip_prefix("\r\n")
                    .or_else(|| inner.strip_prefix('\n'))
                {
                    start += inner.len() - rest.len();
                    inner = rest;
                }
                // …and neither is a trailing one before the closing quotes.
                let inner = inner
                    .strip_suffix("\r\n")
                    .or_else(|| inner.strip_suffix('\n'))
                    .unwrap_or(inner);
                Ok(Text {
                    value: inner.replace("\r\n", "\n"),
                    span,
                    content: Span::new(self.file, start, start + inner.len()),
                })
            }
            _ => Err(Box::new(self.unexpected(t, "a string"))),
        }
    }

    /// Process `\n \t \r \\ \"`. Unknown escapes are kept as written, with a
    /// warning, because prompts quote regexes (`\d+`) more often than they mean an
    /// escape.
    fn unescape(&mut self, inner: &str, offset: usize) -> String {
        if !inner.contains('\\') {
            return inner.to_owned();
        }
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, '"')) => out.push('"'),
                Some((j, other)) => {
                    out.push('\\');
                    out.push(other);
                    let span = Span::new(self.file, offset + i, offset + j + other.len_utf8());
                    let hint = if other == '$' {
                        "write `$$` for a literal `$`".to_owned()
                    } else {
                        format!("write `\\\\{other}` for a backslash followed by `{other}`")
                    };
                    self.diags.push(
                        Diagnostic::warning(
                            "unknown-escape",
                            span,
                            format!("unknown escape `\\{other}` is kept as written"),
                        )
                        .with_hint(hint),
                    );
                }
                None => out.push('\\'),
            }
        }
        out
    }

    fn value(&mut self, expected: &str) -> PResult<Value> {
        let t = self.peek();
        match t.kind {
            TokenKind::Str { .. } | TokenKind::TripleStr { .. } => {
                self.bump();
                Ok(Value::Text(self.string(t)?))
            }
            TokenKind::Ident | TokenKind::Number | TokenKind::Word | TokenKind::Variable => {
                self.bump();
                Ok(Value::Word {
                    text: self.text(t).to_owned(),
                    span: self.span(t),
                })
            }
            _ => Err(Box::new(self.unexpected(t, expected))),
        }
    }

    /// A prompt: a string, or `FROM path`.
    fn source(&mut self, what: &str) -> PResult<Source> {
        let t = self.peek();
        match t.kind {
            TokenKind::Str { .. } | TokenKind::TripleStr { .. } => {
                self.bump();
                Ok(Source::Inline(self.string(t)?))
            }
            TokenKind::Keyword(Keyword::From) => {
                self.bump();
                let p = self.peek();
                match p.kind {
                    TokenKind::Str { .. } => {
                        self.bump();
                        let text = self.string(p)?;
                        Ok(Source::From {
                            path: text.value,
                            span: text.span,
                        })
                    }
                    TokenKind::Ident
                    | TokenKind::Word
                    | TokenKind::Number
                    | TokenKind::Variable => {
                        self.bump();
                        Ok(Source::From {
                            path: self.text(p).to_owned(),
                            span: self.span(p),
                        })
                    }
                    _ => Err(Box::new(self.unexpected(p, "a path after FROM"))),
                }
            }
            _ => Err(Box::new(self.unexpected(
                t,
                &format!("{what}: a string in quotes or `FROM path`"),
            ))),
        }
    }

    fn limit(&mut self) -> PResult<Limit> {
        let t = self.peek();
        match t.kind {
            TokenKind::Number => {
                self.bump();
                Ok(Limit::Count {
                    digits: self.text(t).to_owned(),
                    span: self.span(t),
                })
            }
            TokenKind::Variable => {
                self.bump();
                Ok(Limit::Var(Ident {
                    name: self.text(t)[1..].to_owned(),
                    span: self.span(t),
                }))
            }
            TokenKind::Word | TokenKind::Str { .. } | TokenKind::Ident => {
                self.bump();
                let text = match t.kind {
                    TokenKind::Str { .. } => self.string(t)?.value,
                    _ => self.text(t).to_owned(),
                };
                Ok(Limit::Other {
                    text,
                    span: self.span(t),
                })
            }
            _ => Err(Box::new(self.unexpected(
                t,
                "an iteration limit after WITHIN (a number or `$input`)",
            ))),
        }
    }

    /// SUPERVISED [HUMAN] | UNSUPERVISED at the end of a definition.
    fn supervision(&mut self) -> Option<(Supervision, Span)> {
        if self.at_kw(Keyword::Supervised) {
            let mut span = self.bump_span();
            let mode = if self.at_kw(Keyword::Human) {
                span = span.to(self.bump_span());
                Supervision::SupervisedHuman
            } else {
                Supervision::Supervised
            };
            Some((mode, span))
        } else if self.at_kw(Keyword::Unsupervised) {
            Some((Supervision::Unsupervised, self.bump_span()))
        } else {
            None
        }
    }

    fn duplicate_clause(&self, t: Token, first: Span) -> Box<Diagnostic> {
        Box::new(
            Diagnostic::error(
                "syntax",
                self.span(t),
                format!("{} is given twice in one statement", self.describe(t)),
            )
            .with_note(first, "first given here")
            .with_hint("merge the two lists into one"),
        )
    }

    fn agent(&mut self) -> PResult<Item> {
        let name = self.ident("an agent name after AGENT")?;
        let source = self.source("the agent's prompt")?;
        let mut agent = Agent {
            name,
            source,
            requires: None,
            outputs: Vec::new(),
            supervision: None,
        };
        let mut seen: Vec<(TokenKind, Span)> = Vec::new();
        while !self.at_line_end() {
            let t = self.peek();
            if let Some((_, first)) = seen.iter().find(|(k, _)| *k == t.kind) {
                return Err(self.duplicate_clause(t, *first));
            }
            match t.kind {
                TokenKind::Keyword(Keyword::Requires) => {
                    self.bump();
                    let p = self.peek();
                    match p.kind {
                        TokenKind::Str { .. } => {
                            self.bump();
                            agent.requires = Some(self.string(p)?);
                        }
                        TokenKind::Ident => {
                            return Err(Box::new(
                                Diagnostic::error(
                                    "syntax",
                                    self.span(p),
                                    "expected a profile name in quotes after REQUIRES",
                                )
                                .with_hint(format!("write REQUIRES \"{}\"", self.text(p))),
                            ));
                        }
                        _ => {
                            return Err(Box::new(
                                self.unexpected(p, "a profile name in quotes after REQUIRES"),
                            ));
                        }
                    }
                }
                TokenKind::Arrow => {
                    self.bump();
                    agent.outputs = self.ident_list("an output field name after `->`")?;
                }
                TokenKind::Keyword(Keyword::Supervised | Keyword::Unsupervised) => {
                    agent.supervision = self.supervision();
                }
                TokenKind::Keyword(Keyword::Using) => {
                    return Err(Box::new(
                        Diagnostic::error("syntax", self.span(t), "an AGENT cannot have USING")
                            .with_hint("USING belongs on the GOAL that uses this agent"),
                    ));
                }
                _ => {
                    return Err(Box::new(self.unexpected(
                        t,
                        "REQUIRES \"profile\", `-> outputs` or the end of the line",
                    )));
                }
            }
            seen.push((t.kind, self.span(t)));
        }
        Ok(Item::Agent(agent))
    }

    fn goal(&mut self, kind: GoalKind, keyword: Span) -> PResult<Item> {
        let what = match kind {
            GoalKind::Goal => "a goal name after GOAL",
            GoalKind::Converge => "a goal name after CONVERGE",
        };
        let name = self.ident(what)?;
        let source = self.source("the goal's outcome")?;
        let mut goal = Goal {
            kind,
            name,
            source,
            outputs: Vec::new(),
            using: Vec::new(),
            within: None,
            supervision: None,
            keyword,
        };
        let mut seen: Vec<(TokenKind, Span)> = Vec::new();
        while !self.at_line_end() {
            let t = self.peek();
            let key = match t.kind {
                // SUPERVISED and UNSUPERVISED are one clause.
                TokenKind::Keyword(Keyword::Unsupervised) => {
                    TokenKind::Keyword(Keyword::Supervised)
                }
                k => k,
            };
            if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
                return Err(self.duplicate_clause(t, *first));
            }
            match t.kind {
                TokenKind::Arrow => {
                    self.bump();
                    goal.outputs = self.ident_list("an output field name after `->`")?;
                }
                TokenKind::Keyword(Keyword::Using) => {
                    self.bump();
                    goal.using = self.ident_list("an agent name after USING")?;
                }
                TokenKind::Keyword(Keyword::Within) => {
                    if kind == GoalKind::Goal {
                        return Err(Box::new(
                            Diagnostic::error(
                                "syntax",
                                self.span(t),
                                "WITHIN is only allowed on CONVERGE and LOOP",
                            )
                            .with_hint(
                                "write CONVERGE instead of GOAL to refine this goal until it converges",
                            ),
                        ));
                    }
                    self.bump();
                    goal.within = Some(self.limit()?);
                }
                TokenKind::Keyword(Keyword::Supervised | Keyword::Unsupervised) => {
                    goal.supervision = self.supervision();
                }
                _ => {
                    let expected = match kind {
                        GoalKind::Goal => {
                            "`-> outputs`, USING agents, SUPERVISED or the end of the line"
                        }
                        GoalKind::Converge => {
                            "`-> outputs`, USING agents, WITHIN limit, SUPERVISED or the end of the line"
                        }
                    };
                    return Err(Box::new(self.unexpected(t, expected)));
                }
            }
            seen.push((key, self.span(t)));
        }
        if kind == GoalKind::Converge && goal.within.is_none() {
            self.diags.push(
                Diagnostic::error(
                    "missing-within",
                    goal.name.span,
                    format!("CONVERGE `{}` needs an iteration limit", goal.name.name),
                )
                .with_hint("add `WITHIN 5` (or `WITHIN $input`) at the end of the line"),
            );
        }
        Ok(Item::Goal(goal))
    }

    fn step(&mut self, kw: Keyword, keyword: Span) -> PResult<Item> {
        let (kind, what) = match kw {
            Keyword::Loop => (StepKind::Loop, "a step name after LOOP"),
            _ => (StepKind::Run, "a step name after RUN"),
        };
        let name = self.ident(what)?;
        if !self.at_kw(Keyword::Using) {
            let t = self.peek();
            let mut d = self.unexpected(t, "USING and the goals to run");
            d = match t.kind {
                TokenKind::Ident => d.with_hint(format!(
                    "write `{} {} USING {}`",
                    kw.as_str(),
                    name.name,
                    self.text(t)
                )),
                _ => d.with_hint(format!(
                    "write `{} {} USING <goal>, …`",
                    kw.as_str(),
                    name.name
                )),
            };
            return Err(Box::new(d));
        }
        self.bump();
        let goals = self.ident_list("a goal name after USING")?;
        let within = if self.at_kw(Keyword::Within) {
            let t = self.bump();
            let limit = self.limit()?;
            if kind == StepKind::Run {
                self.diags.push(
                    Diagnostic::error("syntax", self.span(t), "RUN does not take WITHIN")
                        .with_hint("use LOOP to repeat goals until they converge"),
                );
                None
            } else {
                Some(limit)
            }
        } else {
            None
        };
        if kind == StepKind::Loop && within.is_none() {
            if !self.at_line_end() {
                let t = self.peek();
                return Err(Box::new(self.unexpected(t, "`,` or WITHIN")));
            }
            self.diags.push(
                Diagnostic::error(
                    "missing-within",
                    name.span,
                    format!("LOOP `{}` needs an iteration limit", name.name),
                )
                .with_hint("add `WITHIN 5` (or `WITHIN $input`) at the end of the line"),
            );
        }
        Ok(Item::Step(Step {
            kind,
            name,
            goals,
            within,
            keyword,
        }))
    }
}

/// True when `w` is a valid name (for callers outside the parser).
pub fn valid_name(w: &str) -> bool {
    is_ident(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(src: &str) -> File {
        let (f, d) = parse(FileId(0), src);
        assert!(d.is_empty(), "{d:#?}");
        f
    }

    #[test]
    fn parses_the_full_dialect() {
        let f = parse_ok(
            "NAME my-flow\nINPUT topic DEFAULT \"x\"\nINPUT n DEFAULT 3\n\
             AGENT critic \"Be harsh\" REQUIRES \"fast\"\n\
             AGENT writer FROM agents/w.md\n\
             GOAL a \"Do $topic\" -> x, y USING critic, writer\n\
             GOAL b FROM goals/b.md USING critic SUPERVISED HUMAN\n\
             CONVERGE c \"\"\"\nline one\nline two\n\"\"\" -> z WITHIN $n\n\
             SUPERVISED\n\
             RUN one USING a,\n  b\nLOOP two USING c WITHIN 4\n",
        );
        assert_eq!(f.items.len(), 11);
        let Item::Goal(c) = &f.items[7] else { panic!() };
        let Source::Inline(t) = &c.source else {
            panic!()
        };
        assert_eq!(t.value, "line one\nline two");
        assert!(matches!(c.within, Some(Limit::Var(ref i)) if i.name == "n"));
        let Item::Step(s) = &f.items[9] else { panic!() };
        assert_eq!(s.goals.len(), 2);
    }

    #[test]
    fn keeps_going_after_errors() {
        let (f, d) = parse(
            FileId(0),
            "NAME x\nGOAL \"no name\"\nGOAL ok \"fine\"\nRUN r\nRUN s USING ok\n",
        );
        assert_eq!(d.len(), 2, "{d:#?}");
        assert_eq!(f.items.len(), 3);
    }

    #[test]
    fn escapes() {
        let f = parse_ok("GOAL a \"x\\ny \\\"q\\\" \\\\ $$\"\n");
        let Item::Goal(g) = &f.items[0] else { panic!() };
        let Source::Inline(t) = &g.source else {
            panic!()
        };
        assert_eq!(t.value, "x\ny \"q\" \\ $$");
    }
}
