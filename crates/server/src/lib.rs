//! The servers: `agentfile serve` (JSON-RPC 2.0 on stdio) and `agentfile mcp`
//! (an MCP server on stdio), two transports over one [`gateway::Gateway`]; runs
//! across machines ([`cluster`], [`worker`]); connection bounds ([`limits`]);
//! the CLI's event printers ([`printer`]); the published schemas ([`schemas`]).
//!
//! - [`engine`]: the servers' door to the run service
//!   ([`agentfile_engine::service`], which accepts, queues, executes, reads
//!   events back, cancels, approves, drains and interrupts runs): the paths
//!   a client may name, the analyses within a connection's bounds, and the
//!   cluster a `--nats` server queues on.
//! - [`jsonrpc`]: `agentfile serve` — line framing, the JSON-RPC 2.0 rules
//!   (batches, notifications, error objects), one stdout writer with
//!   backpressure, `event` notifications.
//! - [`mcp`]: `agentfile mcp` — an rmcp server handler and stdio transport:
//!   the gateway's operations as tools (plus one `run_<name>` tool per workflow
//!   in the workspace, kept current), run events as progress and log
//!   notifications, approvals by elicitation, the host's model as a provider
//!   through sampling, and the `run`/`list`/`create` prompts.
//!
//! - [`a2a`]: `agentfile a2a` — each workflow a skill of an A2A agent, its
//!   runs tasks read from the store, streamed as their events arrive.
//! - [`access`]: the one owner rule every door asks before a session is
//!   read or steered.
//!
//! Nothing here holds workflow logic: a transport decodes a request, calls the
//! gateway, and encodes the answer and the run's events in its own protocol.

pub mod a2a;
pub mod access;
pub mod auth;
pub mod cluster;
pub mod daemon;
pub mod gateway;
pub mod jsonrpc;
pub mod limits;
pub mod mcp;
pub mod printer;
pub mod schemas;
pub mod signals;
pub mod ui;
pub mod worker;
