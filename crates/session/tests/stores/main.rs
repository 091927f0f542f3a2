//! The session stores (SQLite, files, PostgreSQL in a throwaway cluster)
//! against the contract of `SessionStore` (`store`), watches of sessions
//! appended to by another store (`changes`), and the session export's
//! snapshots (`export`). One test binary: `cargo test -p agentfile-session`.

use std::path::{Path, PathBuf};

mod support;

mod changes;
mod export;
mod store;

/// The checkout's root, where the shared `fixtures/` live.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The name libtest knows the test `f` of the module `module` (its
/// `module_path!()`) by, for a test that runs one test of this binary again
/// in a child process (`--exact`): the module path without the crate's name.
fn test_name(module: &str, f: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{f}"),
        None => f.to_owned(),
    }
}
