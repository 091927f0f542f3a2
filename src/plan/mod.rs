//! The plan: one workflow, lowered, resolved and ready to run.
//!
//! Every front end (the Agentfile DSL today; workflow.yaml and WORKFLOW.md later)
//! produces this one type, and the executor runs only this type. A plan is only
//! ever built from a workflow that validated without errors, so it holds no
//! dangling names: every agent a goal uses, every goal a step runs exists, and
//! every prompt file has already been read.
//!
//! It is also a wire type: `agentfile inspect --format json` prints it, and its
//! JSON Schema lives in `protocol/plan.schema.json`.

use schemars::JsonSchema;
use serde::Serialize;

pub use crate::agentfile::ast::Supervision;

/// Version of the plan's JSON shape; bumped on any incompatible change.
pub const PLAN_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Plan {
    pub schema_version: u32,
    /// The workflow's NAME.
    pub name: String,
    /// Which front end produced it (`agentfile`).
    pub format: String,
    /// The workflow file, as given.
    pub path: String,
    pub inputs: Vec<InputDef>,
    pub agents: Vec<AgentDef>,
    pub goals: Vec<GoalDef>,
    /// Steps in execution order.
    pub steps: Vec<StepDef>,
    /// `SECURITY mode`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct InputDef {
    pub name: String,
    /// `None`: the input is required.
    pub default: Option<String>,
    pub required: bool,
}

/// Where a prompt's text came from.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PromptSource {
    /// Written in the workflow file itself.
    Inline,
    /// A `.md`/`.txt` file.
    File { path: String },
    /// A skill folder holding `SKILL.md`.
    Skill {
        path: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct AgentDef {
    pub name: String,
    pub source: PromptSource,
    /// The persona (system prompt) template; `$variables` are not yet filled in.
    pub prompt: String,
    /// `REQUIRES "profile"`: the config profile that picks this agent's model.
    pub profile: Option<String>,
    pub outputs: Vec<String>,
    /// Variables the prompt reads.
    pub reads: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GoalKind {
    Goal,
    Converge,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct GoalDef {
    pub name: String,
    pub kind: GoalKind,
    /// The outcome template; `$variables` are not yet filled in.
    pub outcome: String,
    /// The outcome's first non-empty line, for display.
    pub summary: String,
    pub source: PromptSource,
    /// Agents that work this goal in parallel before a synthesis (empty: one
    /// conversation with no persona).
    pub agents: Vec<String>,
    /// Structured output fields (`-> a, b`); each becomes `$a`, `$b`.
    pub outputs: Vec<String>,
    /// Variables the outcome and its agents' prompts read, in order.
    pub reads: Vec<String>,
    /// CONVERGE's iteration limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within: Option<Limit>,
    /// Whether a human (or a supervisor) must approve before this goal runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervision: Option<Supervision>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Run,
    Loop,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct StepDef {
    pub name: String,
    pub kind: StepKind,
    /// Goals run in this order (per iteration, for a loop).
    pub goals: Vec<String>,
    /// LOOP's iteration limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within: Option<Limit>,
}

/// An iteration limit, fixed or bound to an input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Limit {
    Count {
        count: u32,
    },
    Input {
        /// The input that sets the limit at run time.
        input: String,
        /// That input's default, when it has one.
        default: Option<u32>,
    },
}

impl Plan {
    pub fn goal(&self, name: &str) -> Option<&GoalDef> {
        self.goals.iter().find(|g| g.name == name)
    }

    pub fn agent(&self, name: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.name == name)
    }
}
