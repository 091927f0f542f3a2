//! The plan's graph for the page: the diagram `inspect --format mermaid`
//! draws ([`agentfile_frontend::inspect::diagram`]), laid out here in rows
//! (deterministic, no layout code in the page), each node with its state
//! from the session's events.
//!
//! Layout: a node's row is its longest distance from `start` over forward
//! arrows (a loop's way back and arrows that close a cycle do not count);
//! within a row, nodes keep the order a depth-first walk meets them, which
//! keeps branches and map bodies side by side; groups are the boxes around
//! their members. Arrows go from the bottom of one node to the top of the
//! next; arrows back up go round the right side.

use std::collections::{HashMap, HashSet};

use agentfile_frontend::inspect::{Diagram, DiagramNode};
use agentfile_wire::events::{Event, EventBody};
use serde::Serialize;

use super::timeline::template;

#[derive(Debug, Serialize)]
pub struct Graph {
    /// Said above the graph: that the file changed since the run.
    pub note: Option<String>,
    pub width: f64,
    pub height: f64,
    pub nodes: Vec<PlacedNode>,
    pub groups: Vec<PlacedGroup>,
    pub edges: Vec<PlacedEdge>,
}

#[derive(Debug, Serialize)]
pub struct PlacedNode {
    pub id: String,
    pub path: Option<String>,
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub lines: Vec<String>,
    pub shape: &'static str,
    pub state: &'static str,
    pub badge: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct PlacedGroup {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub label: String,
    pub kind: &'static str,
}

#[derive(Debug, Serialize)]
pub struct PlacedEdge {
    pub points: Vec<[f64; 2]>,
    pub label: Option<String>,
    pub label_at: [f64; 2],
    pub dashed: bool,
}

const CHAR_W: f64 = 7.0;
const LINE_H: f64 = 16.0;
const ROW_GAP: f64 = 64.0;
const COL_GAP: f64 = 28.0;
const MARGIN: f64 = 24.0;
const GROUP_PAD: f64 = 12.0;
const GROUP_TOP: f64 = 30.0;
const MAX_LABEL: usize = 48;

/// The states of the plan's nodes, by template path, from the events.
#[derive(Debug, Default)]
pub struct States {
    by_path: HashMap<String, (&'static str, String)>,
    /// How the last run ended: `done`, `failed`, `skipped` (cancelled).
    outcome: Option<&'static str>,
}

impl States {
    /// Each node's state: `failed` over `waiting` over `running` over
    /// `done`; nodes never started are `pending`. A map's inner nodes get a
    /// badge: how many of their items are done.
    pub fn of(events: &[Event]) -> States {
        // The state of each concrete path (map item, iteration), in order.
        let mut concrete: HashMap<String, &'static str> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut ended: Option<&'static str> = None;
        for e in events {
            let set = match &e.body {
                EventBody::StepStarted { .. }
                | EventBody::NodeStarted { .. }
                | EventBody::GoalStarted { .. }
                | EventBody::ApprovalResolved { .. } => Some("running"),
                EventBody::StepComplete { .. }
                | EventBody::NodeComplete { .. }
                | EventBody::GoalComplete { .. } => Some("done"),
                EventBody::NodeFailed { retry_in_ms, .. } => Some(if retry_in_ms.is_some() {
                    "running"
                } else {
                    "failed"
                }),
                EventBody::ApprovalRequired { .. } | EventBody::Suspended { .. } => Some("waiting"),
                EventBody::RunStarted { .. } => {
                    ended = None;
                    None
                }
                EventBody::RunComplete { .. } => {
                    ended = Some("done");
                    None
                }
                EventBody::RunFailed { .. } => {
                    ended = Some("failed");
                    None
                }
                EventBody::RunCancelled { .. } => {
                    ended = Some("skipped");
                    None
                }
                _ => None,
            };
            if let (Some(state), Some(node)) = (set, &e.node)
                && e.agent.is_none()
            {
                if !concrete.contains_key(node) {
                    order.push(node.clone());
                }
                concrete.insert(node.clone(), state);
            }
        }
        let rank = |s: &str| match s {
            "failed" => 5,
            "waiting" => 4,
            "running" => 3,
            "skipped" => 2,
            "done" => 1,
            _ => 0,
        };
        let mut by_path: HashMap<String, (&'static str, String)> = HashMap::new();
        let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
        for path in &order {
            let mut state = concrete[path];
            if state == "running"
                && let Some(end) = ended.filter(|e| *e != "done")
            {
                state = end;
            }
            let t = template(path);
            let c = counts.entry(t.clone()).or_default();
            c.1 += 1;
            if state == "done" {
                c.0 += 1;
            }
            let slot = by_path.entry(t).or_insert((state, String::new()));
            if rank(state) > rank(slot.0) {
                slot.0 = state;
            }
        }
        for (t, (done, seen)) in counts {
            if seen > 1
                && let Some(slot) = by_path.get_mut(&t)
            {
                slot.1 = format!("{done}/{seen}");
            }
        }
        States {
            by_path,
            outcome: ended,
        }
    }

    fn get(&self, path: Option<&str>) -> (&'static str, Option<String>) {
        match path.and_then(|p| self.by_path.get(p)) {
            Some((s, badge)) => (s, (!badge.is_empty()).then(|| badge.clone())),
            None => ("pending", None),
        }
    }
}

/// Lay `d` out, each node in its state.
pub fn layout(d: &Diagram, states: &States) -> Graph {
    let index: HashMap<&str, usize> = d
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let by_row = rows(d, &index);
    let sizes: Vec<(f64, f64)> = d.nodes.iter().map(node_size).collect();
    let row_width = |r: &Vec<usize>| -> f64 {
        r.iter().map(|&v| sizes[v].0).sum::<f64>() + COL_GAP * r.len().saturating_sub(1) as f64
    };
    let widest = by_row.iter().map(row_width).fold(0.0, f64::max);
    let mut pos = vec![(0.0, 0.0); d.nodes.len()];
    let mut y = MARGIN + GROUP_TOP;
    for r in &by_row {
        let height = r.iter().map(|&v| sizes[v].1).fold(0.0, f64::max);
        let mut x = MARGIN + (widest - row_width(r)) / 2.0;
        for &v in r {
            pos[v] = (x, y + (height - sizes[v].1) / 2.0);
            x += sizes[v].0 + COL_GAP;
        }
        y += height + ROW_GAP;
    }
    let nodes = place_nodes(d, states, &pos, &sizes);
    let groups = place_groups(d, &nodes);
    let right = nodes.iter().map(|n| n.x + n.w).fold(0.0, f64::max);
    let edges = route_edges(d, &index, &nodes, right);
    let beyond = groups.iter().map(|g| g.x + g.w).fold(0.0, f64::max);
    let width = right.max(beyond).max(widest + MARGIN) + MARGIN + 40.0;
    Graph {
        note: None,
        width,
        height: y - ROW_GAP + MARGIN,
        nodes,
        groups,
        edges,
    }
}

/// The nodes of `d` by row: each on the longest path of forward arrows from
/// `start` (arrows that close a cycle do not count), in discovery order
/// within a row.
fn rows(d: &Diagram, index: &HashMap<&str, usize>) -> Vec<Vec<usize>> {
    let mut out_edges: Vec<Vec<usize>> = vec![Vec::new(); d.nodes.len()];
    for e in d.edges.iter().filter(|e| !e.dashed) {
        if let (Some(&a), Some(&b)) = (index.get(e.from.as_str()), index.get(e.to.as_str())) {
            out_edges[a].push(b);
        }
    }
    // Depth-first from `start` (then from anything unreached): discovery
    // order, and the arrows that close a cycle.
    let mut seen = vec![false; d.nodes.len()];
    let mut on_stack = vec![false; d.nodes.len()];
    let mut discovery = Vec::new();
    let mut back: HashSet<(usize, usize)> = HashSet::new();
    let mut finish = Vec::new();
    let roots: Vec<usize> = index
        .get("start")
        .copied()
        .into_iter()
        .chain(0..d.nodes.len())
        .collect();
    for root in roots {
        if seen[root] {
            continue;
        }
        // An explicit stack of (node, next child to visit).
        let mut stack = vec![(root, 0usize)];
        seen[root] = true;
        on_stack[root] = true;
        discovery.push(root);
        while let Some((v, i)) = stack.last_mut() {
            let v = *v;
            if let Some(&w) = out_edges[v].get(*i) {
                *i += 1;
                if on_stack[w] {
                    back.insert((v, w));
                } else if !seen[w] {
                    seen[w] = true;
                    on_stack[w] = true;
                    discovery.push(w);
                    stack.push((w, 0));
                }
            } else {
                on_stack[v] = false;
                finish.push(v);
                stack.pop();
            }
        }
    }
    // Longest path over the forward arrows, in topological order.
    let mut row = vec![0usize; d.nodes.len()];
    for &v in finish.iter().rev() {
        for &w in &out_edges[v] {
            if !back.contains(&(v, w)) {
                row[w] = row[w].max(row[v] + 1);
            }
        }
    }
    let rows = row.iter().max().map_or(0, |r| r + 1);
    let mut by_row: Vec<Vec<usize>> = vec![Vec::new(); rows];
    for &v in &discovery {
        by_row[row[v]].push(v);
    }
    by_row
}

/// A node's box: wide enough for its longest line, tall enough for its
/// lines and the state line.
fn node_size(n: &DiagramNode) -> (f64, f64) {
    if n.shape == "circle" {
        return (14.0, 14.0);
    }
    let chars = n
        .lines
        .iter()
        .map(|l| l.chars().count().min(MAX_LABEL))
        .max();
    let w = (chars.unwrap_or(4) as f64 * CHAR_W + 28.0).max(60.0);
    let lines = n.lines.len().max(1) as f64 + 1.0; // + the state line
    let h = lines * LINE_H + 12.0;
    match n.shape {
        "diamond" | "hexagon" => (w + 24.0, h + 8.0),
        _ => (w, h),
    }
}

/// The nodes of `d` at their places, each in its state.
fn place_nodes(
    d: &Diagram,
    states: &States,
    pos: &[(f64, f64)],
    sizes: &[(f64, f64)],
) -> Vec<PlacedNode> {
    d.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let (state, badge) = match (n.id.as_str(), states.outcome) {
                ("start", _) => ("done", None),
                ("done", Some("done")) | ("failed", Some("failed")) => ("done", None),
                ("done" | "failed", _) if n.path.is_none() => ("pending", None),
                _ => states.get(n.path.as_deref()),
            };
            PlacedNode {
                id: n.id.clone(),
                path: n.path.clone(),
                x: pos[i].0,
                y: pos[i].1,
                w: sizes[i].0,
                h: sizes[i].1,
                lines: n.lines.iter().map(|l| clip(l)).collect(),
                shape: n.shape,
                state,
                badge,
            }
        })
        .collect()
}

/// The arrows between placed nodes: down between rows, or round the right
/// side (beyond `right`) when they go back up.
fn route_edges(
    d: &Diagram,
    index: &HashMap<&str, usize>,
    nodes: &[PlacedNode],
    right: f64,
) -> Vec<PlacedEdge> {
    d.edges
        .iter()
        .filter_map(|e| {
            let a = &nodes[*index.get(e.from.as_str())?];
            let b = &nodes[*index.get(e.to.as_str())?];
            let points = if b.y > a.y + a.h {
                let (x1, y1) = (a.x + a.w / 2.0, a.y + a.h);
                let (x2, y2) = (b.x + b.w / 2.0, b.y);
                let mid = y2 - ROW_GAP / 2.0;
                vec![[x1, y1], [x1, mid], [x2, mid], [x2, y2]]
            } else {
                // Back up (a loop, a jump back): round the right side.
                let out = right.max(a.x + a.w).max(b.x + b.w) + 16.0;
                let (y1, y2) = (a.y + a.h / 2.0, b.y + b.h / 2.0);
                vec![[a.x + a.w, y1], [out, y1], [out, y2], [b.x + b.w, y2]]
            };
            let label_at = [
                (points[1][0] + points[2][0]) / 2.0,
                (points[1][1] + points[2][1]) / 2.0 - 4.0,
            ];
            Some(PlacedEdge {
                points,
                label: e.label.as_deref().map(clip),
                label_at,
                dashed: e.dashed,
            })
        })
        .collect()
}

/// The boxes around each group's nodes (and its inner groups'), innermost
/// groups drawn last.
fn place_groups(d: &Diagram, nodes: &[PlacedNode]) -> Vec<PlacedGroup> {
    let mut boxes: Vec<Option<(f64, f64, f64, f64)>> = vec![None; d.groups.len()];
    for (i, n) in d.nodes.iter().enumerate() {
        let mut g = n.group;
        while let Some(gi) = g {
            let p = &nodes[i];
            let b = boxes[gi].get_or_insert((p.x, p.y, p.x + p.w, p.y + p.h));
            *b = (
                b.0.min(p.x),
                b.1.min(p.y),
                b.2.max(p.x + p.w),
                b.3.max(p.y + p.h),
            );
            g = d.groups[gi].parent;
        }
    }
    // Depth, so an outer group's box takes in its inner ones' padding.
    let depth = |mut g: Option<usize>| {
        let mut n = 0.0;
        while let Some(gi) = g {
            n += 1.0;
            g = d.groups[gi].parent;
        }
        n
    };
    let levels = d.groups.iter().map(|g| depth(g.parent)).fold(0.0, f64::max);
    let mut out: Vec<(f64, PlacedGroup)> = d
        .groups
        .iter()
        .zip(&boxes)
        .filter_map(|(g, b)| {
            let (x1, y1, x2, y2) = (*b)?;
            let inner = levels - depth(g.parent);
            let pad = GROUP_PAD * (inner + 1.0);
            let top = GROUP_TOP + 4.0 * inner;
            let label = clip(&g.label);
            // Wide enough for its label, growing to the right.
            let wide = label.chars().count() as f64 * CHAR_W + 20.0;
            Some((
                depth(g.parent),
                PlacedGroup {
                    x: x1 - pad,
                    y: y1 - pad - top,
                    w: (x2 - x1 + 2.0 * pad).max(wide),
                    h: y2 - y1 + 2.0 * pad + top,
                    label,
                    kind: g.kind,
                },
            ))
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.into_iter().map(|(_, g)| g).collect()
}

/// A label cut to what a box shows.
fn clip(s: &str) -> String {
    if s.chars().count() <= MAX_LABEL {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(MAX_LABEL - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_frontend::inspect::{DiagramEdge, DiagramGroup, DiagramNode};

    fn node(id: &str, path: Option<&str>, group: Option<usize>) -> DiagramNode {
        DiagramNode {
            id: id.into(),
            lines: vec![id.into()],
            shape: "box",
            path: path.map(str::to_owned),
            group,
        }
    }

    fn edge(from: &str, to: &str, dashed: bool) -> DiagramEdge {
        DiagramEdge {
            from: from.into(),
            to: to.into(),
            label: None,
            dashed,
        }
    }

    #[test]
    fn rows_follow_the_longest_path_and_loops_go_round() {
        let d = Diagram {
            fingerprint: String::new(),
            nodes: vec![
                node("start", None, None),
                node("a", Some("a"), Some(0)),
                node("b", Some("b"), Some(0)),
                node("c", Some("c"), None),
                node("done", None, None),
            ],
            groups: vec![DiagramGroup {
                label: "loop l".into(),
                kind: "loop",
                parent: None,
                path: "l".into(),
            }],
            edges: vec![
                edge("start", "a", false),
                edge("a", "b", false),
                edge("b", "a", true),
                edge("start", "c", false),
                edge("b", "c", false),
                edge("c", "done", false),
                // A jump back that closes a cycle without being dashed.
                edge("c", "a", false),
            ],
        };
        let g = layout(&d, &States::default());
        let y = |id: &str| g.nodes.iter().find(|n| n.id == id).unwrap().y;
        assert!(y("start") < y("a") && y("a") < y("b") && y("b") < y("c") && y("c") < y("done"));
        let back = g.edges.iter().find(|e| e.dashed).unwrap();
        assert!(
            back.points[1][0] > g.nodes[1].x + g.nodes[1].w,
            "goes round the right"
        );
        let grp = &g.groups[0];
        for n in &g.nodes[1..3] {
            assert!(grp.x < n.x && grp.y < n.y && grp.x + grp.w > n.x + n.w);
        }
        assert!(
            g.nodes
                .iter()
                .all(|n| n.x + n.w <= g.width && n.y + n.h <= g.height)
        );
    }

    #[test]
    fn states_come_from_events_with_map_badges() {
        use agentfile_wire::events::EventBody as B;
        let ev = |seq: u64, node: &str, body: B| Event {
            schema_version: 1,
            session_id: "s".into(),
            seq,
            ts: "2026-11-27T10:00:00.000Z".into(),
            step: None,
            goal: None,
            agent: None,
            iteration: None,
            node: Some(node.into()),
            node_kind: None,
            replayed: false,
            body,
        };
        let started = || B::NodeStarted {
            kind: "tool".into(),
        };
        let done = || B::NodeComplete {
            output: serde_json::Value::Null,
            next: None,
        };
        let events = vec![
            ev(1, "each[0]/read", started()),
            ev(2, "each[0]/read", done()),
            ev(3, "each[1]/read", started()),
            ev(
                4,
                "gate",
                B::ApprovalRequired {
                    reason: "r".into(),
                    deadline_ms: None,
                },
            ),
        ];
        let s = States::of(&events);
        assert_eq!(s.get(Some("each/read")), ("running", Some("1/2".into())));
        assert_eq!(s.get(Some("gate")), ("waiting", None));
        assert_eq!(s.get(Some("other")), ("pending", None));
    }
}
