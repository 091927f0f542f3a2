//! Compensation: on failure, the walk back over completed nodes that declared
//! an undo.

use super::*;

impl<'a> RunCx<'a> {
    /// Walk back: the compensations of completed nodes, newest first, each at
    /// most once per failure (a crash during the walk resumes it). Each runs
    /// in the scope its node completed in (the workflow's inputs, the steps
    /// before it, the node's own output), kept when the node completed or,
    /// for a completion replayed from the journal, rebuilt by the replay.
    pub(super) async fn compensate(&self, stop: &Stop) {
        let mut list: Vec<crate::executor::Undo<'a>> =
            std::mem::take(&mut *self.completed.lock().unwrap_or_else(|p| p.into_inner()));
        if list.is_empty() {
            return;
        }
        // Completion order (concurrent branches and items complete in any
        // order; a replay walks them in plan order).
        list.sort_by_key(|u| u.rank);
        let error = describe(stop);
        if self.journal().compensating.is_none() {
            self.emit(
                &Scope::default(),
                EventBody::Compensating {
                    error: error.clone(),
                    nodes: list.iter().rev().map(|u| u.path.clone()).collect(),
                },
            );
        }
        for u in list.into_iter().rev() {
            let Some(comp) = u.node.compensation.as_deref() else {
                continue;
            };
            let path = u.path;
            let comp_path = format!("{path}~undo");
            if self.journal().done.contains_key(&comp_path) {
                continue;
            }
            let mut env = u.scope;
            let frame = Frame {
                plan: self.plan,
                step: path.split('/').next(),
                iteration: None,
                in_loop: false,
                depth: 2,
            };
            if let Err(e) = self
                .run_node(frame, comp, comp_path.clone(), &mut env)
                .await
            {
                let s = Scope {
                    node: Some(comp_path),
                    ..Scope::default()
                };
                self.emit(
                    &s,
                    EventBody::Error {
                        message: format!(
                            "the compensation of `{path}` failed; the walk-back goes on: {}",
                            describe(&e)
                        ),
                    },
                );
            }
        }
    }
}

/// Failures that walk back completed work. A cancellation or a suspension is
/// not a failure; a run that cannot ask for an approval can be resumed.
pub(super) fn compensable(stop: &Stop) -> bool {
    !matches!(
        stop,
        Stop::Cancelled | Stop::Suspended(_) | Stop::ApprovalUnavailable(_)
    )
}

pub(super) fn describe(stop: &Stop) -> String {
    match stop {
        Stop::Failed(e)
        | Stop::ApprovalDenied(e)
        | Stop::ApprovalUnavailable(e)
        | Stop::LoopLimit(e)
        | Stop::Denied(e) => e.clone(),
        Stop::Budget(b) => format!("budget exhausted ({})", b.as_str()),
        Stop::Cancelled => "cancelled".into(),
        Stop::Suspended(_) => "suspended".into(),
    }
}

/// The more serious of two failures (a failure beats a suspension).
pub(super) fn worse(a: Option<Stop>, b: Stop) -> Stop {
    match a {
        None => b,
        Some(Stop::Suspended(_)) => b,
        Some(a) => a,
    }
}
