//! Lines to directives: comments, `\` continuations, `POLICY … END` /
//! `SOP … END` blocks and `<<DELIM` heredocs, each piece kept with its byte
//! range so every diagnostic points at the file.
//!
//! Nothing here knows what a directive means; [`super`] checks names and
//! arguments. Linear in the input: every byte is looked at a bounded number of
//! times, whatever the nesting of quotes and continuations.

/// Which of the two agentrc syntaxes a file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// The core profile (draft.4): AGENT, TOOL, MOUNT, `POLICY … END`.
    Core,
    /// The Dockerfile-shaped syntax: IDENTITY, CAPABILITY, SOP, one-line
    /// POLICY, over Dockerfile keywords.
    Dockerfile,
}

impl Syntax {
    pub fn as_str(self) -> &'static str {
        match self {
            Syntax::Core => "core",
            Syntax::Dockerfile => "dockerfile",
        }
    }
}

/// A whitespace-separated word, with its byte range in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub text: String,
    pub start: usize,
    pub end: usize,
    /// A `"` or `'` opened in it and never closed.
    pub open_quote: bool,
}

/// Lines captured raw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawBlock {
    pub kind: BlockKind,
    pub text: String,
    /// Byte offset of `text` in the file.
    pub offset: usize,
    /// Byte range of what closed it (`END`, the delimiter); `None`: the file
    /// ended first.
    pub close: Option<(usize, usize)>,
    /// The heredoc's delimiter, for messages.
    pub delimiter: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// `POLICY` or `SOP` alone on its line, closed by `END`.
    End,
    /// `<<DELIM` (or `<<-DELIM`, `<<"DELIM"`), closed by the delimiter.
    Heredoc,
}

/// One directive as read, before its name is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawDirective {
    pub name: Token,
    pub args: Vec<Token>,
    /// Byte offset where its last line ends.
    pub end: usize,
    pub block: Option<RawBlock>,
}

/// Lines one file may hold that are not blank or comments: directives,
/// lines that are not directives, blank lines inside a `\` continuation.
/// An agentrc file declares one agent (the seed's examples have a few
/// dozen directives); each line read costs a few hundred bytes of records.
pub const MAX_DIRECTIVES: usize = 10_000;

/// Words (directive names and arguments) one file may hold: each costs some
/// 60 bytes however short it is.
pub const MAX_WORDS: usize = 100_000;

/// Which bound a file passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Directives,
    Words,
}

/// Something wrong with the layout itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutProblem {
    /// The file holds more than [`MAX_DIRECTIVES`] or [`MAX_WORDS`]: reading
    /// stopped at `at` (the start of the line that passed the bound).
    TooLarge { at: usize, bound: Bound },
    /// A `\` on the last line: nothing follows to continue onto.
    ContinuationAtEnd { at: usize },
    /// A `\` continued the line onto a blank line.
    EmptyContinuation { at: usize },
    /// A line that does not start with a directive name.
    NotADirective { start: usize, end: usize },
}

/// A file read as lines.
#[derive(Debug, Default)]
pub struct Layout {
    pub directives: Vec<RawDirective>,
    pub problems: Vec<LayoutProblem>,
    /// The `# syntax=` parser directive: its value and byte range.
    pub syntax_directive: Option<(String, usize, usize)>,
}

/// Words that only the Dockerfile-shaped syntax uses.
pub const DOCKERFILE_ONLY: &[&str] = &[
    "IDENTITY",
    "CAPABILITY",
    "COPY",
    "ADD",
    "LABEL",
    "ENV",
    "ARG",
    "WORKDIR",
    "USER",
    "EXPOSE",
    "RUN",
    "ENTRYPOINT",
    "VOLUME",
    "STOPSIGNAL",
    "ONBUILD",
];

/// Words that only the core syntax uses.
pub const CORE_ONLY: &[&str] = &["AGENT", "TOOL", "MOUNT", "CRED", "URL", "AUDIT"];

/// Which syntax the file is in, and the directive that shows it (byte range):
/// the first line-leading word only one syntax has, else the shape of its
/// first POLICY line (a block is core, `POLICY key value` is Dockerfile).
/// With no evidence either way, core.
pub fn guess(text: &str) -> (Syntax, Option<(usize, usize)>) {
    let mut policy_hint = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        let at = start + (line.len() - trimmed.len());
        let word = trimmed.split_whitespace().next().unwrap_or("");
        let span = Some((at, at + word.len()));
        if DOCKERFILE_ONLY.contains(&word) {
            return (Syntax::Dockerfile, span);
        }
        if CORE_ONLY.contains(&word) {
            return (Syntax::Core, span);
        }
        if word == "POLICY" && policy_hint.is_none() {
            let rest = trimmed[word.len()..].trim();
            let syntax = if rest.is_empty() {
                Syntax::Core
            } else {
                Syntax::Dockerfile
            };
            policy_hint = Some((syntax, span));
        }
    }
    policy_hint.unwrap_or((Syntax::Core, None))
}

/// The lines of a text with their byte offsets, read forward (the file is
/// never held as a list of lines: a file of blank lines would take 24 bytes
/// a byte).
#[derive(Clone)]
struct Lines<'a> {
    text: &'a str,
    /// Where the next line starts.
    at: usize,
}

impl<'a> Iterator for Lines<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<(usize, &'a str)> {
        let rest = self.text.get(self.at..).filter(|r| !r.is_empty())?;
        let len = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let start = self.at;
        self.at += len;
        Some((start, &rest[..len]))
    }
}

/// Split `text` into directives. `inline_comments`: ` #…` ends a line's
/// arguments (the core syntax); the Dockerfile syntax has none.
pub fn read(text: &str, inline_comments: bool) -> Layout {
    let mut out = Layout::default();
    let mut lines = Lines { text, at: 0 };
    let mut leading = true;
    // Lines counted against MAX_DIRECTIVES, words against MAX_WORDS.
    let (mut counted, mut words) = (0usize, 0usize);
    while let Some((start, raw)) = lines.next() {
        let line = strip_newline(raw);
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            // Parser directives come before any directive, as in a Dockerfile.
            let c = comment.trim();
            if leading
                && out.syntax_directive.is_none()
                && let Some(v) = c.strip_prefix("syntax=")
            {
                out.syntax_directive = Some((
                    v.trim().to_owned(),
                    start + indent,
                    start + line.trim_end().len(),
                ));
            }
            continue;
        }
        leading = false;
        counted += 1;
        if counted > MAX_DIRECTIVES {
            out.problems.push(LayoutProblem::TooLarge {
                at: start + indent,
                bound: Bound::Directives,
            });
            return out;
        }
        let first = (start + indent, trimmed, start + line.len());
        let Some((segments, end)) = logical_line(
            &mut lines,
            first,
            inline_comments,
            &mut counted,
            &mut out.problems,
        ) else {
            return out;
        };
        let Some(mut tokens) = tokenize_segments(&segments, MAX_WORDS - words) else {
            out.problems.push(LayoutProblem::TooLarge {
                at: start + indent,
                bound: Bound::Words,
            });
            return out;
        };
        words += tokens.len();
        if tokens.is_empty() {
            continue;
        }
        let name = tokens.remove(0);
        if !is_directive_name(&name.text) {
            out.problems.push(LayoutProblem::NotADirective {
                start: name.start,
                end: name.end,
            });
            continue;
        }
        let mut directive = RawDirective {
            name,
            args: tokens,
            end,
            block: None,
        };
        attach_block(&mut directive, &mut lines);
        out.directives.push(directive);
    }
    out
}

/// One physical line, indentation trimmed: where its text starts, the text
/// (newline cut), and where the line ends.
type Physical<'a> = (usize, &'a str, usize);

/// The logical line that starts with the physical line `first`: that line and its `\`
/// continuations, as `(start, body)` segments, and the byte offset where its
/// last physical line ends. `None`: the file passed [`MAX_DIRECTIVES`]
/// (the problem is pushed; reading stops).
fn logical_line<'a>(
    lines: &mut Lines<'a>,
    first: Physical<'a>,
    inline_comments: bool,
    counted: &mut usize,
    problems: &mut Vec<LayoutProblem>,
) -> Option<(Vec<(usize, &'a str)>, usize)> {
    let (mut seg_start, mut seg, mut end) = first;
    let mut segments: Vec<(usize, &str)> = Vec::new();
    loop {
        let (body, continues) = split_continuation(seg);
        let body = if inline_comments {
            cut_inline_comment(body)
        } else {
            body
        };
        segments.push((seg_start, body));
        if !continues {
            break;
        }
        match next_continuation(lines, counted, problems)? {
            Some((s, t, e)) => {
                seg_start = s;
                seg = t;
                end = e;
            }
            None => {
                let at = seg_start + seg.trim_end().len() - 1;
                problems.push(LayoutProblem::ContinuationAtEnd { at });
                break;
            }
        }
    }
    Some((segments, end))
}

/// The next physical line a `\` continues onto:
/// comment lines are skipped, as Dockerfile does; a blank line is counted
/// against [`MAX_DIRECTIVES`] and reported. `Some(None)`: the file ended;
/// `None`: the bound was passed (the problem is pushed).
fn next_continuation<'a>(
    lines: &mut Lines<'a>,
    counted: &mut usize,
    problems: &mut Vec<LayoutProblem>,
) -> Option<Option<Physical<'a>>> {
    for (s, r) in lines.by_ref() {
        let l = strip_newline(r);
        let t = l.trim_start();
        if t.starts_with('#') {
            continue;
        }
        if t.is_empty() {
            *counted += 1;
            if *counted > MAX_DIRECTIVES {
                problems.push(LayoutProblem::TooLarge {
                    at: s,
                    bound: Bound::Directives,
                });
                return None;
            }
            problems.push(LayoutProblem::EmptyContinuation { at: s });
            continue;
        }
        return Some(Some((s + (l.len() - t.len()), t, s + l.len())));
    }
    Some(None)
}

/// The words of a logical line's segments; `None` when they pass `room`.
fn tokenize_segments(segments: &[(usize, &str)], room: usize) -> Option<Vec<Token>> {
    let mut tokens: Vec<Token> = Vec::new();
    for (s, body) in segments {
        let left = room.saturating_sub(tokens.len());
        if !tokenize_into(body, *s, left, &mut tokens) {
            return None;
        }
    }
    Some(tokens)
}

/// A directive's name: a letter, then letters, digits, `_` and `-`.
fn is_directive_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Read the block a directive opens, if any: a bare `POLICY` or `SOP` runs to
/// `END`; a `<<DELIM` argument (`<<-` strips leading tabs) runs to `DELIM`.
fn attach_block(directive: &mut RawDirective, lines: &mut Lines<'_>) {
    let opener = directive.name.text.to_ascii_uppercase();
    if directive.args.is_empty() && (opener == "POLICY" || opener == "SOP") {
        let block = capture_until(lines, |t| t.trim() == "END", None);
        if let Some(c) = block.close {
            directive.end = c.1;
        }
        directive.block = Some(block);
    } else if let Some((pos, delim, strip_tabs)) = heredoc_start(&directive.args) {
        let d = delim.clone();
        let mut block = capture_until(
            lines,
            move |t| {
                let t = if strip_tabs {
                    t.trim_start_matches('\t')
                } else {
                    t
                };
                t == d
            },
            Some(strip_tabs),
        );
        block.kind = BlockKind::Heredoc;
        block.delimiter = Some(delim);
        if let Some(c) = block.close {
            directive.end = c.1;
        }
        directive.args.remove(pos);
        directive.block = Some(block);
    }
}

fn strip_newline(line: &str) -> &str {
    let l = line.strip_suffix('\n').unwrap_or(line);
    l.strip_suffix('\r').unwrap_or(l)
}

/// `(body, continues)`: a line ending in `\` (trailing blanks allowed)
/// continues onto the next.
fn split_continuation(line: &str) -> (&str, bool) {
    let t = line.trim_end();
    match t.strip_suffix('\\') {
        Some(body) => (body, true),
        None => (line, false),
    }
}

/// A ` #` outside quotes starts a comment.
fn cut_inline_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev_space = false;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev_space => return &line[..i],
            None => {}
        }
        prev_space = c == ' ' || c == '\t';
    }
    line
}

/// Words of `body` (which starts at file offset `at`): whitespace separates
/// them except inside `"…"` or `'…'`.
pub fn tokenize(body: &str, at: usize) -> Vec<Token> {
    let mut out = Vec::new();
    tokenize_into(body, at, usize::MAX, &mut out);
    out
}

/// [`tokenize`] onto `out`, at most `room` words: `false` (the words read
/// so far kept) when `body` has more.
fn tokenize_into(body: &str, at: usize, room: usize, out: &mut Vec<Token>) -> bool {
    let room = out.len().saturating_add(room);
    let mut cur: Option<(usize, String)> = None;
    let mut quote: Option<char> = None;
    for (i, c) in body.char_indices() {
        if quote.is_none() && (c == ' ' || c == '\t') {
            if let Some((s, t)) = cur.take() {
                if out.len() >= room {
                    return false;
                }
                out.push(Token {
                    text: t,
                    start: at + s,
                    end: at + i,
                    open_quote: false,
                });
            }
            continue;
        }
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None => {}
        }
        cur.get_or_insert_with(|| (i, String::new())).1.push(c);
    }
    if let Some((s, t)) = cur {
        if out.len() >= room {
            return false;
        }
        out.push(Token {
            text: t,
            start: at + s,
            end: at + body.len(),
            open_quote: quote.is_some(),
        });
    }
    true
}

/// The heredoc opener among the arguments: `(index, delimiter, <<-)`.
fn heredoc_start(args: &[Token]) -> Option<(usize, String, bool)> {
    args.iter().enumerate().find_map(|(i, t)| {
        let rest = t.text.strip_prefix("<<")?;
        let (rest, strip) = match rest.strip_prefix('-') {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let delim = rest.trim_matches(|c| c == '"' || c == '\'');
        let ok = !delim.is_empty()
            && delim
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
        ok.then(|| (i, delim.to_owned(), strip))
    })
}

/// The lines from the cursor up to the first one `closes` accepts, which
/// the cursor is left after.
fn capture_until(
    lines: &mut Lines<'_>,
    closes: impl Fn(&str) -> bool,
    strip_tabs: Option<bool>,
) -> RawBlock {
    let offset = lines.at;
    let mut text = String::new();
    for (s, raw) in lines.by_ref() {
        let line = strip_newline(raw);
        if closes(line) {
            let lead = line.len() - line.trim_start().len();
            return RawBlock {
                kind: BlockKind::End,
                text,
                offset,
                close: Some((s + lead, s + line.trim_end().len())),
                delimiter: None,
            };
        }
        if strip_tabs == Some(true) {
            text.push_str(line.trim_start_matches('\t'));
            text.push('\n');
        } else {
            text.push_str(raw);
        }
    }
    RawBlock {
        kind: BlockKind::End,
        text,
        offset,
        close: None,
        delimiter: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_heredocs_and_continuations() {
        let src = "# syntax=agentrc.agentfile/v0.1\nAGENT a # the name\nPOLICY\n  permit(principal, action, resource);\nEND\nCMD python \\\n  # skipped\n  run.py\n";
        let l = read(src, true);
        assert_eq!(
            l.syntax_directive.as_ref().unwrap().0,
            "agentrc.agentfile/v0.1"
        );
        let names: Vec<_> = l.directives.iter().map(|d| d.name.text.as_str()).collect();
        assert_eq!(names, ["AGENT", "POLICY", "CMD"]);
        assert_eq!(l.directives[0].args.len(), 1);
        let b = l.directives[1].block.as_ref().unwrap();
        assert_eq!(b.text, "  permit(principal, action, resource);\n");
        assert_eq!(&src[b.offset..b.offset + 2], "  ");
        let cmd: Vec<_> = l.directives[2]
            .args
            .iter()
            .map(|t| t.text.as_str())
            .collect();
        assert_eq!(cmd, ["python", "run.py"]);
        assert!(l.problems.is_empty());

        let src = "SOP <<-EOF\n\tYou review code.\n\tEOF\nCMD x \\\n";
        let l = read(src, false);
        let b = l.directives[0].block.as_ref().unwrap();
        assert_eq!(b.text, "You review code.\n");
        assert!(b.close.is_some());
        assert!(matches!(
            l.problems[..],
            [LayoutProblem::ContinuationAtEnd { .. }]
        ));
        let toks = tokenize(r#"name=x description="a b c" z"#, 0);
        assert_eq!(toks.len(), 3);
        assert_eq!(toks[1].text, r#"description="a b c""#);
    }

    #[test]
    fn guesses_the_syntax() {
        assert_eq!(guess("FROM x\nIDENTITY name=a\n").0, Syntax::Dockerfile);
        assert_eq!(guess("FROM x\nAGENT a\n").0, Syntax::Core);
        assert_eq!(guess("POLICY model.name x\n").0, Syntax::Dockerfile);
        assert_eq!(guess("POLICY\nEND\n").0, Syntax::Core);
    }
}
