//! `agentfile completions SHELL` and `agentfile man`: shell completions and
//! manual pages, both generated from the parser itself, so they name every
//! command and flag there is and no other.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, EXIT_INVALID, finish, quiet_pipe};

#[derive(clap::Args)]
pub(super) struct CompletionsArgs {
    /// The shell to complete for. Install for bash with `agentfile
    /// completions bash >~/.local/share/bash-completion/completions/agentfile`;
    /// for zsh, into a folder on `$fpath` as `_agentfile`; for fish, as
    /// `~/.config/fish/completions/agentfile.fish`.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(clap::Args)]
pub(super) struct ManArgs {
    /// Write a page per command (agentfile.1, agentfile-run.1,
    /// agentfile-sessions-list.1, …) into this folder instead of printing
    /// agentfile(1) on standard output.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub(super) fn completions(args: CompletionsArgs) -> ExitCode {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "agentfile", &mut out);
    let mut stdout = std::io::stdout().lock();
    finish(
        stdout
            .write_all(&out)
            .and_then(|()| stdout.flush())
            .map(|()| 0)
            .or_else(|e| quiet_pipe(e.into(), 0)),
    )
}

pub(super) fn man(args: ManArgs) -> ExitCode {
    let mut cmd = Cli::command();
    cmd.build();
    match args.dir {
        None => {
            let mut page = Vec::new();
            if let Err(e) = clap_mangen::Man::new(cmd).render(&mut page) {
                eprintln!("agentfile: error: cannot render the manual page: {e}");
                return ExitCode::from(EXIT_INVALID);
            }
            let mut stdout = std::io::stdout().lock();
            finish(
                stdout
                    .write_all(&page)
                    .and_then(|()| stdout.flush())
                    .map(|()| 0)
                    .or_else(|e| quiet_pipe(e.into(), 0)),
            )
        }
        Some(dir) => {
            let written =
                std::fs::create_dir_all(&dir).and_then(|()| pages(&cmd, "agentfile", &dir));
            match written {
                Ok(n) => {
                    println!("{n} manual pages written to {}", dir.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!(
                        "agentfile: error: cannot write manual pages to {}: {e}",
                        dir.display()
                    );
                    ExitCode::from(EXIT_INVALID)
                }
            }
        }
    }
}

/// A page for `cmd` (named `name`, e.g. `agentfile-sessions-list`) and each of
/// its subcommands but `help`, into `dir`; how many were written.
fn pages(cmd: &clap::Command, name: &str, dir: &std::path::Path) -> std::io::Result<usize> {
    let mut page = Vec::new();
    let named = cmd
        .clone()
        .name(name.to_owned())
        .bin_name(name.replace('-', " "));
    clap_mangen::Man::new(named).render(&mut page)?;
    std::fs::write(dir.join(format!("{name}.1")), page)?;
    let mut n = 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
    {
        n += pages(sub, &format!("{name}-{}", sub.get_name()), dir)?;
    }
    Ok(n)
}
