//! The Agentfile lexer: bytes in, tokens with byte spans out.
//!
//! The language is line oriented, so newlines are tokens. Everything the parser
//! needs to tell apart is ASCII (`"`, `,`, `#`, `$`, `->`, whitespace), so the lexer
//! scans bytes and only ever cuts the text at ASCII positions, which are always
//! UTF-8 boundaries: it cannot panic on any input.
//!
//! Anything that is not a string, comma, arrow or newline is a *word*: a run of
//! non-blank characters. Words are then classified (keyword, identifier, number,
//! `$variable`, or a bare word such as a path) so that `FROM agents/x.md` needs no
//! lexer modes. A `#` starts a comment only where a token could start, so a path
//! like `docs/C#.md` keeps its `#`.

/// The reserved words of the DSL. Case-sensitive: `goal` is an identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Keyword {
    Name,
    Input,
    Agent,
    Goal,
    Run,
    Loop,
    Converge,
    From,
    Using,
    Within,
    Default,
    Requires,
    Supervised,
    Unsupervised,
    Human,
    Security,
}

impl Keyword {
    pub const ALL: [Keyword; 16] = [
        Keyword::Name,
        Keyword::Input,
        Keyword::Agent,
        Keyword::Goal,
        Keyword::Run,
        Keyword::Loop,
        Keyword::Converge,
        Keyword::From,
        Keyword::Using,
        Keyword::Within,
        Keyword::Default,
        Keyword::Requires,
        Keyword::Supervised,
        Keyword::Unsupervised,
        Keyword::Human,
        Keyword::Security,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Keyword::Name => "NAME",
            Keyword::Input => "INPUT",
            Keyword::Agent => "AGENT",
            Keyword::Goal => "GOAL",
            Keyword::Run => "RUN",
            Keyword::Loop => "LOOP",
            Keyword::Converge => "CONVERGE",
            Keyword::From => "FROM",
            Keyword::Using => "USING",
            Keyword::Within => "WITHIN",
            Keyword::Default => "DEFAULT",
            Keyword::Requires => "REQUIRES",
            Keyword::Supervised => "SUPERVISED",
            Keyword::Unsupervised => "UNSUPERVISED",
            Keyword::Human => "HUMAN",
            Keyword::Security => "SECURITY",
        }
    }

    pub fn from_word(w: &str) -> Option<Keyword> {
        Some(match w {
            "NAME" => Keyword::Name,
            "INPUT" => Keyword::Input,
            "AGENT" => Keyword::Agent,
            "GOAL" => Keyword::Goal,
            "RUN" => Keyword::Run,
            "LOOP" => Keyword::Loop,
            "CONVERGE" => Keyword::Converge,
            "FROM" => Keyword::From,
            "USING" => Keyword::Using,
            "WITHIN" => Keyword::Within,
            "DEFAULT" => Keyword::Default,
            "REQUIRES" => Keyword::Requires,
            "SUPERVISED" => Keyword::Supervised,
            "UNSUPERVISED" => Keyword::Unsupervised,
            "HUMAN" => Keyword::Human,
            "SECURITY" => Keyword::Security,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Keyword(Keyword),
    /// Letters, digits, `_` and `-`, starting with a letter or `_`.
    Ident,
    /// Digits only.
    Number,
    /// `$` followed by an identifier.
    Variable,
    /// Any other run of non-blank characters (a path, `3.5`, `-1`, `@x`).
    Word,
    /// `"…"`; `terminated` is false when the line ended first.
    Str {
        terminated: bool,
    },
    /// `"""…"""`; `terminated` is false when the file ended first.
    TripleStr {
        terminated: bool,
    },
    Comma,
    Arrow,
    Newline,
    Eof,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub start: u32,
    pub end: u32,
}

/// Split `src` into tokens. Always ends with [`TokenKind::Eof`].
pub fn tokenize(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    // Most lines hold a handful of tokens of ~8 bytes.
    let mut out = Vec::with_capacity(b.len() / 6 + 1);
    let mut i = 0;
    let push = |out: &mut Vec<Token>, kind, s: usize, e: usize| {
        out.push(Token {
            kind,
            start: s as u32,
            end: e as u32,
        })
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                push(&mut out, TokenKind::Newline, i, i + 1);
                i += 1;
            }
            b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b',' => {
                push(&mut out, TokenKind::Comma, i, i + 1);
                i += 1;
            }
            b'"' => {
                let start = i;
                if b[i..].starts_with(b"\"\"\"") {
                    i += 3;
                    let (end, terminated) = match find_triple_close(b, i) {
                        Some(close) => (close + 3, true),
                        None => (b.len(), false),
                    };
                    i = end;
                    push(&mut out, TokenKind::TripleStr { terminated }, start, end);
                } else {
                    i += 1;
                    let mut terminated = false;
                    while i < b.len() {
                        match b[i] {
                            b'\\' if i + 1 < b.len() && b[i + 1] != b'\n' => i += 2,
                            b'"' => {
                                i += 1;
                                terminated = true;
                                break;
                            }
                            b'\n' => break,
                            _ => i += 1,
                        }
                    }
                    // A `\r` before the newline is not part of the string.
                    let end = if !terminated && i > start + 1 && b[i - 1] == b'\r' {
                        i - 1
                    } else {
                        i
                    };
                    push(&mut out, TokenKind::Str { terminated }, start, end);
                }
            }
            b'-' if b.get(i + 1) == Some(&b'>') => {
                push(&mut out, TokenKind::Arrow, i, i + 2);
                i += 2;
            }
            _ => {
                let start = i;
                while i < b.len() {
                    match b[i] {
                        b' ' | b'\t' | b'\r' | b'\n' | b'\x0b' | b'\x0c' | b',' | b'"' => break,
                        b'-' if b.get(i + 1) == Some(&b'>') => break,
                        _ => i += 1,
                    }
                }
                let kind = classify(&src[start..i]);
                push(&mut out, kind, start, i);
            }
        }
    }
    push(&mut out, TokenKind::Eof, b.len(), b.len());
    out
}

/// The index of the `"""` that closes a triple-quoted string whose content starts
/// at `from`. In a run of more than three quotes the *last* three close it, so
/// `"""say "hi""""` holds `say "hi"`.
fn find_triple_close(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 3 <= b.len() {
        if b[i] == b'"' && b[i + 1] == b'"' && b[i + 2] == b'"' {
            let mut run_end = i + 3;
            while run_end < b.len() && b[run_end] == b'"' {
                run_end += 1;
            }
            return Some(run_end - 3);
        }
        i += 1;
    }
    None
}

fn classify(w: &str) -> TokenKind {
    if let Some(k) = Keyword::from_word(w) {
        return TokenKind::Keyword(k);
    }
    if is_ident(w) {
        return TokenKind::Ident;
    }
    let bytes = w.as_bytes();
    if bytes.iter().all(u8::is_ascii_digit) {
        return TokenKind::Number;
    }
    if bytes[0] == b'$' && is_ident(&w[1..]) {
        return TokenKind::Variable;
    }
    TokenKind::Word
}

/// Letters, digits, `_` and `-`, starting with a letter or `_`.
pub fn is_ident(w: &str) -> bool {
    let b = w.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return false,
    }
    b.iter()
        .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        tokenize(src).into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn words_are_classified() {
        use TokenKind::*;
        assert_eq!(
            kinds("GOAL code-review FROM goals/a.md -> out, x\n"),
            vec![
                Keyword(super::Keyword::Goal),
                Ident,
                Keyword(super::Keyword::From),
                Word,
                Arrow,
                Ident,
                Comma,
                Ident,
                Newline,
                Eof
            ]
        );
        assert_eq!(
            kinds("WITHIN $max 10"),
            vec![Keyword(super::Keyword::Within), Variable, Number, Eof]
        );
    }

    #[test]
    fn arrow_splits_words() {
        let t = tokenize("a->b");
        assert_eq!(t.len(), 4);
        assert_eq!(t[1].kind, TokenKind::Arrow);
    }

    #[test]
    fn comments_only_at_token_start() {
        assert_eq!(kinds("FROM C#.md # trailing\n").len(), 4);
    }

    #[test]
    fn strings_and_triples() {
        let src = "\"a \\\" b\" \"\"\"x\n\"y\"\"\"\"\n";
        let t = tokenize(src);
        assert_eq!(t[0].kind, TokenKind::Str { terminated: true });
        assert_eq!(&src[t[0].start as usize..t[0].end as usize], "\"a \\\" b\"");
        assert_eq!(t[1].kind, TokenKind::TripleStr { terminated: true });
        assert_eq!(
            &src[t[1].start as usize..t[1].end as usize],
            "\"\"\"x\n\"y\"\"\"\""
        );
    }

    #[test]
    fn unterminated_string_stops_at_line_end() {
        let t = tokenize("\"abc\r\nNAME x");
        assert_eq!(t[0].kind, TokenKind::Str { terminated: false });
        assert_eq!(t[0].end, 4);
        assert_eq!(t[1].kind, TokenKind::Newline);
    }
}
