//! web_fetch and web_search against servers on loopback: HTML reduced to text,
//! redirects judged hop by hop, the rate limit enforced, the gateway used with
//! its token. Nothing here leaves 127.0.0.1.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agentfile_config::Config;
use agentfile_tools::policy::Policy;
use agentfile_tools::{MemoryStore, ToolContext, ToolSet, Toolbox, ToolboxOptions};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A request the stub server received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    authorization: Option<String>,
    body: String,
}

type Reply = (u16, Vec<(&'static str, String)>, Vec<u8>);

/// A one-request-per-connection HTTP/1.1 server on a free loopback port.
async fn serve(route: fn(&str, SocketAddr) -> Reply) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let head_end = loop {
                    let Ok(n) = sock.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let mut lines = head.lines();
                let first: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
                let header = |name: &str| {
                    head.lines().find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                    })
                };
                let len: usize = header("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let Ok(n) = sock.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let path = first.get(1).copied().unwrap_or("/").to_owned();
                log.lock().unwrap().push(Seen {
                    method: first.first().copied().unwrap_or("").to_owned(),
                    path: path.clone(),
                    authorization: header("authorization"),
                    body: String::from_utf8_lossy(&buf[head_end..]).into_owned(),
                });
                let (status, headers, body) = route(&path, addr);
                let mut resp = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    body.len()
                );
                for (k, v) in headers {
                    resp.push_str(&format!("{k}: {v}\r\n"));
                }
                resp.push_str("\r\n");
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.write_all(&body).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (addr, seen)
}

const PAGE: &str = "<html><head><title>Stub</title><script>var x = 1;</script></head>\
    <body><h1>Heading</h1><p>Some &amp; text.</p></body></html>";

fn routes(path: &str, addr: SocketAddr) -> Reply {
    let html = vec![("Content-Type", "text/html; charset=utf-8".to_owned())];
    match path {
        "/page" => (200, html, PAGE.as_bytes().to_vec()),
        "/to-page" => (302, vec![("Location", format!("http://{addr}/page"))], Vec::new()),
        "/to-localhost" => (
            302,
            vec![("Location", format!("http://localhost:{}/page", addr.port()))],
            Vec::new(),
        ),
        "/to-elsewhere" => (302, vec![("Location", "http://example.com/".to_owned())], Vec::new()),
        "/loop" => (302, vec![("Location", "/loop".to_owned())], Vec::new()),
        "/binary" => (
            200,
            vec![("Content-Type", "application/octet-stream".to_owned())],
            vec![0, 1, 2, 3],
        ),
        "/gw/fetch" => (200, html, PAGE.as_bytes().to_vec()),
        "/failing-gw/fetch" => (502, html, b"upstream said no".to_vec()),
        "/big" => (
            200,
            vec![("Content-Type", "text/plain".to_owned())],
            "0123456789abcde\n".repeat(6 << 16).into_bytes(),
        ),
        "/gw/search" => (
            200,
            vec![("Content-Type", "application/json".to_owned())],
            br#"{"results":[{"title":"Rust","url":"https://www.rust-lang.org/","snippet":"A language."}]}"#.to_vec(),
        ),
        _ => (404, html, b"<p>not here</p>".to_vec()),
    }
}

fn ctx() -> ToolContext {
    ToolContext {
        workspace: std::env::temp_dir(),
        agent_id: "web".to_owned(),
        cancel: CancellationToken::new(),
    }
}

fn toolbox(policy: &str, config: Config, env: Vec<(String, String)>) -> Toolbox {
    let policy = Policy::parse(policy, Path::new("policy.toml")).unwrap();
    let options = ToolboxOptions {
        environment: Some(env),
        ..ToolboxOptions::default()
    };
    Toolbox::with_options(
        &config,
        policy,
        &std::env::temp_dir(),
        MemoryStore::in_memory().unwrap(),
        options,
    )
    .unwrap()
}

const NAMED_LOOPBACK: &str = r#"
default_deny = true
[web_fetch]
allow_domains = ["127.0.0.1"]
"#;

#[tokio::test]
async fn fetches_named_loopback_and_reduces_html() {
    let (addr, seen) = serve(routes).await;
    let tb = toolbox(NAMED_LOOPBACK, Config::default(), Vec::new());
    let r = tb
        .call(
            "web_fetch",
            json!({"url": format!("http://{addr}/page")}),
            &ctx(),
        )
        .await;
    assert!(r.denied.is_none(), "{:?}", r.denied);
    assert!(!r.output.is_error, "{}", r.output.content);
    let text = &r.output.content;
    assert!(text.contains("Status: 200"), "{text}");
    assert!(text.contains("Stub\n\nHeading\n\nSome & text."), "{text}");
    assert!(!text.contains("var x"), "{text}");
    assert_eq!(seen.lock().unwrap()[0].method, "GET");

    let r = tb
        .call(
            "web_fetch",
            json!({"url": format!("http://{addr}/binary")}),
            &ctx(),
        )
        .await;
    assert!(
        r.output
            .content
            .contains("[binary content (application/octet-stream), 4 bytes"),
        "{}",
        r.output.content
    );
    let r = tb
        .call(
            "web_fetch",
            json!({"url": format!("http://{addr}/missing")}),
            &ctx(),
        )
        .await;
    assert!(
        r.output.is_error && r.output.content.contains("Status: 404"),
        "{}",
        r.output.content
    );
}

#[tokio::test]
async fn redirects_are_judged_hop_by_hop() {
    let (addr, seen) = serve(routes).await;
    let tb = toolbox(NAMED_LOOPBACK, Config::default(), Vec::new());
    let c = ctx();
    let r = tb
        .call(
            "web_fetch",
            json!({"url": format!("http://{addr}/to-page")}),
            &c,
        )
        .await;
    assert!(r.output.content.contains("Heading"), "{}", r.output.content);

    // localhost is not named, so the hop is refused, and the refusal is a denial.
    let before = seen.lock().unwrap().len();
    let r = tb
        .call(
            "web_fetch",
            json!({"url": format!("http://{addr}/to-localhost")}),
            &c,
        )
        .await;
    let d = r.denied.expect("the hop to localhost must be denied");
    assert_eq!(d.rule, "web_fetch: private and local addresses are refused");
    assert_eq!(
        seen.lock().unwrap().len(),
        before + 1,
        "the denied hop must not be fetched"
    );

    let r = tb
        .call(
            "web_fetch",
            json!({"url": format!("http://{addr}/to-elsewhere")}),
            &c,
        )
        .await;
    assert_eq!(
        r.denied.map(|d| d.rule).as_deref(),
        Some("web_fetch.allow_domains")
    );

    let r = tb
        .call(
            "web_fetch",
            json!({"url": format!("http://{addr}/loop")}),
            &c,
        )
        .await;
    assert!(
        r.output.is_error && r.output.content.contains("more than 5 redirects"),
        "{}",
        r.output.content
    );
}

#[tokio::test]
async fn private_addresses_need_naming_even_under_a_wildcard() {
    let (addr, seen) = serve(routes).await;
    let policy = "default_deny = true\n[web_fetch]\nallow_domains = [\"*\"]\n";
    let tb = toolbox(policy, Config::default(), Vec::new());
    let r = tb
        .call(
            "web_fetch",
            json!({"url": format!("http://{addr}/page")}),
            &ctx(),
        )
        .await;
    assert!(r.denied.is_some(), "{:?}", r.output);
    assert!(
        seen.lock().unwrap().is_empty(),
        "a refused fetch reached the server"
    );
}

#[tokio::test]
async fn the_rate_limit_is_enforced() {
    let (addr, seen) = serve(routes).await;
    let policy =
        "default_deny = true\n[web_fetch]\nallow_domains = [\"127.0.0.1\"]\nrate_limit = 2\n";
    let tb = toolbox(policy, Config::default(), Vec::new());
    let c = ctx();
    let url = json!({"url": format!("http://{addr}/page")});
    assert!(tb.call("web_fetch", url.clone(), &c).await.denied.is_none());
    assert!(tb.call("web_fetch", url.clone(), &c).await.denied.is_none());
    let r = tb.call("web_fetch", url, &c).await;
    let d = r
        .denied
        .expect("the third call in a minute must be refused");
    assert_eq!(d.rule, "web_fetch.rate_limit = 2");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn the_gateway_carries_fetch_and_search_with_its_token() {
    let (addr, seen) = serve(routes).await;
    let mut config = Config::default();
    config.web.gateway_url = Some(format!("http://{addr}/gw"));
    config.web.gateway_token_env = Some("TEST_GW_TOKEN".to_owned());
    let policy = "default_deny = true\n[web_fetch]\nallow_domains = [\"*\"]\n[web_search]\n";
    let env = vec![("TEST_GW_TOKEN".to_owned(), "tok123".to_owned())];
    let tb = toolbox(policy, config, env);
    assert!(tb.definitions().iter().any(|d| d.name == "web_search"));
    let c = ctx();
    let r = tb
        .call("web_fetch", json!({"url": "https://example.com/doc"}), &c)
        .await;
    assert!(r.output.content.contains("Heading"), "{}", r.output.content);
    assert!(
        r.output
            .content
            .starts_with("URL: https://example.com/doc\nStatus: 200\n"),
        "the page's URL, not the gateway's: {}",
        r.output.content
    );
    let r = tb
        .call("web_search", json!({"query": "rust lang"}), &c)
        .await;
    assert_eq!(
        r.output.content,
        "1. Rust\n   https://www.rust-lang.org/\n   A language."
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].path, "/gw/fetch");
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer tok123"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&seen[0].body).unwrap(),
        json!({"url": "https://example.com/doc"})
    );
    assert_eq!(seen[1].path, "/gw/search");
    assert!(seen[1].body.contains("rust lang"));
    // Even through the gateway, private targets are refused before anything is sent.
    let r = tb
        .call("web_fetch", json!({"url": "http://169.254.169.254/"}), &c)
        .await;
    assert!(r.denied.is_some());
}

#[tokio::test]
async fn through_the_gateway_answers_and_errors_name_the_page() {
    let (addr, _) = serve(routes).await;
    let policy = "default_deny = true\n[web_fetch]\nallow_domains = [\"*\"]\n";
    let page = json!({"url": "https://example.com/doc"});
    let c = ctx();

    let mut config = Config::default();
    config.web.gateway_url = Some(format!("http://{addr}/failing-gw"));
    let tb = toolbox(policy, config, Vec::new());
    let r = tb.call("web_fetch", page.clone(), &c).await;
    assert!(r.output.is_error);
    assert_eq!(
        r.output.content,
        "URL: https://example.com/doc\nStatus: 502\n\nupstream said no"
    );

    // A gateway that is down: the error names the page, not the gateway.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut config = Config::default();
    config.web.gateway_url = Some(format!("http://127.0.0.1:{port}/down-gw"));
    let tb = toolbox(policy, config, Vec::new());
    let r = tb.call("web_fetch", page, &c).await;
    let out = &r.output.content;
    assert!(r.output.is_error, "{out}");
    assert!(
        out.starts_with("fetching `https://example.com/doc` through the web gateway failed: "),
        "{out}"
    );
    assert!(
        !out.contains("down-gw") && !out.contains(&port.to_string()),
        "{out}"
    );
}

#[tokio::test]
async fn a_page_past_both_caps_says_its_true_size() {
    let (addr, _) = serve(routes).await;
    let tb = toolbox(NAMED_LOOPBACK, Config::default(), Vec::new());
    let r = tb
        .call(
            "web_fetch",
            json!({"url": format!("http://{addr}/big")}),
            &ctx(),
        )
        .await;
    let out = &r.output.content;
    let cap = ToolboxOptions::default().max_result_bytes;
    assert!(!r.output.is_error, "{}", &out[..200]);
    assert!(out.len() <= cap, "{}", out.len());
    let head = format!("URL: http://{addr}/big\nStatus: 200\n\n");
    assert!(out.starts_with(&format!("{head}0123456789abcde\n")));
    let tail = &out[out.len() - 400..];
    let text = head.len() + (5 << 20);
    assert!(
        tail.contains(&format!(
            "[the page's text is {text} bytes (5.0 MiB); only the first "
        ))
            && tail.ends_with(
                "[the download stopped after the first 5242880 bytes of the page of its 6291456 bytes (6 MiB); the text above comes from that part only]"
            ),
        "{tail}"
    );
}
