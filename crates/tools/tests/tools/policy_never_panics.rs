//! The policy never panics, never exhausts the machine and never says yes by
//! accident, whatever it is fed: shell soups built from bash's own pieces go
//! through the gate (which must answer, and may only allow lines whose every
//! command is on the allowlist), lines known to make the shell parser run away
//! are refused, and arbitrary text goes through the policy-file parser.
//!
//! The hostile work runs under an address-space limit: `fuzz_under_memory_limit`
//! starts this test binary again through `bash -c 'ulimit -v …'`, running only
//! the `inner_` tests, so a regression fails the test instead of taking the
//! machine's memory. Run on their own (without [`INNER_ENV`]), the `inner_`
//! tests do nothing.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentfile_tools::policy::{Policy, Request, bash};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// Where proptest keeps the seeds of failures found, checked in so they are
/// replayed on every run.
const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/proptest-regressions/policy_never_panics.txt"
);

const INNER_ENV: &str = "AGENTFILE_POLICY_FUZZ_INNER";

/// The child's address-space limit, in KiB (`ulimit -v`).
const CHILD_LIMIT_KIB: u64 = 4_000_000;

const PIECES: &[&str] = &[
    "ls", "cat", "echo", "rm", "touch", "sh", "bash", "-c", "eval", "env", "xargs", "timeout", "5",
    "nice", "find", ".", "..", "/", "~", "~/", "$", "$(", ")", "`", "'", "\"", ";", "&&", "||",
    "|", "&", "\n", "<", ">", ">>", "2>&1", "<<", "EOF", "<<<", "(", "{", "}", "[[", "]]", "((",
    "))", "$((", "${", "x", "=", "*", "?", "[", "]", "\\", "$'", "\\x41", "if", "then", "fi",
    "for", "in", "do", "done", "while", "case", "esac", ";;", "function", "!", "#", " ", "  ",
    "\t", "<(", ">(", "{a,b}", "-exec", "{}", "\\;", "PATH=", "IFS=", "é", "\u{200b}", "ｌ",
];

/// Lines on which brush-parser 0.4 allocates without end (found by the soup
/// fuzzer: the tokenizer queues here-document tokens inside `$(` forever).
const RUNAWAY: &[&str] = &[
    ".. * $( . {a,b} x \\ $' ' then { << || cat then $ # ; \t {a,b} ;; (( . $( > -exec ~ function $ \\; done )) } \" 2>&1 < ` \t IFS=",
    "$( << || cat then $ # ; ;; (( . $( > -exec ~ function $ \\; done )) } ",
    "$( << || cat ) ",
];

fn inner() -> bool {
    std::env::var_os(INNER_ENV).is_some()
}

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..40).prop_map(|v| v.join(" "))
}

/// A soup of `n` ASCII pieces (the others are refused before parsing) from a
/// fixed seed (xorshift64), so the big cases are the same on every run without
/// being checked in.
fn seeded_soup(mut seed: u64, n: usize) -> String {
    let pieces: Vec<&str> = PIECES.iter().copied().filter(|p| p.is_ascii()).collect();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.push(pieces[(seed % pieces.len() as u64) as usize]);
    }
    out.join(" ")
}

fn gate() -> agentfile_tools::policy::Gate {
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

/// The gate answers `line`, and allows it only if every command is `ls` or `echo`.
fn answered(g: &agentfile_tools::policy::Gate, line: &str) -> Result<(), String> {
    if g.check(&Request::Bash { command: line }).is_ok() {
        let a = bash::analyze(line, Some(Path::new("/nonexistent-home")))
            .map_err(|e| format!("{line:?} allowed but not analysable: {}", e.0))?;
        for c in a.commands().filter(|c| !c.transparent) {
            if !(c.text.starts_with("ls") || c.text.starts_with("echo")) {
                return Err(format!("{line:?} allowed `{}`", c.text));
            }
        }
    }
    Ok(())
}

#[test]
fn fuzz_under_memory_limit() {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(format!("ulimit -v {CHILD_LIMIT_KIB} && exec \"$0\" \"$@\""))
        .arg(&exe)
        .args([
            crate::test_name(module_path!(), "inner_").as_str(),
            "--test-threads=2",
            "--nocapture",
        ])
        .env(INNER_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(540);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = reader.join().unwrap();
    match status {
        Some(s) if s.success() => {
            // The inner tests must really have run.
            assert!(
                output.contains("inner_runaway_lines_are_refused ... ok"),
                "{output}"
            );
        }
        Some(s) => {
            panic!("the fuzz child failed ({s}) under ulimit -v {CHILD_LIMIT_KIB}:\n{output}")
        }
        None => panic!("the fuzz child ran past its deadline:\n{output}"),
    }
}

#[test]
fn inner_runaway_lines_are_refused() {
    if !inner() {
        return;
    }
    let g = gate();
    for line in RUNAWAY {
        let started = Instant::now();
        let e = g
            .check(&Request::Bash { command: line })
            .expect_err(line)
            .reason;
        assert!(
            e.contains("did not finish within its limits"),
            "{line:?}: {e}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{line:?} took {:?}",
            started.elapsed()
        );
    }
    let e = bash::analyze(RUNAWAY[0], None).expect_err("runaway line analysed");
    assert!(e.0.contains("within its limits"), "{}", e.0);
    // The analyser still works after its workers were killed.
    assert!(g.check(&Request::Bash { command: "ls -la" }).is_ok());
}

#[test]
fn inner_thousand_piece_soups_are_answered() {
    if !inner() {
        return;
    }
    let g = gate();
    for seed in [1, 7, 42, 0x9e37_79b9_7f4a_7c15] {
        let line = seeded_soup(seed, 1000);
        let started = Instant::now();
        answered(&g, &line).unwrap();
        println!(
            "soup {seed}: {} bytes answered in {:?}",
            line.len(),
            started.elapsed()
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "seed {seed} took {:?}",
            started.elapsed()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(REGRESSIONS))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn inner_shell_soups_are_answered(line in soup()) {
        if inner() {
            let g = gate();
            if let Err(m) = answered(&g, &line) {
                prop_assert!(false, "{}", m);
            }
        }
    }

    #[test]
    fn inner_arbitrary_lines_are_answered(line in "\\PC{0,200}") {
        if inner() {
            let _ = gate().check(&Request::Bash { command: &line });
        }
    }

    #[test]
    fn arbitrary_policy_text_is_answered(text in "[\\[\\]a-z_=\"., \\n*$~/0-9{}]{0,300}") {
        let _ = Policy::parse(&text, Path::new("policy.toml"));
    }
}
