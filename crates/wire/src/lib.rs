//! Wire types: every JSON shape a program outside this process reads from us.
//!
//! One file per wire concept. Everything that prints or sends JSON imports these
//! types rather than building `serde_json::Value`s by hand, and each type derives
//! its JSON Schema; `protocol/*.schema.json` at the repository root holds those
//! schemas, and a test fails when they drift from the code (regenerate with
//! `UPDATE_SNAPSHOTS=1 cargo test --test protocol`).
//!
//! This crate depends on no other crate of the workspace (its `Cargo.toml`
//! names none, so the compiler keeps it a leaf): every crate can use the wire
//! types without a cycle. It is not where they are filled or published: the
//! builders live with their data, and the published documents built from them
//! in `agentfile_server::schemas`.

pub mod a2a;
pub mod diagnostics;
pub mod events;
pub mod exit;
pub mod rpc;
pub mod sessions;
pub mod telemetry;
pub mod workflows;
