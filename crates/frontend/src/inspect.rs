//! Renders a [`Plan`] for people: as text, as JSON, or as a Mermaid flowchart.
//!
//! Pure functions from a plan to a string; nothing here reads files or decides
//! anything about the workflow.

use std::fmt::Write as _;

use agentfile_plan::{GoalKind, Limit, Plan, PromptSource, StepKind, Supervision};
use serde::Serialize;

/// The plan as pretty JSON (the shape is `protocol/plan.schema.json`).
pub fn json(plan: &Plan) -> String {
    // Serialising a tree of owned strings and numbers cannot fail.
    serde_json::to_string_pretty(plan).unwrap_or_default() + "\n"
}

fn limit_text(l: &Limit) -> String {
    match l {
        Limit::Count { count } => count.to_string(),
        Limit::Input {
            input,
            default: Some(d),
        } => format!("${input} (default {d})"),
        Limit::Input {
            input,
            default: None,
        } => format!("${input}"),
    }
}

fn source_text(s: &PromptSource) -> String {
    match s {
        PromptSource::Inline => "inline".into(),
        PromptSource::File { path } => format!("file {path}"),
        PromptSource::Skill { path, .. } => format!("skill {path}"),
    }
}

/// A human-readable summary.
pub fn text(plan: &Plan) -> String {
    let mut o = String::new();
    if let Some(d) = &plan.declared {
        o.push_str(&agentfile_agentrc::summary(d));
        o.push('\n');
    }
    let _ = writeln!(o, "workflow {}  ({})", plan.name, plan.path);
    if let Some(s) = &plan.security {
        let _ = writeln!(o, "security {s}");
    }
    if let Some(e) = &plan.execution {
        let _ = writeln!(
            o,
            "execution.preferred {e} (reported only: agentfile runs every step itself and never runs scripts/ide/ files)"
        );
    }
    if !plan.protected.is_empty() {
        let _ = writeln!(
            o,
            "not writable during a run: {}",
            plan.protected.join(", ")
        );
    }
    let width = plan
        .inputs
        .iter()
        .map(|i| i.name.len())
        .chain(plan.agents.iter().map(|a| a.name.len()))
        .chain(plan.goals.iter().map(|g| g.name.len()))
        .max()
        .unwrap_or(0)
        .max(8);
    let _ = writeln!(o, "\ninputs");
    if plan.inputs.is_empty() {
        let _ = writeln!(o, "  (none)");
    }
    for i in &plan.inputs {
        match &i.default {
            Some(d) => {
                let _ = writeln!(o, "  {:width$}  default {:?}", i.name, d);
            }
            None => match &i.env {
                Some(v) => {
                    let _ = writeln!(
                        o,
                        "  {:width$}  required (else read from the environment variable {v})",
                        i.name
                    );
                }
                None => {
                    // What `list` and the JSON say: an input may be left out
                    // unless the workflow requires it.
                    let what = if i.required { "required" } else { "optional" };
                    let _ = writeln!(o, "  {:width$}  {what}", i.name);
                }
            },
        }
    }
    let _ = writeln!(o, "\nagents");
    if plan.agents.is_empty() {
        let _ = writeln!(o, "  (none)");
    }
    for a in &plan.agents {
        let _ = write!(o, "  {:width$}  {}", a.name, source_text(&a.source));
        if let Some(p) = &a.profile {
            let _ = write!(o, "  profile {p}");
        }
        if !a.outputs.is_empty() {
            let _ = write!(o, "  -> {}", a.outputs.join(", "));
        }
        let _ = writeln!(o);
    }
    for a in &plan.agents {
        if let Some(card) = &a.card {
            card_text(&mut o, &a.name, card);
        }
    }
    let _ = writeln!(o, "\ngoals");
    for g in &plan.goals {
        let kind = match g.kind {
            GoalKind::Goal => "",
            GoalKind::Converge => "CONVERGE ",
        };
        let _ = writeln!(o, "  {:width$}  {kind}\"{}\"", g.name, g.summary);
        let pad = " ".repeat(width + 4);
        let mut facts = Vec::new();
        if !matches!(g.source, PromptSource::Inline) {
            facts.push(source_text(&g.source));
        }
        if !g.agents.is_empty() {
            facts.push(format!("agents {}", g.agents.join(", ")));
        }
        if !g.outputs.is_empty() {
            facts.push(format!("-> {}", g.outputs.join(", ")));
        }
        if !g.reads.is_empty() {
            let reads: Vec<String> = g.reads.iter().map(|r| format!("${r}")).collect();
            facts.push(format!("reads {}", reads.join(", ")));
        }
        if let Some(l) = &g.within {
            facts.push(format!("within {}", limit_text(l)));
        }
        if let Some(s) = g.supervision {
            facts.push(
                match s {
                    Supervision::Supervised => "supervised",
                    Supervision::SupervisedHuman => "supervised by a human",
                    Supervision::Unsupervised => "unsupervised",
                }
                .into(),
            );
        }
        if !facts.is_empty() {
            let _ = writeln!(o, "{pad}{}", facts.join(" · "));
        }
    }
    let _ = writeln!(o, "\nsteps");
    if plan.steps.is_empty() {
        // Formats other than the DSL: the step graph as an outline.
        for n in plan.graph.children() {
            outline(&mut o, n, 1);
        }
    }
    for (n, s) in plan.steps.iter().enumerate() {
        let head = match (s.kind, &s.within) {
            (StepKind::Run, _) => format!("RUN {}", s.name),
            (StepKind::Loop, Some(l)) => {
                format!("LOOP {} (at most {} iterations)", s.name, limit_text(l))
            }
            (StepKind::Loop, None) => format!("LOOP {}", s.name),
        };
        let _ = writeln!(o, "  {}. {head}: {}", n + 1, s.goals.join(" → "));
    }
    o
}

/// One step of a graph and its nested steps, a line each, indented by depth:
/// what it does, then where it routes.
fn outline(o: &mut String, n: &agentfile_plan::Node, depth: usize) {
    use agentfile_plan::{LoopUntil, Next, NodeKind};
    let pad = "  ".repeat(depth);
    let next = |n: &Next| match n {
        Next::End => "$end".to_owned(),
        Next::Node(id) => id.clone(),
    };
    let what = match &n.kind {
        NodeKind::Sequence { .. } => "steps".to_owned(),
        NodeKind::Goal(g) => format!("goal {}", g.goal),
        NodeKind::Tool { tool, .. } => format!("tool {tool}"),
        NodeKind::Command { tool, argv, .. } => {
            format!("tool {tool} (command `{}`)", argv.join(" "))
        }
        NodeKind::Shell {
            script,
            interpreter,
            ..
        } => match interpreter {
            Some(i) => format!("script {script} ({i})"),
            None => format!("script {script}"),
        },
        NodeKind::ReadFiles { paths } => format!("read {}", paths.join(", ")),
        NodeKind::WriteFile {
            path,
            content: Some(_),
        } => format!("write {path}"),
        NodeKind::WriteFile { path, .. } => format!("check the folder {path}"),
        NodeKind::Branch { arms, default } => {
            let mut routes: Vec<String> = arms
                .iter()
                .map(|a| format!("when {} → {}", a.when, next(&a.next)))
                .collect();
            if let Some(d) = default {
                routes.push(format!("otherwise → {}", next(d)));
            }
            format!("branch: {}", routes.join("; "))
        }
        NodeKind::Parallel { branches } => format!("parallel, {} branches", branches.len()),
        NodeKind::Map {
            over, concurrency, ..
        } => match concurrency {
            0 => format!("map over {over}"),
            c => format!("map over {over}, {c} at a time"),
        },
        NodeKind::Loop { until, max, .. } => match until {
            LoopUntil::While { expr } => {
                format!("loop while {expr}, at most {}", limit_text(max))
            }
            LoopUntil::Converged => format!("loop until converged, at most {}", limit_text(max)),
        },
        NodeKind::Approval(a) => {
            let mut t = "approval".to_owned();
            if let Some(x) = &a.on_approve {
                t.push_str(&format!(" · approve → {}", next(x)));
            }
            t.push_str(&match &a.on_reject {
                Some(x) => format!(" · reject → {}", next(x)),
                None => " · reject fails the run".to_owned(),
            });
            t
        }
        NodeKind::Suspend { events, .. } => format!("suspend until {}", events.join(" | ")),
        NodeKind::Subworkflow { plan, .. } => format!("subworkflow {}", plan.name),
    };
    let mut facts = vec![what];
    if let Some(r) = &n.retry {
        facts.push(format!("retry ×{}", r.max_attempts));
    }
    if let Some(t) = n.timeout_ms {
        facts.push(format!("timeout {t} ms"));
    }
    if n.compensation.is_some() {
        facts.push("compensated".to_owned());
    }
    if let Some(nx) = &n.next {
        facts.push(format!("→ {}", next(nx)));
    }
    let _ = writeln!(o, "{pad}{}  {}", n.id, facts.join(" · "));
    for c in n.children() {
        // A map's or loop's body is a sequence without an id of its own.
        if matches!(c.kind, NodeKind::Sequence { .. }) && c.id == "body" {
            for g in c.children() {
                outline(o, g, depth + 1);
            }
        } else {
            outline(o, c, depth + 1);
        }
    }
}

/// Escape text for a quoted Mermaid label.
fn label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The step and goal flow as a Mermaid flowchart: the DSL's RUN/LOOP steps
/// as they have always been drawn, any other plan from its step graph.
/// An agent file's card: what the model is told, and what the agent offers.
fn card_text(o: &mut String, name: &str, c: &agentfile_plan::agent::AgentCard) {
    let _ = writeln!(
        o,
        "\nagent {name}: {} {}  version {}  {}",
        c.icon,
        c.title,
        c.version,
        c.status.as_str()
    );
    if !c.description.is_empty() {
        let _ = writeln!(o, "  {}", c.description);
    }
    let block = |o: &mut String, title: &str, text: &str| {
        let _ = writeln!(o, "  {title}");
        for line in text.lines() {
            let _ = writeln!(o, "    {line}");
        }
    };
    block(o, "system message", &c.system);
    if !c.rules.is_empty() {
        block(o, "rules", &c.rules);
    }
    if !c.commands.is_empty() {
        let _ = writeln!(o, "  commands (MCP prompts)");
        let prefix = agentfile_agent_card::agent_name(std::path::Path::new(&c.file));
        for cmd in &c.commands {
            let args: String = cmd.arguments.iter().map(|a| format!(" <{a}>")).collect();
            let _ = writeln!(o, "    /{prefix}.{}{args}  {}", cmd.name, cmd.description);
        }
    }
    if let Some(script) = &c.script {
        let _ = writeln!(o, "  tools (JavaScript)");
        for t in &script.tools {
            let mark = if c.startup.as_deref() == Some(t.name.as_str()) {
                "  [startup]"
            } else {
                ""
            };
            let _ = writeln!(o, "    {}  {}{mark}", t.name, t.description);
        }
    }
    if let Some(ab) = &c.abilities {
        let list = |v: &[String]| {
            if v.is_empty() {
                "(none)".to_owned()
            } else {
                v.join(", ")
            }
        };
        let _ = writeln!(
            o,
            "  abilities  allow {}  deny {}",
            list(&ab.allow),
            list(&ab.deny)
        );
    }
    if !c.required_env.is_empty() {
        let _ = writeln!(o, "  requires env  {}", c.required_env.join(", "));
    }
    if let Some(models) = c
        .recommended
        .as_ref()
        .and_then(|r| r.as_object())
        .and_then(|m| m.iter().find(|(k, _)| k.eq_ignore_ascii_case("models")))
        .map(|(_, v)| v)
    {
        let names: Vec<String> = match models {
            serde_json::Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect(),
            serde_json::Value::String(s) => vec![s.clone()],
            _ => Vec::new(),
        };
        if !names.is_empty() {
            let _ = writeln!(o, "  recommended models  {}", names.join(", "));
        }
    }
}

pub fn mermaid(plan: &Plan) -> String {
    if plan.steps.is_empty() {
        return graph::mermaid(plan);
    }
    let mut o = String::from("flowchart TD\n");
    let _ = writeln!(o, "  start([\"{}\"])", label(&plan.name));
    let mut prev = "start".to_owned();
    for (si, s) in plan.steps.iter().enumerate() {
        let title = match (s.kind, &s.within) {
            (StepKind::Run, _) => format!("RUN {}", s.name),
            (StepKind::Loop, Some(l)) => format!("LOOP {} ≤ {}", s.name, limit_text(l)),
            (StepKind::Loop, None) => format!("LOOP {}", s.name),
        };
        let _ = writeln!(o, "  subgraph s{si}[\"{}\"]", label(&title));
        let _ = writeln!(o, "    direction TB");
        let ids: Vec<String> = (0..s.goals.len()).map(|gi| format!("s{si}g{gi}")).collect();
        for (gi, name) in s.goals.iter().enumerate() {
            let mut text = name.clone();
            if let Some(g) = plan.goal(name) {
                if !g.agents.is_empty() {
                    text.push_str(&format!("<br/>agents: {}", g.agents.join(" ∥ ")));
                }
                if !g.outputs.is_empty() {
                    text.push_str(&format!("<br/>→ {}", g.outputs.join(", ")));
                }
            }
            // `<br/>` is Mermaid markup, so escape the parts, not the whole.
            let text = text
                .split("<br/>")
                .map(label)
                .collect::<Vec<_>>()
                .join("<br/>");
            let _ = writeln!(o, "    {}[\"{}\"]", ids[gi], text);
        }
        for w in ids.windows(2) {
            let _ = writeln!(o, "    {} --> {}", w[0], w[1]);
        }
        let _ = writeln!(o, "  end");
        if let Some(first) = ids.first() {
            let _ = writeln!(o, "  {prev} --> {first}");
        }
        for (gi, name) in s.goals.iter().enumerate() {
            if let Some(g) = plan.goal(name)
                && g.kind == GoalKind::Converge
            {
                let lim = g.within.as_ref().map(limit_text).unwrap_or_default();
                let _ = writeln!(
                    o,
                    "  {id} -. \"until CONVERGED, ≤ {}\" .-> {id}",
                    label(&lim),
                    id = ids[gi]
                );
            }
        }
        if s.kind == StepKind::Loop
            && let (Some(first), Some(last)) = (ids.first(), ids.last())
        {
            let lim = s.within.as_ref().map(limit_text).unwrap_or_default();
            let _ = writeln!(
                o,
                "  {last} -. \"until converged, ≤ {}\" .-> {first}",
                label(&lim)
            );
        }
        if let Some(last) = ids.last() {
            prev = last.clone();
        }
    }
    let _ = writeln!(o, "  {prev} --> done([\"done\"])");
    o
}

/// The step graph of `plan` as data: what [`mermaid`] draws for a plan
/// without DSL steps (for a DSL plan, the graph it lowers to), each node
/// with the plan path its events carry. The web view lays it out.
pub fn diagram(plan: &Plan) -> Diagram {
    graph::walk(plan).1
}

/// The step graph's boxes, groups and arrows (see [`diagram`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diagram {
    /// The plan's fingerprint (as `run_started.fingerprint` records it).
    pub fingerprint: String,
    pub nodes: Vec<DiagramNode>,
    pub groups: Vec<DiagramGroup>,
    pub edges: Vec<DiagramEdge>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagramNode {
    /// The Mermaid id (`n3`, `start`, `done`, `failed`).
    pub id: String,
    /// The label, one entry per line, as plain text.
    pub lines: Vec<String>,
    /// `box`, `round` (start, done, suspend), `diamond` (branch), `hexagon`
    /// (approval), `circle` (fork, join), `subroutine`, `slanted` (shell).
    pub shape: &'static str,
    /// The plan path of the node (without map items or loop iterations:
    /// `each/read`, `fan/a`), as events' `node` names it.
    pub path: Option<String>,
    /// The innermost group it is drawn in.
    pub group: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagramGroup {
    pub label: String,
    /// `parallel`, `map` or `loop`.
    pub kind: &'static str,
    pub parent: Option<usize>,
    /// The plan path of the parallel, map or loop node.
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagramEdge {
    pub from: String,
    pub to: String,
    pub label: Option<String>,
    /// A loop's way back.
    pub dashed: bool,
}

/// The step graph as a Mermaid flowchart: branches with their conditions,
/// parallel forks and joins, maps and loops as subgraphs (a loop's way back
/// dotted), suspends and approvals with their routes.
mod graph {
    use std::fmt::Write as _;

    use super::{Diagram, DiagramEdge, DiagramGroup, DiagramNode, label, limit_text};
    use agentfile_plan::{Next, Node, NodeKind, OnTimeout, Plan};

    struct Out {
        text: String,
        n: usize,
        depth: usize,
        diagram: Diagram,
        /// The groups open around what is drawn now.
        open: Vec<usize>,
        /// Each goal's agents, for the diagram's goal boxes.
        agents: std::collections::HashMap<String, Vec<String>>,
    }

    fn join(parent: &str, id: &str) -> String {
        if parent.is_empty() {
            id.to_owned()
        } else {
            format!("{parent}/{id}")
        }
    }

    /// Where a body's nodes run: a sequence's children at the body's own
    /// path, any other node as its one child (as the executor runs them).
    fn body_path(parent: &str, body: &Node) -> String {
        match body.kind {
            NodeKind::Sequence { .. } => parent.to_owned(),
            _ => join(parent, &body.id),
        }
    }

    /// An edge leaving a drawn node: from which id, with which label.
    type Exit = (String, Option<String>);

    impl Out {
        fn id(&mut self) -> String {
            self.n += 1;
            format!("n{}", self.n)
        }

        fn line(&mut self, s: &str) {
            let _ = writeln!(self.text, "{}{s}", "  ".repeat(self.depth + 1));
        }

        fn edge(&mut self, (from, lbl): &Exit, to: &str) {
            match lbl {
                Some(l) => self.line(&format!("{from} -- \"{}\" --> {to}", label(l))),
                None => self.line(&format!("{from} --> {to}")),
            }
            self.arrow(from, to, lbl.as_deref(), false);
        }

        fn arrow(&mut self, from: &str, to: &str, lbl: Option<&str>, dashed: bool) {
            self.diagram.edges.push(DiagramEdge {
                from: from.to_owned(),
                to: to.to_owned(),
                label: lbl.map(str::to_owned),
                dashed,
            });
        }

        fn shape(&mut self, id: &str, lines: Vec<String>, shape: &'static str, path: Option<&str>) {
            if self.diagram.nodes.iter().any(|n| n.id == id) {
                return;
            }
            self.diagram.nodes.push(DiagramNode {
                id: id.to_owned(),
                lines,
                shape,
                path: path.map(str::to_owned),
                group: self.open.last().copied(),
            });
        }

        fn open_group(&mut self, sg: &str, text: String, kind: &'static str, path: &str) {
            self.line(&format!("subgraph {sg}[\"{}\"]", label(&text)));
            self.depth += 1;
            self.diagram.groups.push(DiagramGroup {
                label: text,
                kind,
                parent: self.open.last().copied(),
                path: path.to_owned(),
            });
            self.open.push(self.diagram.groups.len() - 1);
        }

        fn close_group(&mut self) {
            self.depth -= 1;
            self.line("end");
            self.open.pop();
        }
    }

    pub fn mermaid(plan: &Plan) -> String {
        walk(plan).0
    }

    /// The Mermaid text and the diagram it draws.
    pub fn walk(plan: &Plan) -> (String, Diagram) {
        let mut o = Out {
            text: String::from("flowchart TD\n"),
            n: 0,
            depth: 0,
            diagram: Diagram::default(),
            open: Vec::new(),
            agents: plan
                .goals
                .iter()
                .filter(|g| !g.agents.is_empty())
                .map(|g| (g.name.clone(), g.agents.clone()))
                .collect(),
        };
        o.diagram.fingerprint = plan.fingerprint.clone();
        o.line(&format!("start([\"{}\"])", label(&plan.name)));
        o.shape("start", vec![plan.name.clone()], "round", None);
        let (entry, exits) = node(&mut o, &plan.graph, &body_path("", &plan.graph));
        match entry {
            Some(e) => o.edge(&("start".into(), None), &e),
            None => {
                o.line("start --> done");
                o.arrow("start", "done", None, false);
            }
        }
        o.line("done([\"done\"])");
        o.shape("done", vec!["done".into()], "round", None);
        for x in exits {
            o.edge(&x, "done");
        }
        (o.text, o.diagram)
    }

    fn title(n: &Node) -> String {
        let name = n.name.as_deref().unwrap_or(&n.id);
        match &n.kind {
            NodeKind::Goal(g) => format!("goal {}", g.goal),
            NodeKind::Tool { tool, .. } => format!("{name}<br/>tool {tool}"),
            NodeKind::Command { tool, .. } => format!("{name}<br/>tool {tool}"),
            NodeKind::Shell { script, .. } => format!("{name}<br/>script {script}"),
            NodeKind::ReadFiles { paths } => format!("{name}<br/>read {}", paths.join(", ")),
            NodeKind::WriteFile { path, .. } => format!("{name}<br/>write {path}"),
            NodeKind::Branch { .. } => name.to_owned(),
            NodeKind::Approval(_) => format!("approval {name}"),
            NodeKind::Suspend { events, .. } => {
                format!("{name}<br/>waits for {}", events.join(" | "))
            }
            NodeKind::Subworkflow { plan, .. } => format!("{name}<br/>workflow {}", plan.name),
            _ => name.to_owned(),
        }
    }

    fn shaped(n: &Node, id: &str) -> String {
        let t = title(n)
            .split("<br/>")
            .map(label)
            .collect::<Vec<_>>()
            .join("<br/>");
        match &n.kind {
            NodeKind::Branch { .. } => format!("{id}{{\"{t}\"}}"),
            NodeKind::Approval(_) => format!("{id}{{{{\"{t}\"}}}}"),
            NodeKind::Suspend { .. } => format!("{id}([\"{t}\"])"),
            NodeKind::Subworkflow { .. } => format!("{id}[[\"{t}\"]]"),
            NodeKind::Shell { .. } => format!("{id}[/\"{t}\"/]"),
            _ => format!("{id}[\"{t}\"]"),
        }
    }

    /// Draw `n`, which runs at plan path `path`; returns where edges into it
    /// go and the edges leaving it.
    fn node(o: &mut Out, n: &Node, path: &str) -> (Option<String>, Vec<Exit>) {
        match &n.kind {
            NodeKind::Sequence { nodes, start } => sequence(o, nodes, start.as_deref(), path),
            NodeKind::Parallel { branches } => {
                let (fork, join_id) = (o.id(), o.id());
                let sg = o.id();
                o.open_group(&sg, format!("parallel {}", n.id), "parallel", path);
                o.line(&format!("{fork}((\" \"))"));
                o.line(&format!("{join_id}((\" \"))"));
                o.shape(&fork, Vec::new(), "circle", None);
                o.shape(&join_id, Vec::new(), "circle", None);
                for b in branches {
                    let (entry, exits) = node(o, b, &join(path, &b.id));
                    match entry {
                        Some(e) => {
                            o.line(&format!("{fork} --> {e}"));
                            o.arrow(&fork, &e, None, false);
                        }
                        None => {
                            o.line(&format!("{fork} --> {join_id}"));
                            o.arrow(&fork, &join_id, None, false);
                        }
                    }
                    for x in exits {
                        o.edge(&x, &join_id);
                    }
                }
                o.close_group();
                (Some(fork), vec![(join_id, None)])
            }
            NodeKind::Map {
                over,
                concurrency,
                body,
            } => {
                let width = match concurrency {
                    0 => String::new(),
                    c => format!(", {c} at a time"),
                };
                let sg = o.id();
                o.open_group(&sg, format!("map {} over {over}{width}", n.id), "map", path);
                let (entry, exits) = node(o, body, &body_path(path, body));
                o.close_group();
                (entry, exits)
            }
            NodeKind::Loop { until, max, body } => {
                let cond = match until {
                    agentfile_plan::LoopUntil::While { expr } => format!("while {expr}"),
                    agentfile_plan::LoopUntil::Converged => "until converged".to_owned(),
                };
                let sg = o.id();
                let text = format!("loop {}: {cond}, ≤ {}", n.id, limit_text(max));
                o.open_group(&sg, text, "loop", path);
                let (entry, exits) = node(o, body, &body_path(path, body));
                o.close_group();
                if let Some(e) = &entry {
                    for (x, _) in &exits {
                        o.line(&format!("{x} -. \"again\" .-> {e}"));
                        o.arrow(x, e, Some("again"), true);
                    }
                }
                (entry, exits)
            }
            _ => {
                let id = o.id();
                let shape = shaped(n, &id);
                o.line(&shape);
                let mut lines: Vec<String> = title(n).split("<br/>").map(str::to_owned).collect();
                if let NodeKind::Goal(g) = &n.kind
                    && let Some(agents) = o.agents.get(&g.goal)
                {
                    lines.push(format!("agents: {}", agents.join(" ∥ ")));
                }
                o.shape(&id, lines, shape_name(n), Some(path));
                (Some(id.clone()), vec![(id, None)])
            }
        }
    }

    fn shape_name(n: &Node) -> &'static str {
        match &n.kind {
            NodeKind::Branch { .. } => "diamond",
            NodeKind::Approval(_) => "hexagon",
            NodeKind::Suspend { .. } => "round",
            NodeKind::Subworkflow { .. } => "subroutine",
            NodeKind::Shell { .. } => "slanted",
            _ => "box",
        }
    }

    fn sequence(
        o: &mut Out,
        nodes: &[Node],
        start: Option<&str>,
        path: &str,
    ) -> (Option<String>, Vec<Exit>) {
        let drawn: Vec<(Option<String>, Vec<Exit>)> = nodes
            .iter()
            .map(|n| node(o, n, &join(path, &n.id)))
            .collect();
        let entry_of = |id: &str| -> Option<usize> { nodes.iter().position(|n| n.id == id) };
        let mut out_exits = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let exits = drawn[i].1.clone();
            let fall = |o: &mut Out, x: &Exit, to: Option<&Next>, out: &mut Vec<Exit>| {
                let target = match to {
                    Some(Next::End) => None,
                    Some(Next::Node(id)) => entry_of(id),
                    None => (i + 1 < nodes.len()).then_some(i + 1),
                };
                match target.and_then(|t| drawn[t].0.clone()) {
                    Some(e) => o.edge(x, &e),
                    None => out.push(x.clone()),
                }
            };
            match &n.kind {
                NodeKind::Branch { arms, default } => {
                    for (x, _) in &exits {
                        for a in arms {
                            fall(
                                o,
                                &(x.clone(), Some(a.when.to_string())),
                                Some(&a.next),
                                &mut out_exits,
                            );
                        }
                        let d = default.clone().unwrap_or(Next::End);
                        fall(
                            o,
                            &(x.clone(), Some("otherwise".into())),
                            Some(&d),
                            &mut out_exits,
                        );
                    }
                }
                NodeKind::Approval(a) => {
                    for (x, _) in &exits {
                        let on_approve = a.on_approve.clone().or_else(|| n.next.clone());
                        fall(
                            o,
                            &(x.clone(), Some("approve".into())),
                            on_approve.as_ref(),
                            &mut out_exits,
                        );
                        match &a.on_reject {
                            Some(r) => fall(
                                o,
                                &(x.clone(), Some("reject".into())),
                                Some(r),
                                &mut out_exits,
                            ),
                            None => {
                                o.line(&format!("{x} -- \"reject\" --> failed([\"failed\"])"));
                                o.shape("failed", vec!["failed".into()], "round", None);
                                o.arrow(x, "failed", Some("reject"), false);
                            }
                        }
                        if let OnTimeout::Goto(t) = &a.on_timeout {
                            fall(
                                o,
                                &(x.clone(), Some("timeout".into())),
                                Some(&Next::Node(t.clone())),
                                &mut out_exits,
                            );
                        }
                    }
                }
                NodeKind::Suspend {
                    on_timeout: OnTimeout::Goto(t),
                    ..
                } => {
                    for x in &exits {
                        fall(o, x, n.next.as_ref(), &mut out_exits);
                        fall(
                            o,
                            &(x.0.clone(), Some("timeout".into())),
                            Some(&Next::Node(t.clone())),
                            &mut out_exits,
                        );
                    }
                }
                _ => {
                    for x in &exits {
                        fall(o, x, n.next.as_ref(), &mut out_exits);
                    }
                }
            }
        }
        let first = start.and_then(entry_of).unwrap_or(0);
        let entry = drawn.get(first).and_then(|d| d.0.clone());
        (entry, out_exits)
    }
}

#[cfg(test)]
mod tests {
    use agentfile_plan::{define_step, define_workflow};
    use serde_json::json;

    #[test]
    fn mermaid_draws_every_kind_of_route() {
        let plan = define_workflow("shapes")
            .step(define_step("route").branch([("$input.x == 1", "fan")], Some("wait")))
            .step(
                define_step("fan")
                    .parallel([
                        define_step("a").tool("bash", json!({"command": "true"})),
                        define_step("b").tool("bash", json!({"command": "true"})),
                    ])
                    .next("each"),
            )
            .step(
                define_step("each")
                    .map(
                        "$steps.fan.a",
                        3,
                        [define_step("one").tool("read", json!({"path": "$item"}))],
                    )
                    .next("again"),
            )
            .step(
                define_step("again")
                    .loop_while(
                        "$steps.check.ok == false",
                        5,
                        [define_step("check").tool("read", json!({"path": "x"}))],
                    )
                    .next("$end"),
            )
            .step(
                define_step("wait")
                    .suspend(&["go"])
                    .wait_timeout(1000, "ask"),
            )
            .step(define_step("ask").approval("ok?").on_reject("$end"))
            .commit()
            .unwrap();
        let m = super::mermaid(&plan);
        for want in [
            "flowchart TD",
            "{\"route\"}",
            "-- \"($input.x == 1)\" -->",
            "-- \"otherwise\" -->",
            "subgraph",
            "parallel fan",
            "map each over $steps.fan.a, 3 at a time",
            "loop again: while ($steps.check.ok == false), ≤ 5",
            "-. \"again\" .->",
            "waits for go",
            "-- \"timeout\" -->",
            "{{\"approval ask\"}}",
            "-- \"reject\" -->",
            "done([\"done\"])",
        ] {
            assert!(m.contains(want), "missing {want:?} in\n{m}");
        }
    }
}
