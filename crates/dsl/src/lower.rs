//! The Agentfile DSL's steps as a step graph.
//!
//! RUN is a sequence of goal nodes; LOOP is a loop node (until converged, at
//! most WITHIN) around such a sequence. Each goal node lists the earlier
//! outputs its prompt shows as context: the goals before it in its step, else
//! the last goal of the step before — the DSL's rule since its first release,
//! decided here once so the executor needs no knowledge of steps.

use agentfile_plan::{GoalNode, Limit, LoopUntil, Node, NodeKind, StepDef, StepKind};

pub fn graph(steps: &[StepDef]) -> Node {
    let mut nodes = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let previous_last = i
            .checked_sub(1)
            .and_then(|p| steps[p].goals.last())
            .cloned();
        let goals = step
            .goals
            .iter()
            .enumerate()
            .map(|(pos, g)| {
                let context = if pos == 0 {
                    previous_last.iter().cloned().collect()
                } else {
                    step.goals[..pos].to_vec()
                };
                let mut n = Node::new(
                    g.clone(),
                    NodeKind::Goal(GoalNode {
                        goal: g.clone(),
                        context,
                        inputs: None,
                    }),
                );
                n.publish = Some(g.clone());
                n
            })
            .collect();
        let body = Node::new(
            step.name.clone(),
            NodeKind::Sequence {
                nodes: goals,
                start: None,
            },
        );
        nodes.push(match step.kind {
            StepKind::Run => body,
            StepKind::Loop => Node::new(
                step.name.clone(),
                NodeKind::Loop {
                    until: LoopUntil::Converged,
                    max: step.within.clone().unwrap_or(Limit::Count { count: 1 }),
                    body: Box::new(body),
                },
            ),
        });
    }
    Node::new(String::new(), NodeKind::Sequence { nodes, start: None })
}
