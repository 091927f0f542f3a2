//! One typed MCP tool per workflow in the workspace: `run_<name>`, its
//! inputSchema built from the workflow's INPUTs (required when there is no
//! default, `default` set otherwise), its description from the name and goals.
//!
//! The workspace is scanned with the same discovery as `agentfile list`
//! (ignored folders skipped, hidden ones included) and each file analysed by
//! the front end; only workflows that validate become tools. A watcher task
//! rescans every few seconds and tells the client (`notifications/tools/
//! list_changed`) when the set of tools changed.
//!
//! A rescan analyses only what changed: each workflow's analysis is kept with
//! the size and modification time of every file it read (the workflow and
//! its FROM files) and of the config, and reused while they are the same, so
//! one slow file costs one analysis, not one every few seconds. Files larger
//! than `--max-source-bytes` are not analysed at all. `tools/list` waits for
//! the first scan only briefly; when it answered without the workflows, the
//! client is told `list_changed` once the scan is done.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rmcp::RoleServer;
use rmcp::model::{Tool, ToolAnnotations};
use rmcp::service::Peer;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use agentfile_frontend::discover;
use agentfile_frontend::{self as frontend, Options};
use agentfile_plan::Plan;

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

/// How long `tools/list` waits for the first scan before answering without
/// the workflow tools.
pub const FIRST_SCAN_WAIT: Duration = Duration::from_secs(1);

/// The current workflow tools, `None` until the first scan is done.
pub struct Catalog {
    tools: watch::Sender<Option<Arc<Vec<WorkflowTool>>>>,
    /// A list was answered before the first scan ended: the client must be
    /// told when it ends.
    answered_early: AtomicBool,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            tools: watch::Sender::new(None),
            answered_early: AtomicBool::new(false),
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

    /// The tools, waiting for the first scan at most `wait`; none if it has
    /// not ended by then (and the client is told when it does).
    pub async fn tools_within(&self, wait: Duration) -> Arc<Vec<WorkflowTool>> {
        match tokio::time::timeout(wait, self.tools()).await {
            Ok(t) => t,
            Err(_) => {
                self.answered_early.store(true, Ordering::SeqCst);
                Arc::default()
            }
        }
    }

    /// Whether a list went out without the first scan's tools (once).
    pub fn take_answered_early(&self) -> bool {
        self.answered_early.swap(false, Ordering::SeqCst)
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
    /// Files larger than this are not analysed (`--max-source-bytes`).
    pub max_source: u64,
    /// Analyses of earlier scans (see the module doc).
    pub cache: Arc<Mutex<ScanCache>>,
}

/// What a file looked like when it was analysed: size and modification time,
/// `None` when it could not be read.
type Stamp = Option<(u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// Analyses kept between scans.
#[derive(Default)]
pub struct ScanCache {
    /// The config files' stamps the entries were made with.
    config: Vec<(PathBuf, Stamp)>,
    entries: HashMap<PathBuf, Cached>,
    /// Analyses done, for tests and the curious.
    pub analyses: usize,
}

struct Cached {
    /// Every file the analysis read, with its stamp then.
    read: Vec<(PathBuf, Stamp)>,
    plan: Option<Arc<Plan>>,
}

impl Scan {
    pub fn new(root: PathBuf, config: Option<PathBuf>, max_source: u64) -> Scan {
        Scan {
            root,
            config,
            max_source,
            cache: Arc::default(),
        }
    }

    /// The config files whose change invalidates every analysis.
    fn config_stamps(&self) -> Vec<(PathBuf, Stamp)> {
        let mut files = vec![self.root.join("agent.json"), self.root.join("agent.toml")];
        files.extend(self.config.clone());
        files.into_iter().map(|f| (f.clone(), stamp(&f))).collect()
    }

    /// The plan of the workflow at `path`, analysed again only when a file it
    /// read changed.
    fn plan(
        &self,
        cache: &mut ScanCache,
        path: &Path,
        config: Option<&agentfile_config::Config>,
    ) -> Option<Arc<Plan>> {
        if let Some(c) = cache.entries.get(path)
            && c.read.iter().all(|(f, s)| stamp(f) == *s)
        {
            return c.plan.clone();
        }
        // The stamp is taken before reading, so a change during the analysis
        // is seen by the next scan.
        let own = stamp(path);
        if own.is_some_and(|(len, _)| len > self.max_source) {
            cache.entries.insert(
                path.to_owned(),
                Cached {
                    read: vec![(path.to_owned(), own)],
                    plan: None,
                },
            );
            return None;
        }
        let mut read: Vec<(PathBuf, Stamp)> = Vec::new();
        let a = frontend::analyze(
            path,
            Options {
                packages: None,
                config,
                dialect: None,
                read: Default::default(),
            },
        );
        cache.analyses += 1;
        read.push((path.to_owned(), own));
        for i in 0..a.sources.file_count() {
            let f = &a.sources.file(agentfile_plan::diag::FileId(i as u32)).path;
            if f != path {
                read.push((f.clone(), stamp(f)));
            }
        }
        let plan = a.plan.map(Arc::new);
        if plan.is_none() && frontend::package::is_package(path) {
            // A registry that did not answer is asked again next scan.
            return None;
        }
        cache.entries.insert(
            path.to_owned(),
            Cached {
                read,
                plan: plan.clone(),
            },
        );
        plan
    }

    /// The workflow tools under the root, in path order.
    pub fn tools(&self) -> Vec<WorkflowTool> {
        let config = agentfile_config::find_for_workflow(
            self.config.as_deref(),
            &self.root.join("Agentfile"),
            &self.root,
        )
        .ok()
        .flatten();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let config_now = self.config_stamps();
        if cache.config != config_now {
            cache.entries.clear();
            cache.config = config_now;
        }
        let mut found = discover::find(&self.root);
        found.extend(frontend::package::served(config.as_ref()));
        // Forget workflows that are gone.
        let keep: HashSet<&PathBuf> = found.iter().collect();
        cache.entries.retain(|p, _| keep.contains(p));
        let mut taken = HashSet::new();
        let mut out = Vec::new();
        for path in &found {
            // One file must not take the scan (and the server) down: a panic
            // while analysing it skips it, with a warning, until it changes.
            let planned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.plan(&mut cache, path, config.as_ref())
            }));
            let plan = match planned {
                Ok(p) => p,
                Err(p) => {
                    let why = crate::limits::panic_message(p.as_ref());
                    eprintln!(
                        "agentfile mcp: warning: skipped {}: analysing it panicked ({why}); please report it",
                        path.display()
                    );
                    cache.entries.insert(
                        path.clone(),
                        Cached {
                            read: vec![(path.clone(), stamp(path))],
                            plan: None,
                        },
                    );
                    None
                }
            };
            let Some(plan) = plan else {
                continue;
            };
            let path = path.clone();
            let rel = path
                .strip_prefix(&self.root)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| path.clone());
            let name = tool_name(plan.id.as_deref().unwrap_or(&plan.name), &mut taken);
            out.push(WorkflowTool {
                tool: tool(&name, &plan, &rel.display().to_string()),
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
        self.watch_with(catalog, every, stop, move || {
            let peer = peer.clone();
            async move { peer.notify_tool_list_changed().await.is_ok() }
        })
        .await;
    }

    /// [`Scan::watch`] telling whoever `changed` reaches (the sessions of
    /// `mcp --http`); it stops when `changed` says nobody can hear any more.
    pub async fn watch_with<F, Fut>(
        self,
        catalog: Arc<Catalog>,
        every: Duration,
        stop: CancellationToken,
        mut changed: F,
    ) where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.cancelled() => return,
            }
            // The first scan ended after a list went out without it.
            if catalog.tools.borrow().is_some() && catalog.take_answered_early() && !changed().await
            {
                return;
            }
            let scan = self.clone();
            let Ok(tools) = tokio::task::spawn_blocking(move || scan.tools()).await else {
                continue;
            };
            if catalog.set(tools) && !changed().await {
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

/// The JSON Schema of a workflow's inputs ([`Plan::input_schema_or_built`]).
pub fn input_schema(plan: &Plan) -> Map<String, Value> {
    plan.input_schema_or_built()
}

/// The schema of what a workflow's tool returns: `run`'s, with `outputs`
/// described by the workflow's own `outputs` schema when it has one (a
/// result that is not an object is returned as `outputs.result`).
pub fn output_schema(plan: &Plan) -> Arc<Map<String, Value>> {
    let base = super::results::run_output_schema();
    let Some(own) = &plan.output_schema else {
        return base;
    };
    let object = own.get("type").is_none_or(|t| t == "object");
    let outputs = if object {
        own.clone()
    } else {
        json!({"type": "object", "properties": {"result": own}})
    };
    let mut s = base.as_ref().clone();
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        props.insert("outputs".into(), outputs);
    }
    Arc::new(s)
}

fn tool(name: &str, plan: &Plan, path: &str) -> Tool {
    let mut d = format!(
        "Run the `{}` workflow ({path}) and return its outputs. The call waits until the run ends, reporting progress; the result carries each goal's output and the session_id (for `event`, or `run` with `resume`).",
        plan.name
    );
    if let Some(what) = plan.description.as_deref().filter(|w| !w.is_empty()) {
        let what = what.split_whitespace().collect::<Vec<_>>().join(" ");
        d = format!("{}. {d}", what.trim_end_matches('.'));
    }
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
        .with_meta(super::app::tool_meta())
        .with_raw_output_schema(output_schema(plan))
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

    /// A rescan analyses only the workflows whose files changed.
    #[test]
    fn rescans_reuse_analyses_of_unchanged_files() {
        let dir = std::env::temp_dir().join(format!("agentfile-scan-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("b")).unwrap();
        std::fs::write(dir.join("b/prompt.md"), "You are terse.").unwrap();
        std::fs::write(
            dir.join("Agentfile"),
            "NAME one\nGOAL g \"Say hi\"\nRUN main USING g\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("b/two.agent"),
            "NAME two\nAGENT p FROM prompt.md\nGOAL g \"Say hi\" USING p\nRUN main USING g\n",
        )
        .unwrap();
        // Too large to analyse: skipped, never analysed.
        std::fs::write(dir.join("big.agent"), "#".repeat(2000)).unwrap();
        let scan = Scan::new(dir.clone(), None, 1000);
        let names = |t: &[WorkflowTool]| {
            t.iter()
                .map(|w| w.tool.name.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&scan.tools()), ["run_one", "run_two"]);
        let analyses = || scan.cache.lock().unwrap().analyses;
        assert_eq!(analyses(), 2);
        for _ in 0..3 {
            assert_eq!(names(&scan.tools()), ["run_one", "run_two"]);
        }
        assert_eq!(analyses(), 2, "nothing changed, nothing analysed again");
        // A FROM file that changes (size differs) re-validates its workflow only.
        std::fs::write(dir.join("b/prompt.md"), "You are terse and kind.").unwrap();
        scan.tools();
        assert_eq!(analyses(), 3);
        std::fs::remove_file(dir.join("b/two.agent")).unwrap();
        assert_eq!(names(&scan.tools()), ["run_one"]);
        assert_eq!(analyses(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

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
