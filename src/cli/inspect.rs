//! `agentfile inspect`: a workflow's plan as text, JSON or Mermaid; with
//! `--sandbox`, what the kernel sandbox enforces here for its policy; with
//! `--support-matrix`, what agentfile does with each agentrc directive.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::ValueEnum;

use agentfile::diag::Style;
use agentfile::frontend::{self, Options};
use agentfile::inspect;
use agentfile::plan::ReadOptions;
use agentfile::tools::policy::control;

use super::args::{DialectArg, ReadArgs};
use super::{EXIT_INVALID, config_for, plural, print_diagnostics, print_rendered, quiet_pipe};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The workflow (not needed with --support-matrix).
    #[arg(required_unless_present_any = ["support_matrix", "sandbox"])]
    path: Option<PathBuf>,
    /// Text for people, json for programs, mermaid for a diagram of the steps.
    #[arg(long, value_enum, default_value_t = InspectFormat::Text)]
    format: InspectFormat,
    /// Config file (agent.toml or agent.json; default: one in the current
    /// folder, else one beside the workflow).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Read the file as this format, whatever its name (default: from the
    /// file's name and content).
    #[arg(long, value_enum)]
    dialect: Option<DialectArg>,
    #[command(flatten)]
    read: ReadArgs,
    /// Print what agentfile parses, validates and enforces of each agentrc
    /// directive, and exit.
    #[arg(long)]
    support_matrix: bool,
    /// Print what the kernel sandbox enforces on this machine for the
    /// workflow's policy (PATH: the workflow or its folder; default: the
    /// current folder), and exit.
    #[arg(long)]
    sandbox: bool,
    /// With --sandbox: the policy file (default: policy.toml beside the
    /// workflow, else the safe default).
    #[arg(long, requires = "sandbox")]
    policy: Option<PathBuf>,
    /// With --sandbox: the workspace (default: the workflow's folder, as for `run`).
    #[arg(long, requires = "sandbox")]
    workspace: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum InspectFormat {
    Text,
    Json,
    Mermaid,
}

pub(super) fn run(args: Args) -> anyhow::Result<u8> {
    if args.support_matrix {
        support_matrix(args.format)
    } else if args.sandbox {
        sandbox(
            args.path.as_deref(),
            args.policy.as_deref(),
            args.workspace.as_deref(),
            args.format,
        )
    } else {
        plan(
            args.path.as_deref().unwrap_or(Path::new(".")),
            args.config.as_deref(),
            args.format,
            args.dialect.map(Into::into),
            args.read.options(),
        )
    }
}

fn plan(
    path: &Path,
    config: Option<&Path>,
    format: InspectFormat,
    dialect: Option<agentfile::detect::Dialect>,
    read: ReadOptions,
) -> anyhow::Result<u8> {
    let cfg = config_for(config, path)?;
    let a = frontend::analyze(
        path,
        Options {
            packages: None,
            config: cfg.as_ref(),
            dialect,
            read,
        },
    );
    let Some(plan) = &a.plan else {
        // Nothing to show: explain why on stderr, like a compiler would.
        let style = Style {
            color: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        };
        let mut err = std::io::stderr().lock();
        // A file that could not be read is its one diagnostic, said once.
        let unreadable = a.diagnostics.len() == 1 && a.diagnostics[0].span.is_none();
        let explained = print_diagnostics(&mut err, &a, style).and_then(|()| {
            if unreadable {
                return Ok(());
            }
            writeln!(
                err,
                "{}: invalid — {}; fix {} to inspect it",
                a.path.display(),
                plural(a.errors(), "error"),
                if a.errors() == 1 { "it" } else { "them" }
            )
        });
        return explained.map_or_else(
            |e| quiet_pipe(e.into(), EXIT_INVALID),
            |()| Ok(EXIT_INVALID),
        );
    };
    // The plan, as the servers' `inspect` answers: an agentrc file's parse
    // tree and grants are its `agentrc` member.
    let rendered = match format {
        InspectFormat::Text => inspect::text(plan),
        InspectFormat::Json => inspect::json(plan),
        InspectFormat::Mermaid => inspect::mermaid(plan),
    };
    print_rendered(&rendered)
}

/// `inspect --sandbox`: what the kernel sandbox enforces here for a
/// workflow's policy.
fn sandbox(
    path: Option<&Path>,
    policy: Option<&Path>,
    workspace: Option<&Path>,
    format: InspectFormat,
) -> anyhow::Result<u8> {
    let path = path.unwrap_or(Path::new("."));
    let dir = if path.is_dir() {
        path
    } else {
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    };
    let explicit_policy = policy;
    let mut policy = match agentfile::tools::Policy::load(policy, dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_INVALID);
        }
    };
    // As `run` does: the workflow's folder unless told otherwise.
    let workspace = workspace.unwrap_or(dir).to_owned();
    let workspace = match workspace.canonicalize() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("workspace {}: {e}", workspace.display());
            return Ok(EXIT_INVALID);
        }
    };
    policy.control_for_run(control::control_files(&control::ControlInputs {
        workspace: workspace.clone(),
        workflow_dir: dir.to_path_buf(),
        policy: explicit_policy.map(Path::to_path_buf),
        config: None,
        cwd: std::env::current_dir().ok(),
        workflow_files: workflow_files(path),
    }));
    let home = std::env::home_dir();
    let gate = match policy.bind(&workspace, home.as_deref()) {
        Ok(g) => std::sync::Arc::new(g),
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_INVALID);
        }
    };
    let env: Vec<(String, String)> = std::env::vars().collect();
    let controls: Vec<(control::ControlFile, bool)> = gate.control_files().to_vec();
    // As a run does: the config's session store is hidden, its
    // `[bash] max_processes` bounds the processes.
    let cfg = config_for(None, path).ok().flatten().unwrap_or_default();
    let sb = agentfile::tools::confine::ToolSandbox::new(
        &policy,
        gate,
        &env,
        cfg.session.path.as_deref(),
    )
    .bounded_by(cfg.bash.max_processes);
    let partial = sb.info().reason.is_some() || !sb.info().enforced;
    let control_json: Vec<serde_json::Value> = controls
        .iter()
        .map(|(c, writable)| control_file_json(c, *writable, partial))
        .collect();
    let rendered = match format {
        InspectFormat::Json => {
            let mut d = sb.describe();
            d["control_files"] = control_json.into();
            serde_json::to_string_pretty(&d)? + "\n"
        }
        _ => sb.describe_text() + &control_files_text(&control_json),
    };
    print_rendered(&rendered)
}

/// The control files a run of this workflow holds out of its tools' reach,
/// as `run` finds them: the workflow file and what it loads (when it reads),
/// every place a policy or config is looked for, `scripts/`, `.git`, the
/// store. Here: the workflow's own files.
fn workflow_files(path: &Path) -> Vec<PathBuf> {
    if !path.exists() {
        return Vec::new();
    }
    let cfg = config_for(None, path).ok().flatten();
    let (a, mut files) = agentfile::plan::diag::record_sources(|| {
        frontend::analyze(
            path,
            Options {
                packages: None,
                config: cfg.as_ref(),
                dialect: None,
                read: ReadOptions::default(),
            },
        )
    });
    files.push(a.path.clone());
    files
}

/// One control file and what holds it (`partial`: no mount namespace here).
fn control_file_json(c: &control::ControlFile, writable: bool, partial: bool) -> serde_json::Value {
    let exists = c.path.symlink_metadata().is_ok();
    let held = if writable {
        "writable ([control] writable)"
    } else if c.kind == control::ControlKind::Store {
        "hidden from programs; denied to tools (the run's scratch folder aside)"
    } else if exists && !partial {
        "read-only: the gate, a read-only mount (contents and name), the tripwire"
    } else if exists {
        "read-only: the gate and the tripwire (no mount namespace here)"
    } else {
        "may not be created: the gate, and the tripwire removes one a program makes"
    };
    serde_json::json!({
        "path": c.path.display().to_string(),
        "kind": c.kind.describe(),
        "exists": exists,
        "writable": writable,
        "held_by": held,
    })
}

fn control_files_text(control_json: &[serde_json::Value]) -> String {
    let mut t = "control files (what decides the next run; a person changes them between runs):\n"
        .to_owned();
    for c in control_json {
        t.push_str(&format!(
            "  {} ({}{}): {}\n",
            c["path"].as_str().unwrap_or_default(),
            c["kind"].as_str().unwrap_or_default(),
            if c["exists"].as_bool() == Some(true) {
                ""
            } else {
                ", absent"
            },
            c["held_by"].as_str().unwrap_or_default(),
        ));
    }
    t
}

/// `inspect --support-matrix`: the agentrc directives and what we do with them.
fn support_matrix(format: InspectFormat) -> anyhow::Result<u8> {
    let rendered = match format {
        InspectFormat::Json => {
            serde_json::to_string_pretty(&agentfile::agentrc::table::matrix_json())? + "\n"
        }
        _ => agentfile::agentrc::table::matrix_text(),
    };
    print_rendered(&rendered)
}
