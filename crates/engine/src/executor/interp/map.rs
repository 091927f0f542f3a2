//! A map node: its body once per item of a list, at most `concurrency` at once,
//! results in input order.

use super::*;

impl<'a> RunCx<'a> {
    /// A map node: its list read where it lives, checked, then the items run.
    pub(super) async fn run_map_node(
        &self,
        f: Frame<'_>,
        over: &Expr,
        concurrency: u32,
        body: &Node,
        path: &str,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        // The list is read where it lives (an input, a step's
        // output), not copied: each item is copied as it starts.
        let (root, at) = match over {
            Expr::Path(p) => match env.shared(&p.root) {
                Some(root) => (root, Some(p)),
                None => (Arc::new(over.eval(&*env)), None),
            },
            _ => (Arc::new(over.eval(&*env)), None),
        };
        let list = match at {
            Some(p) => p.within(&root).unwrap_or(&Value::Null),
            None => &*root,
        };
        let items: &[Value] = match list {
            Value::Array(a) => a,
            Value::Null => &[],
            other => {
                return Err(Stop::Failed(format!(
                    "map `{path}`: `{over}` is {}, not a list",
                    kind_of(other)
                )));
            }
        };
        if let Some(stop) = too_many_items(self, path, items.len()) {
            return Err(stop);
        }
        self.run_map(f, items, concurrency, body, path, env).await
    }

    pub(super) async fn run_map(
        &self,
        f: Frame<'_>,
        items: &[Value],
        concurrency: u32,
        body: &Node,
        path: &str,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let n = items.len();
        // Items in flight: a map over 100,000 items must not start 100,000
        // tool processes or model calls at once.
        let width = match concurrency {
            0 => DEFAULT_MAP_WIDTH,
            c => (c as usize).min(MAX_MAP_WIDTH),
        };
        let frozen = Arc::new(std::mem::take(env));
        // Fail fast: once an item fails, items not yet started are skipped;
        // those in flight finish (their work is recorded either way).
        let abort = AtomicBool::new(false);
        // What an item leaves: its output, or why it stopped (`None`:
        // skipped, or a step that had not completed when scopes are rebuilt
        // after a crash). Results are taken in order as items finish, so
        // what is kept per item is its output and nothing more: no future,
        // scope or outcome outlives its item.
        let mut out = Outcome::default();
        let mut values = Vec::with_capacity(n);
        let mut first_err: Option<Stop> = None;
        let mut incomplete = false;
        {
            let abort = &abort;
            let frozen = &frozen;
            // By index: the stream starts an item's future (copying the
            // item) only when there is room for it.
            let mut results = futures::stream::iter(0..n)
                .map(|i| {
                    let frame = Frame { ..f };
                    let item = Arc::new(items[i].clone());
                    async move {
                        if abort.load(Ordering::Relaxed) {
                            return Err(None);
                        }
                        let mut child = Env::child(frozen);
                        child.item = Some((item, i));
                        let r = self
                            .run_body(frame, body, format!("{path}[{i}]"), &mut child)
                            .await;
                        // The item's scope goes before its output is taken,
                        // so the output is not copied (unless a compensation
                        // keeps the scope).
                        drop(child);
                        match r {
                            Ok(o) => Ok((Arc::unwrap_or_clone(o.value), o.tool_calls)),
                            Err(Stop::Failed(e)) if e.is_empty() => Err(None),
                            Err(e) => {
                                if matches!(
                                    e,
                                    Stop::Failed(_)
                                        | Stop::Denied(_)
                                        | Stop::LoopLimit(_)
                                        | Stop::ApprovalDenied(_)
                                ) {
                                    abort.store(true, Ordering::Relaxed);
                                }
                                Err(Some(e))
                            }
                        }
                    }
                })
                .buffered(width);
            while let Some(r) = results.next().await {
                match r {
                    Ok((value, tool_calls)) => {
                        out.tool_calls += tool_calls;
                        values.push(value);
                    }
                    Err(None) => incomplete = true,
                    Err(Some(e)) => first_err = Some(worse(first_err, e)),
                }
            }
        }
        *env = Env::thaw(frozen);
        if let Some(e) = first_err {
            return Err(e);
        }
        if incomplete {
            return Err(Stop::Failed(String::new()));
        }
        out.value = Arc::new(Value::Array(values));
        Ok(out)
    }
}

/// A map over more items than the run allows: refused before any item runs.
pub(super) fn too_many_items(cx: &RunCx<'_>, path: &str, n: usize) -> Option<Stop> {
    let limit = cx.budget.limits().map_items();
    (n > limit).then(|| {
        Stop::Failed(format!(
            "map `{path}` has {n} items, more than the limit of {limit} items per map; raise `[limits] max_map_items` in agent.toml if the workflow needs more (every item is recorded in the session), or split the list"
        ))
    })
}

/// Maps whose list is known before the first step (it reads only the
/// workflow's inputs) are checked against the item limit then, so a run
/// that would be refused half way is refused before it does anything.
/// Subworkflows are left out (their `$input` is their own); maps over other
/// lists are checked when they are reached.
pub(super) fn check_map_sizes(cx: &RunCx<'_>, env: &Env) -> Result<(), Stop> {
    fn visit(cx: &RunCx<'_>, env: &Env, nodes: Vec<&Node>, path: &str) -> Result<(), Stop> {
        for n in nodes {
            let p = join(path, &n.id);
            if let NodeKind::Map { over, .. } = &n.kind
                && over.paths().iter().all(|x| matches!(x.root, Root::Input))
            {
                let len = match over {
                    Expr::Path(x) => x
                        .within(&env.inputs)
                        .and_then(Value::as_array)
                        .map(Vec::len),
                    _ => over.eval(env).as_array().map(Vec::len),
                };
                if let Some(stop) = len.and_then(|len| too_many_items(cx, &p, len)) {
                    return Err(stop);
                }
            }
            if let Some(c) = &n.compensation {
                visit(cx, env, vec![&**c], &p)?;
            }
            let inner = match &n.kind {
                NodeKind::Subworkflow { .. } => Vec::new(),
                NodeKind::Map { body, .. } | NodeKind::Loop { body, .. } => match &body.kind {
                    NodeKind::Sequence { nodes, .. } => nodes.iter().collect(),
                    _ => vec![&**body],
                },
                _ => n.children(),
            };
            visit(cx, env, inner, &p)?;
        }
        Ok(())
    }
    let top = match &cx.plan.graph.kind {
        NodeKind::Sequence { nodes, .. } => nodes.iter().collect(),
        _ => vec![&cx.plan.graph],
    };
    visit(cx, env, top, "")
}
