//! What a command of a bash line may write, from its words: the table the gate
//! holds against the protected folders (a workflow's `scripts/`, `.git`, the
//! session store).
//!
//! What this is for: `sed -i … scripts/publish.sh`, `cp x scripts/`, `dd
//! of=…`, `tar -x` in a folder holding `scripts/`: each names (or implies) a
//! place it writes, though the shell sees no redirection. [`classify`] turns a
//! [`CommandUse`] into its write targets:
//!
//! - commands known to only read ([`READERS`]) write nothing, except through
//!   the options that make them write (`sort -o`, `uniq IN OUT`, `find
//!   -delete`, `tree -o`, `xxd IN OUT`, `yq -i`);
//! - commands known to write say which words they write: every operand of
//!   `tee`, `touch`, `rm`, `chmod` …; the destination of `cp`, `mv`, `ln`,
//!   `install`, `rsync` (and where each source lands in it); `dd of=`; `sed
//!   -i`, `perl -i`, `awk -i inplace` operands and the files a sed or awk
//!   program writes (`w file`, `print > "file"`); the original of `patch`;
//! - commands that write files they do not name write *below* a folder (the
//!   one they run in, or `-C`/`-d DIR`): `tar -x`, `unzip`, `cpio -i`,
//!   `patch` without a file, and git's commands that rewrite the work tree
//!   (`checkout`, `apply`, `reset --hard`, `stash`, `merge` …);
//! - commands that run other commands or compute the names they write (`sed
//!   'e …'`, `awk '{ system(…) }'`, `rsync -e`, `rg --pre`, `tar
//!   --to-command`) may write anywhere;
//! - interpreters (`bash script.sh`, `python3 x.py`) read their script;
//! - any other command may write every path it names.
//!
//! What this is not: an interpreter. A program an allowed command runs (a
//! `make` target, a Python script) does what its file says; the allowlist
//! decides which of those may run at all.

use super::bash::{self, CommandUse, Val};

/// Commands that only read what they name.
pub const READERS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "more",
    "less",
    "ls",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "wc",
    "file",
    "stat",
    "cmp",
    "diff",
    "diff3",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "sum",
    "shasum",
    "du",
    "df",
    "echo",
    "printf",
    "test",
    "[",
    "[[",
    "cd",
    "pwd",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "nl",
    "od",
    "hexdump",
    "strings",
    "tac",
    "rev",
    "cut",
    "tr",
    "fold",
    "fmt",
    "column",
    "paste",
    "join",
    "comm",
    "expand",
    "unexpand",
    "base64",
    "base32",
    "basenc",
    "jq",
    "yq",
    "which",
    "type",
    "true",
    "false",
    ":",
    "seq",
    "sleep",
    "expr",
    "export",
    "declare",
    "typeset",
    "local",
    "readonly",
    "unset",
    "whoami",
    "id",
    "date",
    "uname",
    "printenv",
    "hostname",
    "nproc",
    "look",
    "namei",
    "lsattr",
    "getfacl",
    "bat",
    "batcat",
    "shellcheck",
    "tree",
    "sort",
    "uniq",
    "find",
    "xxd",
    "exit",
    "return",
    "break",
    "continue",
    "shift",
    "wait",
];

/// Programs that run the script file they are given first.
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "posh", "source", ".", "python",
    "python2", "python3", "node", "nodejs", "deno", "bun", "perl", "ruby", "php", "lua", "Rscript",
    "tclsh",
];

/// Where a command may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The path a word names (after the gate resolves it, globs expanded);
    /// with everything below it when `deep` (`rm -r`, `tar -C DIR -x`).
    Path { word: Val, deep: bool },
    /// `cp`/`mv`/`ln`/`install`/`rsync`: each source lands in `dest` — at
    /// `dest/<its name>` when `dest` is a directory, else at `dest` itself, or
    /// always at `dest` itself when `contents` (`cp -T`, `rsync src/ dest`),
    /// or at `dest/<the source as written>` when `parents` (`cp --parents`,
    /// `rsync -R`); with everything below it when `deep`.
    Into {
        sources: Vec<Val>,
        dest: Val,
        deep: bool,
        contents: bool,
        parents: bool,
    },
}

/// What a command may write beyond the words it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Beyond {
    /// Files it does not name, below the folder it runs in (`tar -x`).
    Cwd(String),
    /// Files of the git work tree that holds the folder it runs in.
    Repo(String),
    /// Anything: it runs commands or computes the names it writes.
    Anywhere(String),
}

/// A command's writes, as far as its words tell.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Writes {
    pub targets: Vec<Target>,
    pub beyond: Option<Beyond>,
    /// Its targets and `beyond` are all it writes (a command of the table),
    /// so the folder it runs in does not matter; an unknown command or an
    /// interpreter may also write files it does not name where it runs.
    pub known: bool,
    /// git itself: `.git` is its own to write.
    pub git: bool,
    /// git, with a subcommand that may write the repository under `.git`
    /// (`commit`, `config`, `checkout` …), not only read it.
    pub repo: bool,
}

impl Writes {
    fn write(&mut self, word: &Val) {
        self.targets.push(Target::Path {
            word: word.clone(),
            deep: false,
        });
    }

    fn deep(&mut self, word: &Val) {
        self.targets.push(Target::Path {
            word: word.clone(),
            deep: true,
        });
    }

    fn all(&mut self, words: &[Val]) {
        for w in words {
            self.write(w);
        }
    }

    fn anywhere(&mut self, why: impl Into<String>) {
        self.beyond = Some(Beyond::Anywhere(why.into()));
    }

    /// Writes below the folder it runs in, unless it already may write
    /// anywhere.
    fn below_cwd(&mut self, why: impl Into<String>) {
        if !matches!(self.beyond, Some(Beyond::Anywhere(_))) {
            self.beyond = Some(Beyond::Cwd(why.into()));
        }
    }
}

/// How a command's options take values.
#[derive(Default)]
struct Spec {
    /// Short options that take a value (`-t DIR`, `-tDIR`).
    short: &'static str,
    /// Short options whose value, if any, is attached (`-i.bak`).
    short_optional: &'static str,
    /// Long options that take the next word as their value when not given
    /// one with `=`.
    long: &'static [&'static str],
}

/// Words split into options (with their values) and operands, the way GNU
/// getopt does (options anywhere before `--`).
#[derive(Default)]
struct Parsed {
    opts: Vec<(String, Option<Val>)>,
    operands: Vec<Val>,
}

impl Parsed {
    fn has(&self, names: &[&str]) -> bool {
        self.opts.iter().any(|(o, _)| names.contains(&o.as_str()))
    }

    fn values(&self, names: &[&str]) -> Vec<Val> {
        self.opts
            .iter()
            .filter(|(o, _)| names.contains(&o.as_str()))
            .filter_map(|(_, v)| v.clone())
            .collect()
    }

    /// Every option value, whatever the option.
    fn all_values(&self) -> Vec<Val> {
        self.opts.iter().filter_map(|(_, v)| v.clone()).collect()
    }
}

fn with_text(w: &Val, text: &str) -> Val {
    Val {
        text: text.to_owned(),
        dynamic: w.dynamic,
        glob: w.glob,
    }
}

fn parse(words: &[Val], spec: &Spec) -> Parsed {
    let mut p = Parsed::default();
    let mut i = 0;
    let mut only_operands = false;
    while i < words.len() {
        let w = &words[i];
        let t = w.text.as_str();
        i += 1;
        if only_operands || t == "-" || !t.starts_with('-') {
            p.operands.push(w.clone());
            continue;
        }
        if t == "--" {
            only_operands = true;
            continue;
        }
        if t.starts_with("--") {
            if let Some((name, value)) = t.split_once('=') {
                p.opts.push((name.to_owned(), Some(with_text(w, value))));
            } else if spec.long.contains(&t) {
                let v = words.get(i).cloned();
                if v.is_some() {
                    i += 1;
                }
                p.opts.push((t.to_owned(), v));
            } else {
                p.opts.push((t.to_owned(), None));
            }
            continue;
        }
        let cluster = &t[1..];
        for (k, ch) in cluster.char_indices() {
            let rest = &cluster[k + ch.len_utf8()..];
            if spec.short.contains(ch) {
                let v = if rest.is_empty() {
                    let v = words.get(i).cloned();
                    if v.is_some() {
                        i += 1;
                    }
                    v
                } else {
                    Some(with_text(w, rest))
                };
                p.opts.push((format!("-{ch}"), v));
                break;
            }
            if spec.short_optional.contains(ch) {
                p.opts.push((
                    format!("-{ch}"),
                    (!rest.is_empty()).then(|| with_text(w, rest)),
                ));
                break;
            }
            p.opts.push((format!("-{ch}"), None));
        }
    }
    p
}

/// What `c` may write.
pub fn classify(c: &CommandUse) -> Writes {
    let mut w = Writes::default();
    if c.transparent {
        // A wrapper: its inner command is judged on its own.
        w.known = true;
        return w;
    }
    let start = c.assigned.min(c.args.len());
    let (assigned, words) = c.args.split_at(start);
    let name = bash::basename(&c.name);
    w.known = true;
    classify_words(name, words, &mut w);
    if !w.known {
        // `OUT=scripts/x tool`: what the command does with it is unknown.
        w.all(assigned);
    }
    w
}

fn classify_words(name: &str, words: &[Val], w: &mut Writes) {
    match name {
        "sort" => sort(words, w),
        "uniq" => uniq(words, w),
        "xxd" => xxd(words, w),
        "tree" => tree(words, w),
        "yq" => yq(words, w),
        "less" => less(words, w),
        "rg" => rg(words, w),
        "find" => find(words, w),
        _ if READERS.contains(&name) => {}
        _ if INTERPRETERS.contains(&name) => interpreter(name, words, w),
        "tee" => {
            let p = parse(words, &Spec::default());
            w.all(&p.operands);
        }
        "sed" => sed(words, w),
        "awk" | "gawk" | "mawk" | "nawk" => awk(words, w),
        "cp" | "mv" | "ln" | "install" | "rsync" => copy_like(name, words, w),
        "dd" => {
            for x in words {
                if let Some(out) = x.text.strip_prefix("of=") {
                    w.write(&with_text(x, out));
                }
            }
        }
        "rm" | "chmod" | "chown" | "chgrp" | "setfacl" | "chcon" | "chattr" | "shred"
        | "truncate" | "touch" | "rmdir" | "unlink" | "mkdir" | "mkfifo" | "mknod" | "link"
        | "mktemp" => file_ops(name, words, w),
        "split" | "csplit" => split(name, words, w),
        "patch" => patch(words, w),
        "git" => git(words, w),
        "tar" | "bsdtar" => tar(words, w),
        "unzip" => unzip(words, w),
        "zip" => zip(words, w),
        "gzip" | "gunzip" | "zcat" | "bzip2" | "bunzip2" | "bzcat" | "xz" | "unxz" | "xzcat"
        | "lzma" | "unlzma" | "zstd" | "unzstd" | "zstdcat" | "lz4" | "unlz4" | "lz4cat"
        | "compress" | "uncompress" | "pigz" | "unpigz" | "brotli" => compressor(name, words, w),
        "cpio" => cpio(words, w),
        "7z" | "7za" | "7zr" | "unrar" | "ar" | "jar" => archiver(name, words, w),
        "wget" => wget(words, w),
        _ => {
            // Unknown: it may write whatever it names.
            w.known = false;
            w.all(words);
        }
    }
}

/// `sort -o FILE`; `--compress-program` runs a program.
fn sort(words: &[Val], w: &mut Writes) {
    const S: Spec = Spec {
        short: "kotST",
        short_optional: "",
        long: &[
            "--key",
            "--output",
            "--field-separator",
            "--buffer-size",
            "--temporary-directory",
            "--files0-from",
            "--compress-program",
            "--parallel",
            "--batch-size",
            "--random-source",
            "--sort",
        ],
    };
    let p = parse(words, &S);
    w.known = true;
    for v in p.values(&["-o", "--output"]) {
        w.write(&v);
    }
    if p.has(&["--compress-program"]) {
        w.anywhere("`sort --compress-program` runs the program it names");
    }
}

/// `uniq IN OUT`.
fn uniq(words: &[Val], w: &mut Writes) {
    const S: Spec = Spec {
        short: "fsw",
        short_optional: "",
        long: &["--skip-fields", "--skip-chars", "--check-chars"],
    };
    let p = parse(words, &S);
    w.known = true;
    if let Some(out) = p.operands.get(1) {
        w.write(out);
    }
}

/// `xxd IN OUT`.
fn xxd(words: &[Val], w: &mut Writes) {
    const S: Spec = Spec {
        short: "cglnosR",
        short_optional: "",
        long: &[],
    };
    let p = parse(words, &S);
    w.known = true;
    if let Some(out) = p.operands.get(1) {
        w.write(out);
    }
}

/// `tree -o FILE`.
fn tree(words: &[Val], w: &mut Writes) {
    let p = parse(
        words,
        &Spec {
            short: "LPIoH",
            ..Spec::default()
        },
    );
    w.known = true;
    for v in p.values(&["-o"]) {
        w.write(&v);
    }
}

/// `yq -i` edits its files in place.
fn yq(words: &[Val], w: &mut Writes) {
    let p = parse(
        words,
        &Spec {
            short: "pIo",
            ..Spec::default()
        },
    );
    w.known = true;
    if p.has(&["-i", "--inplace"]) {
        w.all(&p.operands);
    }
}

/// `less -o FILE` logs to a file.
fn less(words: &[Val], w: &mut Writes) {
    let p = parse(
        words,
        &Spec {
            short: "oObhjkpPTxyz#",
            ..Spec::default()
        },
    );
    w.known = true;
    for v in p.values(&["-o", "-O", "--log-file", "--LOG-FILE"]) {
        w.write(&v);
    }
}

/// `rg --pre CMD` runs a command.
fn rg(words: &[Val], w: &mut Writes) {
    w.known = true;
    if words
        .iter()
        .any(|x| x.text == "--pre" || x.text.starts_with("--pre="))
    {
        w.anywhere("`rg --pre` runs the command it names on every file");
    }
}

/// Commands that change the files they name (`rm`, `chmod`, `touch`, `mkdir`, …); `-r` reaches below a folder.
fn file_ops(name: &str, words: &[Val], w: &mut Writes) {
    let spec = match name {
        "touch" => Spec {
            short: "rdt",
            ..Spec::default()
        },
        "truncate" => Spec {
            short: "sr",
            ..Spec::default()
        },
        "mkdir" | "mkfifo" | "mknod" => Spec {
            short: "mZ",
            ..Spec::default()
        },
        "shred" => Spec {
            short: "nsu",
            ..Spec::default()
        },
        "mktemp" => Spec {
            short: "p",
            ..Spec::default()
        },
        _ => Spec::default(),
    };
    let p = parse(words, &spec);
    let deep = matches!(
        name,
        "rm" | "chmod" | "chown" | "chgrp" | "setfacl" | "chcon"
    ) && p.has(&["-r", "-R", "--recursive"]);
    for o in &p.operands {
        if deep {
            w.deep(o);
        } else {
            w.write(o);
        }
    }
    // `--reference=FILE`, `-r FILE` are read, but a value naming a
    // protected file is rare enough to be refused with the rest.
    w.all(&p.all_values());
}

/// `split IN PREFIX`, `csplit -f PREFIX`.
fn split(name: &str, words: &[Val], w: &mut Writes) {
    let p = parse(
        words,
        &Spec {
            short: "abCdlnftk",
            ..Spec::default()
        },
    );
    // split IN PREFIX; csplit -f PREFIX.
    if name == "split"
        && let Some(prefix) = p.operands.get(1)
    {
        w.write(prefix);
    }
    w.all(&p.all_values());
}

/// `unzip` writes below `-d DIR` or here.
fn unzip(words: &[Val], w: &mut Writes) {
    let p = parse(
        words,
        &Spec {
            short: "dxP",
            ..Spec::default()
        },
    );
    if p.has(&["-l", "-t", "-v", "-p", "-c", "-z", "-Z"]) {
        return;
    }
    let dirs = p.values(&["-d"]);
    if dirs.is_empty() {
        w.below_cwd("`unzip` writes the files the archive holds".to_owned());
    }
    for d in &dirs {
        w.deep(d);
    }
}

/// `zip ARCHIVE …`; `-T` runs a test command.
fn zip(words: &[Val], w: &mut Writes) {
    let p = parse(
        words,
        &Spec {
            short: "bntxiO",
            ..Spec::default()
        },
    );
    if p.has(&["-T", "--test", "--unzip-command"])
        || p.opts
            .iter()
            .any(|(o, _)| o == "-T" || o.starts_with("--tt"))
    {
        w.anywhere("`zip -T` runs a command to test the archive");
    }
    if let Some(archive) = p.operands.first() {
        w.write(archive);
    }
    w.all(&p.values(&["-O", "--output-file", "-b", "--temp-path"]));
}

/// Compressors replace their files unless they write to stdout.
fn compressor(name: &str, words: &[Val], w: &mut Writes) {
    let p = parse(
        words,
        &Spec {
            short: "oSTDBM",
            ..Spec::default()
        },
    );
    w.all(&p.values(&["-o", "--output"]));
    let to_stdout = name.ends_with("cat")
        || p.has(&[
            "-c",
            "--stdout",
            "--to-stdout",
            "-t",
            "--test",
            "-l",
            "--list",
        ]);
    if to_stdout {
        return;
    }
    let deep = p.has(&["-r", "--recursive"]);
    for o in &p.operands {
        if deep {
            w.deep(o);
        } else {
            w.write(o);
        }
    }
}

/// `cpio -o/-i/-p`.
fn cpio(words: &[Val], w: &mut Writes) {
    let p = parse(
        words,
        &Spec {
            short: "FOIDEHCMR",
            long: &[
                "--file",
                "--directory",
                "--pattern-file",
                "--format",
                "--io-size",
                "--message",
                "--owner",
            ],
            ..Spec::default()
        },
    );
    w.all(&p.values(&["-F", "--file", "-O"]));
    if p.has(&["--rsh-command"]) {
        w.anywhere("`cpio --rsh-command` runs the command it names");
    }
    if p.has(&["-p", "--pass-through"]) {
        for o in &p.operands {
            w.deep(o);
        }
    } else if p.has(&["-i", "--extract"]) {
        let dirs = p.values(&["-D", "--directory"]);
        if dirs.is_empty() {
            w.below_cwd("`cpio -i` writes the files the archive holds".to_owned());
        }
        for d in &dirs {
            w.deep(d);
        }
    }
}

/// `7z`, `unrar`, `ar`, `jar`: extracting writes below here.
fn archiver(name: &str, words: &[Val], w: &mut Writes) {
    let first = words.iter().find(|x| !x.text.starts_with('-'));
    let extracts = first.is_some_and(|x| {
        matches!(x.text.as_str(), "x" | "e")
            || (name == "ar" || name == "jar") && x.text.contains('x')
    });
    if extracts {
        w.below_cwd(format!(
            "`{name}` extracting writes the files the archive holds"
        ));
    }
    w.all(words);
}

/// `wget` writes what it fetches; recursively, whole folders.
fn wget(words: &[Val], w: &mut Writes) {
    w.all(words);
    let recursive = words.iter().any(|x| {
        matches!(
            x.text.as_str(),
            "-r" | "--recursive"
                | "-m"
                | "--mirror"
                | "-x"
                | "--force-directories"
                | "-p"
                | "--page-requisites"
        )
    });
    if recursive {
        w.below_cwd("`wget` writes folders named after the site".to_owned());
    }
}

/// `find`: `-delete` removes what it finds below its starting points;
/// `-exec` commands are judged on their own, `-fprint` files as redirections.
fn find(words: &[Val], w: &mut Writes) {
    w.known = true;
    if !words.iter().any(|x| x.text == "-delete") {
        return;
    }
    let mut starts = Vec::new();
    for x in words {
        let t = x.text.as_str();
        if matches!(t, "-H" | "-L" | "-P") || t.starts_with("-O") || t.starts_with("-D") {
            continue;
        }
        if t.starts_with('-') || t == "(" || t == "!" {
            break;
        }
        starts.push(x.clone());
    }
    if starts.is_empty() {
        starts.push(Val {
            text: ".".to_owned(),
            dynamic: false,
            glob: false,
        });
    }
    for s in &starts {
        w.deep(s);
    }
}

/// `bash script.sh args`, `python3 x.py`: the script is read; what the
/// program does with the rest is its own.
fn interpreter(name: &str, words: &[Val], w: &mut Writes) {
    w.known = false;
    let mut i = 0;
    let mut code = false;
    let sh = matches!(
        name,
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash" | "mksh" | "yash" | "posh"
    );
    while i < words.len() {
        let t = words[i].text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if sh && matches!(t, "-o" | "+o" | "-O" | "+O") {
            i += 2;
            continue;
        }
        if (t.starts_with('-') || (sh && t.starts_with('+'))) && t.len() > 1 {
            let long = t.starts_with("--");
            let letters = if long { "" } else { &t[1..] };
            if matches!(t, "--eval" | "--print" | "--require" | "--command")
                || (!sh && letters.contains(['c', 'e', 'E', 'm', 'r', 'i', 'p', 'n']))
                || (sh && letters.contains('c'))
            {
                code = true;
            }
            i += 1;
            continue;
        }
        break;
    }
    let rest = &words[i.min(words.len())..];
    if code || rest.is_empty() {
        w.all(words);
        return;
    }
    // The script is read; its arguments may be anything.
    w.all(&rest[1..]);
    w.all(&words[..i]);
}

/// `sed`: operands are written with `-i`; the program may write files (`w`)
/// or run commands (`e`).
fn sed(words: &[Val], w: &mut Writes) {
    const S: Spec = Spec {
        short: "efl",
        short_optional: "i",
        long: &["--expression", "--file", "--line-length"],
    };
    let p = parse(words, &S);
    let sandbox = p.has(&["--sandbox"]);
    let in_place = p.has(&["-i", "--in-place"]);
    let mut programs = p.values(&["-e", "--expression"]);
    let mut files = p.operands.clone();
    if programs.is_empty() && !p.has(&["-f", "--file"]) && !files.is_empty() {
        programs.push(files.remove(0));
    }
    if p.has(&["-f", "--file"]) && !sandbox {
        w.anywhere("its program is in a file, so what it writes or runs cannot be checked (add `--sandbox`, or give the program with -e)");
    }
    if in_place {
        w.all(&files);
    }
    if sandbox {
        return;
    }
    for prog in &programs {
        match sed_program(&prog.text) {
            Ok(u) => {
                if u.exec {
                    w.anywhere("its program runs commands (`e`)");
                }
                for f in u.writes {
                    if f != "/dev/stdout" && f != "/dev/stderr" {
                        w.write(&with_text(prog, &f));
                    }
                }
            }
            Err(why) => w.anywhere(format!("its program cannot be checked ({why})")),
        }
    }
}

/// What a sed program writes and whether it runs commands.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SedUse {
    pub writes: Vec<String>,
    pub exec: bool,
}

/// Why a sed program could not be read; `char` is the command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SedError {
    #[error("an address ends early")]
    AddressEndsEarly,
    #[error("an address is not closed")]
    AddressNotClosed,
    #[error("an address without a command")]
    NoCommand,
    #[error("`{0}` ends early")]
    EndsEarly(char),
    #[error("`{0}` has no delimiter")]
    NoDelimiter(char),
    #[error("`{0}` is not closed")]
    NotClosed(char),
    #[error("unknown command `{0}`")]
    UnknownCommand(char),
}

/// Read a GNU sed program far enough to find its `w`/`W` files, `s///w`
/// files, and `e` commands and flags.
pub fn sed_program(p: &str) -> Result<SedUse, SedError> {
    let b = p.as_bytes();
    let mut i = 0;
    let mut u = SedUse::default();
    let to_eol = |i: &mut usize| -> String {
        let s = *i;
        while *i < b.len() && b[*i] != b'\n' {
            *i += 1;
        }
        String::from_utf8_lossy(&b[s..*i]).trim().to_owned()
    };
    // `until` an unescaped `delim`; returns false at the end of the text.
    let delimited = |i: &mut usize, delim: u8| -> bool {
        while *i < b.len() {
            if b[*i] == b'\\' {
                *i += 2;
                continue;
            }
            if b[*i] == delim {
                *i += 1;
                return true;
            }
            *i += 1;
        }
        false
    };
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t') {
            *i += 1;
        }
    };
    let address = |i: &mut usize| -> Result<(), SedError> {
        if *i >= b.len() {
            return Ok(());
        }
        match b[*i] {
            b'0'..=b'9' | b'+' | b'~' => {
                *i += 1;
                while *i < b.len() && (b[*i].is_ascii_digit() || b[*i] == b'~') {
                    *i += 1;
                }
            }
            b'$' => *i += 1,
            b'/' | b'\\' => {
                let delim = if b[*i] == b'\\' {
                    *i += 1;
                    *b.get(*i).ok_or(SedError::AddressEndsEarly)?
                } else {
                    b'/'
                };
                *i += 1;
                if !delimited(i, delim) {
                    return Err(SedError::AddressNotClosed);
                }
                while *i < b.len() && matches!(b[*i], b'I' | b'M') {
                    *i += 1;
                }
            }
            _ => {}
        }
        Ok(())
    };
    loop {
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b';') {
            i += 1;
        }
        if i >= b.len() {
            return Ok(u);
        }
        address(&mut i)?;
        skip_ws(&mut i);
        if i < b.len() && b[i] == b',' {
            i += 1;
            skip_ws(&mut i);
            address(&mut i)?;
            skip_ws(&mut i);
        }
        while i < b.len() && matches!(b[i], b'!' | b' ' | b'\t') {
            i += 1;
        }
        let Some(&cmd) = b.get(i) else {
            return Err(SedError::NoCommand);
        };
        i += 1;
        match cmd {
            b'{' | b'}' | b'=' | b'd' | b'D' | b'g' | b'G' | b'h' | b'H' | b'n' | b'N' | b'p'
            | b'P' | b'x' | b'z' | b'F' => {}
            b'#' | b':' | b'a' | b'i' | b'c' | b'b' | b't' | b'T' | b'v' | b'l' | b'L' | b'q'
            | b'Q' | b'r' | b'R' => {
                // To the end of the line (`a\` continues over escaped
                // newlines); labels and numbers end at `;` too.
                if matches!(
                    cmd,
                    b'b' | b't' | b'T' | b'v' | b'l' | b'L' | b'q' | b'Q' | b':'
                ) {
                    while i < b.len() && !matches!(b[i], b'\n' | b';' | b'}') {
                        i += 1;
                    }
                } else {
                    while i < b.len() && b[i] != b'\n' {
                        if b[i] == b'\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                }
            }
            b'w' | b'W' => u.writes.push(to_eol(&mut i)),
            b'e' => {
                u.exec = true;
                to_eol(&mut i);
            }
            b's' | b'y' => {
                let Some(&delim) = b.get(i) else {
                    return Err(SedError::EndsEarly(cmd as char));
                };
                if delim == b'\n' || delim == b'\\' {
                    return Err(SedError::NoDelimiter(cmd as char));
                }
                i += 1;
                if !delimited(&mut i, delim) || !delimited(&mut i, delim) {
                    return Err(SedError::NotClosed(cmd as char));
                }
                if cmd == b's' {
                    while i < b.len() {
                        match b[i] {
                            b'w' => {
                                i += 1;
                                u.writes.push(to_eol(&mut i));
                                break;
                            }
                            b'e' => {
                                u.exec = true;
                                i += 1;
                            }
                            b'g' | b'p' | b'i' | b'I' | b'm' | b'M' | b'0'..=b'9' => i += 1,
                            _ => break,
                        }
                    }
                }
            }
            other => {
                return Err(SedError::UnknownCommand(other as char));
            }
        }
    }
}

/// `awk`: operands are written with `-i inplace`; the program may write files
/// (`print > "f"`) or run commands (`system`, pipes).
fn awk(words: &[Val], w: &mut Writes) {
    const S: Spec = Spec {
        short: "fvFiElW",
        short_optional: "",
        long: &[
            "--file",
            "--assign",
            "--field-separator",
            "--include",
            "--load",
            "--exec",
        ],
    };
    let p = parse(words, &S);
    let sandbox =
        p.has(&["-S", "--sandbox"]) || p.values(&["-W"]).iter().any(|v| v.text == "sandbox");
    let in_place = p
        .values(&["-i", "--include"])
        .iter()
        .any(|v| v.text == "inplace" || v.text == "inplace.awk");
    let mut operands = p.operands.clone();
    let from_file = p.has(&["-f", "--file", "-E", "--exec"]);
    if !from_file && !operands.is_empty() {
        let prog = operands.remove(0);
        if !sandbox {
            let u = awk_program(&prog.text);
            if let Some(why) = u.anywhere {
                w.anywhere(why);
            }
            for f in u.writes {
                w.write(&with_text(&prog, &f));
            }
        }
    } else if from_file && !sandbox {
        w.anywhere("its program is in a file, so what it writes or runs cannot be checked (add `--sandbox`, or give the program inline)");
    }
    if p.has(&["-l", "--load"]) {
        w.anywhere("it loads an extension library");
    }
    if in_place {
        w.all(&operands);
    }
}

/// What an awk program writes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct AwkUse {
    pub writes: Vec<String>,
    pub anywhere: Option<String>,
}

/// Scan an awk program for output redirections, pipes and `system`: string
/// literals and regular expressions are skipped; a `>` counts as a
/// redirection only in a `print`/`printf` statement outside parentheses.
pub fn awk_program(p: &str) -> AwkUse {
    let b = p.as_bytes();
    let mut u = AwkUse::default();
    let mut i = 0;
    let mut depth = 0i32;
    // The parenthesis depth at which the current print statement began.
    let mut print_at: Option<i32> = None;
    // The last significant character, to tell a regex `/` from a division.
    let mut last: u8 = b'(';
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                last = b'"';
                continue;
            }
            b'/' if matches!(
                last,
                b'(' | b',' | b'{' | b'}' | b';' | b'!' | b'~' | b'&' | b'|' | b'\n' | b'='
            ) =>
            {
                i += 1;
                while i < b.len() && b[i] != b'/' && b[i] != b'\n' {
                    if b[i] == b'\\' {
                        i += 1;
                    } else if b[i] == b'[' {
                        // A bracket expression may hold `/`.
                        i += 1;
                        while i < b.len() && b[i] != b']' && b[i] != b'\n' {
                            i += 1;
                        }
                    }
                    i += 1;
                }
                i += 1;
                last = b'/';
                continue;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'(' => depth += 1,
            b')' => depth -= 1,
            b';' | b'{' | b'}' | b'\n' => print_at = None,
            b'|' => {
                if b.get(i + 1) == Some(&b'|') {
                    i += 2;
                    last = b'|';
                    continue;
                }
                u.anywhere = Some("its program pipes to or from a command".to_owned());
            }
            b'>' if print_at == Some(depth) => {
                i += 1;
                if b.get(i) == Some(&b'>') {
                    i += 1;
                }
                while i < b.len() && matches!(b[i], b' ' | b'\t') {
                    i += 1;
                }
                if b.get(i) == Some(&b'"') {
                    let s = i + 1;
                    let mut e = s;
                    while e < b.len() && b[e] != b'"' {
                        if b[e] == b'\\' {
                            e += 1;
                        }
                        e += 1;
                    }
                    let name = String::from_utf8_lossy(&b[s..e.min(b.len())]).into_owned();
                    if !name.contains('\\') {
                        u.writes.push(name);
                        i = e + 1;
                        last = b'"';
                        continue;
                    }
                }
                u.anywhere = Some("its program writes to a file named at run time".to_owned());
                continue;
            }
            b'@' if p[i..].starts_with("@load") => {
                u.anywhere = Some("its program loads an extension library".to_owned());
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let s = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let word = &p[s..i];
                match word {
                    "print" | "printf" => print_at = Some(depth),
                    "system" => {
                        u.anywhere = Some("its program runs commands (`system`)".to_owned());
                    }
                    _ => {}
                }
                last = b'a';
                continue;
            }
            _ => {}
        }
        if !matches!(c, b' ' | b'\t') {
            last = c;
        }
        i += 1;
    }
    u
}

/// `cp`, `mv`, `ln`, `install`, `rsync`: sources land in the destination.
fn copy_like(name: &str, words: &[Val], w: &mut Writes) {
    let spec = copy_spec(name);
    let p = parse(words, &spec);
    if name == "rsync" {
        if p.has(&["-e", "--rsh", "--rsync-path", "-M", "--remote-option"]) {
            w.anywhere("`rsync -e`/`--rsync-path` runs the command it names");
        }
        // --log-file, --backup-dir, --temp-dir, --write-batch …: written.
        w.all(&p.all_values());
    } else {
        w.all(&p.values(&["-S", "--suffix"]));
    }
    if name == "install" && p.has(&["-d", "--directory"]) {
        w.all(&p.operands);
        return;
    }
    let recursive = match name {
        "cp" => p.has(&["-r", "-R", "-a", "--recursive", "--archive"]),
        "mv" | "rsync" => true,
        _ => false,
    };
    let contents = p.has(&["-T", "--no-target-directory"]);
    let parents = match name {
        "cp" => p.has(&["--parents"]),
        "rsync" => p.has(&["-R", "--relative"]),
        _ => false,
    };
    // A hard link makes the source writable under another name.
    let hard_link = (name == "ln" && !p.has(&["-s", "--symbolic"]))
        || (name == "cp" && p.has(&["-l", "--link"]));
    let mut sources = p.operands.clone();
    if hard_link {
        let n = if p.has(&["-t", "--target-directory"]) || sources.len() < 2 {
            sources.len()
        } else {
            sources.len() - 1
        };
        w.all(&sources[..n]);
    }
    let dest = match p.values(&["-t", "--target-directory"]).pop() {
        Some(d) => d,
        None => {
            if sources.len() < 2 {
                // `ln -s target` links into the current folder; `cp x`
                // fails. The name it would make is the source's own.
                if name == "ln"
                    && let Some(s) = sources.first()
                {
                    let base = s
                        .text
                        .trim_end_matches('/')
                        .rsplit('/')
                        .next()
                        .unwrap_or("")
                        .to_owned();
                    if !base.is_empty() {
                        w.write(&with_text(s, &base));
                    }
                }
                return;
            }
            sources.pop().unwrap_or_else(|| unreachable!())
        }
    };
    if name == "mv" || (name == "rsync" && p.has(&["--remove-source-files"])) {
        for s in &sources {
            w.deep(s);
        }
    }
    // rsync: `src/` copies what is in src, not src itself.
    if name == "rsync" && !parents {
        let (inner, named): (Vec<Val>, Vec<Val>) =
            sources.into_iter().partition(|s| s.text.ends_with('/'));
        if !inner.is_empty() {
            w.targets.push(Target::Into {
                sources: inner,
                dest: dest.clone(),
                deep: true,
                contents: true,
                parents: false,
            });
        }
        sources = named;
        if sources.is_empty() {
            return;
        }
    }
    w.targets.push(Target::Into {
        sources,
        dest,
        deep: recursive,
        contents,
        parents,
    });
}

/// Option grammar of `cp`, `mv`, `ln`, `install` and `rsync`.
fn copy_spec(name: &str) -> Spec {
    match name {
        "install" => Spec {
            short: "gmoSt",
            long: &[
                "--group",
                "--mode",
                "--owner",
                "--suffix",
                "--target-directory",
                "--strip-program",
            ],
            ..Spec::default()
        },
        "rsync" => Spec {
            short: "efTBM",
            long: &[
                "--rsh",
                "--rsync-path",
                "--filter",
                "--exclude",
                "--include",
                "--exclude-from",
                "--include-from",
                "--files-from",
                "--temp-dir",
                "--log-file",
                "--log-file-format",
                "--backup-dir",
                "--partial-dir",
                "--compare-dest",
                "--copy-dest",
                "--link-dest",
                "--suffix",
                "--chmod",
                "--chown",
                "--usermap",
                "--groupmap",
                "--timeout",
                "--contimeout",
                "--bwlimit",
                "--max-size",
                "--min-size",
                "--max-delete",
                "--modify-window",
                "--block-size",
                "--port",
                "--password-file",
                "--out-format",
                "--info",
                "--debug",
                "--protocol",
                "--iconv",
                "--checksum-choice",
                "--compress-choice",
                "--compress-level",
                "--skip-compress",
                "--sockopts",
                "--outbuf",
                "--address",
                "--write-batch",
                "--only-write-batch",
                "--read-batch",
                "--stop-after",
                "--stop-at",
                "--remote-option",
            ],
            ..Spec::default()
        },
        _ => Spec {
            short: "St",
            long: &["--target-directory", "--suffix"],
            ..Spec::default()
        },
    }
}

/// `patch`: the file it names, or the files its patch names below where it
/// runs (or `-d DIR`).
fn patch(words: &[Val], w: &mut Writes) {
    const S: Spec = Spec {
        short: "pFoiBYzdrDVg",
        short_optional: "",
        long: &[
            "--strip",
            "--fuzz",
            "--output",
            "--input",
            "--prefix",
            "--basename-prefix",
            "--suffix",
            "--directory",
            "--reject-file",
            "--ifdef",
            "--version-control",
            "--get",
            "--quoting-style",
        ],
    };
    let p = parse(words, &S);
    if p.has(&["--dry-run", "-C", "--check"]) {
        return;
    }
    w.all(&p.values(&["-o", "--output", "-r", "--reject-file"]));
    let dirs = p.values(&["-d", "--directory"]);
    for d in &dirs {
        w.deep(d);
    }
    match p.operands.first() {
        Some(original) => w.write(original),
        None if dirs.is_empty() => {
            w.below_cwd("`patch` writes the files its patch names".to_owned());
        }
        None => {}
    }
}

/// git subcommands that leave the work tree alone (what they name is read,
/// or only the repository under `.git` changes).
const GIT_KEEPS_TREE: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "annotate",
    "grep",
    "ls-files",
    "ls-tree",
    "ls-remote",
    "rev-parse",
    "rev-list",
    "describe",
    "shortlog",
    "cat-file",
    "branch",
    "tag",
    "remote",
    "fetch",
    "push",
    "add",
    "commit",
    "reflog",
    "for-each-ref",
    "show-ref",
    "show-branch",
    "merge-base",
    "name-rev",
    "config",
    "version",
    "help",
    "init",
    "count-objects",
    "check-ignore",
    "check-attr",
    "check-ref-format",
    "var",
    "whatchanged",
    "gc",
    "fsck",
    "prune",
    "repack",
    "hash-object",
    "update-index",
    "write-tree",
    "commit-tree",
    "update-ref",
    "mktree",
    "symbolic-ref",
    "verify-commit",
    "verify-tag",
    "notes",
    "range-diff",
    "cherry",
    "diff-files",
    "diff-index",
    "diff-tree",
    "stripspace",
    "interpret-trailers",
    "format-patch",
    "archive",
    "bundle",
];

/// git subcommands that only read the repository.
const GIT_READS: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "annotate",
    "grep",
    "ls-files",
    "ls-tree",
    "ls-remote",
    "rev-parse",
    "rev-list",
    "describe",
    "shortlog",
    "cat-file",
    "for-each-ref",
    "show-ref",
    "show-branch",
    "merge-base",
    "name-rev",
    "version",
    "help",
    "count-objects",
    "check-ignore",
    "check-attr",
    "check-ref-format",
    "var",
    "whatchanged",
    "verify-commit",
    "verify-tag",
    "range-diff",
    "cherry",
    "diff-files",
    "diff-index",
    "diff-tree",
    "stripspace",
    "interpret-trailers",
    "format-patch",
    "archive",
];

/// Whether `git SUB REST…` leaves the repository under `.git` as it is:
/// a reading subcommand, or a listing form of one that can also write
/// (`git config --get`, `git branch`, `git stash list`).
fn git_reads_only(sub: &str, rest: &[Val]) -> bool {
    let first = rest.first().map(|x| x.text.as_str());
    let flags_only = rest.iter().all(|x| x.text.starts_with('-'));
    let any = |names: &[&str]| rest.iter().any(|x| names.contains(&x.text.as_str()));
    GIT_READS.contains(&sub)
        || (sub == "config"
            && (any(&["--get", "--get-all", "--get-regexp", "--list", "-l"])
                || matches!(first, Some("get" | "list"))))
        || (matches!(sub, "branch" | "tag")
            && (any(&["--list", "-l", "--show-current"])
                || (flags_only
                    && !any(&["-d", "-D", "--delete", "-m", "-M", "--move", "-c", "-C"]))))
        || (sub == "remote"
            && (rest.is_empty() || matches!(first, Some("-v" | "show" | "get-url"))))
        || (sub == "stash" && matches!(first, Some("list" | "show")))
        || (sub == "worktree" && first == Some("list"))
        || (sub == "submodule" && first == Some("status"))
        || (sub == "bisect" && matches!(first, Some("log" | "view")))
        || (sub == "reflog" && matches!(first, None | Some("show")))
        || (sub == "notes" && matches!(first, None | Some("list" | "show")))
}

/// `git`: commands that rewrite the work tree write below its top; files
/// named to `--output`/`-o` are written.
fn git(words: &[Val], w: &mut Writes) {
    w.git = true;
    let mut i = 0;
    let mut tree_dirs = Vec::new();
    while i < words.len() {
        let t = words[i].text.as_str();
        if matches!(t, "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace") {
            if let Some(v) = words.get(i + 1) {
                if t == "-C" || t == "--work-tree" {
                    tree_dirs.push(v.clone());
                }
                if t == "--git-dir" {
                    w.deep(v);
                }
            }
            i += 2;
            continue;
        }
        if let Some(v) = t.strip_prefix("--work-tree=") {
            tree_dirs.push(with_text(&words[i], v));
        }
        if let Some(v) = t.strip_prefix("--git-dir=") {
            w.deep(&with_text(&words[i], v));
        }
        if t.starts_with('-') {
            i += 1;
            continue;
        }
        break;
    }
    let Some(sub) = words.get(i) else {
        return;
    };
    let rest = &words[i + 1..];
    let sub = sub.text.as_str();
    let has = |names: &[&str]| rest.iter().any(|x| names.contains(&x.text.as_str()));
    // Files git writes because an option names them.
    let mut k = 0;
    while k < rest.len() {
        let t = rest[k].text.as_str();
        if matches!(t, "-o" | "--output" | "--output-directory") {
            if let Some(v) = rest.get(k + 1) {
                w.write(v);
            }
            k += 2;
            continue;
        }
        if t.starts_with("--") && t.contains('=') {
            w.write(&rest[k]);
        } else if let Some(v) = t.strip_prefix("-o")
            && !v.is_empty()
            && matches!(sub, "format-patch" | "archive")
        {
            w.write(&with_text(&rest[k], v));
        }
        k += 1;
    }
    w.repo = !git_reads_only(sub, rest);
    let keeps = GIT_KEEPS_TREE.contains(&sub)
        || (sub == "apply"
            && (has(&["--check", "--stat", "--numstat", "--summary", "--cached"])
                && !has(&["--apply", "--index"])))
        || (sub == "reset" && !has(&["--hard", "--merge", "--keep"]))
        || (sub == "rm" && has(&["--cached"]))
        || (sub == "stash"
            && rest
                .first()
                .is_some_and(|x| x.text == "list" || x.text == "show"))
        || (sub == "worktree" && rest.first().is_some_and(|x| x.text == "list"))
        || (sub == "submodule" && rest.first().is_some_and(|x| x.text == "status"))
        || (sub == "bisect"
            && rest
                .first()
                .is_some_and(|x| x.text == "log" || x.text == "view"));
    if keeps {
        w.known = true;
        return;
    }
    if sub == "clone" {
        // `git clone URL [DIR]`: everything lands in DIR.
        let operands: Vec<&Val> = rest.iter().filter(|x| !x.text.starts_with('-')).collect();
        if let Some(d) = operands.get(1) {
            w.deep(d);
        } else {
            w.below_cwd("`git clone` writes a folder named after the repository".to_owned());
        }
        return;
    }
    w.all(rest);
    for d in &tree_dirs {
        w.deep(d);
    }
    if tree_dirs.is_empty() {
        w.beyond = Some(Beyond::Repo(format!(
            "`git {sub}` may rewrite any file of the work tree"
        )));
    }
}

/// `tar`: extracting writes what the archive holds below `-C DIR` or where it
/// runs; creating writes the archive.
fn tar(words: &[Val], w: &mut Writes) {
    // Old style: `tar xzf a.tar` — the first word's letters are options,
    // and those taking values take the next words in order.
    let mut words = words.to_vec();
    if let Some(first) = words.first()
        && !first.text.starts_with('-')
        && !first.text.is_empty()
        && first.text.chars().all(|c| c.is_ascii_alphabetic())
    {
        words[0] = with_text(first, &format!("-{}", first.text));
    }
    const S: Spec = Spec {
        short: "fCTXbHKNgLFI",
        short_optional: "",
        long: &[
            "--file",
            "--directory",
            "--files-from",
            "--exclude-from",
            "--blocking-factor",
            "--format",
            "--starting-file",
            "--newer",
            "--after-date",
            "--listed-incremental",
            "--tape-length",
            "--info-script",
            "--new-volume-script",
            "--use-compress-program",
            "--to-command",
            "--rsh-command",
            "--rmt-command",
            "--exclude",
            "--transform",
            "--xform",
            "--owner",
            "--group",
            "--mode",
            "--mtime",
            "--label",
            "--volno-file",
            "--index-file",
            "--checkpoint-action",
        ],
    };
    let p = parse(&words, &S);
    let runs = p.has(&[
        "-F",
        "-I",
        "--info-script",
        "--new-volume-script",
        "--use-compress-program",
        "--to-command",
        "--rsh-command",
        "--rmt-command",
    ]) || p
        .values(&["--checkpoint-action"])
        .iter()
        .any(|v| v.text.starts_with("exec"));
    if runs {
        w.anywhere("`tar` runs the command an option names");
    }
    w.all(&p.values(&["--index-file", "--volno-file", "--listed-incremental", "-g"]));
    let extract = p.has(&["-x", "--extract", "--get"]);
    let create = p.has(&[
        "-c",
        "--create",
        "-r",
        "--append",
        "-u",
        "--update",
        "-A",
        "--catenate",
        "--concatenate",
        "--delete",
    ]);
    if create {
        for f in p.values(&["-f", "--file"]) {
            if f.text != "-" {
                w.write(&f);
            }
        }
    }
    if extract {
        let dirs = p.values(&["-C", "--directory"]);
        if dirs.is_empty() {
            w.below_cwd("`tar -x` writes the files the archive holds".to_owned());
        }
        for d in &dirs {
            w.deep(d);
        }
        if p.has(&["-O", "--to-stdout"]) && !runs {
            w.beyond = None;
            w.targets.clear();
        }
    }
    if !extract && !create {
        w.known = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(line: &str) -> CommandUse {
        let words: Vec<Val> = line
            .split_whitespace()
            .map(|t| Val {
                text: t.to_owned(),
                dynamic: false,
                glob: t.contains('*'),
            })
            .collect();
        CommandUse {
            text: line.to_owned(),
            name: words[0].text.clone(),
            args: words[1..].to_vec(),
            transparent: false,
            dynamic: None,
            assigned: 0,
        }
    }

    /// The words written (deep ones marked `+`), and where more is written.
    fn written(line: &str) -> (Vec<String>, Option<&'static str>) {
        let w = classify(&cmd(line));
        let mut out = Vec::new();
        for t in &w.targets {
            match t {
                Target::Path { word, deep } => {
                    out.push(format!("{}{}", word.text, if *deep { "+" } else { "" }))
                }
                Target::Into {
                    sources,
                    dest,
                    deep,
                    contents,
                    parents,
                } => out.push(format!(
                    "{}->{}{}{}{}",
                    sources
                        .iter()
                        .map(|s| s.text.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                    dest.text,
                    if *deep { "+" } else { "" },
                    if *contents { "=" } else { "" },
                    if *parents { "^" } else { "" }
                )),
            }
        }
        let beyond = w.beyond.as_ref().map(|b| match b {
            Beyond::Cwd(_) => "cwd",
            Beyond::Repo(_) => "repo",
            Beyond::Anywhere(_) => "anywhere",
        });
        (out, beyond)
    }

    fn targets(line: &str) -> Vec<String> {
        written(line).0
    }

    #[test]
    fn readers_write_nothing() {
        for line in [
            "cat scripts/x.sh",
            "grep -rn foo scripts/",
            "head -n 3 scripts/x",
            "sed -n 1p scripts/x.sh",
            "sed s/a/b/ scripts/x.sh",
            "awk {print} scripts/x.sh",
            "sort scripts/x",
            "uniq scripts/x",
            "find scripts -name *.sh",
            "git log scripts",
            "git diff -- scripts/x",
            "tar -tf a.tar",
            "unzip -l a.zip",
            "gzip -c scripts/x",
            "patch --dry-run scripts/x p.diff",
        ] {
            assert_eq!(written(line), (Vec::new(), None), "{line}");
        }
    }

    #[test]
    fn writers_name_their_targets() {
        assert_eq!(targets("sed -i 1ax scripts/x.sh"), ["scripts/x.sh"]);
        assert_eq!(targets("sed -i.bak -e 1ax a b"), ["a", "b"]);
        assert_eq!(targets("sed -ni 1p a"), ["a"]);
        assert_eq!(targets("sed --in-place=.b s/a/b/ a"), ["a"]);
        assert_eq!(targets("sed -n w/tmp/o a"), ["/tmp/o"]);
        assert_eq!(targets("sed s/a/b/wout a"), ["out"]);
        assert_eq!(targets("tee a b"), ["a", "b"]);
        assert_eq!(targets("tee -a a"), ["a"]);
        assert_eq!(targets("cp a b"), ["a->b"]);
        assert_eq!(targets("cp -r a b c"), ["a,b->c+"]);
        assert_eq!(targets("cp -t d a b"), ["a,b->d"]);
        assert_eq!(targets("cp -T a b"), ["a->b="]);
        assert_eq!(targets("mv a b"), ["a+", "a->b+"]);
        assert_eq!(targets("ln -sf /x scripts/y"), ["/x->scripts/y"]);
        assert_eq!(targets("ln scripts/x h"), ["scripts/x", "scripts/x->h"]);
        assert_eq!(targets("cp -l scripts/x h"), ["scripts/x", "scripts/x->h"]);
        assert_eq!(targets("cp --parents a/b d"), ["a/b->d^"]);
        assert_eq!(targets("rsync -R a/./b d"), ["a/./b->d+^"]);
        assert_eq!(targets("install -m 755 a b"), ["a->b"]);
        assert_eq!(targets("install -d a b"), ["a", "b"]);
        assert_eq!(targets("rsync -a src/ dest"), ["src/->dest+="]);
        assert_eq!(targets("rsync -a src dest"), ["src->dest+"]);
        assert_eq!(targets("dd if=a of=b"), ["b"]);
        assert_eq!(targets("rm -rf a b"), ["a+", "b+"]);
        assert_eq!(targets("chmod -R 755 a"), ["755+", "a+"]);
        assert_eq!(targets("touch -r ref a"), ["a", "ref"]);
        assert_eq!(targets("truncate -s 0 a"), ["a", "0"]);
        assert_eq!(targets("sort -o out in"), ["out"]);
        assert_eq!(targets("uniq in out"), ["out"]);
        assert_eq!(targets("patch a p.diff"), ["a"]);
        assert_eq!(targets("patch -o out a p.diff"), ["out", "a"]);
        assert_eq!(targets("tar -cf a.tar src"), ["a.tar"]);
        assert_eq!(targets("tar czf a.tgz src"), ["a.tgz"]);
        assert_eq!(targets("tar -xf a.tar -C out"), ["out+"]);
        assert_eq!(targets("gunzip scripts/x.gz"), ["scripts/x.gz"]);
        assert_eq!(targets("find scripts -name x -delete"), ["scripts+"]);
        assert_eq!(targets("yq -i .a=1 f.yaml"), [".a=1", "f.yaml"]);
        assert_eq!(
            targets("perl -pi -e s/a/b/ f"),
            ["-pi", "-e", "s/a/b/", "f"]
        );
        assert_eq!(targets("python3 tool.py out"), ["out"]);
        assert_eq!(targets("bash scripts/publish.sh"), Vec::<String>::new());
        assert_eq!(targets("bash -e scripts/publish.sh"), ["-e"]);
        assert_eq!(targets("make -C scripts"), ["-C", "scripts"]);
        assert_eq!(targets("git checkout -- scripts/x"), ["--", "scripts/x"]);
        assert_eq!(
            targets("git diff --output=scripts/x"),
            ["--output=scripts/x"]
        );
        assert_eq!(targets("git format-patch -o scripts HEAD~1"), ["scripts"]);
    }

    #[test]
    fn writes_below_a_folder_or_anywhere() {
        assert_eq!(written("tar -xf a.tar").1, Some("cwd"));
        assert_eq!(written("tar xf a.tar").1, Some("cwd"));
        assert_eq!(written("tar -xOf a.tar").1, None);
        assert_eq!(written("tar -xf a.tar --to-command=sh").1, Some("anywhere"));
        assert_eq!(written("unzip a.zip").1, Some("cwd"));
        assert_eq!(
            written("unzip a.zip -d out"),
            (vec!["out+".to_owned()], None)
        );
        assert_eq!(written("patch -p1").1, Some("cwd"));
        assert_eq!(written("patch -p1 -i p.diff").1, Some("cwd"));
        assert_eq!(written("git apply p.diff").1, Some("repo"));
        assert_eq!(written("git apply --check p.diff").1, None);
        assert_eq!(written("git checkout main").1, Some("repo"));
        assert_eq!(written("git stash pop").1, Some("repo"));
        assert_eq!(written("git reset --hard").1, Some("repo"));
        assert_eq!(written("git reset HEAD x").1, None);
        assert_eq!(written("git -C sub checkout main").0, ["main", "sub+"]);
        assert_eq!(written("sed -e 1eid a").1, Some("anywhere"));
        assert_eq!(written("sed s/a/b/e a").1, Some("anywhere"));
        assert_eq!(written("sed -f prog.sed a").1, Some("anywhere"));
        assert_eq!(written("sed --sandbox -f prog.sed a").1, None);
        assert_eq!(written("awk -f prog.awk a").1, Some("anywhere"));
        assert_eq!(written("rsync -e ssh a b").1, Some("anywhere"));
        assert_eq!(written("rg --pre ./x foo").1, Some("anywhere"));
        assert_eq!(written("wget -r http://x/").1, Some("cwd"));
    }

    #[test]
    fn sed_programs() {
        let w = |p: &str| sed_program(p).unwrap();
        assert_eq!(w("1a touch PWNED"), SedUse::default());
        assert_eq!(w("s/a/b/g;/x/d"), SedUse::default());
        assert_eq!(w("$!N;s/\\n/ /"), SedUse::default());
        assert_eq!(w("/a\\/b/p"), SedUse::default());
        assert_eq!(w("s|a|b|w out.txt").writes, ["out.txt"]);
        assert_eq!(w("1w scripts/x\np").writes, ["scripts/x"]);
        assert_eq!(w("2,5W  o").writes, ["o"]);
        assert!(w("s/.*/id/e").exec);
        assert!(w("1e touch x").exec);
        assert!(w("/x/{e date\n}").exec);
        assert!(!w("y/abc/xyz/").exec);
        assert!(!w(":a;N;ba").exec);
        assert!(!w("1i\\\nhello e").exec);
        assert!(sed_program("s/a/b").is_err());
        assert!(sed_program("1k").is_err());
    }

    #[test]
    fn awk_programs() {
        assert_eq!(awk_program("{print $1}"), AwkUse::default());
        assert_eq!(awk_program("$3 > 100 {print}"), AwkUse::default());
        assert_eq!(awk_program("/a|b/ {print}"), AwkUse::default());
        assert_eq!(awk_program("{print (a > b)}"), AwkUse::default());
        assert_eq!(awk_program("a || b {print \"x|y>z\"}"), AwkUse::default());
        assert_eq!(awk_program("{print > \"out.txt\"}").writes, ["out.txt"]);
        assert_eq!(awk_program("{printf \"%s\", $0 >> \"o\"}").writes, ["o"]);
        assert!(awk_program("{print > FILENAME}").anywhere.is_some());
        assert!(awk_program("{print | \"sh\"}").anywhere.is_some());
        assert!(awk_program("{system(\"id\")}").anywhere.is_some());
        assert!(
            awk_program("BEGIN { \"id\" | getline x }")
                .anywhere
                .is_some()
        );
        assert!(awk_program("@load \"x\"").anywhere.is_some());
    }

    #[test]
    fn assignments_count_as_named_for_unknown_commands() {
        let mut c = cmd("tool x");
        c.args.insert(0, Val::literal("scripts/o"));
        c.assigned = 1;
        assert_eq!(
            classify(&c)
                .targets
                .iter()
                .filter_map(|t| match t {
                    Target::Path { word, .. } => Some(word.text.clone()),
                    _ => None,
                })
                .collect::<Vec<_>>(),
            ["x", "scripts/o"]
        );
        let mut c = cmd("cat x");
        c.args.insert(0, Val::literal("scripts/o"));
        c.assigned = 1;
        assert!(classify(&c).targets.is_empty());
    }
}
