//! What the front ends share, below all of them: YAML read with source spans
//! ([`yaml`]), schema violations in words ([`schema`]) and agent cards: the
//! `*.agent.md` files a DSL, WORKFLOW.md or workflow.yaml workflow takes its
//! agents from, and that also run on their own ([`cards`]). No front end
//! imports another; each imports this. It is not a front end: it lowers no
//! workflow and knows no registry.

pub mod cards;
pub mod schema;
pub mod yaml;

/// The largest workflow file any front end reads (64 MiB).
pub const MAX_WORKFLOW_BYTES: u64 = 64 << 20;
