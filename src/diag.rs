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
//! or as JSON for machines ([`crate::protocol::diagnostics`]). It deliberately knows
//! nothing about any workflow format: a span is a file, a line, a column and a
//! length, all counted the way an editor counts them (1-based lines, 1-based columns
//! in characters).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// How bad a diagnostic is. Warnings never fail `validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// Every diagnostic class the front ends emit: code, severity, what it means.
/// Documented in the README; the fixture tests check that each has a fixture.
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
        "unreadable-file",
        Severity::Error,
        "a file exists but cannot be read as a prompt",
    ),
    ("not-utf8", Severity::Error, "a file is not UTF-8 text"),
    (
        "unsupported-dialect",
        Severity::Error,
        "a recognised format that is not supported yet (agentrc)",
    ),
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
];

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
        SourceFile {
            path,
            text,
            line_starts,
        }
    }

    /// 1-based line and 1-based character column of a byte offset.
    pub fn line_col(&self, offset: u32) -> (u32, u32) {
        let offset = offset.min(self.text.len() as u32);
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line] as usize;
        let end = floor_char_boundary(&self.text, offset as usize);
        let col = self.text[start..end].chars().count() as u32 + 1;
        (line as u32 + 1, col)
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

impl SourceMap {
    pub fn add(&mut self, path: PathBuf, text: String) -> FileId {
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
fn excerpt(out: &mut String, map: &SourceMap, span: Span) -> String {
    let file = map.file(span.file);
    let (line, col) = file.line_col(span.start);
    let text = file.line_text(line);
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    // Carets cover the span, clipped to its first line, at least one wide.
    let (end_line, end_col) = file.line_col(span.end);
    let width = if end_line == line {
        end_col.saturating_sub(col).max(1)
    } else {
        (text.chars().count() as u32 + 1).saturating_sub(col).max(1)
    };
    // Keep tabs as tabs so the carets line up in a terminal.
    let lead: String = text
        .chars()
        .take(col as usize - 1)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{line} | {text}");
    let _ = writeln!(out, "{pad} | {lead}{}", "^".repeat(width as usize));
    pad
}

/// The closest candidate to `name` by edit distance, if it is close enough to be
/// what the user meant.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (edit_distance(&name.to_lowercase(), &c.to_lowercase()), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, counting a transposition of neighbours as one edit.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev2: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(prev2[j - 2] + 1);
            }
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
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
    fn suggestions_are_close_only() {
        assert_eq!(suggest("creatve", ["creative", "critic"]), Some("creative"));
        assert_eq!(suggest("anlayze", ["analyze"]), Some("analyze"));
        assert_eq!(suggest("zzz", ["analyze"]), None);
    }
}
