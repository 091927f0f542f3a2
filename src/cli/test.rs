//! `agentfile test`: run the cases of workflow test files (`*.test.yaml`,
//! CONTRACT §19) and report them as text, JSON or JUnit XML.
//!
//! Each case runs through the run service, as `run` does, against a scratch
//! copy of the workspace: its tools run for real under the workflow's policy,
//! and the user's files never change. By default the model's answers replay
//! from the case's cassette (no network); `--record` runs the configured
//! provider and writes the cassette, `--live` runs it without one. The
//! expectations are checked by `agentfile_testing`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentfile::events::EventSink;
use agentfile::executor::{Approval, ApprovalRequest, Approver};
use agentfile::run::RunRequest;
use agentfile::service::{RunHooks, RunService, Submission};
use agentfile::testing::report::{CaseReport, Outcome};
use agentfile::testing::{self, Case, Observed, TestFile};
use agentfile::wire::events::Event;

use super::EXIT_INVALID;

#[derive(clap::Args)]
pub(super) struct Args {
    /// Test files, or folders searched for `*.test.yaml` (default: the
    /// current folder).
    paths: Vec<PathBuf>,
    /// How to report: text for people, json, or junit (JUnit XML for CI).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the report to FILE instead of standard output (a one-line
    /// summary still goes to standard error).
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Run the configured provider and (re)write each case's cassette.
    #[arg(long, conflicts_with = "live")]
    record: bool,
    /// Run the configured provider without cassettes (network, a key).
    #[arg(long)]
    live: bool,
    /// Run each case N times and report its pass rate (useful with --live).
    #[arg(long, value_name = "N", default_value_t = 1)]
    repeat: u32,
    /// Cases run at once (default: the number of CPUs).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Only the cases whose name contains TEXT.
    #[arg(long, value_name = "TEXT")]
    filter: Option<String>,
    /// The folder copied for each case (default: the current folder). The
    /// workflows and cassettes of the test files must be inside it.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Config file for --record and --live (default: as `run` finds one).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Provider for --record and --live, overriding the config (`fake`
    /// with --script records a scripted model).
    #[arg(long)]
    provider: Option<String>,
    /// Model for --record and --live.
    #[arg(long)]
    model: Option<String>,
    /// The provider's API endpoint for --record and --live.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The script `--provider fake` answers from (see "Testing offline" in
    /// the book).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Keep each case's scratch workspace (its path is in the report).
    #[arg(long)]
    keep: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Junit,
}

/// How a case reaches its model.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Replay,
    Record,
    Live,
}

pub(super) fn run(args: Args) -> std::process::ExitCode {
    match run_tests(args) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(message) => {
            eprintln!("agentfile: error: {message}");
            std::process::ExitCode::from(EXIT_INVALID)
        }
    }
}

fn run_tests(args: Args) -> Result<u8, String> {
    let workspace = args
        .workspace
        .clone()
        .unwrap_or_else(|| PathBuf::from("."))
        .canonicalize()
        .map_err(|e| format!("workspace: {e}"))?;
    let files = find_files(&args.paths)?;
    let mode = if args.record {
        Mode::Record
    } else if args.live {
        Mode::Live
    } else {
        Mode::Replay
    };
    // Every test file is checked before any case runs: an invalid one is a
    // usage error (exit 2) with its diagnostics, and nothing runs.
    let options = testing::Options {
        // Recording is what writes a missing cassette.
        require_cassettes: mode == Mode::Replay,
    };
    let mut loaded = Vec::new();
    let mut invalid = false;
    for f in &files {
        match testing::load_with(f, options) {
            Ok(t) => loaded.push(t),
            Err(e) => {
                invalid = true;
                let color = std::io::IsTerminal::is_terminal(&std::io::stderr())
                    && std::env::var_os("NO_COLOR").is_none();
                eprint!("{}", e.render(agentfile::diag::Style { color }));
            }
        }
    }
    if invalid {
        return Ok(EXIT_INVALID);
    }
    let mut jobs = Vec::new();
    for file in loaded {
        let file = Arc::new(file);
        for (i, case) in file.cases.iter().enumerate() {
            if args
                .filter
                .as_deref()
                .is_some_and(|f| !case.name.contains(f))
            {
                continue;
            }
            jobs.push(Job {
                file: file.clone(),
                case: i,
            });
        }
    }
    if jobs.is_empty() {
        return Err(match &args.filter {
            Some(f) => format!("no case's name contains `{f}`"),
            None => "the test files hold no cases".to_owned(),
        });
    }
    let parallel = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(parallel.min(8))
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let started = Instant::now();
    let settings = Arc::new(Settings {
        workspace,
        mode,
        repeat: args.repeat.max(1),
        config: args.config.clone(),
        provider: args.provider.clone(),
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        script: args
            .script
            .as_ref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
        keep: args.keep,
    });
    let reports = runtime.block_on(async {
        let slots = Arc::new(tokio::sync::Semaphore::new(parallel));
        let mut handles = Vec::new();
        for job in jobs {
            let slots = slots.clone();
            let settings = settings.clone();
            handles.push(tokio::spawn(async move {
                let _slot = slots.acquire_owned().await;
                run_case(&settings, &job).await
            }));
        }
        let mut out = Vec::new();
        for h in handles {
            match h.await {
                Ok(r) => out.push(r),
                Err(e) => out.push(CaseReport {
                    file: PathBuf::new(),
                    case: String::new(),
                    outcome: Outcome::Error(format!("the case's task failed: {e}")),
                    duration: Duration::ZERO,
                    session: None,
                    runs: 1,
                    passed_runs: 0,
                }),
            }
        }
        out
    });
    runtime.shutdown_timeout(Duration::from_millis(200));
    let elapsed = started.elapsed();
    let text = match args.format {
        Format::Text => testing::report::text(&reports),
        Format::Json => {
            let mut v = testing::report::json(&reports);
            v["seconds"] = serde_json::json!(elapsed.as_secs_f64());
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
        }
        Format::Junit => testing::report::junit(&reports),
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, &text)
                .map_err(|e| format!("cannot write the report to {}: {e}", path.display()))?;
            eprintln!("{} (report in {})", summary(&reports), path.display());
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
        }
    }
    let failed = reports
        .iter()
        .any(|r| matches!(r.outcome, Outcome::Failed(_) | Outcome::Error(_)));
    Ok(u8::from(failed))
}

/// `N passed, M failed, K errors`.
fn summary(reports: &[CaseReport]) -> String {
    let count = |f: fn(&Outcome) -> bool| reports.iter().filter(|r| f(&r.outcome)).count();
    let errors = count(|o| matches!(o, Outcome::Error(_)));
    format!(
        "{} passed, {} failed, {errors} error{}",
        count(|o| matches!(o, Outcome::Passed)),
        count(|o| matches!(o, Outcome::Failed(_))),
        if errors == 1 { "" } else { "s" }
    )
}

/// The test files the paths name: files as given, folders searched.
fn find_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let paths = if paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths.to_vec()
    };
    let mut out = Vec::new();
    for p in &paths {
        if p.is_dir() {
            let found = testing::discover(p);
            if found.is_empty() && paths.len() == 1 {
                return Err(format!(
                    "no test files under {} (they are named NAME.test.yaml, beside a workflow or in its folder's tests/)",
                    p.display()
                ));
            }
            out.extend(found);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(format!("{}: no such file or folder", p.display()));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

struct Settings {
    workspace: PathBuf,
    mode: Mode,
    repeat: u32,
    config: Option<PathBuf>,
    provider: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    script: Option<PathBuf>,
    keep: bool,
}

struct Job {
    file: Arc<TestFile>,
    case: usize,
}

impl Job {
    fn case(&self) -> &Case {
        &self.file.cases[self.case]
    }
}

/// Run one case `repeat` times; its report is the last failing run's (or the
/// last run's), with the pass rate.
async fn run_case(settings: &Settings, job: &Job) -> CaseReport {
    let started = Instant::now();
    let mut last = None;
    let mut passed = 0;
    let mut worst: Option<Outcome> = None;
    for _ in 0..settings.repeat {
        let (outcome, session) = run_once(settings, job).await;
        if matches!(outcome, Outcome::Passed) {
            passed += 1;
        } else if worst.is_none() {
            worst = Some(outcome.clone());
        }
        last = Some((outcome, session));
    }
    let (outcome, session) = last.unwrap_or((Outcome::Skipped("no run".into()), None));
    CaseReport {
        file: job.file.path.clone(),
        case: job.case().name.clone(),
        outcome: worst.unwrap_or(outcome),
        duration: started.elapsed(),
        session,
        runs: settings.repeat,
        passed_runs: passed,
    }
}

/// One run of a case in its own scratch workspace.
async fn run_once(settings: &Settings, job: &Job) -> (Outcome, Option<String>) {
    let case = job.case();
    let workflow = match inside(&settings.workspace, &job.file.workflow) {
        Ok(p) => p,
        Err(e) => return (Outcome::Error(e), None),
    };
    let cassette = match (settings.mode, &case.cassette) {
        (Mode::Live, _) => None,
        (Mode::Record, None) => {
            return (
                Outcome::Error(
                    "the case names no cassette to record into; add `cassette: cassettes/NAME.jsonl`"
                        .into(),
                ),
                None,
            );
        }
        (_, c) => c.clone(),
    };
    let scratch = match scratch_copy(&settings.workspace) {
        Ok(d) => d,
        Err(e) => return (Outcome::Error(e), None),
    };
    let request = request_for(settings, case, &scratch, &workflow, cassette);
    let config_for_judge = request.config.clone();
    let path_for_judge = request.path.clone();
    let service = service_for(&scratch);
    let events = Arc::new(Collect::default());
    let hooks = RunHooks {
        sinks: vec![events.clone() as Arc<dyn EventSink>],
        approver: Some(Arc::new(NobodyApproves)),
        owner: None,
    };
    let submission = Submission {
        request,
        unattended: true,
        ..Submission::default()
    };
    let live = match service.submit_request(submission, hooks).await {
        Ok(l) => l,
        Err(e) => return (Outcome::Error(e.message), None),
    };
    let session = live.session_id().to_owned();
    let result = (*live.finished().await).clone();
    if let Some(e) = live.setup_error() {
        return (Outcome::Error(e.message), None);
    }
    let events = events.take();
    let observed = Observed {
        result: &result,
        events: &events,
    };
    let mut failures = testing::check(&case.expect, &observed);
    // The judge grades with a model, so only a live run asks it.
    if settings.mode == Mode::Live
        && let Some(judge) = &case.judge
    {
        match ask_judge(
            settings,
            config_for_judge.as_deref(),
            &path_for_judge,
            judge,
            &result,
        )
        .await
        {
            Ok(None) => {}
            Ok(Some(f)) => failures.push(f),
            Err(e) => return (Outcome::Error(e), None),
        }
    }
    let outcome = if !failures.is_empty() {
        // A run that could not ask its model (an unrecorded request) is the
        // reason every other expectation failed: say that first.
        match result.error.as_deref() {
            Some(e) if settings.mode == Mode::Replay && e.contains("cassette") => {
                Outcome::Error(e.to_owned())
            }
            _ => Outcome::Failed(failures),
        }
    } else {
        Outcome::Passed
    };
    // The session lives in the scratch workspace: worth naming only when
    // that is kept.
    if settings.keep {
        let kept = scratch.keep();
        eprintln!(
            "agentfile: {} › {}: workspace kept at {} (session {session})",
            job.file.path.display(),
            case.name,
            kept.display()
        );
        return (outcome, Some(session));
    }
    (outcome, None)
}

/// The run request of one case: its workflow, inputs and config in the
/// scratch workspace, and the model the mode asks for.
fn request_for(
    settings: &Settings,
    case: &Case,
    scratch: &Scratch,
    workflow: &Path,
    cassette: Option<PathBuf>,
) -> RunRequest {
    let path = if agentfile::frontend::package::is_package(workflow) {
        workflow.to_owned()
    } else {
        scratch.path().join(workflow)
    };
    // The config `run` would find in the current folder, found in the copy
    // (a lookup from the process's folder would reach the user's files).
    let config = match &settings.config {
        Some(c) => Some(relocate(&settings.workspace, scratch.path(), c)),
        None => ["agent.json", "agent.toml"]
            .iter()
            .map(|n| scratch.path().join(n))
            .find(|p| p.is_file()),
    };
    let mut request = RunRequest {
        path,
        inputs: case.inputs.clone(),
        workspace: Some(scratch.path().to_owned()),
        config,
        ..RunRequest::default()
    };
    match settings.mode {
        Mode::Replay => {
            request.provider = Some("replay".into());
            // No cassette: a workflow that asks no model still runs; one that
            // does fails at its first request, saying so.
            let c =
                cassette.unwrap_or_else(|| scratch.path().join(".agentfile-empty.cassette.jsonl"));
            if !c.exists() {
                let _ = std::fs::write(&c, "");
            }
            request.cassette = Some(c);
        }
        Mode::Record | Mode::Live => {
            request.provider = settings.provider.clone();
            request.model = settings.model.clone();
            request.base_url = settings.base_url.clone();
            request.script = settings.script.clone();
            if settings.mode == Mode::Record {
                if let Some(dir) = cassette.as_deref().and_then(Path::parent) {
                    let _ = std::fs::create_dir_all(dir);
                }
                request.record = cassette;
            }
        }
    }
    request
}

/// A run service of its own for a case, rooted in its scratch workspace.
fn service_for(scratch: &Scratch) -> Arc<RunService> {
    super::run::local_service(scratch.path().to_owned(), true)
}

/// `path` (absolute, or relative to the current folder) as a path inside
/// `workspace`, relative to it.
fn inside(workspace: &Path, path: &Path) -> Result<PathBuf, String> {
    // A package (`oci://REF`) is read from its registry, by every case.
    if agentfile::frontend::package::is_package(path) {
        return Ok(path.to_owned());
    }
    let abs = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let abs = abs.canonicalize().unwrap_or(abs);
    abs.strip_prefix(workspace)
        .map(Path::to_path_buf)
        .map_err(|_| {
            format!(
                "the workflow {} is outside the workspace {}; run `agentfile test` from a folder that holds it, or pass --workspace",
                path.display(),
                workspace.display()
            )
        })
}

/// A path under `from` as the same path under `to`; others as they are.
fn relocate(from: &Path, to: &Path, path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    match abs.strip_prefix(from) {
        Ok(rel) => to.join(rel),
        Err(_) => abs,
    }
}

/// A temporary folder removed when dropped, unless kept.
struct Scratch(Option<PathBuf>);

impl Scratch {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new("."))
    }

    fn keep(mut self) -> PathBuf {
        self.0.take().unwrap_or_default()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// Folders never copied into a case's workspace: stores, build output,
/// dependencies and version control.
const SKIP: &[&str] = &[".agentfile", ".git", "target", "node_modules", ".venv"];

fn scratch_copy(workspace: &Path) -> Result<Scratch, String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "agentfile-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let scratch = Scratch(Some(dir.clone()));
    copy_tree(workspace, &dir).map_err(|e| {
        format!(
            "cannot copy the workspace {} for the case: {e}",
            workspace.display()
        )
    })?;
    let canonical = dir.canonicalize().map_err(|e| e.to_string())?;
    let mut scratch = scratch;
    scratch.0 = Some(canonical);
    Ok(scratch)
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if SKIP.iter().any(|s| name == *s) {
            continue;
        }
        let kind = entry.file_type()?;
        let target = to.join(&name);
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(entry.path())?;
            std::os::unix::fs::symlink(link, &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// The events a case's run stored, for its expectations.
#[derive(Default)]
struct Collect(Mutex<Vec<Event>>);

impl Collect {
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl EventSink for Collect {
    fn send(&self, event: &Event) {
        if !event.body.is_transient() {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(event.clone());
        }
    }
}

/// Nobody answers a test's approvals: a run that reaches one ends as
/// `waiting_approval`, which a case can expect.
struct NobodyApproves;

impl Approver for NobodyApproves {
    fn decide<'a>(
        &'a self,
        _: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async {
            Approval::Unavailable("nobody answers approvals in `agentfile test`".into())
        })
    }
}

/// Ask the configured model whether `judge.output` meets its criteria: a
/// failure with the model's reason when it does not.
async fn ask_judge(
    settings: &Settings,
    config: Option<&Path>,
    workflow: &Path,
    judge: &testing::Judge,
    result: &agentfile::wire::events::RunResult,
) -> Result<Option<testing::Failure>, String> {
    use agentfile::llm::{ChatRequest, Message, ProviderOptions, provider_from_config_with};
    let what = format!("judge (outputs.{})", judge.output);
    let Some(output) = testing::output(result, &judge.output).cloned() else {
        return Ok(Some(testing::Failure {
            what,
            expected: judge.criteria.clone(),
            actual: "missing".into(),
        }));
    };
    let mut cfg = agentfile::run::load_config(config, workflow).map_err(|e| e.message)?;
    if let Some(p) = &settings.provider {
        if cfg.llm.provider.as_deref() != Some(p.as_str()) {
            cfg.llm.api_key_env = None;
        }
        cfg.llm.provider = Some(p.clone());
    }
    if let Some(m) = &settings.model {
        cfg.llm.model = Some(m.clone());
    }
    if let Some(u) = &settings.base_url {
        cfg.llm.base_url = Some(u.clone());
    }
    let options = ProviderOptions {
        script: settings.script.clone(),
        ..ProviderOptions::default()
    };
    let model =
        provider_from_config_with(&cfg.llm, &cfg.pricing, &|k| std::env::var(k).ok(), &options)
            .map_err(|e| format!("the judge's model: {e}"))?;
    let text = match &output {
        serde_json::Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    let request = ChatRequest {
        system: Some(
            "You grade one output of an automated workflow against the criteria you are given. \
             Judge only what the output says. Answer with one JSON object and nothing else: \
             {\"pass\": true or false, \"reason\": \"one sentence\"}."
                .into(),
        ),
        messages: vec![Message::user(format!(
            "Criteria: {}\n\nThe output `{}`:\n<output>\n{text}\n</output>",
            judge.criteria, judge.output
        ))],
        ..ChatRequest::default()
    };
    let answer = model
        .chat(request, agentfile::llm::CancellationToken::new())
        .await
        .map_err(|e| format!("the judge's model call failed: {e}"))?
        .text();
    let verdict = answer
        .find('{')
        .zip(answer.rfind('}'))
        .and_then(|(a, b)| serde_json::from_str::<serde_json::Value>(&answer[a..=b]).ok());
    let pass = verdict
        .as_ref()
        .and_then(|v| v.get("pass"))
        .and_then(serde_json::Value::as_bool);
    let reason = verdict
        .as_ref()
        .and_then(|v| v.get("reason"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
        .to_owned();
    match pass {
        Some(true) => Ok(None),
        Some(false) => Ok(Some(testing::Failure {
            what,
            expected: judge.criteria.clone(),
            actual: format!("judged not met: {reason}"),
        })),
        None => Err(format!(
            "the judge answered no verdict (wanted {{\"pass\": …, \"reason\": …}}): {}",
            answer.chars().take(200).collect::<String>()
        )),
    }
}
