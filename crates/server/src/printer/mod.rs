//! Event sinks for the command line: human progress on stderr (the [`Live`]
//! display on a terminal, plain [`Progress`] lines elsewhere), and
//! `--output stream-json` (one event per line on stdout, flushed per line,
//! streamed text deltas included).
//!
//! Pure presentation: nothing here changes what a run does. Text that came
//! from a model or a tool is made terminal-safe before it is written.

pub mod live;

use std::io::Write;
use std::sync::Mutex;

pub use live::Live;

use agentfile_config::text::for_terminal;
use agentfile_session::events::EventSink;
use agentfile_wire::events::{Event, EventBody, LoopStop};

/// Human-readable progress lines on stderr (colour on a terminal).
pub struct Progress {
    color: bool,
    out: Mutex<Box<dyn Write + Send>>,
}

impl Progress {
    pub fn stderr(color: bool) -> Progress {
        Progress {
            color,
            out: Mutex::new(Box::new(std::io::stderr())),
        }
    }

    /// A line formatter that writes nowhere (for [`Live`], which prints the
    /// lines itself).
    pub fn plain(color: bool) -> Progress {
        Progress {
            color,
            out: Mutex::new(Box::new(std::io::sink())),
        }
    }

    /// Progress into any writer (tests).
    pub fn to_writer(w: Box<dyn Write + Send>) -> Progress {
        Progress {
            color: false,
            out: Mutex::new(w),
        }
    }

    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    /// The line for an event, or `None` for events not worth a line.
    pub fn line(&self, e: &Event) -> Option<String> {
        self.run_line(e)
            .or_else(|| self.step_line(e))
            .or_else(|| self.goal_line(e))
            .or_else(|| self.tool_line(e))
    }

    /// The lines of the run as a whole: its start, warnings and errors, its end.
    fn run_line(&self, e: &Event) -> Option<String> {
        Some(match &e.body {
            EventBody::RunStarted {
                workflow,
                provider,
                model,
                endpoint,
                resumed_from_seq,
                forked_from,
                replay_of,
                package,
                ..
            } => {
                if let Some(of) = replay_of {
                    // Nothing is asked of a model: say whose journal answers.
                    return Some(format!(
                        "{} {workflow} (session {}, a replay of session {of}: no model asked, no tool run)",
                        self.paint("1", "run"),
                        e.session_id
                    ));
                }
                let resumed = match (forked_from, resumed_from_seq) {
                    (Some(f), _) => format!(", forked from {} at {}", f.session, f.node),
                    (None, Some(s)) => format!(", resuming after event {s}"),
                    (None, None) => String::new(),
                };
                let at = endpoint
                    .as_deref()
                    .map(|u| format!(" at {u}"))
                    .unwrap_or_default();
                // A workflow of tools alone asks no model (`none`/`none`).
                let model = if provider == "none" && model == "none" {
                    "no model".to_owned()
                } else {
                    format!("{provider}/{model}")
                };
                // The digest that runs, so an upgrade shows.
                let from = package
                    .as_deref()
                    .map(|p| match &p.signed_by {
                        Some(k) => format!(" from {} (signed, {k})", pinned(p)),
                        None => format!(" from {}", pinned(p)),
                    })
                    .unwrap_or_default();
                format!(
                    "{} {workflow}{from} (session {}, {model}{at}{resumed})",
                    self.paint("1", "run"),
                    e.session_id
                )
            }
            EventBody::Warning { message } => {
                format!(
                    "{} {}",
                    self.paint("1;33", "warning:"),
                    for_terminal(message)
                )
            }
            EventBody::Error { message } => {
                format!("{} {}", self.paint("1;31", "error:"), for_terminal(message))
            }
            EventBody::RunComplete { usage, .. } => format!(
                "{} in {} turn{}, {} tool call{}, {} tokens{}",
                self.paint("1;32", "done"),
                usage.turns,
                if usage.turns == 1 { "" } else { "s" },
                usage.tool_calls,
                if usage.tool_calls == 1 { "" } else { "s" },
                usage.input_tokens + usage.output_tokens,
                usage
                    .cost_usd
                    .map(|c| format!(", ${c:.4}"))
                    .unwrap_or_default()
            ),
            EventBody::RunFailed { error, .. } => {
                format!("{} {}", self.paint("1;31", "failed:"), for_terminal(error))
            }
            EventBody::RunCancelled { .. } => self.paint("1;33", "cancelled"),
            _ => return None,
        })
    }

    /// The lines of steps and loop iterations.
    fn step_line(&self, e: &Event) -> Option<String> {
        Some(match &e.body {
            EventBody::StepStarted { kind, goals, limit } => {
                let lim = limit
                    .map(|l| format!(", at most {l} iterations"))
                    .unwrap_or_default();
                // A step of a graph (a tool step, a branch) has no goals:
                // its line ends at its name, not at an empty list.
                let what = if goals.is_empty() {
                    String::new()
                } else {
                    format!(": {}", goals.join(" → "))
                };
                format!(
                    "{} {} {}{what}{lim}",
                    self.paint("1;34", "▶"),
                    kind.to_uppercase(),
                    e.step.as_deref().unwrap_or(""),
                )
            }
            EventBody::LoopIteration { limit } if e.goal.is_none() => format!(
                "  {} iteration {}/{limit}",
                self.paint("34", "↻"),
                e.iteration.unwrap_or(0)
            ),
            EventBody::StepComplete {
                iterations: Some(n),
                stop: Some(stop),
                ..
            } => {
                let how = match stop {
                    LoopStop::Limit => self.paint("33", "stopped at the limit"),
                    other => other.as_str().to_owned(),
                };
                format!(
                    "  {} after {n} iteration{} ({how})",
                    self.paint("34", "■"),
                    if *n == 1 { "" } else { "s" }
                )
            }
            _ => return None,
        })
    }

    /// The lines of goals and their approvals.
    fn goal_line(&self, e: &Event) -> Option<String> {
        let goal = e.goal.as_deref().unwrap_or("");
        Some(match &e.body {
            EventBody::GoalStarted { outcome, agents } => {
                let first = outcome
                    .lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or("");
                let first: String = for_terminal(first).chars().take(100).collect();
                let agents = if agents.is_empty() {
                    String::new()
                } else {
                    format!(" (agents: {})", agents.join(", "))
                };
                format!("  {} {goal}: {first}{agents}", self.paint("1", "•"))
            }
            EventBody::ApprovalRequired { reason, .. } => {
                format!("  {} {reason}", self.paint("1;33", "approval"))
            }
            // Notes say how (`at the terminal`, `with --approve-all`).
            EventBody::ApprovalResolved { approved, note } => format!(
                "  {} {}",
                if *approved { "approved" } else { "rejected" },
                for_terminal(note.as_deref().unwrap_or(""))
            ),
            EventBody::GoalComplete {
                tool_calls,
                converged,
                ..
            } if e.agent.is_none() => {
                let conv = converged
                    .map(|c| format!(", {}", c.as_str()))
                    .unwrap_or_default();
                format!(
                    "  {} {goal} ({tool_calls} tool call{}{conv})",
                    self.paint("32", "✓"),
                    if *tool_calls == 1 { "" } else { "s" }
                )
            }
            _ => return None,
        })
    }

    /// The lines of tool calls: the call, a denial, an error, a file written.
    fn tool_line(&self, e: &Event) -> Option<String> {
        let who = e
            .agent
            .as_deref()
            .map(|a| format!("[{a}] "))
            .unwrap_or_default();
        Some(match &e.body {
            EventBody::ToolCall {
                tool, arguments, ..
            } => {
                let args = arguments.to_string();
                let args: String = for_terminal(&args).chars().take(120).collect();
                format!("    {who}{} {args}", self.paint("36", tool))
            }
            EventBody::PolicyDenied { tool, rule, .. } => {
                format!(
                    "    {who}{} {}: {}",
                    self.paint("1;31", "denied"),
                    for_terminal(tool),
                    for_terminal(rule)
                )
            }
            EventBody::ToolResult {
                is_error: true,
                content,
                tool,
                ..
            } => {
                let first: String = for_terminal(content.lines().next().unwrap_or(""))
                    .chars()
                    .take(120)
                    .collect();
                format!("    {who}{} {tool}: {first}", self.paint("31", "error"))
            }
            EventBody::Artifact { path, bytes, .. } => format!(
                "  {} {} ({bytes} bytes)",
                self.paint("32", "wrote"),
                for_terminal(path)
            ),
            _ => return None,
        })
    }
}

impl EventSink for Progress {
    fn send(&self, e: &Event) {
        if let Some(line) = self.line(e) {
            let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
            // Progress is best effort: a closed stderr must not stop the run.
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

/// `--output stream-json`: every event as one JSON line on stdout.
pub struct StreamJson {
    out: Mutex<Box<dyn Write + Send>>,
}

impl StreamJson {
    pub fn stdout() -> StreamJson {
        StreamJson {
            out: Mutex::new(Box::new(std::io::stdout())),
        }
    }

    /// Write one JSON value as a line and flush it.
    pub fn write_line(&self, value: &impl serde::Serialize) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if let Ok(line) = serde_json::to_string(value) {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

impl EventSink for StreamJson {
    fn send(&self, e: &Event) {
        self.write_line(e);
    }

    /// Streamed text, as it comes (JSON escapes any control characters).
    fn send_transient(&self, e: &Event) {
        self.write_line(e);
    }
}

/// `REF@sha256:…`: a package's reference with the digest that ran.
fn pinned(p: &agentfile_wire::events::PackageRef) -> String {
    if p.reference.contains('@') {
        p.reference.clone()
    } else {
        format!("{}@{}", p.reference, p.digest)
    }
}
