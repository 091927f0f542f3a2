//! `agentfile list`: the workflows under a folder, their names, paths and
//! inputs.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentfile::config::Config;
use agentfile::discover;

use super::args::ReportFormat;
use super::quiet_pipe;

#[derive(clap::Args)]
pub(super) struct Args {
    /// Folder to search (default: the current folder).
    dir: Option<PathBuf>,
    /// Text for people, json for programs.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
}

/// The list is printed after the search is done; a reader that stops early
/// (`| head -1`) does not change the result (0).
pub(super) fn run(args: Args) -> anyhow::Result<u8> {
    list(args.dir.as_deref().unwrap_or(Path::new(".")), args.format).or_else(|e| quiet_pipe(e, 0))
}

fn list(dir: &Path, format: ReportFormat) -> anyhow::Result<u8> {
    if !dir.is_dir() {
        anyhow::bail!("{}: not a folder", dir.display());
    }
    let cfg = Config::discover(None, Path::new("."))?;
    let found = discover::list(dir, cfg.source.is_some().then_some(&cfg.config));
    let mut out = std::io::stdout().lock();
    match format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &found)?;
            writeln!(out)?;
        }
        ReportFormat::Text => out.write_all(discover::text(&found).as_bytes())?,
    }
    out.flush()?;
    Ok(0)
}
