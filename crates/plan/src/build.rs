//! AIP-15's standard entry points as a Rust builder: `define_workflow` and
//! `define_step` produce the same [`Plan`] a file would, so a host program
//! builds and runs a workflow without one.
//!
//! ```
//! use agentfile_plan::{define_step, define_workflow};
//! let plan = define_workflow("hello")
//!     .input("name", Some("world"))
//!     .step(define_step("look").tool("ls", serde_json::json!({"path": "."})))
//!     .step(define_step("route").branch([("$steps.look == null", "look")], None))
//!     .commit();
//! // `route` sends the run back to `look`: a cycle outside a loop.
//! assert!(plan.is_err());
//! ```
//!
//! Problems are collected, not thrown: `commit()` reports every one at once,
//! as diagnostics with the same codes a WORKFLOW.md file gets.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::expr::{self, Expr, Template, ValueExpr};
use super::graph::{
    self, ApprovalClass, ApprovalNode, Arm, Backoff, GoalNode, LoopUntil, Next, Node, NodeKind,
    OnTimeout, Retry,
};
use super::{
    AgentDef, GoalDef, GoalKind, InputDef, Limit, PLAN_SCHEMA_VERSION, Plan, PromptSource,
};
use crate::diag::Diagnostic;

/// The step kinds AIP-15 defines, and ours (`goal`, `shell`).
pub const STEP_KINDS: &[&str] = &[
    "tool",
    "branch",
    "parallel",
    "suspend",
    "approval",
    "map",
    "loop",
    "subworkflow",
    "goal",
    "shell",
];

/// `defineWorkflow`: start a workflow.
#[doc(alias = "defineWorkflow")]
pub fn define_workflow(id: impl Into<String>) -> WorkflowBuilder {
    WorkflowBuilder {
        id: id.into(),
        name: None,
        inputs: Vec::new(),
        agents: Vec::new(),
        goals: Vec::new(),
        steps: Vec::new(),
        start: None,
        timeout_ms: None,
        max_steps: None,
        result: None,
        errors: Vec::new(),
    }
}

/// `defineStep`: declare one step; give it a kind with one of the kind
/// methods.
#[doc(alias = "defineStep")]
pub fn define_step(id: impl Into<String>) -> StepBuilder {
    StepBuilder {
        node: Node::new(
            id,
            NodeKind::Sequence {
                nodes: Vec::new(),
                start: None,
            },
        ),
        has_kind: false,
        errors: Vec::new(),
    }
}

/// A workflow being built (`WorkflowHandle`).
#[derive(Debug, Clone)]
pub struct WorkflowBuilder {
    id: String,
    name: Option<String>,
    inputs: Vec<InputDef>,
    agents: Vec<AgentDef>,
    goals: Vec<GoalDef>,
    steps: Vec<StepBuilder>,
    start: Option<String>,
    timeout_ms: Option<u64>,
    max_steps: Option<u32>,
    result: Option<Value>,
    errors: Vec<String>,
}

impl WorkflowBuilder {
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// An input; `None` makes it required.
    pub fn input(mut self, name: impl Into<String>, default: Option<&str>) -> Self {
        self.inputs.push(InputDef {
            name: name.into(),
            default: default.map(str::to_owned),
            required: default.is_none(),
            env: None,
        });
        self
    }

    /// A persona that goals may use.
    pub fn agent(mut self, name: impl Into<String>, prompt: impl Into<String>) -> Self {
        self.agents.push(AgentDef {
            name: name.into(),
            source: PromptSource::Inline,
            prompt: prompt.into(),
            profile: None,
            outputs: Vec::new(),
            reads: Vec::new(),
            card: None,
        });
        self
    }

    /// A goal that `goal` steps may work: `outcome` is a `$variable`
    /// template; `outputs` are its structured fields.
    pub fn goal(mut self, name: impl Into<String>, outcome: impl Into<String>) -> Self {
        let outcome = outcome.into();
        self.goals.push(GoalDef {
            name: name.into(),
            kind: GoalKind::Goal,
            summary: outcome
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_owned(),
            outcome,
            source: PromptSource::Inline,
            agents: Vec::new(),
            outputs: Vec::new(),
            reads: Vec::new(),
            within: None,
            supervision: None,
            brief: None,
            produces: None,
        });
        self
    }

    /// Structured output fields of the goal defined last.
    pub fn goal_outputs(mut self, fields: &[&str]) -> Self {
        match self.goals.last_mut() {
            Some(g) => g.outputs = fields.iter().map(|f| (*f).to_owned()).collect(),
            None => self.errors.push("goal_outputs() before any goal()".into()),
        }
        self
    }

    /// Agents that work the goal defined last, then a synthesis.
    pub fn goal_agents(mut self, agents: &[&str]) -> Self {
        match self.goals.last_mut() {
            Some(g) => g.agents = agents.iter().map(|a| (*a).to_owned()).collect(),
            None => self.errors.push("goal_agents() before any goal()".into()),
        }
        self
    }

    pub fn start(mut self, id: impl Into<String>) -> Self {
        self.start = Some(id.into());
        self
    }

    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    pub fn max_steps(mut self, n: u32) -> Self {
        self.max_steps = Some(n);
        self
    }

    /// The run's outputs: a value with expressions (`{"total": "$steps.sum"}`).
    pub fn result(mut self, value: Value) -> Self {
        self.result = Some(value);
        self
    }

    pub fn step(mut self, step: StepBuilder) -> Self {
        self.steps.push(step);
        self
    }

    /// `.step()` for a step that must be a branch.
    pub fn branch(self, step: StepBuilder) -> Self {
        self.expect_kind(step, "branch")
    }

    pub fn parallel(self, step: StepBuilder) -> Self {
        self.expect_kind(step, "parallel")
    }

    pub fn approval(self, step: StepBuilder) -> Self {
        self.expect_kind(step, "approval")
    }

    pub fn suspend(self, step: StepBuilder) -> Self {
        self.expect_kind(step, "suspend")
    }

    fn expect_kind(mut self, step: StepBuilder, kind: &str) -> Self {
        if step.has_kind && step.node.kind.name() != kind {
            self.errors.push(format!(
                "step `{}` was added with .{kind}() but is a {} step",
                step.node.id,
                step.node.kind.name()
            ));
        }
        self.step(step)
    }

    /// Finalise and validate: every problem a file would get, at once.
    pub fn commit(self) -> Result<Plan, Vec<Diagnostic>> {
        let origin = format!("define_workflow(\"{}\")", self.id);
        let here = Path::new(&origin);
        let mut diags: Vec<Diagnostic> = self
            .errors
            .iter()
            .map(|e| Diagnostic::file_error("builder", here, e.clone()))
            .collect();
        let mut nodes = Vec::with_capacity(self.steps.len());
        for s in self.steps {
            collect_step_errors(&s, "", here, &mut diags);
            nodes.push(s.into_node());
        }
        let mut root = Node::new(
            "",
            NodeKind::Sequence {
                nodes,
                start: self.start,
            },
        );
        root.id = String::new();
        for e in graph::check(&root) {
            diags.push(
                Diagnostic::file_error(e.code, here, format!("step `{}`: {}", e.path, e.message))
                    .with_hint(hint_for(e.code)),
            );
        }
        let goal_names: Vec<&str> = self.goals.iter().map(|g| g.name.as_str()).collect();
        root.walk(&mut |n| {
            if let NodeKind::Goal(g) = &n.kind
                && !goal_names.contains(&g.goal.as_str())
            {
                diags.push(
                    Diagnostic::file_error(
                        "undefined-goal",
                        here,
                        format!(
                            "step `{}` works goal `{}`, which is not defined",
                            n.id, g.goal
                        ),
                    )
                    .with_hint("define it with .goal(name, outcome) on the workflow"),
                );
            }
        });
        for g in &self.goals {
            for a in &g.agents {
                if !self.agents.iter().any(|d| &d.name == a) {
                    diags.push(Diagnostic::file_error(
                        "undefined-agent",
                        here,
                        format!("goal `{}` uses agent `{a}`, which is not defined", g.name),
                    ));
                }
            }
        }
        let result = match self.result.as_ref().map(expr::compile_value).transpose() {
            Ok(r) => r,
            Err((pointer, e)) => {
                diags.push(Diagnostic::file_error(
                    "bad-expression",
                    here,
                    format!("result{pointer}: {}", e.message),
                ));
                None
            }
        };
        if diags.iter().any(Diagnostic::is_error) {
            return Err(diags);
        }
        let mut plan = Plan {
            schema_version: PLAN_SCHEMA_VERSION,
            name: self.name.unwrap_or_else(|| self.id.clone()),
            id: Some(self.id.clone()),
            description: None,
            format: "builder".into(),
            path: origin.clone(),
            inputs: self.inputs,
            agents: self.agents,
            goals: self.goals,
            steps: Vec::new(),
            security: None,
            graph: root,
            timeout_ms: self.timeout_ms,
            max_steps: self.max_steps,
            input_schema: None,
            output_schema: None,
            result,
            fingerprint: String::new(),
            files: Default::default(),
            execution: None,
            protected: Vec::new(),
            root: Default::default(),
            output_names: Vec::new(),
            unmapped: Default::default(),
            declared: None,
            triggers: Vec::new(),
            package: None,
            version: None,
        };
        for e in super::scope::check(&plan) {
            diags.push(
                Diagnostic::file_error(e.code, here, format!("step `{}`: {}", e.path, e.message))
                    .with_hint(
                        "read only steps that finished before this one, and declared inputs",
                    ),
            );
        }
        if diags.iter().any(Diagnostic::is_error) {
            return Err(diags);
        }
        plan.fingerprint = plan.compute_fingerprint();
        Ok(plan)
    }
}

fn hint_for(code: &str) -> &'static str {
    match code {
        "dangling-next" => "route to the id of a step in the same list, or `$end`",
        "unreachable" => "route to it from another step, or remove it",
        "cycle" => "to repeat steps, put them in a loop step with a maximum",
        "duplicate-id" => "give every step of one list its own id",
        _ => "fix the step's definition",
    }
}

fn collect_step_errors(s: &StepBuilder, parent: &str, here: &Path, diags: &mut Vec<Diagnostic>) {
    let path = if parent.is_empty() {
        s.node.id.clone()
    } else {
        format!("{parent}/{}", s.node.id)
    };
    if !s.has_kind {
        diags.push(
            Diagnostic::file_error("missing-kind", here, format!("step `{path}` has no kind"))
                .with_hint(format!("give it one of: {}", STEP_KINDS.join(", "))),
        );
    }
    for e in &s.errors {
        diags.push(Diagnostic::file_error(
            e.0,
            here,
            format!("step `{path}`: {}", e.1),
        ));
    }
}

/// A step being built (`StepHandle`).
#[derive(Debug, Clone)]
pub struct StepBuilder {
    node: Node,
    has_kind: bool,
    errors: Vec<(&'static str, String)>,
}

impl StepBuilder {
    fn kind(mut self, kind: NodeKind) -> Self {
        if self.has_kind {
            self.errors.push((
                "two-kinds",
                format!(
                    "was given two kinds ({} and {})",
                    self.node.kind.name(),
                    kind.name()
                ),
            ));
        }
        self.node.kind = kind;
        self.has_kind = true;
        self
    }

    /// A kind by name, for hosts that read it from data; an unknown name is an
    /// error at `commit()`. The kind's fields come from the typed methods.
    pub fn kind_named(mut self, name: &str) -> Self {
        if !STEP_KINDS.contains(&name) {
            let hint = crate::diag::suggest(name, STEP_KINDS.iter().copied())
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            self.errors.push((
                "unknown-kind",
                format!(
                    "unknown step kind `{name}`{hint} (the kinds are: {})",
                    STEP_KINDS.join(", ")
                ),
            ));
            self.has_kind = true;
        }
        self
    }

    fn parse_expr(&mut self, src: &str) -> Expr {
        match expr::parse(src) {
            Ok(e) => e,
            Err(e) => {
                self.errors.push((
                    "bad-expression",
                    format!(
                        "`{src}`: {}{}",
                        e.message,
                        e.hint.map(|h| format!(" ({h})")).unwrap_or_default()
                    ),
                ));
                Expr::Literal(Value::Null)
            }
        }
    }

    fn compile(&mut self, v: &Value) -> ValueExpr {
        match expr::compile_value(v) {
            Ok(v) => v,
            Err((pointer, e)) => {
                self.errors
                    .push(("bad-expression", format!("inputs{pointer}: {}", e.message)));
                ValueExpr::Literal(Value::Null)
            }
        }
    }

    fn template(&mut self, s: &str) -> Template {
        match Template::parse(s) {
            Ok(t) => t,
            Err(e) => {
                self.errors
                    .push(("bad-expression", format!("`{s}`: {}", e.message)));
                Template { parts: Vec::new() }
            }
        }
    }

    /// One tool call; `args` may hold expressions (`"$input.path"`).
    pub fn tool(mut self, tool: impl Into<String>, args: Value) -> Self {
        let args = self.compile(&args);
        self.kind(NodeKind::Tool {
            tool: tool.into(),
            args,
        })
    }

    /// Work a goal defined on the workflow.
    pub fn goal(self, goal: impl Into<String>) -> Self {
        self.kind(NodeKind::Goal(GoalNode {
            goal: goal.into(),
            context: Vec::new(),
            inputs: None,
        }))
    }

    /// Work a goal with variables bound from values (`{"prompt": "$input.q"}`).
    pub fn goal_with(mut self, goal: impl Into<String>, inputs: Value) -> Self {
        let inputs = self.compile(&inputs);
        self.kind(NodeKind::Goal(GoalNode {
            goal: goal.into(),
            context: Vec::new(),
            inputs: Some(inputs),
        }))
    }

    /// A declared script (workspace-relative path) with templated arguments.
    pub fn shell(mut self, script: impl Into<String>, args: &[&str]) -> Self {
        let args = args.iter().map(|a| self.template(a)).collect();
        self.kind(NodeKind::Shell {
            script: script.into(),
            args,
            interpreter: None,
            env: BTreeMap::new(),
        })
    }

    /// `(when, next)` arms in order, then the default route.
    pub fn branch<'a>(
        mut self,
        arms: impl IntoIterator<Item = (&'a str, &'a str)>,
        default: Option<&str>,
    ) -> Self {
        let arms = arms
            .into_iter()
            .map(|(when, next)| Arm {
                when: self.parse_expr(when),
                next: Next::parse(next),
            })
            .collect();
        self.kind(NodeKind::Branch {
            arms,
            default: default.map(Next::parse),
        })
    }

    /// Branches that run concurrently: each a step (often a `sequence`).
    pub fn parallel(self, branches: impl IntoIterator<Item = StepBuilder>) -> Self {
        let (branches, errors) = collect(branches);
        self.kind_with(NodeKind::Parallel { branches }, errors)
    }

    /// Steps in order (with their own `next` routes), as one step.
    pub fn sequence(self, steps: impl IntoIterator<Item = StepBuilder>) -> Self {
        let (nodes, errors) = collect(steps);
        self.kind_with(NodeKind::Sequence { nodes, start: None }, errors)
    }

    /// The body once per item of `over` (`$item`, `$index`), `concurrency`
    /// at a time (0: all at once).
    pub fn map(
        mut self,
        over: &str,
        concurrency: u32,
        body: impl IntoIterator<Item = StepBuilder>,
    ) -> Self {
        let over = self.parse_expr(over);
        let (body, errors) = body_of(body);
        self.kind_with(
            NodeKind::Map {
                over,
                concurrency,
                body: Box::new(body),
            },
            errors,
        )
    }

    /// The body while `cond` holds, at most `max` times (reaching it fails).
    pub fn loop_while(
        mut self,
        cond: &str,
        max: u32,
        body: impl IntoIterator<Item = StepBuilder>,
    ) -> Self {
        let expr = self.parse_expr(cond);
        self.looping(LoopUntil::While { expr }, max, body)
    }

    /// The DSL's LOOP: the body until converged, at most `max` times.
    pub fn loop_converged(self, max: u32, body: impl IntoIterator<Item = StepBuilder>) -> Self {
        self.looping(LoopUntil::Converged, max, body)
    }

    fn looping(
        self,
        until: LoopUntil,
        max: u32,
        body: impl IntoIterator<Item = StepBuilder>,
    ) -> Self {
        let (body, errors) = body_of(body);
        self.kind_with(
            NodeKind::Loop {
                until,
                max: Limit::Count { count: max },
                body: Box::new(body),
            },
            errors,
        )
    }

    fn kind_with(self, kind: NodeKind, errors: Vec<(&'static str, String)>) -> Self {
        let mut s = self.kind(kind);
        s.errors.extend(errors);
        s
    }

    /// Wait for a human decision; route with `on_approve`/`on_reject`.
    pub fn approval(mut self, prompt: &str) -> Self {
        let prompt = self.template(prompt);
        self.kind(NodeKind::Approval(ApprovalNode {
            prompt,
            on_approve: None,
            on_reject: None,
            timeout_ms: None,
            on_timeout: OnTimeout::Fail,
        }))
    }

    pub fn on_approve(mut self, next: &str) -> Self {
        match &mut self.node.kind {
            NodeKind::Approval(a) => a.on_approve = Some(Next::parse(next)),
            _ => self.errors.push((
                "builder",
                "on_approve() on a step that is not an approval".into(),
            )),
        }
        self
    }

    pub fn on_reject(mut self, next: &str) -> Self {
        match &mut self.node.kind {
            NodeKind::Approval(a) => a.on_reject = Some(Next::parse(next)),
            _ => self.errors.push((
                "builder",
                "on_reject() on a step that is not an approval".into(),
            )),
        }
        self
    }

    /// Persist and stop until one of `events` is signalled.
    pub fn suspend(self, events: &[&str]) -> Self {
        self.kind(NodeKind::Suspend {
            events: events.iter().map(|e| (*e).to_owned()).collect(),
            timeout_ms: None,
            on_timeout: OnTimeout::Fail,
        })
    }

    /// How long a suspend or approval waits, and what happens then (`fail`,
    /// `cancel`, `continue` or a sibling's id).
    pub fn wait_timeout(mut self, ms: u64, on_timeout: &str) -> Self {
        match &mut self.node.kind {
            NodeKind::Suspend {
                timeout_ms,
                on_timeout: t,
                ..
            } => {
                *timeout_ms = Some(ms);
                *t = OnTimeout::parse(on_timeout);
            }
            NodeKind::Approval(a) => {
                a.timeout_ms = Some(ms);
                a.on_timeout = OnTimeout::parse(on_timeout);
            }
            _ => self.errors.push((
                "builder",
                "wait_timeout() on a step that is not a suspend or an approval".into(),
            )),
        }
        self
    }

    /// Another workflow as one step; `inputs` may hold expressions.
    pub fn subworkflow(mut self, plan: Plan, inputs: Value) -> Self {
        let inputs = self.compile(&inputs);
        self.kind(NodeKind::Subworkflow {
            plan: Box::new(plan),
            inputs,
        })
    }

    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.node.name = Some(name.into());
        self
    }

    pub fn next(mut self, next: &str) -> Self {
        self.node.next = Some(Next::parse(next));
        self
    }

    pub fn retry(mut self, max_attempts: u32, backoff: Backoff, initial_ms: u64) -> Self {
        self.node.retry = Some(Retry {
            max_attempts,
            backoff,
            initial_ms,
        });
        self
    }

    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.node.timeout_ms = Some(ms);
        self
    }

    /// The step that undoes this one when a later step fails.
    pub fn compensation(mut self, step: StepBuilder) -> Self {
        self.errors.extend(step.nested_errors());
        self.node.compensation = Some(Box::new(step.into_node()));
        self
    }

    pub fn approval_class(mut self, class: ApprovalClass) -> Self {
        self.node.approval = Some(class);
        self
    }

    /// JSON Schema the step's output must satisfy.
    pub fn outputs(mut self, schema: Value) -> Self {
        self.node.output_schema = Some(schema);
        self
    }

    /// Publish the step's output as the run output `name`.
    pub fn publish(mut self, name: impl Into<String>) -> Self {
        self.node.publish = Some(name.into());
        self
    }

    fn nested_errors(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<_> = self
            .errors
            .iter()
            .map(|(c, m)| (*c, format!("`{}`: {m}", self.node.id)))
            .collect();
        if !self.has_kind {
            out.push((
                "missing-kind",
                format!("step `{}` has no kind", self.node.id),
            ));
        }
        out
    }

    fn into_node(self) -> Node {
        self.node
    }
}

/// Built steps as nodes, with the problems they carry.
fn collect(
    steps: impl IntoIterator<Item = StepBuilder>,
) -> (Vec<Node>, Vec<(&'static str, String)>) {
    let mut errors = Vec::new();
    let nodes = steps
        .into_iter()
        .map(|b| {
            errors.extend(b.nested_errors());
            b.into_node()
        })
        .collect();
    (nodes, errors)
}

/// The body of a map or loop: its steps as one sequence node.
fn body_of(steps: impl IntoIterator<Item = StepBuilder>) -> (Node, Vec<(&'static str, String)>) {
    let (nodes, errors) = collect(steps);
    (
        Node::new("body", NodeKind::Sequence { nodes, start: None }),
        errors,
    )
}

/// The input a one-agent plan takes: what to do.
pub const TASK_INPUT: &str = "task";

/// One agent working one task, as a file that defines a single agent lowers
/// to (`.agent.md`, agentrc): the agent `name` with `system` sent as written
/// (`$` is no variable there), one goal on the input [`TASK_INPUT`], one step.
/// `title` names the workflow and the goal's summary; the caller adds what its
/// format carries, then computes the fingerprint.
pub fn single_agent(
    format: &str,
    path: &Path,
    name: &str,
    title: &str,
    system: &str,
) -> Result<Plan, Vec<Diagnostic>> {
    let mut plan = define_workflow(name)
        .name(title)
        .input(TASK_INPUT, None)
        .agent(name, system.replace('$', "$$"))
        .goal(name, format!("${TASK_INPUT}"))
        .goal_agents(&[name])
        // Its answer is the run's output, under the goal's name (as the
        // Agentfile DSL publishes each goal's).
        .step(define_step(name).goal(name).publish(name))
        .commit()?;
    plan.format = format.into();
    plan.path = path.display().to_string();
    if let Some(g) = plan.goals.first_mut() {
        g.reads = vec![TASK_INPUT.to_owned()];
        g.summary = format!("{title} works the task");
    }
    if let Some(a) = plan.agents.first_mut() {
        a.source = PromptSource::File {
            path: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
    }
    Ok(plan)
}
