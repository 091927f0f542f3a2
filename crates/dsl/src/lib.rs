//! The Agentfile DSL front end: lexer → parser → validator → [`agentfile_plan::Plan`].
//! One of five front ends, side by side: it uses no other front end (what they
//! share is in `agentfile_syntax`), and it never runs a model or a tool.
//!
//! Invariants: nothing here panics on any input (a property test feeds it
//! arbitrary bytes), every node keeps its span, and one call reports every
//! problem rather than stopping at the first.

pub mod ast;
pub mod lexer;
pub mod lower;
pub mod parser;
pub mod validate;

/// The DSL's `$variable` templates live with the plan, which renders them.
pub use agentfile_plan::template;
pub use parser::parse;
pub use validate::{Options, validate};
