//! The documents published under `protocol/` at the repository root: every wire
//! type's JSON Schema and the OpenRPC document of `agentfile serve`, generated
//! from the types in [`agentfile_protocol`] (and the plan).

pub mod openrpc;

use agentfile_protocol as protocol;

/// Every published schema: file name under `protocol/`, and the schema.
pub fn published() -> Vec<(&'static str, schemars::Schema)> {
    vec![
        (
            "validate-report.schema.json",
            schemars::schema_for!(protocol::diagnostics::ValidateReport),
        ),
        (
            "plan.schema.json",
            schemars::schema_for!(agentfile_plan::Plan),
        ),
        (
            "workflow-list.schema.json",
            schemars::schema_for!(protocol::workflows::WorkflowList),
        ),
        (
            "event.schema.json",
            schemars::schema_for!(protocol::events::Event),
        ),
        (
            "run-result.schema.json",
            schemars::schema_for!(protocol::events::RunResult),
        ),
        (
            "rpc-error.schema.json",
            schemars::schema_for!(protocol::rpc::RpcError),
        ),
        (
            "run-params.schema.json",
            schemars::schema_for!(protocol::rpc::RunParams),
        ),
        (
            "run-status.schema.json",
            schemars::schema_for!(protocol::rpc::RunStatus),
        ),
        (
            "event-params.schema.json",
            schemars::schema_for!(protocol::rpc::EventParams),
        ),
        (
            "event-page.schema.json",
            schemars::schema_for!(protocol::rpc::EventPage),
        ),
        (
            "cancel-params.schema.json",
            schemars::schema_for!(protocol::rpc::CancelParams),
        ),
        (
            "approve-params.schema.json",
            schemars::schema_for!(protocol::rpc::ApproveParams),
        ),
        (
            "signal-params.schema.json",
            schemars::schema_for!(protocol::rpc::SignalParams),
        ),
        (
            "validate-params.schema.json",
            schemars::schema_for!(protocol::rpc::ValidateParams),
        ),
        (
            "inspect-params.schema.json",
            schemars::schema_for!(protocol::rpc::InspectParams),
        ),
        (
            "inspect-text.schema.json",
            schemars::schema_for!(protocol::rpc::InspectText),
        ),
        (
            "list-params.schema.json",
            schemars::schema_for!(protocol::rpc::ListParams),
        ),
        (
            "sessions-params.schema.json",
            schemars::schema_for!(protocol::rpc::SessionsParams),
        ),
        (
            "session-list.schema.json",
            schemars::schema_for!(protocol::rpc::SessionList),
        ),
        (
            "openrpc.json",
            schemars::Schema::from(openrpc::document().as_object().cloned().unwrap_or_default()),
        ),
        (
            "telemetry-message.schema.json",
            schemars::schema_for!(protocol::telemetry::TelemetryMessage),
        ),
    ]
}
