//! WORKFLOW.md (AIP-15, `agentworkflow/v1`): front matter read as YAML 1.2,
//! checked against the published JSON Schema and the semantic rules of
//! CONTRACT §9, and lowered into the step graph.

pub mod schema;
pub mod yaml;
