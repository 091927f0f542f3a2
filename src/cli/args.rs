//! Flag groups and values more than one command reads: how a workflow is
//! read, which dialect, where the session store is, report and output
//! formats. A group is flattened only into the commands that use every flag
//! in it.

use std::path::PathBuf;

use clap::ValueEnum;

use agentfile::detect::Dialect;
use agentfile::plan::ReadOptions;

/// How `validate`, `inspect` and `run` read a workflow, whatever its format
/// (the servers' `lenient`, `profile` and `extensions` params): one
/// [`ReadOptions`].
#[derive(clap::Args, Clone, Default)]
pub(super) struct ReadArgs {
    /// workflow.yaml: what a runtime can still interpret (unknown fields, a
    /// list-valued `input`, `{placeholder}` text) is a warning, not an error,
    /// and the workflow runs.
    #[arg(long)]
    lenient: bool,
    /// agentrc: `core` checks core conformance (a directive of an optional
    /// profile is an error unless --extensions names its profile); `all`, the
    /// default, accepts every profile agentfile reads.
    #[arg(long, value_enum, default_value_t = ProfileArg::All)]
    profile: ProfileArg,
    /// agentrc, with --profile core: optional profiles to accept
    /// (capability, instruction, security, placement, observability,
    /// experimental, or all).
    #[arg(long, value_delimiter = ',', value_parser = extension_parser())]
    extensions: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
enum ProfileArg {
    /// Every profile agentfile reads.
    #[default]
    All,
    /// The core profile, plus --extensions.
    Core,
}

impl ReadArgs {
    pub(super) fn options(&self) -> ReadOptions {
        ReadOptions {
            lenient: self.lenient,
            core_only: self.profile == ProfileArg::Core,
            extensions: self.extensions.clone(),
        }
    }
}

fn extension_parser() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(agentfile::frontend::extension_names())
}

/// Where the session store is: the config and workspace decide, as for `run`.
#[derive(clap::Args, Clone)]
pub(super) struct StoreArgs {
    /// Config file whose `[session]` names the store (default: agent.toml or
    /// agent.json in the current folder).
    #[arg(long)]
    pub(super) config: Option<PathBuf>,
    /// The workspace whose store to read (default: agent.workspace in the
    /// config, else the current folder).
    #[arg(long)]
    pub(super) workspace: Option<PathBuf>,
}

/// How a run's result is printed (`run`, `sessions resume`, `create`).
#[derive(Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
pub(super) enum OutputMode {
    #[default]
    Text,
    Json,
    StreamJson,
}

/// A report as text for people or JSON for programs.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum ReportFormat {
    Text,
    Json,
}

/// `--dialect`: which Agentfile dialect to read, mapped to the registry's
/// [`Dialect`] here, at the edge.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum DialectArg {
    Agentfile,
    Agentrc,
}

impl From<DialectArg> for Dialect {
    fn from(d: DialectArg) -> Dialect {
        match d {
            DialectArg::Agentfile => Dialect::Agentfile,
            DialectArg::Agentrc => Dialect::Agentrc,
        }
    }
}
