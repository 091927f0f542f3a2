//! One typed MCP tool per workflow in the workspace: `run_<name>`, its
//! inputSchema built from the workflow's INPUTs (required when there is no
//! default, `default` set otherwise), its description from the name and goals.
//!
//! The workspace is scanned with the same discovery as `agentfile list`
//! (ignored folders skipped, hidden ones included) and each file analysed by
//! the front end; only workflows that validate become tools. A watcher task
//! rescans every few seconds and tells the client (`notifications/tools/
//! list_changed`) when the set of tools changed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{Tool, ToolAnnotations};
use rmcp::service::Peer;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::frontend::{self, Options};
use crate::plan::Plan;
use crate::{discover, run};

/// Longest tool name MCP clients accept.
pub const MAX_NAME: usize = 64;
/// Longest description we write.
const MAX_DESCRIPTION: usize = 1200;

/// A runnable workflow as a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowTool {
    pub tool: Tool,
    /// The workflow file, relative to the workspace when inside it.
    pub path: String,
}

/// The current workflow tools, `None` until the first scan is done.
pub struct Catalog {
    tools: watch::Sender<Option<Arc<Vec<WorkflowTool>>>>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            tools: watch::Sender::new(None),
        }
    }
}

impl Catalog {
    /// The tools, waiting for the first scan.
    pub async fn tools(&self) -> Arc<Vec<WorkflowTool>> {
        let mut rx = self.tools.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_default(),
            Err(_) => Arc::default(),
        }
    }

    /// Replace the tools; true when they changed.
    pub fn set(&self, tools: Vec<WorkflowTool>) -> bool {
        self.tools.send_if_modified(|cur| {
            if cur.as_deref() == Some(&tools) {
                return false;
            }
            *cur = Some(Arc::new(tools));
            true
        })
    }
}

/// Where to look and with which config.
#[derive(Clone)]
pub struct Scan {
    pub root: PathBuf,
    pub config: Option<PathBuf>,
}

impl Scan {
    /// The workflow tools under the root, in path order.
    pub fn tools(&self) -> Vec<WorkflowTool> {
        let config = run::find_config(
            self.config.as_deref(),
            &self.root.join("Agentfile"),
            &self.root,
        )
        .ok()
        .flatten();
        let mut taken = HashSet::new();
        let mut out = Vec::new();
        for path in discover::find(&self.root) {
            let a = frontend::analyze(
                &path,
                Options {
                    config: config.as_ref(),
                    dialect: None,
                },
            );
            let Some(plan) = &a.plan else { continue };
            let rel = path
                .strip_prefix(&self.root)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| path.clone());
            let name = tool_name(&plan.name, &mut taken);
            out.push(WorkflowTool {
                tool: tool(&name, plan, &rel.display().to_string()),
                path: rel.display().to_string(),
            });
        }
        out
    }

    /// Rescan every `every` until `stop`, telling `peer` when the tools changed.
    pub async fn watch(
        self,
        catalog: Arc<Catalog>,
        peer: Peer<RoleServer>,
        every: Duration,
        stop: CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.cancelled() => return,
            }
            let scan = self.clone();
            let Ok(tools) = tokio::task::spawn_blocking(move || scan.tools()).await else {
                continue;
            };
            if catalog.set(tools) && peer.notify_tool_list_changed().await.is_err() {
                return;
            }
        }
    }
}

/// `run_<name>` with every character outside `[A-Za-z0-9_-]` replaced by `_`,
/// at most [`MAX_NAME`] long, made unique with `_2`, `_3`, … .
pub fn tool_name(workflow: &str, taken: &mut HashSet<String>) -> String {
    let clean: String = workflow
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base: String = format!("run_{clean}").chars().take(MAX_NAME).collect();
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        let suffix = format!("_{n}");
        let keep = MAX_NAME - suffix.len();
        name = format!("{}{suffix}", base.chars().take(keep).collect::<String>());
        n += 1;
    }
    taken.insert(name.clone());
    name
}

/// The JSON Schema of a workflow's inputs.
pub fn input_schema(plan: &Plan) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for i in &plan.inputs {
        let mut p = Map::new();
        p.insert("type".into(), json!("string"));
        match &i.default {
            Some(d) => {
                p.insert("default".into(), json!(d));
                p.insert(
                    "description".into(),
                    json!(format!("INPUT {} (default {d:?}).", i.name)),
                );
            }
            None => {
                required.push(json!(i.name));
                p.insert(
                    "description".into(),
                    json!(format!("INPUT {} (required).", i.name)),
                );
            }
        }
        properties.insert(i.name.clone(), Value::Object(p));
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), json!(false));
    schema
}

fn tool(name: &str, plan: &Plan, path: &str) -> Tool {
    let mut d = format!(
        "Run the `{}` workflow ({path}) and return its outputs. The call waits until the run ends, reporting progress; the result carries each goal's output and the session_id (for `event`, or `run` with `resume`).",
        plan.name
    );
    if !plan.goals.is_empty() {
        d.push_str(" Goals: ");
        let goals: Vec<String> = plan
            .goals
            .iter()
            .map(|g| {
                let s: String = g.summary.chars().take(120).collect();
                format!("{} — {s}", g.name)
            })
            .collect();
        d.push_str(&goals.join("; "));
        d.push('.');
    }
    if plan.inputs.is_empty() {
        d.push_str(" It takes no inputs.");
    } else {
        let inputs: Vec<String> = plan
            .inputs
            .iter()
            .map(|i| match &i.default {
                Some(v) => format!("{} (default {v:?})", i.name),
                None => format!("{} (required)", i.name),
            })
            .collect();
        d.push_str(&format!(" Inputs: {}.", inputs.join(", ")));
    }
    if d.chars().count() > MAX_DESCRIPTION {
        d = d.chars().take(MAX_DESCRIPTION - 1).collect::<String>() + "…";
    }
    Tool::new(name.to_owned(), d, Arc::new(input_schema(plan)))
        .with_title(format!("Run workflow {}", plan.name))
        .with_raw_output_schema(super::tools::run_output_schema())
        .with_annotations(
            ToolAnnotations::with_title(format!("Run workflow {}", plan.name))
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_bounded_and_unique() {
        let mut taken = HashSet::new();
        assert_eq!(tool_name("repo-report", &mut taken), "run_repo-report");
        assert_eq!(tool_name("repo report!", &mut taken), "run_repo_report_");
        assert_eq!(tool_name("repo-report", &mut taken), "run_repo-report_2");
        assert_eq!(tool_name("repo-report", &mut taken), "run_repo-report_3");
        assert_eq!(tool_name("héllo", &mut taken), "run_h_llo");
        let long = "x".repeat(100);
        let a = tool_name(&long, &mut taken);
        let b = tool_name(&long, &mut taken);
        assert_eq!(a.len(), MAX_NAME);
        assert_eq!(b.len(), MAX_NAME);
        assert!(b.ends_with("_2"), "{b}");
        assert_ne!(a, b);
    }
}
