//! Values in shell commands: one shell word each, never code.
//!
//! A template that ends up as a command line a shell parses (a `bash` tool
//! step's `command`) renders each `${{ expr }}` as the value quoted where it
//! stands, so the value reaches the program as text whatever it contains
//! (`x > injected.txt`, `$(rm -rf ~)`, a quote, a newline):
//!
//! - outside quotes, as one single-quoted word (`'` becomes `'\''`, the empty
//!   string `''`): `echo ${{ $input.topic }}` runs `echo 'x > injected.txt'`;
//! - inside `"…"`, by closing the double quote around that word
//!   (`"a "'x'" b"`), so the value stays part of the same word;
//! - inside `'…'`, with each `'` of the value written `'\''`;
//! - inside a `#` comment, with line breaks turned into spaces (a line break
//!   would end the comment and start a command).
//!
//! Where no quoting can keep a value literal — a heredoc's body, backquotes,
//! `${…}`, `$'…'`, right after a bare `$` — the command is refused: `validate`
//! reports it ([`lint`]) and rendering fails ([`render`]) rather than guess.
//!
//! `${{ raw(expr) }}` splices the value as shell code, as written: the
//! explicit way to build a command from text, which `validate` warns about.

use std::borrow::Cow;

use serde_json::Value;

use crate::expr::{Lookup, Part, Root, Template, ValueExpr};

/// The tools whose argument is a command line a shell parses, and that
/// argument's name.
pub const COMMAND_ARGS: &[(&str, &str)] = &[("bash", "command")];

/// The argument of `tool` that a shell parses, if any.
pub fn command_arg(tool: &str) -> Option<&'static str> {
    COMMAND_ARGS
        .iter()
        .find(|(t, _)| *t == tool)
        .map(|(_, a)| *a)
}

/// `s` as one POSIX shell word: single-quoted, `'` written `'\''`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Where in a command line an interpolated value lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Outside quotes (also inside `$(…)`).
    Word,
    /// Inside `'…'`.
    Single,
    /// Inside `"…"`.
    Double,
    /// In a `#` comment.
    Comment,
    /// Where quoting cannot keep the value literal; the reason.
    Unquotable(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `$(…)` with its open parentheses.
    Subst(u32),
    Single,
    Double,
    Backtick,
    /// `${…}` with its open braces.
    Param(u32),
    AnsiC,
    Comment,
}

/// A small shell lexer that tracks only what decides how a value is quoted.
#[derive(Debug, Clone, Default)]
struct Scanner {
    stack: Vec<Frame>,
    escape: bool,
    /// The last character was an unescaped `$` outside single quotes.
    dollar: bool,
    /// The last characters were this many `<` outside quotes.
    lt: u32,
    /// A `<<` was seen: the next line starts a heredoc body.
    heredoc_next_line: bool,
    /// Inside (or past) a heredoc body: from there on nothing is quotable.
    heredoc: bool,
    /// The next character starts a word (so `#` starts a comment).
    word_start: bool,
}

impl Scanner {
    fn new() -> Scanner {
        Scanner {
            word_start: true,
            ..Scanner::default()
        }
    }

    fn top(&self) -> Option<Frame> {
        self.stack.last().copied()
    }

    /// Outside quotes: top level or inside `$(…)`.
    fn in_word(&self) -> bool {
        matches!(self.top(), None | Some(Frame::Subst(_)))
    }

    fn feed(&mut self, text: &str) {
        for c in text.chars() {
            self.step(c);
        }
    }

    fn step(&mut self, c: char) {
        let was_dollar = std::mem::take(&mut self.dollar);
        let lt = std::mem::take(&mut self.lt);
        if lt == 2 && c != '<' && self.in_word() {
            // `<<` (not `<<<`): a heredoc whose body starts on the next line.
            self.heredoc_next_line = true;
        }
        if self.escape {
            self.escape = false;
            self.word_start = false;
            return;
        }
        match self.top() {
            None | Some(Frame::Subst(_)) => {
                if was_dollar {
                    match c {
                        '(' => {
                            self.stack.push(Frame::Subst(1));
                            self.word_start = true;
                            return;
                        }
                        '{' => {
                            self.stack.push(Frame::Param(1));
                            return;
                        }
                        '\'' => {
                            self.stack.push(Frame::AnsiC);
                            return;
                        }
                        _ => {}
                    }
                }
                match c {
                    '\\' => self.escape = true,
                    '\'' => self.stack.push(Frame::Single),
                    '"' => self.stack.push(Frame::Double),
                    '`' => self.stack.push(Frame::Backtick),
                    '$' => self.dollar = true,
                    '#' if self.word_start => self.stack.push(Frame::Comment),
                    '<' => self.lt = lt + 1,
                    '(' => {
                        if let Some(Frame::Subst(n)) = self.stack.last_mut() {
                            *n += 1;
                        }
                    }
                    ')' => {
                        if let Some(Frame::Subst(n)) = self.stack.last_mut() {
                            *n -= 1;
                            if *n == 0 {
                                self.stack.pop();
                            }
                        }
                    }
                    '\n' if self.heredoc_next_line => self.heredoc = true,
                    _ => {}
                }
                self.word_start = c.is_whitespace() || ";&|()<>".contains(c);
            }
            Some(Frame::Single) => {
                if c == '\'' {
                    self.stack.pop();
                }
            }
            Some(Frame::Double) => match c {
                '\\' => self.escape = true,
                '"' => {
                    self.stack.pop();
                }
                '`' => self.stack.push(Frame::Backtick),
                '$' => self.dollar = true,
                '(' if was_dollar => {
                    self.stack.push(Frame::Subst(1));
                    self.word_start = true;
                }
                '{' if was_dollar => self.stack.push(Frame::Param(1)),
                _ => {}
            },
            Some(Frame::Backtick) => match c {
                '\\' => self.escape = true,
                '`' => {
                    self.stack.pop();
                }
                _ => {}
            },
            Some(Frame::Param(_)) => match c {
                '\\' => self.escape = true,
                '{' => {
                    if let Some(Frame::Param(n)) = self.stack.last_mut() {
                        *n += 1;
                    }
                }
                '}' => {
                    if let Some(Frame::Param(n)) = self.stack.last_mut() {
                        *n -= 1;
                        if *n == 0 {
                            self.stack.pop();
                        }
                    }
                }
                _ => {}
            },
            Some(Frame::AnsiC) => match c {
                '\\' => self.escape = true,
                '\'' => {
                    self.stack.pop();
                }
                _ => {}
            },
            Some(Frame::Comment) => {
                if c == '\n' {
                    self.stack.pop();
                    self.word_start = true;
                    if self.in_word() && self.heredoc_next_line {
                        self.heredoc = true;
                    }
                }
            }
        }
    }

    fn context(&self) -> Context {
        if self.heredoc {
            return Context::Unquotable("inside a heredoc's body");
        }
        if self.escape {
            return Context::Unquotable("right after a `\\`");
        }
        match self.top() {
            None | Some(Frame::Subst(_)) if self.dollar => Context::Unquotable("right after a `$`"),
            None | Some(Frame::Subst(_)) => Context::Word,
            Some(Frame::Single) => Context::Single,
            Some(Frame::Double) => Context::Double,
            Some(Frame::Comment) => Context::Comment,
            Some(Frame::Backtick) => Context::Unquotable("inside backquotes"),
            Some(Frame::Param(_)) => Context::Unquotable("inside `${…}`"),
            Some(Frame::AnsiC) => Context::Unquotable("inside `$'…'`"),
        }
    }

    /// The text that stands for `value` here; `None` where nothing can.
    fn emit(&mut self, value: &str) -> Result<String, &'static str> {
        let out = match self.context() {
            Context::Word => quote(value),
            Context::Double => format!("\"{}\"", quote(value)),
            Context::Single => value.replace('\'', "'\\''"),
            Context::Comment => value.replace(['\n', '\r'], " "),
            Context::Unquotable(why) => return Err(why),
        };
        self.word_start = false;
        Ok(out)
    }
}

/// Why a command could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellError(pub String);

impl std::fmt::Display for ShellError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShellError {}

fn unquotable(why: &str, what: &dyn std::fmt::Display) -> ShellError {
    ShellError(format!(
        "the value of `{what}` cannot be quoted {why}: a value in a command is one shell word, and there it would be read as code; move the interpolation outside it (or mark a deliberate splice `${{{{ raw(…) }}}}`)"
    ))
}

/// A value as the text a template puts in its place (`null` is empty).
fn text_of(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s),
        Value::Null => Cow::Borrowed(""),
        other => Cow::Owned(other.to_string()),
    }
}

/// Render `t` as a command line: every interpolated value one shell word
/// (see the module doc); `raw(…)` spliced as written.
pub fn render(t: &Template, scope: &dyn Lookup) -> Result<String, ShellError> {
    let mut out = String::new();
    let mut sc = Scanner::new();
    for p in &t.parts {
        match p {
            Part::Text(s) => {
                sc.feed(s);
                out.push_str(s);
            }
            Part::Raw(e) => {
                let v = e.eval(scope);
                let s = text_of(&v);
                sc.feed(&s);
                out.push_str(&s);
            }
            Part::Expr(e) => {
                let v = e.eval(scope);
                let s = sc.emit(&text_of(&v)).map_err(|why| unquotable(why, e))?;
                out.push_str(&s);
            }
            Part::Dsl(text) => {
                let lookup = |n: &str| {
                    scope
                        .lookup(&Root::Var(n.to_owned()))
                        .map(|v| text_of(v.as_ref()).into_owned())
                };
                for piece in crate::template::pieces(text, |n| lookup(n).is_some()) {
                    match piece {
                        crate::template::Piece::Literal(s) => {
                            sc.feed(s);
                            out.push_str(s);
                        }
                        crate::template::Piece::Var { name, start, end } => match lookup(name) {
                            Some(v) => {
                                let s = sc
                                    .emit(&v)
                                    .map_err(|why| unquotable(why, &format!("${name}")))?;
                                out.push_str(&s);
                            }
                            None => {
                                let s = &text[start..end];
                                sc.feed(s);
                                out.push_str(s);
                            }
                        },
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A command argument's value: a template renders with [`render`]; a whole
/// expression (`$input.cmd`) is one quoted word like any other value; a
/// literal is the command as written.
pub fn eval_command(x: &ValueExpr, scope: &dyn Lookup) -> Result<Value, ShellError> {
    Ok(match x {
        ValueExpr::Literal(v) => v.clone(),
        ValueExpr::Template(t) => Value::String(render(t, scope)?),
        ValueExpr::Expr(e) => Value::String(quote(&text_of(&e.eval(scope)))),
        other => other.eval(scope),
    })
}

/// A tool call's arguments, with the command argument of a shell tool
/// ([`COMMAND_ARGS`]) rendered by [`eval_command`]. When the arguments as a
/// whole come from a value (`inputs: $steps.x`), a command string in it is
/// quoted as one word: a value never becomes code.
pub fn eval_tool_args(
    tool: &str,
    args: &ValueExpr,
    scope: &dyn Lookup,
) -> Result<Value, ShellError> {
    let Some(key) = command_arg(tool) else {
        return Ok(args.eval(scope));
    };
    match args {
        ValueExpr::Literal(v) => Ok(v.clone()),
        ValueExpr::Object(o) => {
            let mut out = serde_json::Map::new();
            for (k, x) in o {
                let v = if k == key {
                    eval_command(x, scope)?
                } else {
                    x.eval(scope)
                };
                out.insert(k.clone(), v);
            }
            Ok(Value::Object(out))
        }
        other => {
            let mut v = other.eval(scope);
            if let Some(Value::String(s)) = v.get_mut(key) {
                *s = quote(s);
            }
            Ok(v)
        }
    }
}

/// What [`lint`] finds in a command template's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lint {
    /// `${{ raw(…) }}`: the value is spliced as shell code.
    Raw,
    /// An interpolation where no quoting keeps the value literal; why.
    Unquotable(&'static str),
}

/// One finding of [`lint`]: the byte range of the whole `${{ … }}` in the
/// source, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub start: usize,
    pub end: usize,
    pub lint: Lint,
}

/// The problems of a command template's source (`echo ${{ $input.x }}`):
/// raw splices, and interpolations no quoting can keep literal. A source that
/// does not parse as a template yields nothing (that is reported elsewhere).
pub fn lint(src: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    if Template::parse(src).is_err() {
        return out;
    }
    let mut sc = Scanner::new();
    let mut at = 0;
    while let Some(i) = src[at..].find("${{") {
        let start = at + i;
        sc.feed(&src[at..start]);
        let inner_start = start + 3;
        let Some(close) = src[inner_start..].find("}}") else {
            break;
        };
        let end = inner_start + close + 2;
        let inner = src[inner_start..inner_start + close].trim();
        if crate::expr::raw_inner(inner).is_some() {
            // What a raw value does to the quoting is unknown here; the
            // renderer follows it.
            out.push(Finding {
                start,
                end,
                lint: Lint::Raw,
            });
        } else if let Context::Unquotable(why) = sc.context() {
            out.push(Finding {
                start,
                end,
                lint: Lint::Unquotable(why),
            });
        } else {
            sc.word_start = false;
        }
        at = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn lint_and_render_never_panic(
            s in "\\PC{0,60}|[a-z$.{}()\\[\\]0-9 €é…'\"`#<\\\\\n]{0,60}"
        ) {
            let _ = lint(&s);
            if let Ok(t) = Template::parse(&s) {
                let _ = render(&t, &S(serde_json::json!({"topic": "x"})));
            }
        }
    }
    use serde_json::json;

    struct S(Value);
    impl Lookup for S {
        fn lookup(&self, root: &Root) -> Option<Cow<'_, Value>> {
            match root {
                Root::Input => Some(Cow::Borrowed(&self.0)),
                _ => None,
            }
        }
    }

    fn sh(src: &str, topic: &str) -> Result<String, ShellError> {
        let t = Template::parse(src).unwrap();
        render(&t, &S(json!({ "topic": topic })))
    }

    /// What bash makes of `line`: `printf '%s\n' <line>`'s words.
    fn words(line: &str) -> Vec<String> {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("for w in {line}; do printf '%s\\0' \"$w\"; done"))
            .output()
            .unwrap();
        let mut w: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .split('\0')
            .map(str::to_owned)
            .collect();
        w.pop();
        w
    }

    const HOSTILE: &[&str] = &[
        "x > injected.txt",
        "a'b",
        "'; touch pwned; '",
        "\"; touch pwned; \"",
        "$(touch pwned)",
        "`touch pwned`",
        "a\nb",
        "\\",
        "",
        "${HOME}",
        "*",
    ];

    #[test]
    fn a_value_is_one_word_wherever_it_stands() {
        for v in HOSTILE {
            assert_eq!(
                sh("echo ${{ $input.topic }}", v).unwrap(),
                format!("echo {}", quote(v))
            );
            for (src, want) in [
                ("${{ $input.topic }}", v.to_string()),
                ("\"a ${{ $input.topic }} b\"", format!("a {v} b")),
                ("'a ${{ $input.topic }} b'", format!("a {v} b")),
                ("pre${{ $input.topic }}post", format!("pre{v}post")),
                (
                    "\"$(echo ${{ $input.topic }})\"",
                    v.trim_end_matches('\n').to_string(),
                ),
            ] {
                let line = sh(src, v).unwrap();
                assert_eq!(words(&line), [want], "{src} with {v:?} rendered as {line}");
            }
        }
    }

    #[test]
    fn comments_keep_values_on_their_line() {
        let line = sh("true # ${{ $input.topic }}\necho ok", "a\ntouch pwned").unwrap();
        assert_eq!(line, "true # a touch pwned\necho ok");
    }

    #[test]
    fn unquotable_places_are_refused() {
        for src in [
            "cat <<EOF\n${{ $input.topic }}\nEOF",
            "echo `echo ${{ $input.topic }}`",
            "echo ${X:-${{ $input.topic }}}",
            "echo $'${{ $input.topic }}'",
            "echo $${{ $input.topic }}",
        ] {
            assert!(sh(src, "x").is_err(), "{src}");
            assert!(
                matches!(
                    lint(src)[..],
                    [Finding {
                        lint: Lint::Unquotable(_),
                        ..
                    }]
                ),
                "{src}: {:?}",
                lint(src)
            );
        }
        // A heredoc whose delimiter is a value still has a body.
        assert!(sh("cat <<${{ $input.topic }}\n${{ $input.topic }}\nx", "x").is_err());
        // A here-string and a heredoc's own line are fine.
        assert!(sh("cat <<< ${{ $input.topic }}", "x").is_ok());
        assert!(sh("cat <<EOF | grep ${{ $input.topic }}\nx\nEOF", "x").is_ok());
        assert!(lint("echo \"${{ $input.topic }}\" '${{ $input.topic }}'").is_empty());
    }

    #[test]
    fn raw_splices_and_is_linted() {
        let src = "echo ${{ raw($input.topic) }}";
        assert_eq!(sh(src, "a > b").unwrap(), "echo a > b");
        let l = lint(src);
        assert_eq!(
            l,
            [Finding {
                start: 5,
                end: src.len(),
                lint: Lint::Raw
            }]
        );
        // A raw value that opens a quote is followed at run time.
        assert_eq!(
            sh("echo ${{ raw($input.topic) }}${{ $input.topic }}\"", "\"").unwrap(),
            "echo \"\"'\"'\"\""
        );
    }

    #[test]
    fn tool_arguments() {
        let scope = S(json!({ "topic": "a; touch pwned" }));
        let args = crate::expr::compile_value(
            &json!({ "command": "echo ${{ $input.topic }}", "timeout": "${{ $input.topic }}" }),
        )
        .unwrap();
        let v = eval_tool_args("bash", &args, &scope).unwrap();
        assert_eq!(v["command"], "echo 'a; touch pwned'");
        assert_eq!(v["timeout"], "a; touch pwned");
        let v = eval_tool_args("write", &args, &scope).unwrap();
        assert_eq!(v["command"], "echo a; touch pwned");
        let whole = crate::expr::compile_value(&json!({ "command": "$input.topic" })).unwrap();
        let v = eval_tool_args("bash", &whole, &scope).unwrap();
        assert_eq!(v["command"], "'a; touch pwned'");
        let literal = crate::expr::compile_value(&json!({ "command": "ls > x" })).unwrap();
        assert_eq!(
            eval_tool_args("bash", &literal, &scope).unwrap()["command"],
            "ls > x"
        );
    }
}
