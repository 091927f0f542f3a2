//! agentfile: a headless runtime for LLM-agent workflows written as plain files.
//!
//! # Layout
//!
//! Data flows one way, and the modules follow it:
//!
//! - [`diag`]: diagnostics (`path:line:col: error: …`, caret excerpt, hint) shared by
//!   every front end, rendered as text or JSON.
//! - [`agentfile`]: the Agentfile DSL front end — lexer, parser (AST with spans),
//!   validator. Never panics, keeps going after an error.
//! - [`detect`]: which workflow format a file is (Agentfile DSL, agentrc, …).
//! - [`plan`]: the one lowered workflow plan every front end produces and the
//!   executor will run; `inspect` prints it.
//! - [`inspect`]: renders a plan as text, JSON or a Mermaid flowchart.
//! - [`discover`]: finds workflow files under a folder (`agentfile list`).
//! - [`config`]: `agent.json` / `agent.toml` plus environment overrides.
//! - [`frontend`]: the front door — read a workflow file, detect its format, run
//!   that format's front end; every command goes through it.
//! - [`executor`]: runs a plan — steps, loops, CONVERGE, goals as model/tool
//!   conversations, several agents in parallel and a synthesis, budgets,
//!   approvals, resume from the event log.
//! - [`events`]: the event bus — stamps `seq`, stores, then fans out to sinks.
//! - [`llm`]: the provider trait and its implementations on the real wire formats
//!   (Anthropic, OpenAI-compatible, Gemini), retries, cost, record/replay, and
//!   the loopback fake provider that every test above this layer uses.
//! - [`protocol`]: wire types (JSON shapes other programs read), each deriving the
//!   JSON Schema published in `protocol/`.
//!
//! - [`session`]: session stores (SQLite, files): every event persisted before any
//!   other sink sees it; the event log is what resume rebuilds a run from.
//! - [`tools`]: the built-in tools and MCP tools, behind one policy gate; the
//!   executor sees them only through the `ToolSet` trait.
//!
//! - [`run`]: the run API every transport shares — `prepare` checks everything
//!   that can fail before work starts; then the executor runs with the transport's
//!   sinks and approver.
//! - [`printer`]: the CLI's event sinks (progress on stderr, `stream-json`).
//! - [`server`]: `agentfile serve` (JSON-RPC 2.0 on stdio) and `agentfile mcp`,
//!   transports over one engine that holds a connection's runs in flight.
//! - [`telemetry`]: a run's events shipped to operators — OpenTelemetry traces
//!   and logs over OTLP, the seed's JSON messages over HTTP or to a file — from a
//!   bounded queue that never slows or fails the run; and the process's `tracing`
//!   logs on stderr.
//!
//! - `isolate`: work done in a killable child process (the program started
//!   again) under memory and CPU limits — the shell analysis and the
//!   JavaScript tools, whose engines cannot bound themselves.
//! - [`text`]: small text helpers (truncation with honest notes, durations for
//!   people, terminal-safe text).
//!
//! `src/main.rs` is only the CLI adapter over these.

pub mod agent_md;
pub mod agentfile;
pub mod agentrc;
pub mod author;
pub mod cluster;
pub mod config;
pub use frontend::detect;
pub mod diag;
pub mod discover;
pub mod events;
pub mod executor;
pub mod frontend;
pub mod inspect;
mod isolate;
pub mod llm;
pub mod plan;
pub mod printer;
pub mod protocol;
pub mod run;
pub mod schemas;
pub mod script;
pub mod server;
pub mod session;
pub mod syntax;
pub mod telemetry;
pub mod text;
pub mod tools;
pub mod workflow_md;
pub mod workflow_yaml;
