//! Shell analysis for the bash policy: what a command line would run, read and
//! write, found by parsing it as bash does rather than by looking at its text.
//!
//! What this is for: turning `cd src && cat *.rs | grep -n foo > out.txt` into the
//! list of things the gate must judge — every simple command that would run (after
//! `;`, `&&`, `||`, `|`, newlines, inside `$(…)`, backticks, `<(…)`, subshells,
//! brace groups, functions, loops and conditionals, through `eval`, `sh -c`,
//! `bash -c`, `trap`, and through wrappers such as `env`, `xargs`, `timeout`,
//! `nice`, `nohup`, `stdbuf`, `command`, `builtin`, `exec`, `time`, `busybox` and
//! `find -exec`), the words that may name files, the redirection targets, and the
//! directories `cd` moves to. Words are expanded as far as they can be known
//! statically: quotes removed, `\` escapes and `$'…'` decoded, `~` replaced by the
//! home directory. The parser is `brush-parser`, the parser of the brush shell,
//! which aims at bash compatibility.
//!
//! Anything that cannot be analysed is refused with [`Unanalysable`], never
//! guessed at: a line that does not parse; a command name that is not a plain
//! word (`$CMD`, `$(…)`, a glob, non-ASCII); `eval` or `sh -c` of a string only
//! known at run time; shells reading commands from stdin (`curl … | bash`);
//! unquoted brace expansion; `${…}` forms beyond plain `$name`/`${name}`;
//! arithmetic that mentions variables (array subscripts in arithmetic can run
//! commands); assignments to variables that change what later commands run
//! (`PATH`, `LD_PRELOAD`, `BASH_ENV`, `GIT_SSH_COMMAND`, …); `coproc`, `setsid`,
//! `enable`, `bind`, `alias`; invisible, bidirectional-control and ASCII-look-alike
//! characters; control characters and NUL.
//!
//! A word whose value is only known at run time (`$X`, `$(cmd)`, `{}` of
//! `find -exec`, the stdin arguments of `xargs`) is recorded as dynamic; the gate
//! refuses it as an argument of any command outside a small set that never opens
//! files ([`NO_FILE_COMMANDS`]), because the path it may name cannot be checked.
//!
//! What this is not: an interpreter. It does not follow what an allowed program
//! does with its input (`make`, `npm run`, `python -c`, `git` with hooks run
//! whatever their files say); the allowlist decides which of those may run.

use std::path::Path;

use brush_parser::ast::{
    self, AndOrList, Assignment, AssignmentName, AssignmentValue, Command,
    CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, ExtendedTestExpr, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, Pipeline, SimpleCommand,
};
use brush_parser::word::{TildeExpr, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};

/// Lines longer than this are refused rather than analysed.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// How deep `$(…)`, `sh -c`, `eval` may nest before the line is refused.
const MAX_DEPTH: usize = 16;

/// Commands that never open a file named by an argument, so a run-time-only
/// argument (`echo "$(date)"`) is harmless to them.
pub const NO_FILE_COMMANDS: &[&str] = &[
    "echo", "printf", "true", "false", ":", "test", "[", "seq", "sleep", "expr", "basename",
    "dirname", "exit", "return", "break", "continue", "shift", "wait",
];

/// The environment variables the bash tool passes to its shell (see
/// [`crate::secrets`]); assigning one of them changes every later
/// command's environment, so it is refused.
pub use crate::secrets::CHILD_ENV;

/// Why a line was refused without judging it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unanalysable(pub String);

/// One word, expanded as far as it is known before the shell runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Val {
    /// The value when static; the source text when dynamic.
    pub text: String,
    /// Part of it is only known at run time (`$X`, `$(…)`, `$((…))`).
    pub dynamic: bool,
    /// It has an unquoted `*`, `?` or `[`: bash expands it against the files.
    pub glob: bool,
}

impl Val {
    pub(crate) fn literal(text: impl Into<String>) -> Val {
        Val {
            text: text.into(),
            dynamic: false,
            glob: false,
        }
    }
}

/// A simple command that would run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandUse {
    /// Assignments and words joined by single spaces: what the lists match.
    pub text: String,
    /// The command name as written.
    pub name: String,
    /// Words that may name files (arguments and assignment values).
    pub args: Vec<Val>,
    /// A wrapper (`env`, `timeout`, `sh -c`, …) whose inner command is listed
    /// after it: the denylist applies to it, the allowlist to the inner command.
    pub transparent: bool,
    /// Why some argument is only known at run time, if one is.
    pub dynamic: Option<String>,
    /// How many of `args` come first from assignments before the command
    /// (`X=v cmd`) rather than from its own words.
    #[serde(default)]
    pub assigned: usize,
}

impl CommandUse {
    /// The forms the denylist is matched against: as written, and with the
    /// command's directory dropped (`/bin/rm -rf /` is `rm -rf /` too).
    pub fn deny_forms(&self) -> Vec<String> {
        let mut forms = vec![self.text.clone()];
        let base = basename(&self.name);
        if base != self.name
            && let Some(pos) = self.text.find(&self.name)
        {
            let mut t = self.text.clone();
            t.replace_range(pos..pos + self.name.len(), base);
            forms.push(t);
        }
        forms
    }

    /// The command never opens files named by its arguments.
    pub fn is_no_file(&self) -> bool {
        NO_FILE_COMMANDS.contains(&basename(&self.name))
    }
}

/// Something the gate must judge, in the order the shell would meet it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Item {
    Command(CommandUse),
    /// Words that may name files to read (loop values, `[[ -f x ]]` operands).
    Paths(Vec<Val>),
    /// `< file`, `<> file`.
    Read(Val),
    /// `> file`, `>> file`, `&> file`, `<> file`, `time -o file`.
    Write(Val),
    /// `cd dir`: later relative paths may be relative to it.
    Cd(Val),
}

/// The result of analysing one line.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Analysis {
    pub items: Vec<Item>,
    /// Every pipeline of two or more commands, as `a | b` (for denylist patterns
    /// such as `curl * | bash`).
    pub pipelines: Vec<String>,
}

impl Analysis {
    pub fn commands(&self) -> impl Iterator<Item = &CommandUse> {
        self.items.iter().filter_map(|i| match i {
            Item::Command(c) => Some(c),
            _ => None,
        })
    }
}

/// Analyse a bash command line. `home` expands `~`.
///
/// The parse runs in a worker process under a memory and a time limit (see
/// [`worker`]): the parser does not finish on every input, and a
/// line it cannot analyse within the limits is refused like any other line that
/// cannot be analysed. The cheap checks run here first, so an oversized line is
/// never sent.
pub fn analyze(line: &str, home: Option<&Path>) -> Result<Analysis, Unanalysable> {
    precheck(line)?;
    worker::analyze(line, home)
}

fn precheck(line: &str) -> Result<(), Unanalysable> {
    if line.len() > MAX_LINE_BYTES {
        return Err(refuse(format!(
            "the command is longer than {MAX_LINE_BYTES} bytes"
        )));
    }
    scan_chars(line)
}

/// [`analyze`] in this process, with no bound on what the parser may use: only
/// for the worker.
pub(super) fn analyze_here(line: &str, home: Option<&Path>) -> Result<Analysis, Unanalysable> {
    precheck(line)?;
    let mut a = Analyzer {
        home,
        out: Analysis::default(),
        depth: 0,
    };
    a.program(line)?;
    Ok(a.out)
}

fn refuse(msg: impl Into<String>) -> Unanalysable {
    Unanalysable(msg.into())
}

/// The last path segment of a command name.
pub fn basename(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Refuse characters that hide what a line does from a reader, or that the
/// shell treats differently from how they look.
pub fn scan_chars(s: &str) -> Result<(), Unanalysable> {
    for c in s.chars() {
        let code = c as u32;
        let why = if c == '\0' {
            Some("a NUL byte")
        } else if c.is_control() && c != '\n' && c != '\t' {
            Some("a control character")
        } else if is_invisible(code) {
            Some("an invisible or bidirectional-control character")
        } else if is_lookalike(code) {
            Some("a character that looks like ASCII punctuation or space but is not")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(refuse(format!("the command contains {why} (U+{code:04X})")));
        }
    }
    Ok(())
}

fn is_invisible(c: u32) -> bool {
    matches!(c,
        0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF9..=0xFFFB | 0x1D173..=0x1D17A | 0xE0000..=0xE0FFF)
}

fn is_lookalike(c: u32) -> bool {
    matches!(c,
        // spaces
        0x00A0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000
        // fullwidth ASCII
        | 0xFF01..=0xFF5E
        // slashes, dots, semicolons, pipes, hyphens and minus signs, asterisks
        | 0x2215 | 0x2044 | 0x29F8 | 0x2571 | 0x2024 | 0xFE52 | 0x037E | 0xFE54 | 0x01C0
        | 0x2223 | 0x2010..=0x2015 | 0x2212 | 0xFE63 | 0x2217 | 0x204E | 0x066D | 0x2236
        | 0xFE55 | 0x0589 | 0x02D0 | 0xA789 | 0x2039 | 0x203A | 0x3008 | 0x3009)
}

/// Parser options matching non-interactive bash: no extglob, tilde at word
/// start.
fn parser_options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion_at_word_start: true,
        tilde_expansion_after_colon: false,
        ..ParserOptions::default()
    }
}

fn parse_program(text: &str) -> Result<ast::Program, Unanalysable> {
    let opts = parser_options();
    // The parser is third-party code fed by the model: a panic in it must be a
    // refusal, not a crash.
    let result = std::panic::catch_unwind(|| {
        let mut p = Parser::new(std::io::Cursor::new(text.as_bytes()), &opts);
        p.parse_program()
    });
    match result {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(refuse(format!("it cannot be parsed as shell: {e}"))),
        Err(_) => Err(refuse("it cannot be parsed as shell (parser failure)")),
    }
}

fn parse_word(raw: &str) -> Result<Vec<WordPieceWithSource>, Unanalysable> {
    let opts = parser_options();
    let result = std::panic::catch_unwind(|| brush_parser::word::parse(raw, &opts));
    match result {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(refuse(format!("the word `{raw}` cannot be parsed: {e}"))),
        Err(_) => Err(refuse(format!("the word `{raw}` cannot be parsed"))),
    }
}

fn parse_heredoc(raw: &str) -> Result<Vec<WordPieceWithSource>, Unanalysable> {
    let opts = parser_options();
    let result = std::panic::catch_unwind(|| brush_parser::word::parse_heredoc(raw, &opts));
    match result {
        Ok(Ok(p)) => Ok(p),
        _ => Err(refuse("a here-document cannot be parsed")),
    }
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Assigning these changes what later commands run or how they run.
fn protected_var(name: &str, value: &Val) -> bool {
    const PAGERS: &[&str] = &["PAGER", "GIT_PAGER", "MANPAGER", "SYSTEMD_PAGER"];
    if PAGERS.contains(&name) {
        // `GIT_PAGER=cat git log` is how agents avoid a pager; anything else
        // there is a command to run.
        return value.dynamic || !matches!(value.text.as_str(), "" | "cat");
    }
    const NAMES: &[&str] = &[
        "IFS",
        "ENV",
        "BASH_ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PROMPT_COMMAND",
        "PS0",
        "PS1",
        "PS2",
        "PS4",
        "CDPATH",
        "GLOBIGNORE",
        "HISTFILE",
        "BASH_XTRACEFD",
        "EXECIGNORE",
        "BASH_LOADABLES_PATH",
        "BASH_COMPAT",
        "FUNCNEST",
        "EDITOR",
        "VISUAL",
        "GIT_EDITOR",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_EXTERNAL_DIFF",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_EXEC_PATH",
        "GIT_TEMPLATE_DIR",
        "LESSOPEN",
        "LESSCLOSE",
        "NODE_OPTIONS",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "BROWSER",
        "RUSTC_WRAPPER",
        "BASH_CMDS",
        "BASH_ALIASES",
        "RUSTC",
        "CARGO_HOME",
        "MAKEFLAGS",
        "CC",
        "CXX",
    ];
    CHILD_ENV.contains(&name)
        || NAMES.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || name.starts_with("BASH_FUNC_")
        || name.starts_with("GIT_CONFIG")
}

/// `$name`, `${name}`, `${#name}` and the special parameters: the only
/// parameter expansions whose evaluation cannot run anything.
fn simple_param(src: &str) -> bool {
    let inner = if let Some(r) = src.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        match r.strip_prefix('#') {
            Some(rest) if !rest.is_empty() => rest,
            _ => r,
        }
    } else if let Some(r) = src.strip_prefix('$') {
        r
    } else {
        return false;
    };
    is_name(inner) || (inner.len() == 1 && "?#$!*@-0123456789".contains(inner))
}

/// Arithmetic without variables: referencing a variable evaluates its value as
/// arithmetic, and `a[$(cmd)]` in that value runs `cmd`.
fn check_arith(expr: &str) -> Result<(), Unanalysable> {
    if expr
        .chars()
        .all(|c| c.is_ascii_digit() || c.is_ascii_whitespace() || "+-*/%()<>=!&|^~?:,".contains(c))
    {
        Ok(())
    } else {
        Err(refuse(format!(
            "the arithmetic `{expr}` mentions variables or substitutions, which can run commands"
        )))
    }
}

/// Decode the body of `$'…'`.
fn decode_ansi_c(s: &str) -> Result<String, Unanalysable> {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let simple = match e {
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\u{b}'),
            '\\' | '\'' | '"' | '?' => Some(e),
            _ => None,
        };
        if let Some(ch) = simple {
            out.push(ch);
            continue;
        }
        let (radix, max, first) = match e {
            '0'..='7' => (8, 3, Some(e)),
            'x' => (16, 2, None),
            'u' => (16, 4, None),
            'U' => (16, 8, None),
            _ => {
                return Err(refuse(format!(
                    "the escape `\\{e}` in $'…' is not analysed"
                )));
            }
        };
        let mut digits: String = first.into_iter().collect();
        while digits.len() < max {
            match chars.peek() {
                Some(d) if d.is_digit(radix) => {
                    digits.push(*d);
                    chars.next();
                }
                _ => break,
            }
        }
        let code = u32::from_str_radix(&digits, radix)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| refuse(format!("a $'…' escape is not a character: {s}")))?;
        out.push(code);
    }
    scan_chars(&out)?;
    Ok(out)
}

/// Option grammar of a wrapper command.
struct Opts {
    /// Options without a value (`-i`, `--foreground`).
    flags: &'static [&'static str],
    /// Options taking a value (`-n`, `--signal`): `-n 5`, `-n5`, `--signal=KILL`.
    valued: &'static [&'static str],
    /// `nice -10`.
    numeric: bool,
}

/// Parsed options of a wrapper: (index of the first operand, options with values).
type Parsed = (usize, Vec<(String, Option<Val>)>);

fn parse_opts(cmd: &str, words: &[Val], spec: &Opts) -> Result<Parsed, Unanalysable> {
    let mut i = 1;
    let mut seen = Vec::new();
    while i < words.len() {
        let w = &words[i];
        if w.dynamic {
            return Err(refuse(format!(
                "an option of `{cmd}` is only known at run time (`{}`)",
                w.text
            )));
        }
        let t = w.text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (format!("--{n}"), Some(Val::literal(v))),
                None => (t.to_owned(), None),
            };
            if spec.valued.contains(&name.as_str()) {
                let value = match value {
                    Some(v) => v,
                    None => {
                        i += 1;
                        words
                            .get(i)
                            .cloned()
                            .ok_or_else(|| refuse(format!("`{cmd} {name}` is missing its value")))?
                    }
                };
                seen.push((name, Some(value)));
            } else if spec.flags.contains(&name.as_str()) && value.is_none() {
                seen.push((name, None));
            } else {
                return Err(refuse(format!(
                    "the option `{t}` of `{cmd}` is not understood"
                )));
            }
            i += 1;
            continue;
        }
        if spec.numeric && t[1..].chars().all(|c| c.is_ascii_digit()) {
            seen.push((t.to_owned(), None));
            i += 1;
            continue;
        }
        // A cluster of short options, the last of which may take a value.
        let letters: Vec<char> = t[1..].chars().collect();
        let mut j = 0;
        while j < letters.len() {
            let opt = format!("-{}", letters[j]);
            if spec.valued.contains(&opt.as_str()) {
                let rest: String = letters[j + 1..].iter().collect();
                let value = if rest.is_empty() {
                    i += 1;
                    words
                        .get(i)
                        .cloned()
                        .ok_or_else(|| refuse(format!("`{cmd} {opt}` is missing its value")))?
                } else {
                    Val::literal(rest)
                };
                seen.push((opt, Some(value)));
                break;
            } else if spec.flags.contains(&opt.as_str()) {
                seen.push((opt, None));
                j += 1;
            } else {
                return Err(refuse(format!(
                    "the option `{t}` of `{cmd}` is not understood"
                )));
            }
        }
        i += 1;
    }
    Ok((i, seen))
}

mod commands;
pub mod worker;

struct Analyzer<'h> {
    home: Option<&'h Path>,
    out: Analysis,
    depth: usize,
}

impl Analyzer<'_> {
    fn program(&mut self, text: &str) -> Result<(), Unanalysable> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(refuse("commands are nested too deeply"));
        }
        let program = parse_program(text)?;
        for complete in &program.complete_commands {
            self.list(complete)?;
        }
        self.depth -= 1;
        Ok(())
    }

    fn list(&mut self, list: &CompoundList) -> Result<(), Unanalysable> {
        for item in &list.0 {
            self.and_or(&item.0)?;
        }
        Ok(())
    }

    fn and_or(&mut self, list: &AndOrList) -> Result<(), Unanalysable> {
        self.pipeline(&list.first)?;
        for next in &list.additional {
            match next {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p)?,
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, p: &Pipeline) -> Result<(), Unanalysable> {
        let mut texts = Vec::new();
        for cmd in &p.seq {
            texts.push(self.command(cmd)?);
        }
        if texts.len() > 1 {
            self.out.pipelines.push(texts.join(" | "));
        }
        Ok(())
    }

    /// Analyse one command; returns its text for pipeline patterns.
    fn command(&mut self, cmd: &Command) -> Result<String, Unanalysable> {
        match cmd {
            Command::Simple(sc) => self.simple(sc),
            Command::Compound(cc, redirects) => {
                self.compound(cc)?;
                if let Some(r) = redirects {
                    for io in &r.0 {
                        self.redirect(io)?;
                    }
                }
                Ok(cmd.to_string())
            }
            Command::Function(f) => {
                if f.fname.value == "command_not_found_handle" {
                    return Err(refuse(
                        "defining command_not_found_handle changes what unknown commands run",
                    ));
                }
                self.compound(&f.body.0)?;
                if let Some(r) = &f.body.1 {
                    for io in &r.0 {
                        self.redirect(io)?;
                    }
                }
                Ok(cmd.to_string())
            }
            Command::ExtendedTest(t, redirects) => {
                self.ext_test(&t.expr)?;
                let text = t.to_string();
                self.out.items.push(Item::Command(CommandUse {
                    text: text.clone(),
                    name: "[[".to_owned(),
                    args: Vec::new(),
                    transparent: false,
                    dynamic: None,
                    assigned: 0,
                }));
                if let Some(r) = redirects {
                    for io in &r.0 {
                        self.redirect(io)?;
                    }
                }
                Ok(text)
            }
        }
    }

    fn compound(&mut self, cc: &CompoundCommand) -> Result<(), Unanalysable> {
        match cc {
            CompoundCommand::Arithmetic(a) => check_arith(&a.expr.value),
            CompoundCommand::ArithmeticForClause(f) => {
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    check_arith(&e.value)?;
                }
                self.list(&f.body.list)
            }
            CompoundCommand::BraceGroup(b) => self.list(&b.list),
            CompoundCommand::Subshell(s) => self.list(&s.list),
            CompoundCommand::ForClause(f) => {
                if let Some(values) = &f.values {
                    let mut vals = Vec::new();
                    for w in values {
                        vals.push(self.eval_word(&w.value)?);
                    }
                    self.out.items.push(Item::Paths(vals));
                }
                self.list(&f.body.list)
            }
            CompoundCommand::CaseClause(c) => {
                let v = self.eval_word(&c.value.value)?;
                self.out.items.push(Item::Paths(vec![v]));
                for case in &c.cases {
                    for p in &case.patterns {
                        self.eval_word(&p.value)?;
                    }
                    if let Some(body) = &case.cmd {
                        self.list(body)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition)?;
                self.list(&i.then)?;
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c)?;
                    }
                    self.list(&e.body)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0)?;
                self.list(&w.1.list)
            }
            CompoundCommand::Coprocess(_) => Err(refuse("`coproc` is not allowed")),
        }
    }

    fn ext_test(&mut self, e: &ExtendedTestExpr) -> Result<(), Unanalysable> {
        match e {
            ExtendedTestExpr::And(a, b) | ExtendedTestExpr::Or(a, b) => {
                self.ext_test(a)?;
                self.ext_test(b)
            }
            ExtendedTestExpr::Not(a) | ExtendedTestExpr::Parenthesized(a) => self.ext_test(a),
            ExtendedTestExpr::UnaryTest(_, w) => {
                let v = self.eval_word(&w.value)?;
                self.out.items.push(Item::Paths(vec![v]));
                Ok(())
            }
            ExtendedTestExpr::BinaryTest(pred, l, r) => {
                use ast::BinaryPredicate as B;
                let lv = self.eval_word(&l.value)?;
                let rv = self.eval_word(&r.value)?;
                let arithmetic = matches!(
                    pred,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                );
                if arithmetic {
                    for v in [&lv, &rv] {
                        let t = v.text.trim_start_matches('-');
                        if v.dynamic || t.is_empty() || !t.chars().all(|c| c.is_ascii_digit()) {
                            return Err(refuse(format!(
                                "`[[ … {pred} … ]]` evaluates `{}` as arithmetic, which can run commands",
                                v.text
                            )));
                        }
                    }
                }
                if matches!(
                    pred,
                    B::FilesReferToSameDeviceAndInodeNumbers
                        | B::LeftFileIsNewerOrExistsWhenRightDoesNot
                        | B::LeftFileIsOlderOrDoesNotExistWhenRightDoes
                ) {
                    self.out.items.push(Item::Paths(vec![lv, rv]));
                }
                Ok(())
            }
        }
    }

    fn redirect(&mut self, io: &IoRedirect) -> Result<(), Unanalysable> {
        match io {
            IoRedirect::File(_, kind, target) => match target {
                IoFileRedirectTarget::Filename(w) => {
                    let v = self.redirect_target(&w.value)?;
                    match kind {
                        IoFileRedirectKind::Read => self.out.items.push(Item::Read(v)),
                        IoFileRedirectKind::ReadAndWrite => {
                            self.out.items.push(Item::Read(v.clone()));
                            self.out.items.push(Item::Write(v));
                        }
                        _ => self.out.items.push(Item::Write(v)),
                    }
                    Ok(())
                }
                IoFileRedirectTarget::Fd(_) => Ok(()),
                IoFileRedirectTarget::ProcessSubstitution(_, sub) => self.list(&sub.list),
                IoFileRedirectTarget::Duplicate(w) => {
                    let v = self.eval_word(&w.value)?;
                    let t = v.text.trim_end_matches('-');
                    if !v.dynamic && (t.is_empty() || t.chars().all(|c| c.is_ascii_digit())) {
                        Ok(())
                    } else {
                        // `>& file` writes to a file.
                        let v = self.redirect_target(&w.value)?;
                        self.out.items.push(Item::Write(v));
                        Ok(())
                    }
                }
            },
            IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    let pieces = parse_heredoc(&doc.doc.value)?;
                    let mut v = Val::literal("");
                    let mut skel = String::new();
                    self.pieces(&doc.doc.value, &pieces, true, &mut v, &mut skel)?;
                }
                Ok(())
            }
            IoRedirect::HereString(_, w) => {
                self.eval_word(&w.value)?;
                Ok(())
            }
            IoRedirect::OutputAndError(w, _) => {
                let v = self.redirect_target(&w.value)?;
                self.out.items.push(Item::Write(v));
                Ok(())
            }
        }
    }

    fn redirect_target(&mut self, raw: &str) -> Result<Val, Unanalysable> {
        let v = self.eval_word(raw)?;
        if v.dynamic {
            return Err(refuse(format!(
                "the redirection target `{raw}` is only known at run time"
            )));
        }
        if v.glob {
            return Err(refuse(format!("the redirection target `{raw}` is a glob")));
        }
        Ok(v)
    }

    fn simple(&mut self, sc: &SimpleCommand) -> Result<String, Unanalysable> {
        let mut assigns: Vec<(String, Vec<Val>)> = Vec::new();
        let mut words: Vec<Val> = Vec::new();
        for item in sc.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, true, &mut assigns, &mut words)?;
        }
        if let Some(name) = &sc.word_or_name {
            words.push(self.eval_word(&name.value)?);
        }
        for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, false, &mut assigns, &mut words)?;
        }
        if words.is_empty() {
            // Only assignments and redirections: nothing runs.
            return Ok(assigns
                .iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>()
                .join(" "));
        }
        self.run(assigns, words)
    }

    /// One prefix or suffix item of a simple command.
    fn item(
        &mut self,
        item: &CommandPrefixOrSuffixItem,
        in_prefix: bool,
        assigns: &mut Vec<(String, Vec<Val>)>,
        words: &mut Vec<Val>,
    ) -> Result<(), Unanalysable> {
        match item {
            CommandPrefixOrSuffixItem::IoRedirect(io) => self.redirect(io)?,
            CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                let (text, vals) = self.assignment(a)?;
                if in_prefix {
                    assigns.push((text, vals));
                } else {
                    // `export A=1`, `declare B=2`: an argument that assigns; its
                    // value is checked as a path through the `=` split.
                    let mut v = self.eval_word(&w.value)?;
                    v.glob = false;
                    words.push(v);
                }
            }
            CommandPrefixOrSuffixItem::Word(w) => words.push(self.eval_word(&w.value)?),
            CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                // The inner commands are judged; the word itself becomes a
                // `/dev/fd/N` pipe, which names no file of ours.
                self.list(&sub.list)?;
                words.push(Val::literal(item.to_string()));
            }
        }
        Ok(())
    }

    fn assignment(&mut self, a: &Assignment) -> Result<(String, Vec<Val>), Unanalysable> {
        let name = match &a.name {
            AssignmentName::VariableName(n) => n.clone(),
            AssignmentName::ArrayElementName(n, idx) => {
                if !idx.chars().all(|c| c.is_ascii_digit()) {
                    return Err(refuse(format!(
                        "the array subscript in `{a}` is evaluated as arithmetic, which can run commands"
                    )));
                }
                n.clone()
            }
        };
        let mut vals = Vec::new();
        match &a.value {
            AssignmentValue::Scalar(w) => vals.push(self.eval_word(&w.value)?),
            AssignmentValue::Array(items) => {
                for (key, w) in items {
                    if let Some(k) = key {
                        let kv = self.eval_word(&k.value)?;
                        if kv.dynamic || !kv.text.chars().all(|c| c.is_ascii_digit()) {
                            return Err(refuse(format!(
                                "the array key `{}` is evaluated as arithmetic, which can run commands",
                                k.value
                            )));
                        }
                    }
                    vals.push(self.eval_word(&w.value)?);
                }
            }
        }
        for v in &vals {
            if protected_var(&name, v) {
                return Err(refuse(format!(
                    "assigning `{name}` changes what later commands run"
                )));
            }
        }
        // Assigned values are not pathname-expanded.
        for v in &mut vals {
            v.glob = false;
        }
        Ok((a.to_string(), vals))
    }

    /// A `NAME=value` word given to `env` or a declaration builtin.
    fn assignment_word(&mut self, v: &Val) -> Result<Option<Val>, Unanalysable> {
        let Some((name, value)) = v.text.split_once('=') else {
            return Ok(None);
        };
        let name = name.strip_suffix('+').unwrap_or(name);
        if !is_name(name) {
            return Ok(None);
        }
        let value = Val {
            text: value.to_owned(),
            dynamic: v.dynamic,
            glob: false,
        };
        if protected_var(name, &value) {
            return Err(refuse(format!(
                "assigning `{name}` changes what later commands run"
            )));
        }
        Ok(Some(value))
    }

    /// Record a command that runs, unwrapping wrappers. Returns its text.
    fn run(
        &mut self,
        assigns: Vec<(String, Vec<Val>)>,
        words: Vec<Val>,
    ) -> Result<String, Unanalysable> {
        self.run_with(assigns, words, None)
    }

    /// `sh -c 'cmd'` and friends.
    fn shell(
        &mut self,
        base: &str,
        args: Vec<Val>,
        words: &[Val],
        as_plain: CommandUse,
        text: &str,
    ) -> Result<String, Unanalysable> {
        let mut i = 1;
        let mut dash_c = false;
        while i < words.len() {
            let w = &words[i];
            if w.dynamic {
                return Err(refuse(format!(
                    "an argument of `{base}` is only known at run time (`{}`)",
                    w.text
                )));
            }
            let t = w.text.as_str();
            if t == "--" || t == "-" {
                i += 1;
                break;
            }
            if matches!(t, "-o" | "+o" | "-O" | "+O") {
                i += 2;
                continue;
            }
            if matches!(
                t,
                "--norc" | "--noprofile" | "--posix" | "--login" | "--noediting" | "--restricted"
            ) {
                i += 1;
                continue;
            }
            if t.starts_with("--") {
                return Err(refuse(format!(
                    "the option `{t}` of `{base}` is not understood"
                )));
            }
            if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
                for c in t[1..].chars() {
                    match c {
                        'c' => dash_c = true,
                        'i' | 's' => {
                            return Err(refuse(format!(
                                "`{base} -{c}` reads commands that cannot be checked"
                            )));
                        }
                        'e' | 'u' | 'x' | 'v' | 'f' | 'l' | 'n' | 'a' | 'b' | 'h' | 'm' | 'B'
                        | 'C' | 'E' | 'H' | 'P' | 'T' | 'k' | 'p' | 't' => {}
                        _ => {
                            return Err(refuse(format!(
                                "the option `{t}` of `{base}` is not understood"
                            )));
                        }
                    }
                }
                i += 1;
                continue;
            }
            break;
        }
        if dash_c {
            let Some(script) = words.get(i) else {
                return Err(refuse(format!("`{base} -c` without a command")));
            };
            let script = script.text.clone();
            self.out.items.push(Item::Command(CommandUse {
                text: text.to_owned(),
                name: words[0].text.clone(),
                assigned: args.len(),
                args,
                transparent: true,
                dynamic: None,
            }));
            self.program(&script)?;
            return Ok(text.to_owned());
        }
        if i >= words.len() {
            return Err(refuse(format!(
                "`{base}` would read commands from stdin, which cannot be checked"
            )));
        }
        if is_unreadable_script(&words[i]) {
            return Err(refuse(format!(
                "`{base} {}` runs commands that cannot be checked",
                words[i].text
            )));
        }
        // `bash script.sh`: runs a file; the allowlist must name it.
        self.out.items.push(Item::Command(as_plain));
        Ok(text.to_owned())
    }

    fn eval_word(&mut self, raw: &str) -> Result<Val, Unanalysable> {
        let pieces = parse_word(raw)?;
        let mut v = Val::literal("");
        let mut skel = String::new();
        self.pieces(raw, &pieces, false, &mut v, &mut skel)?;
        check_braces(&skel, raw)?;
        if v.dynamic {
            v.text = raw.to_owned();
        }
        Ok(v)
    }

    fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        v: &mut Val,
        skel: &mut String,
    ) -> Result<(), Unanalysable> {
        for p in pieces {
            match &p.piece {
                WordPiece::Text(s) => {
                    if !quoted && s.contains(['*', '?', '[']) {
                        v.glob = true;
                    }
                    v.text.push_str(s);
                    if quoted {
                        skel.push('_');
                    } else {
                        skel.push_str(s);
                    }
                }
                WordPiece::SingleQuotedText(s) => {
                    v.text.push_str(s);
                    skel.push('_');
                }
                WordPiece::AnsiCQuotedText(s) => {
                    v.text.push_str(&decode_ansi_c(s)?);
                    skel.push('_');
                }
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    let mut ignored = String::new();
                    self.pieces(raw, inner, true, v, &mut ignored)?;
                    skel.push('_');
                }
                WordPiece::TildeExpansion(t) => {
                    match t {
                        TildeExpr::Home => {
                            let home = self.home.ok_or_else(|| {
                                refuse("`~` used but the home directory is unknown")
                            })?;
                            v.text.push_str(&home.display().to_string());
                        }
                        _ => {
                            return Err(refuse(format!(
                                "the tilde form in `{raw}` is not supported"
                            )));
                        }
                    }
                    skel.push('_');
                }
                WordPiece::ParameterExpansion(_) => {
                    let src = raw.get(p.start_index..p.end_index).unwrap_or(raw);
                    if !simple_param(src) {
                        return Err(refuse(format!(
                            "the expansion `{src}` is not analysed (only $name and ${{name}} are)"
                        )));
                    }
                    v.dynamic = true;
                    skel.push('_');
                }
                WordPiece::CommandSubstitution(s) => {
                    self.program(s)?;
                    v.dynamic = true;
                    skel.push('_');
                }
                WordPiece::BackquotedCommandSubstitution(s) => {
                    if s.contains('\\') {
                        return Err(refuse(
                            "backslashes inside backquotes are not analysed; use $(…)",
                        ));
                    }
                    self.program(s)?;
                    v.dynamic = true;
                    skel.push('_');
                }
                WordPiece::EscapeSequence(s) => {
                    let c = s.strip_prefix('\\').unwrap_or(s);
                    if c == "\n" {
                        // Line continuation: nothing.
                    } else if quoted && !matches!(c, "$" | "`" | "\"" | "\\") {
                        v.text.push_str(s);
                    } else {
                        v.text.push_str(c);
                    }
                    skel.push('_');
                }
                WordPiece::ArithmeticExpression(e) => {
                    check_arith(&e.value)?;
                    v.dynamic = true;
                    skel.push('_');
                }
            }
        }
        Ok(())
    }
}

/// A script operand whose commands arrive through a pipe (`<(…)`, stdin):
/// nothing on disk to hold the allowlist to.
fn is_unreadable_script(w: &Val) -> bool {
    let t = w.text.as_str();
    w.dynamic
        || t.starts_with("<(")
        || t.starts_with(">(")
        || t == "-"
        || t == "/dev/stdin"
        || t.starts_with("/dev/fd/")
        || t.starts_with("/proc/self/fd/")
}

/// Refuse unquoted brace expansion (`{a,b}`, `{1..3}`): it turns one word into
/// several, including into a command (`{rm,-rf,/}`).
fn check_braces(skel: &str, raw: &str) -> Result<(), Unanalysable> {
    let bytes = skel.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b != b'{' {
            continue;
        }
        if let Some(j) = bytes[i + 1..].iter().position(|c| *c == b'}') {
            let inner = &skel[i + 1..i + 1 + j];
            if inner.contains(',') || inner.contains("..") {
                return Err(refuse(format!(
                    "brace expansion in `{raw}` is not analysed; write the words out"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(line: &str) -> Vec<String> {
        analyze(line, Some(Path::new("/home/u")))
            .unwrap_or_else(|e| panic!("{line}: {}", e.0))
            .commands()
            .filter(|c| !c.transparent)
            .map(|c| c.text.clone())
            .collect()
    }

    fn refused(line: &str) -> bool {
        analyze(line, Some(Path::new("/home/u"))).is_err()
    }

    #[test]
    fn every_command_is_found() {
        assert_eq!(names("a;b&&c||d|e\nf &"), ["a", "b", "c", "d", "e", "f"]);
        assert_eq!(names("echo $(rm -rf x)"), ["rm -rf x", "echo $(rm -rf x)"]);
        assert_eq!(names("echo `id`"), ["id", "echo `id`"]);
        assert_eq!(names("(cd /tmp; ls)"), ["cd /tmp", "ls"]);
        assert_eq!(names("{ a; b; }"), ["a", "b"]);
        assert_eq!(names("f(){ rm x; }; f"), ["rm x", "f"]);
        assert_eq!(names("cat <(rm x)"), ["rm x", "cat <(( rm x ))"]);
        assert_eq!(names("if a; then b; else c; fi"), ["a", "b", "c"]);
        assert_eq!(names("for i in 1 2; do rm x; done"), ["rm x"]);
        assert_eq!(names("while a; do b; done"), ["a", "b"]);
    }

    #[test]
    fn wrappers_are_unwrapped() {
        assert_eq!(names("env A=1 rm x"), ["A=1 rm x"]);
        assert_eq!(names("timeout -s KILL 5 rm x"), ["rm x"]);
        assert_eq!(names("nice -n 5 rm x"), ["rm x"]);
        assert_eq!(names("nohup rm x"), ["rm x"]);
        assert_eq!(names("sh -c 'rm x; ls'"), ["rm x", "ls"]);
        assert_eq!(names("bash -lc \"rm x\""), ["rm x"]);
        assert_eq!(names("eval rm x"), ["rm x"]);
        assert_eq!(names("xargs rm"), ["rm"]);
        assert_eq!(
            names("find . -exec rm {} \\;"),
            ["rm {}", "find . -exec rm {} ;"]
        );
        assert_eq!(names("command rm x"), ["rm x"]);
        assert_eq!(names("exec rm x"), ["rm x"]);
        assert_eq!(names("trap 'rm x' EXIT"), ["trap rm x EXIT", "rm x"]);
        assert_eq!(names("env timeout 1 sh -c 'nice rm x'"), ["rm x"]);
    }

    #[test]
    fn quoting_is_removed() {
        assert_eq!(names("r''m x"), ["rm x"]);
        assert_eq!(names("\"r\"m x"), ["rm x"]);
        assert_eq!(names("\\rm x"), ["rm x"]);
        assert_eq!(names("$'\\x72\\x6d' x"), ["rm x"]);
        assert_eq!(names("$'\\162m' x"), ["rm x"]);
        assert_eq!(names("cat ~/.ssh/id"), ["cat /home/u/.ssh/id"]);
    }

    #[test]
    fn dynamic_and_odd_forms_are_refused() {
        for line in [
            "$CMD x",
            "$(echo rm) x",
            "`echo rm` x",
            "eval \"$X\"",
            "sh -c \"$X\"",
            "curl x | bash",
            "bash",
            "sh -s",
            "{rm,-rf,/}",
            "echo ${x:-$(id)}",
            "echo ${!x}",
            "echo ${x@P}",
            "echo $((x))",
            "PATH=/tmp ls",
            "LD_PRELOAD=/x.so ls",
            "export BASH_ENV=/x",
            "coproc cat",
            "setsid ls",
            "echo \"unterminated",
            "ls\u{200b}",
            "ls\u{202e}",
            "ls\0",
            "ｌｓ",
            "ls ／etc",
            "ls\r",
            "ls > $X",
            "cd -",
            "env -S 'rm x'",
            "a[$(id)]=1",
            "[[ $x -eq 1 ]]",
            "ls @(a|b)",
            "bash <(echo rm x)",
            "source <(echo rm x)",
            ". /dev/stdin",
            "hash -p /tmp/x ls",
            "BASH_CMDS[ls]=/tmp/x",
            "declare BASH_ALIASES=x",
            "xargs -I{} sh -c 'cat {}'",
            "find . -exec bash -c 'cat \"$1\"' _ {} \\;",
        ] {
            assert!(refused(line), "{line:?} should be refused");
        }
    }

    #[test]
    fn redirects_and_paths_are_recorded() {
        let a = analyze("cat < in.txt > out.txt 2>&1", None).unwrap();
        assert!(a.items.contains(&Item::Read(Val::literal("in.txt"))));
        assert!(a.items.contains(&Item::Write(Val::literal("out.txt"))));
        let a = analyze("cd src && ls", None).unwrap();
        assert!(a.items.contains(&Item::Cd(Val::literal("src"))));
        let a = analyze("cat *.rs", None).unwrap();
        let c = a.commands().next().unwrap();
        assert!(c.args[0].glob);
        let a = analyze("cat '*.rs'", None).unwrap();
        assert!(!a.commands().next().unwrap().args[0].glob);
        let a = analyze("curl x | sh -c 'cat'", None).unwrap();
        assert_eq!(a.pipelines, ["curl x | sh -c cat"]);
    }

    #[test]
    fn allowed_forms_pass() {
        for line in [
            "git log --oneline -5",
            "GIT_PAGER=cat git log",
            "echo \"$(date)\"",
            "echo $HOME ${USER} $? $#",
            "ls -la | head -5",
            "cargo test 2>&1 | tail -20",
            "cat <<EOF\nhello $USER\nEOF",
            "find . -name '*.rs' -print",
            "echo {}",
            "[ -f x ] && echo yes",
            "echo 'grüße' \"日本\"",
            "X=1",
            "echo $((1 + 2))",
        ] {
            assert!(!refused(line), "{line:?} should be analysable");
        }
    }
}
