//! One goal node's work: its conversation(s) — one, or one per agent and a
//! synthesis — and CONVERGE's rounds.

use super::env::{Env, resolve_limit};
use super::goal::{self, Answer, Conversation};
use super::{RunCx, Stop, prompt};
use agentfile_plan::{GoalDef, GoalKind, Plan};
use agentfile_session::events::Scope;
use agentfile_wire::events::{EventBody, LoopStop};
use std::sync::Arc;

use agentfile_llm::Provider;

/// The goal's conversation(s): one with no agents or one agent, else one per
/// agent concurrently and a synthesis.
#[allow(clippy::too_many_arguments)]
pub(super) async fn work_goal(
    cx: &RunCx<'_>,
    plan: &Plan,
    env: &Env,
    scope: &Scope,
    context_names: &[String],
    goal: &GoalDef,
    output_schema: Option<&serde_json::Value>,
    outcome: &str,
    history: Option<&[String]>,
    in_loop: bool,
) -> Result<(Answer, Option<LoopStop>), Stop> {
    let context = prompt::context(env, context_names, goal);
    let work = Work {
        cx,
        plan,
        env,
        scope,
        goal,
        output_schema,
        outcome,
        user: prompt::user(outcome, &context, history, goal.kind == GoalKind::Converge),
        // Only rounds that were told about `CONVERGED` may answer with it.
        accept_converged: goal.kind == GoalKind::Converge && history.is_some_and(|h| !h.is_empty()),
        in_loop,
    };
    let answer = if goal.agents.len() <= 1 {
        work.alone().await?
    } else {
        work.together().await?
    };
    Ok((answer, None))
}

/// What every conversation of one goal's round shares.
struct Work<'a, 'r> {
    cx: &'a RunCx<'r>,
    plan: &'a Plan,
    env: &'a Env,
    scope: &'a Scope,
    goal: &'a GoalDef,
    output_schema: Option<&'a serde_json::Value>,
    outcome: &'a str,
    /// The user prompt, the same for every agent.
    user: String,
    accept_converged: bool,
    in_loop: bool,
}

impl Work<'_, '_> {
    fn provider(&self, profile: Option<&str>) -> Result<Arc<dyn Provider>, Stop> {
        self.cx
            .svc
            .models
            .provider(profile)
            .map_err(|e| Stop::Failed(e.to_string()))
    }

    /// One conversation: the goal's one agent (if it names one) works it.
    async fn alone(&self) -> Result<Answer, Stop> {
        let (persona, profile, agent_scope, card) =
            match self.goal.agents.first().and_then(|a| self.plan.agent(a)) {
                Some(a) => (
                    Some(self.env.render(&a.prompt)),
                    a.profile.as_deref(),
                    self.scope.with_agent(&a.name),
                    a.card.as_deref(),
                ),
                None => (None, None, self.scope.clone(), None),
            };
        if let Some(a) = &agent_scope.agent {
            self.cx
                .emit(&agent_scope, EventBody::AgentStarted { role: a.clone() });
        }
        self.cx
            .converse(Conversation {
                scope: agent_scope,
                provider: self.provider(profile)?,
                system: prompt::system(self.cx, persona.as_deref(), self.goal, self.in_loop),
                user: self.user.clone(),
                use_tools: true,
                outputs: &self.goal.outputs,
                output_schema: self.output_schema,
                can_signal_done: self.in_loop,
                accept_converged: self.accept_converged,
                card,
            })
            .await
    }

    /// Several agents: each works the goal, then a synthesis reconciles
    /// their answers (unless all of them said `CONVERGED`).
    async fn together(&self) -> Result<Answer, Stop> {
        let (names, answers) = self.each_agent().await?;
        if self.accept_converged && answers.iter().all(|a| a.converged) {
            // Every agent is satisfied with the last round: nothing to reconcile.
            return Ok(Answer {
                converged: true,
                tool_calls: answers.iter().map(|a| a.tool_calls).sum(),
                done: answers.iter().any(|a| a.done),
                ..Answer::default()
            });
        }
        for (name, a) in names.iter().zip(&answers) {
            self.cx.emit(
                &self.scope.with_agent(name),
                EventBody::GoalComplete {
                    output: a.text.clone(),
                    fields: a.fields.clone(),
                    converged: None,
                    tool_calls: a.tool_calls,
                    done: a.done,
                },
            );
        }
        // Stored before the synthesis is asked: a crash from here does not
        // ask the agents again.
        self.cx.svc.bus.flush();
        let mut synthesis = self.synthesize(&names, &answers).await?;
        synthesis.tool_calls = answers.iter().map(|a| a.tool_calls).sum();
        synthesis.done = answers.iter().any(|a| a.done);
        Ok(synthesis)
    }

    /// Each agent works the goal with its own persona, concurrently. The
    /// names and answers of those that finished, in the goal's order.
    async fn each_agent(&self) -> Result<(Vec<String>, Vec<Answer>), Stop> {
        let cx = self.cx;
        let mut convs = Vec::with_capacity(self.goal.agents.len());
        for name in &self.goal.agents {
            let Some(agent) = self.plan.agent(name) else {
                return Err(Stop::Failed(format!(
                    "plan names an unknown agent `{name}`"
                )));
            };
            let agent_scope = self.scope.with_agent(name);
            cx.emit(&agent_scope, EventBody::AgentStarted { role: name.clone() });
            let persona = self.env.render(&agent.prompt);
            let conv = Conversation {
                scope: agent_scope,
                provider: self.provider(agent.profile.as_deref())?,
                system: prompt::system(cx, Some(&persona), self.goal, self.in_loop),
                user: self.user.clone(),
                use_tools: true,
                outputs: &agent.outputs,
                output_schema: self.output_schema,
                can_signal_done: self.in_loop,
                accept_converged: self.accept_converged,
                card: agent.card.as_deref(),
            };
            convs.push(cx.converse(conv));
        }
        // One agent failing (its provider down, its turns used up) does not sink
        // the others: its failure is an `error` event and the synthesis works
        // from the rest. A budget or a cancellation stops everything.
        let mut answers = Vec::with_capacity(convs.len());
        let mut names = Vec::with_capacity(convs.len());
        let mut first_failure = None;
        for (name, outcome) in self
            .goal
            .agents
            .iter()
            .zip(futures::future::join_all(convs).await)
        {
            match outcome {
                Ok(a) => {
                    answers.push(a);
                    names.push(name.clone());
                }
                Err(Stop::Failed(why)) => {
                    cx.emit(
                        &self.scope.with_agent(name),
                        EventBody::Error {
                            message: format!(
                                "agent `{name}` failed; the goal goes on with the other agents: {why}"
                            ),
                        },
                    );
                    first_failure.get_or_insert(Stop::Failed(format!("agent `{name}`: {why}")));
                }
                Err(other) => return Err(other),
            }
        }
        if answers.is_empty() {
            return Err(first_failure.unwrap_or_else(|| {
                Stop::Failed(format!("goal `{}` has no agents", self.goal.name))
            }));
        }
        Ok((names, answers))
    }

    /// The synthesis reconciles the agents' answers; it is the goal's output.
    async fn synthesize(&self, names: &[String], answers: &[Answer]) -> Result<Answer, Stop> {
        let synth_scope = self.scope.with_agent("synthesis");
        self.cx.emit(
            &synth_scope,
            EventBody::AgentStarted {
                role: "synthesis".into(),
            },
        );
        self.cx
            .converse(Conversation {
                scope: synth_scope,
                provider: self.provider(None)?,
                system: prompt::synthesis_system(self.plan, self.goal),
                user: prompt::synthesis_user(self.outcome, names, answers),
                use_tools: false,
                outputs: &self.goal.outputs,
                output_schema: self.output_schema,
                can_signal_done: false,
                accept_converged: self.accept_converged,
                card: None,
            })
            .await
    }
}

/// CONVERGE: refine until `CONVERGED`, unchanged output, or (after tools were
/// used) an iteration without tool calls; the limit is never shown to the model.
#[allow(clippy::too_many_arguments)]
pub(super) async fn converge(
    cx: &RunCx<'_>,
    plan: &Plan,
    env: &Env,
    scope: &Scope,
    context_names: &[String],
    goal: &GoalDef,
    output_schema: Option<&serde_json::Value>,
    outcome: &str,
    in_loop: bool,
) -> Result<(Answer, Option<LoopStop>), Stop> {
    let limit = goal
        .within
        .as_ref()
        .map(|l| resolve_limit(l, env))
        .unwrap_or(1);
    let mut history: Vec<String> = Vec::new();
    let mut last: Option<Answer> = None;
    let mut total_tools = 0;
    let mut used_tools = false;
    for it in 1..=limit {
        // Inside a LOOP the events keep the loop's iteration; on its own, a
        // CONVERGE goal numbers its rounds.
        let iter_scope = if scope.iteration.is_some() {
            scope.clone()
        } else {
            let s = scope.with_iteration(it);
            cx.emit(&s, EventBody::LoopIteration { limit });
            s
        };
        let (answer, _) = work_goal(
            cx,
            plan,
            env,
            &iter_scope,
            context_names,
            goal,
            output_schema,
            outcome,
            Some(&history),
            in_loop,
        )
        .await?;
        total_tools += answer.tool_calls;
        let said_converged = answer.converged || goal::says_converged(&answer.text);
        let stop = if said_converged {
            Some(LoopStop::Explicit)
        } else if history.last() == Some(&answer.text) {
            Some(LoopStop::Unchanged)
        } else if used_tools && answer.tool_calls == 0 {
            Some(LoopStop::NoToolCalls)
        } else {
            None
        };
        used_tools |= answer.tool_calls > 0;
        if said_converged {
            // The output is the last substantive iteration, not the signal.
            let mut a = last.unwrap_or_default();
            a.tool_calls = total_tools;
            a.done |= answer.done;
            return Ok((a, stop));
        }
        if stop.is_some() {
            let mut a = answer;
            a.tool_calls = total_tools;
            return Ok((a, stop));
        }
        history.push(answer.text.clone());
        last = Some(answer);
    }
    cx.emit(
        scope,
        EventBody::Warning {
            message: format!(
                "goal `{}` did not converge within {limit} iterations",
                goal.name
            ),
        },
    );
    let mut a = last.unwrap_or_default();
    a.tool_calls = total_tools;
    if cx.budget.limits().strict_convergence {
        return Err(Stop::LoopLimit(format!(
            "goal `{}` did not converge within {limit} iterations",
            goal.name
        )));
    }
    Ok((a, Some(LoopStop::Limit)))
}
