//! The engine: the executor that interprets a plan's step graph ([`executor`])
//! and the run API every transport shares ([`run`]: `prepare` with the caller's
//! loader, `start`). Telemetry is a sink it attaches to a run's bus; it lives
//! beside the engine, in `agentfile-telemetry`.
//!
//! It knows no workflow format: it depends on no front end and not on the
//! registry (`tests/architecture.rs` checks), and what differs between formats
//! reaches it as typed facts on the plan. It is not a transport either: the CLI
//! and the servers choose the sinks and the approver.

pub mod executor;
pub mod run;
pub mod service;
