//! The `validate`, `inspect` and `list` commands, run as a user would run them:
//! the built binary, real files, exit codes and stdout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.env("NO_COLOR", "1");
    c
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The public reference material beside the checkout (`../shared/reference`).
fn reference() -> PathBuf {
    let p = repo().join("../shared/reference");
    assert!(
        p.is_dir(),
        "{} is missing: the tests need shared/ beside the checkout",
        p.display()
    );
    p
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(o)))
}

/// Every `Agentfile` and `*.agent` under a folder.
fn agentfiles(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(agentfiles(&p));
        } else if p.file_name().is_some_and(|n| n == "Agentfile")
            || p.extension().is_some_and(|x| x == "agent")
        {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn every_reference_agentfile_validates() {
    let files = agentfiles(&reference());
    assert!(files.len() >= 8, "found only {files:?}");
    for f in &files {
        // Workflows with a config beside them are validated with it.
        let dir = f.parent().unwrap();
        let mut cmd = bin();
        cmd.arg("validate").arg(f);
        for cfg in ["agent.toml", "agent.json"] {
            if dir.join(cfg).is_file() {
                cmd.arg("--config").arg(dir.join(cfg));
                break;
            }
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}:\n{}", f.display(), stdout(&o));
        assert!(!stdout(&o).contains("error"), "{}", stdout(&o));
    }
}

#[test]
fn reference_configs_load() {
    let r = reference();
    for cfg in [
        "headless-agent-v0.1.0/examples/agent.json",
        "headless-agent-head/examples/agent.toml",
    ] {
        let o = bin()
            .args(["validate", "--config"])
            .arg(r.join(cfg))
            .arg(r.join("headless-agent-v0.1.0/examples/01-hello-world.agent"))
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{cfg}: {}{}",
            stdout(&o),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn inspect_json_of_the_seed_tdd_workflow() {
    let o = bin()
        .args(["inspect", "--format", "json"])
        .arg(reference().join("headless-agent-v0.1.0/brainstorm"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let plan = json(&o);
    assert_eq!(plan["name"], "implement-feature");
    let steps = plan["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[1]["kind"], "loop");
    assert_eq!(steps[1]["within"]["input"], "max_iterations");
    assert_eq!(steps[1]["within"]["default"], 10);
    let analyze = plan["goals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "analyze")
        .unwrap();
    assert_eq!(
        analyze["agents"],
        serde_json::json!(["creative", "devils_advocate"])
    );
    assert_eq!(analyze["reads"], serde_json::json!(["feature_request"]));
    assert_eq!(analyze["source"]["kind"], "file");
    let creative = plan["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "creative")
        .unwrap();
    assert!(
        creative["prompt"]
            .as_str()
            .unwrap()
            .contains("novel solutions")
    );
    assert_eq!(
        plan["inputs"][0],
        serde_json::json!({"name": "feature_request", "default": null, "required": true})
    );
}

#[test]
fn inspect_text_and_mermaid() {
    let path = reference().join("headless-agent-v0.1.0/brainstorm/Agentfile");
    let text = stdout(&bin().arg("inspect").arg(&path).output().unwrap());
    assert!(text.contains("LOOP implementation (at most $max_iterations (default 10) iterations): run_tests → analyze_failures → fix"), "{text}");
    assert!(text.contains("agents creative, devils_advocate"), "{text}");
    let mm = stdout(
        &bin()
            .args(["inspect", "--format", "mermaid"])
            .arg(&path)
            .output()
            .unwrap(),
    );
    assert!(mm.starts_with("flowchart TD\n"), "{mm}");
    assert!(
        mm.contains("-. \"until converged, ≤ $max_iterations (default 10)\" .->"),
        "{mm}"
    );
}

#[test]
fn inspect_of_an_invalid_file_explains_on_stderr() {
    let o = bin()
        .arg("inspect")
        .arg(repo().join("fixtures/invalid/undefined-goal/Agentfile"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("undefined goal `analyse`"));
}

#[test]
fn validate_many_files_reports_all_and_fails_on_any_error() {
    let good = reference().join("headless-agent-v0.1.0/examples/01-hello-world.agent");
    let bad = repo().join("fixtures/invalid/every-error-at-once/Agentfile");
    let o = bin().arg("validate").arg(&good).arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let out = stdout(&o);
    assert!(out.contains("01-hello-world.agent: ok"), "{out}");
    assert!(out.contains("invalid — 9 errors"), "{out}");

    let o = bin()
        .args(["validate", "--format", "json"])
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let r = json(&o);
    assert_eq!(r["ok"], false);
    assert_eq!(r["errors"], 9);
    assert_eq!(r["files"][0]["ok"], true);
    let d = &r["files"][1]["diagnostics"][0];
    assert_eq!(d["code"], "missing-name");
    assert_eq!(d["line"], 1);
    assert_eq!(d["column"], 1);
}

#[test]
fn missing_path_and_bad_flags_are_usage_errors() {
    let o = bin()
        .args(["validate", "/no/such/Agentfile"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stdout(&o).contains("cannot read workflow file"),
        "{}",
        stdout(&o)
    );
    let o = bin()
        .args(["validate", "--format", "yaml", "x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("yaml"));
    let o = bin().arg("frobnicate").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn dialect_flag_overrides_detection() {
    let f = repo().join("fixtures/invalid/ambiguous-dialect/Agentfile");
    let o = bin()
        .args(["validate", "--dialect", "agentfile"])
        .arg(&f)
        .output()
        .unwrap();
    // Read as the DSL, `CMD` is now an unknown statement rather than ambiguous.
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("found `CMD`"), "{}", stdout(&o));
}

#[test]
fn config_beside_the_workflow_checks_profiles() {
    let dir = repo().join("fixtures/valid/full-dialect");
    let o = bin()
        .arg("validate")
        .arg(dir.join("Agentfile"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        !stdout(&o).contains("unchecked-profile") && !stdout(&o).contains("warning"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn list_finds_every_workflow_with_inputs() {
    let o = bin()
        .args(["list", "--format", "json"])
        .arg(reference())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let l = json(&o);
    let ws = l["workflows"].as_array().unwrap();
    let tdd = ws
        .iter()
        .find(|w| w["name"] == "implement-feature")
        .unwrap();
    assert_eq!(tdd["valid"], true);
    assert_eq!(
        tdd["inputs"][1],
        serde_json::json!({"name": "max_iterations", "default": "10", "required": false})
    );
    assert!(ws.iter().any(|w| w["dialect"] == "workflow-yaml"), "{l:#}");
    assert!(ws.iter().filter(|w| w["dialect"] == "agentfile").count() >= 8);

    let text = stdout(&bin().arg("list").arg(reference()).output().unwrap());
    assert!(text.contains("implement-feature"), "{text}");
    assert!(
        text.contains("inputs: feature_request, max_iterations=10"),
        "{text}"
    );
    // The published code-reviewer names files its folder does not hold.
    assert!(text.contains("(invalid: 11 errors)"), "{text}");
}

/// A fresh, empty folder for one test's generated files.
fn scratch(name: &str) -> PathBuf {
    crate::support::tmp("cli", name)
}

/// What a run under [`limited`] printed: the first MiB of stdout, and how many
/// bytes it printed in all.
struct Limited {
    code: Option<i32>,
    head: Vec<u8>,
    total: usize,
    stderr: String,
}

/// Run the binary under a 4 GB address-space limit and a wall-clock bound, so a
/// regression (quadratic time, gigabytes of output) fails the test instead of
/// the machine. Stdout is drained as it comes, keeping only its first MiB.
fn limited(args: &[&std::ffi::OsStr], wall: std::time::Duration) -> Limited {
    use std::io::Read;
    let mut child = Command::new("bash")
        .arg("-c")
        .arg("ulimit -v 4000000; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_agentfile"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let drain = std::thread::spawn(move || {
        let (mut head, mut total, mut buf) = (Vec::new(), 0usize, vec![0u8; 1 << 16]);
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
            let room = (1usize << 20).saturating_sub(head.len());
            head.extend_from_slice(&buf[..n.min(room)]);
        }
        (head, total)
    });
    let mut err = child.stderr.take().unwrap();
    let drain_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > wall {
            let _ = child.kill();
            let _ = child.wait();
            panic!("agentfile {args:?} ran past {wall:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let (head, total) = drain.join().unwrap();
    Limited {
        code: status.code(),
        head,
        total,
        stderr: drain_err.join().unwrap(),
    }
}

/// Generous: a debug build on a shared machine. The figure itself (≤ 1 s for
/// 1 MB in release) is measured by `cargo bench --bench parse`.
const WALL: std::time::Duration = std::time::Duration::from_secs(60);

/// `n` undefined `$var`s, two per goal, the goals run by steps of 50 (a
/// step lists at most 64): a 1 MB file for 20,000.
fn undefined_variables(n: usize) -> String {
    let mut s = String::from("NAME big\n");
    for i in 0..n / 2 {
        s.push_str(&format!(
            "GOAL goal_{i} \"Use $missing_{i} here, and $other_{i}\"\n"
        ));
    }
    let goals: Vec<String> = (0..n / 2).map(|i| format!("goal_{i}")).collect();
    for (k, step) in goals.chunks(50).enumerate() {
        s.push_str(&format!("RUN main_{k} USING {}\n", step.join(", ")));
    }
    s
}

#[test]
fn twenty_thousand_errors_validate_quickly_and_are_capped() {
    let dir = scratch("many-errors");
    let f = dir.join("big.agent");
    std::fs::write(&f, undefined_variables(20_000)).unwrap();

    let o = limited(&["validate".as_ref(), f.as_os_str()], WALL);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    let out = String::from_utf8_lossy(&o.head);
    assert_eq!(out.matches("error: undefined variable").count(), 200);
    assert!(
        out.contains("… and 19,800 more errors (only the first 200 diagnostics"),
        "{}",
        &out[out.len().saturating_sub(400)..]
    );
    assert!(out.contains("big.agent: invalid — 20000 errors"));
    // The first ones are shown, in file order.
    assert!(out.contains("undefined variable `$missing_0` in goal `goal_0`"));

    let o = limited(
        &[
            "validate".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            f.as_os_str(),
        ],
        WALL,
    );
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    let r: Value = serde_json::from_slice(&o.head).unwrap();
    assert_eq!(r["errors"], 20_000);
    assert_eq!(r["files"][0]["omitted_diagnostics"], 19_800);
    assert_eq!(r["files"][0]["diagnostics"].as_array().unwrap().len(), 200);
}

#[test]
fn one_huge_line_prints_a_window_not_the_line() {
    // 100,000 undefined variables on one 790 KB line: each excerpt used to
    // repeat the whole line (tens of gigabytes of output).
    let dir = scratch("huge-line");
    let f = dir.join("line.agent");
    let vars: Vec<String> = (0..100_000).map(|i| format!("$m{i}")).collect();
    std::fs::write(
        &f,
        format!(
            "NAME big\nGOAL g \"{}\"\nRUN main USING g\n",
            vars.join(" ")
        ),
    )
    .unwrap();
    let o = limited(&["validate".as_ref(), f.as_os_str()], WALL);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.total < 200_000, "{} bytes of output", o.total);
    let out = String::from_utf8_lossy(&o.head);
    assert!(out.contains("… and 99,800 more errors"));
    let longest = out.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest < 200, "a line of {longest} characters");
    // The caret still sits under the variable: find `$m150` and its carets.
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("undefined variable `$m150`"))
        .unwrap();
    let (excerpt, carets) = (lines[at + 2], lines[at + 3]);
    // Columns, not bytes: the `…` mark is one column of three bytes.
    let col = carets.chars().position(|c| c == '^').unwrap();
    let under: String = excerpt.chars().skip(col).collect();
    assert!(under.starts_with("$m150 "), "{excerpt}\n{carets}");
    assert_eq!(carets.matches('^').count(), "$m150".len());
    assert!(excerpt.contains('…'));
}

#[test]
fn hostile_megabyte_shapes_validate_quickly() {
    let dir = scratch("shapes");
    let n = 40_000;
    let goals = |n: usize| {
        (0..n)
            .map(|i| format!("g{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chain = |n: usize| vec!["a"; n].join("-");
    let shapes: Vec<(&str, String)> = vec![
        // One name defined again and again.
        (
            "duplicate-goals",
            format!(
                "NAME x\n{}RUN main USING same\n",
                "GOAL same \"x\"\n".repeat(n)
            ),
        ),
        // Every goal names an agent that does not exist.
        (
            "undefined-agents",
            format!(
                "NAME x\n{}RUN main USING {}\n",
                (0..n)
                    .map(|i| format!("GOAL g{i} \"x\" USING agent_{i}\n"))
                    .collect::<String>(),
                goals(n)
            ),
        ),
        // Every step names a goal that does not exist.
        (
            "undefined-goals",
            format!(
                "NAME x\nGOAL g \"x\"\n{}",
                (0..n)
                    .map(|i| format!("RUN s{i} USING goal_{i}\n"))
                    .collect::<String>()
            ),
        ),
        // Lines that are not statements at all.
        (
            "garbage",
            (0..n)
                .map(|i| format!("blah{i} x y z\n"))
                .collect::<String>(),
        ),
        // Every goal reads the next one's output before it has run.
        (
            "use-before-definition",
            format!(
                "NAME x\n{}GOAL g{n} \"end\"\nRUN main USING {}, g{n}\n",
                (0..n)
                    .map(|i| format!("GOAL g{i} \"read $g{}\"\n", i + 1))
                    .collect::<String>(),
                goals(n)
            ),
        ),
        // A megabyte-long hyphenated `$a-a-a-…`, once as a reference only and
        // once against a defined hyphenated name: every prefix is a candidate.
        (
            "hyphen-chain",
            format!(
                "NAME x\nINPUT a\nGOAL g \"${}\"\nRUN main USING g\n",
                chain(500_000)
            ),
        ),
        (
            "hyphen-defined",
            format!(
                "NAME x\nINPUT {}\nGOAL g \"${}-b\"\nRUN main USING g\n",
                chain(150_000),
                chain(150_000)
            ),
        ),
        // One 8 MB line for the lexer and the excerpt.
        (
            "long-line",
            format!("NAME x\nGOAL g \"{}\n", "x".repeat(8 << 20)),
        ),
    ];
    for (name, text) in shapes {
        let f = dir.join(format!("{name}.agent"));
        std::fs::write(&f, &text).unwrap();
        let started = std::time::Instant::now();
        let o = limited(&["validate".as_ref(), f.as_os_str()], WALL);
        // The hyphen chain reads the defined `$a` and is valid.
        let code = if name == "hyphen-chain" { 0 } else { 2 };
        assert_eq!(o.code, Some(code), "{name}: {}", o.stderr);
        assert!(o.total < 400_000, "{name}: {} bytes of output", o.total);
        eprintln!(
            "{name}: {} bytes in {:?}, {} bytes out",
            text.len(),
            started.elapsed(),
            o.total
        );
    }
}

/// Run with stdout a pipe whose reader has already gone, as in `| head -1`
/// once head has exited.
fn closed_stdout(args: &[&std::ffi::OsStr]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    bin()
        .args(args)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_stdout_ends_printing_commands_quietly() {
    let valid = repo().join("fixtures/valid/full-dialect/Agentfile");
    let invalid = repo().join("fixtures/invalid/every-error-at-once/Agentfile");
    let ws = scratch("closed-stdout");
    let cases: Vec<(Vec<&std::ffi::OsStr>, i32)> = vec![
        (vec!["validate".as_ref(), valid.as_os_str()], 0),
        (
            vec![
                "validate".as_ref(),
                "--format".as_ref(),
                "json".as_ref(),
                invalid.as_os_str(),
            ],
            2,
        ),
        (vec!["validate".as_ref(), invalid.as_os_str()], 2),
        (vec!["inspect".as_ref(), valid.as_os_str()], 0),
        (
            vec![
                "list".as_ref(),
                "--format".as_ref(),
                "json".as_ref(),
                valid.parent().unwrap().as_os_str(),
            ],
            0,
        ),
        (
            vec![
                "sessions".as_ref(),
                "list".as_ref(),
                "--workspace".as_ref(),
                ws.as_os_str(),
            ],
            0,
        ),
    ];
    for (args, code) in cases {
        let o = closed_stdout(&args);
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            "",
            "{args:?} complained about the closed pipe"
        );
        assert_eq!(o.status.code(), Some(code), "{args:?}");
    }
}

#[test]
fn workflow_md_and_yaml_are_read_whatever_the_dialect_flag_says() {
    let dir = scratch("unsupported");
    let yaml = dir.join("workflows/review/workflow.yaml");
    std::fs::create_dir_all(yaml.parent().unwrap()).unwrap();
    std::fs::write(&yaml, "name: review\nsteps:\n  - id: a\n    agent: x\n").unwrap();
    let md = dir.join(".workflows/review/WORKFLOW.md");
    std::fs::create_dir_all(md.parent().unwrap()).unwrap();
    std::fs::write(&md, "---\nid: review\n---\n# Review\n").unwrap();
    // WORKFLOW.md and workflow.yaml are read now, whatever `--dialect`
    // says: schema errors, never a page of DSL syntax errors.
    for f in [&md, &yaml] {
        for extra in [&[][..], &["--dialect", "agentfile"][..]] {
            let o = bin().arg("validate").args(extra).arg(f).output().unwrap();
            assert_eq!(o.status.code(), Some(2));
            let out = stdout(&o);
            assert!(out.contains("missing the required field"), "{out}");
            assert!(!out.contains("not supported yet"), "{out}");
        }
    }
}

#[test]
fn cluster_settings_come_from_flags_or_the_config() {
    let dir = scratch("cluster-config");
    let run = |args: &[&str]| {
        bin()
            .args(args)
            .arg("--workspace")
            .arg(&dir)
            .env_remove("AGENTFILE_NATS_URL")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();

    // No URL anywhere: the worker says what it needs.
    let o = run(&["worker"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cluster.nats"), "{}", stderr(&o));

    // `[cluster] nats` is used: nothing listens there, so each command stops
    // at start naming the address, never the password.
    std::fs::write(
        dir.join("agent.toml"),
        "[cluster]\nnats = \"nats://user:s3cret@127.0.0.1:1\"\nack_wait = \"5s\"\n",
    )
    .unwrap();
    for command in ["worker", "serve", "mcp"] {
        let o = run(&[command]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{command}: {err}");
        assert!(err.contains("127.0.0.1:1"), "{command}: {err}");
        assert!(!err.contains("s3cret"), "{command}: {err}");
    }
    // A flag wins over the config.
    let o = run(&["worker", "--nats", "nats://127.0.0.1:2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("127.0.0.1:2"), "{}", stderr(&o));

    // A setting that cannot work is a usage error naming the key.
    std::fs::write(
        dir.join("agent.toml"),
        "[cluster]\nnats = \"nats://127.0.0.1:1\"\nack_wait = \"soon\"\n",
    )
    .unwrap();
    let o = run(&["worker"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cluster.ack_wait"), "{}", stderr(&o));
    std::fs::write(dir.join("agent.toml"), "[cluster]\nnatz = \"x\"\n").unwrap();
    let o = run(&["worker"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("natz"), "{}", stderr(&o));
}

/// A workflow that is not there is one sentence with its fix, said once:
/// not `error: nosuch: error: cannot read …` followed by a count and an offer
/// to list the same one problem again (issue 45).
#[test]
fn a_missing_workflow_file_is_said_once_with_its_fix() {
    let dir = std::env::temp_dir();
    for command in ["run", "inspect", "validate"] {
        let o = bin()
            .args([command, "no-such-workflow.md"])
            .current_dir(&dir)
            .output()
            .unwrap();
        // `validate` reports on stdout, the others explain on stderr.
        let err = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains("no-such-workflow.md: ") && err.contains("cannot read workflow file"),
            "{command}: {err}"
        );
        assert!(err.contains("hint: check the path"), "{command}: {err}");
        assert_eq!(err.matches("error:").count(), 1, "{command}: {err}");
        assert!(!err.contains("shows the same list"), "{command}: {err}");
    }
}

/// `sessions list` says what its columns are, and lines them up (issue 45).
#[test]
fn sessions_list_has_a_header_row() {
    let dir = crate::support::tmp_dir("cli-sessions-header");
    std::fs::write(
        dir.join("Agentfile"),
        "NAME hello\nGOAL greet \"Say hello\"\nRUN main USING greet\n",
    )
    .unwrap();
    std::fs::write(dir.join("model.json"), r#"[{"text": "hello"}]"#).unwrap();
    let ran = bin()
        .args([
            "run",
            "Agentfile",
            "--provider",
            "fake",
            "--script",
            "model.json",
        ])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let o = bin()
        .args(["sessions", "list"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let head: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(head, ["SESSION", "STATUS", "WORKFLOW", "UPDATED"], "{text}");
    assert_eq!(
        lines[0].find("STATUS"),
        lines[1].find("completed"),
        "{text}"
    );
    assert_eq!(lines[0].find("WORKFLOW"), lines[1].find("hello"), "{text}");
}

/// Progress lines of steps without goals (a WORKFLOW.md tool step) end at
/// the step's name, never at an empty `: ` (issue 45).
#[test]
fn progress_lines_of_tool_steps_do_not_end_in_an_empty_list() {
    let dir = crate::support::tmp_dir("cli-progress-steps");
    std::fs::write(dir.join("file.txt"), "hi\n").unwrap();
    std::fs::write(
        dir.join("WORKFLOW.md"),
        "---\nname: Steps\nid: steps\ndescription: Two steps.\nversion: 1.0.0\ninputs: { type: object }\noutputs: { type: object }\nsteps:\n  - id: look\n    kind: tool\n    tool: ls\n    inputs: { path: \".\" }\n    next: read\n  - id: read\n    kind: tool\n    tool: read\n    inputs: { path: file.txt }\n---\nLook, then read.\n",
    )
    .unwrap();
    let o = bin()
        .args(["run", "WORKFLOW.md"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("look"), "{err}");
    for line in err.lines() {
        assert!(
            !line.trim_end().ends_with(':'),
            "a line ends in an empty list: {line:?}\n{err}"
        );
    }
}

/// `inspect` says an input the workflow does not require is optional, as
/// `list` and the JSON do (issue 45).
#[test]
fn inspect_text_says_an_optional_input_is_optional() {
    let dir = crate::support::tmp_dir("cli-inspect-optional");
    std::fs::write(
        dir.join("WORKFLOW.md"),
        "---\nname: Count\nid: count\ndescription: A count.\nversion: 1.0.0\noutputs: { type: object }\ninputs:\n  type: object\n  properties:\n    count: { type: integer }\n    path: { type: string }\n  required: [path]\nsteps:\n  - id: look\n    kind: tool\n    tool: ls\n    inputs: { path: $input.path }\n---\nLook.\n",
    )
    .unwrap();
    let o = bin()
        .args(["inspect", "WORKFLOW.md"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = stdout(&o);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no input {name}: {text}"))
            .to_owned()
    };
    assert!(line("count").ends_with("optional"), "{text}");
    assert!(line("path").ends_with("required"), "{text}");
    let out_json = bin()
        .args(["inspect", "WORKFLOW.md", "--format", "json"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let v = json(&out_json);
    let inputs = v["inputs"].as_array().unwrap();
    let count = inputs.iter().find(|i| i["name"] == "count").unwrap();
    assert_eq!(count["required"], false, "{v}");
}

/// Shell completions and manual pages come from the parser: every command
/// and flag is in them (issue 45).
#[test]
fn completions_and_manual_pages_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let o = bin().args(["completions", shell]).output().unwrap();
        let script = stdout(&o);
        assert!(
            o.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // (fish writes a flag as `-l approve-all`)
        for word in [
            "sessions",
            "triggers",
            "script",
            "approve-all",
            "waiting_approval",
        ] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
    }
    let o = bin().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let page = bin().arg("man").output().unwrap();
    assert!(
        stdout(&page).contains(".TH agentfile 1"),
        "{}",
        stdout(&page)
    );
    let dir = crate::support::tmp_dir("cli-man");
    let o = bin().args(["man", "--dir"]).arg(&dir).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for name in [
        "agentfile",
        "agentfile-run",
        "agentfile-sessions-list",
        "agentfile-triggers-fire",
    ] {
        let text = std::fs::read_to_string(dir.join(format!("{name}.1")))
            .unwrap_or_else(|e| panic!("{name}.1: {e}"));
        assert!(text.contains(".TH"), "{name}.1: {text}");
    }
    let run = std::fs::read_to_string(dir.join("agentfile-run.1")).unwrap();
    assert!(run.contains("\\-\\-provider"), "{run}");
    assert!(!dir.join("agentfile-help.1").exists(), "no page for `help`");
}

/// `--allow bash` lets every command through: said, with the narrower form
/// to use (issue 45). A pattern is not warned about.
#[test]
fn allow_bash_without_a_pattern_is_warned_about() {
    let dir = crate::support::tmp_dir("cli-allow-bash");
    std::fs::write(dir.join("model.json"), r#"[{"text": "fine"}]"#).unwrap();
    let run = |allow: &str| {
        bin()
            .args([
                "run",
                "--goal",
                "say fine",
                "--provider",
                "fake",
                "--script",
                "model.json",
            ])
            .args(["--allow", allow])
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = run("bash");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("warning: --allow bash lets the model run any command"),
        "{err}"
    );
    assert!(err.contains("--allow bash:\"cargo test *\""), "{err}");
    let o = run("bash:ls *");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("warning: --allow"), "{err}");
}
