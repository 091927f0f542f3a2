//! Which values an expression may read where: the scope analysis every front
//! end shares (the builder's `commit()`, WORKFLOW.md, workflow.yaml).
//!
//! `$steps.<id>` must name a step that has finished by the time the expression
//! runs: one before it in its own list or in an enclosing list, a branch of a
//! parallel that joined before it, or a loop body's step (inside the loop, and
//! after it). Steps of a map's body are visible only inside that body (each
//! item has its own), and sibling branches of a parallel never see each other.
//! `$item` and `$index` exist only inside a map; `$input.<name>` must be a
//! declared input.

use super::expr::{Path, Root};
use super::graph::{GraphError, Node, NodeKind};
use super::{LoopUntil, Plan};

pub fn check(plan: &Plan) -> Vec<GraphError> {
    let mut cx = Cx {
        plan,
        errors: Vec::new(),
    };
    let mut visible = Visible::default();
    cx.node_children(&plan.graph, "", &mut visible, false);
    if let Some(r) = &plan.result {
        cx.paths("", "result", &r.paths(), &visible, false);
    }
    cx.errors
}

struct Cx<'p> {
    plan: &'p Plan,
    errors: Vec<GraphError>,
}

fn join(parent: &str, id: &str) -> String {
    if parent.is_empty() {
        id.to_owned()
    } else {
        format!("{parent}/{id}")
    }
}

/// Every id in a subtree (what becomes visible when it completes).
fn ids<'n>(n: &'n Node, out: &mut Vec<&'n str>) {
    out.push(&n.id);
    if matches!(n.kind, NodeKind::Map { .. } | NodeKind::Subworkflow { .. }) {
        return;
    }
    for c in n.children() {
        ids(c, out);
    }
}

/// The step ids visible at a point, as a stack: a nested scope marks its
/// height and truncates back to it, so entering one costs nothing and a
/// lookup is a hash probe (a workflow of 20,000 steps is checked in linear
/// time, not by copying and scanning a list per step).
#[derive(Default)]
struct Visible<'n> {
    stack: Vec<&'n str>,
    count: std::collections::HashMap<&'n str, u32>,
}

impl<'n> Visible<'n> {
    fn contains(&self, id: &str) -> bool {
        self.count.contains_key(id)
    }

    fn push(&mut self, id: &'n str) {
        self.stack.push(id);
        *self.count.entry(id).or_default() += 1;
    }

    fn extend(&mut self, ids: impl IntoIterator<Item = &'n str>) {
        for id in ids {
            self.push(id);
        }
    }

    fn mark(&self) -> usize {
        self.stack.len()
    }

    fn reset(&mut self, mark: usize) {
        while self.stack.len() > mark {
            if let Some(id) = self.stack.pop()
                && let Some(c) = self.count.get_mut(id)
            {
                *c -= 1;
                if *c == 0 {
                    self.count.remove(id);
                }
            }
        }
    }

    /// What a completed subtree makes visible.
    fn add_subtree(&mut self, n: &'n Node) {
        let mut out = Vec::new();
        ids(n, &mut out);
        self.extend(out);
    }
}

impl<'p> Cx<'p> {
    /// Whether a bare `$name` names something a run can hold: a declared
    /// input (read as a variable), a goal (its text) or a goal's structured
    /// field. Only goals set variables; nothing else does.
    fn is_variable(&self, name: &str) -> bool {
        self.variables().any(|v| v == name)
    }

    fn variables(&self) -> impl Iterator<Item = &'p str> + '_ {
        let plan = self.plan;
        plan.inputs
            .iter()
            .map(|i| i.name.as_str())
            .chain(plan.goals.iter().map(|g| g.name.as_str()))
            .chain(
                plan.goals
                    .iter()
                    .flat_map(|g| g.outputs.iter().map(String::as_str)),
            )
    }

    fn paths(&mut self, path: &str, what: &str, paths: &[&Path], visible: &Visible, in_map: bool) {
        for p in paths {
            let problem = match &p.root {
                Root::Step(id) if !visible.contains(id) => Some((
                    "unknown-step-reference",
                    format!("{what} reads `{p}`, but no step `{id}` has finished by then"),
                )),
                Root::Item | Root::Index if !in_map => Some((
                    "item-outside-map",
                    format!("{what} reads `{p}`, which exists only inside a map step"),
                )),
                Root::Var(name) if !self.is_variable(name) => Some((
                    "unknown-variable",
                    match super::diag::suggest(name, self.variables()) {
                        Some(near) => format!(
                            "{what} reads `${name}`, which is not an input, a step or a variable; did you mean `${near}`?"
                        ),
                        None => format!(
                            "{what} reads `${name}`, which is not an input, a step or a variable (paths start with `$input.`, `$steps.`, `$item` or `$index`)"
                        ),
                    },
                )),
                Root::Input => match p.fields.first() {
                    Some(name)
                        if !self.plan.inputs.is_empty()
                            && !self.plan.inputs.iter().any(|i| &i.name == name) =>
                    {
                        Some((
                            "unknown-input",
                            format!("{what} reads `{p}`, but the workflow has no input `{name}`"),
                        ))
                    }
                    _ => None,
                },
                _ => None,
            };
            if let Some((code, message)) = problem {
                let root = match &p.root {
                    Root::Step(id) => format!("$steps.{id}"),
                    Root::Item => "$item".to_owned(),
                    Root::Index => "$index".to_owned(),
                    Root::Input => match p.fields.first() {
                        Some(f) => format!("$input.{f}"),
                        None => "$input".to_owned(),
                    },
                    Root::Var(v) => format!("${v}"),
                };
                self.errors.push(GraphError {
                    path: path.to_owned(),
                    code,
                    message,
                    subject: Some(root),
                });
            }
        }
    }

    /// A container's children, in order, each seeing what came before.
    fn node_children(&mut self, n: &'p Node, path: &str, visible: &mut Visible<'p>, in_map: bool) {
        if let NodeKind::Sequence { nodes, .. } = &n.kind {
            for c in nodes {
                self.node(c, &join(path, &c.id), visible, in_map);
            }
        } else {
            self.node(n, &join(path, &n.id), visible, in_map);
        }
    }

    fn node(&mut self, n: &'p Node, path: &str, visible: &mut Visible<'p>, in_map: bool) {
        match &n.kind {
            NodeKind::Tool { args, .. } | NodeKind::Command { args, .. } => {
                self.paths(path, "an argument", &args.paths(), visible, in_map)
            }
            NodeKind::Shell { args, env, .. } => {
                let ps: Vec<&Path> = args
                    .iter()
                    .chain(env.values())
                    .flat_map(|a| a.paths())
                    .collect();
                self.paths(path, "a script argument", &ps, visible, in_map);
            }
            NodeKind::WriteFile {
                content: Some(c), ..
            } => self.paths(path, "the content", &c.paths(), visible, in_map),
            NodeKind::ReadFiles { .. } | NodeKind::WriteFile { .. } => {}
            NodeKind::Goal(g) => {
                if let Some(i) = &g.inputs {
                    self.paths(path, "an input of the goal", &i.paths(), visible, in_map);
                }
            }
            NodeKind::Branch { arms, .. } => {
                for a in arms {
                    self.paths(path, "the condition", &a.when.paths(), visible, in_map);
                }
            }
            NodeKind::Approval(a) => {
                self.paths(path, "the prompt", &a.prompt.paths(), visible, in_map)
            }
            NodeKind::Subworkflow { inputs, plan } => {
                self.paths(path, "an input", &inputs.paths(), visible, in_map);
                for e in check(plan) {
                    self.errors.push(GraphError {
                        path: join(path, &e.path),
                        ..e
                    });
                }
            }
            NodeKind::Sequence { .. } => {
                let m = visible.mark();
                self.node_children(n, path, visible, in_map);
                visible.reset(m);
            }
            NodeKind::Parallel { branches } => {
                for b in branches {
                    let m = visible.mark();
                    self.node(b, &join(path, &b.id), visible, in_map);
                    visible.reset(m);
                }
            }
            NodeKind::Map { over, body, .. } => {
                self.paths(path, "`over`", &over.paths(), visible, in_map);
                let m = visible.mark();
                self.node_children(body, path, visible, true);
                visible.reset(m);
            }
            NodeKind::Loop { until, body, .. } => {
                // The condition and later iterations see the body's outputs.
                let m = visible.mark();
                visible.add_subtree(body);
                if let LoopUntil::While { expr } = until {
                    self.paths(path, "`while`", &expr.paths(), visible, in_map);
                }
                self.node_children(body, path, visible, in_map);
                visible.reset(m);
            }
            NodeKind::Suspend { .. } => {}
        }
        // A compensation runs in the scope its step completed in (as the
        // executor keeps it): what was visible before the step, the step's
        // own output and what completed inside it.
        if let Some(c) = &n.compensation {
            let m = visible.mark();
            visible.add_subtree(n);
            self.node(c, &join(path, &c.id), visible, in_map);
            visible.reset(m);
        }
        visible.add_subtree(n);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::{define_step, define_workflow};

    fn echo() -> serde_json::Value {
        json!({"command": "echo"})
    }

    /// The validator allows a compensation what the executor gives it: the
    /// workflow's inputs, the steps before its step, its step's output and
    /// what completed inside it; a step that runs later is an error.
    #[test]
    fn a_compensation_reads_the_scope_its_step_completed_in() {
        let saga = |reads: serde_json::Value| {
            define_workflow("w")
                .input("customerId", None)
                .step(define_step("reserve").tool("bash", echo()))
                .step(
                    define_step("charge")
                        .parallel([define_step("card").tool("bash", echo())])
                        .compensation(define_step("refund").tool("bash", reads)),
                )
                .step(define_step("ship").tool("bash", echo()))
                .commit()
        };
        let ok = saga(json!({
            "command": "echo",
            "a": "$workflow.inputs.customerId",
            "b": "$input.customerId",
            "c": "$steps.reserve",
            "d": "$steps.charge",
            "e": "$steps.card",
        }));
        assert!(ok.is_ok(), "{:?}", ok.err());
        let bad = saga(json!({"command": "echo", "a": "$steps.ship"})).unwrap_err();
        assert!(
            bad.iter()
                .any(|d| d.code == "unknown-step-reference" && d.message.contains("$steps.ship")),
            "{bad:?}"
        );
    }
}
