//! Writing workflows, above the front ends: `create` (a request in words
//! becomes a workflow.yaml project, by running the embedded generator
//! workflow) and `promote` (a finished run becomes one). Both record sessions
//! and events, which no front end does; they check what they write with the
//! workflow.yaml front end.

pub mod create;
pub mod generate;
