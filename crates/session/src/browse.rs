//! Browsing a store: a page of sessions at a time (newest first, filtered,
//! resumed from a cursor) and a summary per session (its trigger, when it
//! ended, what it used), for the web view's list (CONTRACT §17).
//!
//! The rules live here, once: which sessions a [`SessionQuery`] matches
//! ([`SessionQuery::matches`]) and what a session's events sum up to
//! ([`summarize`]). The [`SessionStore`](crate::SessionStore) defaults apply
//! them to `list` and `events`; SQLite and PostgreSQL answer the same
//! questions with indexed queries (PostgreSQL's in `postgres/browse.rs`), so
//! a page stays a few milliseconds over 100,000 sessions; the file store
//! reads every session's small `ID.json` but only the page's logs.

use agentfile_wire::events::{Event, EventBody, Usage};

use crate::{SessionMeta, SessionStatus};

/// The most sessions one page holds.
pub const MAX_PAGE: usize = 500;

/// Which sessions a page shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionQuery {
    pub status: Option<SessionStatus>,
    /// Exactly this workflow name.
    pub workflow: Option<String>,
    /// Text the id, the workflow name or an input value contains (any case
    /// for ASCII letters).
    pub search: Option<String>,
    /// Only sessions older than this one, in the list's order: the
    /// `(created_at, id)` of the last session of the page before.
    pub before: Option<Cursor>,
    /// At most this many (at most [`MAX_PAGE`]).
    pub limit: usize,
}

/// Where a page ends: the `(created_at, id)` of its last session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: String,
    pub id: String,
}

impl Cursor {
    /// The cursor after `meta`.
    pub fn after(meta: &SessionMeta) -> Cursor {
        Cursor {
            created_at: meta.created_at.clone(),
            id: meta.id.clone(),
        }
    }

    /// The cursor as one opaque URL-safe token: `<created_at>~<id>`.
    pub fn encode(&self) -> String {
        format!("{}~{}", self.created_at, self.id)
    }

    /// A token [`Cursor::encode`] made, or `None` for anything else.
    pub fn decode(token: &str) -> Option<Cursor> {
        let (created_at, id) = token.rsplit_once('~')?;
        let stamp_like = !created_at.is_empty()
            && created_at.len() <= 40
            && created_at
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b":.-+".contains(&b));
        (stamp_like && crate::is_valid_id(id)).then(|| Cursor {
            created_at: created_at.to_owned(),
            id: id.to_owned(),
        })
    }

    /// True when `meta` comes after this cursor in the list's order (newest
    /// first, then by id descending).
    pub fn precedes(&self, meta: &SessionMeta) -> bool {
        (meta.created_at.as_str(), meta.id.as_str()) < (self.created_at.as_str(), self.id.as_str())
    }
}

impl SessionQuery {
    /// The page size, within bounds.
    pub fn limit(&self) -> usize {
        self.limit.clamp(1, MAX_PAGE)
    }

    /// The search text, trimmed; `None` when blank.
    pub fn search(&self) -> Option<&str> {
        self.search
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// Whether `meta` (its status as read, `interrupted` included) belongs on
    /// the page, cursor aside.
    pub fn matches(&self, meta: &SessionMeta) -> bool {
        self.status.is_none_or(|s| s == meta.status)
            && self.workflow.as_ref().is_none_or(|w| *w == meta.workflow)
            && self.search().is_none_or(|q| {
                let q = q.to_ascii_lowercase();
                let has = |s: &str| s.to_ascii_lowercase().contains(&q);
                has(&meta.id) || has(&meta.workflow) || meta.inputs.values().any(|v| has(v))
            })
            && self.before.as_ref().is_none_or(|c| c.precedes(meta))
    }
}

/// A `LIKE` pattern for text containing `q`, its `%`, `_` and `\\` escaped
/// (with `ESCAPE '\\'`).
pub(crate) fn like_pattern(q: &str) -> String {
    let mut out = String::with_capacity(q.len() + 2);
    out.push('%');
    for c in q.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// What a session's events add up to, for a row of the list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionSummary {
    /// The trigger that started it (`run_started.trigger`): id and kind.
    pub trigger: Option<(String, String)>,
    /// When its last run ended (the terminal event's `ts`), while it is not
    /// running again.
    pub ended_at: Option<String>,
    /// Tokens, cost, turns and tool calls over the whole session: the last
    /// terminal event's totals, or the sum of what is stored so far.
    pub usage: Option<Usage>,
}

/// The summary of a session from its events (the default the stores
/// without a faster way use).
pub fn summarize(events: &[Event]) -> SessionSummary {
    let trigger = events.first().and_then(|e| match &e.body {
        EventBody::RunStarted {
            trigger: Some(t), ..
        } => Some((t.id.clone(), t.kind.clone())),
        _ => None,
    });
    let Some(last) = events.last() else {
        return SessionSummary::default();
    };
    if let Some(usage) = terminal_usage(&last.body) {
        return SessionSummary {
            trigger,
            ended_at: Some(last.ts.clone()),
            usage: Some(usage.clone()),
        };
    }
    let mut usage = Usage {
        cost_usd: Some(0.0),
        ..Usage::default()
    };
    for e in events {
        match &e.body {
            EventBody::LlmResponse {
                input_tokens,
                output_tokens,
                cost_usd,
                ..
            } => {
                usage.input_tokens += input_tokens;
                usage.output_tokens += output_tokens;
                usage.turns += 1;
                usage.cost_usd = usage.cost_usd.zip(*cost_usd).map(|(a, b)| a + b);
            }
            EventBody::ToolCall { .. } => usage.tool_calls += 1,
            _ => {}
        }
    }
    SessionSummary {
        trigger,
        ended_at: None,
        usage: (usage.turns > 0 || usage.tool_calls > 0).then_some(usage),
    }
}

/// The totals a terminal event carries.
pub fn terminal_usage(body: &EventBody) -> Option<&Usage> {
    match body {
        EventBody::RunComplete { usage, .. }
        | EventBody::RunFailed { usage, .. }
        | EventBody::RunCancelled { usage }
        | EventBody::RunSuspended { usage, .. } => Some(usage),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(id: &str, created_at: &str, workflow: &str) -> SessionMeta {
        SessionMeta {
            id: id.into(),
            workflow: workflow.into(),
            path: "/w".into(),
            workspace: "/w".into(),
            inputs: BTreeMap::from([("topic".into(), "Rust Lifetimes".into())]),
            status: SessionStatus::Completed,
            created_at: created_at.into(),
            updated_at: created_at.into(),
            last_seq: 0,
        }
    }

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let c = Cursor {
            created_at: "2026-11-27T10:00:00.123Z".into(),
            id: "abc-1".into(),
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        for bad in [
            "",
            "x",
            "~abc",
            "2026~",
            "2026~a b",
            "2026'--~abc",
            "a~b~../x",
        ] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_query_matches_by_status_workflow_text_and_cursor() {
        let m = meta("s-2", "2026-11-27T10:00:00Z", "review");
        let q = |f: fn(&mut SessionQuery)| {
            let mut q = SessionQuery::default();
            f(&mut q);
            q.matches(&m)
        };
        assert!(q(|_| {}));
        assert!(q(|q| q.search = Some("lifetimes".into())));
        assert!(q(|q| q.search = Some("  ".into())));
        assert!(!q(|q| q.search = Some("python".into())));
        assert!(!q(|q| q.workflow = Some("revie".into())));
        assert!(!q(|q| q.status = Some(SessionStatus::Failed)));
        let at = |c: &str, id: &str| Cursor {
            created_at: c.into(),
            id: id.into(),
        };
        assert!(at("2026-11-27T10:00:00Z", "s-3").precedes(&m));
        assert!(!at("2026-11-27T10:00:00Z", "s-2").precedes(&m));
        assert!(!at("2026-11-27T09:00:00Z", "s-9").precedes(&m));
    }
}
