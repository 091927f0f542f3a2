//! The `agentfile` binary a whole-process benchmark drives: `AGENTFILE_BIN`
//! when set (another build's binary, for figures side by side with it), else
//! the one cargo built with the benchmark.

use std::path::PathBuf;

pub fn agentfile() -> PathBuf {
    std::env::var_os("AGENTFILE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_agentfile")))
}
