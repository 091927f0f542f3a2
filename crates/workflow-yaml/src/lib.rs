//! The Agentfile spec `workflow.yaml` front end (CONTRACT §10): read the file
//! as YAML 1.2, check it against the published schema and the semantic rules
//! (unique ids, files that exist, inputs that exist when the step starts,
//! artifacts that stay inside the workflow), and lower it into the step graph.
//! `create` and `promote`, which write such workflows, are not here but above
//! the registry (`agentfile_author`).
//!
//! An agent step becomes a sequence of plain nodes, so resume, events,
//! telemetry, budgets and policy apply unchanged:
//!
//! ```text
//! <id>        sequence
//!   read      read_files   the input files, read when the step starts
//!   answer    goal         system: shared/project.md + shared/AGENTS.md + agent
//!                          user:   skill, `---`, the input
//!   produces  write_file   the answer, written to `produces`
//!   gate      approval     with `gate: human-approval`
//! ```
//!
//! A shell step is one `shell` node. Paths are relative to the workflow's
//! folder: the run's root, passed as the `_workflowRoot` input.
//!
//! Real files in the wild break their own schema; `--lenient` turns what a
//! runtime can still interpret (unknown fields, a list-valued `input`,
//! `{placeholder}` text, a missing `specVersion`) into warnings.

mod schema;

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use agentfile_config::Config;
use agentfile_plan::diag::{Diagnostic, FileId, SourceMap, Span};
use agentfile_plan::expr::{self, Part, Template, ValueExpr};
use agentfile_plan::trigger::{self, SourceAt};
use agentfile_plan::{
    AgentDef, ApprovalNode, GoalDef, GoalKind, GoalNode, InputDef, Node, NodeKind,
    PLAN_SCHEMA_VERSION, Plan, PromptSource,
};
use agentfile_syntax::yaml::{self, Doc};

/// The reserved input holding the run's root: the folder a workflow.yaml's
/// relative paths (`input`, `produces`, scripts) resolve against. `run`
/// fills it with the workflow's folder; `create` with the artifact folder.
pub const ROOT_FIELD: &str = "_workflowRoot";

/// Agent, skill and shared files larger than this are refused.
pub const MAX_PROMPT_FILE: u64 = 1 << 20;

/// The variable the goal's user prompt reads the step's input from.
const STEP_INPUT: &str = "step_input";

#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    pub config: Option<&'a Config>,
    /// Report what a runtime can still interpret as warnings, and run it.
    pub lenient: bool,
    /// What describes the JavaScript tools of the agent files it reads (the
    /// registry passes the script engine's; the default describes none).
    pub scripts: &'a dyn agentfile_agent_card::Describe,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            config: None,
            lenient: false,
            scripts: &agentfile_agent_card::NoScripts,
        }
    }
}

/// The project a workflow folder belongs to: the folder holding its
/// `workflows/` parent (`proj/workflows/x` → `proj`), else the workflow's
/// own folder.
pub fn project_root(workflow_dir: &Path) -> PathBuf {
    agentfile_plan::project_of_folder(workflow_dir)
}

/// Whether a step is a shell step: it has `action:` or `script:` (checked
/// against the shell step's schema, so a missing `action` is named as such).
fn is_shell(step: &Value) -> bool {
    step.get("action").is_some() || step.get("script").is_some()
}

/// One problem found, before `--lenient` decides its severity.
struct Finding {
    pointer: String,
    at_key: bool,
    /// One line of a multi-line string: the span narrows to the source line
    /// holding exactly this text.
    line: Option<String>,
    code: &'static str,
    message: String,
    hint: Option<String>,
    /// A runtime can still interpret it: a warning under `--lenient`.
    tolerable: bool,
    warning: bool,
}

impl Finding {
    fn error(pointer: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        Finding {
            pointer: pointer.into(),
            at_key: false,
            line: None,
            code,
            message: message.into(),
            hint: None,
            tolerable: false,
            warning: false,
        }
    }

    fn hint(mut self, h: impl Into<String>) -> Self {
        self.hint = Some(h.into());
        self
    }

    fn tolerable(mut self) -> Self {
        self.tolerable = true;
        self
    }

    fn at_key(mut self) -> Self {
        self.at_key = true;
        self
    }

    fn on_line(mut self, line: Option<&str>) -> Self {
        self.line = line.map(str::to_owned);
        self
    }
}

/// Check a workflow.yaml already in `sources`; the plan when it has no
/// errors.
pub fn analyze(
    sources: &mut SourceMap,
    file: FileId,
    opts: Options<'_>,
) -> (Vec<Diagnostic>, Option<Plan>) {
    let text = sources.file(file).text.clone();
    let path = sources.file(file).path.clone();
    let doc = match yaml::parse(&text, 0) {
        Ok(d) => d,
        Err(e) => return (vec![yaml_error(&text, file, e)], None),
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut fe = Front {
        doc,
        file,
        dir,
        path,
        findings: Vec::new(),
        texts: HashMap::new(),
        sources: std::mem::take(sources),
        agent_diags: Vec::new(),
        cards: HashMap::new(),
        scripts: opts.scripts,
    };
    let plan = fe.lower();
    *sources = std::mem::take(&mut fe.sources);
    let _ = opts.config;
    let mut diags = std::mem::take(&mut fe.agent_diags);
    for f in fe.findings {
        let span = span(
            &text,
            file,
            &fe.doc,
            &f.pointer,
            f.at_key,
            f.line.as_deref(),
        );
        let mut d = if f.warning || (f.tolerable && opts.lenient) {
            let msg = if f.tolerable {
                format!("{} (tolerated: --lenient)", f.message)
            } else {
                f.message
            };
            Diagnostic::warning(f.code, span, msg)
        } else {
            Diagnostic::error(f.code, span, f.message)
        };
        let hint = match (f.hint, f.tolerable && !opts.lenient) {
            (Some(h), true) if h.ends_with('?') => {
                Some(format!("{h} Or pass --lenient to run it as written"))
            }
            (Some(h), true) => Some(format!("{h}; or pass --lenient to run it as written")),
            (None, true) => Some("pass --lenient to run it as written".to_owned()),
            (h, false) => h,
        };
        if let Some(h) = hint {
            d = d.with_hint(h);
        }
        diags.push(d);
    }
    let has_errors = diags.iter().any(Diagnostic::is_error);
    (diags, if has_errors { None } else { plan })
}

/// A YAML error in workflow.yaml words (the parser is shared with
/// WORKFLOW.md front matter), with the bracket left open when the parser
/// stopped inside a flow collection.
fn yaml_error(text: &str, file: FileId, e: yaml::YamlError) -> Diagnostic {
    let message = e.message.replace("the front matter", "the workflow.yaml");
    let hint = if message.contains("more than one YAML document") {
        Some("keep one YAML document in the file (no `---` line between fields)".to_owned())
    } else {
        e.hint
    };
    let mut d = Diagnostic::error(e.code, Span::new(file, e.start, e.end), message.clone());
    if let Some(h) = hint {
        d = d.with_hint(h);
    }
    if message.contains("flow ")
        && let Some((at, open)) = unclosed_bracket(text, e.start)
    {
        let close = if open == '{' { '}' } else { ']' };
        d = d.with_note(
            Span::new(file, at, at + 1),
            format!("this `{open}` has no closing `{close}`"),
        );
    }
    d
}

/// The last `{` or `[` before `until` that is not closed before it,
/// skipping quoted text and comments.
fn unclosed_bracket(text: &str, until: usize) -> Option<(usize, char)> {
    let mut open: Vec<(usize, char)> = Vec::new();
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut prev = '\n';
    for (i, c) in text.get(..until)?.char_indices() {
        if comment {
            comment = c != '\n';
        } else if let Some(q) = quote {
            if c == q {
                quote = None;
            }
        } else {
            match c {
                '"' | '\'' if matches!(prev, ' ' | '\t' | '\n' | '{' | '[' | ',' | ':') => {
                    quote = Some(c);
                }
                '#' if prev.is_whitespace() => comment = true,
                '{' | '[' => open.push((i, c)),
                '}' | ']' => {
                    open.pop();
                }
                _ => {}
            }
        }
        prev = c;
    }
    open.pop()
}

/// The span of the node at `pointer` (its key's, with `at_key`; the source
/// line holding `line` in it, when given and found), cut to its first line.
fn span(
    text: &str,
    file: FileId,
    doc: &Doc,
    pointer: &str,
    at_key: bool,
    line: Option<&str>,
) -> Span {
    let at = doc.at(pointer);
    let (start, end) = match (at_key, at.key) {
        (true, Some(k)) => k,
        _ => (at.start, at.end),
    };
    let end = end.min(text.len()).max(start);
    let start = start.min(end);
    if let Some(want) = line.filter(|w| !w.is_empty()) {
        let mut from = start;
        for l in text[start..end].split('\n') {
            let lead = l.len() - l.trim_start().len();
            if l.trim() == want {
                let s = from + lead;
                return Span::new(file, s, s + want.len());
            }
            from += l.len() + 1;
        }
    }
    let end = text
        .get(start..end)
        .and_then(|s| s.find('\n'))
        .map_or(end, |i| start + i);
    Span::new(file, start, end)
}

struct Front<'a> {
    doc: Doc,
    /// The workflow.yaml itself.
    file: FileId,
    /// The workflow's folder: every relative path starts here.
    dir: PathBuf,
    path: PathBuf,
    findings: Vec<Finding>,
    /// Prompt files read, by path relative to `dir`.
    texts: HashMap<String, Option<String>>,
    /// The run's sources, lent while lowering: agent files are added to it.
    sources: SourceMap,
    /// Diagnostics of agent files, located in them.
    agent_diags: Vec<Diagnostic>,
    /// Agent files loaded, by path relative to `dir`.
    cards: HashMap<String, Option<agentfile_plan::agent::AgentCard>>,
    /// What describes the agent files' JavaScript tools.
    scripts: &'a dyn agentfile_agent_card::Describe,
}

/// Artifact paths (tidy; a folder ends in `/`) and the step that writes
/// each, looked up by hash: a 10,000-step file stays linear.
#[derive(Default)]
struct Artifacts {
    order: Vec<(String, String)>,
    by_path: HashMap<String, String>,
}

impl Artifacts {
    /// Record `path` for `step`; the step that already has it, if any.
    fn insert(&mut self, path: String, step: &str) -> Option<String> {
        if let Some(other) = self.by_path.get(&path) {
            return Some(other.clone());
        }
        self.by_path.insert(path.clone(), step.to_owned());
        self.order.push((path, step.to_owned()));
        None
    }

    /// The step whose artifact is `bare` (no trailing `/`) or a folder
    /// holding it.
    fn writer(&self, bare: &str) -> Option<&str> {
        if let Some(s) = self
            .by_path
            .get(bare)
            .or_else(|| self.by_path.get(&format!("{bare}/")))
        {
            return Some(s);
        }
        bare.match_indices('/')
            .find_map(|(i, _)| self.by_path.get(&bare[..=i]))
            .map(String::as_str)
    }

    /// The step whose artifact is exactly `bare` (file or folder).
    fn exact(&self, bare: &str) -> Option<&str> {
        self.by_path
            .get(bare)
            .or_else(|| self.by_path.get(&format!("{bare}/")))
            .map(String::as_str)
    }
}

/// A step input line, understood.
enum Line {
    Var(String),
    Files(Vec<String>),
    Text(String),
}

fn str_at<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// `{word}` placeholder text, as the spec's own examples write
/// (`workflows/{workflow_name}`).
fn placeholder(s: &str) -> Option<&str> {
    let open = s.find('{')?;
    let close = open + s[open..].find('}')?;
    let inner = &s[open + 1..close];
    (!inner.is_empty()
        && inner
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
    .then_some(&s[open..=close])
}

/// Why a path cannot name a file of the workflow, if it cannot.
fn path_problem(p: &str) -> Option<&'static str> {
    if p.trim().is_empty() {
        return Some("the path is empty");
    }
    let path = Path::new(p);
    if path.is_absolute() || p.starts_with('~') {
        return Some("the path must be relative to the workflow's folder");
    }
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Some("the path must not leave the workflow's folder (`..`)");
    }
    None
}

/// `outputs/./a.md` → `outputs/a.md`; a trailing `/` kept.
fn tidy(p: &str) -> String {
    let folder = p.ends_with('/');
    let parts: Vec<&str> = p
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let mut out = parts.join("/");
    if folder && !out.is_empty() {
        out.push('/');
    }
    out
}

/// `$` written as `$$`, so prompt text reaches the model as written.
fn literal(s: &str) -> String {
    s.replace('$', "$$")
}

impl Front<'_> {
    fn push(&mut self, f: Finding) {
        self.findings.push(f);
    }

    /// The line and column where the node at `pointer` starts.
    fn line_col(&self, pointer: &str) -> (u32, u32) {
        let start = self.doc.at(pointer).start;
        self.sources.file(self.file).line_col(start as u32)
    }

    fn lower(&mut self) -> Option<Plan> {
        let root = self.doc.value.clone();
        if !self.check_root(&root) {
            return None;
        }
        // A schedule trigger's `cron`, `timezone` and policy (CONTRACT §15)
        // are checked by `trigger` below, not refused as unknown fields.
        let trigger = root.get("trigger");
        let schedule = trigger.is_some_and(|t| str_at(t, "type") == Some("schedule"));
        let mut view = std::borrow::Cow::Borrowed(&*root);
        if schedule
            && let Some(t) = view
                .to_mut()
                .get_mut("trigger")
                .and_then(Value::as_object_mut)
        {
            t.retain(|k, _| !trigger::YAML_SCHEDULE_FIELDS.contains(&k.as_str()));
        }
        for v in schema::check(&view) {
            self.push(v);
        }
        let mut triggers = Vec::new();
        if schedule && let Some(t) = trigger {
            let mut problems = Vec::new();
            let decl = trigger::decode_yaml_schedule(t, &mut problems);
            for p in problems {
                let mut f = Finding::error(format!("/trigger{}", p.pointer), p.code, p.message);
                f.at_key = p.at_key;
                f.hint = p.hint;
                self.push(f);
            }
            if let Some(mut d) = decl {
                let (line, column) = self.line_col("/trigger");
                d.at = Some(SourceAt {
                    file: self.path.display().to_string(),
                    line,
                    column,
                });
                triggers.push(d);
            }
        }
        let name = str_at(&root, "name")
            .map(str::to_owned)
            .or_else(|| {
                self.dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "workflow".to_owned());
        let input_var = self.input_var(&root);
        let (agents, goals, nodes) = self.lower_steps(&root, input_var.as_deref());
        let description = str_at(&root, "description").map(|d| d.trim().to_owned());
        agentfile_plan::trigger::number(&name, &mut triggers);
        let inputs: Vec<InputDef> = input_var
            .iter()
            .map(|v| InputDef {
                name: v.clone(),
                default: None,
                required: true,
                env: Some(v.clone()),
            })
            .collect();
        let input_schema = input_schema(&root, input_var.as_deref());
        let execution = root
            .get("execution")
            .and_then(|e| e.get("preferred"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        Some(
            Plan {
                schema_version: PLAN_SCHEMA_VERSION,
                name: name.clone(),
                id: Some(name),
                description,
                format: "workflow-yaml".into(),
                path: self.path.display().to_string(),
                inputs,
                agents,
                goals,
                steps: Vec::new(),
                security: None,
                graph: Node::new("", NodeKind::Sequence { nodes, start: None }),
                timeout_ms: None,
                max_steps: None,
                input_schema,
                output_schema: None,
                result: None,
                fingerprint: String::new(),
                files: Default::default(),
                execution,
                protected: vec!["scripts/".to_owned()],
                output_names: Vec::new(),
                unmapped: Default::default(),
                root: agentfile_plan::RunRoot::WorkflowFolder {
                    input: ROOT_FIELD.to_owned(),
                },
                declared: None,
                triggers,
                package: None,
                version: str_at(&root, "version").map(|v| v.trim().to_owned()),
            }
            .sealed(),
        )
    }

    /// The file holds a mapping of fields: else nothing more is checked.
    fn check_root(&mut self, root: &Value) -> bool {
        if root.is_null() {
            self.push(
                Finding::error("", "schema", "the workflow.yaml is empty").hint(
                    "write the workflow's fields: specVersion, name, version, description, trigger, steps",
                ),
            );
            return false;
        }
        if !root.is_object() {
            self.push(
                Finding::error("", "schema", "a workflow.yaml must be a mapping of fields (name: …, steps: …)")
                    .hint("write `key: value` lines: specVersion, name, version, description, trigger, steps"),
            );
            return false;
        }
        true
    }

    /// The trigger's `input_var`: the environment variable the input is
    /// also read from, checked to be a variable's name and not a secret's.
    fn input_var(&mut self, root: &Value) -> Option<String> {
        let input_var = root
            .get("trigger")
            .and_then(|t| t.get("input_var"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(v) = &input_var {
            if !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                || v.starts_with(|c: char| c.is_ascii_digit())
                || v.is_empty()
            {
                self.push(
                    Finding::error(
                        "/trigger/input_var",
                        "schema",
                        format!("`{v}` is not an environment variable name"),
                    )
                    .hint("use letters, digits and `_`, such as `AGENT_INPUT`"),
                );
            } else if agentfile_config::secret_names::secret_shaped(v) {
                let mut f = Finding::error(
                    "/trigger/input_var",
                    "secret-input-var",
                    format!("`{v}` is named like a secret; agentfile will not read it from the environment"),
                )
                .hint(format!("pass the input with --input {v}=…, or rename the variable"));
                f.warning = true;
                self.push(f);
            }
        }
        input_var
    }

    /// Each step lowered to its node (a shell step, else an agent step with
    /// its agent and goal), in order; a duplicate id or artifact path is an
    /// error.
    fn lower_steps(
        &mut self,
        root: &Value,
        input_var: Option<&str>,
    ) -> (Vec<AgentDef>, Vec<GoalDef>, Vec<Node>) {
        let shared = self.shared();
        let mut agents: Vec<AgentDef> = Vec::new();
        let mut goals: Vec<GoalDef> = Vec::new();
        let mut nodes: Vec<Node> = Vec::new();
        let mut ids: HashMap<String, usize> = HashMap::new();
        // Artifacts produced so far, and by every step.
        let mut produced = Artifacts::default();
        let mut all_produces = Artifacts::default();
        if let Some(Value::Array(steps)) = root.get("steps") {
            for s in steps {
                if let (Some(p), Some(id)) = (str_at(s, "produces"), str_at(s, "id")) {
                    all_produces.insert(tidy(p), id);
                }
            }
        }
        if let Some(Value::Array(steps)) = root.get("steps") {
            for (i, step) in steps.iter().enumerate() {
                let ptr = format!("/steps/{i}");
                if !step.is_object() {
                    continue;
                }
                let Some(id) = str_at(step, "id") else {
                    continue;
                };
                if let Some(first) = ids.get(id) {
                    self.push(
                        Finding::error(
                            format!("{ptr}/id"),
                            "duplicate-id",
                            format!(
                                "two steps have the id `{id}` (the first is step {})",
                                first + 1
                            ),
                        )
                        .hint("give each step its own id"),
                    );
                    continue;
                }
                ids.insert(id.to_owned(), i);
                let node = if is_shell(step) {
                    self.shell_step(step, &ptr, id, input_var)
                } else {
                    self.agent_step(
                        step,
                        &ptr,
                        id,
                        input_var,
                        &shared,
                        &produced,
                        &all_produces,
                        &mut agents,
                        &mut goals,
                    )
                };
                if let Some(p) = str_at(step, "produces") {
                    let p = tidy(p);
                    if let Some(other) = produced.insert(p.clone(), id) {
                        self.push(
                            Finding::error(
                                format!("{ptr}/produces"),
                                "duplicate-produces",
                                format!("step `{other}` already produces `{p}`"),
                            )
                            .hint("give each step its own artifact path"),
                        );
                    }
                }
                if let Some(n) = node {
                    nodes.push(n);
                }
            }
        }
        (agents, goals, nodes)
    }

    /// `shared/project.md` and `shared/AGENTS.md`, found upward from the
    /// workflow (each when present), joined.
    fn shared(&mut self) -> String {
        let mut parts = Vec::new();
        for name in ["project.md", "AGENTS.md"] {
            let Ok(abs) = self.dir.canonicalize() else {
                break;
            };
            let found = abs
                .ancestors()
                .take(8)
                .map(|d| d.join("shared").join(name))
                .find(|p| p.is_file());
            if let Some(p) = found
                && let Some(text) = read_prompt(&p)
            {
                parts.push(text.trim().to_owned());
            }
        }
        parts.join("\n\n")
    }

    /// A prompt file named at `pointer`, relative to the workflow: its text,
    /// or `None` after reporting why not.
    /// An `agent:` that is an agent file, loaded once (`text` is its content).
    fn agent_card(&mut self, rel: &str, text: String) -> Option<agentfile_plan::agent::AgentCard> {
        if let Some(c) = self.cards.get(rel) {
            return c.clone();
        }
        let file = self.sources.add(self.dir.join(rel), text);
        let card = agentfile_agent_card::load(
            &mut self.sources,
            self.scripts,
            file,
            rel,
            &mut self.agent_diags,
        );
        self.cards.insert(rel.to_owned(), card.clone());
        card
    }

    fn prompt_file(&mut self, pointer: &str, what: &str, rel: &str) -> Option<String> {
        if let Some(p) = path_problem(rel) {
            self.push(
                Finding::error(pointer, "path-outside", format!("`{rel}`: {p}")).hint(format!(
                    "keep the {what} file in the workflow's folder (such as `{what}s/<name>.md`) and name it relative to it"
                )),
            );
            return None;
        }
        if let Some(ph) = placeholder(rel) {
            self.push(
                Finding::error(
                    pointer,
                    "placeholder",
                    format!("`{rel}` holds the placeholder `{ph}`, which agentfile does not fill"),
                )
                .hint("write the file's real path"),
            );
            return None;
        }
        let key = tidy(rel);
        if let Some(t) = self.texts.get(&key) {
            return t.clone();
        }
        let abs = self.dir.join(&key);
        let text = if abs.is_file() {
            match std::fs::metadata(&abs) {
                Ok(m) if m.len() > MAX_PROMPT_FILE => {
                    self.push(
                        Finding::error(
                            pointer,
                            "unreadable-file",
                            format!("the {what} file `{rel}` is {} bytes; prompt files are limited to {MAX_PROMPT_FILE}", m.len()),
                        )
                        .hint("shorten it; move reference material into files a step reads as `input`"),
                    );
                    None
                }
                _ => match std::fs::read(&abs).map(String::from_utf8) {
                    Ok(Ok(t)) => Some(t),
                    Ok(Err(_)) => {
                        self.push(
                            Finding::error(
                                pointer,
                                "unreadable-file",
                                format!("the {what} file `{rel}` is not UTF-8 text"),
                            )
                            .hint("save it as UTF-8"),
                        );
                        None
                    }
                    Err(e) => {
                        self.push(Finding::error(
                            pointer,
                            "unreadable-file",
                            format!("cannot read the {what} file `{rel}`: {e}"),
                        ));
                        None
                    }
                },
            }
        } else {
            let folder = Path::new(&key).parent().unwrap_or(Path::new(""));
            let names = files_in(&self.dir.join(folder));
            let shown: Vec<String> = names
                .iter()
                .map(|n| {
                    if folder.as_os_str().is_empty() {
                        n.clone()
                    } else {
                        format!("{}/{n}", folder.display())
                    }
                })
                .collect();
            let hint = match agentfile_plan::diag::suggest(&key, shown.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `{s}`?"),
                None if shown.is_empty() => format!(
                    "create it (paths are relative to the workflow's folder, {})",
                    self.dir.display()
                ),
                None => format!(
                    "create it, or name one that exists: {}",
                    shown.iter().take(8).cloned().collect::<Vec<_>>().join(", ")
                ),
            };
            self.push(
                Finding::error(
                    pointer,
                    "missing-file",
                    format!("the {what} file `{rel}` does not exist"),
                )
                .hint(hint),
            );
            None
        };
        self.texts.insert(key, text.clone());
        text
    }

    #[allow(clippy::too_many_arguments)]
    fn agent_step(
        &mut self,
        step: &Value,
        ptr: &str,
        id: &str,
        input_var: Option<&str>,
        shared: &str,
        produced: &Artifacts,
        all_produces: &Artifacts,
        agents: &mut Vec<AgentDef>,
        goals: &mut Vec<GoalDef>,
    ) -> Option<Node> {
        let agent = str_at(step, "agent").and_then(|a| {
            let text = self.prompt_file(&format!("{ptr}/agent"), "agent", a)?;
            Some((tidy(a), text))
        });
        let skill =
            str_at(step, "skill").map(|s| self.prompt_file(&format!("{ptr}/skill"), "skill", s));
        let lines = self.input_lines(step, ptr, input_var, produced, all_produces);
        let produces = str_at(step, "produces").and_then(|p| self.produces(ptr, p));
        let gate = str_at(step, "gate") == Some("human-approval");
        let (Some((agent_path, agent_text)), Some(lines), Some(produces)) =
            (agent, lines, produces)
        else {
            return None;
        };
        let skill = match skill {
            Some(None) => return None,
            Some(Some(t)) => Some(t),
            None => None,
        };
        let card = if agentfile_agent_card::is_agent_file(Path::new(&agent_path)) {
            Some(self.agent_card(&agent_path, agent_text.clone())?)
        } else {
            None
        };
        if !agents.iter().any(|a| a.name == agent_path) {
            agents.push(agent_def(&agent_path, &agent_text, card, shared));
        }
        let name = str_at(step, "name").unwrap_or(id).trim().to_owned();
        goals.push(goal_def(
            step,
            id,
            &name,
            skill.as_deref(),
            agent_path,
            &produces,
        ));
        let (mut children, input) = step_input(lines)?;
        let mut goal_node = Node::new(
            "answer",
            NodeKind::Goal(GoalNode {
                goal: id.to_owned(),
                context: Vec::new(),
                inputs: Some(ValueExpr::Object(BTreeMap::from([(
                    STEP_INPUT.to_owned(),
                    ValueExpr::Template(input),
                )]))),
            }),
        );
        goal_node.name = Some(name.clone());
        children.push(goal_node);
        let content = Some(path_template("$steps.answer")?);
        // The run's outputs name each step's artifact.
        let mut write = Node::new(
            "produces",
            NodeKind::WriteFile {
                path: produces.clone(),
                content,
            },
        );
        write.publish = Some(id.to_owned());
        children.push(write);
        if gate {
            children.push(gate_node(&name, &produces));
        }
        let mut n = Node::new(
            id,
            NodeKind::Sequence {
                nodes: children,
                start: None,
            },
        );
        n.name = Some(name);
        Some(n)
    }

    /// The step's `input`: `$VAR`, file paths (one per line), or under
    /// `--lenient` a list and plain text. `None` after reporting a problem.
    fn input_lines(
        &mut self,
        step: &Value,
        ptr: &str,
        input_var: Option<&str>,
        produced: &Artifacts,
        all_produces: &Artifacts,
    ) -> Option<Vec<Line>> {
        let raw: Vec<(String, String)> = match step.get("input") {
            Some(Value::String(s)) => s
                .lines()
                .map(|l| (format!("{ptr}/input"), l.trim().to_owned()))
                .filter(|(_, l)| !l.is_empty())
                .collect(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    Some((format!("{ptr}/input/{i}"), v.as_str()?.trim().to_owned()))
                })
                .filter(|(_, l)| !l.is_empty())
                .collect(),
            // Reported by the schema check.
            _ => return None,
        };
        if raw.is_empty() {
            self.push(
                Finding::error(
                    format!("{ptr}/input"),
                    "schema",
                    "the step's `input` is empty",
                )
                .hint("give `$VAR` (the trigger's input_var) or the path of a file"),
            );
            return None;
        }
        // Lines of a string: each finding points at its own source line.
        let in_string = step.get("input").is_some_and(Value::is_string);
        let mut out: Vec<Line> = Vec::new();
        let mut ok = true;
        for (at, line) in raw {
            let needle = in_string.then_some(line.as_str());
            if let Some(v) = line.strip_prefix('$') {
                let v = v.trim_start_matches('{').trim_end_matches('}');
                match input_var {
                    Some(iv) if iv == v => out.push(Line::Var(v.to_owned())),
                    _ => {
                        ok = false;
                        let hint = match input_var {
                            Some(iv) => format!(
                                "the trigger provides `${iv}`; earlier steps' artifacts are read by path"
                            ),
                            None => format!("declare it: `trigger: {{ type: …, input_var: {v} }}`"),
                        };
                        self.push(
                            Finding::error(
                                at,
                                "unknown-variable",
                                format!("`${v}` is not the trigger's input variable"),
                            )
                            .hint(hint)
                            .on_line(needle),
                        );
                    }
                }
                continue;
            }
            let file = line.trim_start_matches('@');
            if let Some(ph) = placeholder(file) {
                self.push(
                    Finding::error(
                        at,
                        "placeholder",
                        format!(
                            "`{line}` holds the placeholder `{ph}`, which agentfile does not fill"
                        ),
                    )
                    .hint("name the file, or `$VAR` for the trigger's input")
                    .tolerable()
                    .on_line(needle),
                );
                out.push(Line::Text(line));
                continue;
            }
            if let Some(p) = path_problem(file) {
                ok = false;
                self.push(
                    Finding::error(at, "path-outside", format!("`{file}`: {p}"))
                        .hint("copy the file into the workflow's folder and name it relative to it, or use `$VAR` for the trigger's input")
                        .on_line(needle),
                );
                continue;
            }
            let t = tidy(file);
            let bare = t.trim_end_matches('/');
            if produced.writer(bare).is_none() {
                if let Some(later) = all_produces.exact(bare) {
                    ok = false;
                    self.push(
                        Finding::error(
                            at,
                            "input-order",
                            format!(
                                "`{file}` is produced by step `{later}`, which runs after this one"
                            ),
                        )
                        .hint("move this step after it, or read another file")
                        .on_line(needle),
                    );
                    continue;
                }
                if !self.dir.join(bare).exists() {
                    ok = false;
                    let earlier: Vec<&str> =
                        produced.order.iter().map(|(p, _)| p.as_str()).collect();
                    let hint = match agentfile_plan::diag::suggest(&t, earlier.iter().copied()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None if earlier.is_empty() => format!(
                            "name a file in the workflow's folder, or `${}` for the trigger's input",
                            input_var.unwrap_or("VAR")
                        ),
                        None => format!("earlier steps produce: {}", earlier.join(", ")),
                    };
                    self.push(
                        Finding::error(
                            at,
                            "unknown-input",
                            format!("`{file}` is neither produced by an earlier step nor a file in the workflow's folder"),
                        )
                        .hint(hint)
                        .on_line(needle),
                    );
                    continue;
                }
            }
            match out.last_mut() {
                Some(Line::Files(fs)) => fs.push(t),
                _ => out.push(Line::Files(vec![t])),
            }
        }
        ok.then_some(out)
    }

    /// A step's `produces`, checked: the tidy path, or `None` after saying
    /// why not.
    fn produces(&mut self, ptr: &str, p: &str) -> Option<String> {
        let at = format!("{ptr}/produces");
        if let Some(problem) = path_problem(p) {
            self.push(
                Finding::error(at, "path-outside", format!("`{p}`: {problem}")).hint(
                    "write artifacts inside the workflow's folder, such as `outputs/report.md`",
                ),
            );
            return None;
        }
        if let Some(ph) = placeholder(p) {
            self.push(
                Finding::error(
                    at.clone(),
                    "placeholder",
                    format!("`{p}` holds the placeholder `{ph}`, which agentfile does not fill"),
                )
                .hint("write the artifact's real path, such as `outputs/report.md`")
                .tolerable(),
            );
        }
        let t = tidy(p);
        let first = t.split('/').next().unwrap_or("");
        if first == "scripts" || t == "workflow.yaml" || t == "workflow_status.json" {
            self.push(
                Finding::error(
                    at,
                    "protected-path",
                    format!("a step may not write `{p}`: the workflow's scripts and definition are not writable during a run"),
                )
                .hint("write artifacts under `outputs/`"),
            );
            return None;
        }
        Some(t)
    }

    fn shell_step(
        &mut self,
        step: &Value,
        ptr: &str,
        id: &str,
        input_var: Option<&str>,
    ) -> Option<Node> {
        let script = step.get("script");
        let bash = script.and_then(|s| str_at(s, "bash"));
        let pwsh = script.and_then(|s| str_at(s, "pwsh"));
        let (key, rel, interpreter) = match (bash, pwsh) {
            (Some(b), _) => ("bash", b, None),
            (None, Some(p)) => ("pwsh", p, Some("pwsh".to_owned())),
            (None, None) => {
                if script.is_some_and(Value::is_object) {
                    self.push(
                        Finding::error(
                            format!("{ptr}/script"),
                            "missing-script",
                            "the shell step names no script",
                        )
                        .hint("add `bash: scripts/<name>.sh` (and `pwsh:` for Windows)"),
                    );
                }
                return None;
            }
        };
        let at = format!("{ptr}/script/{key}");
        if let Some(p) = path_problem(rel) {
            self.push(
                Finding::error(at, "path-outside", format!("`{rel}`: {p}"))
                    .hint("keep the script in the workflow's scripts/ folder and name it relative to the workflow, such as `scripts/run.sh`"),
            );
            return None;
        }
        let t = tidy(rel);
        if t.starts_with("scripts/ide/") {
            self.push(
                Finding::error(
                    at,
                    "ide-script",
                    format!("`{rel}` is in scripts/ide/, which holds instructions for IDE agents; agentfile never runs those files"),
                )
                .hint("put the script the runtime should run in scripts/ (or scripts/cli/) and name it here"),
            );
            return None;
        }
        // Also check the other script exists, when both are named.
        for (k, other) in [("bash", bash), ("pwsh", pwsh)] {
            if let Some(o) = other
                && path_problem(o).is_none()
                && !self.dir.join(tidy(o)).is_file()
            {
                self.push(
                    Finding::error(
                        format!("{ptr}/script/{k}"),
                        "missing-file",
                        format!("the script `{o}` does not exist"),
                    )
                    .hint(format!(
                        "create it (paths are relative to the workflow's folder, {})",
                        self.dir.display()
                    )),
                );
                if k == key {
                    return None;
                }
            }
        }
        let env = input_var
            .and_then(|v| Some((v.to_owned(), path_template(&format!("$input.{v}"))?)))
            .into_iter()
            .collect();
        let mut n = Node::new(
            id,
            NodeKind::Shell {
                script: t,
                args: Vec::new(),
                interpreter,
                env,
            },
        );
        n.name = str_at(step, "name").map(|s| s.trim().to_owned());
        Some(n)
    }
}

/// The persona of an agent step's agent file (its card's persona, else its
/// text), after the workflow's shared context.
fn agent_def(
    agent_path: &str,
    agent_text: &str,
    card: Option<agentfile_plan::agent::AgentCard>,
    shared: &str,
) -> AgentDef {
    let agent_text = match &card {
        Some(c) => c.persona(),
        None => agent_text.trim().to_owned(),
    };
    let persona = if shared.is_empty() {
        agent_text
    } else {
        format!("{shared}\n\n{agent_text}")
    };
    AgentDef {
        name: agent_path.to_owned(),
        source: PromptSource::File {
            path: agent_path.to_owned(),
        },
        prompt: literal(&persona),
        profile: None,
        outputs: Vec::new(),
        reads: Vec::new(),
        card: card.map(Box::new),
    }
}

/// An agent step's goal: its skill's text (if any) above the step's input.
fn goal_def(
    step: &Value,
    id: &str,
    name: &str,
    skill: Option<&str>,
    agent_path: String,
    produces: &str,
) -> GoalDef {
    let outcome = match skill {
        Some(s) => format!("{}\n\n---\n\n${STEP_INPUT}", literal(s.trim())),
        None => format!("${STEP_INPUT}"),
    };
    GoalDef {
        name: id.to_owned(),
        kind: GoalKind::Goal,
        outcome,
        summary: name.to_owned(),
        source: match str_at(step, "skill") {
            Some(s) => PromptSource::File { path: tidy(s) },
            None => PromptSource::Inline,
        },
        agents: vec![agent_path],
        outputs: Vec::new(),
        reads: vec![STEP_INPUT.to_owned()],
        within: None,
        supervision: None,
        brief: str_at(step, "goal").map(|g| g.trim().to_owned()),
        produces: Some(produces.to_owned()),
    }
}

/// An agent step's input: each `$VAR` from the inputs, each run of file
/// lines from a read node (returned, in order), in the order written; several
/// parts are joined by blank lines.
fn step_input(lines: Vec<Line>) -> Option<(Vec<Node>, Template)> {
    let mut children = Vec::new();
    let mut parts: Vec<Template> = Vec::new();
    let mut reads = 0;
    for line in lines {
        match line {
            Line::Var(v) => parts.push(path_template(&format!("$input.{v}"))?),
            Line::Text(t) => parts.push(Template {
                parts: vec![Part::Text(t)],
            }),
            Line::Files(paths) => {
                reads += 1;
                let rid = if reads == 1 {
                    "read".to_owned()
                } else {
                    format!("read-{reads}")
                };
                parts.push(path_template(&format!("$steps.{rid}"))?);
                children.push(Node::new(rid, NodeKind::ReadFiles { paths }));
            }
        }
    }
    let input = match parts.len() {
        1 => parts.pop().unwrap_or(Template { parts: Vec::new() }),
        _ => {
            let mut all = Vec::new();
            for (i, t) in parts.into_iter().enumerate() {
                if i > 0 {
                    all.push(Part::Text("\n\n".to_owned()));
                }
                all.extend(t.parts);
            }
            Template { parts: all }
        }
    };
    Some((children, input))
}

/// The approval after a `gate: human-approval` step.
fn gate_node(name: &str, produces: &str) -> Node {
    Node::new(
        "gate",
        NodeKind::Approval(ApprovalNode {
            prompt: Template {
                parts: vec![Part::Text(format!(
                    "Step `{name}` wrote `{produces}`. Approve to go on, reject to stop the run."
                ))],
            },
            on_approve: None,
            on_reject: None,
            timeout_ms: None,
            on_timeout: Default::default(),
        }),
    )
}

/// `$steps.x` as a template of one expression.
fn path_template(path: &str) -> Option<Template> {
    let e = expr::parse(path).ok()?;
    Some(Template {
        parts: vec![Part::Expr(e)],
    })
}

/// File names in a folder, sorted (for did-you-mean hints).
fn files_in(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .take(200)
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn read_prompt(p: &Path) -> Option<String> {
    let m = std::fs::metadata(p).ok()?;
    if !m.is_file() || m.len() > MAX_PROMPT_FILE {
        return None;
    }
    String::from_utf8(std::fs::read(p).ok()?).ok()
}

/// The plan's `inputs` schema: the trigger's one string input, if any.
fn input_schema(root: &Value, input_var: Option<&str>) -> Option<Value> {
    input_var.map(|v| {
            let kind = str_at(root.get("trigger").unwrap_or(&Value::Null), "type").unwrap_or("");
            json!({
                "type": "object",
                "properties": {
                    v: {
                        "type": "string",
                        "description": format!("The workflow's input ({kind} trigger; also read from the environment variable {v})"),
                    }
                },
                "required": [v],
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_and_paths() {
        assert_eq!(
            placeholder("workflows/{workflow_name}/x"),
            Some("{workflow_name}")
        );
        assert_eq!(placeholder("a {b c} d"), None);
        assert_eq!(placeholder("plain"), None);
        assert!(path_problem("../x").is_some());
        assert!(path_problem("/etc/x").is_some());
        assert!(path_problem("outputs/a.md").is_none());
        assert_eq!(tidy("./outputs//a.md"), "outputs/a.md");
        assert_eq!(tidy("outputs/04-agents/"), "outputs/04-agents/");
        assert!(agentfile_config::secret_names::secret_shaped(
            "OPENAI_API_KEY"
        ));
        assert!(agentfile_config::secret_names::secret_shaped(
            "GITHUB_TOKEN"
        ));
        assert!(agentfile_config::secret_names::secret_shaped("APIKEY"));
        assert!(agentfile_config::secret_names::secret_shaped("db_password"));
        assert!(!agentfile_config::secret_names::secret_shaped("INPUT_PATH"));
        assert!(!agentfile_config::secret_names::secret_shaped(
            "AUTHOR_NAME"
        ));
        assert!(!agentfile_config::secret_names::secret_shaped("KEYWORDS"));
        assert!(!agentfile_config::secret_names::secret_shaped(
            "WORKFLOW_REQUEST"
        ));
        assert_eq!(
            project_root(Path::new("/p/workflows/x")),
            PathBuf::from("/p")
        );
        assert_eq!(project_root(Path::new("/p/x")), PathBuf::from("/p/x"));
    }

    /// A workflow.yaml with `trigger`, analyzed (its agent file need not
    /// exist for the trigger to be checked).
    fn with_trigger(trigger: &str) -> (Vec<Diagnostic>, Option<Plan>, SourceMap) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("agentfile-wy-trigger-{}-{n}", std::process::id()));
        std::fs::create_dir_all(dir.join("agents")).unwrap();
        std::fs::write(dir.join("agents/w.md"), "You write.").unwrap();
        let text = format!(
            "specVersion: \"1.0\"\nname: nightly\nversion: 1.0.0\ndescription: d\ntrigger:\n{trigger}steps:\n  - id: a\n    name: A\n    agent: agents/w.md\n    input: $IN\n    goal: g\n    produces: outputs/a.md\n"
        );
        let mut sources = SourceMap::default();
        let file = sources.add(dir.join("workflow.yaml"), text);
        let (d, p) = analyze(&mut sources, file, Options::default());
        (d, p, sources)
    }

    #[test]
    fn a_schedule_trigger_is_declared_on_the_plan() {
        let (d, plan, _) = with_trigger(
            "  type: schedule\n  cron: \"*/5 * * * *\"\n  timezone: Europe/Paris\n  max_runs_per_day: 10\n  input_var: IN\n",
        );
        assert!(d.is_empty(), "{d:?}");
        let plan = plan.unwrap();
        let t = &plan.triggers[0];
        assert_eq!(t.id, "nightly#0");
        let s = t.schedule.as_ref().unwrap();
        assert_eq!(
            (s.cron.as_str(), s.timezone.as_str()),
            ("*/5 * * * *", "Europe/Paris")
        );
        assert_eq!(t.policy.max_runs_per_day, Some(10));
        assert_eq!(t.at.as_ref().map(|a| a.line), Some(6));
    }

    #[test]
    fn other_trigger_types_declare_nothing_and_keep_their_checks() {
        let (d, plan, _) = with_trigger("  type: command\n  input_var: IN\n");
        assert!(d.is_empty(), "{d:?}");
        assert!(plan.unwrap().triggers.is_empty());
        // `cron` beside another type is still an unknown field.
        let (d, _, _) = with_trigger("  type: command\n  cron: \"@daily\"\n  input_var: IN\n");
        assert_eq!(d[0].code, "unknown-field");
        // A schedule with no cron runs when asked, as before.
        let (d, plan, _) = with_trigger("  type: schedule\n  input_var: IN\n");
        assert!(d.is_empty(), "{d:?}");
        assert!(plan.unwrap().triggers.is_empty());
    }

    #[test]
    fn a_bad_cron_or_zone_is_an_error_at_its_field() {
        let (d, plan, sources) = with_trigger(
            "  type: schedule\n  cron: \"0 7 * * *\"\n  timezone: Nowhere/City\n  input_var: IN\n",
        );
        assert!(plan.is_none());
        assert_eq!(d[0].code, "bad-schedule");
        assert!(d[0].message.contains("Nowhere/City"), "{}", d[0].message);
        assert_eq!(sources.snippet(d[0].span.unwrap()), "Nowhere/City");
        let (d, _, sources) =
            with_trigger("  type: schedule\n  cron: \"0 7 * *\"\n  input_var: IN\n");
        assert_eq!(d[0].code, "bad-schedule");
        assert!(d[0].message.contains("has 4 fields"), "{}", d[0].message);
        assert_eq!(sources.snippet(d[0].span.unwrap()), "\"0 7 * *\"");
    }

    #[test]
    fn the_bracket_left_open() {
        let t = "a: { b: 1\nc: [ \"x]\", 'y}' ] # {\nd: 2\n";
        assert_eq!(unclosed_bracket(t, t.len()), Some((3, '{')));
        assert_eq!(unclosed_bracket("a: [1, {b: 2}]\n", 15), None);
    }
}
