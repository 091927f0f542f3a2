//! The built-in `grep` over a large tree: the cargo registry sources on this
//! machine (`$CARGO_HOME/registry/src`), else this repository. Compare with
//! ripgrep using `scripts/bench-grep.sh`, which times both on the same tree.
//! Run as a test (`cargo test --all-targets`, no `--bench`), each benchmark
//! searches this repository's `crates/` once instead of half a gigabyte.
//!
//! Run with `cargo bench --bench grep`.

use std::path::{Path, PathBuf};

use agentfile::tools::builtin::search::{GrepOptions, grep};
use agentfile::tools::policy::{Gate, Policy};

fn main() {
    divan::main();
}

fn tree() -> PathBuf {
    // `cargo bench` passes `--bench`; `cargo test` runs each benchmark once.
    if !std::env::args().any(|a| a == "--bench") {
        return PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates");
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(src) = cargo_home.map(|c| c.join("registry/src"))
        && src.is_dir()
    {
        return src.canonicalize().unwrap_or(src);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn gate(root: &Path) -> Gate {
    Policy::safe_default()
        .bind(root, None)
        .expect("the safe default binds")
}

fn run(pattern: &str) -> u64 {
    let root = tree();
    let gate = gate(&root);
    let opts = GrepOptions::new(pattern);
    grep(&gate, &root, &opts).map(|r| r.matches).unwrap_or(0)
}

/// A rare literal: dominated by walking and reading.
#[divan::bench(sample_count = 5)]
fn rare_literal() -> u64 {
    run("PhantomPinned")
}

/// A regex with a few thousand matches.
#[divan::bench(sample_count = 5)]
fn regex() -> u64 {
    run(r"fn\s+[a-z_]+_test\b")
}

/// A common word: output-heavy.
#[divan::bench(sample_count = 5)]
fn common_word() -> u64 {
    run("unsafe")
}
