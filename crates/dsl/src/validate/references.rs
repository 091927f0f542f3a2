//! Names one item gives another: agents in GOAL … USING, goals in RUN and
//! LOOP steps, REQUIRES profiles and WITHIN limits.

use super::definitions::{Defs, Names};
use super::*;

impl Validator<'_, '_> {
    pub(super) fn check_profile(&mut self, req: &ast::Text) {
        let name = req.value.as_str();
        match self.opts.config {
            Some(c) if c.profiles.contains_key(name) => {}
            Some(c) => {
                let known: Vec<&str> = c.profiles.keys().map(String::as_str).collect();
                let hint = match suggest(name, known.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None if known.is_empty() => format!(
                        "the config defines no profiles; add `[profiles.{name}]` with a model"
                    ),
                    None => format!(
                        "defined profiles: {}; or add `[profiles.{name}]`",
                        known.join(", ")
                    ),
                };
                self.error(
                    "unknown-profile",
                    req.span,
                    format!("profile `{name}` is not defined in the config"),
                )
                .hint = Some(hint);
            }
            None => {
                self.warning(
                    "unchecked-profile",
                    req.span,
                    format!("profile `{name}` cannot be checked: no config file was found"),
                )
                .hint = Some(
                    "pass --config agent.toml (or put agent.json / agent.toml in this folder)"
                        .into(),
                );
            }
        }
    }

    pub(super) fn check_limit(
        &mut self,
        l: &Limit,
        inputs: &HashMap<&str, &ast::Input>,
        input_pool: &Arc<[String]>,
        vars: &HashMap<&str, VarDef>,
    ) {
        match l {
            Limit::Count { digits, span } => match digits.parse::<u32>() {
                Ok(0) => {
                    self.error("invalid-within", *span, "WITHIN must be at least 1")
                        .hint = Some("the limit counts iterations; use 1 or more".into());
                }
                Ok(_) => {}
                Err(_) => {
                    self.error(
                        "invalid-within",
                        *span,
                        format!("WITHIN {digits} is too large"),
                    )
                    .hint = Some(format!("the largest limit is {}", u32::MAX));
                }
            },
            Limit::Var(v) => match vars.get(v.name.as_str()) {
                Some(VarDef::Input { .. }) => {
                    let input = inputs.get(v.name.as_str());
                    if let Some(d) = input.and_then(|i| i.default.as_ref()) {
                        let ok = d.as_str().trim().parse::<u32>().is_ok_and(|n| n > 0);
                        if !ok {
                            self.error(
                                "invalid-within",
                                d.span(),
                                format!("input `{}` is a loop limit, but its default `{}` is not a positive whole number", v.name, d.as_str()),
                            )
                            .note(v.span, "used as a limit here");
                            let diag = self.diags.last_mut().expect("pushed");
                            diag.hint = Some("give it a default such as `DEFAULT 5`".into());
                        }
                    }
                }
                Some(other) => {
                    let what = if matches!(other, VarDef::Goal { .. }) {
                        "a goal's output"
                    } else {
                        "an output field"
                    };
                    self.error(
                        "invalid-within",
                        v.span,
                        format!(
                            "WITHIN needs a number or an input, but `${}` is {what}",
                            v.name
                        ),
                    )
                    .note(other.span(), "defined here");
                    let d = self.diags.last_mut().expect("pushed");
                    d.hint = Some(format!(
                        "declare `INPUT max_{} DEFAULT 5` and write `WITHIN $max_{}`",
                        v.name, v.name
                    ));
                }
                None => {
                    let d = self.error(
                        "undefined-variable",
                        v.span,
                        format!("undefined variable `${}`", v.name),
                    );
                    d.hint = Some(format!("declare it with `INPUT {} DEFAULT 5`", v.name));
                    d.suggest_later(&v.name, input_pool, "$");
                }
            },
            Limit::Other { text, span } => {
                let hint = if text.trim().parse::<u32>().is_ok() {
                    format!("write the number without quotes: WITHIN {}", text.trim())
                } else {
                    "write a whole number such as `WITHIN 5`, or `WITHIN $input`".to_owned()
                };
                self.error(
                    "invalid-within",
                    *span,
                    format!("WITHIN `{text}` is not a positive whole number or an input"),
                )
                .hint = Some(hint);
            }
        }
    }

    /// The agents each goal lists in USING: defined, defined above it, and
    /// listed once; and the goal's WITHIN limit.
    pub(super) fn check_using(&mut self, defs: &Defs<'_>, names: &Names<'_>) {
        for (gpos, g, _) in &defs.goals {
            let mut seen: HashSet<&str> = HashSet::default();
            for u in &g.using {
                if !seen.insert(&u.name) {
                    self.error(
                        "duplicate-name",
                        u.span,
                        format!("agent `{}` is listed twice in USING", u.name),
                    );
                    continue;
                }
                match names.agent_index.get(u.name.as_str()) {
                    Some(&n) if defs.agents[n].0 > *gpos => {
                        let def = defs.agents[n].1.name.span;
                        let line = self.line_of(def);
                        self.error(
                            "use-before-definition",
                            u.span,
                            format!("agent `{}` is used before it is defined", u.name),
                        )
                        .note(def, "defined here");
                        let d = self.diags.last_mut().expect("pushed");
                        d.hint = Some(format!("move the AGENT line (line {line}) above this goal"));
                    }
                    Some(_) => {}
                    None if names.broken.contains(u.name.as_str()) => {}
                    None => self.undefined_agent(u, names),
                }
            }
            if let Some(l) = &g.within {
                self.check_limit(l, &names.input_by_name, &names.input_pool, &names.vars);
            }
        }
    }

    fn undefined_agent(&mut self, u: &ast::Ident, names: &Names<'_>) {
        let mut d = Diagnostic::error(
            "undefined-agent",
            u.span,
            format!("undefined agent `{}`", u.name),
        );
        d.suggest_later(&u.name, &names.agent_pool, "");
        d.hint = Some(match () {
            () if names.goal_index.contains_key(u.name.as_str()) => format!(
                "`{}` is a goal; a goal's USING names agents (define one with `AGENT {} \"…\"`)",
                u.name, u.name
            ),
            () => format!(
                "define it with `AGENT {} FROM agents/{}.md`",
                u.name, u.name
            ),
        });
        self.diags.push(d);
    }

    /// The goals each RUN or LOOP step lists: not too many, defined, defined
    /// above it; and the step's WITHIN limit.
    pub(super) fn check_steps(&mut self, defs: &Defs<'_>, names: &Names<'_>) {
        let mut runs = 0usize;
        for (spos, s) in &defs.steps {
            if let Some(extra) = s.goals.get(MAX_STEP_GOALS) {
                self.error(
                    "too-large",
                    extra.span,
                    format!(
                        "step `{}` lists {} goals; a step lists at most {MAX_STEP_GOALS}",
                        s.name.name,
                        s.goals.len()
                    ),
                )
                .hint = Some("each goal of a step is shown the outputs of the goals before it: split the step (`RUN a USING …` then `RUN b USING …`)".into());
                continue;
            }
            runs += s.goals.len();
            if runs > MAX_GOAL_RUNS {
                self.error(
                    "too-large",
                    s.name.span,
                    format!("the steps list more than {MAX_GOAL_RUNS} goals together (a goal in two steps counts twice); this is where the count passes it"),
                )
                .hint = Some("split the workflow into several, or run fewer goals".into());
                break;
            }
            let mut seen: HashSet<&str> = HashSet::default();
            for r in &s.goals {
                if !seen.insert(&r.name) {
                    self.warning(
                        "repeated-goal",
                        r.span,
                        format!(
                            "goal `{}` is listed twice in step `{}`; it will run twice",
                            r.name, s.name.name
                        ),
                    );
                }
                self.check_step_goal(*spos, r, defs, names);
            }
            if let Some(l) = &s.within {
                self.check_limit(l, &names.input_by_name, &names.input_pool, &names.vars);
            }
        }
    }

    /// One goal a step at file position `spos` runs.
    fn check_step_goal(&mut self, spos: usize, r: &ast::Ident, defs: &Defs<'_>, names: &Names<'_>) {
        match names.goal_index.get(r.name.as_str()) {
            Some(&n) if defs.goals[n].0 > spos => {
                let def = defs.goals[n].1.name.span;
                let line = self.line_of(def);
                self.error(
                    "use-before-definition",
                    r.span,
                    format!("goal `{}` is used before it is defined", r.name),
                )
                .note(def, "defined here");
                let d = self.diags.last_mut().expect("pushed");
                d.hint = Some(format!(
                    "move the goal's definition (line {line}) above this step"
                ));
            }
            Some(_) => {}
            None if names.broken.contains(r.name.as_str()) => {}
            None => {
                let mut d = Diagnostic::error(
                    "undefined-goal",
                    r.span,
                    format!("undefined goal `{}`", r.name),
                );
                d.suggest_later(&r.name, &names.goal_pool, "");
                d.hint = Some(match () {
                    () if names.agent_index.contains_key(r.name.as_str()) => format!(
                        "`{}` is an agent; steps run goals (use it in a goal: `GOAL x \"…\" USING {}`)",
                        r.name, r.name
                    ),
                    () => {
                        format!("define it with `GOAL {} \"…\"` above this step", r.name)
                    }
                });
                self.diags.push(d);
            }
        }
    }
}
