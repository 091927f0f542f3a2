//! A subworkflow node: another plan run inside this one, in its own scope.

use super::*;

impl<'a> RunCx<'a> {
    /// A subworkflow node: its plan run in a scope of its own, over the
    /// inputs mapped to it; its value is its `result`, else its last output.
    pub(super) async fn run_subworkflow(
        &self,
        f: Frame<'_>,
        plan: &Plan,
        inputs: &agentfile_plan::expr::ValueExpr,
        path: &str,
        env: &Env,
    ) -> Result<Outcome, Stop> {
        let given = inputs.eval(env);
        let mut sub = Env::default();
        let mut vars = serde_json::Map::new();
        if let Value::Object(o) = given {
            vars = o;
        }
        for i in &plan.inputs {
            if !vars.contains_key(&i.name) {
                match &i.default {
                    Some(d) => {
                        vars.insert(i.name.clone(), Value::String(d.clone()));
                    }
                    None => {
                        return Err(Stop::Failed(format!(
                            "subworkflow `{path}` needs input `{}`, which is not mapped",
                            i.name
                        )));
                    }
                }
            }
        }
        // Its inputs are its variables too (see `Env::var`).
        sub.inputs = Arc::new(Value::Object(vars));
        let frame = Frame {
            plan,
            step: f.step,
            iteration: f.iteration,
            in_loop: false,
            depth: f.depth,
        };
        let out = self
            .run_body(frame, &plan.graph, path.to_owned(), &mut sub)
            .await?;
        let value = match &plan.result {
            Some(r) => Arc::new(r.eval(&sub)),
            None => out.value,
        };
        Ok(Outcome {
            value,
            tool_calls: out.tool_calls,
            ..Outcome::default()
        })
    }
}
