//! Issue 30 items: see main.rs for which.
//!
//! 5: a map over more items than `[limits] max_map_items` is refused before
//! any step runs (or, when its list is known only at run time, before any
//! of its items starts), and a large map with the limit raised runs within a
//! memory bound.
//! 12: a text-mode run prints the outputs of every format (WORKFLOW.md,
//! workflow.yaml, agentrc), not only the Agentfile DSL's.
//! 13: a compensation sees the workflow's scope as it stood when the step it
//! undoes completed (inputs, earlier steps), live, after a resume, and after a
//! crash in the middle of the walk-back; `validate` agrees.
//! 16: built-in file tools may read and write the run's own scratch folder
//! (`_workflowFsRoot`), and nothing else under `.agentfile/`.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use agentfile::llm::fake::FakeReply;
use serde_json::{Value, json};

use crate::hardening::limited;
use crate::support::{config, fake, text};

const DEADLINE: Duration = Duration::from_secs(60);

fn tmp(name: &str) -> PathBuf {
    crate::support::tmp("h30rt", name)
}

/// The built binary under the suite's limits, with no standard input.
fn run(dir: &Path, args: &[&str]) -> Output {
    limited::run(dir, args, &[], b"", DEADLINE)
}

fn result(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not a result ({e}):\n{}", text(o)))
}

/// The session's stored events.
fn events(dir: &Path, session: &str) -> Vec<Value> {
    let o = run(dir, &["sessions", "show", session, "--format", "json"]);
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    v["events"].as_array().unwrap().clone()
}

fn workflow_md(dir: &Path, id: &str, text: &str) {
    let w = dir.join(".workflows").join(id);
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("WORKFLOW.md"), text).unwrap();
}

// ---------------------------------------------------------------- item 5

/// A map over `$input.items` after a first step that writes a marker file.
const BIG_MAP: &str = "---\nname: Big map\nid: big\ndescription: d\nversion: 1.0.0\ninputs:\n  type: object\n  properties: { items: { type: array } }\n  required: [items]\noutputs: { type: object }\nsteps:\n  - id: first\n    kind: tool\n    tool: write\n    inputs: { path: first.txt, content: ran }\n  - id: each\n    kind: map\n    over: $input.items\n    steps:\n      - id: pick\n        kind: branch\n        branches:\n          - when: $item == 3\n            next: $end\n---\n";

fn items_file(dir: &Path, n: usize) {
    let items: Vec<usize> = (0..n).collect();
    std::fs::write(
        dir.join("items.json"),
        json!({ "items": items }).to_string(),
    )
    .unwrap();
}

#[test]
fn item_05_a_map_over_more_items_than_the_limit_is_refused_before_any_step() {
    let dir = tmp("map-limit");
    workflow_md(&dir, "big", BIG_MAP);
    // The default limit (100,000 items per map), one item over.
    items_file(&dir, 100_001);
    let o = run(
        &dir,
        &[
            "run",
            ".workflows/big",
            "--inputs-json",
            "items.json",
            "--output",
            "json",
        ],
    );
    let r = result(&o);
    assert_eq!(o.status.code(), Some(1), "{r:#}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("100001 items")
            && error.contains("100000")
            && error.contains("[limits] max_map_items"),
        "{error}"
    );
    assert!(
        !dir.join("first.txt").exists(),
        "a step ran before the refusal"
    );
    let evs = events(&dir, r["session_id"].as_str().unwrap());
    assert!(
        !evs.iter()
            .any(|e| e["type"] == "step_started" || e["type"] == "node_started"),
        "{evs:#?}"
    );

    // The config's limit, lower: 11 items over a limit of 10.
    std::fs::write(dir.join("agent.toml"), "[limits]\nmax_map_items = 10\n").unwrap();
    items_file(&dir, 11);
    let o = run(
        &dir,
        &[
            "run",
            ".workflows/big",
            "--inputs-json",
            "items.json",
            "--output",
            "json",
        ],
    );
    let r = result(&o);
    assert_eq!(o.status.code(), Some(1), "{r:#}");
    assert!(
        r["error"].as_str().unwrap().contains("limit of 10 items"),
        "{r:#}"
    );
    assert!(!dir.join("first.txt").exists());
    items_file(&dir, 10);
    let o = run(
        &dir,
        &[
            "run",
            ".workflows/big",
            "--inputs-json",
            "items.json",
            "--output",
            "json",
        ],
    );
    let r = result(&o);
    assert_eq!(o.status.code(), Some(0), "{r:#}");
    assert_eq!(r["outputs"]["result"].as_array().unwrap().len(), 10);
    std::fs::remove_file(dir.join("first.txt")).unwrap();

    // A list known only at run time (each item of an outer map): refused at
    // the inner map, before any of its items starts.
    workflow_md(
        &dir,
        "nested",
        "---\nname: Nested\nid: nested\ndescription: d\nversion: 1.0.0\ninputs:\n  type: object\n  properties: { lists: { type: array } }\n  required: [lists]\noutputs: { type: object }\nsteps:\n  - id: outer\n    kind: map\n    over: $input.lists\n    steps:\n      - id: inner\n        kind: map\n        over: $item\n        steps:\n          - id: pick\n            kind: branch\n            branches:\n              - when: $item == 3\n                next: $end\n---\n",
    );
    std::fs::write(
        dir.join("lists.json"),
        json!({ "lists": [[1, 2], (0..11).collect::<Vec<u32>>()] }).to_string(),
    )
    .unwrap();
    let o = run(
        &dir,
        &[
            "run",
            ".workflows/nested",
            "--inputs-json",
            "lists.json",
            "--output",
            "json",
        ],
    );
    let r = result(&o);
    assert_eq!(o.status.code(), Some(1), "{r:#}");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("outer[1]/inner")
            && error.contains("11 items")
            && error.contains("limit of 10 items"),
        "{error}"
    );
    let evs = events(&dir, r["session_id"].as_str().unwrap());
    let started: Vec<&str> = evs
        .iter()
        .filter(|e| e["type"] == "node_started" || e["type"] == "step_started")
        .filter_map(|e| e["node"].as_str())
        .collect();
    assert!(
        !started.iter().any(|n| n.starts_with("outer[1]/inner[")),
        "{started:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Peak resident memory of a finished child (kilobytes), from `wait4`.
fn wait_rss(child: std::process::Child, deadline: Duration) -> (Output, u64) {
    let pid = child.id() as libc::pid_t;
    let watchdog = std::thread::spawn(move || {
        let end = std::time::Instant::now() + deadline;
        while std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
            // Still ours and running?
            if unsafe { libc::kill(pid, 0) } != 0 {
                return;
            }
        }
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let mut child = child;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut b);
        b
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut b);
        b
    });
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4 failed");
    let _ = watchdog.join();
    use std::os::unix::process::ExitStatusExt;
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    };
    limited::assert_no_signal(&output, "agentfile run (big map)");
    // Linux reports ru_maxrss in kilobytes.
    (output, usage.ru_maxrss as u64)
}

#[test]
fn item_05_a_map_over_the_raised_limit_runs_in_bounded_memory() {
    let dir = tmp("map-memory");
    workflow_md(&dir, "big", BIG_MAP);
    std::fs::write(
        dir.join("agent.toml"),
        "[limits]\nmax_map_items = 1000000\n",
    )
    .unwrap();
    // Peak resident memory of a run over `n` items.
    let peak = |n: usize| {
        items_file(&dir, n);
        let _ = std::fs::remove_file(dir.join("first.txt"));
        let mut c = limited::command(
            &dir,
            &[
                "run",
                ".workflows/big",
                "--inputs-json",
                "items.json",
                "--output",
                "json",
            ],
            &[],
        );
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let (o, rss_kb) = wait_rss(c.spawn().unwrap(), DEADLINE);
        let r = result(&o);
        assert_eq!(o.status.code(), Some(0), "{r:#}");
        assert_eq!(r["outputs"]["result"].as_array().unwrap().len(), n);
        rss_kb
    };
    let base = peak(1);
    const N: u64 = 30_000;
    let big = peak(N as usize);
    let _ = std::fs::remove_dir_all(&dir);
    // Each item's result (`{"arm": null, "next": "$end"}`, about 370 bytes
    // as a value) is kept until the run ends; the rest of an item's cost
    // must not outlive it. 3,300 bytes an item before (copies of the list
    // in scope, in the run's last event and its store, and of every
    // event), about 850 now.
    let per_item = (big.saturating_sub(base) * 1024) / N;
    assert!(
        per_item < 1500,
        "{big} KB peak for {N} items, {base} KB for one: {per_item} bytes an item"
    );
}

// --------------------------------------------------------------- item 12

/// `run` in text mode (no `--output`): standard output.
fn text_run(dir: &Path, args: &[&str]) -> String {
    let o = run(dir, args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn item_12_text_mode_prints_the_outputs_of_a_workflow_md() {
    let dir = tmp("text-md");
    workflow_md(
        &dir,
        "two",
        "---\nname: Two\nid: two\ndescription: d\nversion: 1.0.0\ninputs:\n  type: object\n  properties: { name: { type: string } }\n  required: [name]\noutputs:\n  type: object\n  properties:\n    greeting: { type: string }\n    count: { type: number }\nsteps:\n  - id: note\n    kind: tool\n    tool: write\n    inputs: { path: note.txt, content: 'hello ${{ $input.name }}' }\nresult:\n  greeting: 'hello ${{ $input.name }}'\n  count: 2\n---\n",
    );
    let out = text_run(&dir, &["run", ".workflows/two", "--input", "name=Ada"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.contains("## greeting\n\nhello Ada\n"), "{out:?}");
    assert!(out.contains("## count\n\n2\n"), "{out:?}");
    // In the order the workflow declares them.
    assert!(out.find("## greeting") < out.find("## count"), "{out:?}");
}

#[test]
fn item_12_text_mode_prints_the_outputs_of_a_workflow_yaml() {
    let dir = tmp("text-yaml");
    let w = dir.join("workflows/notes");
    std::fs::create_dir_all(w.join("agents")).unwrap();
    std::fs::write(w.join("agents/writer.md"), "You write short notes.\n").unwrap();
    std::fs::write(
        w.join("workflow.yaml"),
        "specVersion: \"1.0\"\nname: notes\nversion: 1.0.0\ndescription: Draft, then summarise.\ntrigger:\n  type: command\n  input_var: TOPIC\nsteps:\n  - id: draft\n    name: Draft\n    agent: agents/writer.md\n    input: $TOPIC\n    goal: Draft notes on the topic.\n    produces: outputs/draft.md\n  - id: summary\n    name: Summary\n    agent: agents/writer.md\n    input: outputs/draft.md\n    goal: Summarise the draft.\n    produces: outputs/summary.md\n",
    )
    .unwrap();
    let server = fake(vec![
        FakeReply::text("The draft."),
        FakeReply::text("The summary."),
    ]);
    config(&dir, &server);
    let out = text_run(&dir, &["run", "workflows/notes", "--input", "TOPIC=bees"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.contains("## draft\n"), "{out:?}");
    assert!(out.contains("## summary\n"), "{out:?}");
    assert!(out.contains("outputs/draft.md"), "{out:?}");
    // In the order the steps ran.
    assert!(out.find("## draft") < out.find("## summary"), "{out:?}");
}

#[test]
fn item_12_text_mode_prints_the_output_of_an_agentrc_agent() {
    let dir = tmp("text-rc");
    std::fs::write(
        dir.join("Agentfile"),
        "# syntax=agentrc.agentfile/v0.1\nAGENT notes\nCMD python ./agent.py\n",
    )
    .unwrap();
    let server = fake(vec![FakeReply::text("Short notes.")]);
    config(&dir, &server);
    let out = text_run(&dir, &["run", "Agentfile", "--input", "task=summarise"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.contains("Short notes."), "{out:?}");
}

// --------------------------------------------------------------- item 13

/// Command tools for a saga: each logs its name and arguments; `ship`
/// fails; `refund` kills the run once (the agentfile process above it) when
/// `kill-once` exists, to crash the walk-back half way.
const SAGA_TOOLS: &str = r#"import json, os, signal, sys
tool = sys.argv[1]
args = json.load(sys.stdin)
with open("tool-log.jsonl", "a") as f:
    f.write(json.dumps({"tool": tool, "args": args}) + "\n")
if tool == "refund" and os.path.exists("kill-once"):
    os.remove("kill-once")
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/comm") as c:
            name = c.read().strip()
        if name == "agentfile":
            os.kill(pid, signal.SIGKILL)
            break
        with open(f"/proc/{pid}/stat") as s:
            pid = int(s.read().rsplit(")", 1)[1].split()[1])
if tool in ("refund", "release") and not args.get("customerId"):
    print("no customerId", file=sys.stderr)
    sys.exit(1)
if tool == "ship":
    sys.exit(1)
json.dump({"reservationId": "res-1", "chargeId": "ch-1"}, sys.stdout)
"#;

const SAGA: &str = "---\nname: Saga\nid: saga\ndescription: d\nversion: 1.0.0\ninputs:\n  type: object\n  properties: { customerId: { type: string } }\n  required: [customerId]\noutputs: { type: object }\nsteps:\n  - id: reserve\n    kind: tool\n    tool: reserve\n    inputs: { customerId: $input.customerId }\n    compensation: release\n    next: charge\n  - id: release\n    kind: tool\n    tool: release\n    inputs:\n      customerId: $workflow.inputs.customerId\n      reservationId: $steps.reserve.reservationId\n    next: $end\n  - id: charge\n    kind: tool\n    tool: charge\n    inputs: { customerId: $workflow.inputs.customerId }\n    approval: always\n    compensation: refund\n    next: ship\n  - id: refund\n    kind: tool\n    tool: refund\n    inputs:\n      customerId: $workflow.inputs.customerId\n      also: $input.customerId\n      chargeId: $steps.charge.chargeId\n      reservationId: $steps.reserve.reservationId\n    next: $end\n  - id: ship\n    kind: tool\n    tool: ship\n    inputs: { customerId: $input.customerId }\n    next: $end\n---\n";

fn saga(name: &str) -> PathBuf {
    let dir = tmp(name);
    workflow_md(&dir, "saga", SAGA);
    std::fs::write(dir.join("tools.py"), SAGA_TOOLS).unwrap();
    let mut toml = String::new();
    for t in ["reserve", "release", "charge", "refund", "ship"] {
        toml.push_str(&format!(
            "[tools.{t}]\ncommand = [\"python3\", \"tools.py\", \"{t}\"]\n"
        ));
    }
    std::fs::write(dir.join("agent.toml"), toml).unwrap();
    // `refund` crashes the run by killing the agentfile process above it,
    // which the kernel sandbox exists to forbid: these trusted fixtures run
    // without it.
    std::fs::write(
        dir.join("policy.toml"),
        "[bash]\nallowlist = [\"python3 tools.py *\"]\n\n[sandbox]\nenabled = false\n",
    )
    .unwrap();
    dir
}

fn tool_log(dir: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(dir.join("tool-log.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["tool"].as_str().unwrap().to_owned(), v["args"].clone())
        })
        .collect()
}

fn assert_compensated(dir: &Path, log: &[(String, Value)]) {
    let refund = &log.iter().rfind(|(t, _)| t == "refund").unwrap().1;
    assert_eq!(
        refund,
        &json!({"customerId": "c-42", "also": "c-42", "chargeId": "ch-1", "reservationId": "res-1"}),
        "{}",
        dir.display()
    );
    let release = &log.iter().rfind(|(t, _)| t == "release").unwrap().1;
    assert_eq!(
        release,
        &json!({"customerId": "c-42", "reservationId": "res-1"})
    );
}

#[test]
fn item_13_a_compensation_reads_the_workflow_inputs_and_earlier_steps() {
    let dir = saga("saga-live");
    let o = run(&dir, &["validate", ".workflows/saga", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(
        &dir,
        &[
            "run",
            ".workflows/saga",
            "--input",
            "customerId=c-42",
            "--approve-all",
            "--output",
            "json",
        ],
    );
    let r = result(&o);
    assert_eq!(o.status.code(), Some(1), "{r:#}");
    assert!(r["error"].as_str().unwrap().contains("ship"), "{r:#}");
    let log = tool_log(&dir);
    let names: Vec<&str> = log.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(names, ["reserve", "charge", "ship", "refund", "release"]);
    assert_compensated(&dir, &log);
    let evs = events(&dir, r["session_id"].as_str().unwrap());
    assert!(
        !evs.iter().any(|e| e["type"] == "error"),
        "a compensation failed: {evs:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn item_13_a_compensation_after_a_resume_and_after_a_crash_sees_the_same_scope() {
    // Resumed: the run stops at the approval (nobody to ask), is approved
    // from another process and resumed; the earlier step's output comes from
    // the journal.
    let dir = saga("saga-resume");
    let o = run(
        &dir,
        &[
            "run",
            ".workflows/saga",
            "--input",
            "customerId=c-42",
            "--output",
            "json",
        ],
    );
    let r = result(&o);
    assert_eq!(o.status.code(), Some(3), "{r:#}");
    let id = r["session_id"].as_str().unwrap().to_owned();
    let o = run(&dir, &["sessions", "approve", &id]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&dir, &["sessions", "resume", &id, "--output", "json"]);
    let r = result(&o);
    assert_eq!(o.status.code(), Some(1), "{r:#}");
    let log = tool_log(&dir);
    let names: Vec<&str> = log.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(names, ["reserve", "charge", "ship", "refund", "release"]);
    assert_compensated(&dir, &log);
    let _ = std::fs::remove_dir_all(&dir);

    // Crashed in the walk-back: `refund` kills the process; the resumed run
    // finishes the walk with the scope rebuilt from the journal.
    let dir = saga("saga-crash");
    std::fs::write(dir.join("kill-once"), "").unwrap();
    // Killed on purpose (SIGKILL): waited for here, not judged as a crash.
    let mut child = limited::command(
        &dir,
        &[
            "run",
            ".workflows/saga",
            "--input",
            "customerId=c-42",
            "--approve-all",
            "--output",
            "json",
        ],
        &[],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let status = limited::wait(&mut child, DEADLINE).unwrap_or_else(|| {
        let _ = child.kill();
        panic!("the run was not killed by its compensation")
    });
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert!(
        !dir.join("kill-once").exists(),
        "the walk-back never reached refund"
    );
    let o = run(&dir, &["sessions", "list", "--format", "json"]);
    let list: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    let id = list
        .as_array()
        .or_else(|| list["sessions"].as_array())
        .and_then(|a| a.first())
        .and_then(|s| s["id"].as_str().or_else(|| s["session_id"].as_str()))
        .unwrap_or_else(|| panic!("{list:#}"))
        .to_owned();
    let o = run(
        &dir,
        &[
            "sessions",
            "resume",
            &id,
            "--approve-all",
            "--output",
            "json",
        ],
    );
    let r = result(&o);
    assert_eq!(o.status.code(), Some(1), "{r:#}");
    let log = tool_log(&dir);
    let names: Vec<&str> = log.iter().map(|(t, _)| t.as_str()).collect();
    // The refund in flight at the crash runs again (at least once).
    assert_eq!(
        names,
        ["reserve", "charge", "ship", "refund", "refund", "release"]
    );
    assert_compensated(&dir, &log);
    let _ = std::fs::remove_dir_all(&dir);
}

// --------------------------------------------------------------- item 16

#[test]
fn item_16_built_in_tools_use_the_run_scratch_folder_and_nothing_else_in_agentfile() {
    let dir = tmp("scratch");
    std::fs::create_dir_all(dir.join("drafts")).unwrap();
    std::fs::write(dir.join("drafts/input.md"), "draft body\n").unwrap();
    workflow_md(
        &dir,
        "report",
        "---\nname: Report\nid: report\ndescription: d\nversion: 1.0.0\ninputs:\n  type: object\n  properties:\n    _workflowFsRoot: { type: string }\noutputs: { type: object }\ninputsFiles:\n  source: { path: drafts/input.md }\noutputsFiles:\n  report: { path: reports/out.md }\nsteps:\n  - id: look\n    kind: tool\n    tool: ls\n    inputs: { path: '${{ $input._workflowFsRoot }}' }\n  - id: source\n    kind: tool\n    tool: read\n    inputs: { path: '${{ $input._workflowFsRoot }}/source' }\n  - id: report\n    kind: tool\n    tool: write\n    inputs: { path: '${{ $input._workflowFsRoot }}/report', content: 'report of the draft' }\n  - id: fix\n    kind: tool\n    tool: edit\n    inputs: { path: '${{ $input._workflowFsRoot }}/report', old: 'report', new: 'REPORT' }\n---\n",
    );
    let o = run(&dir, &["run", ".workflows/report", "--output", "json"]);
    let r = result(&o);
    assert_eq!(o.status.code(), Some(0), "{r:#}");
    assert_eq!(
        std::fs::read_to_string(dir.join("reports/out.md")).unwrap(),
        "REPORT of the draft"
    );
    let session = r["session_id"].as_str().unwrap().to_owned();
    let evs = events(&dir, &session);
    let read = evs
        .iter()
        .find(|e| e["type"] == "tool_result" && e["data"]["tool"] == "read")
        .unwrap();
    assert!(
        read["data"]["content"]
            .as_str()
            .unwrap()
            .contains("draft body"),
        "{read:#}"
    );

    // The rest of `.agentfile/` stays off limits: the session store, the
    // session's own folder above the scratch folder, another run's folder.
    let other = dir.join(".agentfile/runs/other-session/fs");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("secret"), "other run's file").unwrap();
    for (tool, args) in [
        ("read", "{ path: .agentfile/sessions.db }"),
        (
            "read",
            "{ path: '${{ $input._workflowFsRoot }}/../../other-session/fs/secret' }",
        ),
        (
            "write",
            "{ path: .agentfile/runs/other-session/fs/secret, content: x }",
        ),
        (
            "write",
            "{ path: '${{ $input._workflowFsRoot }}/../escape', content: x }",
        ),
        ("ls", "{ path: .agentfile/runs }"),
    ] {
        workflow_md(
            &dir,
            "probe",
            &format!(
                "---\nname: Probe\nid: probe\ndescription: d\nversion: 1.0.0\ninputs:\n  type: object\n  properties:\n    _workflowFsRoot: {{ type: string }}\noutputs: {{ type: object }}\ninputsFiles:\n  source: {{ path: drafts/input.md }}\nsteps:\n  - id: probe\n    kind: tool\n    tool: {tool}\n    inputs: {args}\n---\n"
            ),
        );
        let o = run(&dir, &["run", ".workflows/probe", "--output", "json"]);
        let r = result(&o);
        assert_eq!(
            r["termination_reason"], "policy_denied",
            "{tool} {args}: {r:#}"
        );
        assert!(
            r["error"].as_str().unwrap().contains(".agentfile"),
            "{tool} {args}: {r:#}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(other.join("secret")).unwrap(),
        "other run's file"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
