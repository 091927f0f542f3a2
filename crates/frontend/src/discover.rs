//! Finds workflow files under a folder (`agentfile list`).
//!
//! It walks with the `ignore` crate, so `.gitignore`d folders (build output,
//! `node_modules`) are skipped, but hidden folders are not: AIP-15 workflows live
//! in `.workflows/`. Each file found is analysed by the same front end as
//! `validate`, so the list says which workflows are valid.

use std::path::{Path, PathBuf};

use crate::detect::Dialect;
use crate::{self as frontend, Options};
use agentfile_config::Config;
use agentfile_wire::workflows::{WorkflowEntry, WorkflowInput, WorkflowList};

/// Is this file a workflow we know how to recognise?
pub fn is_workflow_file(path: &Path) -> bool {
    crate::registry::is_workflow_file(path)
}

/// Every workflow file under `root`, sorted by path.
pub fn find(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| {
            let n = e.file_name();
            n != ".git" && n != "node_modules" && n != "target" && n != ".agentfile"
        })
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path())
        .filter(|p| is_workflow_file(p))
        .collect();
    out.sort();
    out
}

/// Agent files read for their commands, at most.
pub const MAX_AGENT_FILES: usize = 500;

/// Every agent file (`*.agent.md`) under `root`, found like workflows
/// (ignored folders skipped), sorted by path.
pub fn find_agents(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| {
            let n = e.file_name();
            n != ".git" && n != "node_modules" && n != "target" && n != ".agentfile"
        })
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path())
        .filter(|p| agentfile_agent_card::is_agent_file(p))
        .take(MAX_AGENT_FILES)
        .collect();
    out.sort();
    out
}

/// Find and describe every workflow under `root`.
pub fn list(root: &Path, config: Option<&Config>) -> WorkflowList {
    let workflows = find(root)
        .into_iter()
        .map(|path| {
            let a = frontend::analyze(
                &path,
                Options {
                    config,
                    dialect: None,
                    read: Default::default(),
                    packages: None,
                },
            );
            let folder = path
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let (name, inputs) = match &a.plan {
                Some(p) => (
                    p.name.clone(),
                    p.inputs
                        .iter()
                        .map(|i| WorkflowInput {
                            name: i.name.clone(),
                            default: i.default.clone(),
                            required: i.required,
                        })
                        .collect(),
                ),
                None => (fallback_name(&a, &path, &folder), Vec::new()),
            };
            WorkflowEntry {
                name,
                path: path.display().to_string(),
                dialect: a.dialect.unwrap_or(Dialect::Agentfile).as_str().to_owned(),
                description: a.plan.as_ref().and_then(|p| p.description.clone()),
                inputs,
                valid: a.errors() == 0,
                errors: a.errors(),
            }
        })
        .collect();
    WorkflowList {
        schema_version: 1,
        root: root.display().to_string(),
        workflows,
    }
}

/// A name for a workflow we cannot fully read: its NAME (or agentrc AGENT) line,
/// else its file stem, else its folder.
fn fallback_name(a: &frontend::Analysis, path: &Path, folder: &str) -> String {
    let key = match a.dialect {
        Some(Dialect::Agentrc) => "AGENT ",
        _ => "NAME ",
    };
    if a.sources.file_count() > 0 {
        let text = &a.sources.file(agentfile_plan::diag::FileId(0)).text;
        if let Some(n) = text
            .lines()
            .find_map(|l| l.trim_start().strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
        {
            return n.trim_matches('"').to_owned();
        }
    }
    match path.file_name().and_then(|n| n.to_str()) {
        Some(n) if n.ends_with(".agent") => n.trim_end_matches(".agent").to_owned(),
        _ => folder.to_owned(),
    }
}

/// The list as text: one line per workflow.
pub fn text(list: &WorkflowList) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    if list.workflows.is_empty() {
        let _ = writeln!(o, "no workflows found under {}", list.root);
        return o;
    }
    let wn = list
        .workflows
        .iter()
        .map(|w| w.name.len())
        .max()
        .unwrap_or(0);
    let wp = list
        .workflows
        .iter()
        .map(|w| w.path.len())
        .max()
        .unwrap_or(0);
    for w in &list.workflows {
        let inputs: Vec<String> = w
            .inputs
            .iter()
            .map(|i| match &i.default {
                Some(d) => format!("{}={d}", i.name),
                None if i.required => i.name.clone(),
                None => format!("{}?", i.name),
            })
            .collect();
        let status = if !w.valid {
            format!(
                "(invalid: {} error{})",
                w.errors,
                if w.errors == 1 { "" } else { "s" }
            )
        } else if inputs.is_empty() {
            "(no inputs)".to_owned()
        } else {
            format!("inputs: {}", inputs.join(", "))
        };
        let _ = writeln!(o, "{:wn$}  {:wp$}  {status}", w.name, w.path);
    }
    o
}

pub use agentfile_config::project_of;
