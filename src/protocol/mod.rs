//! Wire types: every JSON shape a program outside this process reads from us.
//!
//! One file per wire concept. Everything that prints or sends JSON imports these
//! types rather than building `serde_json::Value`s by hand, and each type derives
//! its JSON Schema; `protocol/*.schema.json` at the repository root holds those
//! schemas, and a test fails when they drift from the code (regenerate with
//! `UPDATE_SNAPSHOTS=1 cargo test --test protocol`).

pub mod diagnostics;
pub mod events;
pub mod openrpc;
pub mod rpc;
pub mod telemetry;
pub mod workflows;

/// Every published schema: file name under `protocol/`, and the schema.
pub fn schemas() -> Vec<(&'static str, schemars::Schema)> {
    vec![
        (
            "validate-report.schema.json",
            schemars::schema_for!(diagnostics::ValidateReport),
        ),
        ("plan.schema.json", schemars::schema_for!(crate::plan::Plan)),
        (
            "workflow-list.schema.json",
            schemars::schema_for!(workflows::WorkflowList),
        ),
        ("event.schema.json", schemars::schema_for!(events::Event)),
        (
            "run-result.schema.json",
            schemars::schema_for!(events::RunResult),
        ),
        (
            "rpc-error.schema.json",
            schemars::schema_for!(rpc::RpcError),
        ),
        (
            "run-params.schema.json",
            schemars::schema_for!(rpc::RunParams),
        ),
        (
            "run-status.schema.json",
            schemars::schema_for!(rpc::RunStatus),
        ),
        (
            "event-params.schema.json",
            schemars::schema_for!(rpc::EventParams),
        ),
        (
            "event-page.schema.json",
            schemars::schema_for!(rpc::EventPage),
        ),
        (
            "cancel-params.schema.json",
            schemars::schema_for!(rpc::CancelParams),
        ),
        (
            "approve-params.schema.json",
            schemars::schema_for!(rpc::ApproveParams),
        ),
        (
            "signal-params.schema.json",
            schemars::schema_for!(rpc::SignalParams),
        ),
        (
            "validate-params.schema.json",
            schemars::schema_for!(rpc::ValidateParams),
        ),
        (
            "inspect-params.schema.json",
            schemars::schema_for!(rpc::InspectParams),
        ),
        (
            "inspect-text.schema.json",
            schemars::schema_for!(rpc::InspectText),
        ),
        (
            "list-params.schema.json",
            schemars::schema_for!(rpc::ListParams),
        ),
        (
            "sessions-params.schema.json",
            schemars::schema_for!(rpc::SessionsParams),
        ),
        (
            "session-list.schema.json",
            schemars::schema_for!(rpc::SessionList),
        ),
        (
            "openrpc.json",
            schemars::Schema::from(openrpc::document().as_object().cloned().unwrap_or_default()),
        ),
        (
            "telemetry-message.schema.json",
            schemars::schema_for!(telemetry::TelemetryMessage),
        ),
    ]
}
