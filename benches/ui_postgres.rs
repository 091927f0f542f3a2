//! The web view's list over a PostgreSQL store (issue 49, CONTRACT §22): the
//! list, its filters and its search, page 1 and page 1,000 (50 rows a page,
//! the page after the 49,950th matching session, by cursor), in process
//! through [`Ui::handle`] as `benches/ui.rs` does for SQLite: server time,
//! each row with its summary and its owner check.
//!
//! - `list_page_1` / `list_page_1000`: `GET /ui/api/sessions`.
//! - `status_page_1` / `status_page_1000`: `?status=completed` (70 %).
//! - `workflow_page_1` / `workflow_page_1000`: `?workflow=triage` (55 %).
//! - `search_page_1` / `search_page_1000`: `?q=normal`, a word in 60 % of
//!   the sessions' inputs.
//! - `rare_search`: `?q=zanzibar`, which one session in 10,000 has: a page
//!   found through the trigram index, not by reading the table.
//! - `workflows`: `GET /ui/api/workflows`.
//!
//! Target (the "Must show"): p50 ≤ 20 ms of server time for page 1
//! and page 1,000 over 100,000 sessions.
//!
//! PostgreSQL: a throwaway cluster of the server Debian's `postgresql`
//! package installs, on loopback, as the store conformance tests start it
//! (`crates/session/tests/stores/support.rs`); without one the benchmarks
//! say why and do nothing. The store is filled through `PgStore` each run
//! (the cluster goes with the process): 100,000 sessions of three events
//! each, one a minute, about two minutes on two cores.
//!
//! Run with `cargo bench --bench ui_postgres`. `cargo test --all-targets`
//! (no `--bench`) runs each benchmark once over 1,000 sessions, page 10
//! standing in for page 1,000.

#[path = "../crates/session/tests/stores/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, UNIX_EPOCH};

use agentfile::server::auth::Tokens;
use agentfile::server::gateway::{Gateway, GatewayOptions};
use agentfile::server::ui::{Ui, UiOptions};
use agentfile::session::{Cursor, PgStore, SessionMeta, SessionQuery, SessionStatus, SessionStore};
use agentfile::wire::events::{Event, EventBody, RunTrigger, TerminationReason, Usage, rfc3339};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use support::pg;

/// The variable the workspace's config names for the database URL.
const URL_VAR: &str = "AGENTFILE_BENCH_UI_PG_URL";
/// The address the `Host` header names (nothing listens there).
const LOCAL: &str = "127.0.0.1:8791";
/// Rows a page of the list holds.
const PAGE: usize = 50;
/// The database this process filled: only it is used, whatever the
/// environment held before.
static URL: OnceLock<String> = OnceLock::new();

fn main() {
    // The cluster is started and its URL set before any other thread runs
    // (setting the environment is sound only then).
    if pg::available() {
        let cluster = pg::shared();
        let url = cluster.url(&cluster.create_database());
        // SAFETY: no other thread exists yet.
        unsafe { std::env::set_var(URL_VAR, &url) };
        let _ = URL.set(url);
    }
    divan::main();
}

/// Under `cargo bench` (which passes `--bench`): 100,000 sessions and page
/// 1,000; as a test, 1,000 and page 10.
fn full() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn sessions() -> usize {
    if full() { 100_000 } else { 1_000 }
}

fn deep_page() -> usize {
    if full() { 1_000 } else { 10 }
}

struct Fixture {
    rt: tokio::runtime::Runtime,
    ui: Arc<Ui>,
    /// Per query: the cursor that opens its deep page.
    deep: BTreeMap<&'static str, String>,
}

/// The fixture, or `None` (said once) without PostgreSQL.
fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let url = URL.get()?;
        let ws = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("bench-ui-postgres-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&ws);
        std::fs::create_dir_all(&ws).expect("create the workspace");
        let config = ws.join("agentfile.toml");
        std::fs::write(
            &config,
            format!("[session]\nstore = \"postgres\"\nurl_env = \"{URL_VAR}\"\n"),
        )
        .expect("write the config");
        let store = PgStore::open(url).expect("open the store");
        let started = std::time::Instant::now();
        fill(&store, &ws);
        eprintln!(
            "ui_postgres: {} sessions stored in {:.1} s",
            sessions(),
            started.elapsed().as_secs_f64()
        );
        let deep = QUERIES
            .iter()
            .map(|(name, path)| (*name, deep_cursor(&store, path)))
            .collect();
        drop(store);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let gateway = Gateway::new(GatewayOptions {
            config: Some(config),
            workspace: Some(ws.clone()),
            ..GatewayOptions::default()
        })
        .expect("a gateway over the workspace");
        let ui = Ui::new(
            gateway,
            UiOptions {
                tokens: Tokens::new(&[]),
                allowed_origins: Vec::new(),
                local: LOCAL.parse().expect("an address"),
                stop: CancellationToken::new(),
                read_timeout: Duration::from_secs(10),
                rule: agentfile::server::access::Rule::OWNED,
            },
        )
        .expect("the web view");
        let f = Fixture { rt, ui, deep };
        // Warm: the store's connection and its statements.
        for (_, path) in QUERIES {
            f.get(&format!("/ui/api/sessions{path}"));
        }
        Some(f)
    })
    .as_ref()
}

/// The list's queries: name and query string.
const QUERIES: [(&str, &str); 4] = [
    ("list", ""),
    ("status", "?status=completed"),
    ("workflow", "?workflow=triage"),
    ("search", "?q=normal"),
];

impl Fixture {
    /// A whole response body, which must be a 200.
    fn get(&self, path: &str) -> Bytes {
        self.rt.block_on(async {
            let request = hyper::Request::get(path)
                .header("host", LOCAL)
                .body(Full::new(Bytes::new()))
                .expect("a request");
            let r = self.ui.handle(request).await;
            let status = r.status();
            let body = r.into_body().collect().await.expect("the body").to_bytes();
            assert_eq!(
                status,
                200,
                "GET {path}: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            );
            body
        })
    }

    /// Page 1 (`deep: false`) or the deep page of query `name`.
    fn path(&self, name: &str, deep: bool) -> String {
        let (_, q) = QUERIES.iter().find(|(n, _)| *n == name).expect("a query");
        let mut path = format!("/ui/api/sessions{q}");
        if deep {
            path.push(if q.is_empty() { '?' } else { '&' });
            path.push_str("before=");
            path.push_str(&self.deep[name]);
        }
        path
    }
}

/// The list's rows in a page's answer.
fn rows(body: &[u8]) -> usize {
    let v: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    v["sessions"].as_array().map_or(0, Vec::len)
}

/// One page of `name`, which must be full.
fn page(bencher: divan::Bencher, name: &str, deep: bool) {
    let Some(f) = fixture() else {
        return;
    };
    let path = f.path(name, deep);
    bencher.bench(|| {
        let body = f.get(&path);
        assert_eq!(rows(&body), PAGE, "{path}");
        body
    });
}

#[divan::bench(sample_count = 100)]
fn list_page_1(bencher: divan::Bencher) {
    page(bencher, "list", false);
}

#[divan::bench(sample_count = 100)]
fn list_page_1000(bencher: divan::Bencher) {
    page(bencher, "list", true);
}

#[divan::bench(sample_count = 100)]
fn status_page_1(bencher: divan::Bencher) {
    page(bencher, "status", false);
}

#[divan::bench(sample_count = 100)]
fn status_page_1000(bencher: divan::Bencher) {
    page(bencher, "status", true);
}

#[divan::bench(sample_count = 100)]
fn workflow_page_1(bencher: divan::Bencher) {
    page(bencher, "workflow", false);
}

#[divan::bench(sample_count = 100)]
fn workflow_page_1000(bencher: divan::Bencher) {
    page(bencher, "workflow", true);
}

#[divan::bench(sample_count = 100)]
fn search_page_1(bencher: divan::Bencher) {
    page(bencher, "search", false);
}

#[divan::bench(sample_count = 100)]
fn search_page_1000(bencher: divan::Bencher) {
    page(bencher, "search", true);
}

#[divan::bench(sample_count = 100)]
fn rare_search(bencher: divan::Bencher) {
    let Some(f) = fixture() else {
        return;
    };
    let want = sessions().div_ceil(10_000);
    bencher.bench(|| {
        let body = f.get("/ui/api/sessions?q=zanzibar");
        assert_eq!(rows(&body), want);
        body
    });
}

#[divan::bench(sample_count = 100)]
fn workflows(bencher: divan::Bencher) {
    let Some(f) = fixture() else {
        return;
    };
    bencher.bench(|| {
        let body = f.get("/ui/api/workflows");
        assert!(String::from_utf8_lossy(&body).contains("triage"));
        body
    });
}

// ── the store ────────────────────────────────────────────────────────────────

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// 2026-01-01T00:00:00Z.
const BASE_MS: u64 = 1_767_225_600_000;

const TOPICS: [&str; 8] = [
    "storage engine",
    "release notes",
    "flaky tests",
    "billing export",
    "login latency",
    "docs typos",
    "dependency bumps",
    "error budget",
];

/// `sessions()` sessions, one a minute: 55 % `triage`, the rest of four
/// other workflows; 70 % completed, 15 % failed, 10 % cancelled, 5 %
/// waiting for an approval; 60 % with `priority: normal`; one in 10,000
/// about a zanzibar migration. Each is `run_started` (a scheduled trigger
/// for `nightly-report`), an `llm_response` and its last event, stored as
/// a run stores them (`create`, then `append_batch`).
fn fill(store: &PgStore, ws: &std::path::Path) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut batch: Vec<Event> = Vec::new();
    for i in 0..sessions() as u64 {
        let start = BASE_MS + i * 60_000;
        let created = rfc3339(UNIX_EPOCH + Duration::from_millis(start));
        let digits: String = created
            .chars()
            .take(19)
            .filter(char::is_ascii_digit)
            .collect();
        let id = format!(
            "{}-{}-{:016x}{:08x}",
            &digits[..8],
            &digits[8..],
            rng.next(),
            rng.next() & 0xffff_ffff
        );
        let workflow = match rng.below(100) {
            0..55 => "triage",
            55..67 => "nightly-report",
            67..78 => "review-each",
            78..89 => "summarize",
            _ => "deploy-check",
        };
        let topic = if i % 10_000 == 321 {
            "zanzibar migration"
        } else {
            TOPICS[rng.below(TOPICS.len() as u64) as usize]
        };
        let priority = if rng.below(100) < 60 {
            "normal"
        } else {
            "high"
        };
        let m = SessionMeta {
            id: id.clone(),
            workflow: workflow.into(),
            path: ws.join(format!("{workflow}.agent")).display().to_string(),
            workspace: ws.display().to_string(),
            inputs: BTreeMap::from([
                ("topic".into(), topic.into()),
                ("priority".into(), priority.into()),
                ("ticket".into(), format!("T-{}", 10_000 + i)),
            ]),
            status: SessionStatus::Running,
            created_at: created.clone(),
            updated_at: created.clone(),
            last_seq: 0,
        };
        store.create(&m).expect("create");
        batch.extend(events(&m, start, &mut rng));
        if batch.len() >= 3_000 {
            store.append_batch(&batch).expect("append");
            batch.clear();
        }
    }
    store.append_batch(&batch).expect("append");
}

/// A session's three events.
fn events(m: &SessionMeta, start: u64, rng: &mut Rng) -> [Event; 3] {
    let event = |seq, ms, body| Event {
        schema_version: 1,
        session_id: m.id.clone(),
        seq,
        ts: rfc3339(UNIX_EPOCH + Duration::from_millis(ms)),
        step: None,
        goal: None,
        agent: None,
        iteration: None,
        node: None,
        node_kind: None,
        replayed: false,
        body,
    };
    let trigger = (m.workflow == "nightly-report").then(|| {
        Box::new(RunTrigger {
            id: "nightly-report#0".into(),
            kind: "schedule".into(),
            fired_at: m.created_at.clone(),
            scheduled_for: Some(m.created_at.clone()),
            delivery_id: None,
            event_id: None,
        })
    });
    let (turns, input, output) = (
        1 + rng.below(12),
        800 + rng.below(40_000),
        50 + rng.below(3_000),
    );
    let usage = Usage {
        input_tokens: input,
        output_tokens: output,
        cost_usd: Some((input as f64 * 2.5 + output as f64 * 10.0) / 1e6),
        turns,
        tool_calls: turns - 1,
    };
    let took = 2_000 + rng.below(300_000);
    let last = match rng.below(100) {
        0..70 => EventBody::RunComplete {
            outputs: BTreeMap::from([("result".into(), json!("ok"))]),
            usage,
        },
        70..85 => EventBody::RunFailed {
            error: "the model's answer did not match the output schema".into(),
            termination_reason: TerminationReason::Error,
            usage,
        },
        85..95 => EventBody::RunCancelled { usage },
        _ => EventBody::ApprovalRequired {
            reason: "deploy to production?".into(),
            deadline_ms: None,
        },
    };
    [
        event(
            1,
            start,
            EventBody::RunStarted {
                workflow: m.workflow.clone(),
                path: m.path.clone(),
                inputs: m.inputs.clone(),
                provider: "openai".into(),
                model: "gpt-4o".into(),
                endpoint: None,
                workspace: m.workspace.clone(),
                resumed_from_seq: None,
                fingerprint: None,
                digests: BTreeMap::new(),
                trigger,
                sandbox: None,
                forked_from: None,
                replay_of: None,
                package: None,
            },
        ),
        event(
            2,
            start + took / 2,
            EventBody::LlmResponse {
                model: "gpt-4o".into(),
                turn: turns as u32,
                input_tokens: input / turns,
                output_tokens: output / turns,
                latency_ms: 900 + rng.below(2_000),
                cost_usd: Some(0.004),
                stop_reason: "end_turn".into(),
                text: format!("Done with the {} checklist.", m.workflow),
                tool_calls: Vec::new(),
            },
        ),
        event(3, start + took, last),
    ]
}

/// The cursor that opens the deep page of the list's query `query` (a
/// query string): after its `(deep_page() - 1) * PAGE`th session, found by
/// walking the store's pages of 500.
fn deep_cursor(store: &PgStore, query: &str) -> String {
    let mut q = SessionQuery {
        limit: 500,
        ..SessionQuery::default()
    };
    for (k, v) in url::form_urlencoded::parse(query.trim_start_matches('?').as_bytes()) {
        match &*k {
            "status" => q.status = SessionStatus::parse(&v),
            "workflow" => q.workflow = Some(v.into_owned()),
            "q" => q.search = Some(v.into_owned()),
            _ => {}
        }
    }
    let mut left = (deep_page() - 1) * PAGE;
    loop {
        q.limit = left.min(500);
        let page = store.page(&q).expect("a page");
        assert_eq!(page.len(), q.limit, "{query}: too few sessions");
        left -= page.len();
        let cursor = Cursor::after(page.last().expect("a session"));
        if left == 0 {
            return url::form_urlencoded::byte_serialize(cursor.encode().as_bytes()).collect();
        }
        q.before = Some(cursor);
    }
}
