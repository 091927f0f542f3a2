//! Renders a [`Plan`] for people: as text, as JSON, or as a Mermaid flowchart.
//!
//! Pure functions from a plan to a string; nothing here reads files or decides
//! anything about the workflow.

use std::fmt::Write as _;

use crate::plan::{GoalKind, Limit, Plan, PromptSource, StepKind, Supervision};

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
    let _ = writeln!(o, "workflow {}  ({})", plan.name, plan.path);
    if let Some(s) = &plan.security {
        let _ = writeln!(o, "security {s}");
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
            None => {
                let _ = writeln!(o, "  {:width$}  required", i.name);
            }
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

/// The step and goal flow as a Mermaid flowchart.
pub fn mermaid(plan: &Plan) -> String {
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
