//! `agentfile run`: one run of a workflow (or of `--goal TEXT`, or of a
//! workflow on standard input) in this process, progress on stderr, the
//! result on stdout; also how `sessions resume`, `sessions signal` and
//! `create` start theirs. The terminal approver lives here: a person at this
//! terminal answers the run's approvals.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use agentfile::events::EventSink;
use agentfile::executor::{Approval, ApprovalRequest, Approver};
use agentfile::frontend::{self, Analysis, Options};
use agentfile::printer::{Live, Progress, StreamJson};
use agentfile::run::{self as runapi, RunError, RunRequest};
use agentfile::service::{
    ForkFrom, LiveRun, LoadError, Reader, RunHooks, RunService, ServiceOptions, Submission,
};
use agentfile::wire::events::RunResult;
use agentfile::wire::rpc::RpcError;

use super::args::{OutputMode, ReadArgs};
use super::{exit_code, next_stop_signal};

#[derive(clap::Args, Clone, Default)]
pub(super) struct Args {
    /// The workflow file (or a folder holding an Agentfile); `-` reads the
    /// workflow from standard input.
    pub(super) path: Option<PathBuf>,
    /// Run one goal in the workspace, no workflow file needed:
    /// `agentfile run --goal "list the files"` (the file tools need no
    /// `--allow`; `--allow bash:PATTERN` adds commands).
    #[arg(long, value_name = "TEXT", conflicts_with = "path")]
    pub(super) goal: Option<String>,
    /// Allow a tool for this run, on top of the policy: `TOOL` or
    /// `TOOL:PATTERN` (repeatable), e.g. `--allow write`, `--allow bash:"cargo test *"`.
    /// A deny rule of the policy file still wins.
    #[arg(long = "allow", value_name = "TOOL[:PATTERN]")]
    pub(super) allow: Vec<String>,
    /// An input as name=value (repeatable).
    #[arg(long = "input", value_name = "NAME=VALUE")]
    pub(super) inputs: Vec<String>,
    /// Inputs from a JSON object in FILE, or `-` for standard input.
    #[arg(long, value_name = "FILE|-")]
    pub(super) inputs_json: Option<String>,
    #[command(flatten)]
    pub(super) setup: SetupArgs,
    /// Record every model exchange of this run to a cassette.
    #[arg(long)]
    pub(super) record: Option<PathBuf>,
    /// How the run reports: text (progress on stderr, the answer on stdout),
    /// json (one result object at the end) or stream-json (every event as a
    /// JSON line).
    #[arg(long, value_enum, default_value_t = OutputMode::Text)]
    pub(super) output: OutputMode,
    /// Continue an interrupted session instead of starting a new one.
    #[arg(long, value_name = "SESSION")]
    pub(super) resume: Option<String>,
    #[command(flatten)]
    pub(super) control: ControlArgs,
    #[command(flatten)]
    pub(super) read: ReadArgs,
}

/// Where a run's settings come from and which model answers it.
#[derive(clap::Args, Clone, Default)]
pub(super) struct SetupArgs {
    /// Config file (agent.toml or agent.json; default: one in the current
    /// folder, else one beside the workflow).
    #[arg(long)]
    pub(super) config: Option<PathBuf>,
    /// Policy file (default: policy.toml beside the workflow, else the safe default).
    #[arg(long)]
    pub(super) policy: Option<PathBuf>,
    /// The folder tools work in (default: agent.workspace in the config, else here).
    #[arg(long)]
    pub(super) workspace: Option<PathBuf>,
    /// anthropic, openai, openrouter, ollama, gemini, replay, fake (a scripted
    /// model, offline: see --script) or mcp-sampling.
    #[arg(long)]
    pub(super) provider: Option<String>,
    /// The model to ask (default: the config's `llm.model`; there is no
    /// built-in model, except `fake` for --provider fake).
    #[arg(long)]
    pub(super) model: Option<String>,
    /// The provider's API endpoint (a local server, a proxy); kept when
    /// --provider switches the wire format. Default: the config's
    /// `llm.base_url` or AGENTFILE_BASE_URL, else the provider's public API.
    #[arg(long, value_name = "URL")]
    pub(super) base_url: Option<String>,
    /// The cassette `--provider replay` answers from.
    #[arg(long)]
    pub(super) cassette: Option<PathBuf>,
    /// The script `--provider fake` answers from: a JSON array of replies
    /// (`[{"tool_calls": [{"name": "ls", "arguments": {}}]}, {"text": "done"}]`);
    /// see "Testing offline" in the book, docs/src/guides/testing-offline.md.
    #[arg(long, value_name = "FILE")]
    pub(super) script: Option<PathBuf>,
}

/// A run's limits and how it answers what it meets; a resumed run takes
/// them anew.
#[derive(clap::Args, Clone, Default)]
pub(super) struct ControlArgs {
    /// Most model turns the whole run may take (default: the config's
    /// `[limits] max_turns`, else no limit; one conversation stops at 40).
    #[arg(long, value_name = "N")]
    pub(super) max_turns: Option<u64>,
    /// Most tokens, input and output, the whole run may use.
    #[arg(long, value_name = "N")]
    pub(super) max_tokens: Option<u64>,
    /// Most the run's model calls may cost, in US dollars.
    #[arg(long, value_name = "USD")]
    pub(super) max_cost_usd: Option<f64>,
    /// Wall-clock limit such as 90s, 10m or 1h.
    #[arg(long)]
    pub(super) timeout: Option<String>,
    /// Approve every supervised goal without asking.
    #[arg(long)]
    pub(super) approve_all: bool,
    /// Exit 5 when a loop reaches its limit without converging.
    #[arg(long)]
    pub(super) strict_convergence: bool,
    /// Resume a session even though its workflow changed since it started.
    #[arg(long)]
    pub(super) force_changed: bool,
}

/// What a resumed run takes (`sessions resume`, `sessions signal`): the
/// flags of `run` less those a resume cannot use — a goal, inputs (it keeps
/// those it started with), a recording, another session to resume.
#[derive(clap::Args, Clone)]
pub(super) struct ResumeArgs {
    /// The workflow file (or a folder holding an Agentfile); `-` reads the
    /// workflow from standard input.
    path: Option<PathBuf>,
    /// Allow a tool for this run, on top of the policy: `TOOL` or
    /// `TOOL:PATTERN` (repeatable), e.g. `--allow write`, `--allow bash:"cargo test *"`.
    /// A deny rule of the policy file still wins.
    #[arg(long = "allow", value_name = "TOOL[:PATTERN]")]
    allow: Vec<String>,
    #[command(flatten)]
    pub(super) setup: SetupArgs,
    /// How the run reports: text (progress on stderr, the answer on stdout),
    /// json (one result object at the end) or stream-json (every event as a
    /// JSON line).
    #[arg(long, value_enum, default_value_t = OutputMode::Text)]
    output: OutputMode,
    #[command(flatten)]
    control: ControlArgs,
    #[command(flatten)]
    read: ReadArgs,
}

impl ResumeArgs {
    fn into_run(self) -> Args {
        Args {
            path: self.path,
            allow: self.allow,
            setup: self.setup,
            output: self.output,
            control: self.control,
            read: self.read,
            ..Args::default()
        }
    }
}

/// `agentfile run`.
pub(super) fn run(args: Args) -> std::process::ExitCode {
    // No kernel probe here: a run whose tools start no program never needs
    // the sandbox (see `ToolSandbox::deferred`), and one that does probes
    // when its toolbox is made.
    run_to_exit(args, Start::New)
}

/// Continue session `id` (`sessions resume`, `sessions signal`).
pub(super) fn resume(id: String, args: ResumeArgs) -> std::process::ExitCode {
    run_to_exit(args.into_run(), Start::Resume(id))
}

/// A new session from session `id`'s journal, run live from node `at`
/// (`sessions fork`): another workflow file and other inputs may be given.
pub(super) fn fork(
    id: String,
    at: String,
    workflow: Option<PathBuf>,
    inputs: Vec<String>,
    args: ResumeArgs,
) -> std::process::ExitCode {
    let mut args = args.into_run();
    if workflow.is_some() {
        args.path = workflow;
    }
    args.inputs = inputs;
    let from = ForkFrom { session: id, at };
    run_to_exit(args, Start::Fork(from))
}

/// Session `id` run again from its own journal (`sessions replay`): no
/// model asked, no tool run; with another workflow file, until it diverges.
pub(super) fn replay(
    id: String,
    workflow: Option<PathBuf>,
    args: ResumeArgs,
) -> std::process::ExitCode {
    let mut args = args.into_run();
    if workflow.is_some() {
        args.path = workflow;
    }
    run_to_exit(args, Start::Replay(id))
}

/// How a run of the command line begins.
pub(super) enum Start {
    New,
    Resume(String),
    Fork(ForkFrom),
    Replay(String),
}

fn run_to_exit(args: Args, start: Start) -> std::process::ExitCode {
    for wide in args.allow.iter().filter(|a| a.trim() == "bash") {
        eprintln!(
            "agentfile: warning: --allow {wide} lets the model run any command in bash, \
             `rm -rf` included (with no sandbox, anywhere this user may write); allow what the \
             workflow needs instead, e.g. --allow bash:\"cargo test *\""
        );
    }
    // One run needs no worker threads: the executor's concurrency (agents,
    // parallel branches, map items) is async, and blocking work goes to the
    // blocking pool. A current-thread runtime starts faster and wakes less.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentfile: error: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let mode = args.output;
    let code = runtime.block_on(async move {
        match run_async(args, start, Vec::new()).await {
            Ok(ran) => {
                print_result(&ran.result, mode, &ran.order, ran.stored.as_ref());
                ran.result.exit_code
            }
            Err(e) => {
                eprintln!("agentfile: error: {e}");
                e.exit_code
            }
        }
    });
    // Every event is stored, tool processes and MCP servers are stopped and
    // telemetry is flushed: nothing a blocking thread may still do (an idle
    // pool thread, a terminal read) matters now, and joining them costs a
    // quarter of a millisecond at every exit.
    runtime.shutdown_background();
    exit_code(code)
}

/// A run that ended, as the command line reports it.
pub(super) struct Ran {
    pub(super) result: RunResult,
    /// Its outputs' names in the order the plan declares them
    /// ([`agentfile::plan::Plan::output_order`]), for printing them.
    pub(super) order: Vec<String>,
    /// Where the session is stored, for text output (`None` otherwise).
    pub(super) stored: Option<Stored>,
}

/// Where a run's session is stored, and how `agentfile sessions` reaches
/// it from the current folder.
pub(super) struct Stored {
    /// The store, as [`agentfile::session::location`] names it.
    at: PathBuf,
    /// The flags `sessions show|resume` need here to open that store (`""`
    /// when none); `None` when no `--config`/`--workspace` this run knows of
    /// reaches it.
    flags: Option<String>,
}

impl Stored {
    /// The store of `live`, and the flags that reach it from here: none,
    /// `--workspace` (the run's workspace is elsewhere, as for
    /// `agentfile run examples/demo`), and the run's own `--config`.
    fn of(live: &LiveRun, config: Option<&Path>) -> Stored {
        let at = live.stored_at().to_path_buf();
        let ws = live.workspace();
        let reaches = |config: Option<&Path>, ws: Option<&Path>| {
            let c = runapi::load_config(config, Path::new(".")).ok()?;
            let w = runapi::resolve_workspace(ws, &c).ok()?;
            agentfile::session::location(&c, &w).ok().map(|(_, p)| p)
        };
        let ws_flag = format!(" --workspace {}", shell_word(&super::shown_path(ws)));
        let mut tries = vec![
            (None, None, String::new()),
            (None, Some(ws), ws_flag.clone()),
        ];
        if let Some(c) = config {
            let c_flag = format!(" --config {}", shell_word(&c.display().to_string()));
            tries.push((Some(c), None, c_flag.clone()));
            tries.push((Some(c), Some(ws), format!("{c_flag}{ws_flag}")));
        }
        let flags = tries
            .into_iter()
            .find(|(c, w, _)| reaches(*c, *w).as_ref() == Some(&at))
            .map(|(_, _, f)| f);
        Stored { at, flags }
    }

    /// The store for people: a path from here, or the PostgreSQL variable.
    fn place(&self) -> String {
        let text = self.at.display().to_string();
        match text.strip_prefix("postgres:") {
            Some(var) => format!("the PostgreSQL database {var} names"),
            None => super::shown_path(&self.at),
        }
    }

    /// `session ID stored in PLACE — WHAT with `agentfile sessions VERB ID``.
    /// `command` is the `sessions` subcommand with its arguments, `{id}`
    /// standing for the session (`show {id}`, `signal {id} EVENT`).
    fn line(&self, id: &str, what: &str, command: &str) -> String {
        let place = self.place();
        let command = command.replace("{id}", id);
        match &self.flags {
            Some(flags) => {
                format!(
                    "session {id} stored in {place} — {what} `agentfile sessions {command}{flags}`"
                )
            }
            None => format!(
                "session {id} stored in {place} — {what} `agentfile sessions {command}` with the \
                 --config and --workspace that reach it"
            ),
        }
    }
}

/// `word` as one shell word: quoted when it holds anything but plain path
/// characters.
fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Run (or resume) a workflow through the run service, as every door does.
pub(super) async fn run_async(
    args: Args,
    start: Start,
    extra: Vec<Arc<dyn EventSink>>,
) -> Result<Ran, RunError> {
    let mut req = request(&args)?;
    let (mut fork, mut replay) = (None, None);
    let resume_id = match start {
        Start::New => None,
        Start::Resume(id) => Some(id),
        Start::Fork(f) => {
            forked(&args, &f.session, &mut req)?;
            fork = Some(f);
            None
        }
        Start::Replay(id) => {
            forked(&args, &id, &mut req)?;
            replay = Some(id);
            None
        }
    };
    let resume = match resume_id.or(args.resume.clone()) {
        _ if fork.is_some() || replay.is_some() => None,
        Some(id) => {
            resumed(&args, &id, &mut req)?;
            Some(id)
        }
        None => {
            if args.path.is_none() && args.goal.is_none() {
                return Err(RunError::usage(
                    "run needs a workflow: agentfile run PATH, `agentfile run -` (from standard input) or `agentfile run --goal TEXT`",
                ));
            }
            None
        }
    };
    let here = std::env::current_dir()
        .map_err(|e| RunError::usage(format!("cannot read the current folder: {e}")))?;
    let service = local_service(here, false);
    let mut sinks = extra;
    sinks.push(printer(args.output));
    let hooks = RunHooks {
        sinks,
        approver: Some(Arc::new(TerminalApprover {
            approve_all: args.control.approve_all,
        })),
        owner: None,
    };
    let submission = Submission {
        request: req,
        resume,
        unattended: true,
        fork,
        replay,
        ..Submission::default()
    };
    let live = service
        .submit_request(submission, hooks)
        .await
        .map_err(refused)?;
    let order = live.plan().output_order();
    let stopped_by = watch_stop(live.clone());
    let mut result = (*live.finished().await).clone();
    // Only text output names where the session is stored, and working that
    // out reads the config again: done then, once the run is over, never
    // before its first step.
    let stored =
        (args.output == OutputMode::Text).then(|| Stored::of(&live, args.setup.config.as_deref()));
    if let Some(e) = live.setup_error() {
        return Err(e);
    }
    // A run cancelled by SIGTERM exits 143, as a terminated process does.
    let signal = stopped_by.load(Ordering::SeqCst);
    if result.status == "cancelled" && signal != 0 {
        result.exit_code = signal;
    }
    Ok(Ran {
        result,
        order,
        stored,
    })
}

/// A run service for one run of this process, rooted at `root` (with
/// `workspace_chosen`, the request's workspace wins over a config's).
pub(super) fn local_service(root: PathBuf, workspace_chosen: bool) -> Arc<RunService> {
    RunService::new(ServiceOptions {
        root,
        workspace_chosen,
        config: None,
        policy: None,
        provider: None,
        model: None,
        base_url: None,
        script: None,
        max_runs: 1,
        http: None,
        sampling: None,
        key_hint: None,
        reader: Arc::new(Workflows),
        remote: None,
    })
}

/// How the command line reads a workflow: the front ends' registry.
pub(super) struct Workflows;

impl Reader for Workflows {
    fn load(
        &self,
        req: &RunRequest,
        config: &agentfile::config::Config,
    ) -> Result<agentfile::plan::Plan, LoadError> {
        let options = Options {
            packages: None,
            config: Some(config),
            dialect: None,
            read: req.read.clone(),
        };
        Analysis::load_for_run(&req.path, req.source.as_deref(), options).map_err(Into::into)
    }

    fn check_source(&self, _path: &Path) -> Result<(), RpcError> {
        // The front ends bound what they read (frontend::MAX_WORKFLOW_BYTES).
        Ok(())
    }

    fn extension_names(&self) -> Vec<&'static str> {
        frontend::extension_names()
    }
}

/// A run the service did not accept, as the command line reports it: the
/// service's message, and the exit code it names (a usage error otherwise).
fn refused(e: RpcError) -> RunError {
    let exit_code = e
        .data
        .as_ref()
        .and_then(|d| d.get("exit_code"))
        .and_then(serde_json::Value::as_i64)
        .and_then(|c| i32::try_from(c).ok())
        .unwrap_or(agentfile::executor::exit::USAGE);
    RunError {
        message: e.message,
        exit_code,
        cause: runapi::Cause::Other,
    }
}

/// The run request the flags describe (a resume fills in the rest).
fn request(args: &Args) -> Result<RunRequest, RunError> {
    let usage = RunError::usage;
    let (path, source) = workflow(args)?;
    let s = &args.setup;
    let c = &args.control;
    Ok(RunRequest {
        path,
        source,
        allow: args.allow.clone(),
        inputs: runapi::parse_inputs(&args.inputs, args.inputs_json.as_deref())?,
        config: s.config.clone(),
        policy: s.policy.clone(),
        workspace: s.workspace.clone(),
        provider: s.provider.clone(),
        model: s.model.clone(),
        base_url: s.base_url.clone(),
        cassette: s.cassette.clone(),
        script: s.script.clone(),
        record: args.record.clone(),
        max_turns: c.max_turns,
        max_tokens: c.max_tokens,
        max_cost_usd: c.max_cost_usd,
        timeout: match &c.timeout {
            Some(t) => Some(
                agentfile::executor::parse_duration(t)
                    .map_err(|e| usage(format!("--timeout: {e}")))?,
            ),
            None => None,
        },
        strict_convergence: c.strict_convergence,
        force_changed: c.force_changed,
        read: args.read.options(),
        http: None,
        sampling: None,
        loaded_config: None,
    })
}

/// The workflow's path and, for one that is not a file (`--goal TEXT`, or
/// `-` for stdin), its text. Such a workflow is placed in the current folder
/// (policy.toml and FROM paths resolve there).
fn workflow(args: &Args) -> Result<(PathBuf, Option<String>), RunError> {
    let usage = RunError::usage;
    let here = std::env::current_dir()
        .map_err(|e| usage(format!("cannot read the current folder: {e}")))?;
    Ok(match (&args.goal, &args.path) {
        (Some(goal), _) => {
            if goal.trim().is_empty() {
                return Err(usage("--goal needs the text of the goal".into()));
            }
            (here.join("(goal)"), Some(runapi::one_goal_workflow(goal)))
        }
        (None, Some(p)) if p.as_os_str() == "-" => {
            if args.inputs_json.as_deref() == Some("-") {
                return Err(usage(
                    "`run -` reads the workflow from standard input; pass --inputs-json a file"
                        .into(),
                ));
            }
            (here.join("(stdin)"), Some(read_workflow_stdin()?))
        }
        (None, p) => (p.clone().unwrap_or_default(), None),
    })
}

/// Session `id`'s workflow, inputs, workspace and settings into `req`: the
/// session says which it ran with.
fn resumed(args: &Args, id: &str, req: &mut RunRequest) -> Result<(), RunError> {
    let usage = RunError::usage;
    let config = runapi::load_config(args.setup.config.as_deref(), Path::new("."))?;
    let ws = runapi::resolve_workspace(args.setup.workspace.as_deref(), &config)?;
    let store = runapi::open_store(&config, &ws)?;
    let meta = store.get(id).map_err(|e| {
        usage(format!(
            "{e} (looked in the session store of {})",
            ws.display()
        ))
    })?;
    if args.path.is_none() && args.goal.is_none() {
        req.path = PathBuf::from(&meta.path);
    }
    if !args.inputs.is_empty() || args.inputs_json.is_some() {
        return Err(usage(
            "a resumed run keeps the inputs it started with; drop --input/--inputs-json".into(),
        ));
    }
    req.inputs = agentfile::executor::inputs::inputs_from_text(&meta.inputs);
    req.workspace = Some(PathBuf::from(&meta.workspace));
    // The run's own settings (model, budgets, …) unless given again.
    runapi::RunSettings::stored(store.as_ref(), id).fill(req);
    Ok(())
}

/// What a fork takes from the session it starts from: its workflow (unless
/// another is given), its inputs with the ones given on top, its workspace
/// and its settings (unless given again).
fn forked(args: &Args, id: &str, req: &mut RunRequest) -> Result<(), RunError> {
    let config = runapi::load_config(args.setup.config.as_deref(), Path::new("."))?;
    let ws = runapi::resolve_workspace(args.setup.workspace.as_deref(), &config)?;
    let store = runapi::open_store(&config, &ws)?;
    let meta = store.get(id).map_err(|e| {
        RunError::usage(format!(
            "{e} (looked in the session store of {})",
            ws.display()
        ))
    })?;
    if args.path.is_none() {
        req.path = PathBuf::from(&meta.path);
    }
    let given = std::mem::take(&mut req.inputs);
    req.inputs = agentfile::executor::inputs::inputs_from_text(&meta.inputs);
    req.inputs.extend(given);
    req.workspace = Some(PathBuf::from(&meta.workspace));
    runapi::RunSettings::stored(store.as_ref(), id).fill(req);
    Ok(())
}

/// Progress for people on stderr (live on a terminal), or JSON lines on
/// stdout.
fn printer(output: OutputMode) -> Arc<dyn EventSink> {
    match output {
        OutputMode::StreamJson => Arc::new(StreamJson::stdout()),
        OutputMode::Text | OutputMode::Json => {
            let terminal = std::io::stderr().is_terminal();
            let color = terminal && std::env::var_os("NO_COLOR").is_none();
            if terminal && !std::env::var("TERM").is_ok_and(|t| t == "dumb") {
                Arc::new(Live::stderr(color))
            } else {
                Arc::new(Progress::stderr(color))
            }
        }
    }
}

/// The first SIGINT/SIGTERM cancels the run (its exit code recorded in the
/// returned cell); the second ends the process at once.
fn watch_stop(run: Arc<LiveRun>) -> Arc<AtomicI32> {
    let stopped_by = Arc::new(AtomicI32::new(0));
    let record = stopped_by.clone();
    tokio::spawn(async move {
        if let Some(code) = next_stop_signal().await {
            record.store(code, Ordering::SeqCst);
            eprintln!("\nagentfile: cancelling (Ctrl-C again to quit at once)");
            run.cancel();
            if next_stop_signal().await.is_some() {
                std::process::exit(code);
            }
        }
    });
    stopped_by
}

/// A workflow piped to `agentfile run -`, bounded like a workflow file.
fn read_workflow_stdin() -> Result<String, RunError> {
    use std::io::Read;
    let limit = frontend::MAX_WORKFLOW_BYTES;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            RunError::usage(format!("cannot read the workflow from standard input: {e}"))
        })?;
    if bytes.len() as u64 > limit {
        return Err(RunError::usage(format!(
            "the workflow on standard input is larger than {limit} bytes"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        RunError::usage(format!(
            "the workflow on standard input is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// A run's result on stdout: JSON, a JSON line, or its outputs as text —
/// then, on stderr, where its session is stored and how to see it (on a
/// failure, why and how to resume it).
pub(super) fn print_result(
    result: &RunResult,
    mode: OutputMode,
    order: &[String],
    stored: Option<&Stored>,
) {
    let mut out = std::io::stdout().lock();
    match mode {
        OutputMode::Json => {
            let _ = serde_json::to_writer_pretty(&mut out, result);
            let _ = writeln!(out);
        }
        OutputMode::StreamJson => StreamJson::stdout().write_line(result),
        OutputMode::Text => {
            let id = &result.session_id;
            if result.status != "completed" {
                if let Some(e) = &result.error {
                    eprintln!("agentfile: {}: {e}", result.termination_reason);
                }
                // A suspended run goes on when one of its events arrives, not
                // by being resumed: name the command that delivers one.
                let (what, verb) = match result.waiting_for.first() {
                    Some(event) if result.status == "suspended" => (
                        "signal it with",
                        format!("signal {{id}} {}", shell_word(event)),
                    ),
                    _ => ("resume with", "resume {id}".to_owned()),
                };
                match stored {
                    Some(s) => eprintln!("{}", s.line(id, what, &verb)),
                    None => eprintln!(
                        "session {id} — {what} `agentfile sessions {}`",
                        verb.replace("{id}", id)
                    ),
                }
                return;
            }
            print_outputs(&mut out, result, order);
            if let Some(s) = stored {
                let _ = out.flush();
                eprintln!("{}", s.line(id, "see it with", "show {id}"));
            }
        }
    }
}

/// One output: as is, for pipelines. Several: each under its name, those the
/// plan names in its order, then the rest by name. On a terminal, model text
/// may not carry escape sequences that would act on it.
fn print_outputs(out: &mut impl Write, result: &RunResult, order: &[String]) {
    let terminal = std::io::stdout().is_terminal();
    let shown = |v: &serde_json::Value| {
        let t = value_text(v);
        if terminal {
            agentfile::text::for_terminal(&t).into_owned()
        } else {
            t
        }
    };
    if result.outputs.len() == 1 {
        if let Some(v) = result.outputs.values().next() {
            let _ = writeln!(out, "{}", shown(v));
        }
        return;
    }
    let named: std::collections::HashSet<&str> = order.iter().map(String::as_str).collect();
    let first = order
        .iter()
        .filter_map(|n| result.outputs.get_key_value(n.as_str()));
    let rest = result
        .outputs
        .iter()
        .filter(|(n, _)| !named.contains(n.as_str()));
    for (name, v) in first.chain(rest) {
        let _ = writeln!(out, "## {name}\n\n{}\n", shown(v));
    }
}

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// Approval on the command line: a question on a terminal; elsewhere nobody can
/// answer, so the run stops and says how to approve it later.
struct TerminalApprover {
    approve_all: bool,
}

impl Approver for TerminalApprover {
    fn decide<'a>(
        &'a self,
        req: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            if self.approve_all {
                return Approval::Approved(Some("with --approve-all".into()));
            }
            if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
                return Approval::Unavailable(format!(
                    "standard input is not a terminal; rerun with --approve-all, or run `agentfile sessions approve {}` and then `agentfile sessions resume {}`",
                    req.session_id, req.session_id
                ));
            }
            let question = if req.goal.is_empty() {
                format!(
                    "\nApprove step `{}`?\n  {}\n[y/N] ",
                    req.step,
                    req.outcome.lines().next().unwrap_or("")
                )
            } else {
                format!(
                    "\nApprove goal `{}` (step `{}`)?\n  {}\n[y/N] ",
                    req.goal,
                    req.step,
                    req.outcome.lines().next().unwrap_or("")
                )
            };
            let answer = tokio::task::spawn_blocking(move || {
                let mut err = std::io::stderr();
                let _ = err.write_all(question.as_bytes());
                let _ = err.flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).map(|_| line)
            })
            .await;
            match answer {
                Ok(Ok(line)) if matches!(line.trim().to_lowercase().as_str(), "y" | "yes") => {
                    Approval::Approved(Some("at the terminal".into()))
                }
                Ok(Ok(_)) => Approval::Rejected(Some("at the terminal".into())),
                _ => Approval::Unavailable("the terminal could not be read".into()),
            }
        })
    }
}
