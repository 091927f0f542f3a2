//! One goal node's work: its conversation(s) — one, or one per agent and a
//! synthesis — and CONVERGE's rounds.

use super::goal::{self, Answer, Conversation};
use super::interp::{Env, resolve_limit};
use super::{RunCx, Stop, prompt};
use agentfile_plan::{GoalDef, GoalKind, Plan};
use agentfile_protocol::events::{EventBody, LoopStop};
use agentfile_session::events::Scope;

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
    let user = prompt::user(outcome, &context, history, goal.kind == GoalKind::Converge);
    // Only rounds that were told about `CONVERGED` may answer with it.
    let accept_converged =
        goal.kind == GoalKind::Converge && history.is_some_and(|h| !h.is_empty());
    let provider_for =
        |profile: Option<&str>| cx.svc.models.provider(profile).map_err(Stop::Failed);
    if goal.agents.len() <= 1 {
        let (persona, profile, agent_scope, card) =
            match goal.agents.first().and_then(|a| plan.agent(a)) {
                Some(a) => (
                    Some(env.render(&a.prompt)),
                    a.profile.as_deref(),
                    scope.with_agent(&a.name),
                    a.card.as_deref(),
                ),
                None => (None, None, scope.clone(), None),
            };
        if let Some(a) = &agent_scope.agent {
            cx.emit(&agent_scope, EventBody::AgentStarted { role: a.clone() });
        }
        let answer = cx
            .converse(Conversation {
                scope: agent_scope,
                provider: provider_for(profile)?,
                system: prompt::system(cx, persona.as_deref(), goal, in_loop),
                user,
                use_tools: true,
                outputs: &goal.outputs,
                output_schema,
                can_signal_done: in_loop,
                accept_converged,
                card,
            })
            .await?;
        return Ok((answer, None));
    }

    // Several agents: each works the goal with its own persona, concurrently.
    let mut convs = Vec::with_capacity(goal.agents.len());
    for name in &goal.agents {
        let Some(agent) = plan.agent(name) else {
            return Err(Stop::Failed(format!(
                "plan names an unknown agent `{name}`"
            )));
        };
        let agent_scope = scope.with_agent(name);
        cx.emit(&agent_scope, EventBody::AgentStarted { role: name.clone() });
        let persona = env.render(&agent.prompt);
        let conv = Conversation {
            scope: agent_scope,
            provider: provider_for(agent.profile.as_deref())?,
            system: prompt::system(cx, Some(&persona), goal, in_loop),
            user: user.clone(),
            use_tools: true,
            outputs: &agent.outputs,
            output_schema,
            can_signal_done: in_loop,
            accept_converged,
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
    for (name, outcome) in goal
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
                    &scope.with_agent(name),
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
        return Err(first_failure
            .unwrap_or_else(|| Stop::Failed(format!("goal `{}` has no agents", goal.name))));
    }
    if accept_converged && answers.iter().all(|a| a.converged) {
        // Every agent is satisfied with the last round: nothing to reconcile.
        return Ok((
            Answer {
                converged: true,
                tool_calls: answers.iter().map(|a| a.tool_calls).sum(),
                done: answers.iter().any(|a| a.done),
                ..Answer::default()
            },
            None,
        ));
    }
    for (name, a) in names.iter().zip(&answers) {
        cx.emit(
            &scope.with_agent(name),
            EventBody::GoalComplete {
                output: a.text.clone(),
                fields: a.fields.clone(),
                converged: None,
                tool_calls: a.tool_calls,
                done: a.done,
            },
        );
    }

    // The synthesis reconciles them; it is the goal's output.
    let synth_scope = scope.with_agent("synthesis");
    cx.emit(
        &synth_scope,
        EventBody::AgentStarted {
            role: "synthesis".into(),
        },
    );
    let mut synthesis = cx
        .converse(Conversation {
            scope: synth_scope,
            provider: provider_for(None)?,
            system: prompt::synthesis_system(plan, goal),
            user: prompt::synthesis_user(outcome, &names, &answers),
            use_tools: false,
            outputs: &goal.outputs,
            output_schema,
            can_signal_done: false,
            accept_converged,
            card: None,
        })
        .await?;
    synthesis.tool_calls = answers.iter().map(|a| a.tool_calls).sum();
    synthesis.done = answers.iter().any(|a| a.done);
    Ok((synthesis, None))
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
