//! `$variables`, in execution order: what each prompt reads, and whether it
//! exists by then.

use super::definitions::{Defs, Names};
use super::prompts::Prompts;
use super::*;

/// The variable names each goal's and each agent's prompt reads, by index.
pub(super) struct Reads {
    pub(super) goals: Vec<Vec<String>>,
    pub(super) agents: Vec<Vec<String>>,
}

/// Which prompts the walk in execution order reached.
struct Checked {
    goals: Vec<bool>,
    agents: Vec<bool>,
}

impl Validator<'_, '_> {
    /// Check every prompt's `$variables`: those of the goals the steps run in
    /// execution order, then those of whatever never runs.
    pub(super) fn check_variables(
        &mut self,
        defs: &Defs<'_>,
        names: &Names<'_>,
        prompts: &Prompts,
    ) -> Reads {
        let mut reads = Reads {
            goals: vec![Vec::new(); defs.goals.len()],
            agents: vec![Vec::new(); defs.agents.len()],
        };
        let checked = self.check_in_run_order(defs, names, prompts, &mut reads);
        self.check_never_run(defs, names, prompts, &checked, &mut reads);
        reads
    }

    /// Walk the steps in order: a goal sees the inputs, what earlier goals
    /// produced, and inside a LOOP what the body produced last time round.
    fn check_in_run_order(
        &mut self,
        defs: &Defs<'_>,
        names: &Names<'_>,
        prompts: &Prompts,
        reads: &mut Reads,
    ) -> Checked {
        let goals = &defs.goals;
        let mut scope: HashSet<&str> = defs.inputs.iter().map(|i| i.name.name.as_str()).collect();
        let mut checked = Checked {
            goals: vec![false; goals.len()],
            agents: vec![false; defs.agents.len()],
        };
        for (_, s) in &defs.steps {
            let in_loop = s.kind == StepKind::Loop;
            // Inside a loop, every goal of the body may read what the body
            // produced in the previous iteration.
            let carried: HashSet<&str> = if in_loop {
                s.goals
                    .iter()
                    .filter_map(|r| names.goal_index.get(r.name.as_str()))
                    .flat_map(|&n| produced(goals[n].1))
                    .collect()
            } else {
                HashSet::default()
            };
            for r in &s.goals {
                let Some(&n) = names.goal_index.get(r.name.as_str()) else {
                    continue;
                };
                let g = goals[n].1;
                if !checked.goals[n] {
                    checked.goals[n] = true;
                    let iterative = in_loop || g.kind == GoalKind::Converge;
                    let ctx = RefCtx {
                        goal: Some(n),
                        iterative,
                        scope: &scope,
                        carried: &carried,
                        vars: &names.vars,
                        all_names: &names.var_pool,
                        goals,
                        goal_prompts: &prompts.goals,
                    };
                    if let Some(p) = &prompts.goals[n] {
                        reads.goals[n] = self.check_refs(p, &ctx, ("goal", &g.name.name));
                    }
                    for u in &g.using {
                        if let Some(&an) = names.agent_index.get(u.name.as_str())
                            && !checked.agents[an]
                        {
                            checked.agents[an] = true;
                            if let Some(p) = &prompts.agents[an] {
                                reads.agents[an] = self.check_refs(p, &ctx, ("agent", &u.name));
                            }
                        }
                    }
                }
                scope.extend(produced(g));
            }
        }
        checked
    }

    /// Whatever never runs is still checked against every name, and flagged.
    fn check_never_run(
        &mut self,
        defs: &Defs<'_>,
        names: &Names<'_>,
        prompts: &Prompts,
        checked: &Checked,
        reads: &mut Reads,
    ) {
        let goals = &defs.goals;
        let everything: HashSet<&str> = names.vars.keys().copied().collect();
        let none = HashSet::default();
        let ctx = |goal| RefCtx {
            goal,
            iterative: true,
            scope: &everything,
            carried: &none,
            vars: &names.vars,
            all_names: &names.var_pool,
            goals,
            goal_prompts: &prompts.goals,
        };
        for (n, (_, g, _)) in goals.iter().enumerate() {
            if checked.goals[n] || names.goal_index.get(g.name.name.as_str()) != Some(&n) {
                continue;
            }
            self.warning(
                "unused-goal",
                g.name.span,
                format!("goal `{}` is defined but no step runs it", g.name.name),
            )
            .hint = Some("add it to a RUN or LOOP step, or remove it".into());
            if let Some(p) = &prompts.goals[n] {
                reads.goals[n] = self.check_refs(p, &ctx(Some(n)), ("goal", &g.name.name));
            }
        }
        let used_agents: HashSet<&str> = goals
            .iter()
            .flat_map(|(_, g, _)| g.using.iter().map(|u| u.name.as_str()))
            .collect();
        for (n, (_, a)) in defs.agents.iter().enumerate() {
            if checked.agents[n] || names.agent_index.get(a.name.name.as_str()) != Some(&n) {
                continue;
            }
            if !used_agents.contains(a.name.name.as_str()) {
                self.warning(
                    "unused-agent",
                    a.name.span,
                    format!("agent `{}` is defined but no goal uses it", a.name.name),
                )
                .hint = Some(format!(
                    "add `USING {}` to a goal, or remove it",
                    a.name.name
                ));
            }
            if let Some(p) = &prompts.agents[n] {
                reads.agents[n] = self.check_refs(p, &ctx(None), ("agent", &a.name.name));
            }
        }
    }

    /// An input no prompt and no WITHIN reads is flagged.
    pub(super) fn check_unused_inputs(&mut self, defs: &Defs<'_>, reads: &Reads) {
        let mut read_vars: HashSet<String> = HashSet::default();
        for r in reads.goals.iter().chain(reads.agents.iter()) {
            read_vars.extend(r.iter().cloned());
        }
        for l in defs
            .goals
            .iter()
            .filter_map(|(_, g, _)| g.within.as_ref())
            .chain(defs.steps.iter().filter_map(|(_, s)| s.within.as_ref()))
        {
            if let Limit::Var(v) = l {
                read_vars.insert(v.name.clone());
            }
        }
        for i in &defs.inputs {
            if !read_vars.contains(&i.name.name) {
                self.warning(
                    "unused-input",
                    i.name.span,
                    format!("input `{}` is never used", i.name.name),
                )
                .hint = Some(format!(
                    "refer to it as `${}` in a goal or agent prompt, or remove it",
                    i.name.name
                ));
            }
        }
    }

    /// Check every `$name` in a prompt against what exists at this point, and
    /// return the names it reads.
    pub(super) fn check_refs(
        &mut self,
        p: &Prompt,
        ctx: &RefCtx<'_, '_>,
        owner: (&str, &str),
    ) -> Vec<String> {
        let Some((fid, offset, end)) = p.at else {
            return Vec::new();
        };
        // Scan the raw source so positions are exact; for inline strings that is
        // the text between the quotes (escapes never contain `$name`).
        let raw = self.map.snippet(Span::new(fid, offset, end));
        let known = |n: &str| ctx.vars.contains_key(n);
        let refs: Vec<(&str, Span)> = template::pieces(raw, known)
            .into_iter()
            .filter_map(|piece| match piece {
                template::Piece::Var { name, start, end } => {
                    Some((name, Span::new(fid, offset + start, offset + end)))
                }
                template::Piece::Literal(_) => None,
            })
            .collect();
        let refs: Vec<(String, Span)> = refs.into_iter().map(|(n, s)| (n.to_owned(), s)).collect();
        let owner = format!("{} `{}`", owner.0, owner.1);
        let mut reads: Vec<String> = Vec::new();
        let mut read_set: HashSet<String> = HashSet::default();
        // Whether producer goal N reads this goal's output, asked once per N.
        let mut cyclic_with: HashMap<usize, bool> = HashMap::default();
        // What this goal produces, built on the first cycle check only.
        let mut me_produced: Option<HashSet<&str>> = None;
        for (name, span) in refs {
            let name = name.as_str();
            if read_set.insert(name.to_owned()) {
                reads.push(name.to_owned());
            }
            let def = ctx.vars.get(name).copied();
            let own = def
                .and_then(VarDef::goal)
                .is_some_and(|g| Some(g) == ctx.goal);
            if own {
                if !ctx.iterative {
                    self.error(
                        "circular-reference",
                        span,
                        format!("{owner} reads its own output `${name}`, which does not exist until the goal has run"),
                    )
                    .hint = Some("run it in a LOOP, make it a CONVERGE goal, or read another goal's output".into());
                }
                continue;
            }
            if ctx.scope.contains(name) || ctx.carried.contains(name) {
                continue;
            }
            match def {
                Some(def) => {
                    let producer = def
                        .goal()
                        .map(|g| ctx.goals[g].1.name.name.as_str())
                        .unwrap_or("?");
                    // Does the producer in turn read us? Then it is a cycle.
                    let cyclic = match (def.goal(), ctx.goal) {
                        (Some(pg), Some(me)) => match cyclic_with.get(&pg) {
                            Some(&c) => c,
                            None => {
                                let mine = me_produced
                                    .get_or_insert_with(|| produced(ctx.goals[me].1).collect());
                                let theirs = self.goal_refs.entry(pg).or_insert_with(|| {
                                    ctx.goal_prompts[pg].as_ref().map_or_else(
                                        HashSet::default,
                                        |pp| {
                                            template::references(&pp.text, |n| {
                                                ctx.vars.contains_key(n)
                                            })
                                            .into_iter()
                                            .map(str::to_owned)
                                            .collect()
                                        },
                                    )
                                });
                                // Walk the smaller side: both can be large.
                                let c = if theirs.len() <= mine.len() {
                                    theirs.iter().any(|r| mine.contains(r.as_str()))
                                } else {
                                    mine.iter().any(|m| theirs.contains(*m))
                                };
                                cyclic_with.insert(pg, c);
                                c
                            }
                        },
                        _ => false,
                    };
                    if cyclic {
                        self.error(
                            "circular-reference",
                            span,
                            format!("{owner} reads `${name}` from goal `{producer}`, which in turn reads this goal's output"),
                        )
                        .note(def.span(), "defined here");
                        let d = self.diags.last_mut().expect("pushed");
                        d.hint = Some("break the cycle: one of the two must run first without the other's output, or put both in a LOOP".into());
                    } else {
                        self.error(
                            "use-before-definition",
                            span,
                            format!(
                                "{owner} reads `${name}` before goal `{producer}` has produced it"
                            ),
                        )
                        .note(def.span(), "defined here");
                        let d = self.diags.last_mut().expect("pushed");
                        d.hint = Some(format!(
                            "run `{producer}` in an earlier step, or earlier in this step"
                        ));
                    }
                }
                None if name.len() > template::MAX_NAME_LEN => {
                    // No such name can be defined; and a megabyte-long name
                    // is not worth repeating in the message.
                    let short: String = name.chars().take(40).collect();
                    self.error(
                        "undefined-variable",
                        span,
                        format!(
                            "undefined variable `${short}…` ({} bytes long) in {owner}",
                            name.len()
                        ),
                    )
                    .hint = Some(format!(
                        "names are at most {} bytes; write `$$` for a literal `$`",
                        template::MAX_NAME_LEN
                    ));
                }
                None => {
                    let d = self.error(
                        "undefined-variable",
                        span,
                        format!("undefined variable `${name}` in {owner}"),
                    );
                    d.hint = Some(format!(
                        "declare it with `INPUT {name}`, or write `$${name}` for a literal `${name}`"
                    ));
                    d.suggest_later(name, ctx.all_names, "$");
                }
            }
        }
        reads
    }
}

/// Everything `check_refs` needs to know about where it is.
pub(super) struct RefCtx<'a, 't> {
    /// The goal whose prompt (or whose agent's prompt) is checked.
    goal: Option<usize>,
    /// Inside a LOOP or CONVERGE, where reading one's own output is fine.
    iterative: bool,
    scope: &'a HashSet<&'t str>,
    carried: &'a HashSet<&'t str>,
    vars: &'a HashMap<&'t str, VarDef>,
    /// Every variable name, for did-you-mean hints.
    all_names: &'a Arc<[String]>,
    goals: &'a [(usize, &'t ast::Goal, Option<Supervision>)],
    goal_prompts: &'a [Option<Prompt>],
}

/// The variables a goal produces: its name and its fields.
pub(super) fn produced(g: &ast::Goal) -> impl Iterator<Item = &str> {
    std::iter::once(g.name.name.as_str()).chain(g.outputs.iter().map(|o| o.name.as_str()))
}
