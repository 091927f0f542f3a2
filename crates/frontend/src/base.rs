//! agentrc FROM made real (CONTRACT §20): the package a FROM names is found
//! through the caller's [`Packages`] and its Agentfile analysed with the same
//! options (so a base may have a base of its own); the agentrc front end then
//! holds the file to it (`agentfile_agentrc::base`).
//!
//! Bases nest at most [`MAX_BASE_DEPTH`] deep, and a base that is (or
//! leads back to) one already being read is a cycle: both are errors at the
//! FROM that would go on. The chain being read lives on this thread while it
//! is read: the front ends are synchronous, and a base is analysed inside
//! the analysis of the file that names it.

use std::cell::RefCell;

use agentfile_plan::declared::Base;

use crate::{Dialect, Options, Packages, analyze};

/// How many bases deep a FROM may lead.
pub const MAX_BASE_DEPTH: usize = 8;

thread_local! {
    /// The bases being read on this thread, outermost first: reference and
    /// digest.
    static CHAIN: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

/// Why a base cannot be used (besides the resolver's own reasons).
#[derive(Debug, thiserror::Error)]
enum BaseError {
    #[error("the bases form a cycle: {0}")]
    Cycle(String),
    #[error("the bases nest deeper than {MAX_BASE_DEPTH}: {0}")]
    TooDeep(String),
    #[error("its workflow file {0} is not an agentrc Agentfile")]
    NotAgentrc(String),
    #[error("its Agentfile is invalid ({errors} error{s}); the first: {first}", s = if *errors == 1 { "" } else { "s" })]
    Invalid { errors: usize, first: String },
}

/// The agentrc front end's [`agentfile_agentrc::Bases`] over the caller's
/// packages.
pub(crate) struct Resolver<'a, 'b> {
    pub packages: &'b dyn Packages,
    pub options: &'a Options<'b>,
}

/// One base on the chain while it is read.
struct Entered;

impl Entered {
    fn push(reference: &str, digest: &str) -> Entered {
        CHAIN.with(|c| {
            c.borrow_mut()
                .push((reference.to_owned(), digest.to_owned()))
        });
        Entered
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        CHAIN.with(|c| c.borrow_mut().pop());
    }
}

/// `a → b → c`.
fn shown(chain: &[(String, String)], next: &str) -> String {
    let mut v: Vec<&str> = chain.iter().map(|(r, _)| r.as_str()).collect();
    v.push(next);
    v.join(" → ")
}

impl agentfile_agentrc::Bases for Resolver<'_, '_> {
    fn base(
        &self,
        reference: &str,
    ) -> Result<Option<Base>, Box<dyn std::error::Error + Send + Sync>> {
        let chain = CHAIN.with(|c| c.borrow().clone());
        if chain.iter().any(|(r, _)| r == reference) {
            return Err(BaseError::Cycle(shown(&chain, reference)).into());
        }
        if chain.len() >= MAX_BASE_DEPTH {
            return Err(BaseError::TooDeep(shown(&chain, reference)).into());
        }
        let Some(found) = self.packages.resolve(reference)? else {
            return Ok(None);
        };
        if chain.iter().any(|(_, d)| *d == found.digest) {
            return Err(BaseError::Cycle(shown(&chain, reference)).into());
        }
        let _entered = Entered::push(reference, &found.digest);
        let options = Options {
            dialect: Some(Dialect::Agentrc),
            ..self.options.clone()
        };
        let a = analyze(&found.workflow, options);
        let errors = a.errors();
        let Some(plan) = a.plan else {
            let first = a
                .diagnostics
                .iter()
                .find(|d| d.is_error())
                .map(|d| match d.span {
                    Some(s) => format!("{}: {}", a.sources.location(s), d.message),
                    None => format!("{}: {}", a.path.display(), d.message),
                })
                .unwrap_or_default();
            return Err(BaseError::Invalid { errors, first }.into());
        };
        let Some(decl) = plan.declared else {
            return Err(BaseError::NotAgentrc(a.path.display().to_string()).into());
        };
        Ok(Some(Base {
            reference: reference.to_owned(),
            digest: found.digest,
            agent: decl.agent,
            grants: decl.grants,
            base: decl.base,
        }))
    }
}
