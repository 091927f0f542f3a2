//! What a plan keeps of an agent definition file (`*.agent.md`, CONTRACT §11):
//! its metadata, resolved system message and rules, commands, abilities,
//! requirements and JavaScript tools. Every front end that names a persona
//! file lowers it through `agentfile_agent_card::load` into an [`AgentCard`] on the
//! agent's [`super::AgentDef`], so the executor, `inspect` and the servers
//! read one shape whatever the workflow's format.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An agent file, loaded and checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentCard {
    /// The file, as the workflow named it (or as given to `validate`).
    pub file: String,
    pub title: String,
    pub description: String,
    pub version: String,
    pub icon: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
    pub status: AgentStatus,
    /// The system message: `## System`, else the description, else the
    /// title (templates rendered).
    pub system: String,
    /// `## Rules` (templates rendered); empty when there are none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rules: String,
    /// `recommended` (models, capabilities): guidance, never enforced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended: Option<serde_json::Value>,
    /// `input`: what the templates saw as `ctx.input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<serde_json::Value>,
    /// `required.env`: checked before the run starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_env: Vec<String>,
    /// `required.startup`: a tool of `## Tools` that must succeed before the
    /// agent's first turn (its scheme's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<String>,
    /// `abilities`; `None`: the host functions are limited by the policy only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abilities: Option<Abilities>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<AgentCommand>,
    /// `## Tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<AgentScript>,
}

impl AgentCard {
    /// The persona the model gets: the system message, then the rules.
    pub fn persona(&self) -> String {
        if self.rules.is_empty() {
            self.system.clone()
        } else {
            format!("{}\n\n## Rules\n\n{}", self.system, self.rules)
        }
    }

    /// The `## Tools` tool called `name` (case-insensitive).
    pub fn script_tool(&self, name: &str) -> Option<&ScriptTool> {
        self.script
            .as_ref()?
            .tools
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    Active,
    Deprecated,
    Disabled,
}

impl AgentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Active => "active",
            AgentStatus::Deprecated => "deprecated",
            AgentStatus::Disabled => "disabled",
        }
    }
}

/// One command (a slash command in a host: MCP prompt `<agent>.<command>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentCommand {
    pub name: String,
    pub description: String,
    /// `argument-hint`, one name per positional argument (`$1` is the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<String>,
    /// The text, with `$1…$9` and `$ARGUMENTS` still in it.
    pub body: String,
    /// Where it was defined: `inline`, or the command file's path.
    pub source: String,
}

/// The agent's abilities: what its JavaScript tools' host functions may do,
/// on top of the policy. Names are lowercase; `sh:<command>` allows one
/// program.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Abilities {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

/// The base abilities the seed allows (`sh:<command>` is a scoped `sh`).
pub const ABILITIES: &[&str] = &["fs", "network", "sh", "tool", "mcp", "browser", "env"];

impl Abilities {
    /// Whether `ability` (a base name) is allowed; for `sh`, `program` is one
    /// program's name, matched against `sh:<command>` entries. A host call is
    /// judged by everything it does (a `tool("read")` is `fs`, every command
    /// of a shell line its own program) in `executor::abilities`, which asks
    /// this for each.
    pub fn permits(&self, ability: &str, program: Option<&str>) -> bool {
        let scoped = |list: &[String]| {
            program.is_some_and(|p| {
                list.iter()
                    .any(|a| a.strip_prefix("sh:").is_some_and(|c| c == p))
            })
        };
        let listed = |list: &[String]| list.iter().any(|a| a == ability);
        if listed(&self.deny) || (ability == "sh" && scoped(&self.deny)) {
            return false;
        }
        listed(&self.allow) || (ability == "sh" && scoped(&self.allow))
    }
}

/// The `## Tools` JavaScript and the tools it declared when it was checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentScript {
    /// The function body that returns `{ name: { fn, scheme } }`.
    pub code: String,
    /// Its first line in the agent file (1-based), for error locations.
    pub line: u32,
    pub tools: Vec<ScriptTool>,
}

/// One JavaScript tool, as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScriptTool {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ab(allow: &[&str], deny: &[&str]) -> Abilities {
        Abilities {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn deny_wins_and_sh_can_be_scoped() {
        let a = ab(&["fs", "sh:git"], &["network"]);
        assert!(a.permits("fs", None));
        assert!(!a.permits("network", None));
        assert!(!a.permits("env", None));
        assert!(a.permits("sh", Some("git")));
        assert!(!a.permits("sh", Some("rm")));
        let b = ab(&["sh"], &["sh:rm"]);
        assert!(b.permits("sh", Some("ls")));
        assert!(!b.permits("sh", Some("rm")));
    }
}
