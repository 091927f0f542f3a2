//! `agentfile list --format json`: the workflows found under a folder.

use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkflowList {
    pub schema_version: u32,
    pub root: String,
    pub workflows: Vec<WorkflowEntry>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkflowEntry {
    /// The workflow's NAME (or the file's folder name when it has none).
    pub name: String,
    pub path: String,
    /// `agentfile`, `agentrc`, `workflow-yaml` or `workflow-md`.
    pub dialect: String,
    /// What it does, in its author's words (WORKFLOW.md and workflow.yaml).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub inputs: Vec<WorkflowInput>,
    /// True when it validates without errors.
    pub valid: bool,
    /// Number of errors when it does not.
    pub errors: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkflowInput {
    pub name: String,
    pub default: Option<String>,
    pub required: bool,
}
