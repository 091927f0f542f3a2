//! A sequence: its nodes one after another, or where a node routes to.

use super::*;

impl<'a> RunCx<'a> {
    pub(super) async fn run_sequence(
        &self,
        f: Frame<'_>,
        nodes: &[Node],
        start: Option<&str>,
        path: &str,
        env: &mut Env,
    ) -> Result<Outcome, Stop> {
        let mut out = Outcome::default();
        let mut i = match start {
            Some(s) => match nodes.iter().position(|n| n.id == s) {
                Some(i) => i,
                None => return Err(Stop::Failed(format!("start step `{s}` does not exist"))),
            },
            None => 0,
        };
        // A checked graph routes backwards only through an approval (each pass
        // waits for a human; `max_steps` bounds the run); this bound makes sure
        // a plan built some other way still cannot spin here.
        let mut budget = nodes.len().saturating_mul(nodes.len()).max(1) + 1001;
        // A node run again gets its own path (`review@2`), so the journal
        // replays each visit's own result.
        let mut visits: HashMap<usize, u32> = HashMap::new();
        while let Some(node) = nodes.get(i) {
            budget -= 1;
            if budget == 0 {
                return Err(Stop::Failed(format!(
                    "the steps under `{path}` route in a cycle; repeat work with a loop step"
                )));
            }
            let child = Frame {
                depth: f.depth + 1,
                step: if f.depth == 0 {
                    Some(node.id.as_str())
                } else {
                    f.step
                },
                ..f
            };
            let visit = visits.entry(i).or_insert(0);
            *visit += 1;
            let seg = if *visit == 1 {
                join(path, &node.id)
            } else {
                join(path, &format!("{}@{visit}", node.id))
            };
            let r = self.run_node(child, node, seg, env).await?;
            out.tool_calls += r.tool_calls;
            out.texts.extend(r.texts);
            out.value = r.value;
            if r.done && f.in_loop {
                out.done = true;
                break;
            }
            match r.route.or_else(|| node.next.clone()) {
                None => i += 1,
                Some(Next::End) => break,
                Some(Next::Node(id)) => match nodes.iter().position(|n| n.id == id) {
                    Some(j) => i = j,
                    None => {
                        return Err(Stop::Failed(format!(
                            "`{}` routes to `{id}`, which is not a step here",
                            node.id
                        )));
                    }
                },
            }
        }
        Ok(out)
    }
}
