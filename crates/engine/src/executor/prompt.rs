//! The words the runtime says to models: system prompts, user prompts, context,
//! convergence history and the synthesis brief.
//!
//! Kept in one place so a change of wording is one diff, and so cassettes (which
//! match requests exactly) change only when these do.

use std::fmt::Write as _;

use super::RunCx;
use super::env::Env;
use super::goal::{Answer, SIGNAL_DONE, SUBMIT_OUTPUT, truncate};
use agentfile_plan::{GoalDef, GoalKind, Plan};

/// How much of one earlier output is shown as context.
const CONTEXT_CHARS: usize = 4000;

const DEFAULT_PERSONA: &str = "You are a capable, careful agent.";

/// The system prompt: persona first, then the runtime's rules.
pub(super) fn system(
    cx: &RunCx<'_>,
    persona: Option<&str>,
    goal: &GoalDef,
    in_loop: bool,
) -> String {
    let mut s = String::new();
    s.push_str(
        persona
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .unwrap_or(DEFAULT_PERSONA),
    );
    let _ = write!(
        s,
        "\n\nYou are working on the goal `{}` of the workflow `{}`. You run unattended: nobody will answer questions, so do not ask any; decide and act. \
Use the tools to inspect and change things; relative paths are relative to the workspace. \
When the goal is achieved, reply with your final answer and no tool calls.",
        goal.name, cx.plan.name
    );
    if !goal.outputs.is_empty() {
        let _ = write!(
            s,
            " Finish by calling `{SUBMIT_OUTPUT}` with the fields: {}.",
            goal.outputs.join(", ")
        );
    }
    if in_loop {
        let _ = write!(
            s,
            " This goal runs inside a loop that repeats until the work is done: call `{SIGNAL_DONE}` once nothing is left to do."
        );
    }
    if let Some(b) = goal
        .brief
        .as_deref()
        .map(str::trim)
        .filter(|b| !b.is_empty())
    {
        let _ = write!(s, "\n\nThe step's goal: {b}");
    }
    if let Some(p) = &goal.produces {
        let abs = cx.root.join(p.trim_end_matches('/'));
        let shown = abs
            .strip_prefix(&cx.tool_cx.workspace)
            .unwrap_or(&abs)
            .display()
            .to_string();
        if p.ends_with('/') {
            let _ = write!(
                s,
                "\n\nThis step produces a folder of files, `{shown}/`: reply with each file in a block `<file path=\"NAME\">` … `</file>` (NAME relative to that folder), or write them there with the write tool and reply with a list of what you wrote."
            );
        } else {
            let _ = write!(
                s,
                "\n\nThe runtime saves your final answer as the file `{shown}`: reply with exactly that file's complete content, with no preamble and no code fence around it."
            );
        }
    }
    s
}

/// The user prompt: the outcome, the context it needs, and for CONVERGE the
/// history of earlier rounds.
pub(super) fn user(
    outcome: &str,
    context: &str,
    history: Option<&[String]>,
    converge: bool,
) -> String {
    let mut s = outcome.trim().to_owned();
    if !context.is_empty() {
        let _ = write!(s, "\n\n<context>\n{context}</context>");
    }
    if converge {
        let history = history.unwrap_or(&[]);
        if !history.is_empty() {
            s.push_str("\n\n<convergence-history>\n");
            for (i, h) in history.iter().enumerate() {
                let _ = writeln!(s, "<iteration n=\"{}\">\n{}\n</iteration>", i + 1, h.trim());
            }
            s.push_str("</convergence-history>\n\nImprove on your latest iteration. If it needs no further change, reply with exactly CONVERGED and nothing else.");
        } else {
            s.push_str(
                "\n\nThis will be refined over several rounds; give your best complete answer now.",
            );
        }
    }
    s
}

/// Earlier outputs this goal may need and does not already quote through
/// `$variables`: the goals before it in this step (this iteration), else the
/// final goal of the previous step; and in a loop, its own previous output.
/// (Which earlier goals those are is decided when the plan is lowered:
/// `context_names`.)
pub(super) fn context(env: &Env, context_names: &[String], goal: &GoalDef) -> String {
    let mut names: Vec<&str> = context_names.iter().map(String::as_str).collect();
    if goal.kind == GoalKind::Goal && env.has_var(&goal.name) {
        names.push(&goal.name);
    }
    let mut s = String::new();
    for n in names {
        if goal.reads.iter().any(|r| r == n) {
            continue;
        }
        if let Some(out) = env.var_text(n) {
            let label = if n == goal.name {
                format!("{n} (your previous iteration)")
            } else {
                n.to_owned()
            };
            let _ = writeln!(s, "## {label}\n{}\n", truncate(out.trim(), CONTEXT_CHARS));
        }
    }
    s
}

pub(super) fn synthesis_system(plan: &Plan, goal: &GoalDef) -> String {
    let mut s = format!(
        "You reconcile the work of several agents on the goal `{}` of the workflow `{}` into one answer. \
Keep what is well supported, resolve disagreements explicitly, and drop repetition. Answer directly; do not mention the agents unless their disagreement matters.",
        goal.name, plan.name
    );
    if !goal.outputs.is_empty() {
        let _ = write!(
            s,
            " Finish by calling `{SUBMIT_OUTPUT}` with the fields: {}.",
            goal.outputs.join(", ")
        );
    }
    s
}

pub(super) fn synthesis_user(outcome: &str, agents: &[String], answers: &[Answer]) -> String {
    let mut s = format!("The goal:\n{}\n\nThe agents' answers:\n", outcome.trim());
    for (name, a) in agents.iter().zip(answers) {
        let _ = write!(
            s,
            "\n<agent name=\"{name}\">\n{}\n</agent>\n",
            a.text.trim()
        );
    }
    s
}
