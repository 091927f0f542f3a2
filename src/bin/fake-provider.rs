//! `fake-provider`: the loopback fake LLM server as a program, for benchmarks and
//! manual runs. It serves the Anthropic, OpenAI and Gemini wire formats from a JSON
//! script (see `agentfile::llm::fake`), prints its base URL on stdout, and runs
//! until interrupted.
//!
//! ```text
//! fake-provider script.json            # any free port on 127.0.0.1
//! fake-provider --bind 127.0.0.1:8089 script.json
//! echo '[{"text":"hi"}]' | fake-provider -
//! ```

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;

use agentfile::llm::fake::{FakeScript, FakeServer};
use anyhow::Context;
use clap::Parser;

/// Serve a scripted fake LLM on loopback.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// The script: a JSON array of replies, or {"replies": [...], "repeat": true}; `-` reads stdin.
    script: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let text = if args.script.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the script from stdin")?;
        s
    } else {
        std::fs::read_to_string(&args.script)
            .with_context(|| format!("cannot read {}", args.script.display()))?
    };
    let script: FakeScript = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a fake-provider script", args.script.display()))?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let server = FakeServer::start_script(script, args.bind)
            .await
            .with_context(|| format!("cannot listen on {}", args.bind))?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", server.base_url())?;
        out.flush()?;
        drop(out);
        tokio::signal::ctrl_c()
            .await
            .context("cannot wait for Ctrl-C")?;
        server.shutdown().await;
        Ok(())
    })
}
