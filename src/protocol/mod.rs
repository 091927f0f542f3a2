//! Wire types: every JSON shape a program outside this process reads from us.
//!
//! One file per wire concept. Everything that prints or sends JSON imports these
//! types rather than building `serde_json::Value`s by hand, and each type derives
//! its JSON Schema; `protocol/*.schema.json` at the repository root holds those
//! schemas, and a test fails when they drift from the code (regenerate with
//! `UPDATE_SNAPSHOTS=1 cargo test --test protocol`).

pub mod diagnostics;
pub mod events;
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
        (
            "telemetry-message.schema.json",
            schemars::schema_for!(telemetry::TelemetryMessage),
        ),
    ]
}
