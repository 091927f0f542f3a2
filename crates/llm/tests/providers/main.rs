//! The model providers against the loopback fake server, each on its real
//! wire format: the scenarios every provider must pass ([`support`]), then
//! what is particular to each format; and record and replay (`replay`).
//! One test binary: `cargo test -p agentfile-llm`.

#[macro_use]
mod support;

mod anthropic;
mod gemini;
mod openai;
mod replay;
