//! MCP tools end to end: a real stdio MCP server (this test binary, started again
//! in server mode with `AGENTFILE_TEST_MCP_SERVER` set, built on rmcp's server),
//! its tools offered to a fake-provider run, an allowed call answered, a denied
//! one refused before it reaches the server; crashed, hung and missing servers
//! turning into tool errors and warnings rather than stuck runs.
//!
//! The run loop here is the minimal one the executor will grow from: call the
//! provider, hand its tool calls to the toolbox through `ToolSet::call`, send the
//! results back, repeat until it answers with text.
//!
//! This file has its own `main` (`harness = false`) because the same binary must
//! also be able to act as the server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentfile::config::{Config, LlmConfig, McpServer};
use agentfile::llm::fake::{FakeReply, FakeServer};
use agentfile::llm::{
    CancellationToken, ChatRequest, ContentBlock, Message, Role, ToolResult, provider_from_config,
};
use agentfile::tools::policy::Policy;
use agentfile::tools::{Denial, MemoryStore, ToolContext, ToolSet, Toolbox, ToolboxOptions};
use serde_json::json;

const SERVER_VAR: &str = "AGENTFILE_TEST_MCP_SERVER";
const LOG_VAR: &str = "AGENTFILE_TEST_MCP_LOG";

// ── the server side ─────────────────────────────────────────────────────────

mod server {
    use std::io::Write;
    use std::sync::Arc;

    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::{RoleServer, ServerHandler, ServiceExt};
    use serde_json::json;

    #[derive(Clone)]
    pub struct TestServer {
        pub log: Option<std::path::PathBuf>,
    }

    impl TestServer {
        pub fn note(&self, line: &str) {
            if let Some(p) = &self.log
                && let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
            {
                let _ = writeln!(f, "{line}");
            }
        }
    }

    fn schema(v: serde_json::Value) -> Arc<rmcp::model::JsonObject> {
        match v {
            serde_json::Value::Object(m) => Arc::new(m),
            _ => Arc::new(Default::default()),
        }
    }

    impl ServerHandler for TestServer {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _: Option<PaginatedRequestParams>,
            _: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let text = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
            let none = json!({"type": "object", "properties": {}});
            Ok(ListToolsResult::with_all_items(vec![
                Tool::new("echo", "Echo the text back.", schema(text)),
                Tool::new(
                    "secret",
                    "Reveal a secret (the policy denies it).",
                    schema(none.clone()),
                ),
                Tool::new("crash", "Exit the server process.", schema(none.clone())),
                Tool::new("hang", "Never answer.", schema(none)),
            ]))
        }

        async fn call_tool(
            &self,
            req: CallToolRequestParams,
            _: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            self.note(&format!("call {}", req.name));
            let text = req
                .arguments
                .as_ref()
                .and_then(|a| a.get("text"))
                .and_then(|t| t.as_str())
                .unwrap_or("")
                .to_owned();
            match req.name.as_ref() {
                "echo" => Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                    "echo: {text}"
                ))])
                .into()),
                "secret" => {
                    Ok(CallToolResult::success(vec![ContentBlock::text("SECRET-FROM-MCP")]).into())
                }
                "crash" => std::process::exit(3),
                "hang" => {
                    std::future::pending::<()>().await;
                    unreachable!()
                }
                other => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "no tool {other}"
                ))])
                .into()),
            }
        }
    }

    pub fn main(mode: &str) {
        let log = std::env::var_os(super::LOG_VAR).map(std::path::PathBuf::from);
        let server = TestServer { log };
        server.note("started");
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            std::process::exit(2);
        };
        rt.block_on(async move {
            if mode == "slow-start" {
                // Never finishes starting: the client must not wait on it.
                std::future::pending::<()>().await;
            }
            match server.serve(rmcp::transport::stdio()).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(_) => std::process::exit(2),
            }
        });
    }
}

// ── the client side ─────────────────────────────────────────────────────────

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir() -> Dir {
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "agentfile-mcp-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    Dir(p.canonicalize().unwrap())
}

fn config_with_server(name: &str, mode: &str, log: &Path) -> Config {
    let mut config = Config::default();
    let exe = std::env::current_exe().unwrap();
    let mut env = BTreeMap::new();
    env.insert(SERVER_VAR.to_owned(), mode.to_owned());
    env.insert(LOG_VAR.to_owned(), log.display().to_string());
    config.mcp.servers.insert(
        name.to_owned(),
        McpServer {
            command: exe.display().to_string(),
            args: Vec::new(),
            env,
            url: None,
        },
    );
    config
}

const POLICY: &str = r#"
default_deny = true
[mcp]
allow = ["echo:echo", "echo:crash", "echo:hang"]
"#;

fn toolbox(config: &Config, policy: &str, ws: &Path, options: ToolboxOptions) -> Toolbox {
    let policy = Policy::parse(policy, Path::new("policy.toml")).unwrap();
    Toolbox::with_options(
        config,
        policy,
        ws,
        MemoryStore::in_memory().unwrap(),
        options,
    )
    .unwrap()
}

fn ctx(ws: &Path) -> ToolContext {
    ToolContext {
        workspace: ws.to_path_buf(),
        agent_id: "mcp-test".to_owned(),
        cancel: CancellationToken::new(),
    }
}

fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

async fn fake_provider_run_calls_an_allowed_tool_and_is_refused_a_denied_one() {
    let dir = temp_dir();
    let log = dir.0.join("server.log");
    let config = config_with_server("echo", "serve", &log);
    let tb = toolbox(&config, POLICY, &dir.0, ToolboxOptions::default());
    tb.ready().await;
    assert!(tb.warnings().is_empty(), "{:?}", tb.warnings());

    let fake = FakeServer::start(vec![
        FakeReply::tool_call("mcp_echo_echo", json!({"text": "hi there"})),
        FakeReply::tool_call("mcp_echo_secret", json!({})),
        FakeReply::text("done"),
    ])
    .await
    .unwrap();
    let llm = LlmConfig {
        provider: Some("anthropic".to_owned()),
        model: Some("claude-sonnet-4-5".to_owned()),
        base_url: Some(fake.base_url()),
        ..LlmConfig::default()
    };
    let env = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "test-key-0123456789".to_owned());
    let provider = provider_from_config(&llm, &BTreeMap::new(), &env).unwrap();

    // The minimal run loop.
    let c = ctx(&dir.0);
    let mut request = ChatRequest::new("You use tools.", "Echo something.");
    request.tools = tb.definitions();
    let mut denials: Vec<Denial> = Vec::new();
    let mut final_text = String::new();
    for _turn in 0..5 {
        let response = provider
            .chat(request.clone(), CancellationToken::new())
            .await
            .unwrap();
        request.messages.push(Message {
            role: Role::Assistant,
            content: response.content.clone(),
        });
        let calls = response.tool_calls();
        if calls.is_empty() {
            final_text = response.text();
            break;
        }
        let mut results = Vec::new();
        for call in calls {
            let r = tb.call(&call.name, call.arguments.clone(), &c).await;
            if let Some(d) = r.denied.clone() {
                denials.push(d);
            }
            results.push(ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: r.output.content,
                is_error: r.output.is_error,
            });
        }
        request.messages.push(Message::tool_results(results));
    }
    assert_eq!(final_text, "done");

    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    // Offered: the allowed MCP tool with its schema; not the denied one.
    let tools = &requests[0].body["tools"];
    let offered: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(offered.contains(&"mcp_echo_echo"), "{offered:?}");
    assert!(!offered.contains(&"mcp_echo_secret"), "{offered:?}");
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp_echo_echo")
        .unwrap();
    assert_eq!(echo["input_schema"]["required"], json!(["text"]));
    // The allowed call ran: its result is in the second request.
    let second = requests[1].body.to_string();
    assert!(second.contains("echo: hi there"), "{second}");
    // The denied one was refused, named its rule, and never reached the server.
    assert_eq!(denials.len(), 1);
    assert_eq!(denials[0].tool, "mcp");
    assert_eq!(denials[0].rule, "default_deny = true");
    let third = requests[2].body.to_string();
    assert!(
        third.contains("denied by policy (default_deny = true)"),
        "{third}"
    );
    assert!(!third.contains("SECRET-FROM-MCP"), "{third}");
    let lines = log_lines(&log);
    assert!(lines.contains(&"call echo".to_owned()), "{lines:?}");
    assert!(!lines.iter().any(|l| l == "call secret"), "{lines:?}");
    // The conversation carried a tool result for every tool call.
    let tool_results = request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| matches!(b, ContentBlock::ToolResult(_)))
        .count();
    assert_eq!(tool_results, 2);
}

/// The same, through `agentfile run` itself: the binary starts the configured
/// server, offers its tools, runs the allowed call, refuses the denied one and
/// records the refusal as a `policy_denied` event in the session.
async fn agentfile_run_uses_mcp_tools_behind_the_policy() {
    let dir = temp_dir();
    let log = dir.0.join("server.log");
    let fake = FakeServer::start(vec![
        FakeReply::tool_call("mcp_echo_echo", json!({"text": "from a real run"})),
        FakeReply::tool_call("mcp_echo_secret", json!({})),
        FakeReply::text("done"),
    ])
    .await
    .unwrap();
    let exe = std::env::current_exe().unwrap();
    std::fs::write(
        dir.0.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"AGENTFILE_MCP_TEST_KEY\"\n\
             [mcp.servers.echo]\ncommand = {:?}\nenv = {{ {SERVER_VAR} = \"serve\", {LOG_VAR} = {:?} }}\n",
            fake.base_url(),
            exe.display().to_string(),
            log.display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(dir.0.join("policy.toml"), POLICY).unwrap();
    std::fs::write(
        dir.0.join("Agentfile"),
        "NAME mcp-run\nGOAL g \"Echo something\"\nRUN main USING g\n",
    )
    .unwrap();
    let cwd = dir.0.clone();
    let o = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
            .args(["run", "Agentfile", "--output", "json"])
            .current_dir(&cwd)
            .env("AGENTFILE_MCP_TEST_KEY", "test-key-0123456789")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(
        r["status"],
        "completed",
        "{r:#}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(r["outputs"]["g"], "done");
    let requests = fake.requests();
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("echo: from a real run")
    );
    let lines = log_lines(&log);
    assert!(lines.contains(&"call echo".to_owned()), "{lines:?}");
    assert!(!lines.iter().any(|l| l == "call secret"), "{lines:?}");
    let id = r["session_id"].as_str().unwrap().to_owned();
    let dir2 = dir.0.clone();
    let show = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
            .args(["sessions", "show", &id, "--format", "json"])
            .current_dir(&dir2)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let denied: Vec<&serde_json::Value> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "policy_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{shown:#}");
    assert_eq!(denied[0]["data"]["rule"], "default_deny = true");
}

/// `[sandbox] mcp_servers = true`: the server runs in the kernel sandbox, so
/// its tools still answer but it writes nothing outside the workspace; without
/// the setting it is not sandboxed.
async fn a_sandboxed_server_writes_only_in_the_workspace() {
    if let Some(why) = agentfile::tools::confine::unavailable() {
        eprintln!("SKIPPED: the sandbox is unavailable on this machine: {why}");
        return;
    }
    for sandboxed in [true, false] {
        let dir = temp_dir();
        let ws = dir.0.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        // The server's log lies outside the workspace.
        let log = dir.0.join("server.log");
        let config = config_with_server("echo", "serve", &log);
        let policy = format!("{POLICY}\n[sandbox]\nmcp_servers = {sandboxed}\n");
        let tb = toolbox(&config, &policy, &ws, ToolboxOptions::default());
        tb.ready().await;
        assert!(tb.warnings().is_empty(), "{:?}", tb.warnings());
        let r = tb
            .call("mcp_echo_echo", json!({"text": "hi"}), &ctx(&ws))
            .await;
        assert!(!r.output.is_error, "{:?}", r.output);
        assert!(r.output.content.contains("hi"), "{}", r.output.content);
        assert_eq!(
            log.exists(),
            !sandboxed,
            "sandboxed {sandboxed}: {:?}",
            log_lines(&log)
        );
        tb.shutdown();
    }
}

async fn a_crashed_server_is_a_tool_error_not_a_stuck_run() {
    let dir = temp_dir();
    let log = dir.0.join("server.log");
    let config = config_with_server("echo", "serve", &log);
    let tb = toolbox(&config, POLICY, &dir.0, ToolboxOptions::default());
    tb.ready().await;
    let c = ctx(&dir.0);
    let r = tb.call("mcp_echo_crash", json!({}), &c).await;
    assert!(r.denied.is_none());
    assert!(r.output.is_error, "{:?}", r.output);
    assert!(
        r.output.content.contains("MCP server `echo`"),
        "{}",
        r.output.content
    );
    // Later calls fail at once, saying why.
    let r = tb.call("mcp_echo_echo", json!({"text": "x"}), &c).await;
    assert!(r.output.is_error, "{:?}", r.output);
    // The run hears of it as an `error` event, before its next event.
    let bus = agentfile::events::EventBus::new("s-mcp", 0, None).with_notices(tb.notices());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    bus.subscribe(std::sync::Arc::new(
        move |e: &agentfile::wire::events::Event| s.lock().unwrap().push(e.clone()),
    ));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let said = loop {
        bus.emit(
            &agentfile::events::Scope::default(),
            agentfile::wire::events::EventBody::Warning {
                message: "tick".into(),
            },
        );
        let errors: Vec<String> = seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match &e.body {
                agentfile::wire::events::EventBody::Error { message } => Some(message.clone()),
                _ => None,
            })
            .collect();
        if !errors.is_empty() || std::time::Instant::now() > deadline {
            break errors;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("MCP server `echo` stopped during the run"),
        "{said:?}"
    );
    // Stored order: the error comes before the event that carried it out.
    let kinds: Vec<&str> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.kind())
        .collect::<Vec<_>>()
        .into_iter()
        .collect();
    let at = kinds.iter().position(|k| *k == "error").unwrap();
    assert_eq!(kinds[at + 1], "warning");
}

async fn a_hung_call_times_out() {
    let dir = temp_dir();
    let log = dir.0.join("server.log");
    let config = config_with_server("echo", "serve", &log);
    let options = ToolboxOptions {
        mcp_call_timeout: Duration::from_secs(2),
        ..ToolboxOptions::default()
    };
    let tb = toolbox(&config, POLICY, &dir.0, options);
    tb.ready().await;
    let c = ctx(&dir.0);
    let r = tb.call("mcp_echo_hang", json!({}), &c).await;
    assert!(r.output.is_error);
    assert!(
        r.output
            .content
            .contains("did not answer `hang` within 2 s"),
        "{}",
        r.output.content
    );
    // The server is still there for the next call.
    let r = tb
        .call("mcp_echo_echo", json!({"text": "still here"}), &c)
        .await;
    assert_eq!(r.output.content, "echo: still here");
    // And a cancelled run stops waiting at once.
    let c2 = ctx(&dir.0);
    let cancel = c2.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let r = tb.call("mcp_echo_hang", json!({}), &c2).await;
    assert_eq!(r.output.content, "cancelled");
}

async fn missing_and_slow_servers_do_not_block_a_run() {
    let dir = temp_dir();
    let log = dir.0.join("server.log");
    let mut config = config_with_server("slow", "slow-start", &log);
    config.mcp.servers.insert(
        "missing".to_owned(),
        McpServer {
            command: "/nonexistent/agentfile-test-mcp-server".to_owned(),
            ..McpServer::default()
        },
    );
    let policy = "default_deny = true\n[read]\nallow = [\"$WORKSPACE/**\"]\n[mcp]\nallow = [\"slow:*\", \"missing:*\"]\n";
    let options = ToolboxOptions {
        mcp_list_deadline: Duration::from_millis(500),
        ..ToolboxOptions::default()
    };
    let started = Instant::now();
    let tb = toolbox(&config, policy, &dir.0, options);
    tb.ready().await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "ready() waited too long"
    );
    let names: Vec<String> = tb.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["read"], "no MCP tools are ready");
    let warnings = tb.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("MCP server `missing`") && w.contains("cannot start")),
        "{warnings:?}"
    );
    std::fs::write(dir.0.join("a.txt"), "content").unwrap();
    let r = tb
        .call("read", json!({"path": "a.txt"}), &ctx(&dir.0))
        .await;
    assert_eq!(r.output.content, "content");
}

async fn servers_the_policy_denies_are_never_started() {
    let dir = temp_dir();
    let log = dir.0.join("server.log");
    let config = config_with_server("echo", "serve", &log);
    let memory = MemoryStore::in_memory().unwrap();
    let tb = Toolbox::new(&config, Policy::safe_default(), &dir.0, memory).unwrap();
    tb.ready().await;
    assert!(!tb.definitions().iter().any(|d| d.name.starts_with("mcp_")));
    let r = tb
        .call("mcp_echo_echo", json!({"text": "x"}), &ctx(&dir.0))
        .await;
    assert_eq!(
        r.denied.map(|d| d.rule).as_deref(),
        Some("no policy file: MCP tools are off by default")
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(log_lines(&log).is_empty(), "a denied server was started");
}

async fn a_streamable_http_server_is_used_through_its_url() {
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let dir = temp_dir();
    let log = dir.0.join("http.log");
    let server_log = log.clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(server::TestServer {
                log: Some(server_log.clone()),
            })
        },
        std::sync::Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let svc = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(sock), svc)
                    .await;
            });
        }
    });
    let mut config = Config::default();
    config.mcp.servers.insert(
        "web".to_owned(),
        McpServer {
            url: Some(format!("http://{addr}/mcp")),
            ..McpServer::default()
        },
    );
    let policy = "default_deny = true\n[mcp]\nallow = [\"web:echo\"]\n";
    let tb = toolbox(&config, policy, &dir.0, ToolboxOptions::default());
    tb.ready().await;
    assert!(tb.warnings().is_empty(), "{:?}", tb.warnings());
    let names: Vec<String> = tb.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["mcp_web_echo"]);
    let c = ctx(&dir.0);
    let r = tb
        .call("mcp_web_echo", json!({"text": "over http"}), &c)
        .await;
    assert_eq!(r.output.content, "echo: over http");
    let r = tb.call("mcp_web_secret", json!({}), &c).await;
    assert!(r.denied.is_some(), "{:?}", r.output);
    assert!(!log_lines(&log).iter().any(|l| l == "call secret"));
}

// ── the harness ─────────────────────────────────────────────────────────────

type Test = (
    &'static str,
    fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>,
);

fn main() {
    if let Ok(mode) = std::env::var(SERVER_VAR) {
        server::main(&mode);
        return;
    }
    let tests: Vec<Test> = vec![
        (
            "fake_provider_run_calls_an_allowed_tool_and_is_refused_a_denied_one",
            || Box::pin(fake_provider_run_calls_an_allowed_tool_and_is_refused_a_denied_one()),
        ),
        ("agentfile_run_uses_mcp_tools_behind_the_policy", || {
            Box::pin(agentfile_run_uses_mcp_tools_behind_the_policy())
        }),
        ("a_crashed_server_is_a_tool_error_not_a_stuck_run", || {
            Box::pin(a_crashed_server_is_a_tool_error_not_a_stuck_run())
        }),
        ("a_sandboxed_server_writes_only_in_the_workspace", || {
            Box::pin(a_sandboxed_server_writes_only_in_the_workspace())
        }),
        (
            "a_hung_call_times_out",
            || Box::pin(a_hung_call_times_out()),
        ),
        ("missing_and_slow_servers_do_not_block_a_run", || {
            Box::pin(missing_and_slow_servers_do_not_block_a_run())
        }),
        ("servers_the_policy_denies_are_never_started", || {
            Box::pin(servers_the_policy_denies_are_never_started())
        }),
        ("a_streamable_http_server_is_used_through_its_url", || {
            Box::pin(a_streamable_http_server_is_used_through_its_url())
        }),
    ];
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let list_only = std::env::args().any(|a| a == "--list");
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, test) in tests {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        if list_only {
            println!("{name}: test");
            continue;
        }
        ran += 1;
        let outcome = std::panic::catch_unwind(|| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(test());
        });
        match outcome {
            Ok(()) => println!("test {name} ... ok"),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed.push(name);
            }
        }
    }
    if list_only {
        return;
    }
    println!(
        "\ntest result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        ran - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        std::process::exit(1);
    }
}
