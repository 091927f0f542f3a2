//! The tools behind the policy gate, through the toolbox as the executor
//! calls them: the built-in tools (`builtin`), `web_fetch` and `web_search`
//! on loopback (`web`), remote A2A agents as tools against a fake agent on
//! loopback (`a2a`), the security corpus (`policy_corpus`), the policy
//! under fuzzing (`policy_never_panics`) and the sandbox escape corpus
//! (`sandbox_escapes`). One test binary: `cargo test -p agentfile-tools`.

use std::path::{Path, PathBuf};

mod a2a;
mod builtin;
mod policy_corpus;
mod policy_never_panics;
mod sandbox_escapes;
mod web;

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
