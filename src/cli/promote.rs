//! `agentfile promote artifacts/NAME/RUN_ID`: a validated generation run
//! becomes `workflows/NAME/`, the run archived to `outputs/NAME/RUN_ID/build/`.

use std::path::{Path, PathBuf};

use super::EXIT_INVALID;

#[derive(clap::Args)]
pub(super) struct Args {
    /// The run's folder, `artifacts/NAME/RUN_ID`.
    run: PathBuf,
    /// The project folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
}

pub(super) fn run(args: Args) -> anyhow::Result<u8> {
    let ws = args
        .workspace
        .as_deref()
        .unwrap_or(Path::new("."))
        .canonicalize()
        .map_err(|e| anyhow::anyhow!("workspace: {e}"))?;
    match agentfile::author::generate::promote(&ws, &args.run) {
        Ok(p) => {
            println!(
                "promoted {} to {} (the run is archived in {})",
                args.run.display(),
                p.target,
                p.archive
            );
            Ok(0)
        }
        Err(e) => {
            eprintln!("agentfile: error: {e}");
            Ok(EXIT_INVALID)
        }
    }
}
