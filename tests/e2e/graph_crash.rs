//! The step graph survives SIGKILL: a plan with a parallel, a map, a loop and a
//! suspend runs in a child process (this test binary, re-executed) against a
//! SQLite session store and is killed at 24 points; each time the next child
//! resumes from the journal. The run must end with the same outputs as an
//! uninterrupted one, every node completed exactly once in the log, and no
//! node that had completed before a kill run again after it.
//!
//! Every step is a declared script that appends its label to `ran.log` before
//! it works, so the log shows each execution.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use agentfile::config::Config;
use agentfile::events::EventBus;
use agentfile::executor::{
    ApproveAll, Limits, ModelError, Models, RunSpec, Services, bind_inputs, execute,
};
use agentfile::llm::Provider;
use agentfile::plan::{Plan, define_step, define_workflow};
use agentfile::session::sqlite::SqliteStore;
use agentfile::session::{SessionMeta, SessionStatus, SessionStore};
use agentfile::tools::policy::Policy;
use agentfile::tools::{MemoryStore, Toolbox};
use agentfile::wire::events::{Event, EventBody};
use tokio_util::sync::CancellationToken;

const CHILD: &str = "AGENTFILE_GRAPH_CRASH_CHILD";
/// Which plan the child runs: `graph` or `saga`.
const PLAN: &str = "AGENTFILE_GRAPH_CRASH_PLAN";
const ID: &str = "s-crash";

const WORK: &str = "echo \"$1\" >> ran.log\nsleep 0.1\necho \"done-$1\"\n";
const PREP: &str = "echo prep >> ran.log\nsleep 0.1\necho '[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\"]'\n";
/// Pure in its argument, so a bump re-run after a kill gives the same value.
const BUMP: &str =
    "n=${1:-0}\necho \"bump-$n\" >> ran.log\nsleep 0.1\necho \"{\\\"n\\\": $((n+1))}\"\n";

/// Five steps that each undo themselves, then one that fails: the walk-back
/// runs the five compensations newest first.
fn saga() -> Plan {
    let mut w = define_workflow("saga");
    for i in 1..=5 {
        let id = format!("s{i}");
        w = w.step(
            define_step(&id)
                .shell("work.sh", &[&id])
                .compensation(define_step("undo").shell("work.sh", &[&format!("undo-{id}")])),
        );
    }
    w.step(define_step("fail").shell("fail.sh", &[]))
        .commit()
        .unwrap()
}

fn plan_for(kind: &str) -> Plan {
    match kind {
        "saga" => saga(),
        _ => plan(),
    }
}

fn plan() -> Plan {
    let work = |id: &str, arg: &str| define_step(id).shell("work.sh", &[arg]);
    define_workflow("crashy")
        .step(define_step("prep").shell("prep.sh", &[]))
        .step(
            define_step("fan")
                .parallel([work("left", "left"), work("right", "right")])
                .publish("fan"),
        )
        .step(
            define_step("each")
                .map("$steps.prep", 2, [work("one", "${{ $item }}")])
                .publish("each"),
        )
        .step(
            define_step("count")
                .loop_while(
                    "$steps.bump.n < 5",
                    6,
                    [define_step("bump").shell("bump.sh", &["${{ $steps.bump.n }}"])],
                )
                .publish("count"),
        )
        .step(define_step("wait").suspend(&["go"]))
        .step(work("after", "after").publish("after"))
        .commit()
        .unwrap()
}

struct NoModel;

impl Models for NoModel {
    fn provider(&self, _: Option<&str>) -> Result<Arc<dyn Provider>, ModelError> {
        Err("no model".into())
    }
}

fn store(dir: &Path) -> Arc<dyn SessionStore> {
    let db = dir.join(".agentfile").join("sessions.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    Arc::new(SqliteStore::open(&db).unwrap())
}

/// The child: run (or resume) the plan once, exit with its exit code.
fn child_main(dir: &Path) -> ! {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let code = rt.block_on(async {
        let store = store(dir);
        if store.get(ID).is_err() {
            store
                .create(&SessionMeta {
                    id: ID.into(),
                    workflow: "crashy".into(),
                    path: "define_workflow(\"crashy\")".into(),
                    workspace: dir.display().to_string(),
                    inputs: BTreeMap::new(),
                    status: SessionStatus::Running,
                    created_at: "2026-11-23T00:00:00.000Z".into(),
                    updated_at: "2026-11-23T00:00:00.000Z".into(),
                    last_seq: 0,
                })
                .unwrap();
        }
        let prior = store.events(ID, 0).unwrap();
        let plan = Arc::new(plan_for(&std::env::var(PLAN).unwrap_or_default()));
        let policy = Policy::parse("[bash]\nenabled = true\n", Path::new("policy.toml")).unwrap();
        let tools = Toolbox::new(
            &Config::default(),
            policy,
            dir,
            MemoryStore::in_memory().unwrap(),
        )
        .unwrap();
        let bus = EventBus::new(ID, prior.last().map_or(0, |e| e.seq), Some(store.clone()));
        let svc = Services {
            models: &NoModel,
            tools: &tools,
            approver: &ApproveAll,
            bus: &bus,
        };
        let spec = RunSpec {
            inputs: bind_inputs(&plan, &BTreeMap::new()).unwrap(),
            plan,
            workspace: dir.canonicalize().unwrap(),
            agent_id: "crash".into(),
            limits: Limits::default(),
            provider_label: ("none".into(), "none".into()),
            endpoint: None,
            prior_events: prior,
            warnings: Vec::new(),
            trigger: None,
            forked_from: None,
            replay: None,
        };
        execute(spec, &svc, CancellationToken::new())
            .await
            .exit_code
    });
    std::process::exit(code)
}

fn setup(name: &str) -> PathBuf {
    let d = crate::support::tmp("graph-crash", name);
    for (f, text) in [
        ("work.sh", WORK),
        ("prep.sh", PREP),
        ("bump.sh", BUMP),
        ("fail.sh", "echo fail >> ran.log\nsleep 0.05\nexit 1\n"),
    ] {
        std::fs::write(d.join(f), text).unwrap();
    }
    d
}

fn spawn(dir: &Path) -> Child {
    spawn_plan(dir, "graph")
}

fn spawn_plan(dir: &Path, kind: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            crate::support::test_name(module_path!(), "child_entry").as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, dir)
        .env(PLAN, kind)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn signal(dir: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "signal", ID, "go", "--no-resume"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ran.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Run to the end without kills: signal at the suspend, then finish.
fn finish(dir: &Path) {
    for _ in 0..3 {
        match spawn(dir).wait().unwrap().code() {
            Some(0) => return,
            Some(6) => signal(dir),
            other => panic!("the run ended with {other:?}"),
        }
    }
    panic!("the run did not finish");
}

fn outputs(dir: &Path) -> BTreeMap<String, serde_json::Value> {
    let events = store(dir).events(ID, 0).unwrap();
    events
        .iter()
        .rev()
        .find_map(|e| match &e.body {
            EventBody::RunComplete { outputs, .. } => Some(outputs.clone()),
            _ => None,
        })
        .expect("a completed run")
}

/// The path of a node's completion, and the label its script logs.
fn label_of(e: &Event) -> Option<(String, String)> {
    let path = e.node.clone()?;
    let done = matches!(
        e.body,
        EventBody::NodeComplete { .. } | EventBody::StepComplete { .. }
    );
    if !done {
        return None;
    }
    let output = match &e.body {
        EventBody::NodeComplete { output, .. } => output.clone(),
        EventBody::StepComplete { output, .. } => output.clone()?,
        _ => return None,
    };
    let label = match (path.as_str(), output) {
        ("prep", _) => "prep".to_owned(),
        (_, serde_json::Value::String(s)) => s.strip_prefix("done-")?.to_owned(),
        (p, serde_json::Value::Object(o)) if p.contains("bump") => {
            format!("bump-{}", o["n"].as_i64()? - 1).replace("bump-0", "bump-0")
        }
        _ => return None,
    };
    Some((path, label))
}

/// SIGKILLs taken by [`kill_repeatedly`]: how many landed, and for each the
/// length of `ran.log` and the last stored seq once the child was gone.
struct Kills {
    count: usize,
    boundaries: Vec<(usize, u64)>,
}

/// Start the `kind` plan again and again, SIGKILLing each child after a
/// pseudo-random wait from `seed`, until `wanted` kills landed or `ended`
/// (told a child's exit code when one ends by itself) returns true.
fn kill_repeatedly(
    dir: &Path,
    kind: &str,
    mut seed: u64,
    wanted: usize,
    max_wait_ms: u64,
    mut ended: impl FnMut(Option<i32>) -> bool,
) -> Kills {
    let mut k = Kills {
        count: 0,
        boundaries: Vec::new(),
    };
    while k.count < wanted {
        let mut child = spawn_plan(dir, kind);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(25 + seed % max_wait_ms));
        match child.try_wait().unwrap() {
            Some(s) => {
                if ended(s.code()) {
                    break;
                }
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                k.count += 1;
                // A child killed before it recorded the session leaves none.
                let last = store(dir)
                    .events(ID, 0)
                    .ok()
                    .and_then(|events| events.last().map(|e| e.seq))
                    .unwrap_or(0);
                k.boundaries.push((lines(dir).len(), last));
            }
        }
    }
    k
}

/// No node that completed before a kill ran again after it.
fn assert_no_rerun(events: &[Event], log: &[String], kills: &Kills) {
    for (log_len, seq) in &kills.boundaries {
        for e in events.iter().filter(|e| e.seq <= *seq) {
            if let Some((path, label)) = label_of(e) {
                assert!(
                    !log[*log_len..].contains(&label),
                    "`{path}` ({label}) completed before a kill and ran again after it"
                );
            }
        }
    }
}

#[test]
fn child_entry() {
    // Only does something when this binary was started as the child.
    if let Some(dir) = std::env::var_os(CHILD) {
        child_main(Path::new(&dir));
    }
}

#[test]
fn a_graph_killed_anywhere_resumes_without_redoing_completed_nodes() {
    let reference = setup("reference");
    finish(&reference);
    let want = outputs(&reference);
    assert_eq!(want["each"].as_array().unwrap().len(), 12);

    let dir = setup("killed");
    let mut finished = false;
    let kills = kill_repeatedly(&dir, "graph", 0x9e37_79b9, 24, 100, |code| match code {
        Some(0) => {
            finished = true;
            true
        }
        Some(6) => {
            signal(&dir);
            false
        }
        other => panic!("the child ended with {other:?}"),
    });
    if !finished {
        finish(&dir);
    }
    assert!(kills.count >= 20, "only {} kills landed", kills.count);
    assert_eq!(outputs(&dir), want, "a killed run ended with other outputs");

    let events = store(&dir).events(ID, 0).unwrap();
    let log = lines(&dir);
    // Every node completed exactly once.
    let mut completions: HashMap<String, usize> = HashMap::new();
    for e in &events {
        if let Some((path, _)) = label_of(e) {
            *completions.entry(path).or_default() += 1;
        }
    }
    for (path, n) in &completions {
        assert_eq!(*n, 1, "`{path}` completed {n} times");
    }
    // prep, left, right, 12 items, 5 bumps, after: each seen by the checks.
    assert_eq!(completions.len(), 21, "{completions:?}");
    assert_no_rerun(&events, &log, &kills);
}

/// The walk-back survives SIGKILL too: killed at 20 points across five steps
/// and five compensations, every compensation completes exactly once, none
/// that completed before a kill runs again after it, and they ran newest first.
#[test]
fn a_compensation_walk_killed_anywhere_undoes_each_step_once() {
    let dir = setup("saga");
    let mut ended = None;
    let kills = kill_repeatedly(&dir, "saga", 0x2545_f491, 60, 90, |code| {
        ended = code;
        true
    });
    if ended.is_none() {
        ended = spawn_plan(&dir, "saga").wait().unwrap().code();
    }
    assert_eq!(ended, Some(1), "the saga must end failed");
    assert!(kills.count >= 12, "only {} kills landed", kills.count);

    let events = store(&dir).events(ID, 0).unwrap();
    let log = lines(&dir);
    let mut undone: HashMap<String, usize> = HashMap::new();
    for e in &events {
        if let Some((path, _)) = label_of(e)
            && path.ends_with("~undo")
        {
            *undone.entry(path).or_default() += 1;
        }
    }
    assert_eq!(undone.len(), 5, "{undone:?}");
    assert!(undone.values().all(|n| *n == 1), "{undone:?}");
    assert_no_rerun(&events, &log, &kills);
    // Newest first: the last run of each undo comes in reverse step order.
    let mut order: Vec<&str> = Vec::new();
    for l in log.iter().rev() {
        if l.starts_with("undo-") && !order.contains(&l.as_str()) {
            order.push(l);
        }
    }
    order.reverse();
    assert_eq!(
        order,
        ["undo-s5", "undo-s4", "undo-s3", "undo-s2", "undo-s1"]
    );
}
