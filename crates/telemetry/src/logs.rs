//! The process's own log lines (`tracing`), on stderr only.
//!
//! stdout belongs to the protocols (results, `stream-json`, JSON-RPC, MCP), so
//! logs never go there. Human format on a terminal (ANSI colours only when
//! stderr is a terminal and `NO_COLOR` is unset), JSON lines with
//! `--log-format json`. The level is `--log-level` (a level or a full filter
//! such as `agentfile=debug,rmcp=warn`), else `RUST_LOG`, else `warn` — so by
//! default the CLI's stderr shows the progress lines and nothing else.
//!
//! What is never logged: API keys, tokens, header values. The code logs key
//! *names* at most, and URLs through [`super::redact_url`].

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// How log lines look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// A `--log-level` that is not a level or a filter.
#[derive(Debug, thiserror::Error)]
#[error("--log-level {level}: {source}")]
pub struct BadLevel {
    pub level: String,
    pub source: tracing_subscriber::filter::ParseError,
}

/// Install the global subscriber. `level` is `--log-level`; an invalid filter
/// is an error naming it. Calling it twice keeps the first subscriber.
pub fn init(format: LogFormat, level: Option<&str>) -> Result<(), BadLevel> {
    let filter = match level {
        Some(l) => EnvFilter::builder().parse(l).map_err(|source| BadLevel {
            level: l.to_owned(),
            source,
        })?,
        // A bad RUST_LOG directive is skipped rather than fatal: the variable
        // may have been set for another program.
        None => EnvFilter::builder()
            .with_default_directive(LevelFilter::WARN.into())
            .from_env_lossy(),
    };
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    // Already installed (tests calling twice): the first one stays.
    let _ = result;
    Ok(())
}
