//! A loop node: its body again while a condition holds, until it converges, or
//! up to its limit.

use super::*;

impl<'a> RunCx<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_loop(
        &self,
        f: Frame<'_>,
        node: &Node,
        until: &LoopUntil,
        limit: u32,
        body: &Node,
        path: &str,
        scope: &Scope,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let converging = matches!(until, LoopUntil::Converged);
        let mut previous: Option<Vec<String>> = None;
        let mut out = Outcome::default();
        for it in 1..=limit {
            if let LoopUntil::While { expr } = until {
                // Before the first round, a condition about the body's own
                // results cannot be judged yet: the body runs once.
                let reads_body = it == 1
                    && expr.paths().iter().any(|p| match &p.root {
                        Root::Step(id) => find_in(body, id),
                        _ => false,
                    });
                if !reads_body && !truthy(&expr.eval(&*env)) {
                    out.loop_end = Some((it - 1, LoopStop::Explicit));
                    return Ok(out);
                }
            }
            let iter_path = format!("{path}#{it}");
            if !self.journal().iterations.contains(&iter_path)
                && !self.replay_only.load(Ordering::Relaxed)
            {
                let mut s = scope.clone();
                s.iteration = Some(it);
                s.node = Some(iter_path.clone());
                s.goal = None;
                self.emit(&s, EventBody::LoopIteration { limit });
            }
            let frame = Frame {
                iteration: if f.depth == 1 || converging {
                    Some(it)
                } else {
                    f.iteration
                },
                in_loop: converging,
                ..f
            };
            let r = self.run_body(frame, body, iter_path, env).await?;
            out.tool_calls += r.tool_calls;
            out.value = r.value;
            if converging {
                let stop = if r.done {
                    Some(LoopStop::Explicit)
                } else if r.tool_calls == 0 {
                    Some(LoopStop::NoToolCalls)
                } else if previous.as_ref() == Some(&r.texts) {
                    Some(LoopStop::Unchanged)
                } else {
                    None
                };
                if let Some(stop) = stop {
                    out.loop_end = Some((it, stop));
                    return Ok(out);
                }
                previous = Some(r.texts);
            }
        }
        if let LoopUntil::While { expr } = until {
            if !truthy(&expr.eval(&*env)) {
                out.loop_end = Some((limit, LoopStop::Explicit));
                return Ok(out);
            }
            return Err(Stop::LoopLimit(format!(
                "loop `{path}` reached its maximum of {limit} iterations with `{expr}` still true"
            )));
        }
        let name = f.step.filter(|_| f.depth == 1).unwrap_or(&node.id);
        let msg =
            format!("loop `{name}` reached its limit of {limit} iterations without converging");
        let quiet = self.replay_only.load(Ordering::Relaxed);
        let mut s = scope.clone();
        s.node = Some(path.to_owned());
        if !quiet {
            self.emit(
                &s,
                EventBody::Warning {
                    message: msg.clone(),
                },
            );
        }
        out.loop_end = Some((limit, LoopStop::Limit));
        if self.budget.limits().strict_convergence {
            // The step still completes (its record says it hit the limit).
            if f.depth == 1 && !quiet {
                self.emit_complete(true, node, scope, &out);
            }
            return Err(Stop::LoopLimit(msg));
        }
        Ok(out)
    }
}

/// Whether `id` names a node inside `body`.
pub(super) fn find_in(body: &Node, id: &str) -> bool {
    let mut found = false;
    body.walk(&mut |n| found |= n.id == id);
    found
}
