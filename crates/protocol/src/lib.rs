//! Wire types: every JSON shape a program outside this process reads from us.
//!
//! One file per wire concept. Everything that prints or sends JSON imports these
//! types rather than building `serde_json::Value`s by hand, and each type derives
//! its JSON Schema; `protocol/*.schema.json` at the repository root holds those
//! schemas, and a test fails when they drift from the code (regenerate with
//! `UPDATE_SNAPSHOTS=1 cargo test --test protocol`).
//!
//! This module depends on nothing else in the crate (`tests/protocol.rs`
//! checks), so every part can use the wire types without a cycle; the
//! published documents built from them live in [`agentfile_server::schemas`].

pub mod diagnostics;
pub mod events;
pub mod exit;
pub mod rpc;
pub mod sessions;
pub mod telemetry;
pub mod workflows;
