//! The policy never panics and never says yes by accident, whatever it is fed:
//! shell soups built from bash's own pieces go through the gate (which must
//! answer, and may only allow lines whose every command is on the allowlist),
//! and arbitrary text goes through the policy-file parser.

use std::path::Path;

use agentfile::tools::policy::{Policy, Request, bash};
use proptest::prelude::*;

const PIECES: &[&str] = &[
    "ls", "cat", "echo", "rm", "touch", "sh", "bash", "-c", "eval", "env", "xargs", "timeout", "5",
    "nice", "find", ".", "..", "/", "~", "~/", "$", "$(", ")", "`", "'", "\"", ";", "&&", "||",
    "|", "&", "\n", "<", ">", ">>", "2>&1", "<<", "EOF", "<<<", "(", "{", "}", "[[", "]]", "((",
    "))", "$((", "${", "x", "=", "*", "?", "[", "]", "\\", "$'", "\\x41", "if", "then", "fi",
    "for", "in", "do", "done", "while", "case", "esac", ";;", "function", "!", "#", " ", "  ",
    "\t", "<(", ">(", "{a,b}", "-exec", "{}", "\\;", "PATH=", "IFS=", "é", "\u{200b}", "ｌ",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..40).prop_map(|v| v.join(" "))
}

fn gate() -> agentfile::tools::policy::Gate {
    let dir = std::env::temp_dir().join("agentfile-policy-never-panics");
    let _ = std::fs::create_dir_all(&dir);
    let policy = Policy::parse(
        "default_deny = true\n[read]\nallow = [\"$WORKSPACE/**\"]\n[bash]\nallowlist = [\"ls *\", \"echo *\"]\n",
        Path::new("policy.toml"),
    )
    .unwrap();
    policy
        .bind(&dir, Some(Path::new("/nonexistent-home")))
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn shell_soups_are_answered(line in soup()) {
        let g = gate();
        if g.check(&Request::Bash { command: &line }).is_ok() {
            // Allowed: then it parsed, and every command is `ls` or `echo`.
            let a = bash::analyze(&line, Some(Path::new("/nonexistent-home"))).unwrap();
            for c in a.commands().filter(|c| !c.transparent) {
                prop_assert!(
                    c.text.starts_with("ls") || c.text.starts_with("echo"),
                    "{line:?} allowed `{}`", c.text
                );
            }
        }
    }

    #[test]
    fn arbitrary_lines_are_answered(line in "\\PC{0,200}") {
        let _ = gate().check(&Request::Bash { command: &line });
    }

    #[test]
    fn arbitrary_policy_text_is_answered(text in "[\\[\\]a-z_=\"., \\n*$~/0-9{}]{0,300}") {
        let _ = Policy::parse(&text, Path::new("policy.toml"));
    }
}
