//! The agent card (`/.well-known/agent-card.json`) and the skills behind it:
//! one skill per valid workflow of the workspace, found as `agentfile list`
//! finds them and analysed by its front end, kept current by a rescan every
//! few seconds that analyses again only the files whose size or time
//! changed.
//!
//! A skill's id is the name MCP gives the workflow's tool without its
//! `run_` (`run_<id>`: the workflow's id, else its name, with characters
//! outside `[A-Za-z0-9_-]` made `_`, unique with `_2`, `_3`, …). Its
//! description says what the workflow does and carries the inputs' JSON
//! Schema; the same schemas are on the card as the params of the
//! [`INPUTS_EXTENSION`] capability, by skill id, for programs.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use agentfile_frontend::{self as frontend, Options, discover};
use agentfile_plan::Plan;
use agentfile_wire::a2a::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill, JSONRPC_BINDING,
    PROTOCOL_VERSION, v0_3,
};

/// The card's extension whose params hold each skill's inputs schema.
pub const INPUTS_EXTENSION: &str = "https://agentfile.dev/a2a/skill-inputs/v1";
/// Longest skill id (as MCP's tool names, less `run_`).
const MAX_ID: usize = 60;
/// Longest description part before the schema.
const MAX_DESCRIPTION: usize = 1200;

/// A workflow as a skill.
#[derive(Clone, Debug, PartialEq)]
pub struct Skill {
    pub id: String,
    pub name: String,
    pub description: String,
    /// The workflow file, relative to the workspace when inside it.
    pub path: String,
    /// Its inputs' JSON Schema.
    pub schema: Map<String, Value>,
    /// Example inputs, each a JSON text.
    pub examples: Vec<String>,
}

impl Skill {
    /// The one input a text-only message may fill, when the workflow has
    /// exactly one.
    pub fn only_input(&self) -> Option<&str> {
        let props = self.schema.get("properties")?.as_object()?;
        (props.len() == 1)
            .then(|| props.keys().next().map(String::as_str))
            .flatten()
    }
}

/// What a file looked like when it was analysed.
type Stamp = Option<(u64, SystemTime)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// Each workflow file's plan with the stamp it had (`None`: not valid).
type Analyses = HashMap<PathBuf, (Stamp, Option<Arc<Plan>>)>;

/// The workspace's skills, `None` until the first scan.
pub struct Catalog {
    root: PathBuf,
    config: Option<PathBuf>,
    max_source: u64,
    skills: watch::Sender<Option<Arc<Vec<Skill>>>>,
    cache: Mutex<Analyses>,
}

impl Catalog {
    pub fn new(root: PathBuf, config: Option<PathBuf>, max_source: u64) -> Arc<Catalog> {
        Arc::new(Catalog {
            root,
            config,
            max_source,
            skills: watch::Sender::new(None),
            cache: Mutex::default(),
        })
    }

    /// Scan now (blocking: call it off the async threads).
    pub fn scan(&self) {
        let config = agentfile_config::find_for_workflow(
            self.config.as_deref(),
            &self.root.join("Agentfile"),
            &self.root,
        )
        .ok()
        .flatten();
        let mut found = discover::find(&self.root);
        found.extend(frontend::package::served(config.as_ref()));
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let keep: HashSet<&PathBuf> = found.iter().collect();
        cache.retain(|p, _| keep.contains(p));
        let mut taken = HashSet::new();
        let mut skills = Vec::new();
        for path in &found {
            let now = stamp(path);
            let plan = match cache.get(path) {
                Some((s, plan)) if *s == now => plan.clone(),
                _ => {
                    let plan = self.analyse(path, now, config.as_ref());
                    cache.insert(path.clone(), (now, plan.clone()));
                    plan
                }
            };
            if let Some(plan) = plan {
                let rel = path.strip_prefix(&self.root).unwrap_or(path);
                skills.push(skill(&plan, &rel.display().to_string(), &mut taken));
            }
        }
        drop(cache);
        self.skills.send_if_modified(|cur| {
            if cur.as_deref() == Some(&skills) {
                return false;
            }
            *cur = Some(Arc::new(skills));
            true
        });
    }

    /// The plan of the workflow at `path`, if it is valid and not too large;
    /// a panic while analysing it skips it until it changes.
    fn analyse(
        &self,
        path: &Path,
        now: Stamp,
        config: Option<&agentfile_config::Config>,
    ) -> Option<Arc<Plan>> {
        if now.is_some_and(|(len, _)| len > self.max_source) {
            return None;
        }
        let analysed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            frontend::analyze(
                path,
                Options {
                    packages: None,
                    config,
                    dialect: None,
                    read: Default::default(),
                },
            )
            .plan
        }));
        analysed.ok().flatten().map(Arc::new)
    }

    /// The skills, waiting for the first scan.
    pub async fn skills(&self) -> Arc<Vec<Skill>> {
        let mut rx = self.skills.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_default(),
            Err(_) => Arc::default(),
        }
    }

    /// Scan at once and then every `every` until `stop`.
    pub fn watch(self: &Arc<Self>, every: Duration, stop: CancellationToken) {
        let catalog = self.clone();
        tokio::spawn(async move {
            loop {
                let c = catalog.clone();
                let _ = tokio::task::spawn_blocking(move || c.scan()).await;
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.cancelled() => return,
                }
            }
        });
    }

    /// Scan now, off the async threads (a skill asked for that the last
    /// scan did not have: a workflow written a moment ago).
    pub async fn rescan(self: &Arc<Self>) -> Arc<Vec<Skill>> {
        let c = self.clone();
        let _ = tokio::task::spawn_blocking(move || c.scan()).await;
        self.skills().await
    }
}

/// `workflow` as a skill id: MCP's `run_<name>` tool name less `run_`.
fn skill_id(workflow: &str, taken: &mut HashSet<String>) -> String {
    let clean: String = workflow
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_ID)
        .collect();
    let mut id = clean.clone();
    let mut n = 2;
    while taken.contains(&id) {
        let suffix = format!("_{n}");
        let keep = MAX_ID - suffix.len();
        id = format!("{}{suffix}", clean.chars().take(keep).collect::<String>());
        n += 1;
    }
    taken.insert(id.clone());
    id
}

fn skill(plan: &Plan, path: &str, taken: &mut HashSet<String>) -> Skill {
    let id = skill_id(plan.id.as_deref().unwrap_or(&plan.name), taken);
    let schema = plan.input_schema_or_built();
    let mut d = match plan.description.as_deref().filter(|w| !w.trim().is_empty()) {
        Some(what) => what.split_whitespace().collect::<Vec<_>>().join(" "),
        None => format!("Runs the `{}` workflow ({path}).", plan.name),
    };
    if !plan.goals.is_empty() {
        let goals: Vec<String> = plan
            .goals
            .iter()
            .map(|g| {
                let s: String = g.summary.chars().take(120).collect();
                format!("{} — {s}", g.name)
            })
            .collect();
        d = format!("{} Goals: {}.", d.trim_end(), goals.join("; "));
    }
    if d.chars().count() > MAX_DESCRIPTION {
        d = d.chars().take(MAX_DESCRIPTION - 1).collect::<String>() + "…";
    }
    d.push_str(&format!(
        " Send the inputs as a data part, with metadata.skill = \"{id}\". Inputs (JSON Schema): {}",
        Value::Object(schema.clone())
    ));
    Skill {
        examples: examples(&schema),
        id,
        name: plan.name.clone(),
        description: d,
        path: path.to_owned(),
        schema,
    }
}

/// The schema's own `examples` of the inputs object, else one made of each
/// input's default (or its name in angle brackets where it has none).
fn examples(schema: &Map<String, Value>) -> Vec<String> {
    if let Some(Value::Array(own)) = schema.get("examples")
        && !own.is_empty()
    {
        return own.iter().map(Value::to_string).collect();
    }
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return vec!["{}".to_owned()];
    };
    let example: Map<String, Value> = props
        .iter()
        .map(|(name, p)| {
            let v = p
                .get("default")
                .cloned()
                .or_else(|| {
                    p.get("examples")
                        .and_then(Value::as_array)
                        .and_then(|e| e.first().cloned())
                })
                .unwrap_or_else(|| Value::String(format!("<{name}>")));
            (name.clone(), v)
        })
        .collect();
    vec![Value::Object(example).to_string()]
}

/// The agent card of `skills`, reached at `endpoint` (the JSON-RPC URL);
/// `bearer`: tokens are required.
pub fn card(skills: &[Skill], root: &Path, endpoint: &str, bearer: bool) -> AgentCard {
    let folder = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| root.display().to_string());
    let modes = || vec!["application/json".to_owned(), "text/plain".to_owned()];
    let schemas: Map<String, Value> = skills
        .iter()
        .map(|s| (s.id.clone(), Value::Object(s.schema.clone())))
        .collect();
    let skills = skills
        .iter()
        .map(|s| AgentSkill {
            id: s.id.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            tags: vec!["workflow".to_owned()],
            examples: s.examples.clone(),
            input_modes: modes(),
            output_modes: modes(),
            ..AgentSkill::default()
        })
        .collect();
    let interface = |version: &str| AgentInterface {
        url: endpoint.to_owned(),
        protocol_binding: JSONRPC_BINDING.to_owned(),
        tenant: None,
        protocol_version: version.to_owned(),
    };
    let mut card = AgentCard {
        name: format!("agentfile: {folder}"),
        description: format!(
            "The workflows of {folder}, each a skill. Send a message whose metadata.skill names \
             one and whose data part holds its inputs; the task id is the run's session id. An \
             approval or a suspend is input-required: answer on the same task with a data part \
             {{\"approve\": true|false, \"note\"?}} or {{\"event\", \"payload\"?}}."
        ),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        supported_interfaces: vec![
            interface(PROTOCOL_VERSION),
            interface(v0_3::PROTOCOL_VERSION),
        ],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extended_agent_card: Some(false),
            extensions: vec![AgentExtension {
                uri: INPUTS_EXTENSION.to_owned(),
                description: Some("Each skill's inputs as a JSON Schema, by skill id.".to_owned()),
                required: Some(false),
                params: Some(json!({ "skills": schemas })),
            }],
        },
        default_input_modes: modes(),
        default_output_modes: modes(),
        skills,
        // What 0.3 clients read to find the endpoint (1.0 readers drop them).
        url: Some(endpoint.to_owned()),
        preferred_transport: Some(JSONRPC_BINDING.to_owned()),
        protocol_version: Some("0.3.0".to_owned()),
        ..AgentCard::default()
    };
    if bearer {
        card.security_schemes.insert(
            "bearer".to_owned(),
            json!({"httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "A token of the server's AGENTFILE_MCP_TOKEN",
            }}),
        );
        card.security_requirements = vec![json!({"schemes": {"bearer": {"list": []}}})];
    }
    card
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_mcp_tool_names_without_run() {
        let mut taken = HashSet::new();
        assert_eq!(skill_id("repo-report", &mut taken), "repo-report");
        assert_eq!(skill_id("repo report!", &mut taken), "repo_report_");
        assert_eq!(skill_id("repo-report", &mut taken), "repo-report_2");
        let long = "x".repeat(100);
        assert_eq!(skill_id(&long, &mut taken).len(), MAX_ID);
        assert!(skill_id(&long, &mut taken).ends_with("_2"));
    }

    #[test]
    fn examples_come_from_the_schema_or_the_defaults() {
        let own = json!({"type": "object", "examples": [{"topic": "tides"}]});
        assert_eq!(examples(own.as_object().unwrap()), [r#"{"topic":"tides"}"#]);
        let built = json!({"type": "object", "properties": {
            "topic": {"type": "string"}, "tone": {"type": "string", "default": "dry"}}});
        assert_eq!(
            examples(built.as_object().unwrap()),
            [r#"{"topic":"<topic>","tone":"dry"}"#]
        );
    }

    #[test]
    fn the_card_says_bearer_only_with_tokens() {
        let card = |bearer| {
            serde_json::to_value(card(
                &[],
                Path::new("/w/demo"),
                "http://127.0.0.1:1/a2a",
                bearer,
            ))
            .unwrap()
        };
        let c = card(false);
        assert_eq!(c["capabilities"]["streaming"], true);
        assert_eq!(c["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert!(c.get("securitySchemes").is_none());
        let c = card(true);
        assert_eq!(
            c["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
    }
}
