//! Definitions in file order, and the namespaces they fill: NAME and SECURITY
//! once each, one meaning per agent, goal and step name, and one per
//! `$variable` (inputs, goals, output fields).

use super::*;

/// The items of a file, sorted by kind, each with its position in the file.
pub(super) struct Defs<'t> {
    pub(super) name: Option<(String, Span)>,
    pub(super) inputs: Vec<&'t ast::Input>,
    pub(super) agents: Vec<(usize, &'t ast::Agent)>,
    /// With the supervision that applies to each (its own, or the global one
    /// given above it).
    pub(super) goals: Vec<(usize, &'t ast::Goal, Option<Supervision>)>,
    pub(super) steps: Vec<(usize, &'t ast::Step)>,
    pub(super) security: Option<(String, Span)>,
}

/// Who each name means, and the did-you-mean candidates of each namespace.
pub(super) struct Names<'t> {
    pub(super) vars: HashMap<&'t str, VarDef>,
    pub(super) agent_index: HashMap<&'t str, usize>,
    pub(super) goal_index: HashMap<&'t str, usize>,
    pub(super) agent_pool: Arc<[String]>,
    pub(super) goal_pool: Arc<[String]>,
    pub(super) var_pool: Arc<[String]>,
    pub(super) input_pool: Arc<[String]>,
    pub(super) input_by_name: HashMap<&'t str, &'t ast::Input>,
    /// Names whose definitions did not parse: references to them are not
    /// reported again.
    pub(super) broken: HashSet<&'t str>,
}

impl Validator<'_, '_> {
    /// Collect the definitions in file order, reporting a repeated or empty
    /// NAME, a repeated SECURITY and an unknown security mode.
    pub(super) fn collect<'t>(&mut self, tree: &'t ast::File) -> Defs<'t> {
        let mut defs = Defs {
            name: None,
            inputs: Vec::new(),
            agents: Vec::new(),
            goals: Vec::new(),
            steps: Vec::new(),
            security: None,
        };
        let mut global_supervision: Option<Supervision> = None;
        for (pos, item) in tree.items.iter().enumerate() {
            match item {
                Item::Name { value, keyword } => {
                    self.collect_name(&mut defs.name, value, keyword.to(value.span()))
                }
                Item::Input(i) => defs.inputs.push(i),
                Item::Agent(a) => defs.agents.push((pos, a)),
                Item::Goal(g) => {
                    let sup = g.supervision.map(|s| s.0).or(global_supervision);
                    defs.goals.push((pos, g, sup))
                }
                Item::Step(s) => defs.steps.push((pos, s)),
                Item::Supervision { mode, .. } => global_supervision = Some(*mode),
                Item::Security { mode, keyword } => {
                    self.collect_security(&mut defs.security, mode, keyword.to(mode.span))
                }
            }
        }
        if defs.name.is_none() {
            let span = Span::new(self.file, 0, 0);
            self.error("missing-name", span, "the workflow has no NAME")
                .hint = Some("add a line such as `NAME my-workflow` at the top".into());
        }
        defs
    }

    fn collect_name(&mut self, name: &mut Option<(String, Span)>, value: &ast::Value, span: Span) {
        if let Some((_, first)) = name {
            let first = *first;
            self.error("duplicate-name", span, "NAME is given more than once")
                .note(first, "first given here");
            let d = self.diags.last_mut().expect("pushed");
            d.hint = Some("a workflow has exactly one NAME; remove this line".into());
        } else {
            *name = Some((value.as_str().to_owned(), span));
            if value.as_str().trim().is_empty() {
                self.error("syntax", span, "the workflow NAME is empty");
            }
        }
    }

    fn collect_security(
        &mut self,
        security: &mut Option<(String, Span)>,
        mode: &ast::Ident,
        span: Span,
    ) {
        if let Some((_, first)) = security {
            let first = *first;
            self.error("duplicate-name", span, "SECURITY is given more than once")
                .note(first, "first given here");
            return;
        }
        if !SECURITY_MODES.contains(&mode.name.as_str()) {
            let hint = match suggest(&mode.name, SECURITY_MODES.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("known modes: {}", SECURITY_MODES.join(", ")),
            };
            self.warning(
                "unknown-security-mode",
                mode.span,
                format!("unknown security mode `{}`", mode.name),
            )
            .hint = Some(hint);
        }
        *security = Some((mode.name.clone(), span));
    }

    /// Fill the namespaces, reporting every name defined twice (or, among
    /// variables, meaning two things).
    pub(super) fn namespaces<'t>(&mut self, tree: &'t ast::File, defs: &Defs<'t>) -> Names<'t> {
        let mut vars: HashMap<&'t str, VarDef> = HashMap::default();
        for i in &defs.inputs {
            self.define_var(
                &mut vars,
                &i.name,
                VarDef::Input { span: i.name.span },
                "input",
            );
        }
        let mut agent_index: HashMap<&'t str, usize> = HashMap::default();
        for (n, (_, a)) in defs.agents.iter().enumerate() {
            if let Some(&first) = agent_index.get(a.name.name.as_str()) {
                let first = defs.agents[first].1.name.span;
                self.duplicate(&a.name, first, "agent");
            } else {
                agent_index.insert(&a.name.name, n);
            }
        }
        let goal_index = self.define_goals(defs, &mut vars);
        // Did-you-mean candidates, one shared list per namespace, searched only
        // for the diagnostics that are shown.
        let pool = |names: Vec<&str>| -> Arc<[String]> {
            names
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
                .into()
        };
        Names {
            agent_pool: pool(agent_index.keys().copied().collect()),
            goal_pool: pool(goal_index.keys().copied().collect()),
            var_pool: pool(vars.keys().copied().collect()),
            input_pool: pool(defs.inputs.iter().map(|i| i.name.name.as_str()).collect()),
            input_by_name: defs
                .inputs
                .iter()
                .map(|i| (i.name.name.as_str(), *i))
                .collect(),
            broken: tree.broken.iter().map(String::as_str).collect(),
            vars,
            agent_index,
            goal_index,
        }
    }

    /// Name the goals, and define each goal's output and its `-> fields` as
    /// variables.
    fn define_goals<'t>(
        &mut self,
        defs: &Defs<'t>,
        vars: &mut HashMap<&'t str, VarDef>,
    ) -> HashMap<&'t str, usize> {
        let goals = &defs.goals;
        let mut goal_index: HashMap<&'t str, usize> = HashMap::default();
        let mut field_owner: HashMap<&'t str, (usize, Span)> = HashMap::default();
        for (n, (_, g, _)) in goals.iter().enumerate() {
            if let Some(&first) = goal_index.get(g.name.name.as_str()) {
                let first = goals[first].1.name.span;
                self.duplicate(&g.name, first, "goal");
                continue;
            }
            goal_index.insert(&g.name.name, n);
            self.define_var(
                vars,
                &g.name,
                VarDef::Goal {
                    goal: n,
                    span: g.name.span,
                },
                "goal",
            );
            let mut seen: HashSet<&str> = HashSet::default();
            for f in &g.outputs {
                if !seen.insert(&f.name) {
                    self.error(
                        "duplicate-name",
                        f.span,
                        format!("output field `{}` is listed twice", f.name),
                    );
                    continue;
                }
                if let Some(&(owner, other_span)) = field_owner.get(f.name.as_str()) {
                    let other = goals[owner].1.name.name.clone();
                    self.warning(
                        "duplicate-output",
                        f.span,
                        format!("output field `{}` is also set by goal `{other}`; the later value replaces the earlier", f.name),
                    )
                    .note(other_span, "also declared here");
                    continue;
                }
                field_owner.insert(&f.name, (n, f.span));
                self.define_var(
                    vars,
                    f,
                    VarDef::Field {
                        goal: n,
                        span: f.span,
                    },
                    "output field",
                );
            }
        }
        goal_index
    }

    /// Step names are a namespace of their own.
    pub(super) fn check_step_names(&mut self, defs: &Defs<'_>) {
        let mut step_names: HashMap<&str, Span> = HashMap::default();
        for (_, s) in &defs.steps {
            if let Some(&first) = step_names.get(s.name.name.as_str()) {
                self.duplicate(&s.name, first, "step");
            } else {
                step_names.insert(&s.name.name, s.name.span);
            }
        }
    }

    /// A workflow without a RUN or LOOP step would do nothing.
    pub(super) fn check_has_steps(&mut self, tree: &ast::File, defs: &Defs<'_>) {
        if tree.steps_attempted != 0 {
            return;
        }
        let span = defs
            .name
            .as_ref()
            .map(|n| n.1)
            .or_else(|| tree.items.first().map(item_span))
            .unwrap_or(Span::new(self.file, 0, 0));
        let hint = match defs.goals.first() {
            Some((_, g, _)) => format!("add `RUN main USING {}` to run it", g.name.name),
            None => "define a GOAL and add `RUN main USING <goal>`".to_owned(),
        };
        self.error(
            "no-steps",
            span,
            "the workflow has no RUN or LOOP step, so it would do nothing",
        )
        .hint = Some(hint);
    }
}
