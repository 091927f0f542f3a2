//! What every front end shares, below all of them: YAML read with source
//! spans ([`yaml`]) and schema violations in words ([`schema`]). No front end
//! imports another; each imports this. It is not a front end: it lowers no
//! workflow and knows no registry. Agent files (`*.agent.md`) are read by
//! their own crate, `agentfile-agent-card`, which builds on this one.

pub mod schema;
pub mod yaml;

/// The largest workflow file any front end reads (64 MiB).
pub const MAX_WORKFLOW_BYTES: u64 = 64 << 20;
