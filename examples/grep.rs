//! The built-in `grep` tool's engine as a command, for comparing it with ripgrep
//! (`scripts/bench-grep.sh`): `cargo run --release --example grep -- PATTERN DIR`.
//!
//! It searches the way the tool does — the same walker, matcher, searcher, the
//! same per-file policy check (the safe default policy, with DIR as the
//! workspace) — but without the tool's output cap, printing every match as
//! `path:line:text` like `rg -n`.

use std::io::Write;
use std::path::Path;

use agentfile::tools::builtin::search::{GrepOptions, grep};
use agentfile::tools::policy::Policy;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [pattern, dir] = args.as_slice() else {
        eprintln!("usage: grep PATTERN DIR");
        std::process::exit(2);
    };
    let dir = match Path::new(dir).canonicalize() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{dir}: {e}");
            std::process::exit(2);
        }
    };
    let gate = match Policy::safe_default().bind(&dir, None) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let opts = GrepOptions::new(pattern.as_str());
    let result = match grep(&gate, &dir, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (_, bytes) in &result.files {
        if out.write_all(bytes).is_err() {
            std::process::exit(0);
        }
    }
    let _ = out.flush();
    eprintln!("{} matches in {} files", result.matches, result.files.len());
}
