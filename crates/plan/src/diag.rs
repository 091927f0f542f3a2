//! Diagnostics: what went wrong, where, and what to do about it.
//!
//! Every front end reports problems as [`Diagnostic`]s against a [`SourceMap`], and
//! this module renders them the way compilers do:
//!
//! ```text
//! Agentfile:7:38: error: undefined agent `creatve`
//!   |
//! 7 | GOAL analyze "Look at it" USING creatve
//!   |                                 ^^^^^^^
//!   = hint: did you mean `creative`?
//! ```
//!
//! or as JSON for machines ([`agentfile_wire::diagnostics`]). It deliberately knows
//! nothing about any workflow format: a span is a file, a line, a column and a
//! length, all counted the way an editor counts them (1-based lines, 1-based columns
//! in characters).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use agentfile_wire::diagnostics::Severity;

/// Every diagnostic class the front ends emit: code, severity, what it means.
/// Listed in the book (`docs/src/reference/diagnostics.md`, generated from
/// this table); the fixture tests check that each has a fixture.
pub const CODES: &[(&str, Severity, &str)] = &[
    (
        "syntax",
        Severity::Error,
        "a line does not follow the grammar",
    ),
    (
        "unknown-statement",
        Severity::Error,
        "a line starts with something that is not a statement keyword",
    ),
    (
        "unterminated-string",
        Severity::Error,
        "a string has no closing quote",
    ),
    (
        "missing-within",
        Severity::Error,
        "LOOP or CONVERGE without an iteration limit",
    ),
    (
        "invalid-within",
        Severity::Error,
        "an iteration limit that is not a positive whole number or an input",
    ),
    ("missing-name", Severity::Error, "the workflow has no NAME"),
    (
        "duplicate-name",
        Severity::Error,
        "a name (or NAME/SECURITY) defined twice, or one name for two things",
    ),
    ("no-steps", Severity::Error, "no RUN or LOOP step"),
    (
        "empty-prompt",
        Severity::Error,
        "a goal outcome or agent prompt that is empty",
    ),
    (
        "undefined-agent",
        Severity::Error,
        "USING names an agent that does not exist",
    ),
    (
        "undefined-goal",
        Severity::Error,
        "a step names a goal that does not exist",
    ),
    (
        "undefined-variable",
        Severity::Error,
        "`$name` refers to nothing",
    ),
    (
        "use-before-definition",
        Severity::Error,
        "something is used before the line or step that defines it",
    ),
    (
        "circular-reference",
        Severity::Error,
        "goals that read their own or each other's output outside a loop",
    ),
    (
        "unknown-profile",
        Severity::Error,
        "REQUIRES names a profile the config does not define",
    ),
    (
        "missing-file",
        Severity::Error,
        "a FROM path (or the workflow itself) does not exist",
    ),
    (
        "package-unavailable",
        Severity::Error,
        "an `oci://` workflow could not be pulled from its registry or does not match its digests",
    ),
    (
        "untrusted-package",
        Severity::Error,
        "`[packages] require_signature` is set and no trusted key signed the package",
    ),
    (
        "too-large",
        Severity::Error,
        "an Agentfile step with more than 64 goals, or steps with more than 20,000 goals together",
    ),
    (
        "unreadable-file",
        Severity::Error,
        "a file exists but cannot be read as a prompt",
    ),
    ("not-utf8", Severity::Error, "a file is not UTF-8 text"),
    (
        "ambiguous-dialect",
        Severity::Error,
        "directives of two Agentfile dialects in one file",
    ),
    (
        "unknown-escape",
        Severity::Warning,
        "a backslash escape other than \n \t \r \\ \" (kept as written)",
    ),
    (
        "duplicate-output",
        Severity::Warning,
        "two goals declare the same output field",
    ),
    (
        "repeated-goal",
        Severity::Warning,
        "a step lists the same goal twice (it runs twice)",
    ),
    ("unused-goal", Severity::Warning, "a goal no step runs"),
    ("unused-agent", Severity::Warning, "an agent no goal uses"),
    ("unused-input", Severity::Warning, "an input nothing reads"),
    (
        "unchecked-profile",
        Severity::Warning,
        "REQUIRES cannot be checked because no config was found",
    ),
    (
        "path-escapes-workflow",
        Severity::Warning,
        "a FROM path outside the workflow's folder",
    ),
    (
        "prompt-extension",
        Severity::Warning,
        "a prompt file that is not .md or .txt",
    ),
    (
        "unknown-security-mode",
        Severity::Warning,
        "SECURITY names an unknown mode",
    ),
    (
        "no-front-matter",
        Severity::Error,
        "a WORKFLOW.md that does not start with a `---` line",
    ),
    (
        "unclosed-front-matter",
        Severity::Error,
        "front matter with no closing `---` line",
    ),
    (
        "yaml-syntax",
        Severity::Error,
        "front matter that is not valid YAML",
    ),
    (
        "duplicate-key",
        Severity::Error,
        "a YAML mapping with one key twice",
    ),
    (
        "yaml-too-large",
        Severity::Error,
        "YAML whose aliases copy more than 16 MiB, or with more than 100,000 values (copies included)",
    ),
    (
        "too-deep",
        Severity::Error,
        "front matter nested deeper than the limit",
    ),
    (
        "schema",
        Severity::Error,
        "a field the published JSON Schema refuses",
    ),
    (
        "unknown-kind",
        Severity::Error,
        "a step kind that does not exist",
    ),
    (
        "forbidden-field",
        Severity::Error,
        "code, runner, secrets, network or an inline tool body in a workflow",
    ),
    (
        "unknown-compensation",
        Severity::Error,
        "a `compensation` that names no step of its list",
    ),
    (
        "unresolved-tool",
        Severity::Error,
        "a `tool:` id that is not built in, `agent`, an MCP tool or bound in the config",
    ),
    (
        "unresolved-workflow",
        Severity::Error,
        "a sub-workflow id with no valid `.workflows/<id>/WORKFLOW.md`",
    ),
    (
        "subworkflow-cycle",
        Severity::Error,
        "a workflow that includes itself through sub-workflows",
    ),
    (
        "boolean-condition",
        Severity::Warning,
        "a branch `when:` or loop `while:` written as a YAML boolean (read as that literal)",
    ),
    (
        "raw-interpolation",
        Severity::Warning,
        "a `${{ raw(…) }}` in a command: the value is spliced into it as shell code",
    ),
    (
        "unquotable-interpolation",
        Severity::Error,
        "a `${{ }}` in a command where no quoting keeps the value literal (heredoc, backquotes, `${…}`)",
    ),
    (
        "bare-reference",
        Severity::Error,
        "a `$steps.…`/`$input.…` inside longer text, which would reach the step literally",
    ),
    (
        "unread-input",
        Severity::Warning,
        "a step input the step's tool never reads",
    ),
    (
        "control-writable",
        Severity::Warning,
        "the policy's `[control] writable` lets runs rewrite files that decide what the next run may do",
    ),
    (
        "webhook-path-clash",
        Severity::Error,
        "two webhook triggers on one path among the files validated together; the second would never fire",
    ),
    (
        "unknown-trigger",
        Severity::Error,
        "a trigger `kind` other than schedule, webhook, event or manual",
    ),
    (
        "bad-schedule",
        Severity::Error,
        "a trigger's or routine's cron expression or time zone the scheduler refuses",
    ),
    (
        "trigger-policy",
        Severity::Error,
        "a `catch_up`, `overlap`, `max_runs_per_day` or `max_cost_usd_per_day` value not allowed",
    ),
    (
        "webhooks-disabled",
        Severity::Error,
        "a webhook trigger while agent.toml has no `[daemon] webhooks` listener",
    ),
    (
        "routine-ref",
        Severity::Error,
        "a routine `ref:`, which needs a routine registry agentfile cannot reach",
    ),
    (
        "routine",
        Severity::Error,
        "a routine entry that is not `inline:` or `file:`, or a ROUTINE.md that cannot be read or has no schedule",
    ),
    (
        "dangling-next",
        Severity::Error,
        "a route (`next`, branch, approval, `start`) to a step that does not exist",
    ),
    ("unreachable", Severity::Error, "a step nothing routes to"),
    (
        "cycle",
        Severity::Error,
        "steps that route in a circle outside a loop (and not through an approval)",
    ),
    (
        "duplicate-id",
        Severity::Error,
        "two steps of one list with the same id",
    ),
    (
        "bad-expression",
        Severity::Error,
        "an expression that does not parse",
    ),
    (
        "unknown-step-reference",
        Severity::Error,
        "`$steps.<id>` naming a step that has not finished by then",
    ),
    (
        "item-outside-map",
        Severity::Error,
        "`$item` or `$index` outside a map step",
    ),
    (
        "unknown-input",
        Severity::Error,
        "`$input.<name>` naming an undeclared input",
    ),
    (
        "unknown-variable",
        Severity::Error,
        "a bare `$name` that is no input, goal or goal field (`$env.HOME`, a typo)",
    ),
    (
        "file-contract",
        Severity::Error,
        "an `inputsFiles`/`outputsFiles` key that is no file name, or a path outside the workspace",
    ),
    (
        "unresolved-action",
        Severity::Error,
        "an `action:` ref with no `[actions.\"<ref>\"]` binding in the config",
    ),
    (
        "unknown-field",
        Severity::Error,
        "a workflow.yaml field its schema does not define (a warning under --lenient)",
    ),
    (
        "list-input",
        Severity::Error,
        "a workflow.yaml `input` written as a list (a warning under --lenient)",
    ),
    (
        "placeholder",
        Severity::Error,
        "`{placeholder}` text in a workflow.yaml path or input, which nothing fills",
    ),
    (
        "path-outside",
        Severity::Error,
        "a workflow.yaml path that is absolute or leaves the workflow's folder",
    ),
    (
        "unknown-variable",
        Severity::Error,
        "a step `input` of `$VAR` that is not the trigger's `input_var`",
    ),
    (
        "input-order",
        Severity::Error,
        "a step input that a later step produces",
    ),
    (
        "duplicate-produces",
        Severity::Error,
        "two steps that write the same artifact",
    ),
    (
        "protected-path",
        Severity::Error,
        "a step that would write the workflow's scripts or definition",
    ),
    (
        "missing-script",
        Severity::Error,
        "a shell step whose `script` names neither `bash` nor `pwsh`",
    ),
    (
        "ide-script",
        Severity::Error,
        "a shell step running a file from scripts/ide/, which agentfile never runs",
    ),
    (
        "unknown-field",
        Severity::Warning,
        "the same, tolerated by --lenient",
    ),
    (
        "list-input",
        Severity::Warning,
        "the same, tolerated by --lenient",
    ),
    (
        "placeholder",
        Severity::Warning,
        "the same, tolerated by --lenient (the text is used as written)",
    ),
    (
        "schema",
        Severity::Warning,
        "a workflow.yaml without `specVersion`, tolerated by --lenient",
    ),
    (
        "secret-input-var",
        Severity::Warning,
        "a trigger `input_var` named like a secret, never read from the environment",
    ),
    (
        "agent-metadata",
        Severity::Error,
        "an agent file's metadata field of the wrong shape (text, list, mapping, variable name)",
    ),
    (
        "metadata-conflict",
        Severity::Error,
        "an agent file gives one field in its metadata and by a heading, differently",
    ),
    (
        "duplicate-section",
        Severity::Error,
        "an agent file with two `## System`, `## Rules` or `## Tools` sections",
    ),
    (
        "agent-status",
        Severity::Error,
        "an agent `status` that is not active, deprecated or disabled",
    ),
    (
        "agent-disabled",
        Severity::Error,
        "an agent file with `status: disabled`, which does not run",
    ),
    (
        "agent-deprecated",
        Severity::Warning,
        "an agent file with `status: deprecated`",
    ),
    (
        "template-engine",
        Severity::Error,
        "a `templateEngine` other than `hbs` or `\"\"`",
    ),
    (
        "template",
        Severity::Error,
        "an agent's system message or rules that is not a valid Handlebars template",
    ),
    (
        "unknown-ability",
        Severity::Error,
        "an ability that is not fs, network, sh, sh:<command>, tool, mcp, browser or env",
    ),
    (
        "ability-overlap",
        Severity::Error,
        "an ability both allowed and denied",
    ),
    (
        "unknown-startup",
        Severity::Error,
        "`required.startup` naming no tool of `## Tools`",
    ),
    (
        "js-tools",
        Severity::Error,
        "`## Tools` JavaScript that does not compile or does not return `{ name: { fn, scheme } }`",
    ),
    (
        "command",
        Severity::Error,
        "an agent command without a name, description or body, misnamed, repeated or not found",
    ),
    (
        "command",
        Severity::Warning,
        "a command folder that is empty or holds more files than are read",
    ),
    (
        "remote-command",
        Severity::Warning,
        "commands at a URL, which are not fetched",
    ),
    (
        "agentrc-unknown-directive",
        Severity::Error,
        "an agentrc line that is not a known directive (case-sensitive), with a did-you-mean",
    ),
    (
        "agentrc-extension",
        Severity::Error,
        "under `--profile core`, a directive of an optional agentrc profile that `--extensions` does not name",
    ),
    (
        "agentrc-other-syntax",
        Severity::Error,
        "a directive of the other agentrc syntax (core vs Dockerfile-shaped) in the same file",
    ),
    (
        "agentrc-unterminated",
        Severity::Error,
        "a `POLICY`/`SOP` block without `END`, or a heredoc without its delimiter",
    ),
    (
        "agentrc-continuation",
        Severity::Error,
        "a `\\` continuation on the last line",
    ),
    (
        "agentrc-continuation",
        Severity::Warning,
        "a `\\` continuation onto a blank line",
    ),
    (
        "agentrc-arguments",
        Severity::Error,
        "a directive with the wrong number or shape of arguments",
    ),
    (
        "agentrc-too-large",
        Severity::Error,
        "an agentrc file with more directives or words than a file may hold",
    ),
    (
        "agentrc-quote",
        Severity::Error,
        "a quote opened in a directive's arguments and never closed",
    ),
    (
        "agentrc-identity",
        Severity::Error,
        "IDENTITY, LABEL, ENV or SLICE arguments that are not key=value",
    ),
    (
        "agentrc-duplicate",
        Severity::Error,
        "the agent named twice, a second SOP, or a credential declared twice",
    ),
    (
        "agentrc-mount",
        Severity::Error,
        "a MOUNT path that climbs out with `..`, or written as SRC:DEST:MODE",
    ),
    (
        "agentrc-cred",
        Severity::Error,
        "a CRED that is not `env:VAR`, `vault://PATH#KEY` or `keyring:KEY`",
    ),
    (
        "agentrc-url",
        Severity::Error,
        "a URL, SERVER or `POLICY network` value that is not a URL or `dns:HOST[:PORT]`",
    ),
    (
        "agentrc-value",
        Severity::Error,
        "a value outside a directive's set (AUDIT, MOUNT mode, ISOLATION, BIND mode, …) or not a number, rate or duration",
    ),
    (
        "agentrc-flag",
        Severity::Error,
        "an unknown or malformed `--flag` on COPY, ADD, HEALTHCHECK or RUN, or two that exclude each other",
    ),
    (
        "agentrc-policy-key",
        Severity::Error,
        "a one-line POLICY request whose key is not agent.*, substrate.*, model.* or network, or a Cedar block in the Dockerfile-shaped syntax",
    ),
    (
        "agentrc-cedar",
        Severity::Error,
        "a Cedar policy that does not parse, or names an entity or action outside AgentRC::",
    ),
    (
        "agentrc-sop-file",
        Severity::Error,
        "a `COPY … /mnt/SOP` whose file is missing, unreadable or too large",
    ),
    (
        "agentrc-from-unresolved",
        Severity::Error,
        "a FROM whose base package cannot be used: the resolver cannot find it, its Agentfile is invalid, or the bases form a cycle or nest too deep",
    ),
    (
        "agentrc-from-widens",
        Severity::Error,
        "a TOOL, MOUNT, URL (or POLICY network) or CRED that allows more than the base package FROM names",
    ),
    (
        "agentrc-empty-block",
        Severity::Warning,
        "an empty POLICY block",
    ),
    (
        "agentrc-agent-name",
        Severity::Warning,
        "an agent name that is not a lowercase DNS label",
    ),
    (
        "agentrc-unknown-tool",
        Severity::Warning,
        "a declared tool agentfile does not have (a run refuses to start)",
    ),
    (
        "agentrc-unmounted",
        Severity::Warning,
        "a file tool declared with no MOUNT to use",
    ),
    (
        "agentrc-remote",
        Severity::Warning,
        "an SOP at a remote address, which is not fetched",
    ),
    (
        "agentrc-missing-agent",
        Severity::Warning,
        "lint 1: no AGENT (or `IDENTITY name=`)",
    ),
    (
        "agentrc-mutable-from",
        Severity::Warning,
        "lint 2: FROM with a mutable tag such as `latest`, or no tag",
    ),
    (
        "agentrc-plaintext-cred",
        Severity::Warning,
        "lint 3: a CRED, secret LABEL or ENV holding plaintext-like material",
    ),
    (
        "agentrc-bind-mode",
        Severity::Warning,
        "lint 4: BIND without a mode",
    ),
    (
        "agentrc-unpermitted-tool",
        Severity::Warning,
        "lint 5: a TOOL no Cedar policy permits under deny-by-default",
    ),
    (
        "agentrc-missing-audit",
        Severity::Warning,
        "lint 6: no AUDIT",
    ),
    (
        "agentrc-placement",
        Severity::Warning,
        "lint 7: a placement directive inline (ISOLATION IMAGE SLICE BACKEND BIND BROKER PLUGIN)",
    ),
    (
        "test-file",
        Severity::Error,
        "a test file (`*.test.yaml`) that is empty or not a mapping, a field of the wrong type or missing (`workflow`, `cases`, a case's `name`), or a matcher with no kind or two",
    ),
    (
        "unknown-field",
        Severity::Error,
        "a key a test file does not define, with a did-you-mean",
    ),
    (
        "duplicate-name",
        Severity::Error,
        "two cases of one test file with the same name",
    ),
    (
        "missing-file",
        Severity::Error,
        "a test file's `workflow` or `cassette` that does not exist",
    ),
    (
        "unknown-status",
        Severity::Error,
        "a test case's `expect.status` other than completed, failed, waiting_approval, suspended or cancelled",
    ),
    (
        "bad-matcher",
        Severity::Error,
        "a test case's `matches:` that is no regular expression, or `schema:` that is no valid JSON Schema",
    ),
];

/// At most this many diagnostics are kept per file; the rest are only counted
/// (errors first, so a flood of warnings never hides an error). A file with
/// 20,000 mistakes is better served by its first screenful and a count than by
/// 20,000 messages, and the cap keeps `validate` linear in the input.
pub const MAX_DIAGNOSTICS_PER_FILE: usize = 200;

/// Text excerpts show at most this many characters either side of the caret,
/// with `…` where the line was cut, so one huge line is never printed whole.
pub const EXCERPT_WINDOW: usize = 80;

/// Did-you-mean searches compare a name with at most this many candidates per
/// file in all; beyond it the plain hint stays. Bounds the search on files that
/// define tens of thousands of names.
pub const SUGGEST_BUDGET: usize = 1_000_000;

/// Index of a file in a [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId(pub u32);

/// A byte range in one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: FileId, start: usize, end: usize) -> Span {
        Span {
            file,
            start: start as u32,
            end: end.max(start) as u32,
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// One problem found in a workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// A stable, kebab-case identifier of the problem class (`undefined-agent`).
    pub code: &'static str,
    pub message: String,
    /// Where; `None` for problems of a whole file that has no text (unreadable).
    pub span: Option<Span>,
    /// What to do about it.
    pub hint: Option<String>,
    /// Related places ("first defined here").
    pub notes: Vec<(Span, String)>,
    /// Used when `span` is `None`: the file the problem is about.
    pub path: Option<PathBuf>,
    /// A did-you-mean search not run yet: it costs time in the number of names,
    /// so it runs only for the diagnostics that are shown ([`resolve_suggestions`]).
    /// When it finds a close name, its hint replaces `hint`.
    pub suggestion: Option<Box<Suggestion>>,
}

/// A deferred did-you-mean search: `name` against `candidates`.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    pub name: String,
    /// Shared by every diagnostic that searches the same namespace.
    pub candidates: Arc<[String]>,
    /// Written before the found name in the hint (`$` for variables, a folder
    /// for files).
    pub prefix: String,
}

/// Run the deferred searches of `diags`, in order, within [`SUGGEST_BUDGET`].
pub fn resolve_suggestions(diags: &mut [Diagnostic]) {
    let mut budget = SUGGEST_BUDGET;
    for d in diags {
        let Some(s) = d.suggestion.take() else {
            continue;
        };
        if s.candidates.len() > budget {
            continue;
        }
        budget -= s.candidates.len();
        if let Some(found) = suggest(&s.name, s.candidates.iter().map(String::as_str)) {
            d.hint = Some(format!("did you mean `{}{found}`?", s.prefix));
        }
    }
}

impl Diagnostic {
    pub fn error(code: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            span: Some(span),
            hint: None,
            notes: Vec::new(),
            path: None,
            suggestion: None,
        }
    }

    pub fn warning(code: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, span, message)
        }
    }

    /// A problem with a file as a whole (it cannot be read, say).
    pub fn file_error(code: &'static str, path: &Path, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            span: None,
            hint: None,
            notes: Vec::new(),
            path: Some(path.to_owned()),
            suggestion: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_note(mut self, span: Span, note: impl Into<String>) -> Diagnostic {
        self.notes.push((span, note.into()));
        self
    }

    /// Search `candidates` for a name close to `name` when this diagnostic is
    /// shown; the hint set now is kept when none is close.
    pub fn suggest_later(
        &mut self,
        name: &str,
        candidates: &Arc<[String]>,
        prefix: impl Into<String>,
    ) -> &mut Diagnostic {
        self.suggestion = Some(Box::new(Suggestion {
            name: name.to_owned(),
            candidates: Arc::clone(candidates),
            prefix: prefix.into(),
        }));
        self
    }

    /// Add a related place to a diagnostic already recorded.
    pub fn note(&mut self, span: Span, note: impl Into<String>) -> &mut Diagnostic {
        self.notes.push((span, note.into()));
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// One source file: its display path, its text, and where its lines start.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
    line_starts: Vec<u32>,
    /// All ASCII: a column is then a byte count, with no scan of the line.
    ascii: bool,
}

impl SourceFile {
    pub fn new(path: PathBuf, text: String) -> SourceFile {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        let ascii = text.is_ascii();
        SourceFile {
            path,
            text,
            line_starts,
            ascii,
        }
    }

    /// 0-based index of the line holding a byte offset (a binary search: no
    /// scan of the line, which may be megabytes long).
    fn line_index(&self, offset: u32) -> usize {
        let offset = offset.min(self.text.len() as u32);
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// 1-based line of a byte offset, without computing the column.
    pub fn line(&self, offset: u32) -> u32 {
        self.line_index(offset) as u32 + 1
    }

    /// Byte offset where a 1-based line starts.
    fn line_start(&self, line: u32) -> usize {
        let i = (line as usize).saturating_sub(1);
        self.line_starts
            .get(i)
            .map_or(self.text.len(), |&s| s as usize)
    }

    /// 1-based line and 1-based character column of a byte offset.
    pub fn line_col(&self, offset: u32) -> (u32, u32) {
        let line = self.line_index(offset);
        let start = self.line_starts[line] as usize;
        let end = floor_char_boundary(&self.text, (offset as usize).min(self.text.len()));
        let chars = if self.ascii {
            end - start
        } else {
            count_chars(&self.text[start..end])
        };
        (line as u32 + 1, chars as u32 + 1)
    }

    /// The text of a 1-based line, without its line ending.
    pub fn line_text(&self, line: u32) -> &str {
        let i = (line as usize).saturating_sub(1);
        let Some(&start) = self.line_starts.get(i) else {
            return "";
        };
        let end = self
            .line_starts
            .get(i + 1)
            .map(|&e| e as usize)
            .unwrap_or(self.text.len());
        self.text[start as usize..end].trim_end_matches(['\n', '\r'])
    }
}

/// Characters in `s`: the bytes that do not continue a UTF-8 sequence. A byte
/// loop the compiler vectorises, since lines can be megabytes long.
fn count_chars(s: &str) -> usize {
    s.bytes().filter(|&b| (b as i8) >= -0x40).count()
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// All files a validation looked at, so diagnostics can point into any of them
/// (an Agentfile and the prompt files it loads).
#[derive(Debug, Default, Clone)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

thread_local! {
    /// The files read on this thread while [`record_sources`] runs.
    static READ: std::cell::RefCell<Option<Vec<PathBuf>>> = const { std::cell::RefCell::new(None) };
}

/// Run `f` (a front end reading a workflow, on this thread) and return what it
/// returned with every file it added to a [`SourceMap`]: the workflow file and
/// what it loads. A run holds these out of its tools' reach.
pub fn record_sources<T>(f: impl FnOnce() -> T) -> (T, Vec<PathBuf>) {
    let outer = READ.with(|r| r.borrow_mut().replace(Vec::new()));
    let out = f();
    let read = READ
        .with(|r| std::mem::replace(&mut *r.borrow_mut(), outer))
        .unwrap_or_default();
    // A recording around this one sees these files too.
    READ.with(|r| {
        if let Some(outer) = r.borrow_mut().as_mut() {
            outer.extend(
                read.iter()
                    .filter(|p| !outer.contains(p))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
        }
    });
    (out, read)
}

impl SourceMap {
    pub fn add(&mut self, path: PathBuf, text: String) -> FileId {
        READ.with(|r| {
            if let Some(read) = r.borrow_mut().as_mut()
                && !read.contains(&path)
            {
                read.push(path.clone());
            }
        });
        self.files.push(SourceFile::new(path, text));
        FileId(self.files.len() as u32 - 1)
    }

    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// The text a span covers.
    pub fn snippet(&self, span: Span) -> &str {
        let text = &self.file(span.file).text;
        let start = floor_char_boundary(text, span.start as usize);
        let end = floor_char_boundary(text, span.end as usize);
        &text[start..end]
    }

    /// `path:line:col` of a span's start.
    pub fn location(&self, span: Span) -> String {
        let f = self.file(span.file);
        let (line, col) = f.line_col(span.start);
        format!("{}:{}:{}", f.path.display(), line, col)
    }
}

/// Rendering options for text output.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// ANSI colours for the severity words.
    pub color: bool,
}

/// The line that ends a file's shortened list: `… and 19,800 more errors (only
/// the first 200 diagnostics of a file are listed)`, or `None` when nothing was
/// left out.
pub fn omitted_note(errors: usize, warnings: usize) -> Option<String> {
    let count = |n: usize, word: &str| {
        format!(
            "{} more {word}{}",
            thousands(n),
            if n == 1 { "" } else { "s" }
        )
    };
    let what = match (errors, warnings) {
        (0, 0) => return None,
        (e, 0) => count(e, "error"),
        (0, w) => count(w, "warning"),
        (e, w) => format!("{} and {}", count(e, "error"), count(w, "warning")),
    };
    Some(format!(
        "… and {what} (only the first {MAX_DIAGNOSTICS_PER_FILE} diagnostics of a file are listed; fix these and validate again)"
    ))
}

/// `19800` as `19,800`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Render one diagnostic as text, compiler style, ending with a newline.
pub fn render(map: &SourceMap, d: &Diagnostic, style: Style) -> String {
    let mut out = String::new();
    let sev = match (style.color, d.severity) {
        (false, s) => s.as_str().to_owned(),
        (true, Severity::Error) => "\x1b[1;31merror\x1b[0m".to_owned(),
        (true, Severity::Warning) => "\x1b[1;33mwarning\x1b[0m".to_owned(),
    };
    let pad = match d.span {
        Some(span) => {
            let _ = writeln!(out, "{}: {}: {}", map.location(span), sev, d.message);
            excerpt(&mut out, map, span)
        }
        None => {
            let path = d.path.as_deref().unwrap_or(Path::new("<unknown>"));
            let _ = writeln!(out, "{}: {}: {}", path.display(), sev, d.message);
            " ".to_owned()
        }
    };
    for (span, note) in &d.notes {
        let _ = writeln!(out, "{pad} = note: {} ({})", note, map.location(*span));
    }
    if let Some(h) = &d.hint {
        let _ = writeln!(out, "{pad} = hint: {h}");
    }
    out
}

/// The source line under a span, with carets under the span's first line.
/// Returns the gutter padding, so notes can line up with it.
///
/// A long line is cut to [`EXCERPT_WINDOW`] characters either side of the caret,
/// with `…` marking each cut; the work is proportional to the window, not the
/// line, once the column is known.
fn excerpt(out: &mut String, map: &SourceMap, span: Span) -> String {
    let file = map.file(span.file);
    let line = file.line(span.start);
    let text = file.line_text(line);
    let line_start = file.line_start(line);
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    // Byte offsets of the span within the line, on character boundaries.
    let at = floor_char_boundary(
        text,
        (span.start as usize)
            .saturating_sub(line_start)
            .min(text.len()),
    );
    let span_end = floor_char_boundary(
        text,
        (span.end as usize)
            .saturating_sub(line_start)
            .min(text.len()),
    )
    .max(at);
    // The window: up to EXCERPT_WINDOW characters before the caret, and up to
    // EXCERPT_WINDOW after the caret's start.
    let from = text[..at]
        .char_indices()
        .rev()
        .nth(EXCERPT_WINDOW - 1)
        .map_or(0, |(i, _)| i);
    let to = text[at..]
        .char_indices()
        .nth(EXCERPT_WINDOW)
        .map_or(text.len(), |(i, _)| at + i);
    let (cut_left, cut_right) = (from > 0, to < text.len());
    let shown = &text[from..to];
    // Carets cover the span, clipped to its first line and to the window, at
    // least one wide. A span that ends on a later line runs to the line's end.
    let end_in_window = if file.line(span.end) == line {
        span_end.min(to)
    } else {
        to
    };
    let width = count_chars(&text[at..end_in_window.max(at)])
        .max(1)
        .min(count_chars(&text[at..to]) + 1);
    // Keep tabs as tabs so the carets line up in a terminal.
    let lead: String = text[from..at]
        .chars()
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let (left, right) = (
        if cut_left { "…" } else { "" },
        if cut_right { "…" } else { "" },
    );
    let lead_mark = if cut_left { " " } else { "" };
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{line} | {left}{shown}{right}");
    let _ = writeln!(out, "{pad} | {lead_mark}{lead}{}", "^".repeat(width));
    pad
}

/// `s` lowercased onto `out`, one `char` each; ASCII (almost every name) takes
/// the byte path, which is several times faster than `char::to_lowercase`'s
/// iterator in this loop over every candidate.
fn lowercase_into(s: &str, out: &mut Vec<char>) {
    if s.is_ascii() {
        out.extend(s.bytes().map(|b| char::from(b.to_ascii_lowercase())));
    } else {
        out.extend(s.chars().flat_map(char::to_lowercase));
    }
}

/// The closest candidate to `name` by edit distance, if it is close enough to be
/// what the user meant. Ties go to the first candidate.
///
/// Linear in the candidates with a small constant: lengths too far apart are
/// skipped, and each distance stops as soon as it exceeds the best so far.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut want: Vec<char> = Vec::with_capacity(name.len());
    lowercase_into(name, &mut want);
    let limit = (name.chars().count() / 3).max(1);
    let mut best: Option<(usize, &'a str)> = None;
    let mut other: Vec<char> = Vec::new();
    let mut rows = Rows::default();
    // Letter counts of `name`, for a cheap lower bound on the distance: an
    // edit changes the counts by at most two, a transposition not at all.
    // (Folding characters into 128 buckets only weakens the bound.)
    let mut bag = [0i32; 128];
    for &c in &want {
        bag[bucket(c)] += 1;
    }
    for c in candidates {
        if c == name {
            continue;
        }
        other.clear();
        lowercase_into(c, &mut other);
        // Only a strictly better candidate replaces the best one.
        let bound = match best {
            Some((0, _)) => break,
            Some((d, _)) => d - 1,
            None => limit,
        };
        if want.len().abs_diff(other.len()) > bound {
            continue;
        }
        for &c in &other {
            bag[bucket(c)] -= 1;
        }
        let apart: u32 = other
            .iter()
            .chain(&want)
            .map(|&c| {
                let b = &mut bag[bucket(c)];
                // Count each bucket once: zero it after reading.
                std::mem::take(b).unsigned_abs()
            })
            .sum();
        // Every bucket touched is zero again; put `name`'s counts back.
        for &c in &want {
            bag[bucket(c)] += 1;
        }
        if apart.div_ceil(2) as usize > bound {
            continue;
        }
        if let Some(d) = rows.distance(&want, &other, bound) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

fn bucket(c: char) -> usize {
    c as usize & 127
}

/// Levenshtein distance, counting a transposition of neighbours as one edit.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    Rows::default()
        .distance(&a, &b, usize::MAX)
        .unwrap_or(usize::MAX)
}

/// The three rows of the distance table, reused across calls.
#[derive(Default)]
struct Rows {
    prev2: Vec<usize>,
    prev: Vec<usize>,
    cur: Vec<usize>,
}

impl Rows {
    /// The distance between `a` and `b`, or `None` once it must exceed `bound`
    /// (every cell of a row above it: later rows can only grow).
    fn distance(&mut self, a: &[char], b: &[char], bound: usize) -> Option<usize> {
        self.prev2.clear();
        self.prev2.resize(b.len() + 1, 0);
        self.prev.clear();
        self.prev.extend(0..=b.len());
        self.cur.clear();
        self.cur.resize(b.len() + 1, 0);
        for i in 1..=a.len() {
            self.cur[0] = i;
            let mut row_min = i;
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (self.prev[j] + 1)
                    .min(self.cur[j - 1] + 1)
                    .min(self.prev[j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(self.prev2[j - 2] + 1);
                }
                self.cur[j] = v;
                row_min = row_min.min(v);
            }
            // A transposition reads two rows back, so stop only when this row
            // and the previous one are both past the bound.
            let prev_min = self.prev.iter().copied().min().unwrap_or(0);
            if row_min > bound && prev_min > bound {
                return None;
            }
            std::mem::swap(&mut self.prev2, &mut self.prev);
            std::mem::swap(&mut self.prev, &mut self.cur);
        }
        let d = self.prev[b.len()];
        (d <= bound).then_some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let f = SourceFile::new("x".into(), "ab\nçd $x\n".into());
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(3), (2, 1));
        // "ç" is two bytes but one column.
        assert_eq!(f.line_col(7), (2, 4));
        assert_eq!(f.line_text(2), "çd $x");
        assert_eq!(f.line_text(9), "");
    }

    #[test]
    fn renders_caret_under_span() {
        let mut map = SourceMap::default();
        let id = map.add("Agentfile".into(), "GOAL a \"x\" USING creatve\n".into());
        let d = Diagnostic::error("undefined-agent", Span::new(id, 17, 24), "undefined agent")
            .with_hint("did you mean `creative`?");
        let text = render(&map, &d, Style::default());
        assert_eq!(
            text,
            "Agentfile:1:18: error: undefined agent\n  |\n1 | GOAL a \"x\" USING creatve\n  |                  ^^^^^^^\n  = hint: did you mean `creative`?\n"
        );
    }

    #[test]
    fn long_lines_are_cut_around_the_caret() {
        // 300 two-byte characters, the span, then 300 more: the excerpt shows
        // EXCERPT_WINDOW characters either side, `…` at both cuts, and the
        // caret under the span's first character.
        let before = "é".repeat(300);
        let after = "ü".repeat(300);
        let line = format!("GOAL g \"{before}$bad{after}\"");
        let mut map = SourceMap::default();
        let id = map.add("Agentfile".into(), format!("NAME x\n{line}\n"));
        let start = "NAME x\n".len() + "GOAL g \"".len() + before.len();
        let d = Diagnostic::error("undefined-variable", Span::new(id, start, start + 4), "bad");
        let text = render(&map, &d, Style::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Agentfile:2:309: error: bad");
        let shown = lines[2].strip_prefix("2 | ").expect("excerpt line");
        assert_eq!(shown, format!("…{}$bad{}…", "é".repeat(80), "ü".repeat(76)));
        let carets = lines[3].strip_prefix("  | ").expect("caret line");
        // One column for the `…`, then 80 characters, then the carets.
        assert_eq!(carets, format!("{}^^^^", " ".repeat(81)));
    }

    #[test]
    fn short_lines_are_not_cut_and_spans_past_the_window_clip() {
        let mut map = SourceMap::default();
        let text = format!("{}\n", "x".repeat(200));
        let id = map.add("f".into(), text);
        // A span from column 1 to the end: the carets stop at the window.
        let d = Diagnostic::error("syntax", Span::new(id, 0, 200), "m");
        let out = render(&map, &d, Style::default());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[2], format!("1 | {}…", "x".repeat(80)));
        assert_eq!(lines[3], format!("  | {}", "^".repeat(80)));
        // A caret at the very end of a line (a missing token) is one wide.
        let d = Diagnostic::error("syntax", Span::new(id, 200, 200), "m");
        let out = render(&map, &d, Style::default());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[2], format!("1 | …{}", "x".repeat(80)));
        assert_eq!(lines[3], format!("  |  {}^", " ".repeat(80)));
    }

    #[test]
    fn omitted_note_counts_with_separators() {
        assert_eq!(omitted_note(0, 0), None);
        let n = omitted_note(19_800, 1).expect("note");
        assert!(
            n.starts_with("… and 19,800 more errors and 1 more warning"),
            "{n}"
        );
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn deferred_suggestions_fill_the_hint() {
        let mut map = SourceMap::default();
        let id = map.add("f".into(), "x\n".into());
        let pool: Arc<[String]> = vec!["creative".to_owned(), "critic".to_owned()].into();
        let mut d =
            Diagnostic::error("undefined-agent", Span::new(id, 0, 1), "m").with_hint("define it");
        d.suggest_later("creatve", &pool, "");
        let mut far =
            Diagnostic::error("undefined-agent", Span::new(id, 0, 1), "m").with_hint("define it");
        far.suggest_later("zzz", &pool, "$");
        let mut all = vec![d, far];
        resolve_suggestions(&mut all);
        assert_eq!(all[0].hint.as_deref(), Some("did you mean `creative`?"));
        assert_eq!(all[1].hint.as_deref(), Some("define it"));
        assert!(all.iter().all(|d| d.suggestion.is_none()));
    }

    #[test]
    fn edit_distance_counts_transpositions() {
        assert_eq!(edit_distance("abcd", "abdc"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        // Ties go to the first candidate; an exact match is skipped.
        assert_eq!(suggest("ab", ["ab", "ac", "ad"]), Some("ac"));
    }

    #[test]
    fn suggestions_are_close_only() {
        assert_eq!(suggest("creatve", ["creative", "critic"]), Some("creative"));
        assert_eq!(suggest("anlayze", ["analyze"]), Some("analyze"));
        assert_eq!(suggest("zzz", ["analyze"]), None);
    }
}
