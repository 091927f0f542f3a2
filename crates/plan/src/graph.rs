//! The step graph: what every format lowers into and the executor interprets.
//!
//! A plan's `graph` is one [`Node`], a [`NodeKind::Sequence`] at the root. A
//! sequence runs its children in order unless a child routes elsewhere: its
//! `next` (`$end` or a sibling's id), a branch arm, an approval's decision or a
//! suspend's timeout. Routing only ever targets siblings, so the graph is a tree
//! of sequences with jumps inside each, which is what WORKFLOW.md's `next`
//! fields describe and what the Agentfile DSL's RUN/LOOP steps need (no jumps).
//!
//! Every node has an id that is unique among its siblings; its *path* joins the
//! ids from the root with `/`, a map item adds `[i]` and a loop iteration `#n`
//! (`review/fixes[3]/apply`, `refine#2/evaluate`). Paths are stable across runs
//! of one plan, so the event log, keyed by path, is the resume journal.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::expr::{Expr, Template, ValueExpr};

/// One node of the graph, with the controls every kind may carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Node {
    /// Unique among its siblings; a path segment.
    pub id: String,
    /// Display label, when it differs from the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub kind: NodeKind,
    /// Where the enclosing sequence goes after this node (default: the next
    /// sibling in order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Next>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    /// The node's wall-clock limit, every attempt included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Runs when a later node fails after this one completed (a saga's undo);
    /// it sees this node's output as `$steps.<this id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation: Option<Box<Node>>,
    /// Whether a human approves before the node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalClass>,
    /// JSON Schema the node's arguments must satisfy before it runs (a
    /// TOOL.md's `inputs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema the node's output must satisfy (a mismatch fails the node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The run output this node's result is published as (the DSL publishes
    /// every goal under its name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<String>,
}

/// A node's successor inside its sequence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Next {
    /// `$end`: the enclosing sequence is done.
    End,
    /// A sibling, by id.
    Node(String),
}

impl Next {
    pub fn parse(s: &str) -> Next {
        if s == "$end" {
            Next::End
        } else {
            Next::Node(s.to_owned())
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Next::End => "$end",
            Next::Node(id) => id,
        }
    }
}

impl Serialize for Next {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Next {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Next, D::Error> {
        Ok(Next::parse(&String::deserialize(d)?))
    }
}

impl JsonSchema for Next {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Next".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "`$end`, or the id of a sibling node"
        })
    }
}

/// What a node does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NodeKind {
    /// Children in order, with routing (see the module doc).
    Sequence {
        nodes: Vec<Node>,
        /// The child that runs first (default: the first).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start: Option<String>,
    },
    /// A model/tool conversation working one of the plan's goals.
    Goal(GoalNode),
    /// One tool call through the policy gate, no model.
    Tool {
        tool: String,
        /// The call's arguments (an object once evaluated).
        args: ValueExpr,
    },
    /// A program bound in the config (`[tools.<id>] command = [...]`): the
    /// arguments as JSON on its stdin, its stdout read as JSON. The command
    /// line passes the bash policy like a bash call.
    Command {
        /// The tool id the workflow names.
        tool: String,
        argv: Vec<String>,
        args: ValueExpr,
        /// Whether it changes the world (approval class `on-mutate`): true
        /// unless its TOOL.md declares no `mutates`.
        #[serde(default)]
        mutates: bool,
    },
    /// A declared script, run like the bash tool runs a command (own process
    /// group, scrubbed environment, timeout). It may run when the bash
    /// allowlist does not name it: declaring it is the permission.
    Shell {
        /// Path of the script, relative to the run's root (see
        /// [`NodeKind::ReadFiles`]).
        script: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<Template>,
        /// The program that runs it: `bash` (default) or `pwsh`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interpreter: Option<String>,
        /// Variables set in its environment (beside the scrubbed one the
        /// bash tool gives).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, Template>,
    },
    /// Files read when the node runs, through the policy as `read` calls;
    /// the output is their text: one file as it is, else each file (a
    /// folder: each file under it, in name order) in a `<file path="…">`
    /// block. Paths are relative to the run's root: the workflow's folder
    /// for a workflow.yaml (or the `_workflowRoot` input), else the
    /// workspace.
    ReadFiles { paths: Vec<String> },
    /// An artifact: `content` written to `path` (relative to the run's
    /// root, replaced atomically, judged by the policy as a `write`). A
    /// `path` ending in `/` is a folder: the `<file path="…">` blocks of
    /// `content` are written into it, and it must then hold a file (an
    /// earlier node may have filled it with its tools). Each file is an
    /// `artifact` event.
    WriteFile {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Template>,
    },
    /// The first arm whose `when` is true routes; else `default` (else `$end`).
    Branch {
        arms: Vec<Arm>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<Next>,
    },
    /// Branches run concurrently and join; the output is an object of each
    /// branch's output by id.
    Parallel { branches: Vec<Node> },
    /// The body once per item of `over`, at most `concurrency` at a time (0:
    /// the executor's default, 16; never more than 256); the output is the
    /// array of the bodies' outputs in input order.
    Map {
        over: Expr,
        #[serde(default)]
        concurrency: u32,
        body: Box<Node>,
    },
    /// The body repeated until `until` says stop, at most `max` times.
    Loop {
        until: LoopUntil,
        max: super::Limit,
        body: Box<Node>,
    },
    /// Wait for a human decision.
    Approval(ApprovalNode),
    /// Persist the run and stop until one of `events` is signalled.
    Suspend {
        events: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        #[serde(default)]
        on_timeout: OnTimeout,
    },
    /// Another plan, run as one node with its inputs mapped.
    Subworkflow {
        plan: Box<super::Plan>,
        inputs: ValueExpr,
    },
}

impl NodeKind {
    /// The kind's name, as events and `inspect` show it.
    pub fn name(&self) -> &'static str {
        match self {
            NodeKind::Sequence { .. } => "sequence",
            NodeKind::Goal(_) => "goal",
            NodeKind::Tool { .. } => "tool",
            NodeKind::Command { .. } => "command",
            NodeKind::Shell { .. } => "shell",
            NodeKind::ReadFiles { .. } => "read_files",
            NodeKind::WriteFile { .. } => "write_file",
            NodeKind::Branch { .. } => "branch",
            NodeKind::Parallel { .. } => "parallel",
            NodeKind::Map { .. } => "map",
            NodeKind::Loop { .. } => "loop",
            NodeKind::Approval(_) => "approval",
            NodeKind::Suspend { .. } => "suspend",
            NodeKind::Subworkflow { .. } => "subworkflow",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GoalNode {
    /// The plan's goal definition this node works.
    pub goal: String,
    /// Variables whose values are shown to the model as context (the DSL's
    /// earlier outputs it does not quote through `$variables`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<String>,
    /// Values bound as variables while the goal runs (`$prompt` for a
    /// WORKFLOW.md `agent` step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<ValueExpr>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Arm {
    pub when: Expr,
    pub next: Next,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoopUntil {
    /// Repeat while the expression is true (checked before each iteration;
    /// before the first only when it reads nothing the body produces). Reaching
    /// `max` with it still true fails the node.
    While { expr: Expr },
    /// The DSL's LOOP: until a goal calls `signal_done`, an iteration makes no
    /// tool calls, or the outputs equal the previous iteration's. Reaching `max`
    /// is a warning (an error with `strict_convergence`).
    Converged,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalNode {
    pub prompt: Template,
    /// Where to go when approved (default: on in order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_approve: Option<Next>,
    /// Where to go when rejected (default: the run fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_reject: Option<Next>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub on_timeout: OnTimeout,
}

/// What a suspend or approval does when its time is up.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OnTimeout {
    /// The run fails (exit 1).
    #[default]
    Fail,
    /// The run is cancelled.
    Cancel,
    /// Go on as if resumed with no payload (an approval: as if rejected).
    Continue,
    /// Go to a sibling.
    Goto(String),
}

impl OnTimeout {
    pub fn parse(s: &str) -> OnTimeout {
        match s {
            "fail" => OnTimeout::Fail,
            "cancel" => OnTimeout::Cancel,
            "continue" => OnTimeout::Continue,
            other => OnTimeout::Goto(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            OnTimeout::Fail => "fail",
            OnTimeout::Cancel => "cancel",
            OnTimeout::Continue => "continue",
            OnTimeout::Goto(id) => id,
        }
    }
}

impl Serialize for OnTimeout {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for OnTimeout {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<OnTimeout, D::Error> {
        Ok(OnTimeout::parse(&String::deserialize(d)?))
    }
}

impl JsonSchema for OnTimeout {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "OnTimeout".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "`fail`, `cancel`, `continue`, or the id of a sibling node"
        })
    }
}

/// Retry policy: `max_attempts` counts the first try.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Retry {
    pub max_attempts: u32,
    #[serde(default)]
    pub backoff: Backoff,
    /// Delay before the second attempt.
    #[serde(default)]
    pub initial_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    Fixed,
    Linear,
    #[default]
    Exponential,
}

impl Retry {
    /// The wait before attempt `attempt` (2-based: the first retry), capped at
    /// ten minutes so a hostile file cannot overflow it.
    pub fn delay_before(&self, attempt: u32) -> std::time::Duration {
        let n = u64::from(attempt.saturating_sub(1)).max(1);
        let ms = match self.backoff {
            Backoff::Fixed => self.initial_ms,
            Backoff::Linear => self.initial_ms.saturating_mul(n),
            Backoff::Exponential => self
                .initial_ms
                .saturating_mul(1u64.checked_shl((n - 1).min(40) as u32).unwrap_or(u64::MAX)),
        };
        std::time::Duration::from_millis(ms.min(600_000))
    }
}

/// AIP-14's approval classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalClass {
    /// Never ask.
    Auto,
    /// Ask before the node runs.
    Always,
    /// Ask when the node writes, edits or runs commands.
    OnMutate,
    /// The DSL's SUPERVISED goals: ask a human, or a supervisor when one is
    /// configured.
    Supervised,
    /// SUPERVISED HUMAN: only a human may answer.
    SupervisedHuman,
}

impl Node {
    pub fn new(id: impl Into<String>, kind: NodeKind) -> Node {
        Node {
            id: id.into(),
            name: None,
            kind,
            next: None,
            retry: None,
            timeout_ms: None,
            compensation: None,
            approval: None,
            input_schema: None,
            output_schema: None,
            publish: None,
        }
    }

    /// The direct children (a sequence's nodes, a parallel's branches, a map's
    /// or loop's body); compensations are not children.
    pub fn children(&self) -> Vec<&Node> {
        match &self.kind {
            NodeKind::Sequence { nodes, .. } => nodes.iter().collect(),
            NodeKind::Parallel { branches } => branches.iter().collect(),
            NodeKind::Map { body, .. } | NodeKind::Loop { body, .. } => vec![body],
            _ => Vec::new(),
        }
    }

    /// Every node of this subtree, depth first (this one first), with its
    /// compensations.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Node)) {
        f(self);
        if let Some(c) = &self.compensation {
            c.walk(f);
        }
        for c in self.children() {
            c.walk(f);
        }
    }

    /// Whether the node can change the world when it runs (approval class
    /// `on-mutate`): a shell step, or a tool that writes or runs commands.
    /// Only the built-in tools that read are known not to: any other tool
    /// (an MCP server's, a `[tools.<id>]` binding such as a remote A2A agent,
    /// a script) may do anything, so it counts as mutating.
    pub fn mutates(&self) -> bool {
        match &self.kind {
            NodeKind::Shell { .. } | NodeKind::WriteFile { .. } => true,
            NodeKind::Command { mutates, .. } => *mutates,
            NodeKind::Tool { tool, .. } => !matches!(
                crate::tool::Tool::from_name(tool),
                Some(
                    crate::tool::Tool::Read
                        | crate::tool::Tool::Glob
                        | crate::tool::Tool::Grep
                        | crate::tool::Tool::Ls
                        | crate::tool::Tool::WebFetch
                        | crate::tool::Tool::WebSearch
                        | crate::tool::Tool::MemoryRead
                )
            ),
            _ => false,
        }
    }
}

/// The plan's graph, checked the way `commit()` checks a built one and a
/// front end checks a file: ids unique among siblings, every route names a
/// sibling, every sibling is reachable, and no cycle outside a loop.
pub fn check(root: &Node) -> Vec<GraphError> {
    let mut errors = Vec::new();
    check_node(root, "", &mut errors);
    errors
}

/// A structural problem in a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphError {
    /// Path of the node at fault.
    pub path: String,
    pub code: &'static str,
    pub message: String,
    /// What in the node is at fault, when more precise than the node: the
    /// route target that does not exist, the path an expression reads.
    pub subject: Option<String>,
}

fn join(parent: &str, id: &str) -> String {
    if parent.is_empty() {
        id.to_owned()
    } else {
        format!("{parent}/{id}")
    }
}

fn check_node(node: &Node, parent: &str, errors: &mut Vec<GraphError>) {
    let path = if parent.is_empty() && node.id.is_empty() {
        String::new()
    } else {
        join(parent, &node.id)
    };
    if let Some(c) = &node.compensation {
        check_node(c, &path, errors);
    }
    match &node.kind {
        NodeKind::Sequence { nodes, start } => {
            check_sequence(nodes, start.as_deref(), &path, errors)
        }
        NodeKind::Parallel { branches } => {
            let mut seen = std::collections::HashSet::new();
            for b in branches {
                if !seen.insert(b.id.as_str()) {
                    errors.push(GraphError {
                        path: join(&path, &b.id),
                        code: "duplicate-id",
                        message: format!("branch id `{}` is used more than once", b.id),
                        subject: None,
                    });
                }
                check_node(b, &path, errors);
            }
        }
        // A body is transparent: its steps' paths are the map's or loop's own
        // (`refine/evaluate`), as the scope analysis and diagnostics name them.
        NodeKind::Map { body, .. } | NodeKind::Loop { body, .. } => match &body.kind {
            NodeKind::Sequence { nodes, start } => {
                check_sequence(nodes, start.as_deref(), &path, errors)
            }
            _ => check_node(body, &path, errors),
        },
        NodeKind::Subworkflow { plan, .. } => {
            for e in check(&plan.graph) {
                errors.push(GraphError {
                    path: join(&path, &e.path),
                    ..e
                });
            }
        }
        _ => {}
    }
}

fn check_sequence(nodes: &[Node], start: Option<&str>, path: &str, errors: &mut Vec<GraphError>) {
    for n in nodes {
        check_node(n, path, errors);
    }
    let index = index_ids(nodes, path, errors);
    let edges = sequence_edges(nodes, &index, path, errors);
    if nodes.is_empty() {
        return;
    }
    let first = match start {
        Some(s) => match index.get(s) {
            Some(i) => *i,
            None => {
                errors.push(GraphError {
                    path: path.to_owned(),
                    code: "dangling-next",
                    message: format!("the start step `{s}` does not exist here"),
                    subject: Some(s.to_owned()),
                });
                0
            }
        },
        None => 0,
    };
    check_reachable(nodes, &edges, first, path, errors);
    check_cycles(nodes, &edges, path, errors);
}

/// The sequence's nodes by id; a node without an id, an id used twice and
/// one with a reserved character are errors.
fn index_ids<'a>(
    nodes: &'a [Node],
    path: &str,
    errors: &mut Vec<GraphError>,
) -> BTreeMap<&'a str, usize> {
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.id.is_empty() {
            errors.push(GraphError {
                path: path.to_owned(),
                code: "missing-id",
                message: format!("node {} of this sequence has no id", i + 1),
                subject: None,
            });
        } else if index.insert(&n.id, i).is_some() {
            errors.push(GraphError {
                path: join(path, &n.id),
                code: "duplicate-id",
                message: format!("id `{}` is used by more than one node here", n.id),
                subject: None,
            });
        }
        if n.id.contains(['/', '#', '@', '[', ']']) {
            errors.push(GraphError {
                path: join(path, &n.id),
                code: "bad-id",
                message: format!("id `{}` may not contain `/`, `#`, `@`, `[` or `]`", n.id),
                subject: None,
            });
        }
    }
    index
}

/// Where a route from node `from` goes: its index, or `None` for the end of
/// the sequence and for an id that is not here (an error).
fn route_target(
    t: &Next,
    from: &str,
    index: &BTreeMap<&str, usize>,
    path: &str,
    errors: &mut Vec<GraphError>,
) -> Option<usize> {
    match t {
        Next::End => None,
        Next::Node(id) => match index.get(id.as_str()) {
            Some(i) => Some(*i),
            None => {
                let known: Vec<&str> = index.keys().copied().collect();
                let hint = match crate::diag::suggest(id, known.iter().copied()) {
                    Some(s) => format!("; did you mean `{s}`?"),
                    None => String::new(),
                };
                errors.push(GraphError {
                    path: join(path, from),
                    code: "dangling-next",
                    message: format!("`{id}` is not a step here{hint}"),
                    subject: Some(id.clone()),
                });
                None
            }
        },
    }
}

/// Edges of the sequence, for reachability and cycles: a node's routes (a
/// branch's arms, an approval's outcomes, a timeout's goto), else its
/// `next`, else the node after it.
fn sequence_edges(
    nodes: &[Node],
    index: &BTreeMap<&str, usize>,
    path: &str,
    errors: &mut Vec<GraphError>,
) -> Vec<Vec<usize>> {
    let mut target = |t: &Next, from: &str| route_target(t, from, index, path, errors);
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let mut out = Vec::new();
        let mut routed = false;
        match &n.kind {
            NodeKind::Branch { arms, default } => {
                routed = true;
                for a in arms {
                    out.extend(target(&a.next, &n.id));
                }
                if let Some(d) = default {
                    out.extend(target(d, &n.id));
                }
            }
            NodeKind::Approval(a) => {
                if let Some(t) = &a.on_approve {
                    routed = true;
                    out.extend(target(t, &n.id));
                }
                if let Some(t) = &a.on_reject {
                    out.extend(target(t, &n.id));
                }
                if let OnTimeout::Goto(t) = &a.on_timeout {
                    out.extend(target(&Next::Node(t.clone()), &n.id));
                }
            }
            NodeKind::Suspend {
                on_timeout: OnTimeout::Goto(t),
                ..
            } => {
                out.extend(target(&Next::Node(t.clone()), &n.id));
            }
            _ => {}
        }
        if !routed {
            match &n.next {
                Some(t) => out.extend(target(t, &n.id)),
                None if i + 1 < nodes.len() => out.push(i + 1),
                None => {}
            }
        }
        edges[i] = out;
    }
    edges
}

/// Every node must be reachable from the start.
fn check_reachable(
    nodes: &[Node],
    edges: &[Vec<usize>],
    first: usize,
    path: &str,
    errors: &mut Vec<GraphError>,
) {
    let mut seen = vec![false; nodes.len()];
    let mut stack = vec![first];
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        stack.extend(edges[i].iter().copied());
    }
    for (i, n) in nodes.iter().enumerate() {
        if !seen[i] {
            errors.push(GraphError {
                path: join(path, &n.id),
                code: "unreachable",
                message: format!("step `{}` can never run: nothing routes to it", n.id),
                subject: None,
            });
        }
    }
}

/// Cycles (repetition belongs in a loop node): colour-marking DFS. A cycle
/// through an approval step is allowed (AIP-15's revise → review loop):
/// every pass waits for a human, and `max_steps` bounds it.
fn check_cycles(nodes: &[Node], edges: &[Vec<usize>], path: &str, errors: &mut Vec<GraphError>) {
    let mut colour = vec![0u8; nodes.len()];
    for s in 0..nodes.len() {
        if colour[s] != 0 {
            continue;
        }
        let mut stack = vec![(s, 0usize)];
        colour[s] = 1;
        while let Some((i, k)) = stack.pop() {
            if let Some(&j) = edges[i].get(k) {
                stack.push((i, k + 1));
                match colour[j] {
                    0 => {
                        colour[j] = 1;
                        stack.push((j, 0));
                    }
                    1 => {
                        let on_cycle = stack.iter().rev().map(|(n, _)| *n);
                        let mut gated = false;
                        for n in on_cycle {
                            gated |= matches!(nodes[n].kind, NodeKind::Approval(_));
                            if n == j {
                                break;
                            }
                        }
                        if !gated {
                            errors.push(GraphError {
                                path: join(path, &nodes[i].id),
                                code: "cycle",
                                message: format!(
                                    "`{}` routes back to `{}`, which makes a cycle; repeat work with a loop step",
                                    nodes[i].id, nodes[j].id
                                ),
                                subject: Some(nodes[j].id.clone()),
                            });
                        }
                    }
                    _ => {}
                }
            } else {
                colour[i] = 2;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Node {
        Node::new(
            "t",
            NodeKind::Tool {
                tool: name.to_owned(),
                args: crate::expr::ValueExpr::Literal(serde_json::json!({})),
            },
        )
    }

    #[test]
    fn only_the_built_in_tools_that_read_do_not_mutate() {
        for reads in [
            "read",
            "glob",
            "grep",
            "ls",
            "web_fetch",
            "web_search",
            "memory_read",
        ] {
            assert!(!tool(reads).mutates(), "{reads}");
        }
        // Writers, programs, MCP servers' tools, and the bare ids of
        // `[tools.<id>]` bindings (a remote A2A agent, a SaaS integration):
        // what they do is not known here, so `on-mutate` asks first.
        for may_write in [
            "write",
            "edit",
            "bash",
            "memory_write",
            "github.create_issue",
            "mcp_fs_write",
            "salesforce-assign-account-exec",
            "desk",
        ] {
            assert!(tool(may_write).mutates(), "{may_write}");
        }
    }
}
