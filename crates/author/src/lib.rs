//! Writing workflows, above the registry: `create` (a request in words
//! becomes a workflow.yaml project, by running the embedded generator
//! workflow) and `promote` (a finished run becomes one). Both record sessions
//! and events, which no front end does; they check what they write with the
//! workflow.yaml front end, through the registry's `analyze`.
//!
//! It is not the registry (`agentfile-frontend` reads files and knows nothing
//! of this crate) and not the engine: it runs no workflow, the caller runs the
//! generator with whatever run API it has.

pub mod create;
mod error;
pub mod generate;

pub use error::{AuthorError, BundledSchemaError, Exists, NotPromotable};

/// What `create` writes: a workflow.yaml project (through the generator, the
/// default) or an Agentfile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Target {
    #[default]
    WorkflowYaml,
    Agentfile,
}

impl Target {
    /// The names a caller may give (`workflow-yaml`, `workflow.yaml`,
    /// `yaml`; `agentfile`, `dsl`).
    pub fn from_name(name: &str) -> Result<Target, UnknownFormat> {
        match name {
            "workflow-yaml" | "workflow.yaml" | "yaml" => Ok(Target::WorkflowYaml),
            "agentfile" | "dsl" => Ok(Target::Agentfile),
            other => Err(UnknownFormat(other.to_owned())),
        }
    }

    /// Whether `create` writes it by running the generator workflow; else the
    /// client writes the file itself and checks it with `validate`.
    pub fn runs_the_generator(self) -> bool {
        matches!(self, Target::WorkflowYaml)
    }
}

/// A `create` format that is not one of [`Target`]'s names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("format `{0}` is not one of workflow-yaml, agentfile")]
pub struct UnknownFormat(pub String);
