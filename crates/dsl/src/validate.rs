//! The Agentfile validator: a syntax tree in, every problem and (when there are
//! none) a [`Plan`] out.
//!
//! It reads the prompt files the workflow names (relative to the Agentfile), so
//! problems inside them are reported against *their* lines too. It walks the steps
//! in execution order to decide which `$variables` exist at each point: an input
//! always, a goal's output (and its `-> fields`) once that goal has run, and inside
//! a LOOP or CONVERGE the previous iteration's outputs as well.
//!
//! What it deliberately does not do: talk to a model, run a tool, or check that a
//! profile's provider is reachable. It only reads files.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::ast::{self, GoalKind, Item, Limit, Source, StepKind, Supervision};
use super::template;
use agentfile_config::Config;
use agentfile_plan::diag::{Diagnostic, FileId, SourceMap, Span, suggest};
use agentfile_plan::{self as plan, Plan};

/// Prompt files larger than this are refused: a persona is text, and reading a
/// huge or endless file (`FROM /dev/zero`) must not hang `validate`.
pub const MAX_PROMPT_BYTES: u64 = 1 << 20;

/// What validation may consult besides the workflow folder.
#[derive(Debug, Default, Clone, Copy)]
pub struct Options<'a> {
    /// The loaded config, for REQUIRES profiles and `skills.paths`. `None`: no
    /// config was found, so profiles cannot be checked (a warning, not an error:
    /// the same workflow runs under different configs).
    pub config: Option<&'a Config>,
}

/// The security modes the runtime knows.
/// Goals one RUN or LOOP step may list: each goal of a step is shown the
/// outputs of every goal before it in the step, so a step's plan grows with
/// the square of its length (20,000 goals in one step took more than 4 GiB).
pub const MAX_STEP_GOALS: usize = 64;

/// Goals the steps of one workflow may list together (a goal listed in two
/// steps counts twice): each is a node of the plan, with its context.
pub const MAX_GOAL_RUNS: usize = 20_000;

const SECURITY_MODES: &[&str] = &["default", "paranoid", "research"];

/// Validate a parsed Agentfile. `file` is its id in `map`; prompt files are added
/// to `map` as they are read.
pub fn validate(
    map: &mut SourceMap,
    file: FileId,
    tree: &ast::File,
    opts: Options<'_>,
) -> (Vec<Diagnostic>, Option<Plan>) {
    let path = map.file(file).path.clone();
    // An empty parent means the current folder; joining onto it keeps paths as
    // the user wrote them (`agents/x.md`, not `./agents/x.md`).
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut v = Validator {
        map,
        file,
        dir,
        opts,
        diags: Vec::new(),
        goal_refs: HashMap::default(),
        dir_listings: HashMap::default(),
    };
    let plan = v.run(tree);
    let has_errors = v.diags.iter().any(Diagnostic::is_error);
    (v.diags, if has_errors { None } else { plan })
}

struct Validator<'m, 'o> {
    map: &'m mut SourceMap,
    file: FileId,
    dir: PathBuf,
    opts: Options<'o>,
    diags: Vec<Diagnostic>,
    /// The names each goal's prompt refers to, worked out once per goal for
    /// the cycle check (which may ask about one producer many times).
    goal_refs: HashMap<usize, HashSet<String>>,
    /// File names in each folder a missing FROM file was looked for in, read
    /// once per folder for did-you-mean hints.
    dir_listings: HashMap<PathBuf, Arc<[String]>>,
}

/// A loaded prompt: its text, where it came from, and where to scan it for
/// `$variables` (a file id and the byte offset of the text in that file).
#[derive(Clone)]
struct Prompt {
    text: String,
    source: plan::PromptSource,
    at: Option<(FileId, usize, usize)>,
    /// An agent file's card (`AGENT x FROM x.agent.md`).
    card: Option<Box<plan::agent::AgentCard>>,
}

/// What a variable name refers to.
#[derive(Clone, Copy)]
enum VarDef {
    Input {
        span: Span,
    },
    /// A goal's whole output (`$goal`).
    Goal {
        goal: usize,
        span: Span,
    },
    /// A structured field (`-> field`) of a goal.
    Field {
        goal: usize,
        span: Span,
    },
}

impl VarDef {
    fn span(self) -> Span {
        match self {
            VarDef::Input { span } | VarDef::Goal { span, .. } | VarDef::Field { span, .. } => span,
        }
    }

    fn goal(self) -> Option<usize> {
        match self {
            VarDef::Input { .. } => None,
            VarDef::Goal { goal, .. } | VarDef::Field { goal, .. } => Some(goal),
        }
    }
}

impl Validator<'_, '_> {
    fn error(&mut self, code: &'static str, span: Span, msg: impl Into<String>) -> &mut Diagnostic {
        self.diags.push(Diagnostic::error(code, span, msg));
        self.diags.last_mut().expect("just pushed")
    }

    fn warning(
        &mut self,
        code: &'static str,
        span: Span,
        msg: impl Into<String>,
    ) -> &mut Diagnostic {
        self.diags.push(Diagnostic::warning(code, span, msg));
        self.diags.last_mut().expect("just pushed")
    }

    fn line_of(&self, span: Span) -> u32 {
        self.map.file(span.file).line(span.start)
    }

    fn run(&mut self, tree: &ast::File) -> Option<Plan> {
        // ---- Collect definitions in file order. -------------------------------
        let mut name: Option<(String, Span)> = None;
        let mut inputs: Vec<&ast::Input> = Vec::new();
        let mut agents: Vec<(usize, &ast::Agent)> = Vec::new();
        let mut goals: Vec<(usize, &ast::Goal, Option<Supervision>)> = Vec::new();
        let mut steps: Vec<(usize, &ast::Step)> = Vec::new();
        let mut security: Option<(String, Span)> = None;
        let mut global_supervision: Option<Supervision> = None;

        for (pos, item) in tree.items.iter().enumerate() {
            match item {
                Item::Name { value, keyword } => {
                    let span = keyword.to(value.span());
                    if let Some((_, first)) = &name {
                        let first = *first;
                        self.error("duplicate-name", span, "NAME is given more than once")
                            .note(first, "first given here");
                        let d = self.diags.last_mut().expect("pushed");
                        d.hint = Some("a workflow has exactly one NAME; remove this line".into());
                    } else {
                        name = Some((value.as_str().to_owned(), span));
                        if value.as_str().trim().is_empty() {
                            self.error("syntax", span, "the workflow NAME is empty");
                        }
                    }
                }
                Item::Input(i) => inputs.push(i),
                Item::Agent(a) => agents.push((pos, a)),
                Item::Goal(g) => {
                    goals.push((pos, g, g.supervision.map(|s| s.0).or(global_supervision)))
                }
                Item::Step(s) => steps.push((pos, s)),
                Item::Supervision { mode, .. } => global_supervision = Some(*mode),
                Item::Security { mode, keyword } => {
                    let span = keyword.to(mode.span);
                    if let Some((_, first)) = &security {
                        let first = *first;
                        self.error("duplicate-name", span, "SECURITY is given more than once")
                            .note(first, "first given here");
                    } else {
                        if !SECURITY_MODES.contains(&mode.name.as_str()) {
                            let hint = match suggest(&mode.name, SECURITY_MODES.iter().copied()) {
                                Some(s) => format!("did you mean `{s}`?"),
                                None => format!("known modes: {}", SECURITY_MODES.join(", ")),
                            };
                            self.warning(
                                "unknown-security-mode",
                                mode.span,
                                format!("unknown security mode `{}`", mode.name),
                            )
                            .hint = Some(hint);
                        }
                        security = Some((mode.name.clone(), span));
                    }
                }
            }
        }

        if name.is_none() {
            let span = Span::new(self.file, 0, 0);
            self.error("missing-name", span, "the workflow has no NAME")
                .hint = Some("add a line such as `NAME my-workflow` at the top".into());
        }

        // ---- Namespaces and duplicates. ----------------------------------------
        let mut vars: HashMap<&str, VarDef> = HashMap::default();
        for i in &inputs {
            self.define_var(
                &mut vars,
                &i.name,
                VarDef::Input { span: i.name.span },
                "input",
            );
        }
        let mut agent_index: HashMap<&str, usize> = HashMap::default();
        for (n, (_, a)) in agents.iter().enumerate() {
            if let Some(&first) = agent_index.get(a.name.name.as_str()) {
                let first = agents[first].1.name.span;
                self.duplicate(&a.name, first, "agent");
            } else {
                agent_index.insert(&a.name.name, n);
            }
        }
        let mut goal_index: HashMap<&str, usize> = HashMap::default();
        let mut field_owner: HashMap<&str, (usize, Span)> = HashMap::default();
        for (n, (_, g, _)) in goals.iter().enumerate() {
            if let Some(&first) = goal_index.get(g.name.name.as_str()) {
                let first = goals[first].1.name.span;
                self.duplicate(&g.name, first, "goal");
                continue;
            }
            goal_index.insert(&g.name.name, n);
            self.define_var(
                &mut vars,
                &g.name,
                VarDef::Goal {
                    goal: n,
                    span: g.name.span,
                },
                "goal",
            );
            let mut seen: HashSet<&str> = HashSet::default();
            for f in &g.outputs {
                if !seen.insert(&f.name) {
                    self.error(
                        "duplicate-name",
                        f.span,
                        format!("output field `{}` is listed twice", f.name),
                    );
                    continue;
                }
                if let Some(&(owner, other_span)) = field_owner.get(f.name.as_str()) {
                    let other = goals[owner].1.name.name.clone();
                    self.warning(
                        "duplicate-output",
                        f.span,
                        format!("output field `{}` is also set by goal `{other}`; the later value replaces the earlier", f.name),
                    )
                    .note(other_span, "also declared here");
                    continue;
                }
                field_owner.insert(&f.name, (n, f.span));
                self.define_var(
                    &mut vars,
                    f,
                    VarDef::Field {
                        goal: n,
                        span: f.span,
                    },
                    "output field",
                );
            }
        }
        // Did-you-mean candidates, one shared list per namespace, searched only
        // for the diagnostics that are shown.
        let pool = |names: Vec<&str>| -> Arc<[String]> {
            names
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
                .into()
        };
        let agent_pool = pool(agent_index.keys().copied().collect());
        let goal_pool = pool(goal_index.keys().copied().collect());
        let var_pool = pool(vars.keys().copied().collect());
        let input_pool = pool(inputs.iter().map(|i| i.name.name.as_str()).collect());
        let input_by_name: HashMap<&str, &ast::Input> =
            inputs.iter().map(|i| (i.name.name.as_str(), *i)).collect();
        let broken: HashSet<&str> = tree.broken.iter().map(String::as_str).collect();
        let mut step_names: HashMap<&str, Span> = HashMap::default();
        for (_, s) in &steps {
            if let Some(&first) = step_names.get(s.name.name.as_str()) {
                self.duplicate(&s.name, first, "step");
            } else {
                step_names.insert(&s.name.name, s.name.span);
            }
        }
        if tree.steps_attempted == 0 {
            let span = name
                .as_ref()
                .map(|n| n.1)
                .or_else(|| tree.items.first().map(item_span))
                .unwrap_or(Span::new(self.file, 0, 0));
            let hint = match goals.first() {
                Some((_, g, _)) => format!("add `RUN main USING {}` to run it", g.name.name),
                None => "define a GOAL and add `RUN main USING <goal>`".to_owned(),
            };
            self.error(
                "no-steps",
                span,
                "the workflow has no RUN or LOOP step, so it would do nothing",
            )
            .hint = Some(hint);
        }

        // ---- Prompts. ----------------------------------------------------------
        let agent_prompts: Vec<Option<Prompt>> = agents
            .iter()
            .map(|(_, a)| self.load_prompt(&a.source, PromptUse::Agent))
            .collect();
        let goal_prompts: Vec<Option<Prompt>> = goals
            .iter()
            .map(|(_, g, _)| self.load_prompt(&g.source, PromptUse::Goal))
            .collect();
        for (n, (_, g, _)) in goals.iter().enumerate() {
            if let Some(p) = &goal_prompts[n]
                && p.text.trim().is_empty()
            {
                self.error(
                    "empty-prompt",
                    g.source.span(),
                    format!("goal `{}` has an empty outcome", g.name.name),
                )
                .hint = Some("say what the goal should achieve".into());
            }
        }
        for (n, (_, a)) in agents.iter().enumerate() {
            if let Some(p) = &agent_prompts[n]
                && p.text.trim().is_empty()
            {
                self.error(
                    "empty-prompt",
                    a.source.span(),
                    format!("agent `{}` has an empty prompt", a.name.name),
                )
                .hint = Some("describe the persona the agent should take".into());
            }
            if let Some(req) = &a.requires {
                self.check_profile(req);
            }
        }

        // ---- References: agents in GOAL … USING, goals in RUN/LOOP. ------------
        for (gpos, g, _) in &goals {
            let mut seen: HashSet<&str> = HashSet::default();
            for u in &g.using {
                if !seen.insert(&u.name) {
                    self.error(
                        "duplicate-name",
                        u.span,
                        format!("agent `{}` is listed twice in USING", u.name),
                    );
                    continue;
                }
                match agent_index.get(u.name.as_str()) {
                    Some(&n) if agents[n].0 > *gpos => {
                        let def = agents[n].1.name.span;
                        let line = self.line_of(def);
                        self.error(
                            "use-before-definition",
                            u.span,
                            format!("agent `{}` is used before it is defined", u.name),
                        )
                        .note(def, "defined here");
                        let d = self.diags.last_mut().expect("pushed");
                        d.hint = Some(format!("move the AGENT line (line {line}) above this goal"));
                    }
                    Some(_) => {}
                    None if broken.contains(u.name.as_str()) => {}
                    None => {
                        let mut d = Diagnostic::error(
                            "undefined-agent",
                            u.span,
                            format!("undefined agent `{}`", u.name),
                        );
                        d.suggest_later(&u.name, &agent_pool, "");
                        d.hint = Some(match () {
                            () if goal_index.contains_key(u.name.as_str()) => format!(
                                "`{}` is a goal; a goal's USING names agents (define one with `AGENT {} \"…\"`)",
                                u.name, u.name
                            ),
                            () => format!(
                                "define it with `AGENT {} FROM agents/{}.md`",
                                u.name, u.name
                            ),
                        });
                        self.diags.push(d);
                    }
                }
            }
            if let Some(l) = &g.within {
                self.check_limit(l, &input_by_name, &input_pool, &vars);
            }
        }
        let mut runs = 0usize;
        for (spos, s) in &steps {
            if let Some(extra) = s.goals.get(MAX_STEP_GOALS) {
                self.error(
                    "too-large",
                    extra.span,
                    format!(
                        "step `{}` lists {} goals; a step lists at most {MAX_STEP_GOALS}",
                        s.name.name,
                        s.goals.len()
                    ),
                )
                .hint = Some("each goal of a step is shown the outputs of the goals before it: split the step (`RUN a USING …` then `RUN b USING …`)".into());
                continue;
            }
            runs += s.goals.len();
            if runs > MAX_GOAL_RUNS {
                self.error(
                    "too-large",
                    s.name.span,
                    format!("the steps list more than {MAX_GOAL_RUNS} goals together (a goal in two steps counts twice); this is where the count passes it"),
                )
                .hint = Some("split the workflow into several, or run fewer goals".into());
                break;
            }
            let mut seen: HashSet<&str> = HashSet::default();
            for r in &s.goals {
                if !seen.insert(&r.name) {
                    self.warning(
                        "repeated-goal",
                        r.span,
                        format!(
                            "goal `{}` is listed twice in step `{}`; it will run twice",
                            r.name, s.name.name
                        ),
                    );
                }
                match goal_index.get(r.name.as_str()) {
                    Some(&n) if goals[n].0 > *spos => {
                        let def = goals[n].1.name.span;
                        let line = self.line_of(def);
                        self.error(
                            "use-before-definition",
                            r.span,
                            format!("goal `{}` is used before it is defined", r.name),
                        )
                        .note(def, "defined here");
                        let d = self.diags.last_mut().expect("pushed");
                        d.hint = Some(format!(
                            "move the goal's definition (line {line}) above this step"
                        ));
                    }
                    Some(_) => {}
                    None if broken.contains(r.name.as_str()) => {}
                    None => {
                        let mut d = Diagnostic::error(
                            "undefined-goal",
                            r.span,
                            format!("undefined goal `{}`", r.name),
                        );
                        d.suggest_later(&r.name, &goal_pool, "");
                        d.hint = Some(match () {
                            () if agent_index.contains_key(r.name.as_str()) => format!(
                                "`{}` is an agent; steps run goals (use it in a goal: `GOAL x \"…\" USING {}`)",
                                r.name, r.name
                            ),
                            () => {
                                format!("define it with `GOAL {} \"…\"` above this step", r.name)
                            }
                        });
                        self.diags.push(d);
                    }
                }
            }
            if let Some(l) = &s.within {
                self.check_limit(l, &input_by_name, &input_pool, &vars);
            }
        }

        // ---- Variables, in execution order. ------------------------------------
        let mut scope: HashSet<&str> = inputs.iter().map(|i| i.name.name.as_str()).collect();
        let mut read_vars: HashSet<String> = HashSet::default();
        let mut goal_checked = vec![false; goals.len()];
        let mut agent_checked = vec![false; agents.len()];
        let mut goal_reads: Vec<Vec<String>> = vec![Vec::new(); goals.len()];
        let mut agent_reads: Vec<Vec<String>> = vec![Vec::new(); agents.len()];

        for (_, s) in &steps {
            let in_loop = s.kind == StepKind::Loop;
            // Inside a loop, every goal of the body may read what the body
            // produced in the previous iteration.
            let carried: HashSet<&str> = if in_loop {
                s.goals
                    .iter()
                    .filter_map(|r| goal_index.get(r.name.as_str()))
                    .flat_map(|&n| produced(goals[n].1))
                    .collect()
            } else {
                HashSet::default()
            };
            for r in &s.goals {
                let Some(&n) = goal_index.get(r.name.as_str()) else {
                    continue;
                };
                let g = goals[n].1;
                if !goal_checked[n] {
                    goal_checked[n] = true;
                    let iterative = in_loop || g.kind == GoalKind::Converge;
                    let ctx = RefCtx {
                        goal: Some(n),
                        iterative,
                        scope: &scope,
                        carried: &carried,
                        vars: &vars,
                        all_names: &var_pool,
                        goals: &goals,
                        goal_prompts: &goal_prompts,
                    };
                    if let Some(p) = &goal_prompts[n] {
                        goal_reads[n] = self.check_refs(p, &ctx, ("goal", &g.name.name));
                    }
                    for u in &g.using {
                        if let Some(&an) = agent_index.get(u.name.as_str())
                            && !agent_checked[an]
                        {
                            agent_checked[an] = true;
                            if let Some(p) = &agent_prompts[an] {
                                agent_reads[an] = self.check_refs(p, &ctx, ("agent", &u.name));
                            }
                        }
                    }
                }
                scope.extend(produced(g));
            }
        }
        // Whatever never runs is still checked against every name, and flagged.
        let everything: HashSet<&str> = vars.keys().copied().collect();
        let none = HashSet::default();
        for (n, (_, g, _)) in goals.iter().enumerate() {
            if goal_checked[n] || goal_index.get(g.name.name.as_str()) != Some(&n) {
                continue;
            }
            self.warning(
                "unused-goal",
                g.name.span,
                format!("goal `{}` is defined but no step runs it", g.name.name),
            )
            .hint = Some("add it to a RUN or LOOP step, or remove it".into());
            let ctx = RefCtx {
                goal: Some(n),
                iterative: true,
                scope: &everything,
                carried: &none,
                vars: &vars,
                all_names: &var_pool,
                goals: &goals,
                goal_prompts: &goal_prompts,
            };
            if let Some(p) = &goal_prompts[n] {
                goal_reads[n] = self.check_refs(p, &ctx, ("goal", &g.name.name));
            }
        }
        let used_agents: HashSet<&str> = goals
            .iter()
            .flat_map(|(_, g, _)| g.using.iter().map(|u| u.name.as_str()))
            .collect();
        for (n, (_, a)) in agents.iter().enumerate() {
            if agent_checked[n] || agent_index.get(a.name.name.as_str()) != Some(&n) {
                continue;
            }
            if !used_agents.contains(a.name.name.as_str()) {
                self.warning(
                    "unused-agent",
                    a.name.span,
                    format!("agent `{}` is defined but no goal uses it", a.name.name),
                )
                .hint = Some(format!(
                    "add `USING {}` to a goal, or remove it",
                    a.name.name
                ));
            }
            let ctx = RefCtx {
                goal: None,
                iterative: true,
                scope: &everything,
                carried: &none,
                vars: &vars,
                all_names: &var_pool,
                goals: &goals,
                goal_prompts: &goal_prompts,
            };
            if let Some(p) = &agent_prompts[n] {
                agent_reads[n] = self.check_refs(p, &ctx, ("agent", &a.name.name));
            }
        }
        for r in goal_reads.iter().chain(agent_reads.iter()) {
            read_vars.extend(r.iter().cloned());
        }
        for l in goals
            .iter()
            .filter_map(|(_, g, _)| g.within.as_ref())
            .chain(steps.iter().filter_map(|(_, s)| s.within.as_ref()))
        {
            if let Limit::Var(v) = l {
                read_vars.insert(v.name.clone());
            }
        }
        for i in &inputs {
            if !read_vars.contains(&i.name.name) {
                self.warning(
                    "unused-input",
                    i.name.span,
                    format!("input `{}` is never used", i.name.name),
                )
                .hint = Some(format!(
                    "refer to it as `${}` in a goal or agent prompt, or remove it",
                    i.name.name
                ));
            }
        }

        if self.diags.iter().any(Diagnostic::is_error) {
            return None;
        }

        // ---- Lower to the plan. -----------------------------------------------
        let input_defaults: HashMap<&str, Option<&str>> = inputs
            .iter()
            .map(|i| {
                (
                    i.name.name.as_str(),
                    i.default.as_ref().map(ast::Value::as_str),
                )
            })
            .collect();
        let lower_limit = |l: &Limit| -> Option<plan::Limit> {
            match l {
                Limit::Count { digits, .. } => digits
                    .parse()
                    .ok()
                    .map(|count| plan::Limit::Count { count }),
                Limit::Var(v) => Some(plan::Limit::Input {
                    input: v.name.clone(),
                    default: input_defaults
                        .get(v.name.as_str())
                        .copied()
                        .flatten()
                        .and_then(|d| d.trim().parse().ok()),
                }),
                Limit::Other { .. } => None,
            }
        };
        // A goal also reads what its agents' personas read.
        for (n, (_, g, _)) in goals.iter().enumerate() {
            let mut have: HashSet<String> = goal_reads[n].iter().cloned().collect();
            for u in &g.using {
                if let Some(&an) = agent_index.get(u.name.as_str()) {
                    for r in &agent_reads[an] {
                        if have.insert(r.clone()) {
                            goal_reads[n].push(r.clone());
                        }
                    }
                }
            }
        }
        let plan_agents = agents
            .iter()
            .zip(agent_prompts)
            .zip(agent_reads)
            .filter_map(|(((_, a), p), reads)| {
                let p = p?;
                Some(plan::AgentDef {
                    name: a.name.name.clone(),
                    source: p.source,
                    prompt: p.text,
                    profile: a.requires.as_ref().map(|r| r.value.clone()),
                    outputs: a.outputs.iter().map(|o| o.name.clone()).collect(),
                    reads,
                    card: p.card,
                })
            })
            .collect();
        let plan_goals = goals
            .iter()
            .zip(goal_prompts)
            .zip(goal_reads)
            .filter_map(|(((_, g, sup), p), reads)| {
                let p = p?;
                Some(plan::GoalDef {
                    name: g.name.name.clone(),
                    kind: match g.kind {
                        GoalKind::Goal => plan::GoalKind::Goal,
                        GoalKind::Converge => plan::GoalKind::Converge,
                    },
                    summary: summary(&p.text),
                    outcome: p.text,
                    source: p.source,
                    agents: g.using.iter().map(|u| u.name.clone()).collect(),
                    outputs: g.outputs.iter().map(|o| o.name.clone()).collect(),
                    reads,
                    within: g.within.as_ref().and_then(lower_limit),
                    supervision: *sup,
                    brief: None,
                    produces: None,
                })
            })
            .collect();
        let plan_steps: Vec<plan::StepDef> = steps
            .iter()
            .map(|(_, s)| plan::StepDef {
                name: s.name.name.clone(),
                kind: match s.kind {
                    StepKind::Run => plan::StepKind::Run,
                    StepKind::Loop => plan::StepKind::Loop,
                },
                goals: s.goals.iter().map(|g| g.name.clone()).collect(),
                within: s.within.as_ref().and_then(lower_limit),
            })
            .collect();
        let graph = super::lower::graph(&plan_steps);
        Some(
            Plan {
                schema_version: plan::PLAN_SCHEMA_VERSION,
                name: name.map(|n| n.0).unwrap_or_default(),
                id: None,
                description: None,
                format: "agentfile".into(),
                path: self.map.file(self.file).path.display().to_string(),
                inputs: inputs
                    .iter()
                    .map(|i| plan::InputDef {
                        name: i.name.name.clone(),
                        default: i.default.as_ref().map(|d| d.as_str().to_owned()),
                        required: i.default.is_none(),
                        env: None,
                    })
                    .collect(),
                agents: plan_agents,
                goals: plan_goals,
                steps: plan_steps,
                security: security.map(|s| s.0),
                graph,
                timeout_ms: None,
                max_steps: None,
                input_schema: None,
                output_schema: None,
                result: None,
                fingerprint: String::new(),
                files: Default::default(),
                execution: None,
                protected: Vec::new(),
                root: Default::default(),
                output_names: Vec::new(),
                unmapped: Default::default(),
                agentrc: None,
            }
            .sealed(),
        )
    }

    fn duplicate(&mut self, name: &ast::Ident, first: Span, what: &str) {
        let line = self.line_of(first);
        self.error(
            "duplicate-name",
            name.span,
            format!("{what} `{}` is defined more than once", name.name),
        )
        .note(first, "first defined here");
        let d = self.diags.last_mut().expect("pushed");
        d.hint = Some(format!(
            "rename one of them or remove this one (the first is on line {line})"
        ));
    }

    /// Register a name in the variable namespace (inputs, goals, output fields),
    /// where one name must mean one thing.
    fn define_var<'t>(
        &mut self,
        vars: &mut HashMap<&'t str, VarDef>,
        id: &'t ast::Ident,
        def: VarDef,
        what: &str,
    ) {
        if id.name.len() > template::MAX_NAME_LEN {
            self.error(
                "syntax",
                id.span,
                format!(
                    "{what} name is {} bytes long; names are limited to {} bytes",
                    id.name.len(),
                    template::MAX_NAME_LEN
                ),
            )
            .hint = Some("use a shorter name".into());
            return;
        }
        if let Some(prev) = vars.get(id.name.as_str()).copied() {
            // `GOAL outline "…" -> outline`: the field is the goal's output, and
            // `$outline` means the field.
            if let (VarDef::Goal { goal: a, .. }, VarDef::Field { goal: b, .. }) = (prev, def)
                && a == b
            {
                vars.insert(&id.name, def);
                return;
            }
            let prev_what = match prev {
                VarDef::Input { .. } => "an input",
                VarDef::Goal { .. } => "a goal",
                VarDef::Field { .. } => "an output field",
            };
            if matches!((prev, def), (VarDef::Input { .. }, VarDef::Input { .. })) {
                self.duplicate(id, prev.span(), "input");
                return;
            }
            self.error(
                "duplicate-name",
                id.span,
                format!(
                    "{what} `{}` has the same name as {prev_what}, so `${}` would be ambiguous",
                    id.name, id.name
                ),
            )
            .note(prev.span(), "that one is defined here");
            let d = self.diags.last_mut().expect("pushed");
            d.hint = Some("rename one of them".into());
            return;
        }
        vars.insert(&id.name, def);
    }

    fn check_profile(&mut self, req: &ast::Text) {
        let name = req.value.as_str();
        match self.opts.config {
            Some(c) if c.profiles.contains_key(name) => {}
            Some(c) => {
                let known: Vec<&str> = c.profiles.keys().map(String::as_str).collect();
                let hint = match suggest(name, known.iter().copied()) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None if known.is_empty() => format!(
                        "the config defines no profiles; add `[profiles.{name}]` with a model"
                    ),
                    None => format!(
                        "defined profiles: {}; or add `[profiles.{name}]`",
                        known.join(", ")
                    ),
                };
                self.error(
                    "unknown-profile",
                    req.span,
                    format!("profile `{name}` is not defined in the config"),
                )
                .hint = Some(hint);
            }
            None => {
                self.warning(
                    "unchecked-profile",
                    req.span,
                    format!("profile `{name}` cannot be checked: no config file was found"),
                )
                .hint = Some(
                    "pass --config agent.toml (or put agent.json / agent.toml in this folder)"
                        .into(),
                );
            }
        }
    }

    fn check_limit(
        &mut self,
        l: &Limit,
        inputs: &HashMap<&str, &ast::Input>,
        input_pool: &Arc<[String]>,
        vars: &HashMap<&str, VarDef>,
    ) {
        match l {
            Limit::Count { digits, span } => match digits.parse::<u32>() {
                Ok(0) => {
                    self.error("invalid-within", *span, "WITHIN must be at least 1")
                        .hint = Some("the limit counts iterations; use 1 or more".into());
                }
                Ok(_) => {}
                Err(_) => {
                    self.error(
                        "invalid-within",
                        *span,
                        format!("WITHIN {digits} is too large"),
                    )
                    .hint = Some(format!("the largest limit is {}", u32::MAX));
                }
            },
            Limit::Var(v) => match vars.get(v.name.as_str()) {
                Some(VarDef::Input { .. }) => {
                    let input = inputs.get(v.name.as_str());
                    if let Some(d) = input.and_then(|i| i.default.as_ref()) {
                        let ok = d.as_str().trim().parse::<u32>().is_ok_and(|n| n > 0);
                        if !ok {
                            self.error(
                                "invalid-within",
                                d.span(),
                                format!("input `{}` is a loop limit, but its default `{}` is not a positive whole number", v.name, d.as_str()),
                            )
                            .note(v.span, "used as a limit here");
                            let diag = self.diags.last_mut().expect("pushed");
                            diag.hint = Some("give it a default such as `DEFAULT 5`".into());
                        }
                    }
                }
                Some(other) => {
                    let what = if matches!(other, VarDef::Goal { .. }) {
                        "a goal's output"
                    } else {
                        "an output field"
                    };
                    self.error(
                        "invalid-within",
                        v.span,
                        format!(
                            "WITHIN needs a number or an input, but `${}` is {what}",
                            v.name
                        ),
                    )
                    .note(other.span(), "defined here");
                    let d = self.diags.last_mut().expect("pushed");
                    d.hint = Some(format!(
                        "declare `INPUT max_{} DEFAULT 5` and write `WITHIN $max_{}`",
                        v.name, v.name
                    ));
                }
                None => {
                    let d = self.error(
                        "undefined-variable",
                        v.span,
                        format!("undefined variable `${}`", v.name),
                    );
                    d.hint = Some(format!("declare it with `INPUT {} DEFAULT 5`", v.name));
                    d.suggest_later(&v.name, input_pool, "$");
                }
            },
            Limit::Other { text, span } => {
                let hint = if text.trim().parse::<u32>().is_ok() {
                    format!("write the number without quotes: WITHIN {}", text.trim())
                } else {
                    "write a whole number such as `WITHIN 5`, or `WITHIN $input`".to_owned()
                };
                self.error(
                    "invalid-within",
                    *span,
                    format!("WITHIN `{text}` is not a positive whole number or an input"),
                )
                .hint = Some(hint);
            }
        }
    }

    /// Check every `$name` in a prompt against what exists at this point, and
    /// return the names it reads.
    fn check_refs(&mut self, p: &Prompt, ctx: &RefCtx<'_, '_>, owner: (&str, &str)) -> Vec<String> {
        let Some((fid, offset, end)) = p.at else {
            return Vec::new();
        };
        // Scan the raw source so positions are exact; for inline strings that is
        // the text between the quotes (escapes never contain `$name`).
        let raw = self.map.snippet(Span::new(fid, offset, end));
        let known = |n: &str| ctx.vars.contains_key(n);
        let refs: Vec<(&str, Span)> = template::pieces(raw, known)
            .into_iter()
            .filter_map(|piece| match piece {
                template::Piece::Var { name, start, end } => {
                    Some((name, Span::new(fid, offset + start, offset + end)))
                }
                template::Piece::Literal(_) => None,
            })
            .collect();
        let refs: Vec<(String, Span)> = refs.into_iter().map(|(n, s)| (n.to_owned(), s)).collect();
        let owner = format!("{} `{}`", owner.0, owner.1);
        let mut reads: Vec<String> = Vec::new();
        let mut read_set: HashSet<String> = HashSet::default();
        // Whether producer goal N reads this goal's output, asked once per N.
        let mut cyclic_with: HashMap<usize, bool> = HashMap::default();
        // What this goal produces, built on the first cycle check only.
        let mut me_produced: Option<HashSet<&str>> = None;
        for (name, span) in refs {
            let name = name.as_str();
            if read_set.insert(name.to_owned()) {
                reads.push(name.to_owned());
            }
            let def = ctx.vars.get(name).copied();
            let own = def
                .and_then(VarDef::goal)
                .is_some_and(|g| Some(g) == ctx.goal);
            if own {
                if !ctx.iterative {
                    self.error(
                        "circular-reference",
                        span,
                        format!("{owner} reads its own output `${name}`, which does not exist until the goal has run"),
                    )
                    .hint = Some("run it in a LOOP, make it a CONVERGE goal, or read another goal's output".into());
                }
                continue;
            }
            if ctx.scope.contains(name) || ctx.carried.contains(name) {
                continue;
            }
            match def {
                Some(def) => {
                    let producer = def
                        .goal()
                        .map(|g| ctx.goals[g].1.name.name.as_str())
                        .unwrap_or("?");
                    // Does the producer in turn read us? Then it is a cycle.
                    let cyclic = match (def.goal(), ctx.goal) {
                        (Some(pg), Some(me)) => match cyclic_with.get(&pg) {
                            Some(&c) => c,
                            None => {
                                let mine = me_produced
                                    .get_or_insert_with(|| produced(ctx.goals[me].1).collect());
                                let theirs = self.goal_refs.entry(pg).or_insert_with(|| {
                                    ctx.goal_prompts[pg].as_ref().map_or_else(
                                        HashSet::default,
                                        |pp| {
                                            template::references(&pp.text, |n| {
                                                ctx.vars.contains_key(n)
                                            })
                                            .into_iter()
                                            .map(str::to_owned)
                                            .collect()
                                        },
                                    )
                                });
                                // Walk the smaller side: both can be large.
                                let c = if theirs.len() <= mine.len() {
                                    theirs.iter().any(|r| mine.contains(r.as_str()))
                                } else {
                                    mine.iter().any(|m| theirs.contains(*m))
                                };
                                cyclic_with.insert(pg, c);
                                c
                            }
                        },
                        _ => false,
                    };
                    if cyclic {
                        self.error(
                            "circular-reference",
                            span,
                            format!("{owner} reads `${name}` from goal `{producer}`, which in turn reads this goal's output"),
                        )
                        .note(def.span(), "defined here");
                        let d = self.diags.last_mut().expect("pushed");
                        d.hint = Some("break the cycle: one of the two must run first without the other's output, or put both in a LOOP".into());
                    } else {
                        self.error(
                            "use-before-definition",
                            span,
                            format!(
                                "{owner} reads `${name}` before goal `{producer}` has produced it"
                            ),
                        )
                        .note(def.span(), "defined here");
                        let d = self.diags.last_mut().expect("pushed");
                        d.hint = Some(format!(
                            "run `{producer}` in an earlier step, or earlier in this step"
                        ));
                    }
                }
                None if name.len() > template::MAX_NAME_LEN => {
                    // No such name can be defined; and a megabyte-long name
                    // is not worth repeating in the message.
                    let short: String = name.chars().take(40).collect();
                    self.error(
                        "undefined-variable",
                        span,
                        format!(
                            "undefined variable `${short}…` ({} bytes long) in {owner}",
                            name.len()
                        ),
                    )
                    .hint = Some(format!(
                        "names are at most {} bytes; write `$$` for a literal `$`",
                        template::MAX_NAME_LEN
                    ));
                }
                None => {
                    let d = self.error(
                        "undefined-variable",
                        span,
                        format!("undefined variable `${name}` in {owner}"),
                    );
                    d.hint = Some(format!(
                        "declare it with `INPUT {name}`, or write `$${name}` for a literal `${name}`"
                    ));
                    d.suggest_later(name, ctx.all_names, "$");
                }
            }
        }
        reads
    }

    /// Read a prompt: inline text as is, or a file/skill relative to the Agentfile.
    fn load_prompt(&mut self, src: &Source, usage: PromptUse) -> Option<Prompt> {
        match src {
            Source::Inline(t) => Some(Prompt {
                text: t.value.clone(),
                source: plan::PromptSource::Inline,
                at: Some((
                    t.content.file,
                    t.content.start as usize,
                    t.content.end as usize,
                )),
                card: None,
            }),
            Source::From { path, span } => self.load_from(path, *span, usage),
        }
    }

    fn load_from(&mut self, written: &str, span: Span, usage: PromptUse) -> Option<Prompt> {
        if written.trim().is_empty() {
            self.error("syntax", span, "empty path after FROM");
            return None;
        }
        let resolved = self.dir.join(expand_home(written));
        self.check_escape(written, &resolved, span);
        if usage == PromptUse::Agent
            && agentfile_syntax::cards::is_agent_file(&resolved)
            && resolved.is_file()
        {
            let card = agentfile_syntax::cards::load_path(
                self.map,
                &resolved,
                written,
                Some(span),
                &mut self.diags,
            )?;
            return Some(Prompt {
                text: agentfile_syntax::cards::literal(&card.persona()),
                source: plan::PromptSource::File {
                    path: written.to_owned(),
                },
                at: None,
                card: Some(Box::new(card)),
            });
        }
        if resolved.is_dir() {
            if usage == PromptUse::Goal {
                self.error(
                    "missing-file",
                    span,
                    format!("`{written}` is a folder; a goal's FROM names a file"),
                )
                .hint = Some("point at a .md or .txt file inside it".into());
                return None;
            }
            return self.load_skill(written, &resolved, span);
        }
        if resolved.exists() {
            return self.read_prompt_file(
                written,
                &resolved,
                span,
                plan::PromptSource::File {
                    path: written.to_owned(),
                },
            );
        }
        // A bare name may be a skill from `skills.paths`.
        if usage == PromptUse::Agent && !written.contains(['/', '\\']) && !written.contains('.') {
            let paths = self
                .opts
                .config
                .map(|c| c.skills.paths.clone())
                .unwrap_or_default();
            for base in paths {
                let dir = expand_home(&base.to_string_lossy());
                let candidate = dir.join(written);
                if candidate.join("SKILL.md").is_file() {
                    return self.load_skill(written, &candidate, span);
                }
            }
        }
        let mut d = Diagnostic::error(
            "missing-file",
            span,
            format!(
                "cannot find `{written}` (looked for {})",
                resolved.display()
            ),
        );
        d.hint = Some(match usage {
            PromptUse::Agent => {
                "FROM paths are relative to the Agentfile; create the file, or name a folder holding SKILL.md".into()
            }
            PromptUse::Goal => "FROM paths are relative to the Agentfile; create the file or fix the path".into(),
        });
        self.similar_file_later(&mut d, &resolved);
        self.diags.push(d);
        None
    }

    fn load_skill(&mut self, written: &str, dir: &Path, span: Span) -> Option<Prompt> {
        let skill = dir.join("SKILL.md");
        if !skill.is_file() {
            self.error("missing-file", span, format!("`{written}` is a folder without SKILL.md"))
                .hint = Some("an AGENT FROM a folder loads the folder's SKILL.md; add one, or point at a prompt file".into());
            return None;
        }
        let mut p = self.read_prompt_file(written, &skill, span, plan::PromptSource::Inline)?;
        let (name, description, body_offset) = split_front_matter(&p.text);
        p.text = p.text[body_offset..]
            .trim_start_matches(['\n', '\r'])
            .to_owned();
        if let Some((fid, off, end)) = p.at {
            let full = &self.map.file(fid).text;
            let skipped = full[body_offset..].len()
                - full[body_offset..].trim_start_matches(['\n', '\r']).len();
            p.at = Some((fid, off + body_offset + skipped, end));
        }
        p.source = plan::PromptSource::Skill {
            path: written.to_owned(),
            name,
            description,
        };
        Some(p)
    }

    fn read_prompt_file(
        &mut self,
        written: &str,
        path: &Path,
        span: Span,
        source: plan::PromptSource,
    ) -> Option<Prompt> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) => {
                self.error(
                    "unreadable-file",
                    span,
                    format!("cannot read `{written}`: {e}"),
                );
                return None;
            }
        };
        if !meta.is_file() {
            self.error(
                "unreadable-file",
                span,
                format!("`{written}` is not a regular file"),
            )
            .hint = Some("FROM must name a prompt file (.md or .txt)".into());
            return None;
        }
        if meta.len() > MAX_PROMPT_BYTES {
            self.error(
                "unreadable-file",
                span,
                format!(
                    "`{written}` is {} bytes; prompt files are limited to {MAX_PROMPT_BYTES} bytes",
                    meta.len()
                ),
            );
            return None;
        }
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "md" | "txt" | "markdown")
            && path.file_name().is_some_and(|n| n != "SKILL.md")
        {
            self.warning(
                "prompt-extension",
                span,
                format!("`{written}` is not a .md or .txt file; it is read as plain text"),
            );
        }
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                self.error(
                    "unreadable-file",
                    span,
                    format!("cannot read `{written}`: {e}"),
                );
                return None;
            }
        };
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let prefix = &e.as_bytes()[..at];
                let line = prefix.iter().filter(|&&b| b == b'\n').count() + 1;
                self.error(
                    "not-utf8",
                    span,
                    format!(
                        "`{written}` is not UTF-8 text (invalid byte at line {line}, byte {at})"
                    ),
                )
                .hint = Some("save the file as UTF-8".into());
                return None;
            }
        };
        let text = text
            .strip_prefix('\u{feff}')
            .map(str::to_owned)
            .unwrap_or(text);
        let display = self.dir.join(written);
        let len = text.len();
        let fid = self.map.add(display, text.clone());
        Some(Prompt {
            text,
            source,
            at: Some((fid, 0, len)),
            card: None,
        })
    }

    /// Warn when a FROM path leaves the workflow's folder: the workflow is then no
    /// longer self-contained, and a shared workflow could read files it should not.
    fn check_escape(&mut self, written: &str, resolved: &Path, span: Span) {
        let escapes_lexically = Path::new(written).is_absolute()
            || written.starts_with('~')
            || normalize(Path::new(written)).starts_with("..");
        let dir = if self.dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.dir
        };
        let escapes_by_link = match (resolved.canonicalize(), dir.canonicalize()) {
            (Ok(r), Ok(d)) => !r.starts_with(&d),
            _ => false,
        };
        if escapes_lexically || escapes_by_link {
            self.warning(
                "path-escapes-workflow",
                span,
                format!("`{written}` is outside the workflow's folder"),
            )
            .hint = Some(
                "copy the file into the workflow folder so the workflow is self-contained".into(),
            );
        }
    }

    /// Have `d` suggest a file next to `missing` with a similar name, as the
    /// user would write it. Each folder is listed once (the first 1000 names).
    fn similar_file_later(&mut self, d: &mut Diagnostic, missing: &Path) {
        let (Some(parent), Some(want)) = (
            missing.parent(),
            missing.file_name().and_then(|n| n.to_str()),
        ) else {
            return;
        };
        let listed = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let names = self
            .dir_listings
            .entry(listed.to_path_buf())
            .or_insert_with(|| {
                let names: Vec<String> = std::fs::read_dir(listed)
                    .map(|entries| {
                        entries
                            .filter_map(|e| e.ok()?.file_name().into_string().ok())
                            .take(1000)
                            .collect()
                    })
                    .unwrap_or_default();
                names.into()
            })
            .clone();
        if names.is_empty() {
            return;
        }
        let rel = parent.strip_prefix(&self.dir).unwrap_or(parent);
        let prefix = if rel.as_os_str().is_empty() {
            String::new()
        } else {
            format!("{}/", rel.to_string_lossy())
        };
        d.suggest_later(want, &names, prefix.trim_start_matches("./"));
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PromptUse {
    Agent,
    Goal,
}

/// Everything `check_refs` needs to know about where it is.
struct RefCtx<'a, 't> {
    /// The goal whose prompt (or whose agent's prompt) is checked.
    goal: Option<usize>,
    /// Inside a LOOP or CONVERGE, where reading one's own output is fine.
    iterative: bool,
    scope: &'a HashSet<&'t str>,
    carried: &'a HashSet<&'t str>,
    vars: &'a HashMap<&'t str, VarDef>,
    /// Every variable name, for did-you-mean hints.
    all_names: &'a Arc<[String]>,
    goals: &'a [(usize, &'t ast::Goal, Option<Supervision>)],
    goal_prompts: &'a [Option<Prompt>],
}

/// The variables a goal produces: its name and its fields.
fn produced(g: &ast::Goal) -> impl Iterator<Item = &str> {
    std::iter::once(g.name.name.as_str()).chain(g.outputs.iter().map(|o| o.name.as_str()))
}

fn item_span(item: &Item) -> Span {
    match item {
        Item::Name { keyword, .. } => *keyword,
        Item::Input(i) => i.name.span,
        Item::Agent(a) => a.name.span,
        Item::Goal(g) => g.keyword,
        Item::Step(s) => s.keyword,
        Item::Supervision { span, .. } => *span,
        Item::Security { keyword, .. } => *keyword,
    }
}

/// The first non-empty line, trimmed, for display.
fn summary(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut s: String = line.chars().take(120).collect();
    if line.chars().count() > 120 {
        s.push('…');
    }
    s
}

/// YAML-ish front matter (`---` … `---`) of a SKILL.md: its `name`, its
/// `description`, and where the body starts. Only these two keys matter here.
fn split_front_matter(text: &str) -> (Option<String>, Option<String>, usize) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (None, None, 0);
    };
    let header_start = text.len() - rest.len();
    let mut offset = header_start;
    let mut name = None;
    let mut description = None;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        let l = line.trim_end();
        if l == "---" {
            return (name, description, offset);
        }
        let unquote = |v: &str| v.trim().trim_matches(['"', '\'']).to_owned();
        if let Some(v) = l.strip_prefix("name:") {
            name = Some(unquote(v));
        } else if let Some(v) = l.strip_prefix("description:") {
            description = Some(unquote(v));
        }
    }
    // No closing `---`: treat the whole file as the body.
    (None, None, 0)
}

fn expand_home(p: &str) -> PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    PathBuf::from(p)
}

/// Resolve `.` and `..` lexically (no file system access). Leading `..` that
/// climb above the start are kept, so callers can see the path leaves its base.
fn normalize(p: &Path) -> PathBuf {
    let mut parts: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                _ => parts.push(c),
            },
            other => parts.push(other),
        }
    }
    parts.iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_keeps_leading_parent() {
        assert!(normalize(Path::new("../x.md")).starts_with(".."));
        assert!(!normalize(Path::new("a/../x.md")).starts_with(".."));
        assert!(normalize(Path::new("a/../../x.md")).starts_with(".."));
    }

    #[test]
    fn front_matter() {
        let (n, d, off) =
            split_front_matter("---\nname: review\ndescription: \"Reviews\"\n---\nBody");
        assert_eq!(n.as_deref(), Some("review"));
        assert_eq!(d.as_deref(), Some("Reviews"));
        assert_eq!(
            &"---\nname: review\ndescription: \"Reviews\"\n---\nBody"[off..],
            "Body"
        );
    }
}
