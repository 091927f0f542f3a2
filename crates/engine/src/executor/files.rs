//! AIP-16's file contract around a run: the workflow's `inputsFiles` are
//! copied from the workspace into the run's scratch folder
//! (`<workspace>/.agentfile/runs/<session>/fs/<key>`) before the first step,
//! its `outputsFiles` copied back to the workspace after the run succeeds.
//!
//! The runtime does this on the workflow's behalf, so each copy is judged by
//! the policy as a `read` or `write` call on that workspace path would be: a
//! workflow cannot stage `~/.ssh/id_rsa` or sync over `.git/config` where a
//! model could not. The scratch folder belongs to the session, so it survives
//! a suspend or a crash and a resumed run finds what its steps wrote; it is
//! staged once, and removed after the outputs are synced.

use std::path::{Path, PathBuf};

use agentfile_plan::Plan;
use agentfile_tools::ToolSet;
use agentfile_tools::policy::Tool;

use super::Stop;

/// The session's scratch folder (the `_workflowFsRoot` steps are given).
pub fn root(workspace: &Path, session: &str) -> PathBuf {
    workspace
        .join(".agentfile")
        .join("runs")
        .join(session)
        .join("fs")
}

/// Copy the declared input files into `root`, unless an earlier process of
/// this session already did.
pub(crate) fn stage(plan: &Plan, tools: &dyn ToolSet, root: &Path) -> Result<(), Stop> {
    if root.is_dir() {
        return Ok(());
    }
    // Staged next to the root and renamed into place, so a crash mid-way
    // stages again rather than leaving half the inputs.
    let partial = root.with_extension("staging");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(|e| {
        Stop::Failed(format!(
            "cannot create the run's file folder {}: {e}",
            partial.display()
        ))
    })?;
    for (key, entry) in &plan.files.inputs {
        let from = tools.host_path(Tool::Read, &entry.path).map_err(|d| {
            Stop::Denied(format!(
                "input file `{key}` ({}): denied by policy ({}): {}",
                entry.path, d.rule, d.reason
            ))
        })?;
        std::fs::copy(&from, partial.join(key)).map_err(|e| {
            Stop::Failed(format!(
                "cannot stage input file `{key}` from {}: {e}",
                entry.path
            ))
        })?;
    }
    std::fs::rename(&partial, root).map_err(|e| {
        Stop::Failed(format!(
            "cannot create the run's file folder {}: {e}",
            root.display()
        ))
    })
}

/// What fills an output path's `<token>`s.
pub(crate) struct Tokens<'a> {
    pub run_id: &'a str,
    pub workflow_id: &'a str,
    /// `YYYY-MM-DD`, UTC.
    pub iso_date: &'a str,
}

pub(crate) fn interpolate(path: &str, t: &Tokens<'_>) -> String {
    path.replace("<runId>", t.run_id)
        .replace("<workflowId>", t.workflow_id)
        .replace("<isoDate>", t.iso_date)
}

/// Copy the declared output files from `root` to the workspace. A file the
/// run did not write is a warning (the `outputs` schema says what is
/// mandatory); a refused or failed copy stops the run. Returns the warnings.
pub(crate) fn sync(
    plan: &Plan,
    tools: &dyn ToolSet,
    root: &Path,
    tokens: &Tokens<'_>,
) -> Result<Vec<String>, Stop> {
    let mut warnings = Vec::new();
    for (key, entry) in &plan.files.outputs {
        let src = root.join(key);
        let path = interpolate(&entry.path, tokens);
        if !src.is_file() {
            warnings.push(format!(
                "output file `{key}` was not written by the run; {path} is left as it was"
            ));
            continue;
        }
        let to = tools.host_path(Tool::Write, &path).map_err(|d| {
            Stop::Denied(format!(
                "output file `{key}` → {path}: denied by policy ({}): {}",
                d.rule, d.reason
            ))
        })?;
        copy_atomically(&src, &to)
            .map_err(|e| Stop::Failed(format!("cannot sync output file `{key}` to {path}: {e}")))?;
    }
    Ok(warnings)
}

/// Write `to` whole or not at all: a copy beside it, then a rename.
fn copy_atomically(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = to.with_file_name(format!(".{name}.agentfile-{}", std::process::id()));
    let copied = std::fs::copy(from, &tmp).and_then(|_| std::fs::rename(&tmp, to));
    if copied.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    copied
}

/// Remove the session's scratch folder (best effort).
pub(crate) fn clean(root: &Path) {
    if let Some(session_dir) = root.parent() {
        let _ = std::fs::remove_dir_all(session_dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_filled_in() {
        let t = Tokens {
            run_id: "s1",
            workflow_id: "report-writer",
            iso_date: "2026-11-25",
        };
        assert_eq!(
            interpolate("reports/<workflowId>-<isoDate>-<runId>.md", &t),
            "reports/report-writer-2026-11-25-s1.md"
        );
        assert_eq!(interpolate("plain.md", &t), "plain.md");
    }
}
