//! The prompts hosts show as slash commands: `run` (run a workflow), `list`
//! (show the workspace's workflows) and `create` (the built-in generator
//! through the `create` tool, or, with format `agentfile`, a new Agentfile
//! written by the host's model and checked with `validate` until clean).
//!
//! Each produces one user message that asks the model to use this server's
//! tools; nothing here runs anything.

use rmcp::model::{
    GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role as McpRole,
};

/// One agent file's command, offered as the prompt `<agent>.<command>`.
#[derive(Debug, Clone)]
pub struct AgentPrompt {
    pub agent: String,
    pub title: String,
    pub command: agentfile_plan::agent::AgentCommand,
}

impl AgentPrompt {
    pub fn name(&self) -> String {
        format!("{}.{}", self.agent, self.command.name)
    }
}

/// The commands of every valid, enabled agent file under `root` (blocking:
/// reads files). Agents with errors offer nothing; `validate` explains them.
pub fn agent_prompts(root: &std::path::Path) -> Vec<AgentPrompt> {
    let mut out = Vec::new();
    let mut taken = std::collections::HashSet::new();
    for path in agentfile_frontend::discover::find_agents(root) {
        let mut sources = agentfile_plan::diag::SourceMap::default();
        let mut diags = Vec::new();
        let written = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        // One file must not take the list down: a panic while loading it
        // skips it, with a warning.
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            agentfile_agent_card::load_path(
                &mut sources,
                &agentfile_frontend::ScriptEngine,
                &path,
                &written,
                None,
                &mut diags,
            )
        }));
        let card = match loaded {
            Ok(card) => card,
            Err(p) => {
                let why = crate::limits::panic_message(p.as_ref());
                eprintln!(
                    "agentfile mcp: warning: skipped {written}: loading it panicked ({why}); please report it"
                );
                None
            }
        };
        let Some(card) = card else {
            continue;
        };
        let agent = agentfile_agent_card::agent_name(&path);
        for command in card.commands {
            let p = AgentPrompt {
                agent: agent.clone(),
                title: card.title.clone(),
                command,
            };
            // Two agent files of one name: the first (by path) keeps it.
            if taken.insert(p.name().to_ascii_lowercase()) {
                out.push(p);
            }
        }
    }
    out
}

/// The prompt a host shows for an agent command.
pub fn agent_prompt(p: &AgentPrompt) -> Prompt {
    use agentfile_agent_card::commands;
    let names = commands::argument_names(&p.command);
    let args: Vec<PromptArgument> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let what = if n == "arguments" && p.command.arguments.is_empty() {
                "All arguments, separated by spaces ($ARGUMENTS)".to_owned()
            } else {
                format!("Argument {} (${})", i + 1, i + 1)
            };
            PromptArgument::new(n.clone())
                .with_description(what)
                .with_required(commands::required(&p.command, i + 1))
        })
        .collect();
    Prompt::new(
        p.name(),
        Some(format!("{} ({})", p.command.description, p.title)),
        (!args.is_empty()).then_some(args),
    )
    .with_title(format!("{}: {}", p.title, p.command.name))
}

/// The command `p` with its arguments substituted, or why not.
pub fn agent_get(
    p: &AgentPrompt,
    args: Option<&JsonObject>,
) -> Result<GetPromptResult, PromptError> {
    use agentfile_agent_card::commands;
    let names = commands::argument_names(&p.command);
    let mut positional: Vec<String> = names
        .iter()
        .map(|n| arg(args, n).unwrap_or_default())
        .collect();
    if p.command.arguments.is_empty() && names == ["arguments"] {
        positional = positional[0]
            .split_whitespace()
            .map(str::to_owned)
            .collect();
    }
    let text = commands::expand(&p.command, &positional).map_err(|m| {
        let name = names
            .get(m.position - 1)
            .cloned()
            .unwrap_or_else(|| format!("arg{}", m.position));
        PromptError::NeedsArgument {
            prompt: p.name(),
            position: m.position,
            name,
        }
    })?;
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(McpRole::User, text)])
            .with_description(p.command.description.clone()),
    )
}

/// The prompts, as `prompts/list` returns them.
pub fn list() -> Vec<Prompt> {
    vec![
        Prompt::new(
            "run",
            Some("Run an agentfile workflow in this workspace and report its outputs"),
            Some(vec![
                PromptArgument::new("workflow")
                    .with_description("The workflow's name or path (see /list)")
                    .with_required(true),
                PromptArgument::new("inputs")
                    .with_description("Its inputs, e.g. `topic=caching depth=2`, or JSON")
                    .with_required(false),
            ]),
        )
        .with_title("Run a workflow"),
        Prompt::new(
            "list",
            Some("List the workflows in this workspace with their inputs"),
            None,
        )
        .with_title("List workflows"),
        Prompt::new(
            "create",
            Some("Create a new workflow: the built-in generator writes a workflow.yaml package (or, with format `agentfile`, you write an Agentfile validated until clean)"),
            Some(vec![
                PromptArgument::new("task")
                    .with_description("What the workflow should do")
                    .with_required(false),
                PromptArgument::new("name")
                    .with_description("Its name, lowercase and hyphenated (default: from the task)")
                    .with_required(false),
                PromptArgument::new("format")
                    .with_description("`workflow-yaml` (default: generated by the `create` tool) or `agentfile` (written by you in the Agentfile language)")
                    .with_required(false),
                PromptArgument::new("path")
                    .with_description("For format `agentfile`: where to save it (default: a new NAME.agent file)")
                    .with_required(false),
            ]),
        )
        .with_title("Create a workflow"),
    ]
}

fn arg(args: Option<&JsonObject>, name: &str) -> Option<String> {
    let v = args?.get(name)?;
    let s = match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => return None,
        other => other.to_string(),
    };
    let s = s.trim().to_owned();
    (!s.is_empty()).then_some(s)
}

/// Why a prompt cannot be given: the message of the `invalid_params`
/// error the host shows.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("prompt `{prompt}` needs argument {position} (`{name}`): its text uses ${position}")]
    NeedsArgument {
        prompt: String,
        position: usize,
        name: String,
    },
    #[error("prompt `run` needs the `workflow` argument (a name or path; /list shows them)")]
    NoWorkflow,
    #[error("prompt `create`: {0}")]
    Format(agentfile_author::UnknownFormat),
    #[error("no prompt `{0}`; the prompts are run, list and create")]
    Unknown(String),
}

/// The prompt `name` with its arguments, or why not.
pub fn get(name: &str, args: Option<&JsonObject>) -> Result<GetPromptResult, PromptError> {
    let (description, text) = match name {
        "run" => {
            let Some(workflow) = arg(args, "workflow") else {
                return Err(PromptError::NoWorkflow);
            };
            let inputs = arg(args, "inputs");
            ("Run a workflow", run_text(&workflow, inputs.as_deref()))
        }
        "list" => ("List workflows", LIST.to_owned()),
        "create" => {
            let target = match arg(args, "format") {
                None => agentfile_author::Target::default(),
                Some(name) => {
                    agentfile_author::Target::from_name(&name).map_err(PromptError::Format)?
                }
            };
            let text = if target.runs_the_generator() {
                generate_text(arg(args, "task").as_deref(), arg(args, "name").as_deref())
            } else {
                create_text(arg(args, "task").as_deref(), arg(args, "path").as_deref())
            };
            ("Create a workflow", text)
        }
        other => return Err(PromptError::Unknown(other.to_owned())),
    };
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(McpRole::User, text)])
            .with_description(description),
    )
}

fn run_text(workflow: &str, inputs: Option<&str>) -> String {
    let mut t = format!(
        "Run the agentfile workflow `{workflow}` with the agentfile MCP server's tools.\n\n\
         1. If `{workflow}` is not a path to a file, call the `list` tool and find the workflow by name; \
         note its path and inputs.\n"
    );
    match inputs {
        Some(i) => t.push_str(&format!(
            "2. Call the `run` tool with `path` set to the workflow's path and `inputs` set to an object built from: {i}\n   \
             (or call its own `run_<name>` tool with those inputs as arguments).\n"
        )),
        None => t.push_str(
            "2. Call the `run` tool with `path` set to the workflow's path. If it has required inputs, ask me for them first; \
             inputs with a default may be left out. (Its own `run_<name>` tool works too.)\n",
        ),
    }
    t.push_str(
        "3. If the result has status `waiting_approval`, tell me which goal waits and ask me; then call `approve` with my answer \
         and follow the run with `event` (session_id, after_seq, wait_ms) until `done`.\n\
         4. When the run ends, show me each goal's output, and the session id. If it failed, explain the error and how to fix it.",
    );
    t
}

const LIST: &str = "Call the agentfile `list` tool and show me the workflows in this workspace as a short table: \
name, path, inputs (required ones, and the defaults of the others) and whether it is valid. \
For an invalid one, call `validate` with its path and summarise what is wrong.";

/// The Agentfile language, compactly, for a model that writes one.
pub const LANGUAGE: &str = r#"# The Agentfile language (one statement per line; `#` starts a comment)

NAME <name>                                  required, once: the workflow's name
INPUT <name> [DEFAULT <value>]               an input; without DEFAULT it is required
AGENT <name> FROM <path> [REQUIRES "<profile>"]   a persona from a .md/.txt file (or a skill folder with SKILL.md), relative to the Agentfile
AGENT <name> "<inline prompt>"               a persona written inline
GOAL <name> "<outcome>" [-> out1, out2] [USING agent1, agent2]
GOAL <name> FROM <path> [-> outs] [USING agents]  the outcome text from a file
RUN <step> USING goal1, goal2                run goals once, in order
LOOP <step> USING goal1, goal2 WITHIN <n>|$input  repeat the goals as one body until converged or n iterations
CONVERGE <name> "<outcome>" [-> outs] [USING agent] WITHIN <n>|$input  refine one answer until the model replies exactly CONVERGED or it stops changing
SUPERVISED [HUMAN] | UNSUPERVISED            on its own line: the goals defined below need (or stop needing) human
                                             approval before they run; at the end of a GOAL line: that goal only

Rules:
- Identifiers: letters, digits, `_` and `-`. Strings: "..." with \n \t \r \\ \" escapes, or """...""" over several lines.
- `$name` in an outcome or prompt is an input, a goal's output (`$goal`) or a structured field (`-> field` makes `$field`);
  `$$` is a literal `$`; the longest name wins. A variable must be defined before the step that uses it.
- A goal with `USING a, b` runs one conversation per agent in parallel, then one synthesis; its output is the synthesis.
- A loop converges when the model signals it is done, an iteration makes no tool calls, or outputs stop changing.
- Every name is unique; NAME appears once; at least one RUN, LOOP or CONVERGE step is needed; WITHIN is a positive number or an input.
- Agents act through tools (read, write, edit, glob, grep, ls, bash, web_fetch, web_search, memory_read, memory_write) that
  `policy.toml` beside the workflow allows; without one, only file tools inside the workspace are on.

Example (save as review.agent):

NAME code-review
INPUT path DEFAULT "src"
INPUT focus DEFAULT "correctness"

AGENT reviewer "You are a careful senior engineer. Cite file and line for every finding."
AGENT skeptic "You look for what others missed: edge cases, error handling, security."

GOAL findings "Review the code under $path with an eye on $focus; list concrete findings." -> issues, summary USING reviewer, skeptic
GOAL report """
Write REVIEW.md: first $summary in one paragraph,
then the findings in $issues as a checklist.
"""

RUN review USING findings, report
"#;

/// `create` with the built-in generator (CONTRACT §10).
fn generate_text(task: Option<&str>, name: Option<&str>) -> String {
    let task = task
        .map(|t| format!("The workflow should: {t}\n\n"))
        .unwrap_or_else(|| "Ask me what the workflow should do first.\n\n".into());
    let name = name
        .map(|n| format!(" and `name` set to `{n}`"))
        .unwrap_or_default();
    format!(
        "Create a new agentfile workflow with the built-in generator.\n\n{task}\
         1. Call the agentfile `create` tool with `description` set to what the workflow should do{name}. \
         It runs the generator workflow (clarify, design, workflow.yaml, agents, skills, scripts, review) into `artifacts/<name>/<run-id>/` \
         and validates the result.\n\
         2. Show me the review (`07-review.md` in that folder) and the validation result; if it is invalid, explain the diagnostics.\n\
         3. If it is valid and I agree, call `promote` with `run` set to the artifacts folder, then `inspect` the new workflow with format `text`.\n\
         4. Offer to run it with its `run_<name>` tool."
    )
}

fn create_text(task: Option<&str>, path: Option<&str>) -> String {
    let task = task
        .map(|t| format!("The workflow should: {t}\n\n"))
        .unwrap_or_else(|| "Ask me what the workflow should do, then write it.\n\n".into());
    let path = path
        .map(|p| format!("Save it as `{p}`."))
        .unwrap_or_else(|| {
            "Save it as `<name>.agent` in the workspace (or `Agentfile` in a new folder).".into()
        });
    format!(
        "Write a new agentfile workflow.\n\n{task}\
         Steps:\n\
         1. Draft the workflow in the Agentfile language described below: clear goal outcomes that say what done looks like, \
         agents only where a persona helps, inputs for what varies between runs.\n\
         2. Call the agentfile `validate` tool with `source` set to the full text (and `path` set to where it will be saved, \
         so FROM files resolve). Fix every diagnostic it reports and validate again, until `ok` is true with no errors.\n\
         3. {path} Then call `inspect` with its path and format `text` and show me the plan.\n\
         4. Offer to run it with the `run` tool.\n\n{LANGUAGE}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &GetPromptResult) -> String {
        serde_json::to_value(&r.messages[0]).unwrap()["content"]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn prompts_ask_for_the_tools() {
        assert_eq!(
            list().iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["run", "list", "create"]
        );
        let mut args = JsonObject::new();
        args.insert("workflow".into(), "review".into());
        args.insert("inputs".into(), "path=lib".into());
        let t = text(&get("run", Some(&args)).unwrap());
        assert!(t.contains("`run` tool") && t.contains("path=lib"), "{t}");
        assert!(
            get("run", None)
                .unwrap_err()
                .to_string()
                .contains("workflow")
        );
        assert!(text(&get("list", None).unwrap()).contains("`list` tool"));
        let t = text(&get("create", None).unwrap());
        assert!(
            t.contains("`create` tool") && t.contains("`promote`"),
            "{t}"
        );
        let mut written = JsonObject::new();
        written.insert("format".into(), "agentfile".into());
        let t = text(&get("create", Some(&written)).unwrap());
        assert!(
            t.contains("`validate`") && t.contains("CONVERGE") && t.contains("NAME code-review")
        );
        written.insert("format".into(), "toml".into());
        assert!(get("create", Some(&written)).is_err());
        assert!(get("nope", None).is_err());
    }

    /// The example in the language description is itself a valid workflow.
    #[test]
    fn the_example_validates() {
        let example = LANGUAGE
            .split_once("Example (save as review.agent):\n")
            .unwrap()
            .1;
        let a = agentfile_frontend::analyze_bytes(
            std::path::PathBuf::from("review.agent"),
            example.as_bytes().to_vec(),
            agentfile_frontend::Options {
                packages: None,
                config: None,
                dialect: None,
                read: Default::default(),
            },
        );
        assert_eq!(a.errors(), 0, "{:?}", a.diagnostics);
    }
}
