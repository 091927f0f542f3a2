//! `agentfile daemon`, `triggers` and `emit` (CONTRACT §15), driven through
//! the built binary on a real SQLite store. The workflows have one bash step
//! (`sleep`), so no model is needed.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agentfile")
}

/// A workspace with one workflow per `(id, triggers YAML, sleep seconds)`.
fn workspace(workflows: &[(&str, &str, &str)]) -> Dir {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "agentfile-daemon-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    let dir = Dir(p);
    for (id, triggers, sleep) in workflows {
        let d = dir.path().join(".workflows").join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("WORKFLOW.md"),
            format!(
                "---\nname: {id}\nid: {id}\ndescription: A test.\nversion: 1.0.0\ninputs: {{ type: object }}\noutputs: {{ type: object }}\ntriggers:\n{triggers}steps:\n  - id: wait\n    kind: tool\n    tool: bash\n    inputs: {{ command: \"sleep {sleep}\" }}\n---\n# {id}\n"
            ),
        )
        .unwrap();
        std::fs::write(d.join("policy.toml"), "[bash]\nallowlist = [\"sleep *\"]\n").unwrap();
    }
    dir
}

/// A folder removed when the test ends.
struct Dir(std::path::PathBuf);

impl Dir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ms(v: &Value) -> i64 {
    agentfile::session::fires::instant_ms(v.as_str().unwrap()).unwrap()
}

fn daemon(ws: &Path) -> Child {
    Command::new(bin())
        .args(["daemon", "--workspace"])
        .arg(ws)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn cli(ws: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn history(ws: &Path) -> Vec<Value> {
    let (code, out, err) = cli(
        ws,
        &["triggers", "history", "--limit", "1000", "--format", "json"],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["fires"].as_array().unwrap().clone()
}

fn sessions(ws: &Path) -> Vec<Value> {
    let out = Command::new(bin())
        .args(["sessions", "list", "--format", "json", "--workspace"])
        .arg(ws)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    match v {
        Value::Array(a) => a,
        Value::Object(mut o) => o
            .remove("sessions")
            .and_then(|s| s.as_array().cloned())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// SIGTERM, and the exit code the daemon reports.
fn stop(mut c: Child) -> Option<i32> {
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    c.wait().unwrap().code()
}

fn with(outcome: &str, fires: &[Value]) -> Vec<Value> {
    fires
        .iter()
        .filter(|f| f["outcome"] == outcome)
        .cloned()
        .collect()
}

const EVERY_SECOND: &str = "  - kind: schedule\n    cron: \"* * * * * *\"\n";

#[test]
fn a_one_second_schedule_fires_once_a_second_and_sigterm_exits_143() {
    let ws = workspace(&[("tick", EVERY_SECOND, "0")]);
    let d = daemon(ws.path());
    std::thread::sleep(Duration::from_millis(5500));
    assert_eq!(stop(d), Some(143));
    let fires = history(ws.path());
    let fired = with("fired", &fires);
    assert!(
        (4..=7).contains(&fired.len()),
        "{} fires: {fires:#?}",
        fired.len()
    );
    // Each fired record names its session, and each session exists.
    let ids: Vec<&str> = fired
        .iter()
        .map(|f| f["session_id"].as_str().expect("a session"))
        .collect();
    let s = sessions(ws.path());
    for id in &ids {
        assert!(s.iter().any(|x| x["id"] == *id), "{id} not in {s:#?}");
    }
    // Newest first.
    let at: Vec<&str> = fires
        .iter()
        .map(|f| f["scheduled_for"].as_str().unwrap())
        .collect();
    let mut sorted = at.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(at, sorted);
}

#[test]
fn after_a_kill_catch_up_latest_fires_exactly_one_missed_instant() {
    let ws = workspace(&[("tick", EVERY_SECOND, "0")]);
    let mut d = daemon(ws.path());
    std::thread::sleep(Duration::from_millis(2500));
    d.kill().unwrap();
    d.wait().unwrap();
    let before: Vec<String> = history(ws.path())
        .iter()
        .map(|f| f["scheduled_for"].as_str().unwrap().to_owned())
        .collect();
    assert!(!before.is_empty());
    std::thread::sleep(Duration::from_secs(3));
    let d = daemon(ws.path());
    std::thread::sleep(Duration::from_millis(600));
    stop(d);
    // New records marked as catch-ups: one, for an instant of the downtime.
    let last_before = before
        .iter()
        .map(|s| ms(&Value::from(s.as_str())))
        .max()
        .unwrap();
    let late: Vec<Value> = history(ws.path())
        .into_iter()
        .filter(|f| !before.contains(&f["scheduled_for"].as_str().unwrap().to_owned()))
        .filter(|f| f["reason"].as_str().is_some_and(|r| r.contains("catch-up")))
        .collect();
    assert_eq!(late.len(), 1, "{late:#?}");
    assert!(
        ms(&late[0]["scheduled_for"]) >= last_before + 2000,
        "{late:#?}"
    );
    assert_eq!(late[0]["outcome"], "fired");
    assert!(
        late[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not caught up (catch_up = \"latest\")"),
        "{late:#?}"
    );
}

#[test]
fn an_overlapping_fire_is_skipped_with_its_reason() {
    let ws = workspace(&[("slow", EVERY_SECOND, "3")]);
    let d = daemon(ws.path());
    std::thread::sleep(Duration::from_millis(2600));
    stop(d);
    let fires = history(ws.path());
    let skipped = with("skipped", &fires);
    assert!(!skipped.is_empty(), "{fires:#?}");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("still running (overlap = \"skip\")"),
        "{skipped:#?}"
    );
    assert!(skipped[0].get("session_id").is_none());
}

#[test]
fn the_fourth_fire_past_a_quota_of_three_is_refused() {
    let ws = workspace(&[(
        "quota",
        "  - kind: schedule\n    cron: \"* * * * * *\"\n    max_runs_per_day: 3\n",
        "0",
    )]);
    let d = daemon(ws.path());
    std::thread::sleep(Duration::from_millis(4600));
    stop(d);
    let fires = history(ws.path());
    assert_eq!(with("fired", &fires).len(), 3, "{fires:#?}");
    let refused = with("refused", &fires);
    assert!(!refused.is_empty(), "{fires:#?}");
    assert!(
        refused.iter().all(|f| f["reason"]
            .as_str()
            .unwrap()
            .contains("max_runs_per_day = 3")),
        "{refused:#?}"
    );
    // The list shows what the quota used.
    let (_, out, _) = cli(ws.path(), &["triggers", "list", "--format", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["triggers"][0]["quota"]["runs_today"], 3, "{v}");
}

#[test]
fn two_daemons_on_one_store_fire_every_instant_once() {
    let ws = workspace(&[("tick", EVERY_SECOND, "0")]);
    let a = daemon(ws.path());
    let b = daemon(ws.path());
    std::thread::sleep(Duration::from_secs(6));
    stop(a);
    stop(b);
    let fires = history(ws.path());
    let mut per: HashMap<String, usize> = HashMap::new();
    for f in &fires {
        *per.entry(f["scheduled_for"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert!(per.len() >= 4, "{fires:#?}");
    assert!(per.values().all(|n| *n == 1), "{per:#?}");
    // Sessions started by the fires: one per fired record, none twice.
    let fired = with("fired", &fires);
    let mut ids: Vec<&str> = fired
        .iter()
        .filter_map(|f| f["session_id"].as_str())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n);
    assert!(n >= 4, "{fires:#?}");
}

#[test]
fn emit_fires_each_subscriber_once_per_event_id_and_an_unknown_name_nothing() {
    let on = "  - kind: event\n    name: deploy.done\n";
    let ws = workspace(&[("one", on, "0"), ("two", on, "0")]);
    let (code, out, err) = cli(ws.path(), &["emit", "deploy.done", "--id", "e1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("one#0: ") && out.contains("two#0: "), "{out}");
    // The same event id again fires nothing new.
    let (code, out, _) = cli(ws.path(), &["emit", "deploy.done", "--id", "e1"]);
    assert_eq!(code, 0);
    assert!(out.contains("already fired"), "{out}");
    let fires = history(ws.path());
    assert_eq!(fires.len(), 2, "{fires:#?}");
    assert!(fires.iter().all(|f| f["kind"] == "event"));
    assert_eq!(sessions(ws.path()).len(), 2);

    let (code, _, err) = cli(ws.path(), &["emit", "nobody.listens"]);
    assert_ne!(code, 0);
    assert!(err.contains("no workflow subscribes"), "{err}");
    assert_eq!(history(ws.path()).len(), 2);
}

#[test]
fn triggers_list_refuses_webhooks_without_the_listener_and_fire_runs_by_hand() {
    let ws = workspace(&[
        ("hook", "  - kind: webhook\n    path: /hook\n", "0"),
        ("ev", "  - kind: event\n    name: x\n", "0"),
    ]);
    let (code, out, err) = cli(ws.path(), &["triggers", "list", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows = v["triggers"].as_array().unwrap();
    let hook = rows.iter().find(|r| r["id"] == "hook#0").unwrap();
    assert_eq!(hook["state"], "refused");
    assert!(
        hook["reason"]
            .as_str()
            .unwrap()
            .contains("[daemon] webhooks")
    );
    let (code, out, err) = cli(ws.path(), &["triggers", "fire", "ev#0"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("ev#0: "), "{out}");
    let fires = history(ws.path());
    assert_eq!(fires[0]["kind"], "manual");
    let (code, _, err) = cli(ws.path(), &["triggers", "fire", "hook#0"]);
    assert_ne!(code, 0);
    assert!(err.contains("refused"), "{err}");
}
