//! The scope a run's nodes read and write ([`Env`]): the run's inputs, node
//! outputs, the DSL's variables and a map's item, over a frozen parent. Below
//! the interpreter ([`super::interp`]), a goal's work ([`super::work`]) and
//! the prompts ([`super::prompt`]), which all read it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use agentfile_plan::Limit;
use agentfile_plan::expr::{Lookup, Root};
use agentfile_plan::template;
use serde_json::{Value, json};

/// A value in scope, shared: a node's output is held once, by the scope that
/// reads it, the outcome that returns it and any snapshot a compensation
/// keeps (a map's list of a million results is not copied at each of them).
pub(crate) type Shared = Arc<Value>;

/// A scope of values: the run's inputs, node outputs and variables, over a
/// frozen parent. Cloning one is cheap (its own level's names and shared
/// values; the parent is shared): a compensation keeps the scope as it stood.
#[derive(Debug, Default, Clone)]
pub(crate) struct Env {
    pub(super) parent: Option<Arc<Env>>,
    pub(super) inputs: Shared,
    pub(super) steps: HashMap<String, Shared>,
    /// The DSL's variables set by goals; the inputs are variables too (see
    /// [`Env::var`]), without being copied here.
    pub(super) vars: HashMap<String, Shared>,
    pub(super) item: Option<(Shared, usize)>,
}

impl Env {
    pub(super) fn child(parent: &Arc<Env>) -> Env {
        Env {
            parent: Some(parent.clone()),
            inputs: parent.inputs.clone(),
            ..Env::default()
        }
    }

    pub(super) fn step(&self, id: &str) -> Option<&Value> {
        match self.steps.get(id) {
            Some(v) => Some(v),
            None => self.parent.as_deref().and_then(|p| p.step(id)),
        }
    }

    /// A variable: one a goal set (here or in a parent), else the input of
    /// that name.
    pub(crate) fn var(&self, name: &str) -> Option<&Value> {
        self.set_var(name).or_else(|| self.inputs.get(name))
    }

    pub(super) fn set_var(&self, name: &str) -> Option<&Value> {
        match self.vars.get(name) {
            Some(v) => Some(v),
            None => self.parent.as_deref().and_then(|p| p.set_var(name)),
        }
    }

    /// The shared value a path root names (an input, a step's output, a
    /// goal's variable, a map's item), to read from without copying it;
    /// `None` where there is none to share (`$index`, an input read as a
    /// variable).
    pub(super) fn shared(&self, root: &Root) -> Option<Shared> {
        let mut at = Some(self);
        while let Some(env) = at {
            let found = match root {
                Root::Input => Some(&env.inputs),
                Root::Step(id) => env.steps.get(id),
                Root::Var(n) => env.vars.get(n),
                Root::Item => env.item.as_ref().map(|(v, _)| v),
                Root::Index => return None,
            };
            if let Some(v) = found {
                return Some(v.clone());
            }
            at = env.parent.as_deref();
        }
        None
    }

    /// A frozen scope back as an owned one: itself when nothing else holds
    /// it, else a (cheap) copy of its own level.
    pub(super) fn thaw(frozen: Arc<Env>) -> Env {
        Arc::try_unwrap(frozen).unwrap_or_else(|a| (*a).clone())
    }

    pub(super) fn item(&self) -> Option<&(Shared, usize)> {
        match &self.item {
            Some(i) => Some(i),
            None => self.parent.as_deref().and_then(Env::item),
        }
    }

    /// A variable as text, the way the DSL's templates show it.
    pub(crate) fn var_text(&self, name: &str) -> Option<String> {
        self.var(name).map(as_text)
    }

    pub(crate) fn has_var(&self, name: &str) -> bool {
        self.var(name).is_some()
    }

    /// Fill `$variables` in a DSL template.
    pub(crate) fn render(&self, text: &str) -> String {
        template::render(text, |n| self.var_text(n))
    }

    /// Take in what a child scope produced (after a join).
    pub(super) fn absorb(&mut self, child: Env) {
        self.steps.extend(child.steps);
        self.vars.extend(child.vars);
    }
}

impl Lookup for Env {
    fn lookup(&self, root: &Root) -> Option<Cow<'_, Value>> {
        match root {
            Root::Input => Some(Cow::Borrowed(&*self.inputs)),
            Root::Step(id) => self.step(id).map(Cow::Borrowed),
            Root::Item => self.item().map(|(v, _)| Cow::Borrowed(&**v)),
            Root::Index => self.item().map(|(_, i)| Cow::Owned(json!(i))),
            Root::Var(n) => self.var(n).map(Cow::Borrowed),
        }
    }
}

pub(crate) fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(crate) fn resolve_limit(l: &Limit, env: &Env) -> u32 {
    match l {
        Limit::Count { count } => *count,
        Limit::Input { input, default } => env
            .var_text(input)
            .and_then(|v| v.trim().parse().ok())
            .or(*default)
            .unwrap_or(1),
    }
}
