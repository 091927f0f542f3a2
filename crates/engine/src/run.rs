//! The run API: everything between "run this workflow with these inputs" and the
//! executor, shared by the CLI, `agentfile serve` and `agentfile mcp`.
//!
//! [`prepare`] does every check that can fail before any work starts — the
//! workflow validates, the config loads, every provider an agent needs can be
//! built (key present, provider known), inputs bind, the workspace exists, the
//! policy loads — so a run that starts has what it needs. Transports differ only
//! in where events go and who answers approvals.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use crate::executor::{self, Approver, Limits, ModelError, Models, RunSpec, Services, exit};
use agentfile_config::Config;
use agentfile_llm::{self as llm, Cassette, Provider, ProviderOptions};
use agentfile_plan::Plan;
use agentfile_session::events::{EventBus, EventSink};
use agentfile_session::{self as session, SessionMeta, SessionStatus, SessionStore};
use agentfile_telemetry as telemetry;
use agentfile_tools::{MemoryStore, Policy, Toolbox};
use agentfile_wire::events::{RunResult, rfc3339};

/// What the caller asks for. Every field but `path` is optional.
#[derive(Clone, Default)]
pub struct RunRequest {
    pub path: PathBuf,
    /// The workflow's text, when it is not read from `path` (`run -`,
    /// `run --goal`); `path` then only places it (relative FROM files,
    /// policy.toml beside it).
    pub source: Option<String>,
    /// `--allow TOOL[:PATTERN]`: additions to the policy for this run.
    pub allow: Vec<String>,
    /// The workflow's inputs as the caller gave them (see [`executor::inputs`]).
    pub inputs: executor::Inputs,
    pub config: Option<PathBuf>,
    pub policy: Option<PathBuf>,
    pub workspace: Option<PathBuf>,
    /// `--provider`, overriding the config.
    pub provider: Option<String>,
    /// `--model`, overriding the config.
    pub model: Option<String>,
    /// `--base-url`, overriding the config (kept across a `--provider` switch).
    pub base_url: Option<String>,
    /// `--cassette` for `--provider replay`.
    pub cassette: Option<PathBuf>,
    /// `--script` for `--provider fake`.
    pub script: Option<PathBuf>,
    /// `--record FILE`.
    pub record: Option<PathBuf>,
    pub max_turns: Option<u64>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub timeout: Option<Duration>,
    pub strict_convergence: bool,
    /// Resume even when the workflow changed since the session started.
    pub force_changed: bool,
    /// How the workflow is read ([`agentfile_plan::ReadOptions`]): for the
    /// loader the caller passes to [`prepare`].
    pub read: agentfile_plan::ReadOptions,
    /// HTTP behaviour of providers (tests shorten timeouts and retries).
    pub http: Option<llm::HttpOptions>,
    /// The MCP host's model, for `--provider mcp-sampling` under `agentfile mcp`.
    pub sampling: Option<Arc<dyn Provider>>,
    /// A config the caller already found (the servers look for it in their
    /// workspace, not the current folder); `config` is then ignored.
    pub loaded_config: Option<Config>,
}

impl std::fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("path", &self.path)
            .field("inputs", &self.inputs)
            .field("config", &self.config)
            .field("workspace", &self.workspace)
            .field("provider", &self.provider)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// The per-call settings of a run (what its caller chose beyond the workflow
/// and its inputs), recorded with its session so that a resume runs under
/// them again unless the resumer chooses otherwise. Never secrets: keys stay
/// in the environment the config names.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RunSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The fake model's script (absolute), so a resume answers from it too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Wall-clock budget in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Absolute paths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// How the workflow is read (stored under the options' own names).
    #[serde(flatten)]
    pub read: agentfile_plan::ReadOptions,
}

fn absolute(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

impl RunSettings {
    /// What `req` sets explicitly.
    pub fn of(req: &RunRequest) -> Self {
        RunSettings {
            provider: req.provider.clone(),
            model: req.model.clone(),
            base_url: req.base_url.clone(),
            script: req.script.as_deref().map(absolute),
            max_turns: req.max_turns,
            max_tokens: req.max_tokens,
            max_cost_usd: req.max_cost_usd,
            timeout_secs: req.timeout.map(|t| t.as_secs_f64()),
            allow: req.allow.clone(),
            config: req.config.as_deref().map(absolute),
            policy: req.policy.as_deref().map(absolute),
            read: req.read.clone(),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == RunSettings::default()
    }

    /// Fill in what `req` leaves unset from these settings: the resumer's own
    /// choices win.
    pub fn fill(&self, req: &mut RunRequest) {
        fn or<T: Clone>(mine: &mut Option<T>, stored: &Option<T>) {
            if mine.is_none() {
                mine.clone_from(stored);
            }
        }
        or(&mut req.provider, &self.provider);
        or(&mut req.model, &self.model);
        or(&mut req.base_url, &self.base_url);
        if req.script.is_none() {
            req.script = self.script.as_ref().map(PathBuf::from);
        }
        or(&mut req.max_turns, &self.max_turns);
        or(&mut req.max_tokens, &self.max_tokens);
        or(&mut req.max_cost_usd, &self.max_cost_usd);
        if req.timeout.is_none() {
            req.timeout = self
                .timeout_secs
                .and_then(|s| Duration::try_from_secs_f64(s).ok());
        }
        if req.allow.is_empty() {
            req.allow.clone_from(&self.allow);
        }
        if req.config.is_none() && req.loaded_config.is_none() {
            req.config = self.config.as_ref().map(PathBuf::from);
        }
        if req.policy.is_none() {
            req.policy = self.policy.as_ref().map(PathBuf::from);
        }
        if req.read == agentfile_plan::ReadOptions::default() {
            req.read.clone_from(&self.read);
        }
    }

    /// The settings recorded with session `id` (none: empty).
    pub fn stored(store: &dyn SessionStore, id: &str) -> Self {
        store
            .run_settings(id)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    /// Record these settings with session `id` (nothing when empty).
    pub fn record(&self, store: &dyn SessionStore, id: &str) -> Result<(), session::StoreError> {
        if self.is_empty() {
            return Ok(());
        }
        let value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        match store.set_run_settings(id, &value) {
            Err(session::StoreError::Unsupported(_)) => Ok(()),
            other => other,
        }
    }
}

/// A run that cannot start, with the exit code it means.
#[derive(Debug, Clone, PartialEq)]
pub struct RunError {
    pub message: String,
    pub exit_code: i32,
    /// What went wrong, for callers that add their own advice.
    pub cause: Cause,
}

/// The kinds of [`RunError`] a caller may treat specially.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cause {
    #[default]
    Other,
    /// The provider's API key variable is not set.
    MissingApiKey,
}

impl RunError {
    /// A request that cannot run as given (exit 2).
    pub fn usage(message: impl Into<String>) -> RunError {
        usage(message)
    }

    pub fn exit_code(&self) -> i32 {
        self.exit_code
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RunError {}

fn usage(message: impl Into<String>) -> RunError {
    RunError {
        message: message.into(),
        exit_code: exit::USAGE,
        cause: Cause::Other,
    }
}

/// A run that passed every check and is ready to start.
pub struct Prepared {
    pub plan: Arc<Plan>,
    pub config: Config,
    /// Absolute and canonical.
    pub workspace: PathBuf,
    /// The folder of the workflow file (policy.toml is looked for here).
    pub workflow_dir: PathBuf,
    /// Bound to the plan (see [`executor::bind_inputs`]).
    pub inputs: executor::Inputs,
    pub limits: Limits,
    pub models: Arc<ConfigModels>,
    /// (provider, model) of the default profile, for `run_started`.
    pub provider_label: (String, String),
    /// Where the default provider's calls go.
    pub endpoint: Option<String>,
    pub policy: Option<PathBuf>,
    /// `--allow` additions to the policy.
    pub allow: Vec<String>,
    /// `--force-changed`: resume against a changed workflow.
    pub force_changed: bool,
    /// What a new session records for its resumes ([`RunSettings::of`] the
    /// request; a server may put only its caller's choices here).
    pub settings: RunSettings,
    /// The trigger that started the run, for `run_started` (set by the
    /// daemon after [`prepare`]; never from a caller's request).
    pub trigger: Option<agentfile_wire::events::RunTrigger>,
    /// The session and node this run is a fork of, for `run_started` (set
    /// by the run service's fork; never from a caller's request).
    pub forked_from: Option<agentfile_wire::events::ForkedFrom>,
    /// The journal a replay answers from (set by the run service's replay).
    pub replay: Option<Arc<executor::replay::ReplayJournal>>,
    /// The workflow file and every file it loads: control files, out of
    /// the run's tools' reach.
    pub workflow_files: Vec<PathBuf>,
}

impl Prepared {
    /// Where this run's control files are ([`agentfile_tools::policy::control`]).
    pub fn control_inputs(&self) -> agentfile_tools::policy::control::ControlInputs {
        agentfile_tools::policy::control::ControlInputs {
            workspace: self.workspace.clone(),
            workflow_dir: self.workflow_dir.clone(),
            policy: self.policy.clone(),
            config: self.settings.config.as_ref().map(PathBuf::from),
            cwd: std::env::current_dir().ok(),
            workflow_files: self.workflow_files.clone(),
        }
    }
}

/// The workflow `agentfile run --goal TEXT` runs: one goal, no agents, in one
/// RUN step. The text is taken literally (`$` is not a variable here).
pub fn one_goal_workflow(text: &str) -> String {
    let literal = text.replace('$', "$$");
    let quoted = if literal.contains("\"\"\"") || literal.ends_with('"') {
        let escaped = literal
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
            .replace('\r', "\\r")
            .replace('\t', "\\t");
        format!("\"{escaped}\"")
    } else {
        format!("\"\"\"{literal}\"\"\"")
    };
    format!("NAME goal\nGOAL goal {quoted}\nRUN main USING goal\n")
}

/// Validate everything a run needs (see the module doc).
/// Reads the request's workflow into a plan, under the config it runs with:
/// the front ends' registry, which the caller supplies (the engine knows no
/// format). The error is the front end's own (its text, the workflow's
/// diagnostics rendered for a person, becomes the usage error's message).
pub type Load<'a> = &'a dyn Fn(&RunRequest, &Config) -> Result<Plan, LoadError>;

/// Why a [`Load`] read no plan: any error of the caller's front ends.
pub type LoadError = Box<dyn std::error::Error + Send + Sync>;

pub fn prepare(req: &RunRequest, load: Load<'_>) -> Result<Prepared, RunError> {
    let config = match &req.loaded_config {
        Some(c) => c.clone(),
        None => load_config(req.config.as_deref(), &req.path)?,
    };
    let (plan, mut workflow_files) = agentfile_plan::diag::record_sources(|| load(req, &config));
    let plan = plan.map_err(|e| usage(e.to_string()))?;
    // The file read (a folder given as the workflow resolves to its file).
    let workflow_path = PathBuf::from(&plan.path);
    let mut config = config;
    if let Some(p) = &req.provider {
        if !agentfile_config::PROVIDERS.contains(&p.as_str()) {
            return Err(usage(format!(
                "unknown provider `{p}`; use one of: {}",
                agentfile_config::PROVIDERS.join(", ")
            )));
        }
        if config.llm.provider.as_deref() != Some(p.as_str()) {
            // Another provider: the configured key variable belonged to the old
            // one. An explicit endpoint stays (a local server often speaks
            // several formats); the run's header names it, so a wrong one shows.
            config.llm.api_key_env = None;
        }
        config.llm.provider = Some(p.clone());
    }
    if let Some(u) = &req.base_url {
        config.llm.base_url = Some(u.clone());
    }
    if let Some(m) = &req.model {
        config.llm.model = Some(m.clone());
    }
    telemetry::check(&config).map_err(|e| usage(e.to_string()))?;
    let workflow_dir = workflow_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut given = req.inputs.clone();
    let workspace = if let Some(root_input) = plan.root.input() {
        // Its paths are relative to its folder (unless the caller chose
        // another root, as `create` does), and its project is the folder
        // holding `workflows/`.
        let root = match given.get(root_input) {
            Some(r) => PathBuf::from(executor::inputs::input_text(r)),
            None => workflow_dir
                .canonicalize()
                .map_err(|e| usage(format!("workflow folder {}: {e}", workflow_dir.display())))?,
        };
        given.insert(
            root_input.to_owned(),
            serde_json::Value::String(root.display().to_string()),
        );
        let project = agentfile_plan::project_of_folder(&root);
        match (req.workspace.as_deref(), &config.agent.workspace) {
            // A package's folder is the cache's, read-only: its runs work in
            // the caller's workspace.
            (None, None) if plan.package.is_none() => resolve_workspace(Some(&project), &config)?,
            (flag, _) => resolve_workspace(flag, &config)?,
        }
    } else {
        resolve_workspace(req.workspace.as_deref(), &config)?
    };
    let secrets = agentfile_tools::secrets::Secrets::from_config(&config);
    let inputs =
        executor::bind_inputs_with(&plan, &given, &secrets).map_err(|e| usage(e.to_string()))?;
    check_required_env(&plan)?;
    if let Some(decl) = &plan.declared {
        agentfile_tools::policy::declared::check_runnable(decl)
            .map_err(|e| usage(e.to_string()))?;
    }
    let limits = limits(req, &config)?;
    let options = ProviderOptions {
        http: req.http.unwrap_or_default(),
        cassette: req.cassette.clone().or_else(|| config.llm.cassette.clone()),
        script: req.script.clone().or_else(|| config.llm.script.clone()),
        record: None,
        sampling: req.sampling.clone(),
    };
    let models = Arc::new(ConfigModels::new(
        config.clone(),
        options,
        req.record.as_deref(),
    )?);
    // A workflow of tools alone (a WORKFLOW.md without `agent` steps) needs
    // no model, and so no provider or key.
    let (provider_label, endpoint) = if needs_model(&plan) {
        check_models(&plan, &models)?
    } else {
        (("none".to_owned(), "none".to_owned()), None)
    };
    // What the workflow loads outside the front ends' source maps: the
    // prompt files and skills its agents come from.
    workflow_files.push(workflow_path.clone());
    for a in &plan.agents {
        match &a.source {
            agentfile_plan::PromptSource::File { path }
            | agentfile_plan::PromptSource::Skill { path, .. } => {
                let p = workflow_dir.join(path);
                workflow_files.push(if p.is_dir() { p.join("SKILL.md") } else { p });
            }
            _ => {}
        }
    }
    Ok(Prepared {
        workflow_files,
        plan: Arc::new(plan),
        config,
        workspace,
        workflow_dir,
        inputs,
        limits,
        models,
        provider_label,
        endpoint,
        policy: req.policy.clone(),
        allow: req.allow.clone(),
        force_changed: req.force_changed,
        settings: RunSettings::of(req),
        trigger: None,
        forked_from: None,
        replay: None,
    })
}

/// Build every provider the workflow will need now, so a missing key or an
/// unknown profile stops the run before the first model call; the default
/// provider's label and endpoint.
#[allow(clippy::type_complexity)]
fn check_models(
    plan: &Plan,
    models: &ConfigModels,
) -> Result<((String, String), Option<String>), RunError> {
    let default = models.build(None).map_err(|e| match e {
        llm::LlmError::NoProvider { .. } => usage(format!(
            "{e}\n  = hint: pass --provider and --model (e.g. --provider anthropic --model claude-sonnet-4-5 with ANTHROPIC_API_KEY set), or add an [llm] section to agent.toml; examples/demo runs offline from a cassette"
        )),
        llm::LlmError::MissingKey { .. } => RunError {
            cause: Cause::MissingApiKey,
            ..usage(e.to_string())
        },
        other => usage(other.to_string()),
    })?;
    for a in &plan.agents {
        if a.profile.is_some() {
            models
                .provider(a.profile.as_deref())
                .map_err(|e| usage(e.to_string()))?;
        }
    }
    Ok((
        (default.name().to_owned(), default.model().to_owned()),
        default.endpoint(),
    ))
}

/// Every agent file's `required.env` must be set before the run starts.
fn check_required_env(plan: &Plan) -> Result<(), RunError> {
    fn walk(plan: &Plan, out: &mut Vec<String>) {
        for a in &plan.agents {
            let Some(card) = &a.card else { continue };
            let missing: Vec<&str> = card
                .required_env
                .iter()
                .filter(|v| std::env::var_os(v).is_none_or(|x| x.is_empty()))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                out.push(format!(
                    "agent `{}` ({}) requires environment variables that are not set: {}",
                    a.name,
                    card.file,
                    missing.join(", ")
                ));
            }
        }
        plan.graph.walk(&mut |n| {
            if let agentfile_plan::NodeKind::Subworkflow { plan, .. } = &n.kind {
                walk(plan, out);
            }
        });
    }
    let mut problems = Vec::new();
    walk(plan, &mut problems);
    if problems.is_empty() {
        return Ok(());
    }
    Err(usage(format!(
        "{}\n  = hint: set them in the run's environment (`required.env` of the agent file); nothing was sent to a model",
        problems.join("\n")
    )))
}

/// Whether any goal (in the plan or a sub-workflow) talks to a model.
fn needs_model(plan: &Plan) -> bool {
    let mut any = !plan.goals.is_empty();
    plan.graph.walk(&mut |n| {
        if let agentfile_plan::NodeKind::Subworkflow { plan, .. } = &n.kind {
            any |= needs_model(plan);
        }
    });
    any
}

/// `--config`, else `./agent.json` / `./agent.toml`, else one beside the workflow,
/// else defaults.
pub fn load_config(explicit: Option<&Path>, workflow: &Path) -> Result<Config, RunError> {
    match find_config(explicit, workflow, Path::new("."))? {
        Some(c) => Ok(c),
        None => default_config(),
    }
}

/// The config when no file is found anywhere: the defaults, with the
/// `AGENTFILE_*` environment still applied.
pub fn default_config() -> Result<Config, RunError> {
    let mut c = Config::default();
    c.apply_env(|k| std::env::var(k).ok())
        .map_err(|e| usage(e.to_string()))?;
    Ok(c)
}

/// The config file a workflow uses, if there is one: `explicit`, else
/// `agent.json` / `agent.toml` in `dir` (the current folder for the CLI, the
/// workspace for the servers), else one beside the workflow. Environment
/// overrides are applied.
pub fn find_config(
    explicit: Option<&Path>,
    workflow: &Path,
    dir: &Path,
) -> Result<Option<Config>, RunError> {
    agentfile_config::find_for_workflow(explicit, workflow, dir).map_err(|e| usage(e.to_string()))
}

/// The workspace a command works in: `--workspace`, else the config's
/// `agent.workspace`, else the current folder; absolute, canonical, a folder.
pub fn resolve_workspace(flag: Option<&Path>, config: &Config) -> Result<PathBuf, RunError> {
    let chosen = flag
        .map(Path::to_path_buf)
        .or_else(|| config.agent.workspace.clone())
        .unwrap_or_else(|| PathBuf::from("."));
    let canonical = chosen
        .canonicalize()
        .map_err(|e| usage(format!("workspace {}: {e}", chosen.display())))?;
    if !canonical.is_dir() {
        return Err(usage(format!(
            "workspace {} is not a folder",
            chosen.display()
        )));
    }
    Ok(canonical)
}

fn limits(req: &RunRequest, config: &Config) -> Result<Limits, RunError> {
    let c = &config.limits;
    let timeout = match (req.timeout, &c.timeout) {
        (Some(t), _) => Some(t),
        (None, Some(s)) => {
            Some(executor::parse_duration(s).map_err(|e| usage(format!("limits.timeout: {e}")))?)
        }
        (None, None) => None,
    };
    use executor::BudgetKind;
    let from_config = [
        (
            BudgetKind::MaxTurns,
            req.max_turns.is_none() && c.max_turns.is_some(),
        ),
        (
            BudgetKind::MaxTokens,
            req.max_tokens.is_none() && c.max_tokens.is_some(),
        ),
        (
            BudgetKind::MaxCost,
            req.max_cost_usd.is_none() && c.max_cost_usd.is_some(),
        ),
        (
            BudgetKind::Timeout,
            req.timeout.is_none() && c.timeout.is_some(),
        ),
    ]
    .into_iter()
    .filter_map(|(k, yes)| yes.then_some(k))
    .collect();
    Ok(Limits {
        from_config,
        max_turns: req.max_turns.or(c.max_turns.map(u64::from)),
        max_tokens: req.max_tokens.or(c.max_tokens),
        max_cost_usd: req.max_cost_usd.or(c.max_cost_usd),
        timeout,
        goal_turns: None,
        strict_convergence: req.strict_convergence,
        max_map_items: c
            .max_map_items
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    })
}

/// Inputs from `--inputs-json` (a JSON object; `-` reads stdin), its values as
/// they are, and `--input k=v` flags (each a string), the flags winning.
pub fn parse_inputs(
    pairs: &[String],
    json_source: Option<&str>,
) -> Result<executor::Inputs, RunError> {
    let mut out = executor::Inputs::new();
    if let Some(src) = json_source {
        let text = if src == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .map_err(|e| usage(format!("--inputs-json -: cannot read stdin: {e}")))?;
            s
        } else {
            std::fs::read_to_string(src).map_err(|e| usage(format!("--inputs-json {src}: {e}")))?
        };
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| usage(format!("--inputs-json {src}: invalid JSON: {e}")))?;
        // Accept both `{"k": "v"}` and the reference test data's `{"inputs": {…}}`.
        let obj = match v.get("inputs") {
            Some(inner) if inner.is_object() && v.as_object().is_some_and(|o| o.len() <= 4) => {
                inner.clone()
            }
            _ => v,
        };
        let Some(map) = obj.as_object() else {
            return Err(usage(format!(
                "--inputs-json {src}: expected a JSON object of input names to values"
            )));
        };
        out.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    for p in pairs {
        let Some((k, v)) = p.split_once('=') else {
            return Err(usage(format!("--input {p}: expected name=value")));
        };
        if k.trim().is_empty() {
            return Err(usage(format!("--input {p}: the name before `=` is empty")));
        }
        out.insert(k.trim().to_owned(), serde_json::Value::String(v.to_owned()));
    }
    Ok(out)
}

/// Providers from the config, one per profile, built once and shared.
pub struct ConfigModels {
    config: Config,
    options: ProviderOptions,
    cassette: Option<Cassette>,
    cache: Mutex<HashMap<Option<String>, Arc<dyn Provider>>>,
}

impl ConfigModels {
    pub fn new(
        config: Config,
        options: ProviderOptions,
        record: Option<&Path>,
    ) -> Result<ConfigModels, RunError> {
        let cassette = match record {
            Some(path) => Some(Cassette::create(path).map_err(|e| usage(e.to_string()))?),
            None => None,
        };
        Ok(ConfigModels {
            config,
            options,
            cassette,
            cache: Mutex::new(HashMap::new()),
        })
    }
}

impl ConfigModels {
    /// The provider for `profile` (the config's `llm` when `None`), built once,
    /// with the reason as a type when it cannot be.
    pub fn build(&self, profile: Option<&str>) -> Result<Arc<dyn Provider>, llm::LlmError> {
        let key = profile.map(str::to_owned);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.get(&key) {
            return Ok(p.clone());
        }
        let env = |k: &str| std::env::var(k).ok();
        let built = llm::provider_for(&self.config, profile, &env, &self.options)?;
        let built: Arc<dyn Provider> = match &self.cassette {
            Some(c) => Arc::new(c.record(built)),
            None => built,
        };
        cache.insert(key, built.clone());
        Ok(built)
    }
}

impl Models for ConfigModels {
    fn provider(&self, profile: Option<&str>) -> Result<Arc<dyn Provider>, ModelError> {
        self.build(profile).map_err(|e| ModelError {
            profile: profile.map(str::to_owned),
            reason: Box::new(e),
        })
    }
}

/// Where a run's session comes from.
pub enum SessionChoice {
    New,
    /// A session already recorded (as `queued`) that has not run yet.
    Created(String),
    /// Continue this session: its completed goals are not run again.
    Resume(String),
}

/// Open the session store a prepared run uses.
pub fn open_store(config: &Config, workspace: &Path) -> Result<Arc<dyn SessionStore>, RunError> {
    session::open(config, workspace)
        .map(Arc::from)
        .map_err(|e| usage(format!("cannot open the session store: {e}")))
}

/// Record a new session for a prepared run, with `status` (`running`, or
/// `queued` for a server's run waiting for a slot). Returns its id.
pub fn create_session(
    store: &dyn SessionStore,
    prepared: &Prepared,
    status: SessionStatus,
) -> Result<String, session::StoreError> {
    let id = session::new_session_id();
    let now = rfc3339(SystemTime::now());
    let path = std::fs::canonicalize(&prepared.plan.path)
        .unwrap_or_else(|_| PathBuf::from(&prepared.plan.path));
    store.create(&SessionMeta {
        id: id.clone(),
        workflow: prepared.plan.name.clone(),
        path: path.display().to_string(),
        workspace: prepared.workspace.display().to_string(),
        inputs: executor::inputs::inputs_text(&prepared.inputs),
        status,
        created_at: now.clone(),
        updated_at: now,
        last_seq: 0,
    })?;
    prepared.settings.record(store, &id)?;
    Ok(id)
}

/// Record a human's decision on a stored session's pending approval, as an
/// `approval_resolved` event after its last one (the session must not be
/// running in this moment: `sessions approve`, or a server approving a session
/// that waits from an earlier process). Returns the goal decided.
pub fn record_decision(
    store: &Arc<dyn SessionStore>,
    id: &str,
    approved: bool,
    note: Option<String>,
) -> Result<String, RunError> {
    let events = store.events(id, 0).map_err(|e| usage(e.to_string()))?;
    let Some(seq) = session::pending_approval_in(&events) else {
        return Err(usage(format!(
            "session `{id}` is not waiting for an approval"
        )));
    };
    let Some(asked) = events.iter().find(|e| e.seq == seq) else {
        return Err(usage(format!(
            "session `{id}`: approval event {seq} is missing"
        )));
    };
    let last = events.last().map(|e| e.seq).unwrap_or(0);
    let bus = EventBus::new(id, last, Some(store.clone()));
    let scope = agentfile_session::events::Scope {
        step: asked.step.clone(),
        goal: asked.goal.clone(),
        agent: asked.agent.clone(),
        iteration: asked.iteration,
        node: asked.node.clone(),
        node_kind: None,
    };
    bus.emit(
        &scope,
        agentfile_wire::events::EventBody::ApprovalResolved { approved, note },
    );
    if let Some(e) = bus.store_error() {
        return Err(usage(format!("cannot record the decision: {e}")));
    }
    Ok(asked.goal.clone().unwrap_or_default())
}

pub use agentfile_session::pending_suspends;

/// Deliver a signal to a stored, suspended session (`sessions signal`, a
/// server's `signal`): recorded as a `signal` event after its last one, for the
/// suspend that waits for it to take when the run resumes. An event nothing
/// waits for is refused, naming what the session waits for.
pub fn record_signal(
    store: &Arc<dyn SessionStore>,
    id: &str,
    event: &str,
    payload: serde_json::Value,
) -> Result<(), RunError> {
    let events = store.events(id, 0).map_err(|e| usage(e.to_string()))?;
    let waiting = pending_suspends(&events);
    if waiting.is_empty() {
        return Err(usage(format!(
            "session `{id}` is not suspended: nothing in it waits for a signal"
        )));
    }
    if !waiting
        .iter()
        .any(|(_, evs)| evs.iter().any(|e| e == event))
    {
        let mut names: Vec<&str> = waiting
            .iter()
            .flat_map(|(_, evs)| evs.iter().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        return Err(usage(format!(
            "session `{id}` waits for {}, not `{event}`",
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        )));
    }
    let last = events.last().map(|e| e.seq).unwrap_or(0);
    let bus = EventBus::new(id, last, Some(store.clone()));
    bus.emit(
        &agentfile_session::events::Scope::default(),
        agentfile_wire::events::EventBody::Signal {
            event: event.to_owned(),
            payload,
        },
    );
    if let Some(e) = bus.store_error() {
        return Err(usage(format!("cannot record the signal: {e}")));
    }
    Ok(())
}

/// The stores a run writes to: its session log and the memory tools' table.
/// Servers open them once and share them between runs.
#[derive(Clone)]
pub struct Stores {
    pub sessions: Arc<dyn SessionStore>,
    pub memory: MemoryStore,
}

/// Open the stores for a configuration and workspace. The memory table lives
/// in the SQLite session database, or beside the file store.
pub fn open_stores(config: &Config, workspace: &Path) -> Result<Stores, RunError> {
    let sessions = open_store(config, workspace)?;
    let memory_path = match session::location(config, workspace) {
        Ok((session::Backend::Sqlite, p)) => p,
        _ => workspace.join(".agentfile").join("memory.db"),
    };
    let memory =
        MemoryStore::open(&memory_path).map_err(|e| usage(format!("memory store: {e}")))?;
    Ok(Stores { sessions, memory })
}

/// Start a prepared run and carry it to its end: open the session, load the
/// policy and the tools, stream events to `sinks` (after the store), and ask
/// `approver` at supervised goals. Setup problems are a [`RunError`]; everything
/// after `run_started` is part of the [`RunResult`].
pub async fn start(
    prepared: Prepared,
    choice: SessionChoice,
    sinks: Vec<Arc<dyn EventSink>>,
    approver: &dyn Approver,
    cancel: CancellationToken,
) -> Result<RunResult, RunError> {
    let stores = open_stores(&prepared.config, &prepared.workspace)?;
    start_in(prepared, stores, choice, sinks, approver, cancel).await
}

/// [`start`] with stores the caller already opened.
pub async fn start_in(
    prepared: Prepared,
    stores: Stores,
    choice: SessionChoice,
    sinks: Vec<Arc<dyn EventSink>>,
    approver: &dyn Approver,
    cancel: CancellationToken,
) -> Result<RunResult, RunError> {
    let store = stores.sessions;
    let (id, prior) = match choice {
        SessionChoice::Created(id) => (id, Vec::new()),
        SessionChoice::Resume(id) => {
            let meta = store.get(&id).map_err(|e| usage(e.to_string()))?;
            if meta.status == SessionStatus::Completed {
                return Err(usage(format!(
                    "session `{id}` already completed; nothing to resume"
                )));
            }
            let prior = store.events(&id, 0).map_err(|e| usage(e.to_string()))?;
            if !prepared.force_changed {
                executor::check_resume(&prepared.plan, &prior)
                    .map_err(|e| usage(format!("session `{id}`: {e}")))?;
            }
            (id, prior)
        }
        SessionChoice::New => {
            let id = create_session(store.as_ref(), &prepared, SessionStatus::Running)
                .map_err(|e| usage(format!("cannot record the session: {e}")))?;
            (id, Vec::new())
        }
    };

    let mut policy = Policy::load(prepared.policy.as_deref(), &prepared.workflow_dir)
        .map_err(|e| usage(e.to_string()))?;
    // Nothing the agent can write may decide what it may do next: the files
    // that configure this run are out of its tools' reach.
    policy.control_for_run(agentfile_tools::policy::control::control_files(
        &prepared.control_inputs(),
    ));
    if !prepared.allow.is_empty() {
        policy
            .allow_for_run(&prepared.allow)
            .map_err(|e| usage(format!("--allow: {e}")))?;
    }
    if let Some(root) = prepared
        .plan
        .root
        .input()
        .and_then(|k| prepared.inputs.get(k))
        .map(executor::inputs::input_text)
    {
        for dir in &prepared.plan.protected {
            policy.protect_for_run(
                Path::new(&root).join(dir.trim_end_matches('/')),
                format!(
                    "built-in: the workflow's {dir} is not writable during a run (its scripts run without the bash allowlist)"
                ),
            );
        }
    }
    if !prepared.plan.files.is_empty() {
        // The file contract's scratch folder (`_workflowFsRoot`): the file
        // tools may use it, though it lies in `.agentfile/`.
        policy.scratch_for_run(executor::scratch_root(&prepared.workspace, &id));
    }
    let mut notes = Vec::new();
    if let Some(decl) = &prepared.plan.declared {
        let home = std::env::home_dir();
        let guard = agentfile_tools::policy::declared::DeclarationGuard::new(
            decl,
            &prepared.workspace,
            home.as_deref(),
        )
        .map_err(|e| usage(format!("agentrc: {e}")))?;
        policy.guard_for_run(Arc::new(guard));
        notes.extend(
            decl.grants
                .ignored
                .iter()
                .map(|i| format!("agentrc: not acted on: {i}")),
        );
    }
    let options = toolbox_options(&prepared.plan);
    let toolbox = Toolbox::with_options(
        &prepared.config,
        policy,
        &prepared.workspace,
        stores.memory,
        options,
    )
    .map_err(|e| usage(e.to_string()))?;
    toolbox.ready().await;

    let last_seq = prior.last().map(|e| e.seq).unwrap_or(0);
    // Pipelined: the run goes on while its last events are committed (group
    // commit); sinks still see only stored events (see `events`).
    let bus = EventBus::new(&id, last_seq, Some(store.clone()))
        .with_notices(toolbox.notices())
        .pipelined();
    for s in sinks {
        bus.subscribe(s);
    }
    let info = telemetry::RunInfo::new(&prepared.config, &prepared.plan, &prepared.workspace, &id);
    let shipping = telemetry::Telemetry::start(&prepared.config, &info);
    if let Some(t) = &shipping {
        bus.subscribe(t.sink());
        t.report_errors_to(bus.notices());
    }
    let svc = Services {
        models: prepared.models.as_ref(),
        tools: &toolbox,
        approver,
        bus: &bus,
    };
    let spec = RunSpec {
        plan: prepared.plan.clone(),
        inputs: prepared.inputs.clone(),
        workspace: prepared.workspace.clone(),
        agent_id: prepared
            .config
            .agent
            .id
            .clone()
            .unwrap_or_else(|| "default".into()),
        limits: prepared.limits.clone(),
        provider_label: prepared.provider_label.clone(),
        endpoint: prepared.endpoint.clone(),
        prior_events: prior,
        warnings: toolbox.warnings().into_iter().chain(notes).collect(),
        trigger: prepared.trigger.clone(),
        forked_from: prepared.forked_from.clone(),
        replay: prepared.replay.clone(),
    };
    let result = executor::execute(spec, &svc, cancel).await;
    toolbox.shutdown();
    if let Some(t) = shipping {
        t.finish(telemetry::FINISH_WAIT).await;
    }
    if result.termination_reason == agentfile_wire::events::TerminationReason::ApprovalUnavailable {
        // Not a failure: the run waits for `sessions approve`, then resumes.
        let _ = store.set_status(&id, SessionStatus::WaitingApproval);
    }
    Ok(result)
}

/// What the toolbox needs to know of the plan before any call: whether it
/// declares programs (shell steps), so the sandbox is prepared at once.
fn toolbox_options(plan: &agentfile_plan::Plan) -> agentfile_tools::ToolboxOptions {
    let mut programs_declared = false;
    plan.graph.walk(&mut |n| {
        programs_declared |= matches!(n.kind, agentfile_plan::NodeKind::Shell { .. });
    });
    agentfile_tools::ToolboxOptions {
        programs_declared,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_flags_and_json() {
        let dir = std::env::temp_dir().join(format!("agentfile-inputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("in.json");
        std::fs::write(&f, r#"{"inputs": {"content": "text", "max_words": 50}}"#).unwrap();
        let got = parse_inputs(&["max_words=20".into()], Some(f.to_str().unwrap())).unwrap();
        assert_eq!(got["content"], "text");
        assert_eq!(got["max_words"], "20", "a flag is a string, and wins");
        std::fs::write(&f, r#"{"n": 5, "tags": ["a"], "opts": {"k": true}}"#).unwrap();
        let got = parse_inputs(&[], Some(f.to_str().unwrap())).unwrap();
        assert_eq!(got["n"], serde_json::json!(5), "JSON values stay JSON");
        assert_eq!(got["tags"], serde_json::json!(["a"]));
        assert_eq!(got["opts"], serde_json::json!({"k": true}));
        assert!(
            parse_inputs(&["novalue".into()], None)
                .unwrap_err()
                .message
                .contains("name=value")
        );
        std::fs::write(&f, "[1,2]").unwrap();
        assert!(parse_inputs(&[], Some(f.to_str().unwrap())).is_err());
    }

    /// Settings stored before the read options were one value read back the
    /// same, and are written under the same names.
    #[test]
    fn stored_read_options_keep_their_names() {
        let stored = serde_json::json!({
            "model": "m",
            "lenient": true,
            "core_only": true,
            "extensions": ["security"]
        });
        let s: RunSettings = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(s.model.as_deref(), Some("m"));
        assert_eq!(
            s.read,
            agentfile_plan::ReadOptions {
                lenient: true,
                core_only: true,
                extensions: vec!["security".to_owned()],
            }
        );
        assert_eq!(serde_json::to_value(&s).unwrap(), stored);
        let plain = RunSettings {
            model: Some("m".to_owned()),
            ..RunSettings::default()
        };
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            serde_json::json!({"model": "m"})
        );
    }
}
