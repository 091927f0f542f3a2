//! A goal node: one agent conversation, its output in scope as `$steps.<id>`
//! and the DSL's variables.

use super::*;

impl<'a> RunCx<'a> {
    /// A goal's effects on the DSL's variables: `$goal` is its text, each
    /// `-> field` its value.
    pub(super) fn goal_effects(&self, plan: &Plan, goal: &str, c: &Completed, env: &mut Env) {
        env.vars
            .insert(goal.to_owned(), Arc::new(Value::String(c.output.clone())));
        if plan.goal(goal).is_some() {
            for (k, v) in &c.fields {
                env.vars.insert(k.clone(), Arc::new(v.clone()));
            }
        }
    }

    pub(super) async fn run_goal(
        &self,
        f: Frame<'_>,
        g: &agentfile_plan::GoalNode,
        output_schema: Option<&Value>,
        scope: &Scope,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let Some(goal) = f.plan.goal(&g.goal) else {
            return Err(Stop::Failed(format!(
                "plan names an unknown goal `{}`",
                g.goal
            )));
        };
        // Bound inputs are variables of this goal only.
        let frozen;
        let mut bound;
        let work_env: &Env = match &g.inputs {
            Some(inputs) => {
                let values = inputs.eval(&*env);
                frozen = Arc::new(std::mem::take(env));
                bound = Env::child(&frozen);
                if let Value::Object(o) = values {
                    bound
                        .vars
                        .extend(o.into_iter().map(|(k, v)| (k, Arc::new(v))));
                }
                &bound
            }
            None => {
                frozen = Arc::new(Env::default());
                bound = Env::default();
                let _ = (&frozen, &mut bound);
                &*env
            }
        };
        let outcome = work_env.render(&goal.outcome);
        self.emit(
            scope,
            EventBody::GoalStarted {
                outcome: outcome.clone(),
                agents: goal.agents.clone(),
            },
        );
        let answer = match goal.kind {
            GoalKind::Goal => {
                crate::executor::work::work_goal(
                    self,
                    f.plan,
                    work_env,
                    scope,
                    &g.context,
                    goal,
                    output_schema,
                    &outcome,
                    None,
                    f.in_loop,
                )
                .await
            }
            GoalKind::Converge => {
                crate::executor::work::converge(
                    self,
                    f.plan,
                    work_env,
                    scope,
                    &g.context,
                    goal,
                    output_schema,
                    &outcome,
                    f.in_loop,
                )
                .await
            }
        };
        if g.inputs.is_some() {
            drop(bound);
            *env = Env::thaw(frozen);
        }
        let (answer, converged) = answer?;
        let c = Completed {
            output: answer.text.clone(),
            fields: answer.fields.clone(),
            tool_calls: answer.tool_calls,
            done: answer.done,
        };
        self.emit(
            scope,
            EventBody::GoalComplete {
                output: c.output.clone(),
                fields: c.fields.clone(),
                converged,
                tool_calls: c.tool_calls,
                done: c.done,
            },
        );
        // A finished goal is never asked again: its end is stored before the
        // run goes on, so a crash from here resumes after it (the pipelined
        // bus would otherwise still be committing it while the next goal's
        // model call goes out).
        self.svc.bus.flush();
        self.goal_effects(f.plan, &g.goal, &c, env);
        Ok(Outcome {
            value: Arc::new(self.goal_value(f.plan, &g.goal, &c)),
            done: c.done,
            tool_calls: c.tool_calls,
            texts: vec![c.output],
            ..Outcome::default()
        })
    }

    pub(super) fn goal_value(&self, plan: &Plan, goal: &str, c: &Completed) -> Value {
        match plan.goal(goal) {
            Some(g) if !g.outputs.is_empty() => {
                Value::Object(c.fields.clone().into_iter().collect())
            }
            _ => Value::String(c.output.clone()),
        }
    }
}
