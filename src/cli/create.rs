//! `agentfile create`: run the built-in generator workflow into
//! `artifacts/NAME/RUN_ID/` (its manifest kept at every step), then validate
//! the workflow it wrote (CONTRACT §10).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentfile::author::create::{self, Begun, Created};

use super::EXIT_INVALID;
use super::args::OutputMode;
use super::run::{self, ControlArgs, SetupArgs};

#[derive(clap::Args, Clone)]
pub(super) struct Args {
    /// What the workflow should do, in plain words.
    description: String,
    /// The workflow's name (lowercase, hyphenated; default: from the description).
    #[arg(long)]
    name: Option<String>,
    /// The project folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Config file for the generator's run (default: agent.toml or agent.json
    /// in the project folder).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Policy file for the generator's run (default: the safe default).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The model provider the generator uses: anthropic, openai, openrouter,
    /// ollama, gemini, replay or fake (a scripted model, offline: see --script).
    #[arg(long)]
    provider: Option<String>,
    /// The model the generator uses (default: the config's `llm.model`).
    #[arg(long)]
    model: Option<String>,
    /// The provider's API endpoint (default: the config's `llm.base_url`).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The script `--provider fake` answers the generator from (a JSON array
    /// of replies; see "Testing offline" in the book).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// How the run reports: text (progress on stderr, the answer on stdout),
    /// json (one result object at the end) or stream-json (every event as a
    /// JSON line).
    #[arg(long, value_enum, default_value_t = OutputMode::Text)]
    output: OutputMode,
    /// Most model turns the generator may take.
    #[arg(long, value_name = "N")]
    max_turns: Option<u64>,
    /// Most the generator's model calls may cost, in US dollars.
    #[arg(long, value_name = "USD")]
    max_cost_usd: Option<f64>,
    /// Wall-clock limit such as 90s, 10m or 1h.
    #[arg(long)]
    timeout: Option<String>,
}

fn fail(m: String, code: u8) -> ExitCode {
    eprintln!("agentfile: error: {m}");
    ExitCode::from(code)
}

pub(super) fn run(a: Args) -> ExitCode {
    let ws = match a
        .workspace
        .clone()
        .unwrap_or_else(|| PathBuf::from("."))
        .canonicalize()
    {
        Ok(p) => p,
        Err(e) => return fail(format!("workspace: {e}"), EXIT_INVALID),
    };
    let begun = match create::begin(&ws, &a.description, a.name.as_deref()) {
        Ok(b) => b,
        Err(e) => return fail(e.to_string(), EXIT_INVALID),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start the async runtime: {e}"), 1),
    };
    let sink: Arc<dyn agentfile::events::EventSink> = begun.sink.clone();
    let outcome = runtime.block_on(run::run_async(
        run_args(&a, &begun, ws.clone()),
        run::Start::New,
        vec![sink],
    ));
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    let ran = match outcome {
        Ok(ran) => ran,
        Err(e) => {
            create::finish(&begun, &ws, "failed", Some(&e.message));
            return fail(e.message, u8::try_from(e.exit_code).unwrap_or(1));
        }
    };
    if let Some(e) = begun.sink.error() {
        eprintln!("agentfile: warning: the manifest could not be kept: {e}");
    }
    let result = &ran.result;
    let created = create::finish(&begun, &ws, &result.status, result.error.as_deref());
    let mut code = u8::try_from(result.exit_code).unwrap_or(1);
    if result.status == "completed" && !created.valid {
        code = EXIT_INVALID;
    }
    report(&created, &ran, a.output);
    ExitCode::from(code)
}

/// The generator's run: its workflow and inputs, the user's model and limits.
fn run_args(a: &Args, begun: &Begun, ws: PathBuf) -> run::Args {
    run::Args {
        path: Some(begun.workflow.clone()),
        inputs: begun
            .inputs()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        setup: SetupArgs {
            workspace: Some(ws),
            config: a.config.clone(),
            policy: a.policy.clone(),
            provider: a.provider.clone(),
            model: a.model.clone(),
            base_url: a.base_url.clone(),
            script: a.script.clone(),
            ..SetupArgs::default()
        },
        output: a.output,
        control: ControlArgs {
            max_turns: a.max_turns,
            max_cost_usd: a.max_cost_usd,
            timeout: a.timeout.clone(),
            ..ControlArgs::default()
        },
        ..run::Args::default()
    }
}

fn report(created: &Created, ran: &run::Ran, output: OutputMode) {
    let result = &ran.result;
    let rel = &created.artifacts;
    match output {
        OutputMode::Json | OutputMode::StreamJson => {
            let mut v = serde_json::to_value(created).unwrap_or_default();
            v["type"] = "create".into();
            v["run"] = serde_json::to_value(result).unwrap_or_default();
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        }
        OutputMode::Text => {
            if result.status != "completed" {
                run::print_result(result, output, &[], ran.stored.as_ref());
                eprintln!(
                    "the generation run stopped ({}); its files are in {rel}",
                    result.status
                );
            } else if created.valid {
                println!("{rel}: generated and validated");
                println!("next: agentfile promote {rel}");
            } else {
                println!("{rel}: generated, but the workflow is invalid:");
                for d in &created.diagnostics {
                    println!("  {d}");
                }
                println!("run `agentfile create` again, or fix the files in {rel}");
            }
        }
    }
}
