//! agentfile: a headless runtime for LLM-agent workflows written as plain files.
//!
//! This crate is the `agentfile` binary's library face: it re-exports the
//! workspace's crates under the names programs and tests use
//! (`agentfile::plan`, `agentfile::run`, …). The code lives in `crates/`,
//! one crate per layer, and their dependency graph is the architecture
//! (ARCHITECTURE.md):
//!
//! - [`wire`] (`agentfile-wire`): wire types, a leaf.
//! - [`config`], [`text`] (`agentfile-config`): configuration, text for people.
//! - [`plan`], [`diag`] (`agentfile-plan`): the plan every front end lowers
//!   into, expressions, templates, diagnostics, schema checks of values.
//! - [`llm`] (`agentfile-llm`): model providers on their real wire formats.
//! - [`session`], [`events`] (`agentfile-session`): session stores and the
//!   event bus that writes every event before any sink sees it.
//! - [`tools`], [`script`] (`agentfile-tools`): tools behind the policy
//!   gate, the JavaScript sandbox, worker processes.
//! - [`syntax`] (`agentfile-syntax`): what every front end shares (YAML
//!   with spans, schema wording).
//! - [`agent_card`] (`agentfile-agent-card`): agent files (`*.agent.md`),
//!   the card reader the DSL, WORKFLOW.md, workflow.yaml and `agent_md` share.
//! - The front ends, one crate per format, none importing another:
//!   [`agentfile`](mod@agentfile) (`agentfile-dsl`), [`workflow_md`],
//!   [`workflow_yaml`], [`agent_md`], [`agentrc`].
//! - [`frontend`], [`detect`], [`discover`], [`inspect`]
//!   (`agentfile-frontend`): the registry of formats and what sits above
//!   them.
//! - [`author`] (`agentfile-author`): the workflow generator (`create`,
//!   `promote`), above the registry.
//! - [`executor`], [`run`] (`agentfile-engine`): the engine, which knows no
//!   format.
//! - [`telemetry`] (`agentfile-telemetry`): events to OTLP, HTTP or a file,
//!   and the process's logs; beside the engine, which attaches it to a run.
//! - [`testing`] (`agentfile-testing`): test files for workflows
//!   (`*.test.yaml`): read with diagnostics, a finished run checked against
//!   their expectations, the cases reported; it runs nothing itself.
//! - [`server`], [`cluster`], [`printer`], [`schemas`]
//!   (`agentfile-server`): JSON-RPC, MCP, NATS workers, the CLI's printers.
//!
//! `src/main.rs` is only the CLI adapter over these.

pub use agentfile_agent_card as agent_card;
pub use agentfile_agent_md as agent_md;
pub use agentfile_agentrc as agentrc;
pub use agentfile_author as author;
pub use agentfile_config as config;
pub use agentfile_config::text;
pub use agentfile_dsl as agentfile;
pub use agentfile_engine::{executor, run, service};
pub use agentfile_frontend as frontend;
pub use agentfile_frontend::{detect, discover, inspect};
pub use agentfile_llm as llm;
pub use agentfile_package as package;
pub use agentfile_plan as plan;
pub use agentfile_plan::diag;
pub use agentfile_server as server;
pub use agentfile_server::{cluster, printer, schemas};
pub use agentfile_session as session;
pub use agentfile_session::events;
pub use agentfile_syntax as syntax;
pub use agentfile_telemetry as telemetry;
pub use agentfile_testing as testing;
pub use agentfile_tools as tools;
pub use agentfile_tools::script;
pub use agentfile_wire as wire;
pub use agentfile_workflow_md as workflow_md;
pub use agentfile_workflow_yaml as workflow_yaml;
