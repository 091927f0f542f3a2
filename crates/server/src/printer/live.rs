//! The live display of `agentfile run` on a terminal: the model's text as it
//! streams, and a status area that shows what runs now — each goal or agent at
//! work and its current tool call — with turns, tokens, cost and elapsed time.
//!
//! Built on indicatif: finished lines are printed above the status area, which
//! is redrawn in place. Only used when stderr is a terminal; everywhere else the
//! plain [`Progress`](super::Progress) lines are written instead. Model and tool
//! text goes through [`agentfile_config::text::for_terminal`] first, so a model cannot
//! drive the user's terminal with escape sequences.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Progress;
use agentfile_config::text::{for_terminal, prefix};
use agentfile_session::events::EventSink;
use agentfile_wire::events::{Event, EventBody};

/// Width of a lane's last-line preview.
const PREVIEW: usize = 70;

/// One goal or agent at work.
struct Lane {
    bar: ProgressBar,
    /// Streamed text not yet ended by a newline.
    partial: String,
    /// Printed a streamed line during this turn (so the final text is not
    /// printed again).
    streamed: bool,
}

struct State {
    lanes: BTreeMap<String, Lane>,
    turns: u64,
    tokens: u64,
    cost: Option<f64>,
    tool_calls: u64,
}

/// The live display sink.
pub struct Live {
    multi: MultiProgress,
    summary: ProgressBar,
    lines: Progress,
    state: Mutex<State>,
}

impl Live {
    /// A live display on stderr.
    pub fn stderr(color: bool) -> Live {
        Live::with_target(ProgressDrawTarget::stderr_with_hz(15), color)
    }

    fn with_target(target: ProgressDrawTarget, color: bool) -> Live {
        let multi = MultiProgress::with_draw_target(target);
        let summary = multi.add(ProgressBar::new_spinner());
        summary.set_style(
            // indicatif keeps `{elapsed}` current on every tick.
            ProgressStyle::with_template("{spinner} {elapsed} · {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        summary.enable_steady_tick(Duration::from_millis(120));
        let live = Live {
            multi,
            summary,
            lines: Progress::plain(color),
            state: Mutex::new(State {
                lanes: BTreeMap::new(),
                turns: 0,
                tokens: 0,
                cost: None,
                tool_calls: 0,
            }),
        };
        live.refresh_summary(&live.lock());
        live
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn println(&self, line: &str) {
        // A closed terminal must not stop the run.
        let _ = self.multi.println(line);
    }

    fn refresh_summary(&self, st: &State) {
        let cost = st.cost.map(|c| format!(" · ${c:.4}")).unwrap_or_default();
        let running = st.lanes.len();
        self.summary.set_message(format!(
            "{} turn{} · {} tool call{} · {} tokens{cost}{}",
            st.turns,
            if st.turns == 1 { "" } else { "s" },
            st.tool_calls,
            if st.tool_calls == 1 { "" } else { "s" },
            st.tokens,
            if running > 1 {
                format!(" · {running} at work")
            } else {
                String::new()
            }
        ));
    }

    fn lane_key(e: &Event) -> Option<String> {
        let goal = e.goal.as_deref()?;
        Some(match e.agent.as_deref() {
            Some(a) => format!("{goal} [{a}]"),
            None => goal.to_owned(),
        })
    }

    fn lane<'a>(&self, st: &'a mut State, key: &str) -> &'a mut Lane {
        st.lanes.entry(key.to_owned()).or_insert_with(|| {
            let bar = self
                .multi
                .insert_before(&self.summary, ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("  {spinner:.cyan} {prefix:.bold} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(key.to_owned());
            bar.set_message("thinking…");
            bar.enable_steady_tick(Duration::from_millis(120));
            Lane {
                bar,
                partial: String::new(),
                streamed: false,
            }
        })
    }

    fn end_lane(&self, st: &mut State, key: &str) {
        if let Some(mut lane) = st.lanes.remove(key) {
            self.flush_partial(key, &mut lane);
            lane.bar.finish_and_clear();
            self.multi.remove(&lane.bar);
        }
    }

    fn flush_partial(&self, key: &str, lane: &mut Lane) {
        if !lane.partial.trim().is_empty() {
            self.println(&format!("    {key} │ {}", for_terminal(&lane.partial)));
            lane.streamed = true;
        }
        lane.partial.clear();
    }

    fn delta(&self, e: &Event, text: &str, restart: bool) {
        let Some(key) = Live::lane_key(e) else { return };
        let mut st = self.lock();
        let lane = self.lane(&mut st, &key);
        if restart {
            lane.partial.clear();
            self.println(&format!(
                "    {key} │ (the model call is being retried; its answer starts again)"
            ));
            return;
        }
        lane.partial.push_str(text);
        while let Some(nl) = lane.partial.find('\n') {
            let line: String = lane.partial.drain(..=nl).collect();
            let line = line.trim_end_matches(['\n', '\r']);
            self.println(&format!("    {key} │ {}", for_terminal(line)));
            lane.streamed = true;
        }
        let tail = lane.partial.trim();
        let start = tail.len().saturating_sub(PREVIEW);
        let mut start = start;
        while !tail.is_char_boundary(start) {
            start += 1;
        }
        lane.bar.set_message(format!(
            "✎ {}",
            for_terminal(prefix(&tail[start..], PREVIEW))
        ));
    }
}

impl EventSink for Live {
    fn send(&self, e: &Event) {
        let key = Live::lane_key(e);
        match &e.body {
            EventBody::AgentStarted { .. } | EventBody::GoalStarted { .. } => {
                if let Some(line) = self.lines.line(e) {
                    self.println(&line);
                }
                if let Some(k) = &key {
                    let mut st = self.lock();
                    self.lane(&mut st, k);
                    self.refresh_summary(&st);
                }
                return;
            }
            EventBody::LlmRequest { .. } => {
                if let Some(k) = &key {
                    let mut st = self.lock();
                    let lane = self.lane(&mut st, k);
                    lane.streamed = false;
                    lane.bar.set_message("thinking…");
                }
                return;
            }
            EventBody::LlmResponse {
                input_tokens,
                output_tokens,
                cost_usd,
                text,
                ..
            } => {
                let mut st = self.lock();
                st.turns += 1;
                st.tokens += input_tokens + output_tokens;
                if let Some(c) = cost_usd {
                    st.cost = Some(st.cost.unwrap_or(0.0) + c);
                }
                if let Some(k) = &key {
                    let lane = self.lane(&mut st, k);
                    let mut lane_text = std::mem::take(&mut lane.partial);
                    if !lane.streamed && lane_text.trim().is_empty() {
                        // A provider that did not stream: show the answer now.
                        lane_text = text.clone();
                    }
                    for line in lane_text.lines().filter(|l| !l.trim().is_empty()) {
                        self.println(&format!("    {k} │ {}", for_terminal(line)));
                    }
                    lane.streamed = false;
                    lane.bar.set_message("…");
                }
                self.refresh_summary(&st);
                return;
            }
            EventBody::ToolCall {
                tool, arguments, ..
            } => {
                let mut st = self.lock();
                st.tool_calls += 1;
                if let Some(k) = &key {
                    let args = arguments.to_string();
                    let lane = self.lane(&mut st, k);
                    lane.bar
                        .set_message(format!("⚙ {tool} {}", for_terminal(prefix(&args, PREVIEW))));
                }
                self.refresh_summary(&st);
            }
            EventBody::GoalComplete { .. } => {
                if let Some(k) = &key {
                    let mut st = self.lock();
                    self.end_lane(&mut st, k);
                    self.refresh_summary(&st);
                }
            }
            _ => {}
        }
        if e.body.is_terminal() {
            let mut st = self.lock();
            let keys: Vec<String> = st.lanes.keys().cloned().collect();
            for k in keys {
                self.end_lane(&mut st, &k);
            }
            self.summary.finish_and_clear();
        }
        if let Some(line) = self.lines.line(e) {
            self.println(&line);
        }
    }

    fn send_transient(&self, e: &Event) {
        if let EventBody::LlmDelta { text, restart, .. } = &e.body {
            self.delta(e, text, *restart);
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.summary.finish_and_clear();
        let _ = self.multi.clear();
    }
}
