//! WORKFLOW.md (AIP-15, `agentworkflow/v1`): front matter read as YAML 1.2,
//! checked against the published JSON Schema and the semantic rules of
//! CONTRACT §9, and lowered into the step graph. A front end beside the others:
//! it uses none of them (YAML with spans, schema wording and agent cards come
//! from `agentfile_syntax`) and runs nothing.
//!
//! Every problem is reported at once, each at the YAML node at fault: schema
//! errors at the pointer the validator names, graph and scope errors at the
//! scalar that holds the bad route or expression. The lowering is tolerant, so
//! a file with schema errors still gets its semantic ones.

pub mod schema;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use agentfile_config::Config;
use agentfile_plan::diag::{Diagnostic, FileId, SourceMap, Span};
use agentfile_plan::expr::{self, Expr, Template, ValueExpr};
use agentfile_plan::tool::{Tool, exposed_name};
use agentfile_plan::trigger::{self, RoutineSource, SourceAt, TriggerDecl, TriggerKind};
pub use agentfile_plan::values::{coerce, typed_inputs};
use agentfile_plan::{
    ApprovalClass, ApprovalNode, Arm, Backoff, FileContract, FileEntry, GoalDef, GoalKind,
    GoalNode, InputDef, Limit, LoopUntil, Next, Node, NodeKind, OnTimeout, PLAN_SCHEMA_VERSION,
    Plan, PromptSource, Retry,
};
use agentfile_syntax::yaml::{self, Doc, segment};

/// Sub-workflows nested deeper than this are refused.
pub const MAX_NESTING: usize = 16;

/// Steps a WORKFLOW.md may hold, nested ones included. Checking a step
/// against the schema takes several KB while it runs (15 KB for a `{}`
/// step, against every kind), so this bound keeps the check near 150 MB
/// whatever the file.
pub const MAX_STEPS: usize = 10_000;

/// The reserved input a host fills with the run's file root (the file
/// contract).
pub use agentfile_plan::FS_ROOT_INPUT as FS_ROOT_FIELD;

#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    pub config: Option<&'a Config>,
    /// What describes the JavaScript tools of the agent files it reads (the
    /// registry passes the script engine's; the default describes none).
    pub scripts: &'a dyn agentfile_agent_card::Describe,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            config: None,
            scripts: &agentfile_agent_card::NoScripts,
        }
    }
}

/// Check a WORKFLOW.md already in `sources`; the plan when it has no errors.
/// Files it reads on the way (sub-workflows, TOOL.md contracts) are added to
/// `sources`, and their problems reported in them.
pub fn analyze(
    sources: &mut SourceMap,
    file: FileId,
    opts: Options<'_>,
) -> (Vec<Diagnostic>, Option<Plan>) {
    let mut fe = Front {
        sources,
        config: opts.config,
        scripts: opts.scripts,
        diags: Vec::new(),
        stack: Vec::new(),
        loaded: HashMap::new(),
        tools: HashMap::new(),
        contract_paths: HashMap::new(),
    };
    let plan = fe.load(file);
    let has_errors = fe.diags.iter().any(Diagnostic::is_error);
    (fe.diags, if has_errors { None } else { plan })
}

/// Why a file has no readable front matter: code, message, hint, span.
type FrontMatterError = (&'static str, String, String, usize, usize);

/// Where the front matter lies: the YAML text between the two `---` lines.
fn front_matter(text: &str) -> Result<(usize, usize), FrontMatterError> {
    let line_end = |from: usize| text[from..].find('\n').map_or(text.len(), |i| from + i);
    let first = line_end(0);
    if text[..first].trim_end() != "---" {
        return Err((
            "no-front-matter",
            "a WORKFLOW.md starts with YAML front matter: its first line must be `---`".into(),
            "start the file with `---`, the workflow's fields (name, id, description, version, inputs, outputs, steps), then `---`".into(),
            0,
            first,
        ));
    }
    let mut pos = first + 1;
    while pos < text.len() {
        let end = line_end(pos);
        let line = text[pos..end].trim_end();
        if line == "---" || line == "..." {
            return Ok((first + 1, pos));
        }
        pos = end + 1;
    }
    Err((
        "unclosed-front-matter",
        "the front matter never closes: no `---` line after the opening one".into(),
        "end the front matter with a line holding only `---`, before the Markdown body".into(),
        0,
        first,
    ))
}

/// A TOOL.md contract (AIP-14) found under `.tools/<id>/`.
#[derive(Debug, Clone)]
struct Contract {
    inputs: Option<Value>,
    outputs: Option<Value>,
    mutates: bool,
}

/// What a `tool:` id runs.
enum Resolved {
    Builtin(String),
    Agent,
    Mcp(String),
    Command(Vec<String>),
    Workflow(String),
    /// A remote A2A agent, called through the tool set by its tool id.
    Remote(String),
}

struct Front<'a> {
    sources: &'a mut SourceMap,
    config: Option<&'a Config>,
    scripts: &'a dyn agentfile_agent_card::Describe,
    diags: Vec<Diagnostic>,
    /// Files being loaded, outermost first (sub-workflow cycles).
    stack: Vec<PathBuf>,
    /// Sub-workflows already loaded, by canonical path.
    loaded: HashMap<PathBuf, Option<Plan>>,
    /// TOOL.md contracts already read, by path.
    tools: HashMap<PathBuf, Option<Contract>>,
    /// Where each (folder, tool id) found its TOOL.md, so a workflow of
    /// 20,000 steps looks upward once per tool, not once per step.
    contract_paths: HashMap<(PathBuf, String), Option<PathBuf>>,
}

/// One file being lowered.
struct FileCx {
    file: FileId,
    doc: Doc,
    dir: PathBuf,
    goals: Vec<GoalDef>,
    /// Personas of `agent` steps (`inputs.agent: x.agent.md`).
    agents: Vec<agentfile_plan::AgentDef>,
    /// Node path → the YAML pointer of the step (or branch) it came from.
    paths: HashMap<String, String>,
    default_approval: Option<ApprovalClass>,
    default_retry: Option<Retry>,
}

impl FileCx {
    fn new(file: FileId, doc: Doc, dir: PathBuf) -> FileCx {
        FileCx {
            file,
            doc,
            dir,
            goals: Vec::new(),
            agents: Vec::new(),
            paths: HashMap::new(),
            default_approval: None,
            default_retry: None,
        }
    }
}

fn join(parent: &str, id: &str) -> String {
    if parent.is_empty() {
        id.to_owned()
    } else {
        format!("{parent}/{id}")
    }
}

fn str_at<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

impl Front<'_> {
    fn span(&self, cx: &FileCx, pointer: &str, at_key: bool) -> Span {
        let at = cx.doc.at(pointer);
        let (start, end) = match (at_key, at.key) {
            (true, Some(k)) => k,
            _ => (at.start, at.end),
        };
        // A block value spans lines; its first line is enough to point at.
        let text = &self.sources.file(cx.file).text;
        let end = end.min(text.len()).max(start);
        let end = text[start..end].find('\n').map_or(end, |i| start + i);
        Span::new(cx.file, start, end.max(start))
    }

    fn error(&mut self, code: &'static str, span: Span, msg: String, hint: Option<String>) {
        let mut d = Diagnostic::error(code, span, msg);
        if let Some(h) = hint {
            d = d.with_hint(h);
        }
        self.diags.push(d);
    }

    /// A file's front matter, parsed; `None` after reporting why not.
    fn front(&mut self, file: FileId) -> Option<Doc> {
        let text = &self.sources.file(file).text;
        let parsed = front_matter(text).map(|(start, end)| yaml::parse(&text[start..end], start));
        match parsed {
            Ok(Ok(doc)) => Some(doc),
            Ok(Err(e)) => {
                self.error(e.code, Span::new(file, e.start, e.end), e.message, e.hint);
                None
            }
            Err((code, msg, hint, s, e)) => {
                self.error(code, Span::new(file, s, e), msg, Some(hint));
                None
            }
        }
    }

    fn load(&mut self, file: FileId) -> Option<Plan> {
        let path = self.sources.file(file).path.clone();
        let doc = self.front(file)?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let mut cx = FileCx::new(file, doc, dir);
        let root = cx.doc.value.clone();
        if !self.check_shape(&cx, &root) {
            return None;
        }
        self.check_fields(&cx, &root);
        let files = self.file_contract(&cx, &root);
        cx.default_approval = root
            .get("approval")
            .and_then(Value::as_str)
            .and_then(approval_class);
        cx.default_retry = root.get("retry").and_then(retry_of);

        let nodes = self.steps(&mut cx, root.get("steps"), "/steps", "");
        let start = str_at(&root, "start").map(str::to_owned);
        let graph = Node::new(
            "",
            NodeKind::Sequence {
                nodes,
                start: start.clone(),
            },
        );
        let result = match root.get("result") {
            Some(r) => {
                let errors = self.diags.len();
                let v = self.value(&cx, Some(r), "/result", None);
                (self.diags.len() == errors).then_some(v)
            }
            None => None,
        };
        let triggers = self.triggers(&cx, &root);
        let mut plan = plan_of(&root, &path, &mut cx, graph, result, files);
        plan.triggers = triggers;
        let workflow = plan.id.clone().unwrap_or_else(|| plan.name.clone());
        agentfile_plan::trigger::number(&workflow, &mut plan.triggers);
        self.check_plan(&cx, &plan);
        plan.fingerprint = plan.compute_fingerprint();
        Some(plan)
    }

    /// The front matter is a mapping, and not too large to lower: else
    /// nothing more is checked.
    fn check_shape(&mut self, cx: &FileCx, root: &Value) -> bool {
        if !root.is_object() {
            let sp = self.span(cx, "", false);
            self.error(
                "schema",
                sp,
                "the front matter must be a mapping of fields (name: …, id: …)".into(),
                Some("write `key: value` lines between the `---` lines".into()),
            );
            return false;
        }
        let steps = count_steps(root);
        if steps > MAX_STEPS {
            let sp = self.span(cx, "/steps", true);
            self.error(
                "schema",
                sp,
                format!(
                    "the workflow has {steps} steps, nested ones included: more than {MAX_STEPS}"
                ),
                Some("split it into sub-workflows (`kind: subworkflow`)".into()),
            );
            return false;
        }
        true
    }

    /// The fields against the published schema (with `action:` steps as tool
    /// steps and boolean conditions read as expressions) and the forbidden
    /// fields.
    fn check_fields(&mut self, cx: &FileCx, root: &Value) {
        // The published schema knows only `tool:`; an `action:` step is
        // checked as a tool step (its ref is resolved below).
        let mut view = std::borrow::Cow::Borrowed(root);
        if root.get("steps").is_some_and(has_action)
            && let Some(steps) = view.to_mut().get_mut("steps")
        {
            actions_as_tools(steps);
        }
        // EXAMPLES.md writes `when: true` for a default branch, though the
        // schema types `when` (and a loop's `while`) as an expression string:
        // a boolean is read as that literal, with a warning. Other types
        // stay schema errors.
        let mut booleans = Vec::new();
        if let Some(steps) = root.get("steps") {
            boolean_conditions(steps, "/steps", &mut booleans);
        }
        for (ptr, b) in &booleans {
            if let Some(slot) = view.to_mut().pointer_mut(ptr) {
                *slot = Value::String(b.to_string());
            }
            let field = ptr.rsplit('/').next().unwrap_or("when");
            let sp = self.span(cx, ptr, false);
            self.diags.push(
                Diagnostic::warning(
                    "boolean-condition",
                    sp,
                    format!("`{field}: {b}` is a YAML boolean; it is read as the expression `{b}`"),
                )
                .with_hint(format!(
                    "AIP-15 types `{field}` as an expression string: write `{field}: \"{b}\"`"
                )),
            );
        }
        // Triggers and routines are checked by `triggers` below, with the
        // fields the daemon reads beyond the published schema (policy,
        // `secret_env`, `routines:`).
        if (root.get("triggers").is_some() || root.get("routines").is_some())
            && let Some(o) = view.to_mut().as_object_mut()
        {
            o.remove("triggers");
            o.remove("routines");
        }
        for v in schema::check_workflow(&view) {
            let sp = self.span(cx, &v.pointer, v.at_key);
            self.error(v.code, sp, v.message, v.hint);
        }
        for name in schema::FORBIDDEN {
            if root.get(*name).is_some() {
                let sp = self.span(cx, &format!("/{name}"), true);
                self.error(
                    "forbidden-field",
                    sp,
                    format!("`{name}` is not allowed in a WORKFLOW.md: a workflow orchestrates tools and holds no code, runner, secrets or network settings"),
                    Some(match *name {
                        "secrets" | "network" => "declare what the workflow needs under `runtime:` (env, network.egress); secrets stay in the host's environment".to_owned(),
                        _ => "move the code into a tool (bind it under [tools.<id>] in agent.toml) and call it from a `kind: tool` step".to_owned(),
                    }),
                );
            }
        }
    }

    /// `triggers:` then `routines:` (AIP-15, AIP-41), each checked as the
    /// daemon registers it: a schedule the scheduler accepts, policy values
    /// it reads, a webhook only where the config turns the listener on (a
    /// workflow read without a config leaves that to the daemon), no
    /// routine `ref:`.
    fn triggers(&mut self, cx: &FileCx, root: &Value) -> Vec<TriggerDecl> {
        let mut out = Vec::new();
        for (field, what) in [("triggers", "triggers"), ("routines", "routines")] {
            match root.get(field) {
                None | Some(Value::Array(_)) => {}
                Some(_) => {
                    let sp = self.span(cx, &format!("/{field}"), false);
                    self.error(
                        "schema",
                        sp,
                        format!("`{field}` must be a list of {what}"),
                        Some(format!("write `{field}:` followed by `- ` entries")),
                    );
                }
            }
        }
        if let Some(Value::Array(ts)) = root.get("triggers") {
            for (i, t) in ts.iter().enumerate() {
                let base = format!("/triggers/{i}");
                let mut problems = Vec::new();
                let decl = trigger::decode_trigger(t, &mut problems);
                if let (Some(d), Some(config)) = (&decl, self.config)
                    && d.kind == TriggerKind::Webhook
                {
                    problems.extend(trigger::webhook_problem(config));
                }
                self.problems(cx, &base, problems);
                if let Some(mut d) = decl {
                    d.at = Some(self.source_at(cx, &base));
                    out.push(d);
                }
            }
        }
        if let Some(Value::Array(rs)) = root.get("routines") {
            for (i, r) in rs.iter().enumerate() {
                let base = format!("/routines/{i}");
                let mut problems = Vec::new();
                let decl = match trigger::decode_routine_entry(r, &mut problems) {
                    Ok(d) => d.map(|mut d| {
                        d.at = Some(self.source_at(cx, &base));
                        d
                    }),
                    Err(file) => {
                        let file = file.to_owned();
                        self.routine_file(cx, &format!("{base}/file"), &file)
                    }
                };
                self.problems(cx, &base, problems);
                out.extend(decl);
            }
        }
        out
    }

    /// A `file:` routine: its ROUTINE.md read relative to the workflow's
    /// folder, its front matter decoded; problems inside it are reported in
    /// it.
    fn routine_file(&mut self, cx: &FileCx, ptr: &str, rel: &str) -> Option<TriggerDecl> {
        let inside = Path::new(rel).components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        });
        if !inside {
            let sp = self.span(cx, ptr, false);
            self.error(
                "routine",
                sp,
                format!("routine file `{rel}` lies outside the workflow's folder"),
                Some("keep routines beside the workflow: `./.routines/<id>/ROUTINE.md`".into()),
            );
            return None;
        }
        let path = cx.dir.join(rel);
        let text = match read_bounded(&path) {
            Ok(t) if t.len() as u64 <= agentfile_syntax::MAX_WORKFLOW_BYTES => t,
            Ok(_) => {
                let sp = self.span(cx, ptr, false);
                self.error(
                    "routine",
                    sp,
                    format!("routine file `{rel}` is too large to be a ROUTINE.md"),
                    None,
                );
                return None;
            }
            Err(e) => {
                let sp = self.span(cx, ptr, false);
                let why = if e.kind() == std::io::ErrorKind::NotFound {
                    "does not exist".to_owned()
                } else {
                    format!("cannot be read: {e}")
                };
                self.error(
                    "routine",
                    sp,
                    match path.display().to_string() {
                        p if p == rel => format!("routine file `{rel}` {why}"),
                        p => format!("routine file `{rel}` {why} (looked for {p})"),
                    },
                    Some("name a ROUTINE.md relative to the workflow's folder, such as `./.routines/<id>/ROUTINE.md`".into()),
                );
                return None;
            }
        };
        let file = self.sources.add(path.clone(), text);
        let errors = self.diags.len();
        let doc = self.front(file)?;
        let rcx = FileCx::new(file, doc, PathBuf::new());
        let mut problems = Vec::new();
        let source = RoutineSource::File {
            path: path.display().to_string(),
        };
        let decl = trigger::decode_routine(&rcx.doc.value, "", source, &mut problems);
        self.problems(&rcx, "", problems);
        if self.diags.len() > errors {
            let sp = self.span(cx, ptr, false);
            self.error(
                "routine",
                sp,
                format!("routine file `{rel}` has errors"),
                Some("fix the errors reported in that file".into()),
            );
        }
        decl.map(|mut d| {
            d.at = Some(self.source_at(&rcx, ""));
            d
        })
    }

    /// Trigger problems found below `base`, as diagnostics.
    fn problems(&mut self, cx: &FileCx, base: &str, problems: Vec<trigger::Problem>) {
        for p in problems {
            let sp = self.span(cx, &format!("{base}{}", p.pointer), p.at_key);
            self.error(p.code, sp, p.message, p.hint);
        }
    }

    /// Where the node at `pointer` starts, for the daemon's messages.
    fn source_at(&self, cx: &FileCx, pointer: &str) -> SourceAt {
        let sp = self.span(cx, pointer, false);
        let f = self.sources.file(cx.file);
        let (line, column) = f.line_col(sp.start);
        SourceAt {
            file: f.path.display().to_string(),
            line,
            column,
        }
    }

    /// The plan's own checks: its schemas, its graph and its scopes.
    fn check_plan(&mut self, cx: &FileCx, plan: &Plan) {
        for (field, schema) in [
            ("inputs", &plan.input_schema),
            ("outputs", &plan.output_schema),
        ] {
            if let Some(s) = schema
                && let Some(problem) = schema::schema_problem(s)
            {
                let sp = self.span(cx, &format!("/{field}"), true);
                self.error(
                    "schema",
                    sp,
                    format!("`{field}` is not a valid JSON Schema: {problem}"),
                    None,
                );
            }
        }
        for e in agentfile_plan::graph::check(&plan.graph) {
            let sp = self.locate(cx, &e.path, e.subject.as_deref(), true);
            let hint = graph_hint(e.code);
            self.error(e.code, sp, e.message, Some(hint.into()));
        }
        for e in agentfile_plan::scope::check(plan) {
            let sp = self.locate(cx, &e.path, e.subject.as_deref(), false);
            let hint = match e.code {
                "unknown-input" => "declare it under `inputs.properties`, or fix the name",
                "unknown-variable" => {
                    "read an input as `$input.<name>`, a step's output as `$steps.<id>.<field>`; there is no `$env`"
                }
                "item-outside-map" => {
                    "`$item` and `$index` exist only in the steps of a `kind: map` step"
                }
                _ => {
                    "a step reads only steps that finished before it (earlier in its list, or in an enclosing list), and declared inputs"
                }
            };
            self.error(e.code, sp, e.message, Some(hint.into()));
        }
    }

    /// The span for a graph or scope error: the scalar in the step at `path`
    /// that holds `subject` (a route target, an expression's root), else the
    /// step's `id`.
    fn locate(&self, cx: &FileCx, path: &str, subject: Option<&str>, exact: bool) -> Span {
        let mut p = path;
        let pointer = loop {
            if let Some(ptr) = cx.paths.get(p) {
                break ptr.clone();
            }
            match p.rfind('/') {
                Some(i) => p = &p[..i],
                None => break "/steps".to_owned(),
            }
        };
        if let (Some(subject), Some(v)) = (subject, cx.doc.value.pointer(&pointer)) {
            let mut found = None;
            scalars(v, &pointer, &mut |ptr, s| {
                let hit = if exact {
                    s == subject
                } else {
                    s.contains(subject)
                };
                if hit && found.is_none() {
                    found = Some(ptr.to_owned());
                }
            });
            if let Some(ptr) = found {
                let sp = self.span(cx, &ptr, false);
                let text = &self.sources.file(cx.file).text;
                if let Some(i) = text[sp.start as usize..sp.end as usize].find(subject) {
                    let s = sp.start as usize + i;
                    return Span::new(cx.file, s, s + subject.len());
                }
                return sp;
            }
        }
        if cx.doc.has(&format!("{pointer}/id")) {
            self.span(cx, &format!("{pointer}/id"), false)
        } else {
            self.span(cx, &pointer, false)
        }
    }

    /// A `steps:` list, lowered; steps named as another's `compensation`
    /// leave the flow and hang off that step.
    /// `inputsFiles` / `outputsFiles`, each key a plain file name in the
    /// run's scratch folder and each path inside the workspace.
    fn file_contract(&mut self, cx: &FileCx, root: &Value) -> FileContract {
        let mut files = FileContract::default();
        for (field, out) in [("inputsFiles", false), ("outputsFiles", true)] {
            let Some(Value::Object(entries)) = root.get(field) else {
                continue;
            };
            for (key, entry) in entries {
                let here = format!("/{field}/{}", segment(key));
                if let Some(why) = file_key_problem(key) {
                    let sp = self.span(cx, &here, true);
                    self.error(
                        "file-contract",
                        sp,
                        format!("`{key}` cannot name a file in the run's scratch folder: {why}"),
                        Some("use a plain file name such as `source` or `report.md`".into()),
                    );
                    continue;
                }
                let Some(path) = str_at(entry, "path") else {
                    continue; // the schema check reported it
                };
                if let Some(why) = file_path_problem(path, out) {
                    let sp = self.span(cx, &format!("{here}/path"), false);
                    self.error(
                        "file-contract",
                        sp,
                        format!("`{path}`: {why}"),
                        Some(if out {
                            "write a path relative to the workspace; `<runId>`, `<workflowId>` and `<isoDate>` are filled in".into()
                        } else {
                            "write a path relative to the workspace".into()
                        }),
                    );
                    continue;
                }
                let e = FileEntry {
                    path: path.to_owned(),
                    mode: str_at(entry, "mode").map(str::to_owned),
                    content_type: str_at(entry, "contentType").map(str::to_owned),
                };
                if out {
                    files.outputs.insert(key.clone(), e);
                } else {
                    files.inputs.insert(key.clone(), e);
                }
            }
        }
        files
    }

    fn steps(
        &mut self,
        cx: &mut FileCx,
        list: Option<&Value>,
        ptr: &str,
        parent: &str,
    ) -> Vec<Node> {
        let Some(Value::Array(items)) = list else {
            return Vec::new();
        };
        let ids: Vec<Option<&str>> = items.iter().map(|s| str_at(s, "id")).collect();
        let mut compensations: BTreeMap<String, usize> = BTreeMap::new();
        for (i, s) in items.iter().enumerate() {
            if let Some(c) = str_at(s, "compensation") {
                if let Some(j) = ids.iter().position(|id| *id == Some(c)) {
                    if j == i {
                        let sp = self.span(cx, &format!("{ptr}/{i}/compensation"), false);
                        self.error(
                            "unknown-compensation",
                            sp,
                            format!("step `{c}` cannot be its own compensation"),
                            Some("name another step of this list that undoes this one".into()),
                        );
                    } else {
                        compensations.insert(c.to_owned(), j);
                    }
                } else {
                    let known: Vec<&str> = ids.iter().flatten().copied().collect();
                    let hint = match agentfile_plan::diag::suggest(c, known.iter().copied()) {
                        Some(s) => format!(
                            "did you mean `{s}`? A compensation names a step of the same list"
                        ),
                        None => "name a step of the same list that undoes this one".to_owned(),
                    };
                    let sp = self.span(cx, &format!("{ptr}/{i}/compensation"), false);
                    self.error(
                        "unknown-compensation",
                        sp,
                        format!("the compensation step `{c}` does not exist in this list"),
                        Some(hint),
                    );
                }
            }
        }
        let mut lowered: Vec<Option<Node>> = items
            .iter()
            .enumerate()
            .map(|(i, s)| self.step(cx, s, &format!("{ptr}/{i}"), parent))
            .collect();
        // Attach compensations (a compensation's own compensation is ignored).
        for (i, s) in items.iter().enumerate() {
            let Some(c) = str_at(s, "compensation") else {
                continue;
            };
            let Some(&j) = compensations.get(c) else {
                continue;
            };
            if j == i {
                continue;
            }
            let comp = lowered[j].clone();
            if let (Some(owner), Some(mut comp)) = (lowered[i].as_mut(), comp) {
                comp.next = None;
                let from = join(parent, &comp.id);
                let to = join(&join(parent, &owner.id), &comp.id);
                let moved: Vec<(String, String)> = cx
                    .paths
                    .iter()
                    .filter(|(k, _)| **k == from || k.starts_with(&format!("{from}/")))
                    .map(|(k, v)| (format!("{to}{}", &k[from.len()..]), v.clone()))
                    .collect();
                cx.paths.extend(moved);
                owner.compensation = Some(Box::new(comp));
            }
        }
        lowered
            .iter_mut()
            .enumerate()
            .filter(|(j, _)| !compensations.values().any(|c| c == j))
            .filter_map(|(_, n)| n.take())
            .collect()
    }

    fn expr(&mut self, cx: &FileCx, v: Option<&Value>, ptr: &str) -> Expr {
        let Some(Value::String(src)) = v else {
            // A wrong type is a schema error already.
            return Expr::Literal(v.cloned().unwrap_or(Value::Null));
        };
        match expr::parse(src) {
            Ok(e) => e,
            Err(e) => {
                let sp = self.sub_span(cx, ptr, src, e.offset, e.len);
                self.error(
                    "bad-expression",
                    sp,
                    format!("`{src}` is not a valid expression: {}", e.message),
                    e.hint,
                );
                Expr::Literal(Value::Null)
            }
        }
    }

    /// The span of `src[offset..offset+len]` when the scalar is written
    /// plainly in the file, else the scalar's.
    fn sub_span(&self, cx: &FileCx, ptr: &str, src: &str, offset: usize, len: usize) -> Span {
        let sp = self.span(cx, ptr, false);
        let text = &self.sources.file(cx.file).text;
        let written = &text[sp.start as usize..sp.end as usize];
        match written.find(src) {
            Some(i) if offset + len <= src.len() => {
                let s = sp.start as usize + i + offset;
                Span::new(cx.file, s, s + len.max(1))
            }
            _ => sp,
        }
    }

    /// A value with expressions inside (a step's inputs, the result).
    /// `shell` names the key (of the top object) that is a command line a
    /// shell parses, where `$name` is the shell's and not a bare reference.
    fn value(
        &mut self,
        cx: &FileCx,
        v: Option<&Value>,
        ptr: &str,
        shell: Option<&str>,
    ) -> ValueExpr {
        let v = v.cloned().unwrap_or_else(|| json!({}));
        match expr::compile_value(&v) {
            Ok(x) => {
                self.bare_references(cx, &v, ptr, shell);
                x
            }
            Err((p, e)) => {
                let at = format!("{ptr}{p}");
                let (sp, msg) = match cx.doc.value.pointer(&at) {
                    Some(Value::String(s)) => (
                        self.sub_span(cx, &at, s, e.offset, e.len),
                        format!("`{s}` is not a valid expression: {}", e.message),
                    ),
                    _ => (self.span(cx, &at, false), e.message),
                };
                self.error("bad-expression", sp, msg, e.hint);
                ValueExpr::Literal(Value::Null)
            }
        }
    }

    fn template(&mut self, cx: &FileCx, v: Option<&Value>, ptr: &str) -> Template {
        let src = v.and_then(Value::as_str).unwrap_or("");
        match Template::parse(src) {
            Ok(t) => {
                self.bare_reference_in(cx, src, ptr);
                t
            }
            Err(e) => {
                let sp = self.sub_span(cx, ptr, src, e.offset, e.len);
                self.error("bad-expression", sp, e.message, e.hint);
                Template { parts: Vec::new() }
            }
        }
    }

    /// Every string in `v` that holds a path written without `${{ }}`
    /// inside longer text (see [`expr::bare_references`]): an error, since
    /// the step would get the characters `$steps.x`, not the value.
    fn bare_references(&mut self, cx: &FileCx, v: &Value, ptr: &str, shell: Option<&str>) {
        let mut stack = vec![(v, ptr.to_owned(), true)];
        while let Some((v, p, top)) = stack.pop() {
            match v {
                Value::String(s) => self.bare_reference_in(cx, s, &p),
                Value::Array(a) => {
                    for (i, x) in a.iter().enumerate().rev() {
                        stack.push((x, format!("{p}/{i}"), false));
                    }
                }
                Value::Object(o) => {
                    for (k, x) in o.iter().rev() {
                        if top && shell == Some(k.as_str()) {
                            continue;
                        }
                        stack.push((x, format!("{p}/{}", segment(k)), false));
                    }
                }
                _ => {}
            }
        }
    }

    fn bare_reference_in(&mut self, cx: &FileCx, text: &str, ptr: &str) {
        for r in expr::bare_references(text) {
            let sp = self.sub_span(cx, ptr, text, r.start, r.end - r.start);
            let path = &r.path;
            self.error(
                "bare-reference",
                sp,
                format!(
                    "`{path}` inside text is not interpolated: the step would get the characters `{path}`, not the value"
                ),
                Some(format!(
                    "did you mean `${{{{ {path} }}}}`? a reference inside longer text is written `${{{{ … }}}}`; a value that is only a reference can stay `{path}`"
                )),
            );
        }
    }

    fn step(&mut self, cx: &mut FileCx, s: &Value, ptr: &str, parent: &str) -> Option<Node> {
        let id = str_at(s, "id")?.to_owned();
        let path = join(parent, &id);
        cx.paths.insert(path.clone(), ptr.to_owned());
        let kind = self.step_kind(cx, s, ptr, &path);
        let mut node = Node::new(id, kind);
        self.step_settings(cx, s, ptr, &mut node);
        Some(node)
    }

    /// What a step does, by its `kind`.
    fn step_kind(&mut self, cx: &mut FileCx, s: &Value, ptr: &str, path: &str) -> NodeKind {
        match str_at(s, "kind") {
            Some("tool") => self.tool_step(cx, s, ptr, path),
            Some("branch") => self.branch_step(cx, s, ptr),
            Some("parallel") => self.parallel_step(cx, s, ptr, path),
            Some("map") => self.map_step(cx, s, ptr, path),
            Some("loop") => self.loop_step(cx, s, ptr, path),
            Some("approval") => self.approval_step(cx, s, ptr),
            Some("suspend") => suspend_step(s),
            Some("subworkflow") => self.subworkflow_step(cx, s, ptr),
            // Unknown or missing: a schema error already; keep the id so
            // routes to it resolve.
            _ => NodeKind::Sequence {
                nodes: Vec::new(),
                start: None,
            },
        }
    }

    fn branch_step(&mut self, cx: &FileCx, s: &Value, ptr: &str) -> NodeKind {
        let mut arms = Vec::new();
        if let Some(Value::Array(bs)) = s.get("branches") {
            for (i, b) in bs.iter().enumerate() {
                let when = self.expr(cx, b.get("when"), &format!("{ptr}/branches/{i}/when"));
                let next = Next::parse(str_at(b, "next").unwrap_or("$end"));
                arms.push(Arm { when, next });
            }
        }
        NodeKind::Branch {
            arms,
            default: str_at(s, "default").map(Next::parse),
        }
    }

    fn parallel_step(&mut self, cx: &mut FileCx, s: &Value, ptr: &str, path: &str) -> NodeKind {
        let mut branches = Vec::new();
        if let Some(Value::Array(bs)) = s.get("branches") {
            for (i, b) in bs.iter().enumerate() {
                let Some(bid) = str_at(b, "id") else { continue };
                let bptr = format!("{ptr}/branches/{i}");
                let bpath = join(path, bid);
                cx.paths.insert(bpath.clone(), bptr.clone());
                let nodes = self.steps(cx, b.get("steps"), &format!("{bptr}/steps"), &bpath);
                branches.push(Node::new(bid, NodeKind::Sequence { nodes, start: None }));
            }
        }
        NodeKind::Parallel { branches }
    }

    fn map_step(&mut self, cx: &mut FileCx, s: &Value, ptr: &str, path: &str) -> NodeKind {
        let over = self.expr(cx, s.get("over"), &format!("{ptr}/over"));
        let nodes = self.steps(cx, s.get("steps"), &format!("{ptr}/steps"), path);
        NodeKind::Map {
            over,
            concurrency: s
                .get("parallelism")
                .and_then(Value::as_u64)
                .map_or(0, |n| n.min(u64::from(u32::MAX)) as u32),
            body: Box::new(Node::new("body", NodeKind::Sequence { nodes, start: None })),
        }
    }

    fn loop_step(&mut self, cx: &mut FileCx, s: &Value, ptr: &str, path: &str) -> NodeKind {
        let expr = self.expr(cx, s.get("while"), &format!("{ptr}/while"));
        let nodes = self.steps(cx, s.get("steps"), &format!("{ptr}/steps"), path);
        let max = s
            .get("max_iterations")
            .and_then(Value::as_u64)
            .map_or(1, |n| n.clamp(1, 1000) as u32);
        NodeKind::Loop {
            until: LoopUntil::While { expr },
            max: Limit::Count { count: max },
            body: Box::new(Node::new("body", NodeKind::Sequence { nodes, start: None })),
        }
    }

    fn approval_step(&mut self, cx: &FileCx, s: &Value, ptr: &str) -> NodeKind {
        let prompt = self.template(cx, s.get("prompt"), &format!("{ptr}/prompt"));
        let route = |k: &str| {
            s.get(k)
                .and_then(|o| o.get("next"))
                .and_then(Value::as_str)
                .map(Next::parse)
        };
        NodeKind::Approval(ApprovalNode {
            prompt,
            on_approve: route("on_approve"),
            on_reject: route("on_reject"),
            timeout_ms: s.get("timeout_ms").and_then(Value::as_u64),
            on_timeout: str_at(s, "on_timeout").map_or(OnTimeout::Fail, OnTimeout::parse),
        })
    }

    fn subworkflow_step(&mut self, cx: &mut FileCx, s: &Value, ptr: &str) -> NodeKind {
        let wid = str_at(s, "workflow").unwrap_or("");
        let inputs = self.value(cx, s.get("inputs"), &format!("{ptr}/inputs"), None);
        match self.subworkflow(cx, wid, &format!("{ptr}/workflow")) {
            Some(plan) => NodeKind::Subworkflow {
                plan: Box::new(plan),
                inputs,
            },
            None => NodeKind::Sequence {
                nodes: Vec::new(),
                start: None,
            },
        }
    }

    /// The settings every step kind shares: name, route, time limit, retry,
    /// approval (defaulted for the kinds that act), and the output schema
    /// (declared, else a TOOL.md contract's).
    fn step_settings(&mut self, cx: &mut FileCx, s: &Value, ptr: &str, node: &mut Node) {
        node.name = str_at(s, "name").map(str::to_owned);
        node.next = str_at(s, "next").map(Next::parse);
        node.timeout_ms = s.get("timeout_ms").and_then(Value::as_u64).filter(|_| {
            // An approval's own timeout is its wait, not a step limit.
            !matches!(str_at(s, "kind"), Some("approval"))
        });
        node.retry = s.get("retry").and_then(retry_of);
        node.approval = s
            .get("approval")
            .and_then(Value::as_str)
            .and_then(approval_class);
        if let Some(o) = s.get("outputs").filter(|o| o.is_object()) {
            if let Some(problem) = schema::schema_problem(o) {
                let sp = self.span(cx, &format!("{ptr}/outputs"), true);
                self.error(
                    "schema",
                    sp,
                    format!("the step's `outputs` is not a valid JSON Schema: {problem}"),
                    None,
                );
            } else if !matches!(node.kind, NodeKind::Suspend { .. }) {
                node.output_schema = Some(o.clone());
            }
        }
        if matches!(
            node.kind,
            NodeKind::Tool { .. } | NodeKind::Command { .. } | NodeKind::Goal(_)
        ) {
            if node.approval.is_none() {
                node.approval = cx.default_approval;
            }
            if node.retry.is_none() {
                node.retry = cx.default_retry.clone();
            }
        }
        if let Some(c) = self.contract_for(cx, s) {
            if node.output_schema.is_none() {
                node.output_schema = c.outputs.clone();
            }
            node.input_schema = c.inputs.clone();
        }
    }

    /// The TOOL.md contract of a tool step's id, when one exists.
    fn contract_for(&mut self, cx: &FileCx, s: &Value) -> Option<Contract> {
        if str_at(s, "kind") != Some("tool") {
            return None;
        }
        let id = str_at(s, "tool")?;
        self.contract(cx, id)
    }

    fn contract(&mut self, cx: &FileCx, id: &str) -> Option<Contract> {
        if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
            return None;
        }
        let path = self
            .contract_paths
            .entry((cx.dir.clone(), id.to_owned()))
            .or_insert_with(|| upward(&cx.dir, &Path::new(".tools").join(id).join("TOOL.md")))
            .clone()?;
        if let Some(c) = self.tools.get(&path) {
            return c.clone();
        }
        let c = self.read_contract(&path);
        self.tools.insert(path, c.clone());
        c
    }

    fn read_contract(&mut self, path: &Path) -> Option<Contract> {
        let text = std::fs::read_to_string(path).ok()?;
        if text.len() as u64 > agentfile_syntax::MAX_WORKFLOW_BYTES {
            return None;
        }
        let file = self.sources.add(path.to_owned(), text);
        let doc = self.front(file)?;
        let tcx = FileCx::new(file, doc, PathBuf::new());
        let v = tcx.doc.value.clone();
        let mut ok = true;
        for viol in schema::check_tool(&v) {
            ok = false;
            let sp = self.span(&tcx, &viol.pointer, viol.at_key);
            self.error(
                viol.code,
                sp,
                format!("TOOL.md: {}", viol.message),
                viol.hint,
            );
        }
        ok.then(|| Contract {
            inputs: v.get("inputs").filter(|i| i.is_object()).cloned(),
            outputs: v.get("outputs").filter(|o| o.is_object()).cloned(),
            mutates: matches!(v.get("mutates"), Some(Value::Array(a)) if !a.is_empty()),
        })
    }

    fn tool_step(&mut self, cx: &mut FileCx, s: &Value, ptr: &str, path: &str) -> NodeKind {
        let empty = NodeKind::Sequence {
            nodes: Vec::new(),
            start: None,
        };
        let mut tptr = format!("{ptr}/tool");
        let id = match (s.get("tool"), s.get("action")) {
            (Some(_), Some(_)) => {
                let sp = self.span(cx, &format!("{ptr}/action"), true);
                self.error(
                    "schema",
                    sp,
                    "a tool step names either `tool:` or `action:`, not both".into(),
                    Some("keep `tool:` to pin one tool, or `action:` to use the tool the config binds to the action".into()),
                );
                return empty;
            }
            (None, Some(Value::String(r))) => {
                tptr = format!("{ptr}/action");
                match self.config.and_then(|c| c.actions.get(r)) {
                    Some(b) => b.tool.clone(),
                    None => {
                        let sp = self.span(cx, &tptr, false);
                        let bound: Vec<String> = self
                            .config
                            .map(|c| c.actions.keys().map(|k| format!("`{k}`")).collect())
                            .unwrap_or_default();
                        self.error(
                            "unresolved-action",
                            sp,
                            format!("action `{r}` is not bound to a tool"),
                            Some(format!(
                                "bind it in agent.toml: `[actions.\"{r}\"]` with `tool = \"<id>\"`; bound actions: {}",
                                if bound.is_empty() { "none".to_owned() } else { bound.join(", ") }
                            )),
                        );
                        return empty;
                    }
                }
            }
            (Some(Value::String(id)), None) => id.clone(),
            (Some(Value::Object(_)), None) => {
                let sp = self.span(cx, &format!("{ptr}/tool"), true);
                self.error(
                    "forbidden-field",
                    sp,
                    "an inline tool body (`tool: { entry: … }`) is not allowed: a workflow names its tools by id".into(),
                    Some("bind the code as a tool in agent.toml (`[tools.<id>] command = [\"node\", \"step.js\"]`) and write `tool: <id>`".into()),
                );
                return empty;
            }
            _ => return empty,
        };
        let resolved = self.resolve(&id);
        let shell = match &resolved {
            Some(Resolved::Builtin(t)) => agentfile_plan::shell::command_arg(t),
            _ => None,
        };
        let args = self.value(cx, s.get("inputs"), &format!("{ptr}/inputs"), shell);
        let contract = self.contract(cx, &id);
        self.unread_inputs(cx, s, ptr, path, &id, resolved.as_ref());
        match resolved {
            Some(Resolved::Builtin(tool)) => {
                self.command_template(cx, s, ptr, &tool);
                NodeKind::Tool { tool, args }
            }
            Some(Resolved::Mcp(tool) | Resolved::Remote(tool)) => NodeKind::Tool { tool, args },
            Some(Resolved::Command(argv)) => NodeKind::Command {
                tool: id.clone(),
                argv,
                args,
                mutates: contract.as_ref().is_none_or(|c| c.mutates),
            },
            Some(Resolved::Workflow(wid)) => match self.subworkflow(cx, &wid, &tptr) {
                Some(plan) => NodeKind::Subworkflow {
                    plan: Box::new(plan),
                    inputs: args,
                },
                None => empty,
            },
            Some(Resolved::Agent) => {
                if s.get("inputs").and_then(|i| i.get("prompt")).is_none() {
                    let sp = self.span(cx, &format!("{ptr}/tool"), false);
                    self.error(
                        "schema",
                        sp,
                        "an `agent` step needs `inputs.prompt`: what the model is asked to do"
                            .into(),
                        Some("add `inputs: { prompt: \"…\" }`".into()),
                    );
                }
                let outputs: Vec<String> = s
                    .get("outputs")
                    .and_then(|o| o.get("properties"))
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                let goal = format!("agent:{path}");
                let persona = self.persona(cx, s, ptr);
                cx.goals.push(GoalDef {
                    name: goal.clone(),
                    kind: GoalKind::Goal,
                    outcome: "$prompt".into(),
                    summary: format!("agent step `{path}`"),
                    source: PromptSource::Inline,
                    agents: persona.into_iter().collect(),
                    outputs,
                    reads: vec!["prompt".into()],
                    within: None,
                    supervision: None,
                    brief: None,
                    produces: None,
                });
                NodeKind::Goal(GoalNode {
                    goal,
                    context: Vec::new(),
                    inputs: Some(args),
                })
            }
            None => {
                let sp = self.span(cx, &tptr, false);
                let (msg, hint) = self.unresolved(&id, contract.is_some());
                self.error("unresolved-tool", sp, msg, Some(hint));
                empty
            }
        }
    }

    /// An input the step's tool will not read: a warning naming the step,
    /// the input and what the tool reads. Known for `agent` steps (`prompt`,
    /// `agent`) and built-in tools (their parameters); a command, MCP tool
    /// or workflow gets every input.
    fn unread_inputs(
        &mut self,
        cx: &FileCx,
        s: &Value,
        ptr: &str,
        path: &str,
        id: &str,
        resolved: Option<&Resolved>,
    ) {
        let Some(Value::Object(inputs)) = s.get("inputs") else {
            return;
        };
        let reads: Vec<String> = match resolved {
            Some(Resolved::Agent) => vec!["prompt".into(), "agent".into()],
            Some(Resolved::Builtin(t)) => match Tool::from_name(t) {
                Some(tool) => tool
                    .parameters()
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default(),
                None => return,
            },
            _ => return,
        };
        if reads.is_empty() {
            return;
        }
        let listed = reads
            .iter()
            .map(|r| format!("`{r}`"))
            .collect::<Vec<_>>()
            .join(", ");
        for key in inputs.keys().filter(|k| !reads.contains(k)) {
            let sp = self.span(cx, &format!("{ptr}/inputs/{}", segment(key)), true);
            let hint = match resolved {
                Some(Resolved::Agent) => {
                    let value = match inputs.get(key) {
                        Some(Value::String(v)) if v.trim_start().starts_with('$') => v.trim(),
                        _ => "$input.x",
                    };
                    format!(
                        "the model sees only `prompt`: put the value in it, `prompt: \"… ${{{{ {value} }}}}\"`, or remove `{key}`"
                    )
                }
                _ => {
                    let near = agentfile_plan::diag::suggest(key, reads.iter().map(String::as_str))
                        .map(|s| format!("did you mean `{s}`? "))
                        .unwrap_or_default();
                    format!("{near}remove `{key}`, or pass its value in an input `{id}` reads")
                }
            };
            self.diags.push(
                Diagnostic::warning(
                    "unread-input",
                    sp,
                    format!(
                        "step `{path}` gives `{id}` the input `{key}`, which it does not read: `{id}` reads {listed}"
                    ),
                )
                .with_hint(hint),
            );
        }
    }

    /// A shell tool's command (`bash`'s `inputs.command`): each `${{ }}` in it
    /// is quoted as one shell word when the step runs; a `raw(…)` splice is
    /// a warning, and a place no quoting can keep literal an error.
    fn command_template(&mut self, cx: &FileCx, s: &Value, ptr: &str, tool: &str) {
        let Some(key) = agentfile_plan::shell::command_arg(tool) else {
            return;
        };
        let Some(Value::String(src)) = s.get("inputs").and_then(|i| i.get(key)) else {
            return;
        };
        let at = format!("{ptr}/inputs/{key}");
        for f in agentfile_plan::shell::lint(src) {
            let sp = self.sub_span(cx, &at, src, f.start, f.end - f.start);
            let shown = &src[f.start..f.end];
            match f.lint {
                agentfile_plan::shell::Lint::Raw => self.diags.push(
                    Diagnostic::warning(
                        "raw-interpolation",
                        sp,
                        format!(
                            "`{shown}` splices its value into the `{tool}` command as shell code: whoever controls the value can run commands"
                        ),
                    )
                    .with_hint(
                        "drop `raw(…)` so the value is passed as one quoted word, unless the value is trusted to be shell code (see \"Values in commands\" in the book, docs/src/formats/expressions.md#values-in-commands)",
                    ),
                ),
                agentfile_plan::shell::Lint::Unquotable(why) => self.error(
                    "unquotable-interpolation",
                    sp,
                    format!(
                        "`{shown}` stands {why} in the `{tool}` command, where no quoting keeps its value from being read as code"
                    ),
                    Some(
                        "put the interpolation outside it, as its own word or in \"…\" (for a heredoc, `printf '%s\\n' ${{ … }} | cmd`; for backquotes, `$( … )`)"
                            .into(),
                    ),
                ),
            }
        }
    }

    /// An `agent` step's `inputs.agent`: an agent file (relative to the
    /// workflow's folder) loaded as the step's persona; its name.
    fn persona(&mut self, cx: &mut FileCx, step: &Value, ptr: &str) -> Option<String> {
        let v = step.get("inputs")?.get("agent")?;
        let aptr = format!("{ptr}/inputs/agent");
        let sp = self.span(cx, &aptr, false);
        let rel = match v.as_str() {
            Some(r) if agentfile_agent_card::is_agent_file(Path::new(r)) => r.trim(),
            _ => {
                self.error(
                    "schema",
                    sp,
                    "`inputs.agent` names an agent definition file (`agents/<name>.agent.md`)"
                        .into(),
                    Some("write the file's path relative to the workflow's folder".into()),
                );
                return None;
            }
        };
        if Path::new(rel).is_absolute()
            || Path::new(rel)
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            self.error(
                "file-contract",
                sp,
                format!("`{rel}` must lie inside the workflow's folder"),
                Some("name the agent file relative to the workflow, without `..`".into()),
            );
            return None;
        }
        if let Some(a) = cx.agents.iter().find(|a| a.name == rel) {
            return Some(a.name.clone());
        }
        let path = cx.dir.join(rel);
        let card = agentfile_agent_card::load_path(
            self.sources,
            self.scripts,
            &path,
            rel,
            Some(sp),
            &mut self.diags,
        )?;
        cx.agents.push(agentfile_plan::AgentDef {
            name: rel.to_owned(),
            source: PromptSource::File {
                path: rel.to_owned(),
            },
            prompt: agentfile_agent_card::literal(&card.persona()),
            profile: None,
            outputs: Vec::new(),
            reads: Vec::new(),
            card: Some(Box::new(card)),
        });
        Some(rel.to_owned())
    }

    fn resolve(&self, id: &str) -> Option<Resolved> {
        if Tool::from_name(id).is_some() {
            return Some(Resolved::Builtin(id.to_owned()));
        }
        if id == "agent" {
            return Some(Resolved::Agent);
        }
        let config = self.config;
        if let Some((server, tool)) = id.split_once('.')
            && config.is_some_and(|c| c.mcp.servers.contains_key(server))
        {
            return Some(Resolved::Mcp(exposed_name(server, tool)));
        }
        let b = config?.tools.get(id)?;
        if let Some(m) = &b.mcp {
            let (server, tool) = m.split_once(':').unwrap_or((m, id));
            return Some(Resolved::Mcp(exposed_name(server, tool)));
        }
        if let Some(argv) = &b.command {
            return Some(Resolved::Command(argv.clone()));
        }
        if let Some(w) = &b.workflow {
            return Some(Resolved::Workflow(w.clone()));
        }
        b.a2a.as_ref().map(|_| Resolved::Remote(id.to_owned()))
    }

    fn unresolved(&self, id: &str, has_contract: bool) -> (String, String) {
        let mut known: Vec<String> = Tool::ALL.into_iter().map(|t| t.name().to_owned()).collect();
        known.push("agent".into());
        if let Some(c) = self.config {
            known.extend(c.tools.keys().cloned());
            known.extend(c.mcp.servers.keys().map(|s| format!("{s}.<tool>")));
        }
        let suggestion = agentfile_plan::diag::suggest(id, known.iter().map(String::as_str))
            .map(|s| format!("did you mean `{s}`? "))
            .unwrap_or_default();
        let msg = if has_contract {
            format!(
                "tool `{id}` has a TOOL.md contract but nothing runs it: the config binds no `[tools.{id}]`"
            )
        } else {
            format!(
                "tool `{id}` does not resolve: it is not a built-in tool, `agent`, an MCP tool `<server>.<tool>` of a configured server, or bound under `[tools.{id}]` in the config"
            )
        };
        let hint = format!(
            "{suggestion}bind it in agent.toml: `[tools.{id}]` with `command = [\"prog\", \"arg\"]` (JSON in on stdin, JSON out on stdout), `mcp = \"server:tool\"` or `workflow = \"<id>\"`; what resolves here: {}",
            known.join(", ")
        );
        (msg, hint)
    }

    /// `.workflows/<id>/WORKFLOW.md`, beside this workflow's folder or in a
    /// `.workflows` folder here or above.
    fn find_workflow(&self, dir: &Path, id: &str) -> Option<PathBuf> {
        if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
            return None;
        }
        if let Some(parent) = dir.parent()
            && parent.file_name().is_some_and(|n| n == ".workflows")
        {
            let p = parent.join(id).join("WORKFLOW.md");
            if p.is_file() {
                return Some(p);
            }
        }
        upward(dir, &Path::new(".workflows").join(id).join("WORKFLOW.md"))
    }

    fn subworkflow(&mut self, cx: &FileCx, id: &str, ptr: &str) -> Option<Plan> {
        let Some(found) = self.find_workflow(&cx.dir, id) else {
            let sp = self.span(cx, ptr, false);
            self.error(
                "unresolved-workflow",
                sp,
                format!("no workflow `{id}`: there is no `.workflows/{id}/WORKFLOW.md` beside this workflow or above it"),
                Some("create it, or fix the id (`agentfile list` shows the workflows)".into()),
            );
            return None;
        };
        let canon = found.canonicalize().unwrap_or(found.clone());
        let here = self.sources.file(cx.file).path.canonicalize().ok();
        if self.stack.contains(&canon) || here.as_ref() == Some(&canon) {
            let sp = self.span(cx, ptr, false);
            self.error(
                "subworkflow-cycle",
                sp,
                format!(
                    "workflow `{id}` runs itself, directly or through the sub-workflows it runs: the cycle would never end"
                ),
                Some(
                    "break the cycle: a workflow may not run itself, directly or through others"
                        .into(),
                ),
            );
            return None;
        }
        if let Some(p) = self.loaded.get(&canon).cloned() {
            if p.is_none() {
                let sp = self.span(cx, ptr, false);
                self.error(
                    "unresolved-workflow",
                    sp,
                    format!("workflow `{id}` ({}) has errors", found.display()),
                    Some("fix the errors reported in that file".into()),
                );
            }
            return p;
        }
        if self.stack.len() >= MAX_NESTING {
            let sp = self.span(cx, ptr, false);
            self.error(
                "subworkflow-cycle",
                sp,
                format!("sub-workflows nest more than {MAX_NESTING} deep"),
                None,
            );
            return None;
        }
        let text = match std::fs::read(&found) {
            Ok(b) if b.len() as u64 <= agentfile_syntax::MAX_WORKFLOW_BYTES => {
                String::from_utf8_lossy(&b).into_owned()
            }
            _ => {
                let sp = self.span(cx, ptr, false);
                self.error(
                    "unresolved-workflow",
                    sp,
                    format!("cannot read workflow `{id}` at {}", found.display()),
                    None,
                );
                return None;
            }
        };
        let file = self.sources.add(found.clone(), text);
        if let Some(h) = here
            && self.stack.is_empty()
        {
            self.stack.push(h);
        }
        self.stack.push(canon.clone());
        let errors_before = self.diags.iter().filter(|d| d.is_error()).count();
        let plan = self.load(file);
        self.stack.pop();
        let failed = self.diags.iter().filter(|d| d.is_error()).count() > errors_before;
        let plan = if failed { None } else { plan };
        if failed {
            let sp = self.span(cx, ptr, false);
            self.error(
                "unresolved-workflow",
                sp,
                format!("workflow `{id}` ({}) has errors", found.display()),
                Some("fix the errors reported in that file".into()),
            );
        }
        self.loaded.insert(canon, plan.clone());
        plan
    }
}

/// A regular file's text, read no further than one byte past the largest
/// workflow (a FIFO or `/dev/zero` named by a hostile file is refused, not
/// read forever).
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(agentfile_syntax::MAX_WORKFLOW_BYTES + 1)
        .read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `rel` in `dir` or the nearest folder above it that has it; shown relative
/// to the current folder when it lies below, so diagnostics name the paths a
/// user would type.
fn upward(dir: &Path, rel: &Path) -> Option<PathBuf> {
    let base = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let abs = base.canonicalize().ok()?;
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|c| c.canonicalize().ok());
    abs.ancestors()
        .take(8)
        .map(|d| d.join(rel))
        .find(|p| p.is_file())
        .map(
            |p| match cwd.as_ref().and_then(|c| p.strip_prefix(c).ok()) {
                Some(rel) => rel.to_path_buf(),
                None => p,
            },
        )
}

/// Every string scalar under `v` (not inside nested `steps` lists, which
/// belong to other steps), with its pointer.
fn scalars(v: &Value, ptr: &str, f: &mut dyn FnMut(&str, &str)) {
    let mut stack = vec![(v, ptr.to_owned())];
    while let Some((v, p)) = stack.pop() {
        match v {
            Value::String(s) => f(&p, s),
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate().rev() {
                    stack.push((x, format!("{p}/{i}")));
                }
            }
            Value::Object(o) => {
                let entries: Vec<_> = o.iter().filter(|(k, _)| *k != "steps").collect();
                for (k, x) in entries.into_iter().rev() {
                    stack.push((x, format!("{p}/{}", segment(k))));
                }
            }
            _ => {}
        }
    }
}

fn graph_hint(code: &str) -> &'static str {
    match code {
        "dangling-next" => "route to the id of a step in the same list, or `$end`",
        "unreachable" => "route to it from another step (`next`, a branch), or remove it",
        "cycle" => "to repeat steps, put them in a `kind: loop` step with `max_iterations`",
        "duplicate-id" => "give every step of one list its own id",
        "bad-id" => "ids are lowercase letters, digits and dashes",
        _ => "fix the step's definition",
    }
}

fn approval_class(s: &str) -> Option<ApprovalClass> {
    match s {
        "auto" => Some(ApprovalClass::Auto),
        "always" => Some(ApprovalClass::Always),
        "on-mutate" => Some(ApprovalClass::OnMutate),
        // A named policy is not ours to evaluate: ask.
        s if s.starts_with("policy:") => Some(ApprovalClass::Always),
        _ => None,
    }
}

/// A suspend step: the events that resume it and how long it waits.
fn suspend_step(s: &Value) -> NodeKind {
    let resume = s.get("resume").cloned().unwrap_or(Value::Null);
    NodeKind::Suspend {
        events: match resume.get("on") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        },
        timeout_ms: resume.get("timeout_ms").and_then(Value::as_u64),
        on_timeout: str_at(&resume, "on_timeout").map_or(OnTimeout::Fail, OnTimeout::parse),
    }
}

fn retry_of(v: &Value) -> Option<Retry> {
    let max_attempts = v.get("max_attempts")?.as_u64()?.clamp(1, 20) as u32;
    let backoff = match v.get("backoff").and_then(Value::as_str) {
        Some("fixed") => Backoff::Fixed,
        Some("linear") => Backoff::Linear,
        _ => Backoff::Exponential,
    };
    Some(Retry {
        max_attempts,
        backoff,
        initial_ms: v.get("initial_ms").and_then(Value::as_u64).unwrap_or(0),
    })
}

/// The plan's inputs from an `inputs` JSON Schema's properties.
fn inputs_of(schema: Option<&Value>) -> Vec<InputDef> {
    let Some(s) = schema else {
        return Vec::new();
    };
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = s.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, p)| {
            let default = p.get("default").map(|d| match d {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            let required =
                required.contains(&name.as_str()) && default.is_none() && name != FS_ROOT_FIELD;
            InputDef {
                name: name.clone(),
                default,
                required,
                env: None,
            }
        })
        .collect()
}

/// Why `key` cannot be a file name in the scratch folder, if it cannot.
fn file_key_problem(key: &str) -> Option<&'static str> {
    if key.is_empty() || key == "." || key == ".." {
        Some("it is not a file name")
    } else if key.contains(['/', '\\', '\0']) {
        Some("it holds a path separator")
    } else if key.len() > 200 {
        Some("it is longer than 200 bytes")
    } else {
        None
    }
}

/// Why a file contract's `path` cannot be used, if it cannot: it must stay
/// inside the workspace, and only outputs take `<token>`s.
fn file_path_problem(path: &str, output: bool) -> Option<String> {
    let p = std::path::Path::new(path);
    if p.is_absolute() || path.starts_with('~') {
        return Some("the path must be relative to the workspace".into());
    }
    if p.components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Some("the path must not leave the workspace (`..`)".into());
    }
    let mut rest = path;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else { break };
        let token = &after[..close];
        if !output {
            return Some(format!(
                "`<{token}>` is filled in only in `outputsFiles` paths"
            ));
        }
        if !FILE_TOKENS.contains(&token) {
            return Some(format!(
                "`<{token}>` is not a token a workflow's path can use (use {})",
                FILE_TOKENS
                    .iter()
                    .map(|t| format!("`<{t}>`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        rest = &after[close + 1..];
    }
    None
}

/// The tokens an `outputsFiles` path may hold.
pub const FILE_TOKENS: &[&str] = &["runId", "workflowId", "isoDate"];

/// Whether any step under `v` names an `action:`.
/// The steps of a workflow's front matter: `steps`, and the step lists
/// inside them (loop, map and parallel branch steps), at any depth.
fn count_steps(root: &Value) -> usize {
    let mut n = 0;
    let mut lists: Vec<&Value> = root.get("steps").into_iter().collect();
    while let Some(list) = lists.pop() {
        let Some(steps) = list.as_array() else {
            continue;
        };
        n += steps.len();
        for s in steps {
            lists.extend(s.get("steps"));
            if let Some(Value::Array(bs)) = s.get("branches") {
                lists.extend(bs.iter().filter_map(|b| b.get("steps")));
            }
        }
    }
    n
}

/// Boolean `when:`s of branch steps and `while:`s of loop steps, in `steps`
/// and the step lists inside them: (pointer, value).
fn boolean_conditions(steps: &Value, ptr: &str, out: &mut Vec<(String, bool)>) {
    let Some(steps) = steps.as_array() else {
        return;
    };
    for (i, s) in steps.iter().enumerate() {
        let p = format!("{ptr}/{i}");
        let branches = s.get("branches").and_then(Value::as_array);
        match str_at(s, "kind") {
            Some("branch") => {
                for (j, b) in branches.into_iter().flatten().enumerate() {
                    if let Some(Value::Bool(v)) = b.get("when") {
                        out.push((format!("{p}/branches/{j}/when"), *v));
                    }
                }
            }
            Some("loop") => {
                if let Some(Value::Bool(v)) = s.get("while") {
                    out.push((format!("{p}/while"), *v));
                }
            }
            Some("parallel") => {
                for (j, b) in branches.into_iter().flatten().enumerate() {
                    if let Some(inner) = b.get("steps") {
                        boolean_conditions(inner, &format!("{p}/branches/{j}/steps"), out);
                    }
                }
            }
            _ => {}
        }
        if let Some(inner) = s.get("steps") {
            boolean_conditions(inner, &format!("{p}/steps"), out);
        }
    }
}

fn has_action(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().any(has_action),
        Value::Object(o) => o.contains_key("action") || o.values().any(has_action),
        _ => false,
    }
}

/// Rewrite `action:` steps (anywhere under `steps`) as `tool:` steps, for the
/// published schema, which knows only the latter.
fn actions_as_tools(v: &mut Value) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(actions_as_tools),
        Value::Object(o) => {
            let step = o.contains_key("id") && o.get("kind").is_none_or(|k| k == "tool");
            if step && o.get("action").is_some_and(Value::is_string) {
                o.remove("action");
                o.entry("tool").or_insert_with(|| json!("action-ref"));
            }
            o.values_mut().for_each(actions_as_tools);
        }
        _ => {}
    }
}

/// The plan of a WORKFLOW.md, from its front matter and what was lowered.
fn plan_of(
    root: &Value,
    path: &Path,
    cx: &mut FileCx,
    graph: Node,
    result: Option<ValueExpr>,
    files: FileContract,
) -> Plan {
    let id = str_at(root, "id").unwrap_or("workflow").to_owned();
    let input_schema = root.get("inputs").filter(|v| v.is_object()).cloned();
    Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        name: str_at(root, "name").unwrap_or(&id).to_owned(),
        id: Some(id.clone()),
        description: str_at(root, "description").map(|d| d.trim().to_owned()),
        format: "workflow-md".into(),
        path: path.display().to_string(),
        inputs: inputs_of(input_schema.as_ref()),
        agents: std::mem::take(&mut cx.agents),
        goals: std::mem::take(&mut cx.goals),
        steps: Vec::new(),
        security: None,
        graph,
        timeout_ms: root.get("timeout_ms").and_then(Value::as_u64),
        max_steps: root
            .get("max_steps")
            .and_then(Value::as_u64)
            .map(|n| n.min(u64::from(u32::MAX)) as u32),
        input_schema,
        output_schema: root.get("outputs").filter(|v| v.is_object()).cloned(),
        result,
        fingerprint: String::new(),
        files,
        execution: None,
        protected: Vec::new(),
        root: Default::default(),
        output_names: root
            .get("result")
            .and_then(Value::as_object)
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default(),
        unmapped: agentfile_plan::Unmapped::LastStep,
        declared: None,
        triggers: Vec::new(),
        package: None,
        version: str_at(root, "version").map(|v| v.trim().to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of its own for each test.
    fn folder() -> PathBuf {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("agentfile-wmd-trig-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A WORKFLOW.md in `dir` with `extra` front-matter lines, analyzed.
    fn analyze_in(
        dir: &Path,
        extra: &str,
        config: Option<&Config>,
    ) -> (Vec<Diagnostic>, Option<Plan>, SourceMap) {
        let text = format!(
            "---\nname: N\nid: nightly\ndescription: d\nversion: 1.0.0\ninputs: {{ type: object }}\noutputs: {{ type: object }}\n{extra}steps:\n  - id: look\n    kind: tool\n    tool: ls\n    inputs: {{ path: \".\" }}\n---\n"
        );
        let mut sources = SourceMap::default();
        let file = sources.add(dir.join("WORKFLOW.md"), text);
        let (d, p) = analyze(
            &mut sources,
            file,
            Options {
                config,
                ..Options::default()
            },
        );
        (d, p, sources)
    }

    fn codes(d: &[Diagnostic], s: &SourceMap) -> Vec<(String, String)> {
        d.iter()
            .map(|d| {
                (
                    d.code.to_owned(),
                    d.span
                        .map(|sp| s.snippet(sp).to_owned())
                        .unwrap_or_default(),
                )
            })
            .collect()
    }

    #[test]
    fn every_trigger_kind_is_declared_without_a_warning() {
        let dir = folder();
        let (d, plan, _) = analyze_in(
            &dir,
            "triggers:\n  - kind: manual\n  - kind: schedule\n    cron: \"0 9 * * MON\"\n    timezone: Europe/Paris\n  - kind: webhook\n    path: /hook\n  - kind: event\n    name: deploy.done\n",
            None,
        );
        assert!(d.is_empty(), "{d:?}");
        let t = plan.unwrap().triggers;
        let kinds: Vec<_> = t.iter().map(|t| (t.id.as_str(), t.kind.name())).collect();
        assert_eq!(
            kinds,
            [
                ("nightly#0", "manual"),
                ("nightly#1", "schedule"),
                ("nightly#2", "webhook"),
                ("nightly#3", "event")
            ]
        );
        assert_eq!(t[1].schedule.as_ref().unwrap().timezone, "Europe/Paris");
        assert_eq!(
            t[2].webhook.as_ref().unwrap().secret_env,
            "AGENTFILE_WEBHOOK_SECRET"
        );
        assert_eq!(t[3].at.as_ref().map(|a| (a.line, a.column)), Some((15, 5)));
    }

    #[test]
    fn bad_cron_and_zone_are_errors_at_their_fields() {
        let dir = folder();
        let (d, plan, s) = analyze_in(
            &dir,
            "triggers:\n  - kind: schedule\n    cron: \"0 9 * * FUNDAY\"\n  - kind: schedule\n    cron: \"@daily\"\n    timezone: Europe/Pariss\n  - kind: sometimes\n",
            None,
        );
        assert!(plan.is_none());
        let c = codes(&d, &s);
        assert_eq!(
            c,
            [
                ("bad-schedule".to_owned(), "\"0 9 * * FUNDAY\"".to_owned()),
                ("bad-schedule".to_owned(), "Europe/Pariss".to_owned()),
                ("unknown-trigger".to_owned(), "sometimes".to_owned()),
            ]
        );
        assert!(d[0].message.contains("FUNDAY"), "{}", d[0].message);
        assert!(d[2].message.contains("schedule, webhook, event or manual"));
    }

    #[test]
    fn routines_inline_and_file_are_schedules_and_ref_is_refused() {
        let dir = folder();
        std::fs::create_dir_all(dir.join(".routines/q")).unwrap();
        std::fs::write(
            dir.join(".routines/q/ROUTINE.md"),
            "---\nid: q\nschedule: { kind: cron, cron: \"0 6 1 */3 *\" }\nidentity: bot://q\n---\n# Q\n",
        )
        .unwrap();
        let (d, plan, _) = analyze_in(
            &dir,
            "triggers:\n  - kind: manual\nroutines:\n  - inline:\n      schedule: { kind: cron, cron: \"0 9 * * *\", timezone: UTC }\n      identity: bot://x\n  - file: ./.routines/q/ROUTINE.md\n",
            None,
        );
        assert!(d.is_empty(), "{d:?}");
        let t = plan.unwrap().triggers;
        assert_eq!(t.len(), 3);
        assert_eq!(t[1].id, "nightly#1");
        assert_eq!(t[1].routine.as_ref().unwrap().source, RoutineSource::Inline);
        let r = t[2].routine.as_ref().unwrap();
        assert!(matches!(&r.source, RoutineSource::File { path } if path.ends_with("ROUTINE.md")));
        assert_eq!(r.identity.as_deref(), Some("bot://q"));
        assert_eq!(t[2].schedule.as_ref().unwrap().cron, "0 6 1 */3 *");
        assert!(t[2].at.as_ref().unwrap().file.ends_with("ROUTINE.md"));

        // A bad ROUTINE.md is reported in it, and at the entry naming it.
        std::fs::write(
            dir.join(".routines/q/ROUTINE.md"),
            "---\nschedule: { cron: \"0 6 1 */3 *\", timezone: Mars/Base }\n---\n",
        )
        .unwrap();
        let (d, _, s) = analyze_in(
            &dir,
            "routines:\n  - ref: \"@agentik/routines-standard/daily\"\n  - file: ./.routines/q/ROUTINE.md\n",
            None,
        );
        let c = codes(&d, &s);
        assert_eq!(
            c,
            [
                (
                    "routine-ref".to_owned(),
                    "\"@agentik/routines-standard/daily\"".to_owned()
                ),
                ("bad-schedule".to_owned(), "Mars/Base".to_owned()),
                ("routine".to_owned(), "./.routines/q/ROUTINE.md".to_owned()),
            ]
        );
        assert!(
            d[0].message.contains("routine registry"),
            "{}",
            d[0].message
        );
        assert!(s.location(d[1].span.unwrap()).contains("ROUTINE.md:2:"));
    }

    #[test]
    fn routine_files_stay_in_the_workflow_folder_and_are_regular_files() {
        let dir = folder();
        for outside in ["/dev/zero", "../../etc/ROUTINE.md"] {
            let (d, _, _) = analyze_in(&dir, &format!("routines:\n  - file: {outside}\n"), None);
            assert_eq!(d.len(), 1, "{d:?}");
            assert!(
                d[0].message.contains("outside the workflow's folder"),
                "{}",
                d[0].message
            );
        }
        std::fs::create_dir_all(dir.join(".routines/dir/ROUTINE.md")).unwrap();
        let (d, _, _) = analyze_in(
            &dir,
            "routines:\n  - file: .routines/dir/ROUTINE.md\n",
            None,
        );
        assert!(
            d[0].message.contains("not a regular file"),
            "{}",
            d[0].message
        );
    }

    #[test]
    fn webhooks_need_the_listener_when_the_config_is_known() {
        let dir = folder();
        let hook = "triggers:\n  - kind: webhook\n    path: /hook\n";
        let mut config = Config::default();
        let (d, _, s) = analyze_in(&dir, hook, Some(&config));
        assert_eq!(
            codes(&d, &s),
            [("webhooks-disabled".to_owned(), "webhook".to_owned())]
        );
        assert!(
            d[0].message
                .contains("[daemon] webhooks = \"127.0.0.1:8787\"")
        );
        config
            .other
            .insert("daemon".into(), json!({"webhooks": "127.0.0.1:8787"}));
        let (d, plan, _) = analyze_in(&dir, hook, Some(&config));
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(plan.unwrap().triggers.len(), 1);
    }

    #[test]
    fn no_triggers_serialize_as_before() {
        let dir = folder();
        let (d, plan, _) = analyze_in(&dir, "", None);
        assert!(d.is_empty(), "{d:?}");
        let v = serde_json::to_value(plan.unwrap()).unwrap();
        assert!(v.get("triggers").is_none());
    }
}
