//! The script engine the registry hands every front end that reads agent
//! files: it describes a `## Tools` section's JavaScript in the tools crate's
//! sandbox (QuickJS, no host functions, the engine's default limits). The
//! card reader and the front ends link no script engine; they take this one
//! through [`agentfile_agent_card::Describe`].

use agentfile_agent_card::{Describe, Undescribed};
use agentfile_plan::agent::ScriptTool;
use agentfile_tools::script::{self, Limits, ScriptError};

/// Describes JavaScript tools with [`agentfile_tools::script::describe`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptEngine;

impl Describe for ScriptEngine {
    fn describe(&self, code: &str) -> Result<Vec<ScriptTool>, Undescribed> {
        match script::describe(code, &Limits::default()) {
            Ok(tools) => Ok(tools
                .into_iter()
                .map(|t| ScriptTool {
                    name: t.name,
                    description: t.description,
                    parameters: t.parameters,
                })
                .collect()),
            // A syntax error is located by its line and column, so its
            // message leaves the position out.
            Err(ScriptError::Syntax {
                message,
                line,
                column,
            }) => Err(Undescribed {
                message,
                line,
                column,
            }),
            Err(other) => Err(Undescribed {
                message: other.to_string(),
                line: None,
                column: None,
            }),
        }
    }
}
