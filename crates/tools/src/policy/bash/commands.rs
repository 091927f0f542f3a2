//! The commands the analysis knows by name: builtins that are refused,
//! shells and `eval` (whose script is analysed in turn), wrappers that run
//! another command (`env`, `timeout`, `xargs`, `find -exec`, …), and those
//! that change the state later commands see (`cd`, `export`, …). One function
//! per command family; [`Analyzer::run_with`] only picks which.

use super::*;

/// One simple command about to be recorded: its words, checked and named.
struct Call {
    /// The whole command as written, assignments first.
    text: String,
    /// The command name as written.
    name: String,
    /// Its last path component (`/usr/bin/env` → `env`).
    base: String,
    /// The values of the assignments before it (`A=1 cmd`).
    args: Vec<Val>,
    words: Vec<Val>,
    /// Why the command's arguments are only known at run time, when a
    /// wrapper around it (`xargs`, `find -exec`) completes them.
    inherited: Option<String>,
}

impl Call {
    /// Check the command name; `None` for a command with no words.
    fn new(
        assigns: Vec<(String, Vec<Val>)>,
        words: Vec<Val>,
        inherited: Option<String>,
    ) -> Result<Option<Call>, Unanalysable> {
        let Some(name_val) = words.first() else {
            return Ok(None);
        };
        if name_val.dynamic {
            return Err(refuse(format!(
                "the command name `{}` is only known at run time",
                name_val.text
            )));
        }
        let name = name_val.text.clone();
        if name.is_empty() {
            return Err(refuse("the command name is empty"));
        }
        if !name.chars().all(|c| c.is_ascii_graphic()) {
            return Err(refuse(format!(
                "the command name `{name}` is not plain ASCII without spaces"
            )));
        }
        if name_val.glob && name != "[" && name != "[[" {
            return Err(refuse(format!("the command name `{name}` is a glob")));
        }
        let mut text_parts: Vec<String> = assigns.iter().map(|(t, _)| t.clone()).collect();
        text_parts.extend(words.iter().map(|w| w.text.clone()));
        let text = text_parts.join(" ");
        let base = basename(&name).to_owned();
        if let Some(why) = &inherited
            && matches!(
                base.as_str(),
                "sh" | "bash"
                    | "dash"
                    | "zsh"
                    | "ksh"
                    | "ash"
                    | "mksh"
                    | "yash"
                    | "posh"
                    | "eval"
                    | "trap"
                    | "source"
                    | "."
            )
        {
            // `xargs -I{} sh -c 'cat {}'`, `find -exec sh -c '… {} …' \;`: the
            // script itself is completed at run time.
            return Err(refuse(format!(
                "`{base}` would run a script completed at run time ({why})"
            )));
        }
        let args: Vec<Val> = assigns.into_iter().flat_map(|(_, v)| v).collect();
        Ok(Some(Call {
            text,
            name,
            base,
            args,
            words,
            inherited,
        }))
    }

    /// The command as it runs: `args` (assigned values), then `words` after
    /// the name.
    fn plain(&self, args: Vec<Val>, words: &[Val]) -> CommandUse {
        let mut args = args;
        let assigned = args.len();
        args.extend(words.iter().skip(1).cloned());
        let dynamic = self.inherited.clone().or_else(|| {
            words
                .iter()
                .skip(1)
                .find(|w| w.dynamic)
                .map(|w| format!("`{}` is only known at run time", w.text))
        });
        CommandUse {
            text: self.text.clone(),
            name: self.name.clone(),
            args,
            transparent: false,
            dynamic,
            assigned,
        }
    }

    /// The command itself, with its own words.
    fn as_run(&mut self) -> CommandUse {
        let args = std::mem::take(&mut self.args);
        self.plain(args, &self.words)
    }

    /// A wrapper around the command it runs, which is recorded on its own.
    fn as_wrapper(&mut self) -> CommandUse {
        let args = std::mem::take(&mut self.args);
        CommandUse {
            text: self.text.clone(),
            name: self.name.clone(),
            assigned: args.len(),
            args,
            transparent: true,
            dynamic: None,
        }
    }
}

/// Option grammar of the wrappers that run the command after their options.
fn wrapper_opts(base: &str) -> Opts {
    match base {
        "timeout" => Opts {
            flags: &["--preserve-status", "--foreground", "-v", "--verbose"],
            valued: &["-k", "--kill-after", "-s", "--signal"],
            numeric: false,
        },
        "nice" => Opts {
            flags: &[],
            valued: &["-n", "--adjustment"],
            numeric: true,
        },
        "stdbuf" => Opts {
            flags: &[],
            valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
            numeric: false,
        },
        "exec" => Opts {
            flags: &["-c", "-l"],
            valued: &["-a"],
            numeric: false,
        },
        "time" => Opts {
            flags: &[
                "-p",
                "-v",
                "-q",
                "-a",
                "--portability",
                "--verbose",
                "--quiet",
                "--append",
            ],
            valued: &["-f", "--format", "-o", "--output"],
            numeric: false,
        },
        "command" => Opts {
            flags: &["-p", "-v", "-V"],
            valued: &[],
            numeric: false,
        },
        _ => Opts {
            flags: &[],
            valued: &[],
            numeric: false,
        },
    }
}

impl Analyzer<'_> {
    /// Record a command that runs, unwrapping wrappers. Returns its text.
    pub(super) fn run_with(
        &mut self,
        assigns: Vec<(String, Vec<Val>)>,
        words: Vec<Val>,
        inherited_dynamic: Option<String>,
    ) -> Result<String, Unanalysable> {
        let Some(call) = Call::new(assigns, words, inherited_dynamic)? else {
            return Ok(String::new());
        };
        match call.base.as_str() {
            "enable" | "bind" | "alias" | "complete" | "compgen" | "setsid" | "coproc"
            | "pushd" | "popd" | "hash" => {
                let why = match call.base.as_str() {
                    "setsid" => "it leaves the process group, so it could outlive the call",
                    "pushd" | "popd" => "the directory stack is not followed",
                    _ => "it changes what later commands run",
                };
                Err(refuse(format!("`{}` is not allowed: {why}", call.base)))
            }
            "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash" | "mksh" | "yash" | "posh" => {
                let as_plain = call.plain(Vec::new(), &call.words);
                self.shell(&call.base, call.args, &call.words, as_plain, &call.text)
            }
            "eval" => self.eval(call),
            "trap" => self.trap(call),
            "env" => self.env(call),
            "timeout" | "nice" | "nohup" | "stdbuf" | "builtin" | "busybox" | "exec" | "time"
            | "command" => self.wrapped(call),
            "xargs" => self.xargs(call),
            "find" => self.find(call),
            "cd" => self.cd(call),
            "source" | "." => self.source(call),
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                for w in &call.words[1..] {
                    self.assignment_word(w)?;
                }
                self.record(call)
            }
            _ => self.record(call),
        }
    }

    /// Record the command as it runs, with its own words.
    fn record(&mut self, mut call: Call) -> Result<String, Unanalysable> {
        self.out.items.push(Item::Command(call.as_run()));
        Ok(call.text)
    }

    /// `eval words…`: the joined words are a script, analysed in turn.
    fn eval(&mut self, mut call: Call) -> Result<String, Unanalysable> {
        let mut parts = Vec::new();
        for w in &call.words[1..] {
            if w.dynamic {
                return Err(refuse(format!(
                    "`eval` of `{}`, which is only known at run time",
                    w.text
                )));
            }
            parts.push(w.text.clone());
        }
        self.out.items.push(Item::Command(call.as_wrapper()));
        self.program(&parts.join(" "))?;
        Ok(call.text)
    }

    /// `trap 'cmd' SIGNAL` runs cmd later: judge it now.
    fn trap(&mut self, mut call: Call) -> Result<String, Unanalysable> {
        let first = call.words.get(1);
        if let Some(w) = first
            && !w.text.starts_with('-')
        {
            if w.dynamic {
                return Err(refuse(format!(
                    "`trap` of `{}`, which is only known at run time",
                    w.text
                )));
            }
            let body = w.text.clone();
            self.out.items.push(Item::Command(call.as_run()));
            self.program(&body)?;
            return Ok(call.text);
        }
        self.record(call)
    }

    /// `env [-i] [-u NAME] [NAME=value…] [cmd…]`.
    fn env(&mut self, mut call: Call) -> Result<String, Unanalysable> {
        const O: Opts = Opts {
            flags: &[
                "-i",
                "-0",
                "-v",
                "--ignore-environment",
                "--null",
                "--debug",
            ],
            valued: &["-u", "--unset"],
            numeric: false,
        };
        let words = &call.words;
        let (mut i, _) = parse_opts(&call.base, words, &O)?;
        let mut inner_assigns = Vec::new();
        while i < words.len() {
            match self.assignment_word(&words[i])? {
                Some(v) => {
                    inner_assigns.push((words[i].text.clone(), vec![v]));
                    i += 1;
                }
                None => break,
            }
        }
        if i >= call.words.len() {
            return self.record(call);
        }
        let inner = call.words[i..].to_vec();
        self.out.items.push(Item::Command(call.as_wrapper()));
        self.run_with(inner_assigns, inner, call.inherited.clone())?;
        Ok(call.text)
    }

    /// `timeout`, `nice`, `nohup`, `exec`, `time`, `command`, …: options, then
    /// the command they run.
    fn wrapped(&mut self, mut call: Call) -> Result<String, Unanalysable> {
        let base = call.base.as_str();
        let words = &call.words;
        let (mut i, opts) = parse_opts(base, words, &wrapper_opts(base))?;
        if base == "command" && opts.iter().any(|(o, _)| o == "-v" || o == "-V") {
            // Only looks the name up; runs nothing.
            return self.record(call);
        }
        for (o, v) in &opts {
            if base == "time"
                && (o == "-o" || o == "--output")
                && let Some(v) = v
            {
                self.out.items.push(Item::Write(v.clone()));
            }
        }
        if base == "timeout" {
            // The duration comes before the command.
            if i >= words.len() {
                return Err(refuse("`timeout` without a duration"));
            }
            i += 1;
        }
        if i >= words.len() {
            if base == "exec" {
                // `exec 3>file`: only redirections, already judged.
                return Ok(call.text);
            }
            return self.record(call);
        }
        let inner = words[i..].to_vec();
        self.out.items.push(Item::Command(call.as_wrapper()));
        self.run_with(Vec::new(), inner, call.inherited.clone())?;
        Ok(call.text)
    }

    /// `xargs [opts] [cmd…]`: runs cmd (or `echo`) with arguments from stdin.
    fn xargs(&mut self, mut call: Call) -> Result<String, Unanalysable> {
        const O: Opts = Opts {
            flags: &[
                "-0",
                "-r",
                "-t",
                "-p",
                "-x",
                "-o",
                "--null",
                "--no-run-if-empty",
                "--verbose",
                "--interactive",
                "--exit",
                "--open-tty",
            ],
            valued: &[
                "-a",
                "-d",
                "-E",
                "-I",
                "-L",
                "-n",
                "-P",
                "-s",
                "--arg-file",
                "--delimiter",
                "--eof",
                "--replace",
                "--max-lines",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            ],
            numeric: false,
        };
        let (i, opts) = parse_opts(&call.base, &call.words, &O)?;
        for (o, v) in &opts {
            if (o == "-a" || o == "--arg-file")
                && let Some(v) = v
            {
                self.out.items.push(Item::Read(v.clone()));
            }
        }
        self.out.items.push(Item::Command(call.as_wrapper()));
        let inner = if i >= call.words.len() {
            vec![Val::literal("echo")]
        } else {
            call.words[i..].to_vec()
        };
        self.run_with(
            Vec::new(),
            inner,
            Some("`xargs` adds arguments read from stdin".to_owned()),
        )?;
        Ok(call.text)
    }

    /// `find … -exec cmd {} ;`: each `-exec` command runs on its own; the
    /// `-fprint` family writes a file.
    fn find(&mut self, mut call: Call) -> Result<String, Unanalysable> {
        let words = &call.words;
        let mut own = Vec::new();
        let mut k = 1;
        while k < words.len() {
            let t = words[k].text.as_str();
            if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") && !words[k].dynamic {
                // `-execdir` runs in each folder found: a relative
                // path in it names a file there, not here.
                let elsewhere = matches!(t, "-execdir" | "-okdir");
                let mut inner = Vec::new();
                k += 1;
                while k < words.len() && !matches!(words[k].text.as_str(), ";" | "+") {
                    let mut w = words[k].clone();
                    if w.text.contains("{}")
                        || (elsewhere && !inner.is_empty() && !w.text.starts_with(['/', '-', '~']))
                    {
                        w.dynamic = true;
                    }
                    inner.push(w);
                    k += 1;
                }
                k += 1;
                if inner.is_empty() {
                    return Err(refuse("`find -exec` without a command"));
                }
                self.run_with(
                    Vec::new(),
                    inner,
                    Some("`find -exec` passes the files it finds".to_owned()),
                )?;
                continue;
            }
            if matches!(t, "-fprint" | "-fprint0" | "-fprintf" | "-fls")
                && let Some(target) = words.get(k + 1)
            {
                if target.dynamic {
                    return Err(refuse("`find -fprint` to a file only known at run time"));
                }
                self.out.items.push(Item::Write(target.clone()));
            }
            own.push(words[k].clone());
            k += 1;
        }
        let args = std::mem::take(&mut call.args);
        let mut cmd = call.plain(args, &[]);
        cmd.args.extend(own.iter().cloned());
        if cmd.dynamic.is_none() {
            cmd.dynamic = own
                .iter()
                .find(|w| w.dynamic)
                .map(|w| format!("`{}` is only known at run time", w.text));
        }
        self.out.items.push(Item::Command(cmd));
        Ok(call.text)
    }

    /// `cd dir`: later relative paths are resolved from `dir`.
    fn cd(&mut self, mut call: Call) -> Result<String, Unanalysable> {
        let target = match call.words.get(1) {
            None => match self.home {
                Some(h) => Val::literal(h.display().to_string()),
                None => return Err(refuse("`cd` to an unknown home directory")),
            },
            Some(w) if w.text == "-" => {
                return Err(refuse("`cd -` goes to a directory that is not followed"));
            }
            Some(w) if w.dynamic => {
                return Err(refuse(format!(
                    "`cd {}`: the directory is only known at run time",
                    w.text
                )));
            }
            Some(w) => w.clone(),
        };
        self.out.items.push(Item::Command(call.as_run()));
        self.out.items.push(Item::Cd(target));
        Ok(call.text)
    }

    /// `source file` / `. file`: a script that cannot be read is refused.
    fn source(&mut self, call: Call) -> Result<String, Unanalysable> {
        if let Some(w) = call.words.get(1)
            && is_unreadable_script(w)
        {
            return Err(refuse(format!(
                "`{} {}` runs commands that cannot be checked",
                call.base, w.text
            )));
        }
        self.record(call)
    }
}
