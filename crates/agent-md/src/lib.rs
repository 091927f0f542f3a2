//! `*.agent.md` files run on their own (`validate`, `inspect`, `run` of an
//! agent file): the card read by [`agentfile_agent_card`], and a plan that
//! runs it as one agent on the input `task`. The reader itself is not here: the
//! DSL, WORKFLOW.md and workflow.yaml read agent files too, and no front end
//! may use another, so it is its own crate below all of them.

use std::path::Path;

use agentfile_agent_card::{Describe, agent_name, load};
use agentfile_plan::agent::AgentCard;
use agentfile_plan::diag::{Diagnostic, FileId, SourceMap};

pub use agentfile_plan::build::TASK_INPUT;

/// `validate`/`inspect`/`run` of an agent file on its own: the file checked,
/// and a plan that runs it as one agent on the input `task`. `scripts`
/// describes the file's JavaScript tools (the registry passes the script
/// engine's).
pub fn analyze(
    sources: &mut SourceMap,
    file: FileId,
    scripts: &dyn Describe,
) -> (Vec<Diagnostic>, Option<agentfile_plan::Plan>) {
    let path = sources.file(file).path.clone();
    let written = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut diags = Vec::new();
    let card = load(sources, scripts, file, &written, &mut diags);
    let plan = card.and_then(|card| match standalone_plan(&path, card) {
        Ok(p) => Some(p),
        Err(mut more) => {
            diags.append(&mut more);
            None
        }
    });
    (diags, plan)
}

fn standalone_plan(path: &Path, card: AgentCard) -> Result<agentfile_plan::Plan, Vec<Diagnostic>> {
    let name = agent_name(path);
    let mut plan =
        agentfile_plan::build::single_agent("agent-md", path, &name, &card.title, &card.persona())?;
    plan.description = (!card.description.is_empty()).then(|| card.description.clone());
    if let Some(a) = plan.agents.first_mut() {
        a.card = Some(Box::new(card));
    }
    plan.fingerprint = plan.compute_fingerprint();
    Ok(plan)
}
