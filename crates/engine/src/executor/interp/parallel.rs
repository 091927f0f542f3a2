//! A parallel node: its branches at once, each in a child scope, joined.

use super::*;

impl<'a> RunCx<'a> {
    pub(super) async fn run_parallel(
        &self,
        f: Frame<'_>,
        branches: &[Node],
        path: &str,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let frozen = Arc::new(std::mem::take(env));
        let runs = branches.iter().map(|b| {
            let mut child = Env::child(&frozen);
            let frame = Frame {
                depth: f.depth + 1,
                ..f
            };
            let p = join(path, &b.id);
            async move {
                let r = self.run_node(frame, b, p, &mut child).await;
                (r, child)
            }
        });
        let results = futures::future::join_all(runs).await;
        *env = Env::thaw(frozen);
        let mut out = Outcome::default();
        let mut values = serde_json::Map::new();
        let mut first_err: Option<Stop> = None;
        for (b, (r, child)) in branches.iter().zip(results) {
            env.absorb(child);
            match r {
                Ok(o) => {
                    out.tool_calls += o.tool_calls;
                    out.texts.extend(o.texts);
                    values.insert(b.id.clone(), Arc::unwrap_or_clone(o.value));
                }
                Err(e) => first_err = Some(worse(first_err, e)),
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        out.value = Arc::new(Value::Object(values));
        Ok(out)
    }
}
