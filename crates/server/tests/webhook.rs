//! The webhook listener over a real loopback socket, spoken to in raw
//! HTTP/1.1 (so a test can send what no well-behaved client would: a lying
//! `Content-Length`, a chunked flood, a head one byte at a time), with a
//! recording [`Deliveries`] in place of the daemon.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use agentfile_server::daemon::webhook::{
    Delivered, Deliveries, Mounts, Undelivered, WebhookOptions, WebhookRoute, serve_webhooks,
};
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const SECRET_VAR: &str = "AGENTFILE_TEST_WEBHOOK_SECRET";
const UNSET_VAR: &str = "AGENTFILE_TEST_WEBHOOK_SECRET_UNSET";
const SECRET: &str = "It's a Secret to Everybody";

/// Every test calls this first, before it starts a runtime.
fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the first test to get here sets the variables while every
        // other test thread waits on this `Once`, before any of them has
        // started a runtime or a thread that could read the environment.
        unsafe {
            std::env::set_var(SECRET_VAR, SECRET);
            std::env::remove_var(UNSET_VAR);
        }
    });
}

/// The daemon's side, recorded: `github` and `plain` are served (the second
/// with a secret that is never set); a delivery id seen before is a
/// duplicate; a body with `"busy": true` is not started, one with
/// `"bad": true` does not fit the inputs.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(String, String, Value)>>,
    seen: Mutex<HashMap<String, String>>,
}

impl Recorder {
    fn calls(&self) -> Vec<(String, String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

impl Deliveries for Recorder {
    fn route(&self, path: &str) -> Option<WebhookRoute> {
        let (trigger, secret_env) = match path {
            "github" => ("on-push", SECRET_VAR),
            "nested/path" => ("nested", SECRET_VAR),
            "unset" => ("no-secret", UNSET_VAR),
            _ => return None,
        };
        Some(WebhookRoute {
            trigger: trigger.into(),
            secret_env: secret_env.into(),
        })
    }

    fn deliver(
        &self,
        trigger: &str,
        delivery_id: String,
        body: Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Delivered, Undelivered>> + Send>>
    {
        let mut calls = self.calls.lock().unwrap();
        calls.push((trigger.to_owned(), delivery_id.clone(), body.clone()));
        let session = format!("session-{}", calls.len());
        let mut seen = self.seen.lock().unwrap();
        let result = if let Some(first) = seen.get(&delivery_id) {
            Ok(Delivered::Duplicate {
                session_id: Some(first.clone()),
            })
        } else if body["busy"] == json!(true) {
            Ok(Delivered::NotStarted {
                outcome: "skipped_overlap".into(),
                reason: "a run of this trigger is still going".into(),
            })
        } else if body["bad"] == json!(true) {
            Err(Undelivered("input `ref`: required, and missing".into()))
        } else {
            seen.insert(delivery_id, session.clone());
            Ok(Delivered::Started {
                session_id: session,
            })
        };
        Box::pin(async move { result })
    }
}

struct Served {
    addr: SocketAddr,
    recorder: Arc<Recorder>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn serve(options: WebhookOptions) -> Served {
    setup();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let recorder = Arc::new(Recorder::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve_webhooks(
        listener,
        recorder.clone(),
        options,
        Mounts::default(),
        stop.clone(),
    ));
    Served {
        addr,
        recorder,
        stop,
        task,
    }
}

fn sign(body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2_011::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

fn post(path: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    raw.push_str("\r\n");
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    raw
}

fn signed(path: &str, body: &Value, extra: &[(&str, String)]) -> Vec<u8> {
    let body = body.to_string();
    let mut headers = vec![("X-Agentfile-Signature", sign(body.as_bytes()))];
    headers.extend(extra.iter().cloned());
    post(path, &headers, body.as_bytes())
}

/// Send `raw`, read the answer to the end (the listener closes after one
/// request): its status and JSON body.
async fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, Value) {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    // The listener may answer (413) and close before all of a large request
    // is written; the answer is what counts.
    let _ = sock.write_all(raw).await;
    read_answer(&mut sock).await
}

async fn read_answer(sock: &mut TcpStream) -> (u16, Value) {
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer within 10 s");
    parse_answer(&out)
}

fn parse_answer(out: &[u8]) -> (u16, Value) {
    let text = String::from_utf8_lossy(out);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let body = serde_json::from_str(body).unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test]
async fn a_signed_delivery_starts_a_session_with_its_body() {
    let s = serve(WebhookOptions::default()).await;
    let body = json!({"ref": "refs/heads/main", "commits": [1, 2]});
    let (status, answer) = exchange(
        s.addr,
        &signed(
            "/hooks/github",
            &body,
            &[("X-Agentfile-Delivery", "d-1".into())],
        ),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer, json!({"session_id": "session-1"}));
    assert_eq!(
        s.recorder.calls(),
        vec![("on-push".to_owned(), "d-1".to_owned(), body)]
    );
}

#[tokio::test]
async fn github_headers_are_accepted() {
    let s = serve(WebhookOptions::default()).await;
    let body = json!({"action": "opened"}).to_string();
    let raw = post(
        "/hooks/nested/path",
        &[
            ("X-Hub-Signature-256", sign(body.as_bytes())),
            (
                "X-GitHub-Delivery",
                "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
            ),
        ],
        body.as_bytes(),
    );
    let (status, answer) = exchange(s.addr, &raw).await;
    assert_eq!(status, 202, "{answer}");
    let calls = s.recorder.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "nested");
    assert_eq!(calls[0].1, "72d3162e-cc78-11e3-81ab-4c9367dc0958");
}

#[tokio::test]
async fn without_a_delivery_id_each_delivery_gets_a_fresh_one() {
    let s = serve(WebhookOptions::default()).await;
    let body = json!({"n": 1});
    for _ in 0..2 {
        let (status, _) = exchange(s.addr, &signed("/hooks/github", &body, &[])).await;
        assert_eq!(status, 202);
    }
    let calls = s.recorder.calls();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0].1, calls[1].1, "made-up ids must differ");
}

#[tokio::test]
async fn bad_or_missing_signatures_are_refused_and_nothing_is_delivered() {
    let s = serve(WebhookOptions::default()).await;
    let body = json!({"ref": "main"}).to_string();
    let other = json!({"ref": "evil"}).to_string();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("missing", post("/hooks/github", &[], body.as_bytes())),
        (
            "signature of another body",
            post(
                "/hooks/github",
                &[("X-Agentfile-Signature", sign(other.as_bytes()))],
                body.as_bytes(),
            ),
        ),
        (
            "not sha256=",
            post(
                "/hooks/github",
                &[(
                    "X-Agentfile-Signature",
                    sign(body.as_bytes()).replace("sha256=", "sha1="),
                )],
                body.as_bytes(),
            ),
        ),
        (
            "truncated hex",
            post(
                "/hooks/github",
                &[(
                    "X-Hub-Signature-256",
                    sign(body.as_bytes())[..60].to_owned(),
                )],
                body.as_bytes(),
            ),
        ),
        (
            "the secret variable is not set",
            post(
                "/hooks/unset",
                &[("X-Agentfile-Signature", sign(body.as_bytes()))],
                body.as_bytes(),
            ),
        ),
    ];
    for (what, raw) in cases {
        let (status, answer) = exchange(s.addr, &raw).await;
        assert_eq!(status, 401, "{what}: {answer}");
        assert!(answer["error"].is_string(), "{what}: {answer}");
    }
    assert!(s.recorder.calls().is_empty());
}

#[tokio::test]
async fn a_redelivery_answers_the_first_session_as_a_duplicate() {
    let s = serve(WebhookOptions::default()).await;
    let body = json!({"ref": "main"});
    let raw = signed(
        "/hooks/github",
        &body,
        &[("X-GitHub-Delivery", "same".into())],
    );
    let (first, a) = exchange(s.addr, &raw).await;
    let (second, b) = exchange(s.addr, &raw).await;
    assert_eq!((first, second), (202, 200), "{a} {b}");
    assert_eq!(a, json!({"session_id": "session-1"}));
    assert_eq!(b, json!({"session_id": "session-1", "duplicate": true}));
}

#[tokio::test]
async fn policy_refusals_and_unfit_inputs_map_to_their_answers() {
    let s = serve(WebhookOptions::default()).await;
    let (status, answer) = exchange(
        s.addr,
        &signed("/hooks/github", &json!({"busy": true}), &[]),
    )
    .await;
    assert_eq!(status, 202);
    assert_eq!(
        answer,
        json!({"outcome": "skipped_overlap", "reason": "a run of this trigger is still going"})
    );
    let (status, answer) =
        exchange(s.addr, &signed("/hooks/github", &json!({"bad": true}), &[])).await;
    assert_eq!(status, 422);
    assert_eq!(
        answer,
        json!({"error": "input `ref`: required, and missing"})
    );
}

#[tokio::test]
async fn bodies_that_are_not_json_objects_or_bad_ids_are_400() {
    let s = serve(WebhookOptions::default()).await;
    for body in ["[1, 2]", "not json", ""] {
        let raw = post(
            "/hooks/github",
            &[("X-Agentfile-Signature", sign(body.as_bytes()))],
            body.as_bytes(),
        );
        let (status, answer) = exchange(s.addr, &raw).await;
        assert_eq!(status, 400, "{body:?}: {answer}");
    }
    let raw = signed(
        "/hooks/github",
        &json!({}),
        &[("X-Agentfile-Delivery", "x".repeat(201))],
    );
    let (status, answer) = exchange(s.addr, &raw).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.contains("X-Agentfile-Delivery")),
        "{answer}"
    );
    assert!(s.recorder.calls().is_empty());
}

#[tokio::test]
async fn bodies_over_the_limit_are_413_declared_or_streamed() {
    let s = serve(WebhookOptions {
        max_body: 1024,
        ..WebhookOptions::default()
    })
    .await;
    // Declared: refused on the head alone, the body never sent.
    let raw = format!(
        "POST /hooks/github HTTP/1.1\r\nHost: x\r\nX-Agentfile-Signature: {}\r\nContent-Length: 1025\r\n\r\n",
        sign(b"")
    );
    let (status, answer) = exchange(s.addr, raw.as_bytes()).await;
    assert_eq!(status, 413, "{answer}");

    // Chunked, no length given: cut at the limit.
    let chunk = "a".repeat(600);
    let raw = format!(
        "POST /hooks/github HTTP/1.1\r\nHost: x\r\nX-Agentfile-Signature: {}\r\nTransfer-Encoding: chunked\r\n\r\n\
         258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n",
        sign(chunk.repeat(2).as_bytes())
    );
    let (status, answer) = exchange(s.addr, raw.as_bytes()).await;
    assert_eq!(status, 413, "{answer}");

    // At the limit exactly: fine.
    let mut body = json!({"pad": ""}).to_string();
    body.insert_str(8, &"p".repeat(1024 - body.len()));
    assert_eq!(body.len(), 1024);
    let raw = post(
        "/hooks/github",
        &[("X-Agentfile-Signature", sign(body.as_bytes()))],
        body.as_bytes(),
    );
    let (status, answer) = exchange(s.addr, &raw).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(s.recorder.calls().len(), 1);
}

#[tokio::test]
async fn unknown_paths_are_404_and_other_methods_405() {
    let s = serve(WebhookOptions::default()).await;
    let body = json!({});
    for path in ["/hooks/nope", "/hooks/", "/", "/github"] {
        let (status, answer) = exchange(s.addr, &signed(path, &body, &[])).await;
        assert_eq!(status, 404, "{path}: {answer}");
        assert!(answer["error"].is_string());
    }
    let mut sock = TcpStream::connect(s.addr).await.unwrap();
    sock.write_all(b"GET /hooks/github HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (status, answer) = read_answer(&mut sock).await;
    assert_eq!(status, 405, "{answer}");
    assert!(s.recorder.calls().is_empty());
}

/// A signed delivery cut off halfway through its body.
fn half_a_delivery() -> Vec<u8> {
    let raw = signed("/hooks/github", &json!({"ref": "main"}), &[]);
    raw[..raw.len() - 8].to_vec()
}

#[tokio::test]
async fn idle_and_slow_clients_do_not_delay_a_delivery() {
    let s = serve(WebhookOptions::default()).await;
    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(TcpStream::connect(s.addr).await.unwrap());
    }
    // A slowloris: a head one byte at a time, forever.
    let addr = s.addr;
    let slow = tokio::spawn(async move {
        let mut sock = TcpStream::connect(addr).await.unwrap();
        for b in b"POST /hooks/github HTTP/1.1\r\nHost: x\r\nX-Pad: "
            .iter()
            .cycle()
        {
            if sock.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    // A body that never comes.
    let mut stalled = TcpStream::connect(s.addr).await.unwrap();
    stalled.write_all(&half_a_delivery()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let started = Instant::now();
    let (status, answer) = exchange(
        s.addr,
        &signed("/hooks/github", &json!({"ref": "main"}), &[]),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a delivery took {:?} beside idle clients",
        started.elapsed()
    );
    assert_eq!(s.recorder.calls().len(), 1);
    slow.abort();
    drop(idle);
}

#[tokio::test]
async fn timeouts_free_the_connection_slots() {
    let s = serve(WebhookOptions {
        max_connections: 2,
        header_read_timeout: Duration::from_millis(300),
        body_read_timeout: Duration::from_millis(300),
        ..WebhookOptions::default()
    })
    .await;
    // Both slots taken: one idle, one stalled mid-body.
    let mut idle = TcpStream::connect(s.addr).await.unwrap();
    let mut stalled = TcpStream::connect(s.addr).await.unwrap();
    stalled.write_all(&half_a_delivery()).await.unwrap();

    let started = Instant::now();
    let (status, answer) = exchange(
        s.addr,
        &signed("/hooks/github", &json!({"ref": "main"}), &[]),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    assert!(started.elapsed() < Duration::from_secs(2));

    // The idle one was closed without an answer; the stalled one got 408.
    let mut buf = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(2), idle.read_to_end(&mut buf))
        .await
        .expect("the idle connection is closed")
        .unwrap_or(0);
    assert!(
        n == 0 || String::from_utf8_lossy(&buf).contains(" 408 "),
        "{:?}",
        String::from_utf8_lossy(&buf)
    );
    let (status, _) = read_answer(&mut stalled).await;
    assert_eq!(status, 408);
    assert!(s.recorder.calls().len() == 1);
}

#[tokio::test]
async fn stop_ends_the_listener() {
    let s = serve(WebhookOptions::default()).await;
    s.stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), s.task)
        .await
        .expect("the listener stops")
        .unwrap();
    assert!(TcpStream::connect(s.addr).await.is_err());
}
