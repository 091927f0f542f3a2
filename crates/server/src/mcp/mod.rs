//! `agentfile mcp`: an MCP server on stdio for IDE agents (Claude Code, Cursor,
//! Cline, VS Code), over the same [`Gateway`] as `agentfile serve`.
//!
//! - [`transport`]: stdin/stdout framing; holds back the end of input until
//!   every request is answered.
//! - [`tools`]: the tools `run`, `event`, `cancel`, `approve`, `validate`,
//!   `inspect`, `list`, their schemas (from [`agentfile_wire::rpc`]) and results.
//! - [`results`]: what a tool call returns: result builders, output schemas,
//!   a finished run as a tool result (shared by the tools, tasks and MRTR).
//! - [`workflows`]: one `run_<name>` tool per workflow in the workspace, kept
//!   current by a watcher that sends `notifications/tools/list_changed`.
//! - [`progress`]: a run's events as progress notifications (with a heartbeat)
//!   and log messages, through a bounded queue so the engine never waits.
//! - [`approval`]: supervised goals approved through `elicitation/create`, else
//!   the `approve` tool.
//! - [`sampling`]: `--provider mcp-sampling`, the host's model as a provider.
//! - [`prompts`]: the `run`, `list` and `create` prompts (slash commands).
//! - [`http`]: `agentfile mcp --http ADDR`, the same handler over Streamable
//!   HTTP for many clients at once (bearer tokens, `Origin` checks).
//! - [`principal`]: who asks (the local user, a token, loopback): a task's owner.
//! - [`protected`]: RFC 9728 protected-resource metadata for `--http` with tokens.
//! - [`mrtr`]: input-required results for blocking calls of 2026 clients.
//! - [`tasks`]: runs as tasks (the `io.modelcontextprotocol/tasks` extension),
//!   read from the session store.
//! - [`tasks_v1`]: the same tasks for 2025-11-25 clients (core tasks:
//!   `params.task`, `tasks/get|result|list|cancel`), by a JSON shim before rmcp.
//! - [`task_timing`]: both generations' poll interval and TTL (`[mcp]`).
//!
//! Protocol: revisions 2024-11-05 through 2025-11-25 over the `initialize`
//! handshake (a client asking for another gets 2025-11-25), and 2026-07-28
//! stateless (`server/discover`, per-request `_meta`). What rmcp does with
//! the messages is rmcp's; this module supplies the handler and the transport.
//!
//! Lifetime (stdio): one connection per process. The end of stdin drains the gateway
//! (accepted runs finish, sessions complete); SIGTERM or SIGINT interrupts it
//! (runs stop, sessions are left `interrupted` and resumable). Nothing but
//! protocol messages is written to stdout; diagnostics go to stderr.

pub mod app;
pub mod approval;
pub mod http;
pub mod listen;
pub mod local_tasks;
pub mod mrtr;
pub mod principal;
pub mod progress;
pub mod prompts;
pub mod protected;
pub mod results;
pub mod resume;
pub mod sampling;
pub mod task_timing;
pub mod tasks;
pub mod tasks_v1;
pub mod tools;
pub mod transport;
pub mod workflows;

#[allow(deprecated)] // logging is deprecated for the 2026 protocol only
use rmcp::model::SetLevelRequestParams;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::FutureExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CustomRequest, CustomResult,
    ErrorData, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, UpdateTaskParams,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;

use crate::gateway::{Gateway, GatewayOptions};
use crate::signals::signal;

/// How long runs get to stop after a signal before the process exits anyway.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);
/// How long calls get to answer after their runs stopped at a signal.
pub const ANSWER_GRACE: Duration = Duration::from_secs(3);
/// Default interval of progress heartbeats while a run is quiet.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// Default interval of workspace rescans for `run_<name>` tools.
pub const POLL: Duration = Duration::from_secs(3);

/// Where MCP hosts take environment variables for a server: said when a run
/// has no provider key.
pub const KEY_HINT: &str = "MCP hosts start servers with a reduced environment: add \"env\": {\"ANTHROPIC_API_KEY\": \"…\"} (the variable named above) to this server's entry in your MCP host config (Claude Code: claude mcp add agentfile -e ANTHROPIC_API_KEY=… -- agentfile mcp, Cursor: .cursor/mcp.json, VS Code: .vscode/mcp.json, Cline: cline_mcp_settings.json), or run with --provider mcp-sampling to use the host's own model";

/// `agentfile mcp`'s settings.
#[derive(Clone)]
pub struct McpOptions {
    pub gateway: GatewayOptions,
    /// Progress heartbeat interval while a run is quiet (hosts time out quiet calls).
    pub heartbeat: Duration,
    /// How often the workspace is rescanned for workflow tools.
    pub poll: Duration,
    /// `--http ADDR`: serve Streamable HTTP there instead of stdio ([`http`]).
    pub http: Option<std::net::SocketAddr>,
    /// The bearer tokens HTTP clients must present (`AGENTFILE_MCP_TOKEN`,
    /// comma-separated); none means loopback only.
    pub tokens: Vec<String>,
    /// Tools an embedder adds beside agentfile's own; the CLI adds none.
    pub extra_tools: Option<Arc<dyn ExtraTools>>,
}

/// Tools an embedder serves beside agentfile's own (the conformance
/// fixtures of `examples/mcp_fixtures.rs`): listed after them, and called
/// before them, so a name here wins.
pub trait ExtraTools: Send + Sync + 'static {
    /// The tools, as `tools/list` shows them.
    fn tools(&self) -> Vec<rmcp::model::Tool>;
    /// The answer to a call of the tool `request.name`, or `None` when it is
    /// not one of these.
    /// `host` is where a call that answers with a task starts it
    /// ([`local_tasks::LocalTasks::start`]), or says the tool list changed.
    fn call(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        host: &ToolHost,
    ) -> Option<ExtraAnswer>;
    /// Whether the tool `name` can only run as a task: a client that did not
    /// declare the tasks extension gets `-32021` (Missing Required Client
    /// Capability) before the tool is called.
    fn requires_task(&self, _name: &str) -> bool {
        false
    }
    /// Prompts served beside agentfile's own, listed after them.
    fn prompts(&self) -> Vec<rmcp::model::Prompt> {
        Vec::new()
    }
    /// The answer to `prompts/get` for `request.name`, or `None` when it is
    /// not one of these.
    fn get_prompt(
        &self,
        _request: &GetPromptRequestParams,
        _context: &RequestContext<RoleServer>,
    ) -> Option<Result<GetPromptResponse, ErrorData>> {
        None
    }
}

/// What an embedder's tools reach of the server (one per process, shared by
/// every connection).
#[derive(Clone, Default)]
pub struct ToolHost {
    /// Their tasks.
    pub tasks: Arc<local_tasks::LocalTasks>,
    changes: listen::Hub,
}

impl ToolHost {
    /// Tell the clients the tool list changed (`notifications/tools/
    /// list_changed`, and on `subscriptions/listen` streams that asked).
    pub fn tools_changed(&self) {
        self.changes.changed(listen::Change::Tools);
    }

    pub(crate) fn changes(&self) -> &listen::Hub {
        &self.changes
    }
}

/// The answer of an [`ExtraTools`] call.
pub type ExtraAnswer =
    std::pin::Pin<Box<dyn Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'static>>;

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            gateway: GatewayOptions::default(),
            heartbeat: HEARTBEAT,
            poll: POLL,
            http: None,
            tokens: Vec::new(),
            extra_tools: None,
        }
    }
}

/// The connected client, as the pieces that talk back to it see it.
pub struct Client {
    peer: OnceLock<Peer<RoleServer>>,
    pub(crate) io: Arc<transport::Conn>,
    /// Lowest [`progress::level_rank`] sent as a log message (`logging/setLevel`).
    log_level: AtomicU8,
    pub heartbeat: Duration,
}

impl Client {
    fn new(io: Arc<transport::Conn>, heartbeat: Duration) -> Client {
        Client {
            peer: OnceLock::new(),
            io,
            // Info: warnings and errors are sent until the client says otherwise.
            log_level: AtomicU8::new(1),
            heartbeat,
        }
    }

    /// A client that never connected (unit tests).
    #[cfg(test)]
    pub(crate) fn detached() -> Client {
        Client::new(Arc::default(), HEARTBEAT)
    }

    /// The peer, once `initialize` has been received.
    pub fn peer(&self) -> Option<Peer<RoleServer>> {
        self.peer.get().cloned()
    }

    /// Stdin has ended: the client can no longer answer requests.
    pub fn input_closed(&self) -> bool {
        self.io.input_closed.is_cancelled()
    }

    pub fn log_level(&self) -> u8 {
        self.log_level.load(Ordering::Relaxed)
    }

    /// Whether the client can sample (`sampling` capability).
    pub fn can_sample(&self) -> bool {
        self.peer()
            .and_then(|p| p.peer_info())
            .is_some_and(|i| i.capabilities.sampling.is_some())
    }
}

/// The MCP handler: one per connection.
#[derive(Clone)]
pub struct McpServer {
    gateway: Arc<Gateway>,
    /// `triggers`, `trigger_history`, `fire`, `emit`: one per gateway.
    triggers: Arc<crate::daemon::service::TriggerService>,
    client: Arc<Client>,
    catalog: Arc<workflows::Catalog>,
    /// Whether it lists the tools every server has ([`tools::fixed_shared`]).
    fixed_tools: bool,
    extra_tools: Option<Arc<dyn ExtraTools>>,
    /// The extra tools' tasks and list changes (one per process).
    host: ToolHost,
}

const INSTRUCTIONS: &str = "agentfile runs LLM-agent workflows (Agentfiles) in this workspace. \
Call `list` to see the workflows and their inputs, then `run` (or the workflow's own `run_<name>` tool) to run one; \
it returns each goal's output. Long runs report progress; with `wait: false` follow them with `event`. \
`validate` checks a workflow (also text you are writing, via `source`), `inspect` shows its plan, \
`cancel` stops a run, `approve` records a human's decision for a supervised goal.";

impl ServerHandler for McpServer {
    #[allow(deprecated)] // `enable_logging`: deprecated for the 2026 protocol only
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_resources()
            .enable_logging()
            .enable_tasks()
            .build();
        // The run view, for hosts that render MCP Apps.
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(app::EXTENSION.into(), app::capability());
        ServerConfig::new(capabilities)
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
            .with_server_info(
                Implementation::new("agentfile", env!("CARGO_PKG_VERSION"))
                    .with_title("agentfile")
                    .with_description(
                        "A headless runtime for LLM-agent workflows written as plain files",
                    ),
            )
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let _ = self.client.peer.set(context.peer.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        Ok(app::list())
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        match app::read(&request) {
            Some(r) => Ok(r.into()),
            None => Err(ErrorData::resource_not_found(
                format!(
                    "no resource {}: this server serves only {}",
                    request.uri,
                    app::URI
                ),
                None,
            )),
        }
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut all: Vec<rmcp::model::Tool> = if self.fixed_tools {
            tools::fixed_shared().as_ref().clone()
        } else {
            Vec::new()
        };
        // A slow first scan must not hold the list up: the client hears
        // `list_changed` when the workflow tools are ready.
        let workflows = self.catalog.tools_within(workflows::FIRST_SCAN_WAIT).await;
        all.extend(workflows.iter().map(|w| w.tool.clone()));
        if let Some(extra) = &self.extra_tools {
            all.extend(extra.tools());
        }
        Ok(ListToolsResult::with_all_items(all))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(extra) = &self.extra_tools {
            if extra.requires_task(&request.name) && !tasks::wanted(&context) {
                return Err(ErrorData::missing_required_client_capability(
                    rmcp::model::ClientCapabilities::builder()
                        .enable_tasks()
                        .build(),
                ));
            }
            if let Some(answer) = extra.call(&request, &context, &self.host) {
                return answer.await;
            }
        }
        // A panic in a tool is an internal error to that call; the
        // connection and the other calls go on.
        let name = request.name.clone();
        match std::panic::AssertUnwindSafe(tools::call(self, request, context))
            .catch_unwind()
            .await
        {
            Ok(r) => r,
            Err(p) => {
                let why = crate::limits::panic_message(p.as_ref());
                eprintln!("agentfile mcp: tool `{name}` panicked: {why}");
                Err(ErrorData::internal_error(
                    format!("internal error: the `{name}` tool panicked ({why}); please report it"),
                    None,
                ))
            }
        }
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let root = self.gateway.root().to_owned();
        let agents = tokio::task::spawn_blocking(move || prompts::agent_prompts(&root))
            .await
            .unwrap_or_default();
        let mut all = prompts::list();
        all.extend(agents.iter().map(prompts::agent_prompt));
        if let Some(extra) = &self.extra_tools {
            all.extend(extra.prompts());
        }
        Ok(ListPromptsResult::with_all_items(all))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if let Some(answer) = self
            .extra_tools
            .as_ref()
            .and_then(|extra| extra.get_prompt(&request, &context))
        {
            return answer.map(complete_prompt);
        }
        if request.name.contains('.') {
            let root = self.gateway.root().to_owned();
            let agents = tokio::task::spawn_blocking(move || prompts::agent_prompts(&root))
                .await
                .unwrap_or_default();
            let Some(p) = agents
                .iter()
                .find(|p| p.name().eq_ignore_ascii_case(&request.name))
            else {
                let names: Vec<String> = agents.iter().map(prompts::AgentPrompt::name).collect();
                return Err(ErrorData::invalid_params(
                    format!(
                        "no prompt `{}`; agent commands here: {}",
                        request.name,
                        if names.is_empty() {
                            "(none)".to_owned()
                        } else {
                            names.join(", ")
                        }
                    ),
                    None,
                ));
            };
            return prompts::agent_get(p, request.arguments.as_ref())
                .map(|r: rmcp::model::GetPromptResult| complete_prompt(r.into()))
                .map_err(|e| ErrorData::invalid_params(e.to_string(), None));
        }
        prompts::get(&request.name, request.arguments.as_ref())
            .map(|r: rmcp::model::GetPromptResult| complete_prompt(r.into()))
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        tasks::get(self, request, &context).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::update(self, request, &context).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::cancel(self, request, &context).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        tasks_v1::handle(self, request, context).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.client
            .log_level
            .store(progress::level_rank(request.level), Ordering::Relaxed);
        Ok(())
    }
}

/// A prompt's answer marked `resultType: "complete"`, as 2026-07-28 requires
/// (rmcp takes the mark off for older clients).
fn complete_prompt(r: GetPromptResponse) -> GetPromptResponse {
    match r {
        GetPromptResponse::Complete(mut r) => {
            r.result_type
                .get_or_insert(rmcp::model::ResultType::COMPLETE);
            GetPromptResponse::Complete(r)
        }
        other => other,
    }
}

/// How `serve` ended, as a process exit code: 0 after the end of input (every
/// run finished), 130 after SIGINT, 143 after SIGTERM, 2 when the server could
/// not start.
pub type ExitCode = i32;

/// Serve MCP on this process's stdin and stdout until the input ends or a
/// signal arrives.
pub async fn serve_stdio(options: McpOptions) -> ExitCode {
    let (read, write) = rmcp::transport::stdio_pipes();
    serve(read, write, options, signal()).await
}

/// Serve MCP on `read`/`write` until the input ends or `stop` resolves to an
/// exit code.
pub async fn serve(
    read: impl AsyncRead + Send + Unpin + 'static,
    write: impl AsyncWrite + Send + Unpin + 'static,
    mut options: McpOptions,
    stop: impl Future<Output = ExitCode>,
) -> ExitCode {
    let io = Arc::new(transport::Conn::new(options.gateway.limits));
    let client = Arc::new(Client::new(io.clone(), options.heartbeat));
    options.gateway.sampling = Some(Arc::new(sampling::SamplingProvider::new(
        client.clone(),
        options.gateway.model.clone(),
    )));
    if options.gateway.key_hint.is_none() {
        options.gateway.key_hint = Some(KEY_HINT.to_owned());
    }
    let config = options.gateway.config.clone();
    tools::prepare_fixed();
    let gateway = match Gateway::new(options.gateway) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("agentfile mcp: {e}");
            return 2;
        }
    };
    if let Ok(c) = gateway.default_config()
        && let Err(e) = mrtr::configure(&c.mcp)
    {
        eprintln!("agentfile mcp: {e}");
        return 2;
    }
    // Sessions a killed process left `running` read `interrupted` from now on.
    let reaper = gateway.clone();
    let _ = tokio::task::spawn_blocking(move || reaper.reap_orphans()).await;
    gateway.resume_interrupted_tasks().await;
    let (scan, catalog) = first_scan(&gateway, config);
    let host = ToolHost::default();
    let handler = McpServer {
        gateway: gateway.clone(),
        triggers: Arc::new(crate::daemon::service::TriggerService::new(gateway.clone())),
        client,
        catalog: catalog.clone(),
        fixed_tools: true,
        extra_tools: options.extra_tools.clone(),
        host: host.clone(),
    };
    // Task status goes only to `subscriptions/listen` streams that asked.
    host.changes()
        .set_tasks(Arc::new(tasks::Feed::new(handler.clone())));
    let transport = transport::StdioTransport::new(read, write, io.clone(), host.changes().clone());
    let ct = CancellationToken::new();
    tokio::pin!(stop);
    let running = tokio::select! {
        r = handler.serve_with_ct(transport, ct.clone()) => match r {
            Ok(r) => r,
            Err(e) => {
                // Input that ended before `initialize` is a host probing us, not an error.
                if !matches!(e, rmcp::service::ServerInitializeError::ConnectionClosed(_)) {
                    eprintln!("agentfile mcp: {e}");
                }
                return 0;
            }
        },
        code = &mut stop => return code,
    };
    {
        // The scanner's changes and the extra tools' reach the client as
        // one stream of `list_changed`.
        let hub = host.changes().clone();
        tokio::spawn(
            scan.watch_with(catalog, options.poll, ct.child_token(), move || {
                hub.changed(listen::Change::Tools);
                std::future::ready(true)
            }),
        );
        let (mut changes, peer, stop) = (
            host.changes().subscribe(),
            running.peer().clone(),
            ct.child_token(),
        );
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    c = changes.recv() => match c {
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                            if peer.notify_tool_list_changed().await.is_err() {
                                return;
                            }
                        }
                        Err(_) => return,
                    },
                }
            }
        });
    }
    let mut serving = tokio::spawn(running.waiting());
    let interrupted = tokio::select! {
        _ = &mut serving => None,
        code = &mut stop => Some(code),
    };
    let code = match interrupted {
        None => {
            // The input ended and every request was answered; runs started with
            // `wait: false` still finish. A signal while they do interrupts them.
            tokio::select! {
                _ = gateway.drain() => 0,
                code = &mut stop => {
                    gateway.interrupt(INTERRUPT_GRACE).await;
                    code
                }
            }
        }
        Some(code) => {
            // Runs stop first, and the calls waiting on them answer while the
            // connection is still up; then the service loop ends.
            gateway.interrupt(INTERRUPT_GRACE).await;
            let _ = tokio::time::timeout(ANSWER_GRACE, io.idle()).await;
            io.shutdown.cancel();
            ct.cancel();
            let _ = tokio::time::timeout(Duration::from_secs(3), &mut serving).await;
            code
        }
    };
    ct.cancel();
    code
}

/// The workspace's `run_<name>` tools: the scanner and the catalog it fills.
/// The first scan runs beside the handshake, so `initialize` is not kept
/// waiting (stdio and HTTP alike).
fn first_scan(
    gateway: &Arc<Gateway>,
    config: Option<std::path::PathBuf>,
) -> (workflows::Scan, Arc<workflows::Catalog>) {
    let scan = workflows::Scan::new(
        gateway.root().to_owned(),
        config.map(|c| {
            if c.is_absolute() {
                c
            } else {
                gateway.root().join(c)
            }
        }),
        gateway.options().limits.max_source() as u64,
    );
    let catalog = Arc::new(workflows::Catalog::default());
    let (first, filled) = (scan.clone(), catalog.clone());
    tokio::spawn(async move {
        let tools = tokio::task::spawn_blocking(move || first.tools())
            .await
            .unwrap_or_default();
        filled.set(tools);
    });
    (scan, catalog)
}
