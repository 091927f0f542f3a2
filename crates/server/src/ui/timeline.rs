//! A session's timeline: one lane per concurrent line of work (a parallel
//! branch, a map item, an agent of a multi-agent goal), each node, agent,
//! model turn, tool call and wait a bar with its duration, tokens and cost.
//!
//! Pure: events in, lanes out, so it is tested with hand-built events. The
//! page only positions what this computes.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use agentfile_telemetry::parse_ts;
use agentfile_wire::events::{Event, EventBody};
use serde::Serialize;

#[derive(Debug, Serialize, PartialEq)]
pub struct Timeline {
    pub t0: Option<String>,
    pub span_ms: u64,
    pub lanes: Vec<Lane>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Lane {
    pub key: String,
    pub label: String,
    pub bars: Vec<Bar>,
}

#[derive(Debug, Serialize, PartialEq, Clone)]
pub struct Bar {
    /// `node`, `agent`, `turn`, `tool` or `wait`.
    pub kind: &'static str,
    pub label: String,
    pub start_ms: u64,
    pub end_ms: u64,
    /// The event that opened it.
    pub seq: u64,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    pub cost_usd: Option<f64>,
    /// `done`, `running`, `failed` or `waiting`.
    pub status: &'static str,
    pub running: bool,
}

/// The lanes of `events`. `parallels` are the plan paths of the parallel
/// nodes (their branches get lanes of their own); `now` ends the bars still
/// open when the session is running, else they end at its last event.
pub fn build(events: &[Event], parallels: &[String], running: bool) -> Timeline {
    let ms = |e: &Event| {
        parse_ts(&e.ts)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64)
    };
    let Some(first) = events.first() else {
        return Timeline {
            t0: None,
            span_ms: 0,
            lanes: Vec::new(),
        };
    };
    let t0 = ms(first);
    let last = events.last().map_or(t0, ms);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(last, |d| d.as_millis() as u64);
    let end = if running { now.max(last) } else { last };
    let rel = |t: u64| t.saturating_sub(t0);

    let mut b = Builder::default();
    for e in events {
        let at = rel(ms(e));
        let node = e.node.as_deref().unwrap_or("");
        let lane = lane_of(node, e.agent.as_deref(), parallels);
        let agent = e.agent.clone().unwrap_or_default();
        match &e.body {
            EventBody::StepStarted { .. }
            | EventBody::NodeStarted { .. }
            | EventBody::GoalStarted { .. }
                if e.node.is_some() && e.agent.is_none() =>
            {
                let key = ("node", node.to_owned(), String::new());
                b.open(key, &lane, "node", leaf(node).to_owned(), at, e.seq);
            }
            EventBody::StepComplete { .. }
            | EventBody::NodeComplete { .. }
            | EventBody::GoalComplete { .. } => {
                if e.agent.is_some() {
                    // One agent's part of a multi-agent goal.
                    b.close(&("agent", node.to_owned(), agent.clone()), at, "done");
                } else {
                    b.close(&("node", node.to_owned(), String::new()), at, "done");
                    // The goal's agents end with it.
                    b.close_prefix("agent", node, at, "done");
                }
            }
            EventBody::NodeFailed { retry_in_ms, .. } => {
                let status = if retry_in_ms.is_some() {
                    "done"
                } else {
                    "failed"
                };
                b.close(&("node", node.to_owned(), String::new()), at, status);
            }
            EventBody::AgentStarted { role } => {
                let label = match (role.as_str(), agent.as_str()) {
                    ("synthesis", _) | (_, "") => role.clone(),
                    (_, a) => format!("agent {a}"),
                };
                b.open(
                    ("agent", node.to_owned(), agent.clone()),
                    &lane,
                    "agent",
                    label,
                    at,
                    e.seq,
                );
            }
            EventBody::LlmRequest { turn, model, .. } => {
                let key = ("turn", node.to_owned(), format!("{agent}#{turn}"));
                b.open(
                    key,
                    &lane,
                    "turn",
                    format!("turn {turn} · {model}"),
                    at,
                    e.seq,
                );
            }
            EventBody::LlmResponse {
                turn,
                input_tokens,
                output_tokens,
                cost_usd,
                ..
            } => {
                let key = ("turn", node.to_owned(), format!("{agent}#{turn}"));
                if let Some(bar) = b.close(&key, at, "done") {
                    bar.tokens_in = Some(*input_tokens);
                    bar.tokens_out = Some(*output_tokens);
                    bar.cost_usd = *cost_usd;
                }
            }
            EventBody::ToolCall { id, tool, .. } => {
                let key = ("tool", String::new(), id.clone());
                b.open(key, &lane, "tool", tool.clone(), at, e.seq);
            }
            EventBody::ToolResult { id, is_error, .. } => {
                let status = if *is_error { "failed" } else { "done" };
                b.close(&("tool", String::new(), id.clone()), at, status);
            }
            EventBody::ApprovalRequired { reason, .. } => {
                let key = ("wait", node.to_owned(), String::new());
                b.open(key, &lane, "wait", format!("approval: {reason}"), at, e.seq);
                b.set_status(&("wait", node.to_owned(), String::new()), "waiting");
            }
            EventBody::ApprovalResolved { .. } => {
                b.close(&("wait", node.to_owned(), String::new()), at, "done");
            }
            EventBody::Suspended { events: names, .. } => {
                let key = ("wait", node.to_owned(), String::new());
                b.open(
                    key,
                    &lane,
                    "wait",
                    format!("waits for {}", names.join(" | ")),
                    at,
                    e.seq,
                );
                b.set_status(&("wait", node.to_owned(), String::new()), "waiting");
            }
            EventBody::Signal { .. } | EventBody::RunStarted { .. } => {
                b.close_kind("wait", at, "done");
            }
            EventBody::RunFailed { .. } | EventBody::RunCancelled { .. } => {
                b.close_all(at, "failed");
            }
            _ => {}
        }
        b.touch(&lane, at);
    }
    b.finish(rel(end), running);
    let span_ms = rel(end).max(1);
    let mut lanes = b.lanes;
    for lane in &mut lanes {
        merge_small(&mut lane.bars, span_ms / RESOLUTION);
    }
    Timeline {
        t0: Some(first.ts.clone()),
        span_ms,
        lanes,
    }
}

/// The bars a timeline can tell apart across its width: turns and tool
/// calls narrower than `span / RESOLUTION` that follow each other in a lane
/// are one bar ("12 turns", their tokens and cost summed). A 10,000-event
/// session draws hundreds of bars instead of thousands, and nothing drawn
/// was visible apart anyway.
const RESOLUTION: u64 = 400;

fn merge_small(bars: &mut Vec<Bar>, min_ms: u64) {
    if min_ms == 0 || bars.len() < 2 {
        return;
    }
    let small = |b: &Bar| matches!(b.kind, "turn" | "tool") && b.end_ms - b.start_ms < min_ms;
    let mut out: Vec<Bar> = Vec::with_capacity(bars.len());
    // How many bars each merged bar holds, by its index in `out`.
    let mut held: Vec<usize> = Vec::with_capacity(bars.len());
    // The index in `out` of the run of small bars each kind is building.
    let mut open: Vec<(&'static str, usize)> = Vec::new();
    for bar in bars.drain(..) {
        if !small(&bar) {
            out.push(bar);
            held.push(1);
            continue;
        }
        let run = open.iter().find(|(k, _)| *k == bar.kind).map(|(_, i)| *i);
        match run {
            Some(i) if bar.start_ms <= out[i].end_ms + min_ms => {
                let m = &mut out[i];
                m.end_ms = m.end_ms.max(bar.end_ms);
                m.tokens_in = add(m.tokens_in, bar.tokens_in);
                m.tokens_out = add(m.tokens_out, bar.tokens_out);
                m.cost_usd = match (m.cost_usd, bar.cost_usd) {
                    (Some(a), Some(b)) => Some(a + b),
                    (a, b) => a.or(b),
                };
                if bar.status == "failed" || (bar.running && m.status != "failed") {
                    m.status = bar.status;
                }
                m.running |= bar.running;
                held[i] += 1;
            }
            _ => {
                open.retain(|(k, _)| *k != bar.kind);
                open.push((bar.kind, out.len()));
                out.push(bar);
                held.push(1);
            }
        }
    }
    for (bar, n) in out.iter_mut().zip(held) {
        if n > 1 {
            let what = if bar.kind == "turn" {
                "turns"
            } else {
                "tool calls"
            };
            bar.label = format!("{n} {what}");
        }
    }
    *bars = out;
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// The last segment of a path, for a bar's label.
fn leaf(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A plan path without map items, loop iterations and revisits.
pub fn template(path: &str) -> String {
    path.split('/')
        .map(|seg| seg.split(['[', '#', '@']).next().unwrap_or(seg))
        .collect::<Vec<_>>()
        .join("/")
}

/// The lane of an event at `node` by `agent`: the node's path up to its last
/// map item (`each[3]`) or parallel branch (`fan/left`), `main` when it has
/// neither, then ` @agent`.
fn lane_of(node: &str, agent: Option<&str>, parallels: &[String]) -> String {
    let segs: Vec<&str> = node.split('/').filter(|s| !s.is_empty()).collect();
    let mut cut = None;
    for i in 0..segs.len() {
        if segs[i].contains('[') {
            cut = Some(i);
        }
        if i > 0 {
            let parent = template(&segs[..i].join("/"));
            if parallels.contains(&parent) {
                cut = Some(i);
            }
        }
    }
    let base = match cut {
        Some(i) => segs[..=i].join("/"),
        None => "main".to_owned(),
    };
    match agent {
        Some(a) if !a.is_empty() => format!("{base} @{a}"),
        _ => base,
    }
}

type Key = (&'static str, String, String);

#[derive(Default)]
struct Builder {
    lanes: Vec<Lane>,
    index: HashMap<String, usize>,
    /// Open bars: where they are (lane, bar).
    open: HashMap<Key, (usize, usize)>,
    /// The last time anything happened in each lane.
    last: HashMap<usize, u64>,
}

impl Builder {
    fn lane(&mut self, key: &str) -> usize {
        if let Some(i) = self.index.get(key) {
            return *i;
        }
        self.lanes.push(Lane {
            key: key.to_owned(),
            label: key.to_owned(),
            bars: Vec::new(),
        });
        self.index.insert(key.to_owned(), self.lanes.len() - 1);
        self.lanes.len() - 1
    }

    fn open(&mut self, key: Key, lane: &str, kind: &'static str, label: String, at: u64, seq: u64) {
        let l = self.lane(lane);
        self.lanes[l].bars.push(Bar {
            kind,
            label,
            start_ms: at,
            end_ms: at,
            seq,
            tokens_in: None,
            tokens_out: None,
            cost_usd: None,
            status: "running",
            running: true,
        });
        let at_bar = self.lanes[l].bars.len() - 1;
        self.open.insert(key, (l, at_bar));
    }

    fn set_status(&mut self, key: &Key, status: &'static str) {
        if let Some((l, i)) = self.open.get(key) {
            self.lanes[*l].bars[*i].status = status;
        }
    }

    fn close(&mut self, key: &Key, at: u64, status: &'static str) -> Option<&mut Bar> {
        let (l, i) = self.open.remove(key)?;
        let bar = &mut self.lanes[l].bars[i];
        bar.end_ms = at.max(bar.start_ms);
        bar.status = status;
        bar.running = false;
        Some(bar)
    }

    fn close_where(&mut self, at: u64, status: &'static str, pick: impl Fn(&Key) -> bool) {
        let keys: Vec<Key> = self.open.keys().filter(|k| pick(k)).cloned().collect();
        for k in keys {
            self.close(&k, at, status);
        }
    }

    fn close_prefix(&mut self, kind: &'static str, node: &str, at: u64, status: &'static str) {
        self.close_where(at, status, |k| k.0 == kind && k.1 == node);
    }

    fn close_kind(&mut self, kind: &'static str, at: u64, status: &'static str) {
        self.close_where(at, status, |k| k.0 == kind);
    }

    fn close_all(&mut self, at: u64, status: &'static str) {
        self.close_where(at, status, |k| k.0 != "wait");
    }

    fn touch(&mut self, lane: &str, at: u64) {
        if let Some(l) = self.index.get(lane).copied() {
            let t = self.last.entry(l).or_default();
            *t = (*t).max(at);
        }
    }

    /// Bars still open run to `end` when the session runs; otherwise an
    /// agent's bar ends at its lane's last event, the rest at the end.
    fn finish(&mut self, end: u64, running: bool) {
        let open: Vec<(Key, (usize, usize))> = self.open.drain().collect();
        for ((kind, ..), (l, i)) in open {
            let last = self.last.get(&l).copied().unwrap_or(end);
            let bar = &mut self.lanes[l].bars[i];
            if running {
                bar.end_ms = end.max(bar.start_ms);
            } else {
                bar.end_ms = if kind == "agent" { last } else { end }.max(bar.start_ms);
                bar.running = false;
                if bar.status == "running" {
                    bar.status = if kind == "agent" { "done" } else { "failed" };
                }
            }
        }
        self.lanes.retain(|l| !l.bars.is_empty());
        self.lanes.sort_by_key(|l| {
            let first = l.bars.iter().map(|b| b.start_ms).min().unwrap_or(0);
            (l.key != "main", first)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_wire::events::EventBody as B;

    fn ev(seq: u64, ms: u64, node: Option<&str>, agent: Option<&str>, body: B) -> Event {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_000 + ms);
        Event {
            schema_version: 1,
            session_id: "s".into(),
            seq,
            ts: agentfile_wire::events::rfc3339(t),
            step: None,
            goal: None,
            agent: agent.map(str::to_owned),
            iteration: None,
            node: node.map(str::to_owned),
            node_kind: None,
            replayed: false,
            body,
        }
    }

    fn request(turn: u32) -> B {
        B::LlmRequest {
            model: "m".into(),
            turn,
            messages: 1,
            tools: 0,
            digests: Default::default(),
        }
    }

    fn response(turn: u32, tokens: u64) -> B {
        B::LlmResponse {
            model: "m".into(),
            turn,
            input_tokens: tokens,
            output_tokens: 1,
            latency_ms: 5,
            cost_usd: Some(0.5),
            stop_reason: "end".into(),
            text: "t".into(),
            tool_calls: Vec::new(),
        }
    }

    #[test]
    fn three_agents_in_parallel_get_three_overlapping_lanes() {
        let mut events = vec![ev(
            1,
            0,
            Some("review"),
            None,
            B::GoalStarted {
                outcome: "o".into(),
                agents: vec!["a".into(), "b".into(), "c".into()],
            },
        )];
        let mut seq = 2;
        for (i, a) in ["a", "b", "c"].iter().enumerate() {
            let role = B::AgentStarted {
                role: "agent".into(),
            };
            events.push(ev(seq, 10 + i as u64, Some("review"), Some(a), role));
            events.push(ev(
                seq + 1,
                11 + i as u64,
                Some("review"),
                Some(a),
                request(1),
            ));
            seq += 2;
        }
        for (i, a) in ["a", "b", "c"].iter().enumerate() {
            events.push(ev(
                seq,
                500 + i as u64,
                Some("review"),
                Some(a),
                response(1, 10),
            ));
            seq += 1;
        }
        let done = B::GoalComplete {
            output: "x".into(),
            fields: Default::default(),
            converged: None,
            tool_calls: 0,
            done: false,
        };
        events.push(ev(seq, 900, Some("review"), None, done));
        let t = build(&events, &[], false);
        let keys: Vec<&str> = t.lanes.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(keys, ["main", "main @a", "main @b", "main @c"]);
        for lane in &t.lanes[1..] {
            let turn = lane.bars.iter().find(|b| b.kind == "turn").unwrap();
            assert!(turn.start_ms < 20 && turn.end_ms >= 500, "{turn:?}");
            assert_eq!((turn.tokens_in, turn.cost_usd), (Some(10), Some(0.5)));
            let agent = lane.bars.iter().find(|b| b.kind == "agent").unwrap();
            assert_eq!((agent.end_ms, agent.status), (900, "done"));
        }
        assert_eq!(t.lanes[0].bars[0].end_ms, 900);
        assert_eq!(t.span_ms, 900);
    }

    #[test]
    fn map_items_and_parallel_branches_get_lanes_and_open_bars_run_on() {
        let mut events = Vec::new();
        for i in 0..6u64 {
            let node = format!("each[{i}]/read");
            let started = B::NodeStarted {
                kind: "tool".into(),
            };
            events.push(ev(i + 1, i * 10, Some(&node), None, started));
        }
        let started = B::NodeStarted {
            kind: "tool".into(),
        };
        events.push(ev(7, 70, Some("fan/left/x"), None, started));
        let t = build(&events, &["fan".into()], true);
        let keys: Vec<&str> = t.lanes.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "each[0]", "each[1]", "each[2]", "each[3]", "each[4]", "each[5]", "fan/left"
            ]
        );
        assert!(t.lanes.iter().all(|l| l.bars[0].running));
        assert!(t.span_ms > 70, "a running session's bars run to now");
        let t = build(&events, &[], false);
        assert!(
            t.lanes
                .iter()
                .all(|l| !l.bars[0].running && l.bars[0].status == "failed")
        );
        assert!(
            t.lanes.iter().any(|l| l.key == "main"),
            "no plan: no branch lanes"
        );
    }

    #[test]
    fn thousands_of_short_turns_become_a_few_bars_with_their_sums() {
        let mut events = Vec::new();
        let mut seq = 0;
        for turn in 0..1000u32 {
            let at = u64::from(turn) * 10;
            seq += 1;
            events.push(ev(seq, at, Some("loop"), None, request(turn)));
            seq += 1;
            events.push(ev(seq, at + 5, Some("loop"), None, response(turn, 2)));
        }
        let t = build(&events, &[], false);
        let turns: Vec<&Bar> = t.lanes[0]
            .bars
            .iter()
            .filter(|b| b.kind == "turn")
            .collect();
        assert!(turns.len() < 20, "{} bars", turns.len());
        assert_eq!(
            turns.iter().map(|b| b.tokens_in.unwrap()).sum::<u64>(),
            2000
        );
        assert!(turns[0].label.ends_with(" turns"), "{}", turns[0].label);
        assert_eq!(turns[0].seq, 1, "a merged bar opens at its first event");
        let cost: f64 = turns.iter().map(|b| b.cost_usd.unwrap()).sum();
        assert!((cost - 500.0).abs() < 1e-6);
        // A long turn among them stays its own bar.
        let mut long = events.clone();
        long.push(ev(seq + 1, 10_000, Some("loop"), None, request(5000)));
        long.push(ev(seq + 2, 14_000, Some("loop"), None, response(5000, 7)));
        let t = build(&long, &[], false);
        assert!(
            t.lanes[0]
                .bars
                .iter()
                .any(|b| b.label == "turn 5000 · m" && b.tokens_in == Some(7))
        );
    }

    #[test]
    fn retried_nodes_and_tools_close_their_bars() {
        let events = vec![
            ev(
                1,
                0,
                Some("fetch"),
                None,
                B::NodeStarted {
                    kind: "tool".into(),
                },
            ),
            ev(
                2,
                5,
                Some("fetch"),
                None,
                B::ToolCall {
                    id: "c1".into(),
                    tool: "bash".into(),
                    arguments: serde_json::json!({}),
                },
            ),
            ev(
                3,
                40,
                Some("fetch"),
                None,
                B::ToolResult {
                    id: "c1".into(),
                    tool: "bash".into(),
                    content: "no".into(),
                    is_error: true,
                    duration_ms: 35,
                },
            ),
            ev(
                4,
                41,
                Some("fetch"),
                None,
                B::NodeFailed {
                    error: "no".into(),
                    attempt: 1,
                    retry_in_ms: Some(10),
                },
            ),
        ];
        let t = build(&events, &[], false);
        let bars = &t.lanes[0].bars;
        assert_eq!(bars.len(), 2);
        assert_eq!((bars[0].kind, bars[0].end_ms), ("node", 41));
        assert_eq!(
            (bars[1].kind, bars[1].status, bars[1].end_ms),
            ("tool", "failed", 40)
        );
        assert_eq!(template("each[3]/x@2/l#4/y"), "each/x/l/y");
    }
}
