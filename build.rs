//! Release builds of `agentfile` on x86-64 Linux link the functions a run
//! executes next to each other (`scripts/symbol-order.txt`), so a run takes
//! about 150 fewer page faults (README, Performance). Nothing else changes; a
//! name the file lists that the build does not have is skipped, so a stale file
//! only loses some of the gain. `scripts/symbol-order.sh` writes the file again.
//!
//! Only with the linker Rust uses there by default (its own `lld`, which knows
//! `--symbol-ordering-file`): a build that chooses another linker, or sets
//! `AGENTFILE_SYMBOL_ORDER=0`, links as usual.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=scripts/symbol-order.txt");
    for var in [
        "AGENTFILE_SYMBOL_ORDER",
        "RUSTC_LINKER",
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let is = |var: &str, value: &str| env::var(var).is_ok_and(|v| v == value);
    let default_linker = env::var_os("RUSTC_LINKER").is_none()
        && env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_none()
        && !env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|f| {
            f.contains("linker") || f.contains("link-self-contained") || f.contains("fuse-ld")
        });
    let wanted = is("PROFILE", "release")
        && is("CARGO_CFG_TARGET_OS", "linux")
        && is("CARGO_CFG_TARGET_ARCH", "x86_64")
        && is("CARGO_CFG_TARGET_ENV", "gnu")
        && !is("AGENTFILE_SYMBOL_ORDER", "0")
        && default_linker;
    let file = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("scripts")
        .join("symbol-order.txt");
    // `-Wl,` splits at commas.
    if wanted && file.is_file() && !file.to_string_lossy().contains(',') {
        println!(
            "cargo::rustc-link-arg-bin=agentfile=-Wl,--symbol-ordering-file={}",
            file.display()
        );
        println!("cargo::rustc-link-arg-bin=agentfile=-Wl,--no-warn-symbol-ordering");
    }
}
