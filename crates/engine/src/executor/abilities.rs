//! An agent's `abilities` against one host call of its JavaScript tools,
//! judged by what the call does rather than by the host function's name:
//! `tool("read")` needs `fs` as `read()` does, `tool("web_fetch")` needs
//! `network`, `tool("bash")` is `sh`, an MCP tool needs `mcp`. A shell line
//! (`sh(…)`, `tool("bash", …)`) is parsed by the bash policy's analysis and
//! the `sh:<command>` entries are held against every command it would run —
//! after `;`, `&&`, `|`, inside `$(…)`, through `env`, `xargs`, `command`,
//! `sh -c`, `find -exec` and runners such as `sudo` — by program name
//! (`/bin/rm` is `rm`). A line that cannot be analysed is refused when a
//! `sh:` entry applies.
//!
//! What this is not: the policy (the gate judges the same call after the
//! abilities allowed it), nor an interpreter: what an allowed program does
//! itself (`python -c …`, `make`, `git` hooks) is not followed, so `sh:rm`
//! denies the `rm` program, not every way of deleting a file.

use serde_json::Value;

use agentfile_plan::agent::Abilities;
use agentfile_tools::policy::bash::{self, CommandUse};
use agentfile_tools::script::HostFn;

/// What one host call needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Needs {
    /// The call in words, for messages (`` `tool("read")` ``).
    pub what: String,
    /// Base abilities it needs, every one (`tool("read")`: `tool` and `fs`).
    pub base: Vec<&'static str>,
    /// The shell line it runs, judged against `sh` and `sh:<command>`.
    pub line: Option<String>,
}

/// What `func(args)` needs; for `tool`, `name` is the tool it calls and
/// `tool_args` its arguments.
pub(super) fn needs(func: HostFn, name: &str, args: &Value) -> Needs {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match func {
        HostFn::Read | HostFn::Write => Needs {
            what: format!("`{}()`", func.name()),
            base: vec!["fs"],
            line: None,
        },
        HostFn::Fetch => Needs {
            what: "`fetch()`".to_owned(),
            base: vec!["network"],
            line: None,
        },
        HostFn::Env => Needs {
            what: "`env()`".to_owned(),
            base: vec!["env"],
            line: None,
        },
        HostFn::Sh => Needs {
            what: format!("`sh({})`", text(args, "command")),
            base: Vec::new(),
            line: Some(text(args, "command")),
        },
        HostFn::Tool => {
            let what = format!("`tool(\"{name}\")`");
            let lower = name.to_ascii_lowercase();
            let (base, line) = match lower.as_str() {
                "read" | "write" | "edit" | "glob" | "grep" | "ls" => (vec!["tool", "fs"], None),
                "web_fetch" | "web_search" => (vec!["tool", "network"], None),
                "bash" => (vec!["tool"], Some(text(args, "command"))),
                n if n.starts_with("mcp_") => (vec!["mcp"], None),
                _ => (vec!["tool"], None),
            };
            Needs { what, base, line }
        }
    }
}

/// Why the abilities refuse a host call: the `policy_denied` event's reason,
/// and (after `denied (abilities of …): `) the error thrown in the script.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refused {
    /// `what` needs a base ability (or `sh`) the agent denies or never allows.
    #[error("{what} needs the `{ability}` ability, which the agent {}", if *denied { "denies" } else { "does not allow" })]
    Ability {
        what: String,
        ability: String,
        denied: bool,
    },
    #[error(
        "{what}: the agent's `sh:` abilities apply to every command of the line, and this line cannot be analysed ({reason}); write it as plain commands"
    )]
    Unanalysable { what: String, reason: String },
    /// A command of the line runs `program`, which a `sh:` entry denies;
    /// `nth` says which command when the line has several.
    #[error("{what}: `{command}` runs `{program}`{nth}, and the agent denies `sh:{program}`")]
    Denied {
        what: String,
        command: String,
        program: String,
        nth: Nth,
    },
    /// A command of the line runs `program`, which no `sh:` entry allows.
    #[error(
        "{what}: `{command}` runs `{program}`{nth}, which neither `sh` nor `sh:{program}` in the agent's abilities allows"
    )]
    NotAllowed {
        what: String,
        command: String,
        program: String,
        nth: Nth,
    },
    /// The check itself failed (its thread panicked).
    #[error("the abilities could not be checked")]
    Unchecked,
}

/// Which command of a line (` (command 2 of 3)`); nothing when it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Nth {
    index: usize,
    of: usize,
}

impl std::fmt::Display for Nth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.of > 1 {
            write!(f, " (command {} of {})", self.index + 1, self.of)
        } else {
            Ok(())
        }
    }
}

/// Whether `abilities` allow what `needs` says; else why not. May start the
/// shell analysis's worker process: call it off the async threads.
pub(super) fn judge(abilities: &Abilities, needs: &Needs) -> Result<(), Refused> {
    for ability in &needs.base {
        if !abilities.permits(ability, None) {
            return Err(Refused::Ability {
                what: needs.what.clone(),
                ability: (*ability).to_owned(),
                denied: abilities.deny.iter().any(|a| a == ability),
            });
        }
    }
    match &needs.line {
        Some(line) => judge_line(abilities, &needs.what, line),
        None => Ok(()),
    }
}

/// A shell line against `sh` and every `sh:<command>` entry.
fn judge_line(abilities: &Abilities, what: &str, line: &str) -> Result<(), Refused> {
    let listed = |list: &[String], a: &str| list.iter().any(|x| x == a);
    let scopes = |list: &[String]| -> Vec<String> {
        list.iter()
            .filter_map(|a| a.strip_prefix("sh:").map(str::to_owned))
            .collect()
    };
    let denied = scopes(&abilities.deny);
    let allowed = scopes(&abilities.allow);
    let whole = listed(&abilities.allow, "sh");
    let sh = |denied: bool| Refused::Ability {
        what: what.to_owned(),
        ability: "sh".to_owned(),
        denied,
    };
    if listed(&abilities.deny, "sh") {
        return Err(sh(true));
    }
    if !whole && allowed.is_empty() {
        return Err(sh(false));
    }
    if whole && denied.is_empty() {
        return Ok(());
    }
    let analysis = bash::analyze(line, None).map_err(|u| Refused::Unanalysable {
        what: what.to_owned(),
        reason: u.0,
    })?;
    let commands: Vec<&CommandUse> = analysis.commands().collect();
    let n = commands.len();
    let nth = |index: usize| Nth { index, of: n };
    for (i, c) in commands.iter().enumerate() {
        for p in may_run(c) {
            if denied.contains(&p) {
                return Err(Refused::Denied {
                    what: what.to_owned(),
                    command: c.text.clone(),
                    program: p,
                    nth: nth(i),
                });
            }
        }
    }
    if whole {
        return Ok(());
    }
    for (i, c) in commands.iter().enumerate() {
        if c.transparent {
            // A wrapper (`env`, `timeout`, `xargs`…): its inner command is
            // listed after it and judged there.
            continue;
        }
        let program = bash::basename(&c.name);
        let mut need = vec![program.to_owned()];
        if RUNNERS.contains(&program)
            && let Some(inner) = c
                .args
                .iter()
                .find(|a| !a.text.starts_with('-'))
                .map(|a| bash::basename(&a.text).to_owned())
        {
            need.push(inner);
        }
        for p in need {
            if !allowed.contains(&p) {
                return Err(Refused::NotAllowed {
                    what: what.to_owned(),
                    command: c.text.clone(),
                    program: p,
                    nth: nth(i),
                });
            }
        }
    }
    Ok(())
}

/// Programs that run a command given as their arguments, which the shell
/// analysis lists as plain commands: any word of their arguments may be the
/// program they start.
const RUNNERS: &[&str] = &[
    "sudo",
    "doas",
    "pkexec",
    "run0",
    "su",
    "runuser",
    "chroot",
    "unshare",
    "nsenter",
    "setpriv",
    "flock",
    "ionice",
    "chrt",
    "taskset",
    "cpulimit",
    "prlimit",
    "watch",
    "parallel",
    "strace",
    "ltrace",
    "valgrind",
    "fakeroot",
    "eatmydata",
    "firejail",
    "bwrap",
    "proot",
    "systemd-run",
    "script",
    "screen",
    "tmux",
    "dbus-run-session",
    "xvfb-run",
    "catchsegv",
    "torsocks",
    "proxychains",
    "proxychains4",
];

/// The programs a command may start: its own, and for a runner every word of
/// its arguments (and of each argument split at blanks, for `su -c 'rm x'`).
fn may_run(c: &CommandUse) -> Vec<String> {
    let program = bash::basename(&c.name).to_owned();
    let mut out = vec![program.clone()];
    if RUNNERS.contains(&program.as_str()) {
        for a in &c.args {
            for w in a.text.split_whitespace() {
                let b = bash::basename(w).to_owned();
                if !b.is_empty() && !out.contains(&b) {
                    out.push(b);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ab(allow: &[&str], deny: &[&str]) -> Abilities {
        Abilities {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn sh(a: &Abilities, line: &str) -> Result<(), String> {
        judge(a, &needs(HostFn::Sh, "", &json!({ "command": line }))).map_err(|e| e.to_string())
    }

    fn tool(a: &Abilities, name: &str, args: Value) -> Result<(), String> {
        judge(a, &needs(HostFn::Tool, name, &args)).map_err(|e| e.to_string())
    }

    #[test]
    fn tools_need_the_ability_of_what_they_do() {
        let a = ab(&["sh", "tool"], &["fs", "network", "sh:rm"]);
        for t in ["read", "write", "edit", "glob", "grep", "ls", "READ"] {
            let e = tool(&a, t, json!({})).unwrap_err();
            assert!(
                e.contains("`fs` ability, which the agent denies"),
                "{t}: {e}"
            );
        }
        for t in ["web_fetch", "web_search"] {
            assert!(tool(&a, t, json!({})).unwrap_err().contains("`network`"));
        }
        assert!(tool(&a, "bash", json!({"command": "/bin/rm x"})).is_err());
        assert!(tool(&a, "memory_read", json!({})).is_ok());
        assert!(tool(&a, "mcp_fs_read_file", json!({})).is_err());
        let b = ab(&["fs"], &[]);
        // `tool(…)` itself still needs `tool`.
        assert!(tool(&b, "read", json!({})).is_err());
        assert!(judge(&b, &needs(HostFn::Read, "", &json!({}))).is_ok());
    }

    #[test]
    fn sh_denials_hold_for_every_command() {
        let a = ab(&["sh"], &["sh:rm"]);
        for line in [
            "rm -f x",
            "/bin/rm -f x",
            "command rm x",
            "env rm x",
            "echo x | xargs rm",
            "sudo rm x",
            "sudo -u root /bin/rm x",
            "su -c 'rm x'",
            "echo $(rm x)",
            "true && rm x",
            "bash -c 'rm x'",
            "find . -exec rm {} \\;",
            "`echo rm` x",
            "$CMD x",
        ] {
            assert!(sh(&a, line).is_err(), "{line}");
        }
        assert!(sh(&a, "ls -l; echo rm").is_ok());
        assert!(
            sh(&ab(&["sh"], &[]), "$CMD x").is_ok(),
            "the policy decides"
        );
        assert!(sh(&ab(&["fs"], &[]), "ls").is_err());
        assert!(sh(&ab(&["sh:ls"], &["sh"]), "ls").is_err());
    }

    #[test]
    fn sh_allow_entries_hold_for_every_command() {
        let a = ab(&["sh:echo", "sh:ls"], &[]);
        assert!(sh(&a, "echo a && /bin/ls | echo b").is_ok());
        assert!(sh(&a, "timeout 5 ls").is_ok());
        for line in [
            "echo a; rm x",
            "echo $(rm x)",
            "sudo echo a",
            "env rm x",
            "cat x",
        ] {
            assert!(sh(&a, line).is_err(), "{line}");
        }
        let b = ab(&["sh:sudo", "sh:echo"], &[]);
        assert!(sh(&b, "sudo echo a").is_ok());
        assert!(sh(&b, "sudo rm a").is_err());
    }
}
