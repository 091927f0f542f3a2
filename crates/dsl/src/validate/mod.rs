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
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// The loaded config, for REQUIRES profiles and `skills.paths`. `None`: no
    /// config was found, so profiles cannot be checked (a warning, not an error:
    /// the same workflow runs under different configs).
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

/// The security modes the runtime knows.
/// Goals one RUN or LOOP step may list: each goal of a step is shown the
/// outputs of every goal before it in the step, so a step's plan grows with
/// the square of its length (20,000 goals in one step took more than 4 GiB).
pub const MAX_STEP_GOALS: usize = 64;

/// Goals the steps of one workflow may list together (a goal listed in two
/// steps counts twice): each is a node of the plan, with its context.
pub const MAX_GOAL_RUNS: usize = 20_000;

mod definitions;
mod prompts;
mod references;
mod to_plan;
mod variables;

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

    /// The phases, in order; each reports its own problems, and only a file
    /// with no errors is lowered to a plan.
    fn run(&mut self, tree: &ast::File) -> Option<Plan> {
        let defs = self.collect(tree);
        let names = self.namespaces(tree, &defs);
        self.check_step_names(&defs);
        self.check_has_steps(tree, &defs);
        let prompts = self.load_prompts(&defs);
        self.check_using(&defs, &names);
        self.check_steps(&defs, &names);
        let reads = self.check_variables(&defs, &names, &prompts);
        self.check_unused_inputs(&defs, &reads);
        if self.diags.iter().any(Diagnostic::is_error) {
            return None;
        }
        Some(self.to_plan(defs, &names, prompts, reads))
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

#[cfg(test)]
mod tests {
    use super::prompts::{normalize, split_front_matter};
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
