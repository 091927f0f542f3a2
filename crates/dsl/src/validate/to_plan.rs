//! Lowering a valid file to its [`Plan`].

use super::definitions::{Defs, Names};
use super::prompts::Prompts;
use super::variables::Reads;
use super::*;

impl Validator<'_, '_> {
    /// The plan of a file with no errors.
    pub(super) fn to_plan(
        &self,
        defs: Defs<'_>,
        names: &Names<'_>,
        prompts: Prompts,
        mut reads: Reads,
    ) -> Plan {
        let input_defaults: HashMap<&str, Option<&str>> = defs
            .inputs
            .iter()
            .map(|i| {
                (
                    i.name.name.as_str(),
                    i.default.as_ref().map(ast::Value::as_str),
                )
            })
            .collect();
        let lower_limit = |l: &Limit| lower_limit(l, &input_defaults);
        // A goal also reads what its agents' personas read.
        for (n, (_, g, _)) in defs.goals.iter().enumerate() {
            let mut have: HashSet<String> = reads.goals[n].iter().cloned().collect();
            for u in &g.using {
                if let Some(&an) = names.agent_index.get(u.name.as_str()) {
                    for r in &reads.agents[an] {
                        if have.insert(r.clone()) {
                            reads.goals[n].push(r.clone());
                        }
                    }
                }
            }
        }
        let plan_agents = plan_agents(&defs, prompts.agents, reads.agents);
        let plan_goals = defs
            .goals
            .iter()
            .zip(prompts.goals)
            .zip(reads.goals)
            .filter_map(|(((_, g, sup), p), reads)| {
                let p = p?;
                Some(plan::GoalDef {
                    name: g.name.name.clone(),
                    kind: match g.kind {
                        GoalKind::Goal => plan::GoalKind::Goal,
                        GoalKind::Converge => plan::GoalKind::Converge,
                    },
                    summary: summary(&p.text),
                    outcome: p.text,
                    source: p.source,
                    agents: g.using.iter().map(|u| u.name.clone()).collect(),
                    outputs: g.outputs.iter().map(|o| o.name.clone()).collect(),
                    reads,
                    within: g.within.as_ref().and_then(lower_limit),
                    supervision: *sup,
                    brief: None,
                    produces: None,
                })
            })
            .collect();
        let plan_steps: Vec<plan::StepDef> = defs
            .steps
            .iter()
            .map(|(_, s)| plan::StepDef {
                name: s.name.name.clone(),
                kind: match s.kind {
                    StepKind::Run => plan::StepKind::Run,
                    StepKind::Loop => plan::StepKind::Loop,
                },
                goals: s.goals.iter().map(|g| g.name.clone()).collect(),
                within: s.within.as_ref().and_then(lower_limit),
            })
            .collect();
        let graph = crate::lower::graph(&plan_steps);
        Plan {
            schema_version: plan::PLAN_SCHEMA_VERSION,
            name: defs.name.map(|n| n.0).unwrap_or_default(),
            id: None,
            description: None,
            format: "agentfile".into(),
            path: self.map.file(self.file).path.display().to_string(),
            inputs: defs
                .inputs
                .iter()
                .map(|i| plan::InputDef {
                    name: i.name.name.clone(),
                    default: i.default.as_ref().map(|d| d.as_str().to_owned()),
                    required: i.default.is_none(),
                    env: None,
                })
                .collect(),
            agents: plan_agents,
            goals: plan_goals,
            steps: plan_steps,
            security: defs.security.map(|s| s.0),
            graph,
            timeout_ms: None,
            max_steps: None,
            input_schema: None,
            output_schema: None,
            result: None,
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
        }
        .sealed()
    }
}

fn plan_agents(
    defs: &Defs<'_>,
    prompts: Vec<Option<Prompt>>,
    reads: Vec<Vec<String>>,
) -> Vec<plan::AgentDef> {
    defs.agents
        .iter()
        .zip(prompts)
        .zip(reads)
        .filter_map(|(((_, a), p), reads)| {
            let p = p?;
            Some(plan::AgentDef {
                name: a.name.name.clone(),
                source: p.source,
                prompt: p.text,
                profile: a.requires.as_ref().map(|r| r.value.clone()),
                outputs: a.outputs.iter().map(|o| o.name.clone()).collect(),
                reads,
                card: p.card,
            })
        })
        .collect()
}

/// A WITHIN limit: a count, or an input (with its default, when that is a
/// number).
fn lower_limit(l: &Limit, input_defaults: &HashMap<&str, Option<&str>>) -> Option<plan::Limit> {
    match l {
        Limit::Count { digits, .. } => digits
            .parse()
            .ok()
            .map(|count| plan::Limit::Count { count }),
        Limit::Var(v) => Some(plan::Limit::Input {
            input: v.name.clone(),
            default: input_defaults
                .get(v.name.as_str())
                .copied()
                .flatten()
                .and_then(|d| d.trim().parse().ok()),
        }),
        Limit::Other { .. } => None,
    }
}
