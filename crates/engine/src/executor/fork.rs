//! Fork (`sessions fork ID --at NODE`, CONTRACT §19): which of a session's
//! events a new session takes over so that it runs again from one node.
//!
//! A node the fork keeps is one that completed before NODE started in the
//! source session — or that ran beside it in another item of the same map,
//! which forking inside one item leaves alone. Its events are copied (marked
//! `replayed`) and the new session resumes from them: the resume journal
//! finds those nodes done and runs NODE and everything after it live. NODE,
//! what lies inside it, the containers around it (they had not finished when
//! it started) and whatever was still running are not copied.

use agentfile_plan::Plan;
use agentfile_wire::events::{Event, EventBody};

use super::journal::legacy_path;

/// Why a session cannot be forked at a node.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ForkError {
    #[error("session `{session}` has no node `{at}`{hint}")]
    NoSuchNode {
        session: String,
        at: String,
        /// "; did you mean `…`?" or "; its nodes: …".
        hint: String,
    },
    #[error(
        "the workflow changed before `{at}`: {}; a fork reuses that work from session `{session}`, so fork at the first change or earlier, or undo it",
        changes.join("; ")
    )]
    Changed {
        session: String,
        at: String,
        changes: Vec<String>,
    },
}

/// The node an event belongs to: its path, or the one the DSL's lowering
/// gives events written before node paths.
fn path_of(e: &Event) -> Option<String> {
    e.node.clone().or_else(|| legacy_path(e))
}

/// Whether `path` is `at` or lies inside it (`at/x`, `at[2]`, `at#3`).
fn within(path: &str, at: &str) -> bool {
    path == at
        || path
            .strip_prefix(at)
            .is_some_and(|rest| rest.starts_with(['/', '[', '#']))
}

/// Whether `path` holds `at` (a container around it).
fn around(path: &str, at: &str) -> bool {
    path != at && within(at, path)
}

/// Whether `path` lies in another item of a map that `at` is an item of:
/// `each[2]/x` beside `each[3]/y`.
fn other_item(path: &str, at: &str) -> bool {
    at.char_indices().filter(|(_, c)| *c == '[').any(|(k, _)| {
        let base = &at[..=k];
        let index = |s: &str| s[k + 1..].split(']').next().map(str::to_owned);
        path.starts_with(base) && index(path) != index(at)
    })
}

/// Whether the event records a node's completion (a goal's own, not one
/// of its agents').
fn completion(e: &Event) -> bool {
    match &e.body {
        EventBody::GoalComplete { .. } => e.agent.is_none(),
        EventBody::StepComplete { .. } | EventBody::NodeComplete { .. } => true,
        _ => false,
    }
}

/// The events of `events` (one session's, in order) a fork at `at` keeps,
/// marked `replayed`, with their original `seq` (the caller renumbers them).
pub fn events_before(session: &str, events: &[Event], at: &str) -> Result<Vec<Event>, ForkError> {
    let at = at.trim_matches('/');
    let Some(start) = events
        .iter()
        .find(|e| path_of(e).is_some_and(|p| within(&p, at)))
        .map(|e| e.seq)
    else {
        return Err(no_such_node(session, events, at));
    };
    // Each node's completion, by path.
    let mut done: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for e in events.iter().filter(|e| completion(e)) {
        if let Some(p) = path_of(e) {
            done.insert(p, e.seq);
        }
    }
    // A kept node: completed before NODE started, or in another map item.
    let kept_node = |p: &str| match done.get(p) {
        Some(&seq) => !within(p, at) && !around(p, at) && (seq < start || other_item(p, at)),
        None => false,
    };
    // An event is kept when the innermost completed node holding it is.
    let owner = |p: &str| -> Option<String> {
        let mut cut = p.len();
        loop {
            let candidate = &p[..cut];
            if done.contains_key(candidate) {
                return Some(candidate.to_owned());
            }
            cut = candidate.rfind(['/', '[', '#'])?;
        }
    };
    let mut out = Vec::new();
    for e in events {
        if matches!(
            e.body,
            EventBody::RunStarted { .. }
                | EventBody::RunComplete { .. }
                | EventBody::RunFailed { .. }
                | EventBody::RunCancelled { .. }
                | EventBody::RunSuspended { .. }
                | EventBody::LlmDelta { .. }
        ) {
            continue;
        }
        let Some(p) = path_of(e) else { continue };
        if within(&p, at) || around(&p, at) {
            continue;
        }
        if owner(&p).is_some_and(|o| kept_node(&o)) {
            let mut copy = e.clone();
            copy.replayed = true;
            out.push(copy);
        }
    }
    Ok(out)
}

fn no_such_node(session: &str, events: &[Event], at: &str) -> ForkError {
    let mut known: Vec<String> = events.iter().filter_map(path_of).collect();
    known.sort();
    known.dedup();
    let hint = match agentfile_plan::diag::suggest(at, known.iter().map(String::as_str)) {
        Some(near) => format!("; did you mean `{near}`?"),
        None if known.is_empty() => "; it recorded no node".to_owned(),
        None => format!(
            "; its nodes: {}",
            known
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    ForkError::NoSuchNode {
        session: session.to_owned(),
        at: at.to_owned(),
        hint,
    }
}

/// Refuse a fork whose workflow changed in what the fork takes over: a
/// top-level step it keeps whole, or the definition of a goal whose
/// completion it keeps. (Inside the step that holds NODE only NODE's own
/// definition counts; a change there before NODE is not seen.)
pub fn check_unchanged(
    session: &str,
    source: &[Event],
    kept: &[Event],
    at: &str,
    plan: &Plan,
) -> Result<(), ForkError> {
    let Some(old) = source.iter().find_map(|e| match &e.body {
        EventBody::RunStarted { digests, .. } => Some(digests),
        _ => None,
    }) else {
        return Ok(());
    };
    let new = plan.digests();
    let top = |p: &str| -> String {
        p.split(['/', '[', '#'])
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let at_top = top(at.trim_matches('/'));
    let mut keys: Vec<String> = Vec::new();
    for e in kept {
        let Some(p) = path_of(e) else { continue };
        let t = top(&p);
        if t != at_top {
            keys.push(t);
        }
        if let (EventBody::GoalComplete { .. }, Some(g), None) = (&e.body, &e.goal, &e.agent) {
            keys.push(format!("goal:{g}"));
        }
    }
    keys.sort();
    keys.dedup();
    let changes: Vec<String> = keys
        .iter()
        .filter(|k| old.get(*k).is_some_and(|d| new.get(*k) != Some(d)))
        .map(|k| match k.split_once(':') {
            Some(("goal", n)) => format!("goal `{n}` changed"),
            _ => format!("step `{k}` changed"),
        })
        .collect();
    if changes.is_empty() {
        Ok(())
    } else {
        Err(ForkError::Changed {
            session: session.to_owned(),
            at: at.to_owned(),
            changes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_around_and_beside() {
        assert!(within("main/b", "main/b"));
        assert!(within("main/b/x", "main/b"));
        assert!(within("each[3]/x", "each"));
        assert!(!within("main/bb", "main/b"));
        assert!(around("main", "main/b"));
        assert!(around("m/each[3]", "m/each[3]/t"));
        assert!(!around("main/b", "main/b"));
        assert!(other_item("m/each[2]/t", "m/each[3]/t"));
        assert!(!other_item("m/each[3]/u", "m/each[3]/t"));
        assert!(!other_item("m/before", "m/each[3]/t"));
        assert!(other_item("m/each[12]/t", "m/each[1]/t"));
    }
}
