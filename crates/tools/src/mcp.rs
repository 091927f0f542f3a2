//! Tools from MCP servers (`mcp.servers` in the config), through rmcp's client.
//!
//! Every configured server the policy could allow anything of is started in the
//! background when the toolbox is built, all at once; nothing waits for them
//! unless it needs their tools. [`McpHub::wait_ready`] waits (up to a deadline)
//! for the listings the first model call should see; a call to a tool of a
//! server still starting waits for it, within the call timeout. Servers that
//! the policy denies entirely are never started.
//!
//! A server's tools are offered as `mcp_<server>_<tool>` (sanitised to
//! `[a-zA-Z0-9_-]`, at most 64 characters, shortened with a hash when longer)
//! with the server's own input schema. A server that fails to start is kept as a
//! warning ([`McpHub::warnings`]) and its tools are simply absent; one that
//! crashes, hangs or answers garbage makes the call a tool error, never a stuck
//! run: calls have a timeout and observe the run's cancellation.
//!
//! Each server runs in a supervisor task that owns its rmcp service and child
//! process; dropping the hub (or [`McpHub::shutdown`]) stops them all, and the
//! child is killed.
//!
//! Servers get the runtime's environment minus its secrets (anything shaped
//! like a secret and the configured key variables: [`Secrets::server_env`],
//! the predicate bash and `env()` use too), plus the `env` the config gives them (the one
//! way to hand a server its own token).
//!
//! A server is either a command spoken to over stdio (`command`, `args`, `env`)
//! or a streamable-HTTP endpoint (`url`), through rmcp's reqwest client. The
//! URL comes from the operator's config, not the model, so it is not subject to
//! web_fetch's address rules.
//!
//! What this is not: an MCP host for resources, prompts or sampling.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, JsonObject};
use rmcp::service::{ClientInitializeError, Peer, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::ToolOutput;
use crate::confine::ToolSandbox;
use crate::policy::Gate;
use crate::secrets::Secrets;
use agentfile_config::McpServer;
use agentfile_llm::ToolDef;

/// Bytes of a server's stderr kept to explain a failure.
const STDERR_TAIL: usize = 2048;

/// One tool of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    pub server: String,
    /// The tool's own name, as the server knows it.
    pub name: String,
    /// `mcp_<server>_<tool>`, as the model calls it.
    pub exposed: String,
    pub description: String,
    pub schema: Value,
}

#[derive(Clone)]
enum State {
    Starting,
    Ready {
        peer: Peer<RoleClient>,
        tools: Arc<Vec<McpTool>>,
    },
    Failed(String),
}

struct Server {
    name: String,
    state: watch::Receiver<State>,
    stderr: Arc<Mutex<String>>,
}

/// The MCP servers of one toolbox.
pub struct McpHub {
    servers: Vec<Server>,
    /// A server that dies after it was ready is said here (an `error` event
    /// of the run that uses the hub).
    notices: agentfile_session::events::Notices,
    shutdown: CancellationToken,
    call_timeout: Duration,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field(
                "servers",
                &self.servers.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The name a tool is offered under (the rule lives in the plan crate, so a
/// front end can name an MCP tool without a client).
pub use agentfile_plan::tool::exposed_name;

/// What a client of ours tells servers about itself.
#[derive(Clone, Default)]
struct Client;

impl ClientHandler for Client {}

impl McpHub {
    /// Start every server the policy could allow something of, in the
    /// background. Must be called inside a tokio runtime.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        servers: &BTreeMap<String, McpServer>,
        gate: &Gate,
        workspace: &Path,
        environment: &[(String, String)],
        secrets: &Secrets,
        start_timeout: Duration,
        call_timeout: Duration,
        sandbox: Option<Arc<ToolSandbox>>,
    ) -> McpHub {
        let shutdown = CancellationToken::new();
        let notices = agentfile_session::events::Notices::default();
        let mut out = Vec::new();
        for (name, cfg) in servers {
            if !gate.mcp_server_possible(name) {
                continue;
            }
            let (tx, rx) = watch::channel(State::Starting);
            let stderr = Arc::new(Mutex::new(String::new()));
            tokio::spawn(supervise(
                name.clone(),
                cfg.clone(),
                workspace.to_path_buf(),
                secrets.server_env(environment),
                start_timeout,
                tx,
                stderr.clone(),
                shutdown.child_token(),
                notices.clone(),
                sandbox.clone(),
            ));
            out.push(Server {
                name: name.clone(),
                state: rx,
                stderr,
            });
        }
        McpHub {
            servers: out,
            notices,
            shutdown,
            call_timeout,
        }
    }

    /// Where the hub says a server died mid-run.
    pub fn notices(&self) -> agentfile_session::events::Notices {
        self.notices.clone()
    }

    /// Whether any server was started.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Wait until every server has listed its tools or failed, or `deadline`
    /// passes, whichever is first.
    pub async fn wait_ready(&self, deadline: Duration) {
        let all = futures::future::join_all(self.servers.iter().map(|s| {
            let mut rx = s.state.clone();
            async move {
                let _ = rx.wait_for(|st| !matches!(st, State::Starting)).await;
            }
        }));
        let _ = tokio::time::timeout(deadline, all).await;
    }

    /// The tools ready now, in server order.
    pub fn tools(&self) -> Vec<McpTool> {
        let mut out = Vec::new();
        for s in &self.servers {
            if let State::Ready { tools, .. } = &*s.state.borrow() {
                out.extend(tools.iter().cloned());
            }
        }
        out
    }

    /// Tool definitions for the tools ready now, as the model sees them.
    pub fn definitions(&self, allowed: impl Fn(&McpTool) -> bool) -> Vec<ToolDef> {
        self.tools()
            .into_iter()
            .filter(|t| allowed(t))
            .map(|t| ToolDef {
                name: t.exposed.clone(),
                description: if t.description.is_empty() {
                    format!("Tool `{}` of the MCP server `{}`.", t.name, t.server)
                } else {
                    t.description.clone()
                },
                parameters: t.schema.clone(),
            })
            .collect()
    }

    /// Problems starting servers, for the caller to show as warnings.
    pub fn warnings(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter_map(|s| match &*s.state.borrow() {
                State::Failed(why) => Some(format!("MCP server `{}`: {why}", s.name)),
                _ => None,
            })
            .collect()
    }

    /// Which server and tool an exposed name means, waiting (within the call
    /// timeout) for servers still starting. `None`: not an MCP tool.
    pub async fn lookup(&self, exposed: &str, cancel: &CancellationToken) -> Option<McpTool> {
        if let Some(t) = self.tools().into_iter().find(|t| t.exposed == exposed) {
            return Some(t);
        }
        if !exposed.starts_with("mcp_") {
            return None;
        }
        let starting: Vec<&Server> = self
            .servers
            .iter()
            .filter(|s| matches!(&*s.state.borrow(), State::Starting))
            .collect();
        if starting.is_empty() {
            return None;
        }
        tokio::select! {
            _ = self.wait_ready(self.call_timeout) => {}
            _ = cancel.cancelled() => return None,
        }
        self.tools().into_iter().find(|t| t.exposed == exposed)
    }

    /// Call a tool (already allowed by the gate).
    pub async fn call(
        &self,
        tool: &McpTool,
        args: Value,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let Some(server) = self.servers.iter().find(|s| s.name == tool.server) else {
            return ToolOutput::error(format!("MCP server `{}` is not configured", tool.server));
        };
        let peer = match &*server.state.borrow() {
            State::Ready { peer, .. } => peer.clone(),
            State::Failed(why) => {
                return ToolOutput::error(format!(
                    "MCP server `{}` is not running: {why}",
                    server.name
                ));
            }
            State::Starting => {
                return ToolOutput::error(format!(
                    "MCP server `{}` is still starting",
                    server.name
                ));
            }
        };
        let arguments: JsonObject = match args {
            Value::Object(m) => m,
            Value::Null => JsonObject::new(),
            other => {
                return ToolOutput::error(format!(
                    "arguments for `{}` must be an object, not {other}",
                    tool.exposed
                ));
            }
        };
        let mut params = CallToolRequestParams::new(tool.name.clone());
        params.arguments = Some(arguments);
        let call = peer.call_tool_once(params);
        let result = tokio::select! {
            r = tokio::time::timeout(self.call_timeout, call) => r,
            _ = cancel.cancelled() => return ToolOutput::error("cancelled"),
        };
        let tail = || {
            let t = server
                .stderr
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if t.trim().is_empty() {
                String::new()
            } else {
                format!("\nserver stderr (last lines):\n{}", t.trim_end())
            }
        };
        match result {
            Err(_) => ToolOutput::error(format!(
                "MCP server `{}` did not answer `{}` within {} s",
                server.name,
                tool.name,
                self.call_timeout.as_secs()
            )),
            Ok(Err(e)) => ToolOutput::error(format!(
                "MCP server `{}` failed on `{}`: {e}{}",
                server.name,
                tool.name,
                tail()
            )),
            Ok(Ok(CallToolResponse::Complete(r))) => {
                let content = render_blocks(
                    &serde_json::to_value(&r.content).unwrap_or(Value::Null),
                    r.structured_content.as_ref(),
                );
                ToolOutput {
                    content,
                    is_error: r.is_error.unwrap_or(false),
                    command: None,
                }
            }
            Ok(Ok(_)) => ToolOutput::error(format!(
                "MCP server `{}` asked for more input or started a task for `{}`; that is not supported",
                server.name, tool.name
            )),
        }
    }

    /// Stop every server now.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }
}

/// Record why a server is unusable (the toolbox shows it as a warning event).
fn fail(state: &watch::Sender<State>, server: &str, why: String) {
    tracing::info!(server, reason = %why, "MCP server unavailable");
    let _ = state.send(State::Failed(why));
}

#[allow(clippy::too_many_arguments)]
async fn supervise(
    name: String,
    cfg: McpServer,
    workspace: std::path::PathBuf,
    env: Vec<(String, String)>,
    start_timeout: Duration,
    state: watch::Sender<State>,
    stderr_tail: Arc<Mutex<String>>,
    shutdown: CancellationToken,
    notices: agentfile_session::events::Notices,
    sandbox: Option<Arc<ToolSandbox>>,
) {
    let url = cfg.url.as_deref().map(str::trim).filter(|u| !u.is_empty());
    // The proxy and forwarders of a sandboxed server serve it while this
    // function supervises it.
    let mut _jail = None;
    tracing::debug!(server = %name, command = %cfg.command, "starting MCP server");
    let serving: futures::future::BoxFuture<
        '_,
        Result<RunningService<RoleClient, Client>, ClientInitializeError>,
    > = match url {
        Some(url) => {
            agentfile_llm::install_tls();
            Box::pin(Client.serve(StreamableHttpClientTransport::from_uri(url.to_owned())))
        }
        None => match spawn(&cfg, &workspace, env, sandbox.as_deref(), &stderr_tail) {
            Ok((transport, jail)) => {
                _jail = jail;
                Box::pin(Client.serve(transport))
            }
            Err(why) => {
                fail(&state, &name, why.to_string());
                return;
            }
        },
    };
    let failed = |why: String| {
        let t = stderr_tail
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if t.trim().is_empty() {
            why
        } else {
            format!("{why}; stderr: {}", t.trim_end())
        }
    };
    let started = tokio::select! {
        r = tokio::time::timeout(start_timeout, serving) => r,
        _ = shutdown.cancelled() => return,
    };
    let service = match started {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            fail(&state, &name, failed(format!("initialisation failed: {e}")));
            return;
        }
        Err(_) => {
            fail(
                &state,
                &name,
                failed(format!(
                    "did not initialise within {} s",
                    start_timeout.as_secs()
                )),
            );
            return;
        }
    };
    let peer = service.peer().clone();
    let listed = tokio::select! {
        r = tokio::time::timeout(start_timeout, peer.list_all_tools()) => r,
        _ = shutdown.cancelled() => return,
    };
    let tools = match listed {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            fail(&state, &name, failed(format!("listing tools failed: {e}")));
            return;
        }
        Err(_) => {
            fail(
                &state,
                &name,
                failed(format!(
                    "did not list its tools within {} s",
                    start_timeout.as_secs()
                )),
            );
            return;
        }
    };
    let tools = listed_tools(&name, tools);
    tracing::info!(server = %name, tools = tools.len(), "MCP server ready");
    let _ = state.send(State::Ready {
        peer,
        tools: Arc::new(tools),
    });
    let stop = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        _ = &mut waiting => {
            let why = failed("the server exited".to_owned());
            notices.push(format!(
                "MCP server `{name}` stopped during the run ({why}); its tools fail from now on"
            ));
            fail(&state, &name, why);
        }
        _ = shutdown.cancelled() => {
            stop.cancel();
            let _ = waiting.await;
        }
    }
}

/// Why a server's command could not start: the reason its state shows.
#[derive(Debug, thiserror::Error)]
enum SpawnError {
    #[error("neither `command` nor `url` is configured")]
    NoCommand,
    #[error("not started: {0}")]
    Refused(String),
    #[error("cannot prepare the sandbox: {0}")]
    Sandbox(std::io::Error),
    #[error("cannot start `{command}`: {error}")]
    Start {
        command: String,
        error: std::io::Error,
    },
    #[error("cannot start it in the sandbox: {0}")]
    Jail(std::io::Error),
}

/// Start a server's command, in the sandbox when there is one, its stderr
/// kept in `stderr_tail`: the transport to it and the jail that must live as
/// long as it does.
fn spawn(
    cfg: &McpServer,
    workspace: &Path,
    env: Vec<(String, String)>,
    sandbox: Option<&ToolSandbox>,
    stderr_tail: &Arc<Mutex<String>>,
) -> Result<(TokioChildProcess, Option<crate::confine::Jail>), SpawnError> {
    if cfg.command.trim().is_empty() {
        return Err(SpawnError::NoCommand);
    }
    let mut jail = None;
    let mut cmd = tokio::process::Command::new(&cfg.command);
    cmd.args(&cfg.args)
        .current_dir(workspace)
        .env_clear()
        .envs(env)
        .envs(&cfg.env)
        .kill_on_drop(true);
    if let Some(sb) = sandbox {
        if let Err(d) = sb.admit("mcp") {
            return Err(SpawnError::Refused(d.reason));
        }
        match sb.enter(&mut cmd) {
            Ok(j) => jail = j,
            Err(e) => return Err(SpawnError::Sandbox(e)),
        }
    }
    let spawned = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn();
    let (transport, stderr) = match spawned {
        Ok(t) => t,
        Err(error) => {
            return Err(SpawnError::Start {
                command: cfg.command.clone(),
                error,
            });
        }
    };
    if let Some(j) = &mut jail
        && let Err(e) = j.started()
    {
        return Err(SpawnError::Jail(e));
    }
    if let Some(err) = stderr {
        tokio::spawn(keep_tail(err, stderr_tail.clone()));
    }
    Ok((transport, jail))
}

/// A server's tools as the toolbox names them.
fn listed_tools(server: &str, tools: Vec<rmcp::model::Tool>) -> Vec<McpTool> {
    tools
        .into_iter()
        .map(|t| {
            let tool_name = t.name.to_string();
            McpTool {
                exposed: exposed_name(server, &tool_name),
                server: server.to_owned(),
                name: tool_name,
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                schema: Value::Object((*t.input_schema).clone()),
            }
        })
        .collect()
}

/// Keep the last [`STDERR_TAIL`] bytes of a server's stderr, to explain failures.
async fn keep_tail(err: tokio::process::ChildStderr, tail: Arc<Mutex<String>>) {
    let mut lines = tokio::io::BufReader::new(err).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
        t.push_str(&line);
        t.push('\n');
        if t.len() > STDERR_TAIL {
            let mut cut = t.len() - STDERR_TAIL;
            while !t.is_char_boundary(cut) {
                cut += 1;
            }
            t.drain(..cut);
        }
    }
}

/// MCP content blocks as text for the model.
fn render_blocks(content: &Value, structured: Option<&Value>) -> String {
    let mut parts = Vec::new();
    for block in content.as_array().into_iter().flatten() {
        let ty = block.get("type").and_then(Value::as_str).unwrap_or("");
        let part = match ty {
            "text" => block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            "image" | "audio" => format!(
                "[{ty}: {}, {} bytes of base64]",
                block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown type"),
                block
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, str::len)
            ),
            "resource" => {
                let r = block.get("resource").cloned().unwrap_or(Value::Null);
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => t.to_owned(),
                    None => format!(
                        "[resource {}]",
                        r.get("uri").and_then(Value::as_str).unwrap_or("")
                    ),
                }
            }
            "resource_link" => format!(
                "[resource link {}]",
                block.get("uri").and_then(Value::as_str).unwrap_or("")
            ),
            _ => block.to_string(),
        };
        parts.push(part);
    }
    if parts.is_empty()
        && let Some(s) = structured
    {
        parts.push(s.to_string());
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_render() {
        let v = serde_json::json!([
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///x", "text": "body"}}
        ]);
        assert_eq!(
            render_blocks(&v, None),
            "hello\n[image: image/png, 4 bytes of base64]\nbody"
        );
        assert_eq!(
            render_blocks(&serde_json::json!([]), Some(&serde_json::json!({"a": 1}))),
            "{\"a\":1}"
        );
    }
}
