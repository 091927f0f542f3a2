//! `agentfile daemon`, `triggers` and `emit` (CONTRACT §15), driven through
//! the built binary on a real SQLite store. The workflows have one bash step
//! (`sleep`), so no model is needed.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{Dir, bin};
use serde_json::Value;

/// A workspace with one workflow per `(id, triggers YAML, sleep seconds)`.
fn workspace(workflows: &[(&str, &str, &str)]) -> Dir {
    let dir = Dir::new("daemon");
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

fn ms(v: &Value) -> i64 {
    agentfile::session::fires::instant_ms(v.as_str().unwrap()).unwrap()
}

/// Environment variables for the processes of one test (the PostgreSQL URL).
type Vars<'a> = &'a [(&'a str, String)];

fn daemon(ws: &Path) -> Child {
    daemon_with(ws, &[])
}

fn daemon_with(ws: &Path, vars: Vars<'_>) -> Child {
    Command::new(bin())
        .args(["daemon", "--workspace"])
        .arg(ws)
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn cli(ws: &Path, args: &[&str]) -> (i32, String, String) {
    cli_with(ws, &[], args)
}

fn cli_with(ws: &Path, vars: Vars<'_>, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn history(ws: &Path) -> Vec<Value> {
    history_with(ws, &[])
}

fn history_with(ws: &Path, vars: Vars<'_>) -> Vec<Value> {
    let (code, out, err) = cli_with(
        ws,
        vars,
        &["triggers", "history", "--limit", "1000", "--format", "json"],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["fires"].as_array().unwrap().clone()
}

fn sessions(ws: &Path) -> Vec<Value> {
    sessions_with(ws, &[])
}

fn sessions_with(ws: &Path, vars: Vars<'_>) -> Vec<Value> {
    let config = config_of(ws);
    let mut args = vec!["sessions", "list", "--format", "json"];
    args.extend(config.iter().flat_map(|c| ["--config", c.as_str()]));
    let (_, out, _) = cli_with(ws, vars, &args);
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    match v {
        Value::Array(a) => a,
        Value::Object(mut o) => o
            .remove("sessions")
            .and_then(|s| s.as_array().cloned())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The workspace's `agent.toml`, if it has one: `sessions` reads its
/// config from the current folder unless `--config` names one.
fn config_of(ws: &Path) -> Option<String> {
    let c = ws.join("agent.toml");
    c.is_file().then(|| c.display().to_string())
}

/// A session's `run_started.data.trigger` (Null when it has none).
fn trigger_of(ws: &Path, vars: Vars<'_>, session: &str) -> Value {
    let config = config_of(ws);
    let mut args = vec!["sessions", "show", session, "--format", "json"];
    args.extend(config.iter().flat_map(|c| ["--config", c.as_str()]));
    let (code, out, err) = cli_with(ws, vars, &args);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "run_started")
        .map(|e| e["data"]["trigger"].clone())
        .unwrap_or(Value::Null)
}

/// Wait (up to 30 s) until `ready` holds of the fire history.
fn wait_history(ws: &Path, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let h = history(ws);
        if ready(&h) {
            return h;
        }
        assert!(std::time::Instant::now() < deadline, "{h:#?}");
        std::thread::sleep(Duration::from_millis(100));
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
    // From its first fire (the daemon is up), 10 s of schedule.
    wait_history(ws.path(), |h| !h.is_empty());
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(stop(d), Some(143));
    let fires = history(ws.path());
    let fired = with("fired", &fires);
    // Counted from the sessions: the first run, then 10 ± 1 in the 10 s.
    let after_first = sessions(ws.path()).len() - 1;
    assert!(
        (9..=11).contains(&after_first),
        "{after_first} runs after the first: {fires:#?}"
    );
    assert_eq!(fired.len(), after_first + 1, "{fires:#?}");
    // No instant missed: consecutive seconds.
    let mut at: Vec<i64> = fires.iter().map(|f| ms(&f["scheduled_for"])).collect();
    at.sort();
    assert!(at.windows(2).all(|w| w[1] - w[0] == 1000), "{fires:#?}");
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
    // Down for 5 s: five instants missed, one caught up.
    std::thread::sleep(Duration::from_secs(5));
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
        ms(&late[0]["scheduled_for"]) >= last_before + 4000,
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
fn two_daemons_on_one_sqlite_store_fire_every_instant_once() {
    let ws = workspace(&[("tick", EVERY_SECOND, "0")]);
    two_daemons_fire_every_instant_once(ws.path(), &[]);
}

#[test]
fn two_daemons_on_one_postgres_store_fire_every_instant_once() {
    if !crate::support::session::pg::available() {
        return;
    }
    let ws = workspace(&[("tick", EVERY_SECOND, "0")]);
    std::fs::write(
        ws.path().join("agent.toml"),
        "[session]\nstore = \"postgres\"\nurl_env = \"AGENTFILE_TEST_DAEMON_PG_URL\"\n",
    )
    .unwrap();
    let url = crate::support::session::pg::url_for(ws.path());
    two_daemons_fire_every_instant_once(ws.path(), &[("AGENTFILE_TEST_DAEMON_PG_URL", url)]);
}

/// Two daemons on the store `vars` point at, 20 s of a 1-second schedule:
/// every instant has one fire record and at most one session, and every
/// session is a fired record's.
fn two_daemons_fire_every_instant_once(ws: &Path, vars: Vars<'_>) {
    let a = daemon_with(ws, vars);
    let b = daemon_with(ws, vars);
    std::thread::sleep(Duration::from_secs(20));
    assert_eq!(stop(a), Some(143));
    assert_eq!(stop(b), Some(143));
    let fires = history_with(ws, vars);
    let mut per: HashMap<i64, usize> = HashMap::new();
    for f in &fires {
        *per.entry(ms(&f["scheduled_for"])).or_default() += 1;
    }
    assert!(per.values().all(|n| *n == 1), "{per:#?}");
    // Consecutive seconds, none missed, ~20 of them (startup takes some).
    let mut at: Vec<i64> = per.keys().copied().collect();
    at.sort();
    assert!(at.windows(2).all(|w| w[1] - w[0] == 1000), "{fires:#?}");
    assert!((16..=21).contains(&at.len()), "{} instants", at.len());
    // Counted from the sessions: one per fire record that made one (every
    // fired one, and one refused as a daemon stopped, whose session is left
    // interrupted), each naming its instant in its `run_started`; no session
    // a fire did not make.
    let fired = with("fired", &fires);
    let made: Vec<&Value> = fires
        .iter()
        .filter(|f| f.get("session_id").is_some())
        .collect();
    assert!(made.len() >= fired.len(), "{fires:#?}");
    let listed = sessions_with(ws, vars);
    assert_eq!(listed.len(), made.len(), "{listed:#?}\n{fires:#?}");
    let mut seen = std::collections::HashSet::new();
    for f in &made {
        let id = f["session_id"].as_str().expect("a session");
        assert!(seen.insert(id.to_owned()), "{id} twice");
        assert!(listed.iter().any(|s| s["id"] == id), "{id} not listed");
        let t = trigger_of(ws, vars, id);
        // A run SIGTERM stopped before it began has no `run_started` yet.
        if !t.is_null() {
            assert_eq!(t["scheduled_for"], f["scheduled_for"], "{t}");
        }
    }
    assert!(seen.len() >= 14, "{fires:#?}");
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

/// HMAC-SHA256 of `body` under `key`, as hex (RFC 2104 over sha2).
fn hmac_hex(key: &[u8], body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let (mut ipad, mut opad) = ([0x36u8; 64], [0x5cu8; 64]);
    for i in 0..64 {
        ipad[i] ^= k[i];
        opad[i] ^= k[i];
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(body)
        .finalize();
    let mac = Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize();
    mac.iter().map(|b| format!("{b:02x}")).collect()
}

/// With `[daemon] webhooks` the listener starts with the daemon: a signed
/// delivery gets 202 and its session, which completes; the same delivery id
/// again starts nothing (200, the first session); a bad signature gets 401
/// and starts nothing.
#[test]
fn a_signed_webhook_delivery_runs_once_and_a_bad_signature_nothing() {
    let ws = workspace(&[("hook", "  - kind: webhook\n    path: /hook\n", "0")]);
    // The body's `topic` is the workflow's input; the step echoes it.
    std::fs::write(
        ws.path().join(".workflows/hook/WORKFLOW.md"),
        "---\nname: hook\nid: hook\ndescription: A test.\nversion: 1.0.0\ninputs: { type: object, properties: { topic: { type: string } }, required: [topic] }\noutputs: { type: object }\ntriggers:\n  - kind: webhook\n    path: /hook\nsteps:\n  - id: wait\n    kind: tool\n    tool: bash\n    inputs: { command: \"sleep 0\" }\n---\n# hook\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("agent.toml"),
        "[daemon]\nwebhooks = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let secret = "s3cret-for-the-test";
    let mut child = Command::new(bin())
        .args(["daemon", "--workspace"])
        .arg(ws.path())
        .env("AGENTFILE_WEBHOOK_SECRET", secret)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(url) = line.strip_prefix("agentfile daemon: webhooks on ") {
                let _ = tx.send(url.trim().to_owned());
            }
        }
    });
    let base = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the daemon did not say where its webhooks listen");
    let url = format!("{base}hook");
    let body = br#"{"topic": "from the hook"}"#;
    let post = |sig: &str, delivery: &str| {
        crate::support::blocking_http()
            .post(&url)
            .header("content-type", "application/json")
            .header("x-agentfile-signature", sig)
            .header("x-agentfile-delivery", delivery)
            .body(body.to_vec())
            .send()
            .unwrap()
    };
    let good = format!("sha256={}", hmac_hex(secret.as_bytes(), body));
    let bad = format!("sha256={}", hmac_hex(b"not the secret", body));
    let r = post(&bad, "d-0");
    assert_eq!(r.status(), 401);
    let r = post(&good, "d-1");
    assert_eq!(r.status(), 202);
    let first: Value = r.json().unwrap();
    let id = first["session_id"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let r = post(&good, "d-1");
    assert_eq!(r.status(), 200);
    let again: Value = r.json().unwrap();
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(again["session_id"], id.as_str(), "{again}");
    // The run completes; one session, one webhook fire.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = sessions(ws.path());
        if s.iter()
            .any(|s| s["id"] == id.as_str() && s["status"] == "completed")
        {
            assert_eq!(s.len(), 1, "{s:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{s:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let fires = history(ws.path());
    let hooks = with("fired", &fires);
    assert_eq!(hooks.len(), 1, "{fires:?}");
    assert_eq!(hooks[0]["kind"], "webhook");
    assert_eq!(hooks[0]["session_id"], id.as_str());
    assert_eq!(stop(child), Some(143));
}

/// Runs the daemon starts say in their `run_started` which trigger started
/// them: a scheduled run its instant, an emitted run its event id.
#[test]
fn scheduled_and_emitted_runs_name_their_trigger_in_run_started() {
    let ws = workspace(&[
        ("tick", EVERY_SECOND, "0"),
        ("ev", "  - kind: event\n    name: deploy.done\n", "0"),
    ]);
    let d = daemon(ws.path());
    let fires = wait_history(ws.path(), |h| {
        h.iter()
            .any(|f| f["trigger"] == "tick#0" && f["session_id"].is_string())
    });
    assert_eq!(stop(d), Some(143));
    let tick = fires
        .iter()
        .find(|f| f["trigger"] == "tick#0" && f["session_id"].is_string())
        .unwrap();
    let t = trigger_of(ws.path(), &[], tick["session_id"].as_str().unwrap());
    assert_eq!(t["id"], "tick#0", "{t}");
    assert_eq!(t["kind"], "schedule", "{t}");
    assert_eq!(t["scheduled_for"], tick["scheduled_for"], "{t}");
    assert!(ms(&t["fired_at"]) >= ms(&t["scheduled_for"]), "{t}");
    assert!(
        t.get("delivery_id").is_none() && t.get("event_id").is_none(),
        "{t}"
    );

    let (code, out, err) = cli(ws.path(), &["emit", "deploy.done", "--id", "ev-7"]);
    assert_eq!(code, 0, "{out}{err}");
    let session = out
        .trim()
        .strip_prefix("ev#0: ")
        .expect("a session")
        .to_owned();
    let t = trigger_of(ws.path(), &[], &session);
    assert_eq!(t["id"], "ev#0", "{t}");
    assert_eq!(t["kind"], "event", "{t}");
    assert_eq!(t["event_id"], "ev-7", "{t}");
    assert!(t.get("scheduled_for").is_none(), "{t}");
    ms(&t["fired_at"]);
}

/// A workspace whose `typed` workflow takes a required text `topic` and a
/// required integer `count` and echoes both, on `trigger`.
fn typed_workspace(trigger: &str) -> Dir {
    let ws = workspace(&[]);
    let d = ws.path().join(".workflows/typed");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("WORKFLOW.md"),
        format!(
            "---\nname: typed\nid: typed\ndescription: A test.\nversion: 1.0.0\ninputs: {{ type: object, properties: {{ topic: {{ type: string }}, count: {{ type: integer }} }}, required: [topic, count] }}\noutputs: {{ type: object }}\ntriggers:\n{trigger}steps:\n  - id: say\n    kind: tool\n    tool: bash\n    inputs: {{ command: \"echo ${{{{ $input.topic }}}}-${{{{ $input.count }}}}\" }}\n---\n# typed\n"
        ),
    )
    .unwrap();
    std::fs::write(d.join("policy.toml"), "[bash]\nallowlist = [\"echo *\"]\n").unwrap();
    ws
}

/// Whether session `id`'s events hold `text` in a tool's result.
fn tool_said(ws: &Path, id: &str, text: &str) -> bool {
    let (_, out, _) = cli(ws, &["sessions", "show", id, "--format", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["events"].as_array().unwrap().iter().any(|e| {
        e["type"] == "tool_result"
            && e["data"]["content"]
                .as_str()
                .is_some_and(|c| c.contains(text))
    })
}

/// A webhook body that does not fit the workflow's inputs is refused (422)
/// before the fire is recorded; the corrected body under the same delivery
/// id then runs, with its inputs, and names the delivery in `run_started`.
#[test]
fn a_webhook_body_that_does_not_fit_is_refused_unrecorded_and_can_be_redelivered() {
    let ws = typed_workspace("  - kind: webhook\n    path: /typed\n");
    std::fs::write(
        ws.path().join("agent.toml"),
        "[daemon]\nwebhooks = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let secret = "s3cret-for-the-test";
    let mut child = Command::new(bin())
        .args(["daemon", "--workspace"])
        .arg(ws.path())
        .env("AGENTFILE_WEBHOOK_SECRET", secret)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(url) = line.strip_prefix("agentfile daemon: webhooks on ") {
                let _ = tx.send(url.trim().to_owned());
            }
        }
    });
    let base = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the daemon did not say where its webhooks listen");
    let url = format!("{base}typed");
    let post = |body: &[u8]| {
        crate::support::blocking_http()
            .post(&url)
            .header("content-type", "application/json")
            .header(
                "x-agentfile-signature",
                format!("sha256={}", hmac_hex(secret.as_bytes(), body)),
            )
            .header("x-agentfile-delivery", "d-fix")
            .body(body.to_vec())
            .send()
            .unwrap()
    };
    let r = post(br#"{"topic": "hello", "count": "many"}"#);
    assert_eq!(r.status(), 422);
    let message = r.text().unwrap();
    assert!(message.contains("count"), "{message}");
    let r = post(br#"{"topic": "hello"}"#);
    assert_eq!(r.status(), 422);
    let message = r.text().unwrap();
    assert!(
        message.contains("missing required input `count`"),
        "{message}"
    );
    assert!(history(ws.path()).is_empty());
    assert!(sessions(ws.path()).is_empty());

    let r = post(br#"{"topic": "hello", "count": 3}"#);
    assert_eq!(r.status(), 202);
    let v: Value = r.json().unwrap();
    let id = v["session_id"].as_str().expect("a session").to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = sessions(ws.path());
        if s.iter()
            .any(|s| s["id"] == id.as_str() && s["status"] == "completed")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{s:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(stop(child), Some(143));
    assert!(tool_said(ws.path(), &id, "hello-3"));
    let t = trigger_of(ws.path(), &[], &id);
    assert_eq!(t["id"], "typed#0", "{t}");
    assert_eq!(t["kind"], "webhook", "{t}");
    assert_eq!(t["delivery_id"], "d-fix", "{t}");
    let fires = history(ws.path());
    assert_eq!(fires.len(), 1, "{fires:#?}");
    assert_eq!(fires[0]["session_id"], id.as_str());
}

/// `emit --payload` that does not fit a subscriber's inputs: a non-zero
/// exit saying why, and nothing recorded; the same event id corrected runs.
#[test]
fn an_emitted_payload_that_does_not_fit_is_refused_unrecorded() {
    let ws = typed_workspace("  - kind: event\n    name: go\n");
    let (code, out, err) = cli(
        ws.path(),
        &[
            "emit",
            "go",
            "--id",
            "e-1",
            "--payload",
            r#"{"topic": "x", "count": 1.5}"#,
        ],
    );
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("typed#0") && err.contains("count"), "{err}");
    assert!(history(ws.path()).is_empty());
    assert!(sessions(ws.path()).is_empty());
    let (code, out, err) = cli(
        ws.path(),
        &[
            "emit",
            "go",
            "--id",
            "e-1",
            "--payload",
            r#"{"topic": "x", "count": 2}"#,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let id = out
        .trim()
        .strip_prefix("typed#0: ")
        .expect("a session")
        .to_owned();
    assert!(tool_said(ws.path(), &id, "x-2"));
    assert_eq!(history(ws.path()).len(), 1);
}

#[test]
fn a_workflow_that_turns_invalid_keeps_its_registration_and_the_daemon_says_why() {
    let ws = workspace(&[("tick", EVERY_SECOND, "0")]);
    let file = ws.path().join(".workflows/tick/WORKFLOW.md");
    let good = std::fs::read_to_string(&file).unwrap();
    // The default log level (no RUST_LOG): what an operator sees.
    let mut d = Command::new(bin())
        .args(["daemon", "--workspace"])
        .arg(ws.path())
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    {
        let pipe = d.stderr.take().unwrap();
        let stderr = stderr.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = stderr.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
    }
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    wait_history(ws.path(), |h| with("fired", h).len() >= 2);

    // Broken YAML: the next rescan (2 s) finds it invalid.
    let broken_at = now_ms();
    std::fs::write(&file, "---\nname: tick\nid: [unclosed\n---\n# tick\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !stderr.lock().unwrap().contains("no longer valid") {
        assert!(
            std::time::Instant::now() < deadline,
            "no notice on stderr: {}",
            stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let noticed_at = now_ms();
    // The schedule goes on: fires for instants after the rescan saw it.
    let h = wait_history(ws.path(), |h| {
        h.iter()
            .filter(|f| ms(&f["scheduled_for"]) > noticed_at)
            .count()
            >= 2
    });
    assert!(
        h.iter()
            .any(|f| ms(&f["scheduled_for"]) > broken_at && f["outcome"] == "refused"),
        "a run of the broken file cannot start: {h:#?}"
    );
    {
        let err = stderr.lock().unwrap();
        let notice = err
            .lines()
            .find(|l| l.contains("no longer valid"))
            .unwrap()
            .to_owned();
        assert!(notice.contains(&file.display().to_string()), "{notice}");
        assert!(
            notice.contains("last good registration is kept"),
            "{notice}"
        );
        // Why: the first error, here the YAML parser's.
        assert!(notice.contains("not valid YAML"), "{notice}");
    }
    // `triggers list` (a process of its own, which never saw the file
    // valid) names the file and says it has errors, not "no triggers".
    let (code, out, err) = cli(ws.path(), &["triggers", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("no triggers"), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains(&file.display().to_string()))
        .unwrap_or_else(|| panic!("the broken file is not named: {out}"));
    assert!(line.contains("has errors"), "{line}");
    assert!(line.contains("agentfile validate"), "{line}");
    assert!(line.contains("keeps that registration"), "{line}");

    // Fixed again: still the one trigger, runs start again.
    let fixed_at = now_ms();
    std::fs::write(&file, &good).unwrap();
    let h = wait_history(ws.path(), |h| {
        h.iter()
            .filter(|f| ms(&f["scheduled_for"]) > fixed_at + 2500 && f["outcome"] == "fired")
            .count()
            >= 2
    });
    // Said as the breakage was: on stderr at the default level, naming the
    // file and the triggers registered again.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !stderr.lock().unwrap().contains("valid again") {
        assert!(
            std::time::Instant::now() < deadline,
            "no notice that the file is valid again: {}",
            stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(stop(d), Some(143));
    {
        let err = stderr.lock().unwrap();
        let notice = err.lines().find(|l| l.contains("valid again")).unwrap();
        assert!(notice.contains(&file.display().to_string()), "{notice}");
        assert!(notice.contains("its triggers are registered"), "{notice}");
        assert!(notice.contains("tick#0"), "{notice}");
        assert_eq!(err.matches("valid again").count(), 1, "{err}");
    }
    // One registration throughout: every fire is `tick#0`, one per second,
    // none missed, none twice.
    assert!(h.iter().all(|f| f["trigger"] == "tick#0"), "{h:#?}");
    let mut at: Vec<i64> = h.iter().map(|f| ms(&f["scheduled_for"])).collect();
    at.sort();
    assert!(at.windows(2).all(|w| w[1] - w[0] == 1000), "{h:#?}");
    // Said once per change, not once per rescan.
    let err = stderr.lock().unwrap();
    assert_eq!(err.matches("no longer valid").count(), 1, "{err}");
}

/// A workflow file that does not validate has no triggers to list, which is
/// not the same as having none: `triggers list` names it, says it has
/// errors and where to see them, beside the triggers of the valid files —
/// and with no valid file, instead of "no triggers".
#[test]
fn triggers_list_names_a_workflow_file_with_errors_instead_of_saying_no_triggers() {
    let ws = workspace(&[("tick", EVERY_SECOND, "0"), ("tock", EVERY_SECOND, "0")]);
    let broken = ws.path().join(".workflows/tock/WORKFLOW.md");
    let text = std::fs::read_to_string(&broken).unwrap();
    std::fs::write(&broken, text.replace("cron:", "cronn:")).unwrap();
    let named = |out: &str| {
        let line = out
            .lines()
            .find(|l| l.contains(&broken.display().to_string()))
            .unwrap_or_else(|| panic!("the broken file is not named: {out}"))
            .to_owned();
        assert!(line.contains("has errors"), "{line}");
        assert!(
            line.contains(&format!("`agentfile validate {}`", broken.display())),
            "{line}"
        );
    };
    let (code, out, err) = cli(ws.path(), &["triggers", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("tick#0  schedule  active")),
        "{out}"
    );
    named(&out);

    std::fs::remove_dir_all(ws.path().join(".workflows/tick")).unwrap();
    let (code, out, err) = cli(ws.path(), &["triggers", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("no triggers"), "{out}");
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    named(&out);
    // The JSON answer is as the contract has it: the registered triggers.
    let (_, out, _) = cli(ws.path(), &["triggers", "list", "--format", "json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["triggers"],
        serde_json::json!([])
    );
}

/// `[daemon] max_runs_per_day = 2` holds for a trigger that writes no quota
/// of its own; one that writes `max_runs_per_day: 4` gets 4.
#[test]
fn daemon_defaults_apply_to_triggers_that_set_nothing_and_their_own_values_win() {
    let ws = workspace(&[
        ("plain", EVERY_SECOND, "0"),
        (
            "own",
            "  - kind: schedule\n    cron: \"* * * * * *\"\n    max_runs_per_day: 4\n",
            "0",
        ),
    ]);
    std::fs::write(
        ws.path().join("agent.toml"),
        "[daemon]\nmax_runs_per_day = 2\n",
    )
    .unwrap();
    let d = daemon(ws.path());
    wait_history(ws.path(), |h| {
        let of = |t: &str| h.iter().filter(|f| f["trigger"] == t).count();
        of("plain#0") >= 3 && of("own#0") >= 5
    });
    stop(d);
    let fires = history(ws.path());
    for (trigger, max) in [("plain#0", 2), ("own#0", 4)] {
        let mine: Vec<Value> = fires
            .iter()
            .filter(|f| f["trigger"] == trigger)
            .cloned()
            .collect();
        assert_eq!(with("fired", &mine).len(), max, "{mine:#?}");
        let refused = with("refused", &mine);
        assert!(!refused.is_empty(), "{mine:#?}");
        let why = format!("max_runs_per_day = {max})");
        assert!(
            refused
                .iter()
                .all(|f| f["reason"].as_str().unwrap().contains(&why)),
            "{refused:#?}"
        );
    }
}

/// A `[daemon]` default that is not allowed stops the daemon at start with
/// the key and the values it allows.
#[test]
fn a_bad_daemon_default_is_an_error_naming_the_key_and_the_values_allowed() {
    let ws = workspace(&[("tick", EVERY_SECOND, "0")]);
    std::fs::write(
        ws.path().join("agent.toml"),
        "[daemon]\noverlap = \"sometimes\"\n",
    )
    .unwrap();
    let mut d = Command::new(bin())
        .args(["daemon", "--workspace"])
        .arg(ws.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = d.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            stop(d);
            panic!("the daemon started with a bad default");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut d.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("[daemon] overlap = \"sometimes\"")
            && err.contains("\"skip\", \"queue\" or \"allow\""),
        "{err}"
    );
    // `triggers list` reads the same defaults and says the same.
    let (code, _, err) = cli(ws.path(), &["triggers", "list"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("[daemon] overlap = \"sometimes\""), "{err}");
}

/// Two daemons on one SQLite store, a 1-second schedule whose run takes
/// 3 s, overlap `skip` (the default): a daemon sees the other's run still
/// going, so no two runs overlap in time and the instants between are
/// skipped with the overlap reason.
#[test]
fn two_daemons_on_one_store_skip_while_either_runs_the_trigger() {
    let ws = workspace(&[("slow", EVERY_SECOND, "3")]);
    let a = daemon(ws.path());
    let b = daemon(ws.path());
    wait_history(ws.path(), |h| !h.is_empty());
    std::thread::sleep(Duration::from_secs(8));
    stop(a);
    stop(b);
    let fires = history(ws.path());
    let fired = with("fired", &fires);
    let skipped = with("skipped", &fires);
    // ~9 s of instants, a run every 4 at most: 3, or 4 at a stretch.
    assert!((2..=4).contains(&fired.len()), "{fires:#?}");
    assert!(skipped.len() >= 4, "{fires:#?}");
    assert!(
        skipped.iter().all(|f| f["reason"]
            .as_str()
            .unwrap()
            .contains("still running (overlap = \"skip\")")),
        "{skipped:#?}"
    );
    // From the sessions: each starts after the one before ended.
    let mut runs: Vec<(String, String)> = sessions(ws.path())
        .iter()
        .map(|s| {
            (
                s["created_at"].as_str().unwrap().to_owned(),
                s["updated_at"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    runs.sort();
    assert_eq!(runs.len(), fired.len(), "{runs:#?}");
    assert!(runs.windows(2).all(|w| w[1].0 >= w[0].1), "{runs:#?}");
}

/// Two workflows whose webhook triggers share a path: the first is served,
/// the second is registered as refused naming both files (it used to be
/// listed `active` too and silently never fire).
#[test]
fn a_second_webhook_trigger_on_one_path_is_refused_naming_both_files() {
    let ws = workspace(&[
        ("alpha", "  - kind: webhook\n    path: /hook\n", "0"),
        ("beta", "  - kind: webhook\n    path: //hook\n", "0"),
        ("gamma", "  - kind: webhook\n    path: /other\n", "0"),
    ]);
    std::fs::write(
        ws.path().join("agent.toml"),
        "[daemon]\nwebhooks = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let (code, out, err) = cli(ws.path(), &["triggers", "list", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows = v["triggers"].as_array().unwrap();
    let row = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(row("alpha#0")["state"], "active", "{out}");
    assert_eq!(row("gamma#0")["state"], "active", "{out}");
    let beta = row("beta#0");
    assert_eq!(beta["state"], "refused", "{out}");
    let why = beta["reason"].as_str().unwrap();
    for needle in [
        "already served by `alpha#0`",
        ".workflows/alpha/WORKFLOW.md",
        ".workflows/beta/WORKFLOW.md",
    ] {
        assert!(why.contains(needle), "{needle}: {why}");
    }
    let (code, _, err) = cli(ws.path(), &["triggers", "fire", "beta#0"]);
    assert_ne!(code, 0);
    assert!(err.contains("already served"), "{err}");
}

/// A schedule no date matches (`0 0 31 2 *`) is refused where it is
/// written, with the reason; it used to validate and be listed `active` with
/// no next fire.
#[test]
fn a_schedule_that_never_fires_is_refused_with_the_reason() {
    let ws = workspace(&[
        (
            "never",
            "  - kind: schedule\n    cron: \"0 0 31 2 *\"\n",
            "0",
        ),
        (
            "leap",
            "  - kind: schedule\n    cron: \"0 0 29 2 *\"\n",
            "0",
        ),
    ]);
    let file = ws.path().join(".workflows/never/WORKFLOW.md");
    let out = Command::new(bin())
        .args(["validate", "--format", "json"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("never fires: February has no 31st"), "{text}");
    let (code, out, err) = cli(ws.path(), &["triggers", "list", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows = v["triggers"].as_array().unwrap();
    assert!(
        rows.iter()
            .all(|r| r["id"] != "never#0" || r["state"] == "refused"),
        "{out}"
    );
    let leap = rows.iter().find(|r| r["id"] == "leap#0").unwrap();
    assert_eq!(leap["state"], "active", "{out}");
    assert!(leap["next_fire"].is_string(), "{out}");
}

/// Issue 43 item 4: a signed webhook's body is data. Its `topic` lands in
/// the bash step's `echo ${{ $input.topic }}` as one quoted word: the shell
/// code in it is printed, not run, and no file appears.
#[test]
fn a_webhook_body_never_becomes_shell_code() {
    let ws = typed_workspace("  - kind: webhook\n    path: /typed\n");
    std::fs::write(
        ws.path().join("agent.toml"),
        "[daemon]\nwebhooks = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let secret = "s3cret-for-the-test";
    let mut child = Command::new(bin())
        .args(["daemon", "--workspace"])
        .arg(ws.path())
        .env("AGENTFILE_WEBHOOK_SECRET", secret)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(url) = line.strip_prefix("agentfile daemon: webhooks on ") {
                let _ = tx.send(url.trim().to_owned());
            }
        }
    });
    let base = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the daemon did not say where its webhooks listen");
    let body = br#"{"topic": "x > injected.txt; echo pwned > pwned.txt #", "count": 3}"#;
    let r = crate::support::blocking_http()
        .post(format!("{base}typed"))
        .header("content-type", "application/json")
        .header(
            "x-agentfile-signature",
            format!("sha256={}", hmac_hex(secret.as_bytes(), body)),
        )
        .header("x-agentfile-delivery", "d-inject")
        .body(body.to_vec())
        .send()
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: Value = r.json().unwrap();
    let id = v["session_id"].as_str().expect("a session").to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = sessions(ws.path());
        // Queued too: the 202 comes once the session is recorded, before
        // its run has started.
        if s.iter().any(|s| {
            s["id"] == id.as_str() && !matches!(s["status"].as_str(), Some("running" | "queued"))
        }) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{s:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(stop(child), Some(143));
    for planted in ["injected.txt", "injected.txt-3", "pwned.txt"] {
        assert!(
            !ws.path().join(planted).exists()
                && !ws.path().join(".workflows/typed").join(planted).exists(),
            "the webhook body ran as shell code: {planted} was written"
        );
    }
    assert!(
        tool_said(
            ws.path(),
            &id,
            "x > injected.txt; echo pwned > pwned.txt #-3"
        ),
        "the body is printed as text"
    );
}
