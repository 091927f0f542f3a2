//! The plan: one workflow, lowered, resolved and ready to run — with what
//! builds and checks it: the step graph ([`graph`]), expressions ([`expr`]),
//! `$name` templates ([`template`]), scope checks ([`scope`]), the builder
//! ([`build`]), diagnostics ([`diag`]), schema checks of values ([`values`])
//! and the names of tools ([`tool`]: the built-in tools with their argument
//! schemas, and the name an MCP tool is offered under).
//! Not a reader of any file format and not an executor: it depends only on
//! the wire types and the config.
//!
//! Every front end (the Agentfile DSL, WORKFLOW.md, workflow.yaml, agent files
//! and agentrc Agentfiles) produces this one type, and the engine runs only this
//! type; what differs between formats is a typed fact on the plan ([`RunRoot`],
//! `protected`, `files`, [`Unmapped`], `output_names`), never a format name to
//! branch on. A plan is only
//! ever built from a workflow that validated without errors, so it holds no
//! dangling names: every agent a goal uses, every goal a step runs exists, and
//! every prompt file has already been read.
//!
//! It is also a wire type: `agentfile inspect --format json` prints it, and its
//! JSON Schema lives in `protocol/plan.schema.json`.

pub mod agent;
pub mod build;
pub mod canonical;
pub mod declared;
pub mod diag;
pub mod expr;
pub mod graph;
pub mod scope;
pub mod shell;
pub mod template;
pub mod tool;
pub mod trigger;
pub mod values;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use build::{StepBuilder, WorkflowBuilder, define_step, define_workflow};
pub use graph::{
    ApprovalClass, ApprovalNode, Arm, Backoff, GoalNode, LoopUntil, Next, Node, NodeKind,
    OnTimeout, Retry,
};

/// Version of the plan's JSON shape; bumped on any incompatible change.
/// 2: the step graph (`graph`, `fingerprint`).
pub const PLAN_SCHEMA_VERSION: u32 = 2;

/// How a goal is supervised (the DSL's SUPERVISED / SUPERVISED HUMAN /
/// UNSUPERVISED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Supervision {
    Supervised,
    SupervisedHuman,
    Unsupervised,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    pub schema_version: u32,
    /// The workflow's NAME.
    pub name: String,
    /// The workflow's id, when its format has one (WORKFLOW.md's `id`): the
    /// MCP server offers it as `run_<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What the workflow does, in its author's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The workflow's own version, when its format has one (WORKFLOW.md's
    /// and workflow.yaml's `version`, agentrc's `IDENTITY version=`): what
    /// a package's config says. Not part of the fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Which front end produced it (`agentfile`).
    pub format: String,
    /// The workflow file, as given.
    pub path: String,
    pub inputs: Vec<InputDef>,
    pub agents: Vec<AgentDef>,
    pub goals: Vec<GoalDef>,
    /// The Agentfile DSL's steps in execution order (empty for other
    /// formats); the executor runs `graph`, which they lowered into.
    #[serde(default)]
    pub steps: Vec<StepDef>,
    /// `SECURITY mode`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<String>,
    /// The step graph the executor runs.
    pub graph: Node,
    /// Wall-clock limit of the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Most nodes one run may start (a defence against runaway graphs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// JSON Schema the run's inputs must satisfy (WORKFLOW.md's `inputs`);
    /// `--input` values are read as the types it declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<serde_json::Value>,
    /// JSON Schema of the run's outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// The run's outputs, when the format maps them (else every node's
    /// `publish`ed output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<expr::ValueExpr>,
    /// A digest of everything that decides what the run does (see
    /// [`Plan::compute_fingerprint`]); a session remembers it so a resume
    /// against a changed workflow is refused.
    #[serde(default)]
    pub fingerprint: String,
    /// Workspace files staged into the run's scratch folder before the first
    /// step and synced back after success (AIP-16's file contract).
    #[serde(default, skip_serializing_if = "FileContract::is_empty")]
    pub files: FileContract,
    /// workflow.yaml's `execution.preferred` (`ide` or `cli`): reported by
    /// `inspect`; agentfile always runs the steps itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    /// Folders (relative to the run's root, `/`-terminated) that no tool
    /// call of the run may write: a workflow.yaml's `scripts/`, whose
    /// declared scripts run without the bash allowlist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<String>,
    /// Where the run's relative paths (files, shell steps, `protected`)
    /// start.
    #[serde(default, skip_serializing_if = "RunRoot::is_workspace")]
    pub root: RunRoot,
    /// Output names in the order the workflow's author wrote them, where
    /// the plan's own structures keep no order (a WORKFLOW.md `result`'s
    /// keys); [`Plan::output_order`] shows them after the `outputs`
    /// schema's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_names: Vec<String>,
    /// What the run's result is when `result` does not map it.
    #[serde(default, skip_serializing_if = "Unmapped::is_published")]
    pub unmapped: Unmapped,
    /// An agentrc Agentfile's parse tree and grants (CONTRACT §12).
    // Named for what it is, a declaration, wherever code reads it; its JSON
    // key (`inspect`, the published schema) stays as it was.
    #[serde(rename = "agentrc", default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<Box<declared::Declaration>>,
    /// What starts the workflow besides a command (CONTRACT §15): a
    /// WORKFLOW.md's `triggers:` then its `routines:`, a workflow.yaml's
    /// schedule trigger. Not part of the fingerprint: a changed schedule
    /// does not change what a run does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<trigger::TriggerDecl>,
    /// The OCI package the workflow was read from (CONTRACT §20), set by
    /// the front door that resolved it. Not part of the fingerprint: the
    /// files it holds are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<agentfile_wire::events::PackageRef>,
}

/// How a workflow file is read, whatever its format: one set of options for
/// every subcommand (`validate`, `inspect`, `run`) and every transport (CLI,
/// JSON-RPC, MCP). A format takes what applies to it; the engine only carries
/// them (a run's stored settings keep them for a resume).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReadOptions {
    /// `--lenient`: what a runtime can still interpret is a warning, not an
    /// error (workflow.yaml files in the wild).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lenient: bool,
    /// agentrc `--profile core`: only the core profile, plus `extensions`
    /// (the default accepts every profile agentfile reads).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub core_only: bool,
    /// agentrc's optional profiles accepted under `core_only`
    /// (`--extensions`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// Where a run's relative paths start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunRoot {
    /// The workspace.
    #[default]
    Workspace,
    /// The workflow file's own folder, unless the caller passes another in
    /// the reserved input `input` (as `create` does). The run's workspace,
    /// when none is chosen, is the project holding that folder: the parent
    /// of a `workflows/` folder it sits in, else the folder itself.
    WorkflowFolder { input: String },
}

impl RunRoot {
    pub fn is_workspace(&self) -> bool {
        matches!(self, RunRoot::Workspace)
    }

    /// The reserved input that names the root, if any.
    pub fn input(&self) -> Option<&str> {
        match self {
            RunRoot::Workspace => None,
            RunRoot::WorkflowFolder { input } => Some(input),
        }
    }
}

/// The project a workflow folder belongs to: the parent of the `workflows/`
/// folder it sits in, else the folder itself.
pub fn project_of_folder(workflow_dir: &std::path::Path) -> std::path::PathBuf {
    match workflow_dir.parent() {
        Some(p) if p.file_name().is_some_and(|n| n == "workflows") => p
            .parent()
            .map_or_else(|| workflow_dir.to_path_buf(), std::path::Path::to_path_buf),
        _ => workflow_dir.to_path_buf(),
    }
}

/// A run's result when the plan's `result` does not map it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unmapped {
    /// Every node's `publish`ed output, by name.
    #[default]
    Published,
    /// The value of the last step that ran (a WORKFLOW.md without `result`).
    LastStep,
}

impl Unmapped {
    pub fn is_published(&self) -> bool {
        matches!(self, Unmapped::Published)
    }
}

/// The input a run with a file contract is given: its scratch folder.
pub const FS_ROOT_INPUT: &str = "_workflowFsRoot";

/// AIP-16's file contract: files keyed by the name they have in the run's
/// scratch folder (`.agentfile/runs/<session>/fs/<key>`, given to steps as
/// the input `_workflowFsRoot`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileContract {
    /// `inputsFiles`: copied from the workspace before the first step.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, FileEntry>,
    /// `outputsFiles`: copied to the workspace after the run succeeds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, FileEntry>,
}

impl FileContract {
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty() && self.outputs.is_empty()
    }
}

/// One declared file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileEntry {
    /// Workspace-relative; an output's may hold `<runId>`, `<workflowId>`
    /// and `<isoDate>`.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "contentType"
    )]
    pub content_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InputDef {
    pub name: String,
    /// `None`: the input is required.
    pub default: Option<String>,
    pub required: bool,
    /// The environment variable read when the input is not given
    /// (workflow.yaml's trigger `input_var`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
}

/// Where a prompt's text came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// The agent definition file (`*.agent.md`) the persona came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<Box<agent::AgentCard>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GoalKind {
    Goal,
    Converge,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// What the step is for, in its author's words (workflow.yaml's `goal`),
    /// told to the model after the runtime's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brief: Option<String>,
    /// Where the goal's answer goes (workflow.yaml's `produces`, relative to
    /// the run's root); a path ending in `/` is a folder the model fills
    /// with its tools. The model is told which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produces: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Run,
    Loop,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
    /// The run's outputs by name, in the order they are shown (a text-mode
    /// run prints them so): the `outputs` schema's properties as written,
    /// then the names the author wrote in order (`output_names`),
    /// then each published node's name in step order, then a `result`
    /// object's keys. The same for every format; a run may have outputs it
    /// does not name (the last step's value), shown after these.
    pub fn output_order(&self) -> Vec<String> {
        let mut order: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut add = |name: &str| {
            if seen.insert(name.to_owned()) {
                order.push(name.to_owned());
            }
        };
        if let Some(props) = self
            .output_schema
            .as_ref()
            .and_then(|s| s.get("properties"))
            .and_then(serde_json::Value::as_object)
        {
            for k in props.keys() {
                add(k);
            }
        }
        for name in &self.output_names {
            add(name);
        }
        self.graph.walk(&mut |n| {
            if let Some(p) = &n.publish {
                add(p);
            }
        });
        if let Some(expr::ValueExpr::Object(fields)) = &self.result {
            for k in fields.keys() {
                add(k);
            }
        }
        order
    }

    pub fn goal(&self, name: &str) -> Option<&GoalDef> {
        self.goals.iter().find(|g| g.name == name)
    }

    pub fn agent(&self, name: &str) -> Option<&AgentDef> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// The plan with its fingerprint filled in.
    pub fn sealed(mut self) -> Plan {
        self.fingerprint = self.compute_fingerprint();
        self
    }

    /// The JSON Schema of a workflow's inputs: its own (a WORKFLOW.md's
    /// `inputs`, less the field the runtime fills in), else one built from its
    /// INPUTs.
    pub fn input_schema_or_built(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::{Map, Value, json};
        let plan = self;
        if let Some(Value::Object(own)) = &plan.input_schema {
            let mut schema = own.clone();
            schema.insert("type".into(), json!("object"));
            let reserved = FS_ROOT_INPUT;
            if let Some(Value::Object(props)) = schema.get_mut("properties") {
                props.remove(reserved);
            }
            if let Some(Value::Array(req)) = schema.get_mut("required") {
                req.retain(|r| r != reserved);
            }
            return schema;
        }
        let mut properties = Map::new();
        let mut required = Vec::new();
        for i in &plan.inputs {
            let mut p = Map::new();
            p.insert("type".into(), json!("string"));
            match &i.default {
                Some(d) => {
                    p.insert("default".into(), json!(d));
                    p.insert(
                        "description".into(),
                        json!(format!("INPUT {} (default {d:?}).", i.name)),
                    );
                }
                None => {
                    required.push(json!(i.name));
                    p.insert(
                        "description".into(),
                        json!(format!("INPUT {} (required).", i.name)),
                    );
                }
            }
            properties.insert(i.name.clone(), Value::Object(p));
        }
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            schema.insert("required".into(), Value::Array(required));
        }
        schema.insert("additionalProperties".into(), json!(false));
        schema
    }

    /// A digest of what decides the run's behaviour: everything but where the
    /// file lies, what starts it (`triggers`) and the fingerprint itself.
    pub fn compute_fingerprint(&self) -> String {
        digest(
            self,
            &["path", "fingerprint", "triggers", "package", "version"],
        )
    }

    /// A digest per node path (and per goal and agent definition), so a resume
    /// against a changed workflow can say what changed.
    pub fn digests(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for g in &self.goals {
            out.insert(format!("goal:{}", g.name), digest(g, &[]));
        }
        for a in &self.agents {
            out.insert(format!("agent:{}", a.name), digest(a, &[]));
        }
        for n in self.graph.children() {
            out.insert(n.id.clone(), digest(n, &[]));
        }
        out
    }
}

/// What differs between two plans' digests, in words (`step \`fix\` changed`).
pub fn describe_changes(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Vec<String> {
    let name = |k: &str| match k.split_once(':') {
        Some(("goal", n)) => format!("goal `{n}`"),
        Some(("agent", n)) => format!("agent `{n}`"),
        _ => format!("step `{k}`"),
    };
    let mut out = Vec::new();
    for (k, v) in old {
        match new.get(k) {
            None => out.push(format!("{} was removed", name(k))),
            Some(w) if w != v => out.push(format!("{} changed", name(k))),
            _ => {}
        }
    }
    for k in new.keys() {
        if !old.contains_key(k) {
            out.push(format!("{} was added", name(k)));
        }
    }
    out
}

/// A digest of `v` as JSON with every object's keys in sorted order (and
/// without the top-level members in `skip`): it must not depend on whether
/// serde_json keeps insertion order (its `preserve_order` feature, which a
/// dependency may turn on) or sorts.
fn digest<T: Serialize + ?Sized>(v: &T, skip: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    // A plan is plain data; `null` is what the old way hashed on failure.
    let bytes = canonical::to_vec(v, skip).unwrap_or_else(|_| b"null".to_vec());
    let h = Sha256::digest(&bytes);
    h[..12].iter().map(|b| format!("{b:02x}")).collect()
}
