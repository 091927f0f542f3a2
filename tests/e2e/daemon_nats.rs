//! `agentfile daemon --nats` (CONTRACT §15): a real `nats-server -js` on
//! loopback, the daemon and one `agentfile worker` on one SQLite store.
//! `kind: event` workflows fire on `agentfile.emit.<name>` (kept in the
//! JetStream stream `AGENTFILE_EVENTS`), once per event id, and the runs they
//! start go onto the work queue, where the worker executes them. An event
//! stored while no daemon listens fires when one starts.
//!
//! Without nats-server it prints `SKIPPED: …` and passes.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::cluster::{Nats, nats_server};
use crate::support::{Dir, bin};
use futures::StreamExt;
use serde_json::Value;

/// A child process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn workflow(ws: &Path, id: &str, event: &str) {
    let d = ws.join(".workflows").join(id);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("WORKFLOW.md"),
        format!(
            "---\nname: {id}\nid: {id}\ndescription: A test.\nversion: 1.0.0\ninputs: {{ type: object, properties: {{ topic: {{ type: string }} }} }}\noutputs: {{ type: object }}\ntriggers:\n  - kind: event\n    name: {event}\nsteps:\n  - id: wait\n    kind: tool\n    tool: bash\n    inputs: {{ command: \"sleep 0\" }}\n---\n# {id}\n"
        ),
    )
    .unwrap();
    std::fs::write(d.join("policy.toml"), "[bash]\nallowlist = [\"sleep *\"]\n").unwrap();
}

fn json_of(ws: &Path, args: &[&str]) -> Value {
    let out = Command::new(bin())
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sessions(ws: &Path) -> Vec<Value> {
    match json_of(ws, &["sessions", "list", "--format", "json"]) {
        Value::Array(a) => a,
        Value::Object(mut o) => o
            .remove("sessions")
            .and_then(|s| s.as_array().cloned())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Start `agentfile ARGS`, wait for a stderr line starting with `ready`
/// (none when empty).
fn start(args: &[&str], ws: &Path, ready: &str) -> Proc {
    let mut child = Command::new(bin())
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = ready.to_owned();
    std::thread::spawn(move || {
        let mut told = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !told && line.starts_with(&wanted) {
                let _ = tx.send(());
                told = true;
            }
        }
    });
    if !ready.is_empty() {
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{args:?} did not say {ready:?}"));
    }
    Proc(child)
}

#[test]
fn a_nats_event_fires_each_subscriber_once_per_id_and_the_run_goes_to_a_worker() {
    if nats_server().is_none() {
        eprintln!(
            "SKIPPED: nats-server not installed (`apt-get install nats-server`, or run scripts/test.sh, which installs it)"
        );
        return;
    }
    let nats = Nats::start();
    let url = nats.url.clone();
    let ws = Dir::new("daemon-nats-ws");
    workflow(&ws.0, "on-deploy", "deploy.done");
    workflow(&ws.0, "elsewhere", "other.thing");
    let _daemon = start(
        &["daemon", "--nats", &url],
        &ws.0,
        "agentfile daemon: events on NATS subjects agentfile.emit.",
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(async_nats::connect(url.as_str())).unwrap();
    // Events go through the JetStream stream; the daemon answers on the
    // subject the message's `Agentfile-Reply-To` names.
    let request = |id: Option<&str>, subject: &str, body: &str| -> Value {
        rt.block_on(async {
            let inbox = client.new_inbox();
            let mut answers = client.subscribe(inbox.clone()).await.unwrap();
            let mut headers = async_nats::HeaderMap::new();
            if let Some(id) = id {
                headers.insert("Agentfile-Event-Id", id);
            }
            headers.insert("Agentfile-Reply-To", inbox.as_str());
            let js = async_nats::jetstream::new(client.clone());
            js.publish_with_headers(subject.to_owned(), headers, body.to_owned().into())
                .await
                .unwrap()
                .await
                .expect("the stream stores the event");
            let m = tokio::time::timeout(Duration::from_secs(20), answers.next())
                .await
                .expect("the daemon answers in time")
                .expect("the daemon answers");
            serde_json::from_slice(&m.payload).unwrap()
        })
    };

    // First delivery of e1: the subscribed workflow fires, and only it.
    let a = request(
        Some("e1"),
        "agentfile.emit.deploy.done",
        r#"{"topic": "from nats"}"#,
    );
    assert_eq!(a["event"], "deploy.done", "{a}");
    assert_eq!(a["id"], "e1", "{a}");
    let fires = a["fires"].as_array().unwrap();
    assert_eq!(fires.len(), 1, "{a}");
    assert_eq!(fires[0]["trigger"], "on-deploy#0", "{a}");
    assert_eq!(fires[0]["claimed"], true, "{a}");
    let session = fires[0]["session_id"]
        .as_str()
        .expect("a session")
        .to_owned();

    // The same id again: nothing new, the first session named.
    let b = request(Some("e1"), "agentfile.emit.deploy.done", "{}");
    assert_eq!(b["fires"][0]["claimed"], false, "{b}");
    assert_eq!(b["fires"][0]["session_id"], session.as_str(), "{b}");

    // An event nobody subscribes to fires nothing; a bad payload is refused.
    let c = request(Some("n1"), "agentfile.emit.nobody.listens", "");
    assert_eq!(c["fires"], Value::Array(vec![]), "{c}");
    let d = request(Some("n2"), "agentfile.emit.deploy.done", "[1]");
    assert!(
        d["error"]
            .as_str()
            .is_some_and(|e| e.contains("JSON object")),
        "{d}"
    );

    // The run was queued, not run here: it stays queued until a worker
    // takes it from the work queue and completes it.
    let s = sessions(&ws.0);
    assert_eq!(s.len(), 1, "{s:#?}");
    assert_eq!(s[0]["id"], session.as_str());
    assert_eq!(s[0]["status"], "queued", "{s:#?}");
    let _worker = start(&["worker", "--nats", &url], &ws.0, "");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = sessions(&ws.0);
        if s.iter()
            .any(|x| x["id"] == session.as_str() && x["status"] == "completed")
        {
            assert_eq!(s.len(), 1, "{s:#?}");
            break;
        }
        assert!(Instant::now() < deadline, "{s:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let shown = json_of(&ws.0, &["sessions", "show", &session, "--format", "json"]);
    let started = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "run_started")
        .cloned()
        .expect("run_started");
    assert!(started.to_string().contains("from nats"), "{started}");
    // The worker wrote `run_started`, with the trigger the daemon's fire
    // carried on the work queue.
    let trigger = &started["data"]["trigger"];
    assert_eq!(trigger["kind"], "event", "{started}");
    assert_eq!(trigger["id"], "on-deploy#0", "{started}");
    assert_eq!(trigger["event_id"], "e1", "{started}");
    assert!(
        trigger["fired_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{started}"
    );
    assert!(trigger.get("scheduled_for").is_none(), "{started}");
    assert!(trigger.get("delivery_id").is_none(), "{started}");

    // A plain publish (no id header, no reply) fires once more, with a fresh id.
    rt.block_on(async {
        client
            .publish("agentfile.emit.deploy.done", "{}".into())
            .await
            .unwrap();
        client.flush().await.unwrap();
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let h = json_of(&ws.0, &["triggers", "history", "--format", "json"]);
        let fires = h["fires"].as_array().unwrap().clone();
        if fires.len() == 2 {
            assert!(fires.iter().all(|f| f["trigger"] == "on-deploy#0"), "{h}");
            assert!(fires.iter().all(|f| f["kind"] == "event"), "{h}");
            break;
        }
        assert!(Instant::now() < deadline, "{h}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `agentfile emit NAME --nats URL ARGS`: the exit code, stdout and stderr.
fn emit_nats(ws: &Path, url: &str, name: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(["emit", name, "--nats", url])
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .env_remove("AGENTFILE_NATS_URL")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The event id each fire's session started for, from its `run_started`.
fn fired_ids(ws: &Path) -> Vec<String> {
    let mut ids: Vec<String> = sessions(ws)
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .map(|id| {
            let shown = json_of(ws, &["sessions", "show", &id, "--format", "json"]);
            shown["events"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["type"] == "run_started")
                .and_then(|e| e["data"]["trigger"]["event_id"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    ids.sort();
    ids
}

/// Wait until `n` fires are recorded and every session they started has
/// completed, then a moment more for any fire that should not come.
fn settled(ws: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let s = sessions(ws);
        if fire_count(ws) >= n && s.len() >= n && s.iter().all(|x| x["status"] == "completed") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{n} fires did not complete: {s:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(fire_count(ws), n);
}

fn fire_count(ws: &Path) -> usize {
    let h = json_of(ws, &["triggers", "history", "--format", "json"]);
    h["fires"].as_array().map_or(0, Vec::len)
}

#[test]
fn an_event_emitted_while_no_daemon_listens_fires_once_when_one_starts() {
    if nats_server().is_none() {
        eprintln!("SKIPPED: nats-server not installed (`apt-get install nats-server`)");
        return;
    }
    let nats = Nats::start();
    let url = nats.url.clone();
    let ws = Dir::new("daemon-nats-ws-late");
    workflow(&ws.0, "on-deploy", "deploy.done");
    std::fs::write(
        ws.0.join("agent.toml"),
        "[daemon]\nevent_retention = \"1h\"\noverlap = \"allow\"\n",
    )
    .unwrap();

    // No daemon: the event is stored, `emit` says so and succeeds; the same
    // id emitted twice is stored twice but fires once.
    for _ in 0..2 {
        let (code, stdout, stderr) = emit_nats(
            &ws.0,
            &url,
            "deploy.done",
            &["--id", "early-1", "--payload", r#"{"topic": "stored"}"#],
        );
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(
            stderr.contains("is stored in the NATS stream AGENTFILE_EVENTS"),
            "{stderr}"
        );
        assert!(stderr.contains("fires when one"), "{stderr}");
    }
    // A plain publish with `Nats-Msg-Id`, twice: JetStream keeps one.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = async_nats::connect(url.as_str()).await.unwrap();
        for _ in 0..2 {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", "early-2");
            client
                .publish_with_headers("agentfile.emit.deploy.done", headers, "{}".into())
                .await
                .unwrap();
        }
        client.flush().await.unwrap();
    });
    assert_eq!(fire_count(&ws.0), 0);

    // A daemon starts: each stored id fires once.
    let daemon = start(
        &["daemon", "--nats", &url],
        &ws.0,
        "agentfile daemon: events on NATS subjects agentfile.emit.",
    );
    // A worker runs what they queue (its `run_started` names the event id).
    let _worker = start(&["worker", "--nats", &url], &ws.0, "");
    settled(&ws.0, 2);
    assert_eq!(fired_ids(&ws.0), ["early-1", "early-2"]);

    // With the daemon up, `emit --nats` prints the session it started, and
    // the same id again names it without firing.
    let (code, first, stderr) = emit_nats(&ws.0, &url, "deploy.done", &["--id", "live-1"]);
    assert_eq!(code, 0, "{first}{stderr}");
    assert!(first.starts_with("on-deploy#0: "), "{first}");
    let session = first.trim().trim_start_matches("on-deploy#0: ").to_owned();
    let (code, again, stderr) = emit_nats(&ws.0, &url, "deploy.done", &["--id", "live-1"]);
    assert_eq!(code, 0, "{again}{stderr}");
    assert!(again.contains("already fired"), "{again}");
    assert!(again.contains(&session), "{again}");
    // An event no workflow subscribes to: exit 1, as without NATS.
    let (code, _, stderr) = emit_nats(&ws.0, &url, "nobody.listens", &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no workflow subscribes"), "{stderr}");
    assert_eq!(fire_count(&ws.0), 3);
    settled(&ws.0, 3);

    // A daemon started again takes nothing twice.
    drop(daemon);
    let _daemon = start(
        &["daemon", "--nats", &url],
        &ws.0,
        "agentfile daemon: events on NATS subjects agentfile.emit.",
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(fire_count(&ws.0), 3);
    assert_eq!(fired_ids(&ws.0), ["early-1", "early-2", "live-1"]);
}
