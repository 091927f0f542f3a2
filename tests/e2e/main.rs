//! The end-to-end suite: one test binary (`cargo test --test e2e`) for
//! everything that starts the built `agentfile` (or drives the whole stack
//! through the engine), so the suite links once instead of once per file.
//! Each module was a test binary of its own; its tests keep their names under
//! the module's (`cargo test --test e2e serve::` runs the `serve` suite).
//!
//! [`support`] is what the suites share: the binary, scratch folders, the
//! fake model, configs pointing at it, the session stores and the throwaway
//! PostgreSQL cluster, the provider scenarios.
//!
//! The suites now run in one process, in parallel threads: a suite that
//! needs something process-wide (a port, a folder, a lock) takes its own
//! (`support::tmp_dir` names each folder apart), and a test that runs one
//! test of this binary again in a child names it by its module path
//! ([`support::test_name`]).
//!
//! Suites that test one crate live in that crate (`crates/*/tests`), and run
//! with `cargo test -p <crate>`; `tests/architecture.rs` and `tests/mcp.rs`
//! (its own `main`: the same binary also plays the MCP server it starts) stay
//! binaries of their own.

mod support;

mod a2a;
mod a2a_tool;
mod agent_md;
mod agentrc;
mod cli;
mod cluster;
mod control_files;
mod crash;
mod daemon;
mod daemon_nats;
mod demo;
mod docs;
mod examples;
mod executor;
mod fake_model;
mod first_use;
mod fixtures;
mod fork;
mod graph;
mod graph_crash;
mod hardening;
mod llm_fake_binary;
mod mcp_conformance;
mod mcp_http;
mod mcp_python;
mod mcp_replicas;
mod mcp_server;
mod mcp_tasks;
mod mcp_tasks_v1;
mod mcp_typescript;
mod outputs;
mod package;
mod protocol;
mod replay;
mod replicas;
mod run;
mod sandbox;
mod secrets;
mod serve;
mod server_limits;
mod service;
mod telemetry;
mod test_cmd;
mod triggers_rpc;
mod ui;
mod workflow_md;
mod workflow_yaml;
