//! What the daemon serves: every non-manual trigger of every workflow under
//! its workspace folders, found with the same discovery as `agentfile list`
//! and analysed by the front ends.
//!
//! A rescan analyses only files whose size or modification time changed. A
//! file that stops validating keeps its last good registration, and the
//! reason is logged once per change, as is its validating again;
//! [`Registry::invalid_files`] names the files that do not validate now. A trigger the daemon cannot serve (a
//! webhook while the listener is off) is registered as `refused` with the
//! reason, so `triggers list` shows why it never fires.
//!
//! A trigger's catch-up, overlap and quota are its own where written, else
//! the `[daemon]` defaults of agent.toml ([`daemon_defaults`]), field by
//! field, else the scheduler's (`catch_up = "latest"`, `overlap = "skip"`,
//! no quota).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use agentfile_config::Config;
use agentfile_frontend::{self as frontend, Options, discover};
use agentfile_plan::Plan;
use agentfile_plan::diag::Severity;
use agentfile_plan::trigger::{self, TriggerDecl, TriggerKind};
use agentfile_triggers::{CatchUp, FirePolicy, Overlap, Quota, Schedule};
use serde_json::Value;

/// A file's size and modification time, `None` when unreadable.
type Stamp = Option<(u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// One registered trigger.
#[derive(Clone, Debug)]
pub struct Registered {
    pub decl: TriggerDecl,
    /// The workflow's id (or name).
    pub workflow: String,
    /// The workflow file, absolute.
    pub path: PathBuf,
    pub plan: Arc<Plan>,
    /// Why the daemon does not serve it; `None` when active.
    pub refused: Option<String>,
    /// Parsed, for schedules.
    pub schedule: Option<Schedule>,
    pub catch_up: CatchUp,
    pub policy: FirePolicy,
}

impl Registered {
    pub fn is_active(&self) -> bool {
        self.refused.is_none()
    }

    /// What makes a schedule task out of date: the expression, zone and
    /// policy it was started with.
    pub(crate) fn schedule_fingerprint(&self) -> Option<String> {
        let s = self.decl.schedule.as_ref()?;
        Some(format!(
            "{}|{}|{:?}|{:?}|{}",
            s.cron,
            s.timezone,
            self.catch_up,
            self.policy,
            self.path.display()
        ))
    }
}

/// The `[daemon]` defaults of agent.toml: what a trigger that does not
/// write its own catch-up, overlap or quota gets.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Defaults {
    pub catch_up: Option<CatchUp>,
    pub overlap: Option<Overlap>,
    pub quota: Quota,
}

impl Defaults {
    /// `decl`'s policy: its own values where written, else these, else the
    /// scheduler's defaults.
    pub fn resolve(&self, decl: &TriggerDecl) -> (CatchUp, FirePolicy) {
        let own = decl.policy.quota();
        (
            decl.policy.catch_up().or(self.catch_up).unwrap_or_default(),
            FirePolicy {
                overlap: decl.policy.overlap().or(self.overlap).unwrap_or_default(),
                quota: Quota {
                    max_runs_per_day: own.max_runs_per_day.or(self.quota.max_runs_per_day),
                    max_cost_usd_per_day: own
                        .max_cost_usd_per_day
                        .or(self.quota.max_cost_usd_per_day),
                },
            },
        )
    }
}

/// Read `[daemon] catch_up`, `overlap`, `max_runs_per_day` and
/// `max_cost_usd_per_day` from `config` (agent.toml keeps `[daemon]` as
/// untyped settings, as [`trigger::webhooks_enabled`] reads them). A value
/// that is not allowed is an error naming the key and what it allows.
pub fn daemon_defaults(config: &Config) -> Result<Defaults, DefaultsError> {
    let mut d = Defaults::default();
    let Some(section) = config.other.get("daemon") else {
        return Ok(d);
    };
    let bad = |key: &'static str, v: &Value, allowed: &'static str| DefaultsError {
        key,
        value: v.clone(),
        allowed,
    };
    const CATCH_UP: &str = "\"none\", \"latest\" or \"all\"";
    const OVERLAP: &str = "\"skip\", \"queue\" or \"allow\"";
    if let Some(v) = section.get("catch_up") {
        d.catch_up = Some(
            v.as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("catch_up", v, CATCH_UP))?,
        );
    }
    if let Some(v) = section.get("overlap") {
        d.overlap = Some(
            v.as_str()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("overlap", v, OVERLAP))?,
        );
    }
    if let Some(v) = section.get("max_runs_per_day") {
        d.quota.max_runs_per_day = Some(
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad("max_runs_per_day", v, "a whole number of runs, 0 or more"))?,
        );
    }
    if let Some(v) = section.get("max_cost_usd_per_day") {
        d.quota.max_cost_usd_per_day = Some(
            v.as_f64()
                .filter(|c| c.is_finite() && *c >= 0.0)
                .ok_or_else(|| {
                    bad(
                        "max_cost_usd_per_day",
                        v,
                        "a number of US dollars, 0 or more",
                    )
                })?,
        );
    }
    Ok(d)
}

/// A `[daemon]` default that is not allowed: the key, its value and what
/// the key allows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("agent.toml `[daemon] {key} = {value}` is not allowed; use {allowed}")]
pub struct DefaultsError {
    pub key: &'static str,
    pub value: Value,
    pub allowed: &'static str,
}

/// Why a workflow file's triggers are not registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRegistered {
    /// Its first error.
    #[error("{code}: {message}")]
    Invalid { code: &'static str, message: String },
    #[error("it does not validate")]
    DoesNotValidate,
    #[error("analysing it panicked ({0}); please report it")]
    Panicked(String),
}

/// A workflow file whose current content does not validate.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidFile {
    /// The file, absolute.
    pub path: PathBuf,
    pub reason: NotRegistered,
    /// The ids of the triggers of its last good content, still served; empty
    /// when this process never saw it valid.
    pub kept: Vec<String>,
}

/// Say that `path`, invalid at the last scan, validates again — at the
/// level its breakage was reported at (`warn`, so that an operator who saw
/// one line sees the other), unless it was never registered and declares
/// no trigger, which concerns nobody.
fn valid_again(path: &Path, kept: &[Registered], now: &[Registered]) {
    let ids: Vec<&str> = now.iter().map(|t| t.decl.id.as_str()).collect();
    if !ids.is_empty() {
        tracing::warn!(file = %path.display(), triggers = %ids.join(", "), "valid again; its triggers are registered");
    } else if !kept.is_empty() {
        tracing::warn!(file = %path.display(), "valid again; it declares no trigger now, so none of it is registered");
    } else {
        tracing::debug!(file = %path.display(), "valid again; it declares no trigger");
    }
}

struct FileEntry {
    stamp: Stamp,
    /// The last good registration (kept while the file is invalid).
    triggers: Vec<Registered>,
    /// Why the current content is not registered, if it is not.
    problem: Option<NotRegistered>,
}

/// A rescan walks the workspaces again at least this often (in rescans);
/// in between it walks them only when a folder it knows changed.
const FULL_WALK_EVERY: u32 = 15;

/// The triggers found under the workspaces, by id.
pub struct Registry {
    roots: Vec<PathBuf>,
    config: Config,
    webhooks: bool,
    defaults: Defaults,
    files: HashMap<PathBuf, FileEntry>,
    /// The roots and every folder between a root and a workflow file, as
    /// the last walk found them: while none has changed (no entry added,
    /// removed or renamed in it), a rescan only stats them and the known
    /// files instead of walking (and reading ignore files) again.
    dirs: HashMap<PathBuf, Stamp>,
    /// Rescans since the last walk.
    since_walk: u32,
    /// The trigger serving each webhook path at the last scan.
    webhook_holders: HashMap<String, String>,
}

impl Registry {
    /// A registry whose `[daemon]` defaults that are not allowed are left
    /// out (with a warning); [`Registry::try_new`] refuses them.
    pub fn new(roots: Vec<PathBuf>, config: Config) -> Registry {
        let defaults = daemon_defaults(&config).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the [daemon] defaults are not used");
            Defaults::default()
        });
        Registry::with_defaults(roots, config, defaults)
    }

    /// A registry, or why `config`'s `[daemon]` defaults are not allowed.
    pub fn try_new(roots: Vec<PathBuf>, config: Config) -> Result<Registry, DefaultsError> {
        let defaults = daemon_defaults(&config)?;
        Ok(Registry::with_defaults(roots, config, defaults))
    }

    fn with_defaults(roots: Vec<PathBuf>, config: Config, defaults: Defaults) -> Registry {
        let webhooks = trigger::webhooks_enabled(&config);
        Registry {
            roots,
            config,
            webhooks,
            defaults,
            files: HashMap::new(),
            dirs: HashMap::new(),
            since_walk: 0,
            webhook_holders: HashMap::new(),
        }
    }

    /// The workflow files to look at: the known ones while no folder on
    /// their way changed (only `stat`s), else a walk of every root.
    fn workflow_files(&mut self) -> Vec<PathBuf> {
        let quiet = !self.dirs.is_empty()
            && self.since_walk < FULL_WALK_EVERY
            && self.dirs.iter().all(|(d, s)| stamp(d) == *s);
        if quiet {
            self.since_walk += 1;
            return self.files.keys().cloned().collect();
        }
        self.since_walk = 0;
        self.dirs.clear();
        let mut found = Vec::new();
        for root in &self.roots {
            self.dirs.insert(root.clone(), stamp(root));
            for path in discover::find(root) {
                for dir in path.ancestors().skip(1) {
                    if self.dirs.contains_key(dir) || !dir.starts_with(root) {
                        break;
                    }
                    self.dirs.insert(dir.to_owned(), stamp(dir));
                }
                found.push(path);
            }
        }
        found.extend(frontend::package::served(Some(&self.config)));
        found
    }

    /// Look at every workflow file again; returns the triggers now
    /// registered, by id.
    pub fn scan(&mut self) -> BTreeMap<String, Registered> {
        self.refresh();
        self.registered()
    }

    /// Look at every workflow file again: whether any file was read again,
    /// appeared or went, so that what [`Registry::registered`] answers may
    /// differ from the last time. An idle daemon's rescan stops here.
    pub fn refresh(&mut self) -> bool {
        let mut seen = HashSet::new();
        let mut changed = false;
        {
            for path in self.workflow_files() {
                seen.insert(path.clone());
                let now = stamp(&path);
                // A package by digest never changes; one that failed (its
                // registry did not answer) is asked again.
                let package = frontend::package::is_package(&path);
                if self
                    .files
                    .get(&path)
                    .is_some_and(|f| f.stamp == now && !(package && f.problem.is_some()))
                {
                    continue;
                }
                changed = true;
                let analysed =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.analyse(&path)))
                        .unwrap_or_else(|p| {
                            Err(NotRegistered::Panicked(crate::limits::panic_message(
                                p.as_ref(),
                            )))
                        });
                let entry = self.files.entry(path.clone()).or_insert(FileEntry {
                    stamp: None,
                    triggers: Vec::new(),
                    problem: None,
                });
                entry.stamp = now;
                match analysed {
                    Ok(triggers) => {
                        if entry.problem.take().is_some() {
                            valid_again(&path, &entry.triggers, &triggers);
                        }
                        entry.triggers = triggers;
                        // Kept as long as the file is registered: no spare
                        // slots (a workflow has one or two triggers).
                        entry.triggers.shrink_to_fit();
                    }
                    Err(why) => {
                        if !entry.triggers.is_empty() {
                            tracing::warn!(file = %path.display(), reason = %why, "no longer valid; its last good registration is kept");
                        } else {
                            tracing::debug!(file = %path.display(), reason = %why, "not registered");
                        }
                        entry.problem = Some(why);
                    }
                }
            }
        }
        let known = self.files.len();
        self.files.retain(|p, _| seen.contains(p));
        changed || self.files.len() != known
    }

    /// The triggers registered now, by id, from what the last
    /// [`Registry::refresh`] read.
    pub fn registered(&mut self) -> BTreeMap<String, Registered> {
        let mut out = BTreeMap::new();
        let mut paths: Vec<&PathBuf> = self.files.keys().collect();
        paths.sort();
        for p in paths {
            for t in &self.files[p].triggers {
                if let Some(other) = out.get(&t.decl.id) {
                    let other: &Registered = other;
                    tracing::warn!(trigger = %t.decl.id, file = %t.path.display(), first = %other.path.display(), "two workflows share this id; the first is served");
                    continue;
                }
                out.insert(t.decl.id.clone(), t.clone());
            }
        }
        self.refuse_shared_webhook_paths(&mut out);
        out
    }

    /// The workflow files whose current content does not validate, by
    /// path: why, and the triggers of the last good content still served.
    pub fn invalid_files(&self) -> Vec<InvalidFile> {
        let mut out: Vec<InvalidFile> = self
            .files
            .iter()
            .filter_map(|(path, f)| {
                Some(InvalidFile {
                    path: path.clone(),
                    reason: f.problem.clone()?,
                    kept: f.triggers.iter().map(|t| t.decl.id.clone()).collect(),
                })
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// One webhook path, one trigger: a second active webhook trigger on a
    /// path is registered as refused, naming both files (else both read
    /// `active` and one silently never fires). The trigger that held the
    /// path at the last scan keeps it, so a file added later cannot take a
    /// path over; otherwise the first by file path, then id.
    fn refuse_shared_webhook_paths(&mut self, out: &mut BTreeMap<String, Registered>) {
        let mut claims: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (id, r) in out.iter() {
            if let (true, Some(w)) = (r.is_active(), &r.decl.webhook) {
                claims
                    .entry(webhook_key(&w.path))
                    .or_default()
                    .push(id.clone());
            }
        }
        let mut holders = HashMap::new();
        for (path, mut ids) in claims {
            let held = self.webhook_holders.get(&path);
            ids.sort_by_key(|id| (Some(id) != held, out[id].path.clone(), id.clone()));
            let (first, rest) = ids
                .split_first()
                .map_or((None, &[][..]), |(f, r)| (Some(f), r));
            let Some(first) = first else { continue };
            holders.insert(path.clone(), first.clone());
            let (first_file, first_id) = (out[first].path.clone(), first.clone());
            for id in rest {
                if let Some(r) = out.get_mut(id) {
                    let why = webhook_clash(&path, &first_id, &first_file, id, &r.path);
                    tracing::warn!(trigger = %id, reason = %why, "webhook trigger refused");
                    r.refused = Some(why);
                }
            }
        }
        self.webhook_holders = holders;
    }

    /// The triggers of one file, or why it has none to register.
    fn analyse(&self, path: &Path) -> Result<Vec<Registered>, NotRegistered> {
        // Webhooks are checked here, not by the front end, so that a webhook
        // trigger is registered as refused rather than failing the workflow.
        let mut config = self.config.clone();
        if !self.webhooks {
            config.other.insert(
                "daemon".into(),
                serde_json::json!({"webhooks": "registration"}),
            );
        }
        let a = frontend::analyze(
            path,
            Options {
                packages: None,
                config: Some(&config),
                dialect: None,
                read: Default::default(),
            },
        );
        let Some(plan) = a.plan else {
            let first = a
                .diagnostics
                .iter()
                .find(|d| d.severity == Severity::Error)
                .map(|d| NotRegistered::Invalid {
                    code: d.code,
                    message: d.message.clone(),
                })
                .unwrap_or(NotRegistered::DoesNotValidate);
            return Err(first);
        };
        let plan = Arc::new(plan);
        let workflow = plan.id.clone().unwrap_or_else(|| plan.name.clone());
        let mut out = Vec::new();
        for decl in &plan.triggers {
            if decl.kind == TriggerKind::Manual {
                continue;
            }
            let mut refused = None;
            if decl.kind == TriggerKind::Webhook && !self.webhooks {
                refused = Some(trigger::WEBHOOKS_NEEDED.to_owned());
            }
            let schedule = match &decl.schedule {
                Some(s) => match s.parse() {
                    Ok(s) => Some(s),
                    Err(e) => {
                        refused = Some(format!("its schedule: {e}"));
                        None
                    }
                },
                None => None,
            };
            let (catch_up, policy) = self.defaults.resolve(decl);
            out.push(Registered {
                decl: decl.clone(),
                workflow: workflow.clone(),
                path: path.to_owned(),
                plan: plan.clone(),
                refused,
                schedule,
                catch_up,
                policy,
            });
        }
        Ok(out)
    }
}

/// A webhook path as the listener matches it: `/hooks//x` and `/hooks/x`
/// reach the same trigger, so `//x` and `/x` are one path.
fn webhook_key(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}

/// Why the webhook trigger `id` (in `file`) is refused: `first_id` (in
/// `first_file`) already serves `path`.
fn webhook_clash(path: &str, first_id: &str, first_file: &Path, id: &str, file: &Path) -> String {
    format!(
        "webhook path `{path}` is already served by `{first_id}` ({}); `{id}` ({}) would \
         never fire: give one of them another `path`",
        first_file.display(),
        file.display()
    )
}

/// Webhook triggers of different workflows (or of one) that share a path,
/// as `validate` of several files reports them: for each trigger after the
/// first on a path (in the order given), the problem naming both files.
pub fn webhook_path_clashes(plans: &[(&Path, &Plan)]) -> Vec<(PathBuf, String)> {
    let mut first: HashMap<String, (String, PathBuf)> = HashMap::new();
    let mut out = Vec::new();
    for (file, plan) in plans {
        for t in &plan.triggers {
            let Some(w) = &t.webhook else { continue };
            let key = webhook_key(&w.path);
            match first.get(&key) {
                Some((first_id, first_file)) => out.push((
                    file.to_path_buf(),
                    webhook_clash(&w.path, first_id, first_file, &t.id, file),
                )),
                None => {
                    first.insert(key, (t.id.clone(), file.to_path_buf()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workflow(dir: &Path, id: &str, cron: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("WORKFLOW.md"),
            format!(
                "---\nname: {id}\nid: {id}\ndescription: A test.\nversion: 1.0.0\ninputs: {{ type: object }}\noutputs: {{ type: object }}\ntriggers:\n  - kind: schedule\n    cron: \"{cron}\"\nsteps:\n  - id: wait\n    kind: tool\n    tool: bash\n    inputs: {{ command: \"sleep 0\" }}\n---\n# {id}\n"
            ),
        )
        .unwrap();
    }

    /// Between walks a rescan only stats what it knows, yet sees a workflow
    /// added in a new folder, one edited in place and one removed.
    #[test]
    fn rescans_see_added_edited_and_removed_workflows() {
        let root = std::env::temp_dir().join(format!("agentfile-registry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let wf = root.join(".workflows");
        workflow(&wf.join("aa"), "aa", "0 9 * * *");
        let mut r = Registry::new(vec![root.clone()], Config::default());
        let ids = |m: &BTreeMap<String, Registered>| m.keys().cloned().collect::<Vec<_>>();
        let first = r.scan();
        let problems: Vec<_> = r.files.values().map(|f| f.problem.clone()).collect();
        assert_eq!(ids(&first), ["aa#0"], "{problems:?}");
        // Nothing changed: no walk, and nothing to register again.
        assert!(!r.refresh(), "nothing changed");
        assert_eq!(ids(&r.registered()), ["aa#0"]);
        assert_eq!(r.since_walk, 1);
        // A new folder deep down: its parent's time changes.
        workflow(&wf.join("bb"), "bb", "0 9 * * *");
        assert!(r.refresh(), "a workflow was added");
        assert_eq!(ids(&r.registered()), ["aa#0", "bb#0"]);
        assert_eq!(r.since_walk, 0);
        assert!(!r.refresh(), "nothing changed since");
        // Edited in place (no folder changes): the file's own stamp says so.
        std::thread::sleep(std::time::Duration::from_millis(20));
        workflow(&wf.join("aa"), "aa", "30 9 * * * ");
        assert!(r.refresh(), "a workflow was edited");
        let found = r.registered();
        assert_eq!(r.since_walk, 2, "no walk for an edit in place");
        assert_eq!(
            found["aa#0"].decl.schedule.as_ref().unwrap().cron.trim(),
            "30 9 * * *"
        );
        // Removed.
        std::fs::remove_dir_all(wf.join("bb")).unwrap();
        assert!(r.refresh(), "a workflow was removed");
        assert_eq!(ids(&r.registered()), ["aa#0"]);
        assert!(!r.refresh(), "nothing changed since");
        assert_eq!(ids(&r.scan()), ["aa#0"]);
        let _ = std::fs::remove_dir_all(&root);
    }

    /// `[daemon]` values fill what a trigger leaves out, field by field; a
    /// value not allowed names its key and what it allows.
    #[test]
    fn daemon_defaults_fill_what_a_trigger_leaves_out() {
        let mut c = Config::default();
        c.other.insert(
            "daemon".into(),
            serde_json::json!({"webhooks": "127.0.0.1:1", "catch_up": "none",
                "overlap": "allow", "max_runs_per_day": 2, "max_cost_usd_per_day": 1.5}),
        );
        let d = daemon_defaults(&c).unwrap();
        let mut decl: TriggerDecl = serde_json::from_value(
            serde_json::json!({"index": 0, "id": "x#0", "kind": "schedule"}),
        )
        .unwrap();
        let (catch_up, policy) = d.resolve(&decl);
        assert_eq!(catch_up, CatchUp::None);
        assert_eq!(policy.overlap, Overlap::Allow);
        assert_eq!(policy.quota.max_runs_per_day, Some(2));
        assert_eq!(policy.quota.max_cost_usd_per_day, Some(1.5));
        decl.policy.overlap = Some("queue".into());
        decl.policy.max_runs_per_day = Some(4);
        let (_, policy) = d.resolve(&decl);
        assert_eq!(policy.overlap, Overlap::Queue);
        assert_eq!(policy.quota.max_runs_per_day, Some(4));
        assert_eq!(policy.quota.max_cost_usd_per_day, Some(1.5));
        // No section: the scheduler's defaults.
        let (catch_up, policy) = Defaults::default().resolve(&TriggerDecl {
            policy: Default::default(),
            ..decl
        });
        assert_eq!((catch_up, policy), Default::default());

        for (key, value, allowed) in [
            (
                "overlap",
                serde_json::json!("sometimes"),
                "\"skip\", \"queue\" or \"allow\"",
            ),
            (
                "catch_up",
                serde_json::json!(3),
                "\"none\", \"latest\" or \"all\"",
            ),
            ("max_runs_per_day", serde_json::json!(-1), "whole number"),
            (
                "max_cost_usd_per_day",
                serde_json::json!("lots"),
                "US dollars",
            ),
        ] {
            c.other
                .insert("daemon".into(), serde_json::json!({ key: value }));
            let e = daemon_defaults(&c).unwrap_err().to_string();
            assert!(e.contains(&format!("[daemon] {key} = {value}")), "{e}");
            assert!(e.contains(allowed), "{e}");
            assert!(Registry::try_new(Vec::new(), c.clone()).is_err());
        }
    }
}
