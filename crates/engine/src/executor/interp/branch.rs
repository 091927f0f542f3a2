//! A branch node: routes the enclosing sequence by the first arm whose
//! condition holds.

use super::*;

impl<'a> RunCx<'a> {
    /// A branch node: the first arm whose condition holds, else the default.
    pub(super) fn run_branch(
        &self,
        arms: &[agentfile_plan::Arm],
        default: Option<&Next>,
        env: &Env,
    ) -> Result<Outcome, Stop> {
        let chosen = arms.iter().position(|a| truthy(&a.when.eval(env)));
        let route = match chosen {
            Some(i) => arms[i].next.clone(),
            None => default.cloned().unwrap_or(Next::End),
        };
        Ok(Outcome {
            value: Arc::new(json!({
                "arm": chosen,
                "next": route.as_str(),
            })),
            route: Some(route),
            ..Outcome::default()
        })
    }
}
