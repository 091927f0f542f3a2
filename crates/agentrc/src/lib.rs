//! agentrc Agentfiles (CONTRACT §12): both syntaxes read into one parse tree,
//! checked, linted, digested, and lowered into a one-agent plan whose tool
//! calls pass the declaration's grants and Cedar policies on top of the gate.
//!
//! - [`syntax`]: lines, continuations, blocks and heredocs.
//! - [`table`]: every directive, its profile and what a run does with it.
//! - [`base`]: FROM's base, found by the caller ([`Bases`]): what the file
//!   does not write it inherits, what it writes may only narrow the base.
//! - [`cedar`]: `POLICY … END` blocks through the `cedar-policy` crate,
//!   checked here and compiled into the plan ([`Grants::compiled`]), where
//!   the gate asks them at run time without knowing their language.
//! - this crate's root: names and arguments checked, the seven lints, the digest,
//!   the plan.

pub mod base;
pub mod cedar;
pub mod syntax;
pub mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use agentfile_plan::Plan;
use agentfile_plan::declared::{
    Base, Block, Compiled, Credential, Declaration, DeclaredTool, Directive, Grants, Mount,
};
use agentfile_plan::diag::{Diagnostic, FileId, SourceMap, Span};
use syntax::{BlockKind, LayoutProblem, RawDirective, Syntax, Token};
use table::{Entry, Profile, Support};

pub use base::Bases;

/// The input a run of an agentrc agent takes: what to do.
pub use agentfile_plan::build::TASK_INPUT;

/// SOP text read from a file named by `COPY … /mnt/SOP` is limited to this.
const MAX_SOP_FILE: u64 = 1 << 20;

#[derive(Default, Clone, Copy)]
pub struct Options<'a> {
    /// `--profile core`: check core conformance — a directive of an optional
    /// profile is an error unless `extensions` names its profile. Without
    /// it (the default) every profile agentfile reads is accepted.
    pub core_only: bool,
    /// Optional profiles accepted under `core_only` (`--extensions`):
    /// `capability`, `placement`, …, or `all`.
    pub extensions: &'a [String],
    /// Finds the base a FROM names. `None`: FROM is checked and linted, and
    /// no base is looked for.
    pub bases: Option<&'a dyn Bases>,
}

impl std::fmt::Debug for Options<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("core_only", &self.core_only)
            .field("extensions", &self.extensions)
            .field("bases", &self.bases.map(|_| "…"))
            .finish()
    }
}

/// Check an agentrc Agentfile and lower it into a plan (only when it has no
/// errors).
pub fn analyze(
    sources: &mut SourceMap,
    file: FileId,
    opts: Options<'_>,
) -> (Vec<Diagnostic>, Option<Plan>) {
    let src = sources.file(file);
    let path = src.path.clone();
    let text = src.text.clone();
    let (syntax, evidence) = syntax::guess(&text);
    let layout = syntax::read(&text, syntax == Syntax::Core);
    let mut c = Checker::new(file, &text, &path, syntax, evidence, opts);
    c.layout_problems(&layout.problems);
    for d in &layout.directives {
        c.directive(d);
    }
    c.finish();
    let Checker {
        mut diags,
        directives,
        mut grants,
        agent,
        timeout_s,
        cedar_blocks,
        identity,
        base,
        ..
    } = c;
    let has_errors = diags.iter().any(Diagnostic::is_error);
    if has_errors {
        return (diags, None);
    }
    let agent_name = agent
        .map(|(a, _)| a)
        .unwrap_or_else(|| fallback_name(&path));
    // A file with a base and no policy of its own lives under the base's.
    let inherits_policy = base.is_some() && cedar_blocks.is_empty();
    grants.cedar = (syntax == Syntax::Core && !inherits_policy).then_some(cedar_blocks);
    let decl = Declaration {
        syntax: syntax.as_str().to_owned(),
        syntax_directive: layout.syntax_directive.as_ref().map(|s| s.0.clone()),
        agent: agent_name,
        digest: digest(&directives),
        extensions: if syntax == Syntax::Core {
            enabled(opts)
                .iter()
                .map(|p| p.as_str().to_owned())
                .collect()
        } else {
            Vec::new()
        },
        directives,
        grants,
        base: base.map(Box::new),
    };
    match plan(&path, decl, identity.get("description").cloned(), timeout_s) {
        Ok(p) => (diags, Some(p)),
        Err(mut more) => {
            diags.append(&mut more);
            (diags, None)
        }
    }
}

/// The folder's name, for a file with no AGENT or IDENTITY name.
fn fallback_name(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    abs.parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "agent".to_owned())
}

/// The optional profiles accepted: all of them, or under `--profile core`
/// those `--extensions` names.
fn enabled(opts: Options<'_>) -> BTreeSet<Profile> {
    let mut out = BTreeSet::new();
    if !opts.core_only {
        out.extend(Profile::OPTIONAL);
        return out;
    }
    for e in opts.extensions {
        if e == "all" {
            out.extend(Profile::OPTIONAL);
        } else if let Some(p) = Profile::from_name(e) {
            out.insert(p);
        }
    }
    out
}

/// The names `--extensions` accepts.
pub fn extension_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = Profile::OPTIONAL.iter().map(|p| p.as_str()).collect();
    v.push("all");
    v
}

struct Checker<'a> {
    file: FileId,
    text: &'a str,
    dir: &'a Path,
    syntax: Syntax,
    evidence: Option<(usize, usize)>,
    extensions: BTreeSet<Profile>,
    diags: Vec<Diagnostic>,
    directives: Vec<Directive>,
    grants: Grants,
    /// The identity and where it was given.
    agent: Option<(String, Span)>,
    identity: BTreeMap<String, String>,
    sop: Option<Span>,
    /// An AGENT or `IDENTITY name=` was written, valid or not.
    named: bool,
    audit: bool,
    timeout_s: Option<u64>,
    cedar_blocks: Vec<Block>,
    /// File tools declared (core), for the MOUNT lint.
    file_tools: Vec<(String, Span)>,
    tool_spans: Vec<(String, Span)>,
    /// Byte offsets where lines start.
    line_starts: Vec<usize>,
    /// Finds FROM's base (`None`: FROM is not looked up).
    bases: Option<&'a dyn Bases>,
    /// The (first) FROM's reference, when looked up.
    from: Option<Span>,
    /// The base it resolved to.
    base: Option<Base>,
    /// Where each mount, host and credential of `grants` was written, in
    /// the order of their lists (a host: its first mention).
    mount_spans: Vec<Span>,
    host_spans: Vec<(String, Span)>,
    cred_spans: Vec<Span>,
}

impl<'a> Checker<'a> {
    fn new(
        file: FileId,
        text: &'a str,
        path: &'a Path,
        syntax: Syntax,
        evidence: Option<(usize, usize)>,
        opts: Options<'a>,
    ) -> Checker<'a> {
        Checker {
            file,
            text,
            dir: path.parent().unwrap_or(Path::new(".")),
            syntax,
            evidence,
            extensions: enabled(opts),
            diags: Vec::new(),
            directives: Vec::new(),
            grants: Grants::default(),
            agent: None,
            identity: BTreeMap::new(),
            sop: None,
            named: false,
            audit: false,
            timeout_s: None,
            cedar_blocks: Vec::new(),
            file_tools: Vec::new(),
            tool_spans: Vec::new(),
            line_starts: std::iter::once(0)
                .chain(text.match_indices('\n').map(|(i, _)| i + 1))
                .collect(),
            bases: opts.bases,
            from: None,
            base: None,
            mount_spans: Vec::new(),
            host_spans: Vec::new(),
            cred_spans: Vec::new(),
        }
    }

    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start, end)
    }

    fn tspan(&self, t: &Token) -> Span {
        self.span(t.start, t.end)
    }

    fn error(&mut self, code: &'static str, span: Span, msg: impl Into<String>) -> &mut Diagnostic {
        self.diags.push(Diagnostic::error(code, span, msg));
        self.diags.last_mut().expect("just pushed")
    }

    fn warn(&mut self, code: &'static str, span: Span, msg: impl Into<String>) -> &mut Diagnostic {
        self.diags.push(Diagnostic::warning(code, span, msg));
        self.diags.last_mut().expect("just pushed")
    }

    fn hint(&mut self, hint: impl Into<String>) {
        if let Some(d) = self.diags.last_mut() {
            d.hint = Some(hint.into());
        }
    }

    /// 1-based line and column (in characters) of a byte offset, which is
    /// moved back to a character boundary first.
    fn line_col(&self, offset: usize) -> (u32, u32) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&s| s <= offset);
        let start = self.line_starts[line - 1];
        let col = self.text[start..offset].chars().count();
        (line as u32, col as u32 + 1)
    }

    fn layout_problems(&mut self, problems: &[LayoutProblem]) {
        for p in problems {
            match *p {
                LayoutProblem::TooLarge { at, bound } => {
                    let end = at + self.text[at..].find('\n').unwrap_or(self.text.len() - at);
                    let s = self.span(at, end);
                    let what = match bound {
                        syntax::Bound::Directives => {
                            format!("more than {} directives", syntax::MAX_DIRECTIVES)
                        }
                        syntax::Bound::Words => {
                            format!(
                                "more than {} words of directives and arguments",
                                syntax::MAX_WORDS
                            )
                        }
                    };
                    self.error(
                        "agentrc-too-large",
                        s,
                        format!("the file holds {what}, more than an agentrc file may: it is not read from this line on"),
                    );
                    self.hint("an agentrc file declares one agent: split what this one holds, or generate it with fewer lines");
                }
                LayoutProblem::ContinuationAtEnd { at } => {
                    let s = self.span(at, at + 1);
                    self.error(
                        "agentrc-continuation",
                        s,
                        "the line ends with `\\`, which continues it onto the next line, but the file ends here",
                    );
                    self.hint("remove the `\\` or add the rest of the directive on the next line");
                }
                LayoutProblem::EmptyContinuation { at } => {
                    let s = self.span(at, at);
                    self.warn(
                        "agentrc-continuation",
                        s,
                        "a `\\` continues the line above onto this blank line",
                    );
                    self.hint("remove the blank line (Dockerfile builders will refuse it)");
                }
                LayoutProblem::NotADirective { start, end } => {
                    let s = self.span(start, end);
                    let word = self.text[start..end].to_owned();
                    self.error(
                        "agentrc-unknown-directive",
                        s,
                        format!("`{word}` is not a directive: every line starts with one (AGENT, TOOL, POLICY, …)"),
                    );
                    self.hint(
                        if word.starts_with("permit") || word.starts_with("forbid") {
                            "Cedar policies go between a `POLICY` line and an `END` line"
                        } else {
                            "a line that is not a directive must be a comment starting with `#`"
                        },
                    );
                }
            }
        }
    }

    /// Which syntax this file is in, in words, with the line that says so.
    fn syntax_words(&self) -> String {
        let what = match self.syntax {
            Syntax::Core => "the core (draft.4) syntax",
            Syntax::Dockerfile => "the Dockerfile-shaped syntax",
        };
        match self.evidence {
            Some((s, e)) => format!(
                "{what} (`{}` on line {})",
                &self.text[s..e],
                self.line_col(s).0
            ),
            None => what.to_owned(),
        }
    }

    fn directive(&mut self, d: &RawDirective) {
        let name = d.name.text.as_str();
        let nspan = self.tspan(&d.name);
        if let Some(b) = &d.block
            && b.close.is_none()
        {
            let msg = match (&b.kind, &b.delimiter) {
                (BlockKind::Heredoc, Some(delim)) => format!(
                    "the heredoc opened here is never closed: no line `{delim}` before the end of the file"
                ),
                _ => format!(
                    "the `{name}` block is never closed: no `END` line before the end of the file"
                ),
            };
            let hint = match &b.delimiter {
                Some(delim) => format!("end the text with a line holding only `{delim}`"),
                None => "end the block with a line holding only `END`".to_owned(),
            };
            self.error("agentrc-unterminated", nspan, msg);
            self.hint(hint);
        }
        let Some(entry) = self.entry(d) else {
            return;
        };
        let before = self.diags.iter().filter(|x| x.is_error()).count();
        let mut rec = Directive {
            directive: entry.name.to_owned(),
            profile: entry.profile.as_str().to_owned(),
            line: self.line_col(d.name.start).0,
            column: self.line_col(d.name.start).1,
            end_line: self.line_col(d.end.saturating_sub(1).max(d.name.start)).0,
            args: Vec::new(),
            flags: BTreeMap::new(),
            fields: BTreeMap::new(),
            block: d.block.as_ref().map(|b| Block {
                kind: match (b.kind, name) {
                    (BlockKind::Heredoc, _) => "heredoc",
                    (_, "POLICY") => "policy",
                    _ => "sop",
                }
                .to_owned(),
                line: self.line_col(b.offset).0,
                offset: b.offset,
                text: b.text.clone(),
            }),
            placement: entry.placement,
            support: entry.support.as_str().to_owned(),
        };
        for t in &d.args {
            if t.open_quote {
                let s = self.tspan(t);
                self.error(
                    "agentrc-quote",
                    s,
                    "a quote opened here is never closed on this line",
                );
                self.hint("close the quote, or continue the line with `\\`");
            }
        }
        let (flags, args) = split_flags(&d.args);
        rec.args = args.iter().map(|t| t.text.clone()).collect();
        for f in &flags {
            let (k, v) = f.text.split_once('=').unwrap_or((&f.text, ""));
            rec.flags.insert(k.to_owned(), v.to_owned());
        }
        if !flags.is_empty() && !matches!(entry.name, "COPY" | "ADD" | "HEALTHCHECK" | "RUN") {
            // Only those take flags; elsewhere a `--x` is an ordinary argument.
            rec.flags.clear();
            rec.args = d.args.iter().map(|t| t.text.clone()).collect();
            self.arguments(entry, d, &d.args.iter().collect::<Vec<_>>(), &mut rec);
        } else {
            self.flags(entry, &flags);
            self.arguments(entry, d, &args, &mut rec);
        }
        if entry.placement {
            let s = nspan;
            self.warn(
                "agentrc-placement",
                s,
                format!(
                    "`{}` is a placement directive: it ties the portable package to one runner",
                    entry.name
                ),
            );
            self.hint("move it to a Run Manifest; agentfile leaves it out of the digest and a run ignores it");
            self.grants
                .ignored
                .push(format!("{} (line {}): placement", entry.name, rec.line));
        } else if entry.support == Support::Validated
            && !matches!(
                entry.name,
                "FROM" | "CMD" | "HEALTHCHECK" | "LABEL" | "CAPABILITY"
            )
        {
            self.grants.ignored.push(format!(
                "{} (line {}): {}",
                entry.name, rec.line, entry.note
            ));
        }
        let after = self.diags.iter().filter(|x| x.is_error()).count();
        let _ = (before, after);
        self.directives.push(rec);
    }

    /// The table entry of a directive, or a diagnostic saying why there is
    /// none (or why it may not be used).
    fn entry(&mut self, d: &RawDirective) -> Option<&'static Entry> {
        let name = d.name.text.as_str();
        let nspan = self.tspan(&d.name);
        if let Some(e) = table::lookup(self.syntax, name) {
            if matches!(
                e.profile,
                Profile::Core | Profile::Agentrc | Profile::Dockerfile
            ) || self.extensions.contains(&e.profile)
            {
                return Some(e);
            }
            self.error(
                "agentrc-extension",
                nspan,
                format!(
                    "`{name}` belongs to the optional {} profile, which `--profile core` leaves out",
                    e.profile.title()
                ),
            );
            self.hint(format!(
                "add --extensions {} to accept it under the core profile, or drop --profile core (agentfile {} it)",
                e.profile.as_str(),
                match e.support {
                    Support::Enforced => "enforces",
                    Support::Used => "uses",
                    Support::Validated => "checks but does not act on",
                    Support::Parsed => "reads but does not act on",
                }
            ));
            return None;
        }
        let upper = name.to_ascii_uppercase();
        if upper != name && table::lookup(self.syntax, &upper).is_some() {
            self.error(
                "agentrc-unknown-directive",
                nspan,
                format!("unknown directive `{name}`: directives are case-sensitive"),
            );
            self.hint(format!("write `{upper}`"));
            return None;
        }
        let other = match self.syntax {
            Syntax::Core => Syntax::Dockerfile,
            Syntax::Dockerfile => Syntax::Core,
        };
        if table::lookup(other, &upper).is_some() {
            let words = self.syntax_words();
            self.error(
                "agentrc-other-syntax",
                nspan,
                format!(
                    "`{upper}` belongs to the other agentrc syntax; this file is written in {words}"
                ),
            );
            let hint = match (self.syntax, upper.as_str()) {
                (Syntax::Dockerfile, "AGENT") => "write `IDENTITY name=…` instead",
                (Syntax::Dockerfile, "TOOL") => {
                    "declare a tool with `COPY ./tools/NAME /mnt/tools/NAME` instead"
                }
                (Syntax::Dockerfile, "URL") => "write `POLICY network dns:HOST:443` instead",
                (Syntax::Core, "IDENTITY") => "write `AGENT name` instead",
                (Syntax::Core, "COPY" | "ADD") => "declare tools with `TOOL utcp:NAME` instead",
                _ => "write the whole file in one syntax",
            };
            self.hint(hint);
            return None;
        }
        self.error(
            "agentrc-unknown-directive",
            nspan,
            format!("unknown directive `{name}`"),
        );
        let known: Vec<&str> = table::names(self.syntax).collect();
        match agentfile_plan::diag::suggest(name, known.iter().copied()) {
            Some(s) => self.hint(format!("did you mean `{s}`?")),
            None => self.hint(format!("known directives: {}", dedup(known).join(" "))),
        }
        None
    }

    fn flags(&mut self, entry: &Entry, flags: &[&Token]) {
        let allowed: &[&str] = match entry.name {
            "COPY" => &[
                "--chmod",
                "--chown",
                "--from",
                "--link",
                "--parents",
                "--exclude",
            ],
            "ADD" => &[
                "--chmod",
                "--chown",
                "--link",
                "--exclude",
                "--checksum",
                "--keep-git-dir",
                "--remote",
                "--cached",
                "--runtime",
                "--fail-if-unavailable",
                "--warn-if-unavailable",
            ],
            "HEALTHCHECK" => &[
                "--interval",
                "--timeout",
                "--start-period",
                "--start-interval",
                "--retries",
            ],
            "RUN" => &["--mount", "--network", "--security"],
            _ => &[],
        };
        let mut seen = BTreeSet::new();
        for f in flags {
            let (k, v) = f.text.split_once('=').unwrap_or((&f.text, ""));
            let s = self.tspan(f);
            if !allowed.contains(&k) {
                self.error(
                    "agentrc-flag",
                    s,
                    format!("`{}` has no flag `{k}`", entry.name),
                );
                match agentfile_plan::diag::suggest(k, allowed.iter().copied()) {
                    Some(n) => self.hint(format!("did you mean `{n}`?")),
                    None => self.hint(format!("its flags: {}", allowed.join(" "))),
                }
                continue;
            }
            seen.insert(k);
            let bad = match k {
                "--chmod" => (v.is_empty() || !v.chars().all(|c| c.is_digit(8)) || v.len() > 4)
                    .then(|| "an octal mode such as 755".to_owned()),
                "--interval" | "--timeout" | "--start-period" | "--start-interval" => {
                    humantime::parse_duration(v)
                        .err()
                        .map(|_| "a duration such as 30s or 1m30s".to_owned())
                }
                "--retries" => v.parse::<u32>().err().map(|_| "a whole number".to_owned()),
                "--chown" | "--from" | "--checksum" | "--exclude" | "--mount" | "--network"
                | "--security" => v.is_empty().then(|| "a value after `=`".to_owned()),
                _ => (!v.is_empty()).then(|| "no value".to_owned()),
            };
            if let Some(want) = bad {
                self.error(
                    "agentrc-flag",
                    s,
                    format!(
                        "`{k}` takes {want}, not `{}`",
                        if v.is_empty() { "nothing" } else { v }
                    ),
                );
            }
        }
        if seen.contains("--cached") && seen.contains("--runtime") {
            let s = self.tspan(flags[0]);
            self.error(
                "agentrc-flag",
                s,
                "`--cached` and `--runtime` exclude each other: a resource is embedded at build time or fetched at start, not both",
            );
        }
        if seen.contains("--fail-if-unavailable") && seen.contains("--warn-if-unavailable") {
            let s = self.tspan(flags[0]);
            self.error(
                "agentrc-flag",
                s,
                "`--fail-if-unavailable` and `--warn-if-unavailable` exclude each other",
            );
        }
    }

    /// `want` arguments as `n..=m`; an error naming the usage otherwise.
    fn count(
        &mut self,
        d: &RawDirective,
        args: &[&Token],
        min: usize,
        max: usize,
        usage: &str,
    ) -> bool {
        if (min..=max).contains(&args.len()) {
            return true;
        }
        let span = match args.get(max) {
            Some(t) if args.len() > max => {
                let last = args.last().expect("more than max");
                self.span(t.start, last.end)
            }
            _ => self.tspan(&d.name),
        };
        let msg = if args.len() < min {
            format!("`{}` needs {}", d.name.text, plural_args(min, max))
        } else {
            format!(
                "`{}` takes {}, not {}",
                d.name.text,
                plural_args(min, max),
                args.len()
            )
        };
        self.error("agentrc-arguments", span, msg);
        self.hint(format!("write it as `{usage}`"));
        false
    }

    // Each arm checks the count first (which reports a problem) and then the
    // values; as match guards those checks would read as pure conditions.
    #[allow(clippy::collapsible_match)]
    fn arguments(&mut self, entry: &Entry, d: &RawDirective, args: &[&Token], rec: &mut Directive) {
        let name = entry.name;
        match (self.syntax, name) {
            (_, "FROM") => {
                let ok =
                    args.len() == 1 || (args.len() == 3 && args[1].text.eq_ignore_ascii_case("as"));
                if !ok {
                    self.count(d, args, 1, 1, "FROM REFERENCE [AS NAME]");
                    return;
                }
                self.from(args[0]);
            }
            (Syntax::Core, "AGENT") => {
                self.named = true;
                if self.count(d, args, 1, 1, "AGENT code-reviewer") {
                    self.identity_name(&args[0].text.clone(), self.tspan(args[0]));
                }
            }
            (_, "CMD" | "ENTRYPOINT" | "RUN" | "ONBUILD") => {
                if d.block.is_none() && args.is_empty() {
                    self.count(d, args, 1, usize::MAX, &format!("{name} COMMAND [ARG…]"));
                    return;
                }
                if args.first().is_some_and(|t| t.text.starts_with('[')) {
                    self.exec_form(name, args);
                }
            }
            (_, "SHELL") => {
                if self.count(d, args, 1, usize::MAX, "SHELL NAME")
                    && self.syntax == Syntax::Dockerfile
                {
                    self.exec_form(name, args);
                }
            }
            (Syntax::Core, "TOOL") => {
                if self.count(d, args, 1, 1, "TOOL utcp:file_read") {
                    self.tool(&args[0].text.clone(), self.tspan(args[0]));
                }
            }
            (Syntax::Core, "MOUNT") => self.mount(d, args),
            (Syntax::Core, "CRED") => self.cred(d, args),
            (Syntax::Core, "URL") => {
                if self.count(d, args, 1, 1, "URL https://api.github.com")
                    && let Some(host) = self.url(args[0])
                {
                    let s = self.tspan(args[0]);
                    self.host(host, s);
                }
            }
            (Syntax::Core, "POLICY") => self.core_policy(d, args),
            (Syntax::Dockerfile, "POLICY") => self.dockerfile_policy(d, args, rec),
            (Syntax::Core, "AUDIT") => {
                if self.count(d, args, 1, 1, "AUDIT basic")
                    && self.one_of(
                        args[0],
                        &["off", "basic", "all", "compliance"],
                        "audit level",
                    )
                {
                    self.audit = true;
                    self.grants.audit = Some(args[0].text.clone());
                }
            }
            (_, "SOP") => self.sop(d, args),
            (
                Syntax::Core,
                "TOOLSET" | "FUNCTION" | "SKILL" | "MCP" | "IMAGE" | "BACKEND" | "BROKER"
                | "PLUGIN" | "OPTIMIZER",
            ) => {
                self.count(d, args, 1, 1, &format!("{name} REFERENCE"));
            }
            (Syntax::Core, "SERVER") => {
                if self.count(d, args, 2, 2, "SERVER github https://api.github.com") {
                    self.url(args[1]);
                }
            }
            (Syntax::Core, "MEMORY") => {
                self.count(d, args, 2, usize::MAX, "MEMORY NAME SCHEMA [key:value…]");
            }
            (Syntax::Core, "ALLOW" | "DENY") => self.shorthand(d, args),
            (Syntax::Core, "RATELIMIT") => {
                if self.count(d, args, 2, 2, "RATELIMIT file_write 20/hour") {
                    self.rate(args[1]);
                }
            }
            (Syntax::Core, "TIMEOUT") => self.timeout(d, args),
            (Syntax::Core, "LIMIT") => {
                self.count(d, args, 2, 2, "LIMIT tool_calls 100");
            }
            (Syntax::Core, "ISOLATION") => {
                if self.count(d, args, 1, 1, "ISOLATION container") {
                    self.one_of(
                        args[0],
                        &["local", "process", "container", "gvisor", "microvm", "ssh"],
                        "isolation",
                    );
                }
            }
            (Syntax::Core, "SLICE") | (Syntax::Dockerfile, "LABEL" | "IDENTITY") => {
                if name == "IDENTITY" && args.iter().any(|t| t.text.starts_with("name")) {
                    self.named = true;
                }
                self.key_values(d, args, rec);
            }
            (Syntax::Core, "BIND") => self.bind(d, args),
            (Syntax::Core, "TRACE") => {
                if self.count(d, args, 1, 1, "TRACE on")
                    && !matches!(args[0].text.as_str(), "on" | "off")
                {
                    self.url(args[0]);
                }
            }
            (_, "HEALTHCHECK") => self.healthcheck(d, args),
            (Syntax::Dockerfile, "CAPABILITY") => self.capability(d, args),
            (Syntax::Dockerfile, "COPY" | "ADD") => self.copy_directive(d, name, args, rec),
            (Syntax::Dockerfile, "ENV") => self.env(d, args, rec),
            (Syntax::Dockerfile, "ARG" | "EXPOSE" | "VOLUME") => {
                self.count(d, args, 1, usize::MAX, &format!("{name} VALUE"));
            }
            (Syntax::Dockerfile, "WORKDIR" | "USER" | "STOPSIGNAL") => {
                self.count(d, args, 1, 1, &format!("{name} VALUE"));
            }
            _ => {}
        }
    }

    /// TIMEOUT: a whole number of seconds above 0.
    fn timeout(&mut self, d: &RawDirective, args: &[&Token]) {
        if self.count(d, args, 1, 1, "TIMEOUT 30") {
            match args[0].text.parse::<u64>() {
                Ok(n) if n > 0 => self.timeout_s = Some(n),
                _ => {
                    let s = self.tspan(args[0]);
                    self.error(
                        "agentrc-value",
                        s,
                        format!(
                            "TIMEOUT is a whole number of seconds above 0, not `{}`",
                            args[0].text
                        ),
                    );
                }
            }
        }
    }

    /// BIND: a source, a target and (else a warning) a mode.
    fn bind(&mut self, d: &RawDirective, args: &[&Token]) {
        if self.count(d, args, 2, 3, "BIND ./repo /workspace copy") {
            if let Some(m) = args.get(2) {
                self.one_of(m, &["copy", "direct", "ro", "rw"], "bind mode");
            } else {
                let s = self.tspan(&d.name);
                self.warn(
                    "agentrc-bind-mode",
                    s,
                    "BIND has no mode: whether the agent may change the files is left to the runner",
                );
                self.hint("add the mode: `copy`, `direct`, `ro` or `rw`");
            }
        }
    }

    /// HEALTHCHECK: `CMD` and a command, or `NONE`.
    fn healthcheck(&mut self, d: &RawDirective, args: &[&Token]) {
        let ok = args
            .first()
            .is_some_and(|t| t.text == "NONE" && args.len() == 1)
            || (args.first().is_some_and(|t| t.text == "CMD") && args.len() > 1);
        if !ok {
            let s = self.tspan(&d.name);
            self.error(
                "agentrc-arguments",
                s,
                "HEALTHCHECK needs `CMD` and a command after its flags, or `NONE`",
            );
            self.hint("write it as `HEALTHCHECK --interval=30s CMD /mnt/tools/ping`");
        }
    }

    /// CAPABILITY: one word.
    fn capability(&mut self, d: &RawDirective, args: &[&Token]) {
        if self.count(d, args, 1, 1, "CAPABILITY text") {
            let v = &args[0].text;
            if !v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                let s = self.tspan(args[0]);
                self.error(
                    "agentrc-value",
                    s,
                    format!("a capability is one word such as `text`, `streaming` or `function-calling`, not `{v}`"),
                );
            }
        }
    }

    /// COPY and ADD: how far a run uses the copy depends on where it lands.
    fn copy_directive(
        &mut self,
        d: &RawDirective,
        name: &str,
        args: &[&Token],
        rec: &mut Directive,
    ) {
        let dest = args.last().map(|t| t.text.as_str()).unwrap_or("");
        let cleaned = clean_mnt(dest).unwrap_or_default();
        rec.support = if cleaned.starts_with("/mnt/tools/") {
            Support::Enforced
        } else if cleaned == "/mnt/SOP" {
            Support::Used
        } else {
            Support::Validated
        }
        .as_str()
        .to_owned();
        self.copy(d, name, args);
    }

    /// ENV: `KEY VALUE` (checked for secrets), or `KEY=VALUE` pairs.
    fn env(&mut self, d: &RawDirective, args: &[&Token], rec: &mut Directive) {
        if args.len() == 2 && !args[0].text.contains('=') {
            rec.fields
                .insert(args[0].text.clone(), unquote(&args[1].text));
            self.secret_in_env(
                &args[0].text.clone(),
                &args[1].text.clone(),
                self.tspan(args[1]),
            );
        } else {
            self.key_values(d, args, rec);
        }
    }

    /// A Dockerfile-syntax POLICY request: what a run does with it depends on its key.
    fn dockerfile_policy(&mut self, d: &RawDirective, args: &[&Token], rec: &mut Directive) {
        // What a run does with a request depends on its key.
        rec.support = match args.first().map(|t| t.text.as_str()) {
            Some("network") => Support::Enforced,
            Some("agent.timeout") => Support::Used,
            _ => Support::Validated,
        }
        .as_str()
        .to_owned();
        self.request(d, args);
    }

    fn from(&mut self, t: &Token) {
        self.resolve_base(t);
        let r = t.text.as_str();
        if r == "scratch" || r.contains("@sha256:") {
            return;
        }
        let last = r.rsplit('/').next().unwrap_or(r);
        let s = self.tspan(t);
        match last.split_once(':') {
            Some((_, "latest")) => {
                self.warn(
                    "agentrc-mutable-from",
                    s,
                    format!("FROM `{r}` uses the mutable tag `latest`: the base can change under the same file"),
                );
                self.hint("pin a version (`name:1.4`) or a digest (`name@sha256:…`)");
            }
            None => {
                self.warn(
                    "agentrc-mutable-from",
                    s,
                    format!("FROM `{r}` has no tag, which means `latest`: the base can change under the same file"),
                );
                self.hint("pin a version (`name:1.4`) or a digest (`name@sha256:…`)");
            }
            Some(_) => {}
        }
    }

    fn exec_form(&mut self, name: &str, args: &[&Token]) {
        let (Some(first), Some(last)) = (args.first(), args.last()) else {
            return;
        };
        let joined: Vec<&str> = args.iter().map(|t| t.text.as_str()).collect();
        if let Err(e) = serde_json::from_str::<Vec<String>>(&joined.join(" ")) {
            let s = self.span(first.start, last.end);
            self.error(
                "agentrc-arguments",
                s,
                format!("{name}'s exec form must be a JSON array of strings: {e}"),
            );
            self.hint(format!(
                "write `{name} [\"python\", \"agent.py\"]`, or the command without brackets"
            ));
        }
    }

    fn identity_name(&mut self, name: &str, span: Span) {
        if let Some((_, first)) = &self.agent {
            let first = *first;
            self.error(
                "agentrc-duplicate",
                span,
                format!("the agent is named twice (`{name}` here)"),
            )
            .note(first, "first named here");
            self.hint("an Agentfile declares one agent: keep one name");
            return;
        }
        let dns = !name.is_empty()
            && name.len() <= 63
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        if !dns {
            self.warn(
                "agentrc-agent-name",
                span,
                format!("`{name}` is not a lowercase DNS label"),
            );
            self.hint("use lowercase letters, digits and `-` (at most 63), e.g. `code-reviewer`");
        }
        self.agent = Some((name.to_owned(), span));
    }

    fn tool(&mut self, declared: &str, span: Span) {
        let (ns, rest) = match declared.split_once(':') {
            Some((ns, rest)) => (Some(ns), rest),
            None => (None, declared),
        };
        let (name, tool) = match ns {
            Some("mcp") => {
                // `mcp:github` is every tool of the server, named by it.
                let (server, t) = rest.split_once('.').unwrap_or((rest, "*"));
                let ok = !server.is_empty() && !t.is_empty();
                (
                    if t == "*" { server } else { t }.to_owned(),
                    ok.then(|| format!("mcp:{server}:{t}")),
                )
            }
            Some(ns) if !table::TOOL_NAMESPACES.contains(&ns) => (rest.to_owned(), None),
            _ => (
                rest.to_owned(),
                table::builtin_tool(rest).map(str::to_owned),
            ),
        };
        if self.grants.tools.iter().any(|t| t.declared == declared) {
            return;
        }
        if tool.is_none() {
            self.warn(
                "agentrc-unknown-tool",
                span,
                format!("agentfile has no tool `{declared}`: a run refuses to start while it is declared"),
            );
            self.hint(format!(
                "agentfile's tools (namespace utcp:): {}; MCP tools: mcp:SERVER.TOOL",
                dedup(table::TOOL_NAMES.iter().map(|(n, _)| *n).collect()).join(", ")
            ));
        }
        if tool.as_deref().is_some_and(|t| {
            agentfile_plan::tool::Tool::from_name(t).is_some_and(|t| t.is_path_tool())
        }) {
            self.file_tools.push((declared.to_owned(), span));
        }
        self.tool_spans.push((name.clone(), span));
        let (line, _) = self.line_col(span.start as usize);
        self.grants.tools.push(DeclaredTool {
            declared: declared.to_owned(),
            name,
            tool,
            line,
        });
    }

    fn mount(&mut self, d: &RawDirective, args: &[&Token]) {
        if let [one] = args
            && one.text.contains(':')
        {
            let s = self.tspan(one);
            self.error(
                "agentrc-mount",
                s,
                format!("MOUNT takes a path and a mode, not `{}`", one.text),
            );
            self.hint("write the path the agent sees and its mode: `MOUNT /workspace/src ro` (a host-to-agent mapping is BIND's job)");
            return;
        }
        if !self.count(d, args, 2, 2, "MOUNT /workspace rw") {
            return;
        }
        if !self.one_of(args[1], &["ro", "rw"], "mount mode") {
            return;
        }
        let path = args[0].text.clone();
        let s = self.tspan(args[0]);
        if path.split('/').any(|p| p == "..") {
            self.error(
                "agentrc-mount",
                s,
                format!("MOUNT `{path}` climbs out with `..`"),
            );
            self.hint("name the folder itself");
            return;
        }
        let base = if path == "/workspace" || path == "/workspace/" {
            "$WORKSPACE".to_owned()
        } else if let Some(rest) = path.strip_prefix("/workspace/") {
            format!("$WORKSPACE/{}", rest.trim_end_matches('/'))
        } else if path.starts_with('/') || path.starts_with("~/") || path == "~" {
            path.trim_end_matches('/').to_owned()
        } else {
            let rel = path.trim_start_matches("./").trim_end_matches('/');
            if rel.is_empty() || rel == "." {
                "$WORKSPACE".to_owned()
            } else {
                format!("$WORKSPACE/{rel}")
            }
        };
        let pattern = if base == "/" {
            "/**".to_owned()
        } else {
            format!("{base}/**")
        };
        self.grants.mounts.push(Mount {
            path,
            pattern,
            write: args[1].text == "rw",
        });
        self.mount_spans.push(s);
    }

    fn cred(&mut self, d: &RawDirective, args: &[&Token]) {
        if !self.count(d, args, 2, 4, "CRED github_token env:GITHUB_TOKEN") {
            return;
        }
        let last = *args.last().expect("two or more");
        let source = last.text.as_str();
        let s = self.tspan(last);
        let scheme_ok = if let Some(var) = source.strip_prefix("env:") {
            if var.contains('=') {
                self.plaintext(s, "CRED");
                return;
            }
            let ok = !var.is_empty()
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !var.starts_with(|c: char| c.is_ascii_digit());
            if !ok {
                self.error(
                    "agentrc-cred",
                    s,
                    format!("`{var}` is not an environment variable name"),
                );
                self.hint("write `env:NAME` with letters, digits and `_`");
                return;
            }
            true
        } else {
            source.starts_with("vault://") || source.starts_with("keyring:")
        };
        if !scheme_ok {
            if looks_secret(source) {
                self.plaintext(s, "CRED");
            } else {
                self.error(
                    "agentrc-cred",
                    s,
                    format!("`{source}` is not a credential reference"),
                );
                self.hint("write `env:VAR`, `vault://PATH#KEY` or `keyring:KEY`: a package names where a secret is, never the secret");
            }
            return;
        }
        let (name, url) = match args.len() {
            2 => (args[0].text.clone(), None),
            3 => (args[0].text.clone(), Some(args[0].text.clone())),
            _ => (args[0].text.clone(), Some(args[1].text.clone())),
        };
        if let Some(u) = &url {
            let t = if args.len() == 3 { args[0] } else { args[1] };
            if url::Url::parse(u).is_err() {
                let s = self.tspan(t);
                self.error("agentrc-cred", s, format!("`{u}` is not a URL"));
                self.hint("write `CRED NAME https://api.example.com bearer env:VAR`");
                return;
            }
        }
        if let Some(prev) = self.grants.credentials.iter().find(|c| c.name == name) {
            let _ = prev;
            let s = self.tspan(args[0]);
            self.error(
                "agentrc-duplicate",
                s,
                format!("credential `{name}` is declared twice"),
            );
            return;
        }
        self.grants.credentials.push(Credential {
            name,
            source: source.to_owned(),
            url,
        });
        let s = self.tspan(args[0]);
        self.cred_spans.push(s);
    }

    fn plaintext(&mut self, span: Span, what: &str) {
        self.warn(
            "agentrc-plaintext-cred",
            span,
            format!("{what} holds what looks like a secret value in the file"),
        );
        self.hint("reference the secret instead (`env:VAR`, `vault://PATH#KEY`, `keyring:KEY`) and rotate the one written here");
    }

    fn secret_in_env(&mut self, key: &str, value: &str, span: Span) {
        let k = key.to_ascii_uppercase();
        let named = [
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "API_KEY",
            "APIKEY",
            "PRIVATE_KEY",
        ]
        .iter()
        .any(|w| k.contains(w));
        let v = unquote(value);
        if (named && !v.is_empty() && !v.starts_with('$')) || looks_secret(&v) {
            self.plaintext(span, &format!("ENV {key}"));
        }
    }

    /// A host web_fetch may reach (URL, `POLICY network`), once.
    fn host(&mut self, host: String, span: Span) {
        if !self.grants.hosts.contains(&host) {
            self.host_spans.push((host.clone(), span));
            self.grants.hosts.push(host);
        }
    }

    /// The host of a URL argument, or an error.
    fn url(&mut self, t: &Token) -> Option<String> {
        let s = self.tspan(t);
        match url::Url::parse(&t.text) {
            Ok(u) => match u.host_str() {
                Some(h) => Some(h.trim_matches(|c| c == '[' || c == ']').to_owned()),
                None => {
                    self.error("agentrc-url", s, format!("`{}` names no host", t.text));
                    self.hint("write a URL such as `https://api.github.com`");
                    None
                }
            },
            Err(e) => {
                self.error("agentrc-url", s, format!("`{}` is not a URL: {e}", t.text));
                self.hint("write a URL such as `https://api.github.com`");
                None
            }
        }
    }

    fn one_of(&mut self, t: &Token, allowed: &[&str], what: &str) -> bool {
        if allowed.contains(&t.text.as_str()) {
            return true;
        }
        let s = self.tspan(t);
        self.error(
            "agentrc-value",
            s,
            format!("`{}` is not a valid {what}", t.text),
        );
        match agentfile_plan::diag::suggest(&t.text, allowed.iter().copied()) {
            Some(n) => self.hint(format!(
                "did you mean `{n}`? (one of: {})",
                allowed.join(", ")
            )),
            None => self.hint(format!("one of: {}", allowed.join(", "))),
        }
        false
    }

    fn rate(&mut self, t: &Token) {
        let ok = t.text.split_once('/').is_some_and(|(n, unit)| {
            n.parse::<u32>().is_ok_and(|n| n > 0)
                && matches!(
                    unit,
                    "s" | "sec" | "second" | "m" | "min" | "minute" | "h" | "hour" | "d" | "day"
                )
        });
        if !ok {
            let s = self.tspan(t);
            self.error("agentrc-value", s, format!("`{}` is not a rate", t.text));
            self.hint("write a count per unit: `20/hour`, `5/min`, `1/s`");
        }
    }

    fn key_values(&mut self, d: &RawDirective, args: &[&Token], rec: &mut Directive) {
        let name = d.name.text.as_str();
        if args.is_empty() {
            self.count(
                d,
                args,
                1,
                usize::MAX,
                &format!("{name} key=value [key=value…]"),
            );
            return;
        }
        // `LABEL key value`: Dockerfile's legacy form.
        if name == "LABEL" && args.len() == 2 && !args[0].text.contains('=') {
            rec.fields
                .insert(args[0].text.clone(), unquote(&args[1].text));
            self.label_secret(
                &args[0].text.clone(),
                &args[1].text.clone(),
                self.tspan(args[1]),
            );
            return;
        }
        for t in args {
            let s = self.tspan(t);
            let Some((k, v)) = t.text.split_once('=') else {
                self.error(
                    "agentrc-identity",
                    s,
                    format!("`{}` is not key=value", t.text),
                );
                self.hint(format!(
                    "write `{name} {}=VALUE` (quote a value with spaces: `description=\"a b\"`)",
                    t.text
                ));
                continue;
            };
            let key_ok = !k.is_empty()
                && k.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'));
            if !key_ok {
                self.error(
                    "agentrc-identity",
                    s,
                    format!("`{k}` is not a key: keys are letters, digits, `_`, `-` and `.`"),
                );
                continue;
            }
            if v.is_empty() && name == "IDENTITY" {
                self.error("agentrc-identity", s, format!("`{k}=` has no value"));
                self.hint(format!("write `{k}=VALUE`, or leave the key out"));
                continue;
            }
            let value = unquote(v);
            match name {
                "IDENTITY" => {
                    if k == "name" {
                        self.identity_name(&value, s);
                    }
                    self.identity.insert(k.to_owned(), value.clone());
                }
                "LABEL" => self.label_secret(k, v, s),
                "ENV" => self.secret_in_env(k, v, s),
                _ => {}
            }
            rec.fields.insert(k.to_owned(), value);
        }
    }

    fn label_secret(&mut self, key: &str, value: &str, span: Span) {
        if key.starts_with("org.agentrc.secret.") || key.starts_with("ai.agentrc.secret.") {
            let v = unquote(value);
            if !(v.starts_with("env:") || v.starts_with("vault://") || v.starts_with("keyring:")) {
                self.plaintext(span, &format!("LABEL {key}"));
            }
        }
    }

    fn core_policy(&mut self, d: &RawDirective, args: &[&Token]) {
        if !args.is_empty() || d.block.is_none() {
            let s = self.tspan(&d.name);
            self.error(
                "agentrc-arguments",
                s,
                "in the core syntax POLICY opens a block: Cedar policies on the lines below, then `END`",
            );
            self.hint(
                "one-line `POLICY key value` requests belong to the Dockerfile-shaped syntax",
            );
            return;
        }
        let Some(b) = &d.block else { return };
        if b.close.is_none() {
            return;
        }
        if b.text.trim().is_empty() {
            let s = self.tspan(&d.name);
            self.warn("agentrc-empty-block", s, "the POLICY block is empty");
            self.hint("write Cedar policies between POLICY and END, or remove the block");
            return;
        }
        let (line, _) = self.line_col(b.offset);
        self.cedar_blocks.push(Block {
            kind: "policy".to_owned(),
            line,
            offset: b.offset,
            text: b.text.clone(),
        });
    }

    /// `ALLOW invoke utcp:file_read` / `DENY write /workspace/secret/*`,
    /// lowered into Cedar.
    fn shorthand(&mut self, d: &RawDirective, args: &[&Token]) {
        let name = d.name.text.as_str();
        if !self.count(d, args, 2, 2, &format!("{name} invoke utcp:file_read")) {
            return;
        }
        if !self.one_of(
            args[0],
            &["invoke", "read", "write", "connect"],
            "shorthand verb",
        ) {
            return;
        }
        let target = args[1].text.replace(['"', '\\'], "");
        let effect = if name == "ALLOW" { "permit" } else { "forbid" };
        let body = match args[0].text.as_str() {
            "invoke" => {
                let tool = target.split_once(':').map_or(target.as_str(), |(_, t)| t);
                format!(
                    "{effect}(principal, action == AgentRC::Action::\"tool.invoke\", resource == AgentRC::Tool::\"{tool}\");"
                )
            }
            "read" | "write" => format!(
                "{effect}(principal, action == AgentRC::Action::\"filesystem.{}\", resource) when {{ context.path like \"{target}\" }};",
                args[0].text
            ),
            _ => format!(
                "{effect}(principal, action == AgentRC::Action::\"network.connect\", resource) when {{ context.host like \"{target}\" }};"
            ),
        };
        let (line, _) = self.line_col(d.name.start);
        self.cedar_blocks.push(Block {
            kind: "shorthand".to_owned(),
            line,
            offset: d.name.start,
            text: format!("@id(\"{name} on line {line}\")\n{body}\n"),
        });
    }

    /// `POLICY key value` (Dockerfile-shaped syntax).
    fn request(&mut self, d: &RawDirective, args: &[&Token]) {
        if d.block.is_some() {
            let s = self.tspan(&d.name);
            self.error(
                "agentrc-policy-key",
                s,
                "in the Dockerfile-shaped syntax POLICY is one request per line; Cedar blocks belong to the core syntax",
            );
            self.hint("write requests such as `POLICY model.name claude-sonnet-4` or `POLICY network dns:api.github.com:443`");
            return;
        }
        if !self.count(d, args, 2, usize::MAX, "POLICY model.name claude-sonnet-4") {
            return;
        }
        let key = args[0].text.as_str();
        let s = self.tspan(args[0]);
        let ns = key.split('.').next().unwrap_or("");
        let namespaces = ["agent", "substrate", "model", "network"];
        let shape_ok = key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
            && !key.ends_with('.')
            && !key.contains("..");
        if !namespaces.contains(&ns)
            || (ns != "network" && !key.contains('.'))
            || !shape_ok
            || (ns == "network" && key != "network")
        {
            self.error(
                "agentrc-policy-key",
                s,
                format!("`{key}` is not a POLICY request key"),
            );
            let near = agentfile_plan::diag::suggest(ns, namespaces.iter().copied());
            match near {
                Some(n) if n != ns => self.hint(format!(
                    "did you mean `{n}.…`? keys are agent.*, substrate.*, model.* or `network`"
                )),
                _ => self.hint(
                    "keys are agent.*, substrate.*, model.* (e.g. `model.name`) or `network`",
                ),
            }
            return;
        }
        if key == "network" {
            for t in &args[1..] {
                let v = t.text.as_str();
                let s = self.tspan(t);
                let Some(rest) = v.strip_prefix("dns:") else {
                    self.error("agentrc-url", s, format!("`{v}` is not a network request"));
                    self.hint(
                        "write `POLICY network dns:HOST:PORT`, e.g. `dns:api.github.com:443`",
                    );
                    continue;
                };
                let (host, port) = match rest.rsplit_once(':') {
                    Some((h, p)) => (h, Some(p)),
                    None => (rest, None),
                };
                let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
                let host_ok = !host.is_empty()
                    && host
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '*'));
                if !port_ok || !host_ok {
                    self.error("agentrc-url", s, format!("`{v}` is not `dns:HOST[:PORT]`"));
                    self.hint("write `POLICY network dns:api.github.com:443`");
                    continue;
                }
                self.host(host.to_owned(), s);
            }
        } else if key == "agent.timeout" {
            let v = args[1].text.as_str();
            match humantime::parse_duration(v) {
                Ok(t) if t.as_secs() > 0 => self.timeout_s = Some(t.as_secs()),
                _ => {
                    let s = self.tspan(args[1]);
                    self.error("agentrc-value", s, format!("`{v}` is not a duration"));
                    self.hint("write a duration such as `5m` or `90s`");
                }
            }
        } else {
            let (line, _) = self.line_col(d.name.start);
            self.grants.ignored.push(format!(
                "POLICY {key} (line {line}): a request agentfile shows but does not act on"
            ));
        }
    }

    fn sop(&mut self, d: &RawDirective, args: &[&Token]) {
        let s = self.tspan(&d.name);
        let text = match &d.block {
            Some(b) => dedent(&b.text),
            None => match (args.first(), args.last()) {
                (Some(f), Some(l)) => {
                    let words: Vec<&str> = args.iter().map(|t| t.text.as_str()).collect();
                    let _ = (f, l);
                    words.join(" ")
                }
                _ => String::new(),
            },
        };
        self.set_sop(s, text);
    }

    fn set_sop(&mut self, s: Span, text: String) {
        if let Some(first) = self.sop {
            self.error(
                "agentrc-duplicate",
                s,
                "a second SOP: an agent has one system prompt",
            )
            .note(first, "the first SOP");
            self.hint("merge the two into one SOP");
            return;
        }
        if text.trim().is_empty() {
            self.error("agentrc-arguments", s, "the SOP is empty");
            self.hint("write the agent's instructions after SOP, or remove it");
            return;
        }
        self.sop = Some(s);
        self.grants.sop = Some(text.trim().to_owned());
    }

    fn copy(&mut self, d: &RawDirective, name: &str, args: &[&Token]) {
        let min = if d.block.is_some() { 1 } else { 2 };
        if !self.count(
            d,
            args,
            min,
            usize::MAX,
            &format!("{name} ./tools/file_read /mnt/tools/file_read"),
        ) {
            return;
        }
        let dest_t = *args.last().expect("at least one");
        let dest = dest_t.text.as_str();
        let s = self.tspan(dest_t);
        if !dest.starts_with("/mnt") {
            return;
        }
        let Some(clean) = clean_mnt(dest) else {
            self.error(
                "agentrc-arguments",
                s,
                format!("`{dest}` leaves /mnt once `..` is resolved"),
            );
            self.hint("name the destination under /mnt/tools/, /mnt/skills/, /mnt/mcp/ or /mnt/SOP without `..`");
            return;
        };
        let remote = d.args.iter().any(|t| t.text == "--remote");
        if clean == "/mnt/SOP" {
            if remote {
                self.warn(
                    "agentrc-remote",
                    s,
                    "the SOP is at a remote address, which agentfile does not fetch: the agent runs without it",
                );
                self.hint("COPY the SOP from a local file, or write it with `SOP <<EOF`");
                return;
            }
            if let Some(b) = &d.block {
                let text = b.text.clone();
                self.set_sop(s, text);
                return;
            }
            let src_t = args[0];
            let src = self.dir.join(&src_t.text);
            let ss = self.tspan(src_t);
            match std::fs::metadata(&src) {
                Ok(m) if m.is_file() && m.len() <= MAX_SOP_FILE => {
                    match std::fs::read_to_string(&src) {
                        Ok(t) => self.set_sop(ss, t),
                        Err(e) => {
                            self.error(
                                "agentrc-sop-file",
                                ss,
                                format!("cannot read the SOP file `{}`: {e}", src_t.text),
                            );
                        }
                    }
                }
                Ok(m) if m.is_file() => {
                    self.error(
                        "agentrc-sop-file",
                        ss,
                        format!(
                            "the SOP file `{}` is {} bytes; the limit is {MAX_SOP_FILE}",
                            src_t.text,
                            m.len()
                        ),
                    );
                }
                _ => {
                    self.error(
                        "agentrc-sop-file",
                        ss,
                        format!(
                            "the SOP file `{}` does not exist (looked beside the Agentfile)",
                            src_t.text
                        ),
                    );
                    self.hint("paths are relative to the Agentfile's folder");
                }
            }
            return;
        }
        if let Some(tool) = clean.strip_prefix("/mnt/tools/") {
            let tool = tool.split('/').next().unwrap_or(tool).to_owned();
            let declared = format!("utcp:{tool}");
            self.tool(&declared, s);
            if remote {
                let _ = name;
            }
        }
    }

    fn finish(&mut self) {
        self.apply_base();
        let start = Span::new(self.file, 0, 0);
        if self.agent.is_none() && !self.named {
            let (code_msg, hint) = match self.syntax {
                Syntax::Core => (
                    "the file declares no AGENT",
                    "add `AGENT name` (a lowercase DNS label): a published package needs a stable identity",
                ),
                Syntax::Dockerfile => (
                    "the file declares no `IDENTITY name=`",
                    "add `IDENTITY name=…`: a published package needs a stable identity",
                ),
            };
            self.warn("agentrc-missing-agent", start, code_msg);
            self.hint(hint);
        }
        if self.syntax == Syntax::Core && !self.audit {
            self.warn(
                "agentrc-missing-audit",
                start,
                "the file declares no AUDIT level",
            );
            self.hint("add `AUDIT basic` (or all, compliance, off): reviewers read it as the package's audit requirement");
        }
        if self.syntax == Syntax::Core && self.grants.mounts.is_empty() {
            let tools = std::mem::take(&mut self.file_tools);
            for (declared, s) in &tools {
                self.warn(
                    "agentrc-unmounted",
                    *s,
                    format!("`{declared}` works on files, but no MOUNT gives the agent a path: every call is denied"),
                );
                self.hint("add `MOUNT /workspace ro` (or rw) for the folders it may use");
            }
        }
        if self.syntax != Syntax::Core {
            // No MOUNT in this syntax: the agent's files are the workspace
            // (still bounded by the operator's policy), or with a base, the
            // base's mounts.
            if !self.file_tools.is_empty() && self.base.is_none() {
                self.grants.mounts.push(Mount {
                    path: "/workspace".to_owned(),
                    pattern: "$WORKSPACE/**".to_owned(),
                    write: true,
                });
            }
            return;
        }
        if self.base.is_some() && self.cedar_blocks.is_empty() {
            // No policy of its own: the base's apply (`analyze`).
            return;
        }
        // Cedar: parse every block, then lint the tools no policy permits.
        let blocks: Vec<cedar::Block<'_>> =
            self.cedar_blocks.iter().map(cedar::Block::from).collect();
        match cedar::Policies::parse(&blocks) {
            Err(problems) => {
                for p in problems {
                    let s = Span::new(self.file, p.start, p.end.max(p.start));
                    self.diags.push(
                        Diagnostic::error("agentrc-cedar", s, p.message)
                            .with_hint("see https://docs.cedarpolicy.com/policies/syntax-policy.html; principals are AgentRC::Agent, actions AgentRC::Action, resources AgentRC::Tool"),
                    );
                }
            }
            Ok(policies) => {
                let agent = self
                    .agent
                    .as_ref()
                    .map(|(a, _)| a.clone())
                    .unwrap_or_default();
                for (name, s) in self.tool_spans.clone() {
                    if !policies.could_permit(&agent, "tool.invoke", "Tool", &name) {
                        self.warn(
                            "agentrc-unpermitted-tool",
                            s,
                            format!("no policy permits the tool `{name}`: under deny-by-default every call of it is refused"),
                        );
                        self.hint(format!(
                            "add a permit: `permit(principal == AgentRC::Agent::\"{agent}\", action == AgentRC::Action::\"tool.invoke\", resource == AgentRC::Tool::\"{name}\");`"
                        ));
                    }
                }
                self.grants.compiled = Compiled(Some(Arc::new(policies)));
            }
        }
    }
}

/// Leading `--flag` tokens apart from the rest.
fn split_flags(args: &[Token]) -> (Vec<&Token>, Vec<&Token>) {
    let n = args.iter().take_while(|t| t.text.starts_with("--")).count();
    (args[..n].iter().collect(), args[n..].iter().collect())
}

fn plural_args(min: usize, max: usize) -> String {
    let n = |k: usize| {
        if k == 1 {
            "1 argument".to_owned()
        } else {
            format!("{k} arguments")
        }
    };
    if max == usize::MAX {
        format!("at least {}", n(min))
    } else if min == max {
        n(min)
    } else {
        format!("{min} to {max} arguments")
    }
}

fn dedup(mut v: Vec<&str>) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    v.retain(|x| seen.insert(*x));
    v
}

fn unquote(v: &str) -> String {
    let t = v.trim();
    for q in ['"', '\''] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            return t[1..t.len() - 1].to_owned();
        }
    }
    t.to_owned()
}

/// `/mnt/…` with `.` and `..` resolved; `None` when it leaves /mnt.
fn clean_mnt(dest: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in dest.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    let clean = format!("/{}", parts.join("/"));
    (clean == "/mnt" || clean.starts_with("/mnt/")).then_some(clean)
}

/// Text that looks like a credential rather than a reference to one.
fn looks_secret(v: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "ghp_",
        "gho_",
        "ghs_",
        "ghu_",
        "github_pat_",
        "glpat-",
        "sk-",
        "sk_live_",
        "xoxb-",
        "xoxp-",
        "AKIA",
        "ASIA",
        "AIza",
        "-----BEGIN",
    ];
    if PREFIXES.iter().any(|p| v.starts_with(p)) {
        return true;
    }
    let long = v.len() >= 20 && !v.contains("://") && !v.contains('/');
    let digits = v.chars().filter(char::is_ascii_digit).count();
    let letters = v.chars().filter(char::is_ascii_alphabetic).count();
    long && digits >= 3 && letters >= 3 && !v.contains(' ')
}

/// Remove the indentation every non-blank line shares.
fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim_start()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The portable declaration's digest: every directive but the placement
/// ones, in order, each as its name, its arguments and flags (whitespace
/// collapsed) and its block with comments and layout removed. Comments, blank
/// lines, indentation, continuations and the `# syntax=` line do not count.
pub fn digest(directives: &[Directive]) -> String {
    let mut h = Sha256::new();
    for d in directives.iter().filter(|d| !d.placement) {
        h.update(d.directive.as_bytes());
        for (k, v) in &d.flags {
            h.update(b"\x1f");
            h.update(k.as_bytes());
            h.update(b"=");
            h.update(v.as_bytes());
        }
        for a in &d.args {
            h.update(b"\x1f");
            h.update(a.as_bytes());
        }
        if let Some(b) = &d.block {
            h.update(b"\x1e");
            let text = if b.kind == "policy" {
                strip_cedar_comments(&b.text)
            } else {
                b.text.clone()
            };
            for line in text.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                if !words.is_empty() {
                    h.update(words.join(" ").as_bytes());
                    h.update(b"\n");
                }
            }
        }
        h.update(b"\x1d");
    }
    format!("sha256:{:x}", h.finalize())
}

/// Cedar text without `//` comments (strings kept whole).
fn strip_cedar_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut escaped = false;
        let mut cut = line.len();
        let bytes = line.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if in_str {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_str = false;
                }
            } else if b == b'"' {
                in_str = true;
            } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
                cut = i;
                break;
            }
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

/// One agent, one goal: the SOP as its system prompt, the task as its goal.
fn plan(
    path: &Path,
    decl: Declaration,
    description: Option<String>,
    timeout_s: Option<u64>,
) -> Result<Plan, Vec<Diagnostic>> {
    let name = decl.agent.clone();
    let prompt = match &decl.grants.sop {
        Some(s) => s.clone(),
        None => {
            let mut p = format!("You are the agent `{name}`.");
            if let Some(d) = &description {
                p.push(' ');
                p.push_str(d);
            }
            p
        }
    };
    let mut plan = agentfile_plan::build::single_agent("agentrc", path, &name, &name, &prompt)?;
    plan.description = description;
    plan.version = decl
        .directives
        .iter()
        .find_map(|d| {
            d.fields
                .get("version")
                .filter(|_| d.directive == "IDENTITY")
        })
        .cloned();
    plan.timeout_ms = timeout_s.map(|s| s.saturating_mul(1000));
    plan.declared = Some(Box::new(decl));
    plan.fingerprint = plan.compute_fingerprint();
    Ok(plan)
}

/// `inspect --format text` for an agentrc plan.
pub fn summary(d: &Declaration) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "agentrc Agentfile ({} syntax)", d.syntax);
    let _ = writeln!(o, "  agent:     {}", d.agent);
    let _ = writeln!(o, "  digest:    {}", d.digest);
    if let Some(b) = &d.base {
        let _ = writeln!(o, "  base:      {} (agent {})", b.pinned(), b.agent);
    }
    if let Some(s) = &d.syntax_directive {
        let _ = writeln!(o, "  syntax:    {s}");
    }
    if !d.extensions.is_empty() {
        let _ = writeln!(o, "  profiles:  core + {}", d.extensions.join(", "));
    }
    let g = &d.grants;
    let _ = writeln!(
        o,
        "\nGrants (deny by default; the operator's policy still applies)"
    );
    if g.tools.is_empty() {
        let _ = writeln!(o, "  tools:     none");
    }
    for t in &g.tools {
        let _ = writeln!(
            o,
            "  tool:      {} -> {}",
            t.declared,
            t.tool
                .as_deref()
                .unwrap_or("(none: a run refuses to start)")
        );
    }
    if g.mounts.is_empty() {
        let _ = writeln!(o, "  files:     none");
    }
    for m in &g.mounts {
        let _ = writeln!(
            o,
            "  mount:     {} {} -> {}",
            m.path,
            if m.write { "rw" } else { "ro" },
            m.pattern
        );
    }
    let _ = writeln!(
        o,
        "  network:   {}",
        if g.hosts.is_empty() {
            "none".to_owned()
        } else {
            g.hosts.join(", ")
        }
    );
    for c in &g.credentials {
        let _ = writeln!(o, "  cred:      {} <- {}", c.name, c.source);
    }
    if let Some(a) = &g.audit {
        let _ = writeln!(o, "  audit:     {a}");
    }
    if let Some(blocks) = &g.cedar {
        let _ = writeln!(
            o,
            "  cedar:     {} block(s), evaluated for every tool call",
            blocks.len()
        );
    }
    if let Some(s) = &g.sop {
        let first = s.lines().next().unwrap_or("");
        let _ = writeln!(
            o,
            "  sop:       {}",
            agentfile_config::text::shorten(first, 72)
        );
    }
    for i in &g.ignored {
        let _ = writeln!(o, "  ignored:   {i}");
    }
    let _ = writeln!(o, "\nDirectives");
    for dir in &d.directives {
        let args = dir.args.join(" ");
        let _ = writeln!(
            o,
            "  {:>4}  {:<12} {:<13} {:<9} {}",
            dir.line,
            dir.directive,
            dir.profile,
            dir.support,
            agentfile_config::text::shorten(&args, 60)
        );
    }
    o
}
