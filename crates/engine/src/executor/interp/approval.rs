//! Approvals: a node's approval class (`gate`), the question to a person
//! (`ask`), and the approval node that routes on the answer.

use super::*;

impl<'a> RunCx<'a> {
    /// An approval node: asks, then routes on the answer.
    pub(super) async fn run_approval(
        &self,
        f: Frame<'_>,
        node: &Node,
        a: &agentfile_plan::ApprovalNode,
        path: &str,
        scope: &Scope,
        env: &Env,
    ) -> Result<Outcome, Stop> {
        let prompt = a.prompt.render(env);
        let d = self
            .ask(
                f,
                node,
                path,
                scope,
                format!(
                    "step `{path}` asks for a decision: {}",
                    agentfile_config::text::truncate(&prompt, 500)
                ),
                prompt,
                true,
                a.timeout_ms,
            )
            .await?;
        let (value, route) = match d {
            Decision::Approved(note) => (
                json!({"approved": true, "decision": "approve", "note": note}),
                a.on_approve.clone(),
            ),
            Decision::Rejected(note) => {
                let Some(to) = a.on_reject.clone() else {
                    return Err(Stop::ApprovalDenied(format!(
                        "step `{path}` was rejected{}",
                        note.map(|n| format!(": {n}")).unwrap_or_default()
                    )));
                };
                (
                    json!({"approved": false, "decision": "reject", "note": note}),
                    Some(to),
                )
            }
            Decision::TimedOut => {
                let route = self.on_timeout(&a.on_timeout, path, "approval")?;
                (json!({"approved": false, "decision": "timeout"}), route)
            }
        };
        Ok(Outcome {
            value: Arc::new(value),
            route,
            ..Outcome::default()
        })
    }

    /// Approval classes: ask before the node runs when its class says so.
    pub(super) async fn gate(
        &self,
        f: Frame<'_>,
        node: &Node,
        path: &str,
        scope: &Scope,
        env: &Env,
    ) -> Result<(), Stop> {
        let goal = match &node.kind {
            NodeKind::Goal(g) => f.plan.goal(&g.goal),
            _ => None,
        };
        let human = match (node.approval, goal.and_then(|g| g.supervision)) {
            (_, Some(Supervision::SupervisedHuman)) | (Some(ApprovalClass::SupervisedHuman), _) => {
                Some(true)
            }
            (_, Some(Supervision::Supervised)) | (Some(ApprovalClass::Supervised), _) => {
                Some(false)
            }
            (Some(ApprovalClass::Always), _) => Some(true),
            (Some(ApprovalClass::OnMutate), _) if node.mutates() => Some(true),
            _ => None,
        };
        let Some(human) = human else {
            return Ok(());
        };
        let (what, outcome) = match goal {
            Some(g) => (
                format!("goal `{}` is supervised: approve it before it runs", g.name),
                env.render(&g.outcome),
            ),
            None => (
                format!(
                    "step `{path}` ({}) needs approval before it runs",
                    node.kind.name()
                ),
                node.name.clone().unwrap_or_else(|| node.id.clone()),
            ),
        };
        let label = match goal {
            Some(g) => format!("goal `{}`", g.name),
            None => format!("step `{path}`"),
        };
        match self
            .ask(f, node, path, scope, what, outcome, human, None)
            .await?
        {
            Decision::Approved(_) => Ok(()),
            Decision::Rejected(note) => Err(Stop::ApprovalDenied(format!(
                "{label} was not approved{}",
                note.map(|n| format!(": {n}")).unwrap_or_default()
            ))),
            Decision::TimedOut => Err(Stop::ApprovalDenied(format!(
                "{label} was not approved in time"
            ))),
        }
    }

    /// Ask for a decision (or take the one the journal holds).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn ask(
        &self,
        f: Frame<'_>,
        node: &Node,
        path: &str,
        scope: &Scope,
        reason: String,
        outcome: String,
        human: bool,
        timeout_ms: Option<u64>,
    ) -> Result<Decision, Stop> {
        let known = self.journal().approvals.get(path).cloned();
        if let Some((approved, note)) = known {
            return Ok(match (approved, note) {
                (true, n) => Decision::Approved(n),
                (false, Some(n)) if n == TIMED_OUT => Decision::TimedOut,
                (false, n) => Decision::Rejected(n),
            });
        }
        let deadline = match self.journal().deadlines.get(path) {
            Some(d) => Some(*d),
            None => timeout_ms.map(|t| now_ms().saturating_add(t)),
        };
        self.emit(
            scope,
            EventBody::ApprovalRequired {
                reason,
                deadline_ms: deadline,
            },
        );
        // Stored before anyone is asked: a decision is recorded against it,
        // possibly by another process reading the store.
        self.svc.bus.flush();
        let req = ApprovalRequest {
            session_id: self.svc.bus.session_id().to_owned(),
            node: path.to_owned(),
            step: f.step.unwrap_or(path).to_owned(),
            // Empty for a step that is not a goal (an approval step, a
            // tool step of class `always`): the question names the step.
            goal: match &node.kind {
                NodeKind::Goal(g) => g.goal.clone(),
                _ => String::new(),
            },
            outcome,
            human,
        };
        let wait = async {
            match deadline {
                Some(d) => {
                    tokio::time::sleep(Duration::from_millis(d.saturating_sub(now_ms()))).await
                }
                None => std::future::pending().await,
            }
        };
        let decision = tokio::select! {
            d = self.svc.approver.decide(&req) => d,
            _ = self.cancel.cancelled() => return Err(self.stop_for_cancel()),
            _ = wait => {
                self.emit(scope, EventBody::ApprovalResolved { approved: false, note: Some(TIMED_OUT.into()) });
                return Ok(Decision::TimedOut);
            }
        };
        match decision {
            Approval::Approved(note) => {
                self.emit(
                    scope,
                    EventBody::ApprovalResolved {
                        approved: true,
                        note: note.clone(),
                    },
                );
                Ok(Decision::Approved(note))
            }
            Approval::Rejected(note) => {
                self.emit(
                    scope,
                    EventBody::ApprovalResolved {
                        approved: false,
                        note: note.clone(),
                    },
                );
                Ok(Decision::Rejected(note))
            }
            Approval::Unavailable(why) => Err(Stop::ApprovalUnavailable(format!(
                "{} needs approval, but {why}",
                match &node.kind {
                    NodeKind::Goal(g) => format!("goal `{}`", g.goal),
                    _ => format!("step `{path}`"),
                }
            ))),
        }
    }

    pub(super) fn on_timeout(
        &self,
        on: &OnTimeout,
        path: &str,
        what: &str,
    ) -> Result<Option<Next>, Stop> {
        match on {
            OnTimeout::Fail => Err(Stop::Failed(format!("{what} `{path}` timed out"))),
            OnTimeout::Cancel => Err(Stop::Cancelled),
            OnTimeout::Continue => Ok(None),
            OnTimeout::Goto(id) => Ok(Some(Next::Node(id.clone()))),
        }
    }
}

pub(super) enum Decision {
    Approved(Option<String>),
    Rejected(Option<String>),
    TimedOut,
}
