//! Tasks that are not runs: the tasks of tools an embedder serves beside
//! agentfile's own ([`super::ExtraTools`], e.g. the conformance suite's
//! fixtures in `examples/mcp_fixtures.rs`).
//!
//! A run's task lives in the session store ([`super::tasks`]); these live in
//! this process, for as long as it lives and at most [`TTL`] after they end.
//! They answer the same `tasks/get`, `tasks/update` and `tasks/cancel` as run
//! tasks (the ids cannot collide: theirs start with `task-`, which no session
//! id does), belong to the principal that created them, and can ask their
//! client for input: [`TaskContext::ask`] parks the task `input_required`
//! until every request it names has an answer (`tasks/update` may bring them
//! one at a time).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, ErrorData, InputRequests, InputResponses,
    JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::principal::Principal;

/// How long an ended task stays readable.
pub const TTL: Duration = Duration::from_secs(3_600);
/// How often a client is asked to poll.
const POLL_INTERVAL_MS: u64 = 500;
/// The most tasks kept at once; the oldest ended ones go first.
const MAX_TASKS: usize = 10_000;

/// The tasks of one server process (shared by every connection and HTTP
/// session).
#[derive(Default)]
pub struct LocalTasks {
    tasks: Mutex<HashMap<String, Arc<Entry>>>,
}

struct Entry {
    owner: String,
    created_at: String,
    state: Mutex<State>,
    /// Woken when answers arrive or the task is cancelled.
    answered: Notify,
    cancel: CancellationToken,
}

struct State {
    updated_at: String,
    phase: Phase,
    /// The requests not yet answered.
    pending: InputRequests,
    /// The answers received for the current question.
    answers: InputResponses,
    ended: Option<Instant>,
}

enum Phase {
    Working,
    InputRequired,
    Completed(JsonObject),
    Failed(JsonObject),
    Cancelled,
}

fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown task `{id}`"), None)
}

/// What the work of a task sees: its cancellation, and a way to ask the
/// client.
pub struct TaskContext {
    entry: Arc<Entry>,
}

impl TaskContext {
    /// Cancelled when the client cancels the task.
    pub fn cancelled(&self) -> CancellationToken {
        self.entry.cancel.clone()
    }

    /// Park the task `input_required` with `requests` until each has an
    /// answer; the answers by key, or `None` when the task was cancelled
    /// meanwhile.
    pub async fn ask(&self, requests: InputRequests) -> Option<InputResponses> {
        {
            let mut s = self.entry.state.lock().expect("task state");
            if matches!(s.phase, Phase::Cancelled) {
                return None;
            }
            s.pending = requests;
            s.answers = InputResponses::new();
            s.phase = Phase::InputRequired;
            s.updated_at = now();
        }
        loop {
            let notified = self.entry.answered.notified();
            {
                let mut s = self.entry.state.lock().expect("task state");
                if matches!(s.phase, Phase::Cancelled) {
                    return None;
                }
                if s.pending.is_empty() {
                    s.phase = Phase::Working;
                    s.updated_at = now();
                    return Some(std::mem::take(&mut s.answers));
                }
            }
            tokio::select! {
                _ = notified => {}
                _ = self.entry.cancel.cancelled() => return None,
            }
        }
    }
}

impl LocalTasks {
    /// Start `work` as a task owned by `owner` and answer its handle: it is
    /// readable through `tasks/get` before this returns. The work's result
    /// completes the task (a tool error is a result with `isError`); its
    /// error, or a panic, fails it; `tasks/cancel` drops it.
    pub fn start<F, Fut>(&self, owner: &Principal, work: F) -> CreateTaskResult
    where
        F: FnOnce(TaskContext) -> Fut,
        Fut: Future<Output = Result<CallToolResult, ErrorData>> + Send + 'static,
    {
        let id = format!("task-{}", agentfile_session::new_session_id());
        let created_at = now();
        let entry = Arc::new(Entry {
            owner: owner.as_str().to_owned(),
            created_at: created_at.clone(),
            state: Mutex::new(State {
                updated_at: created_at.clone(),
                phase: Phase::Working,
                pending: InputRequests::new(),
                answers: InputResponses::new(),
                ended: None,
            }),
            answered: Notify::new(),
            cancel: CancellationToken::new(),
        });
        {
            let mut tasks = self.tasks.lock().expect("tasks");
            prune(&mut tasks);
            tasks.insert(id.clone(), entry.clone());
        }
        let fut = work(TaskContext {
            entry: entry.clone(),
        });
        tokio::spawn(async move {
            let outcome = tokio::select! {
                r = std::panic::AssertUnwindSafe(fut).catch_unwind() => r,
                _ = entry.cancel.cancelled() => return,
            };
            let phase = match outcome {
                Ok(Ok(result)) => match serde_json::to_value(result) {
                    Ok(Value::Object(o)) => Phase::Completed(o),
                    _ => Phase::Failed(error_object(&ErrorData::internal_error(
                        "the task's result could not be encoded",
                        None,
                    ))),
                },
                Ok(Err(e)) => Phase::Failed(error_object(&e)),
                Err(p) => Phase::Failed(error_object(&ErrorData::internal_error(
                    format!(
                        "internal error: the task panicked ({})",
                        crate::limits::panic_message(p.as_ref())
                    ),
                    None,
                ))),
            };
            let mut s = entry.state.lock().expect("task state");
            if !matches!(s.phase, Phase::Cancelled) {
                s.phase = phase;
                s.pending.clear();
                s.updated_at = now();
                s.ended = Some(Instant::now());
            }
        });
        CreateTaskResult::new(task(&id, TaskStatus::Working, &created_at, &created_at))
    }

    fn find(&self, id: &str, owner: &Principal) -> Option<Result<Arc<Entry>, ErrorData>> {
        if !id.starts_with("task-") {
            return None;
        }
        let tasks = self.tasks.lock().expect("tasks");
        Some(match tasks.get(id) {
            Some(e) if e.owner == owner.as_str() => Ok(e.clone()),
            // Another principal's task reads as unknown: ids cannot be probed.
            _ => Err(unknown(id)),
        })
    }

    /// `tasks/get`, when `id` is one of these.
    pub(crate) fn get(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Option<Result<DetailedTask, ErrorData>> {
        Some(self.find(id, owner)?.map(|e| {
            let s = e.state.lock().expect("task state");
            let payload = match &s.phase {
                Phase::Working => TaskPayload::Working,
                Phase::InputRequired => TaskPayload::InputRequired {
                    input_requests: s.pending.clone(),
                },
                Phase::Completed(r) => TaskPayload::Completed { result: r.clone() },
                Phase::Failed(e) => TaskPayload::Failed { error: e.clone() },
                Phase::Cancelled => TaskPayload::Cancelled,
            };
            DetailedTask::new(
                task(id, TaskStatus::Working, &e.created_at, &s.updated_at),
                payload,
            )
        }))
    }

    /// `tasks/update`, when `id` is one of these: each answer to a pending
    /// request is taken (keys not pending are ignored); the task goes on
    /// once none is left.
    pub(crate) fn update(
        &self,
        id: &str,
        owner: &Principal,
        responses: &InputResponses,
    ) -> Option<Result<(), ErrorData>> {
        Some(self.find(id, owner)?.map(|e| {
            let mut s = e.state.lock().expect("task state");
            if !matches!(s.phase, Phase::InputRequired) {
                return;
            }
            let mut took = false;
            for (key, answer) in responses {
                if s.pending.remove(key).is_some() {
                    s.answers.insert(key.clone(), answer.clone());
                    took = true;
                }
            }
            if took {
                s.updated_at = now();
                drop(s);
                e.answered.notify_one();
            }
        }))
    }

    /// `tasks/cancel`, when `id` is one of these: acknowledged for a task
    /// that already ended too.
    pub(crate) fn cancel(&self, id: &str, owner: &Principal) -> Option<Result<(), ErrorData>> {
        Some(self.find(id, owner)?.map(|e| {
            let mut s = e.state.lock().expect("task state");
            if matches!(s.phase, Phase::Working | Phase::InputRequired) {
                s.phase = Phase::Cancelled;
                s.pending.clear();
                s.updated_at = now();
                s.ended = Some(Instant::now());
                drop(s);
                e.cancel.cancel();
                e.answered.notify_one();
            }
        }))
    }
}

fn task(id: &str, status: TaskStatus, created: &str, updated: &str) -> Task {
    Task::new(id, status, created, updated)
        .with_poll_interval_ms(POLL_INTERVAL_MS)
        .with_ttl_ms(TTL.as_millis() as u64)
}

fn error_object(e: &ErrorData) -> JsonObject {
    match serde_json::to_value(e) {
        Ok(Value::Object(o)) => o,
        _ => JsonObject::new(),
    }
}

/// Drop the tasks that ended more than [`TTL`] ago, and the oldest ended
/// ones while there are more than [`MAX_TASKS`].
fn prune(tasks: &mut HashMap<String, Arc<Entry>>) {
    let ended = |e: &Arc<Entry>| e.state.lock().expect("task state").ended;
    tasks.retain(|_, e| ended(e).is_none_or(|t| t.elapsed() < TTL));
    if tasks.len() >= MAX_TASKS {
        let mut done: Vec<(Instant, String)> = tasks
            .iter()
            .filter_map(|(id, e)| ended(e).map(|t| (t, id.clone())))
            .collect();
        done.sort();
        for (_, id) in done.into_iter().take(tasks.len() + 1 - MAX_TASKS) {
            tasks.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock, InputRequest};

    fn owner() -> Principal {
        Principal::local()
    }

    fn status(t: &LocalTasks, id: &str) -> TaskStatus {
        t.get(id, &owner()).unwrap().unwrap().status()
    }

    async fn settle(t: &LocalTasks, id: &str, want: TaskStatus) {
        for _ in 0..200 {
            if status(t, id) == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("task {id} never reached {want:?}");
    }

    fn question() -> InputRequest {
        serde_json::from_value(serde_json::json!({
            "method": "elicitation/create",
            "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_task_asks_twice_at_once_and_goes_on_when_both_are_answered() {
        let tasks = LocalTasks::default();
        let created = tasks.start(&owner(), |cx| async move {
            let mut q = InputRequests::new();
            q.insert("a".into(), question());
            q.insert("b".into(), question());
            let answers = cx.ask(q).await.unwrap();
            let keys: Vec<&String> = answers.keys().collect();
            Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "{keys:?}"
            ))]))
        });
        let id = created.task.task_id.clone();
        settle(&tasks, &id, TaskStatus::InputRequired).await;
        let answer: InputResponses =
            serde_json::from_value(serde_json::json!({"a": {"action": "accept"}, "stray": {}}))
                .unwrap();
        tasks.update(&id, &owner(), &answer).unwrap().unwrap();
        // Still one pending, and only that one is shown.
        let t = tasks.get(&id, &owner()).unwrap().unwrap();
        assert_eq!(t.status(), TaskStatus::InputRequired);
        let shown = serde_json::to_value(&t).unwrap();
        assert!(shown["inputRequests"].get("a").is_none(), "{shown}");
        assert!(shown["inputRequests"].get("b").is_some(), "{shown}");
        let answer: InputResponses =
            serde_json::from_value(serde_json::json!({"b": {"action": "accept"}})).unwrap();
        tasks.update(&id, &owner(), &answer).unwrap().unwrap();
        settle(&tasks, &id, TaskStatus::Completed).await;
        let shown = serde_json::to_value(tasks.get(&id, &owner()).unwrap().unwrap()).unwrap();
        assert_eq!(shown["result"]["content"][0]["text"], "[\"a\", \"b\"]");
    }

    #[tokio::test]
    async fn cancel_ends_the_work_and_is_idempotent_and_owners_are_kept_apart() {
        let tasks = LocalTasks::default();
        let ran_to_end = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran_to_end.clone();
        let id = tasks
            .start(&owner(), |_| async move {
                tokio::time::sleep(Duration::from_secs(60)).await;
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(CallToolResult::success(vec![]))
            })
            .task
            .task_id;
        let stranger = Principal::token("someone else");
        assert!(tasks.get(&id, &stranger).unwrap().is_err());
        assert!(tasks.cancel(&id, &stranger).unwrap().is_err());
        tasks.cancel(&id, &owner()).unwrap().unwrap();
        assert_eq!(status(&tasks, &id), TaskStatus::Cancelled);
        tasks.cancel(&id, &owner()).unwrap().unwrap();
        assert_eq!(status(&tasks, &id), TaskStatus::Cancelled);
        assert!(!ran_to_end.load(std::sync::atomic::Ordering::SeqCst));
        // Not one of these: a session id is left to the store.
        assert!(tasks.get("20261126-120000-abc", &owner()).is_none());
    }

    #[tokio::test]
    async fn an_error_or_a_panic_fails_the_task_with_an_error_object() {
        let tasks = LocalTasks::default();
        let failed = tasks
            .start(&owner(), |_| async {
                Err(ErrorData::internal_error("it broke", None))
            })
            .task
            .task_id;
        let panicked = tasks
            .start(&owner(), |_| async { panic!("boom") })
            .task
            .task_id;
        for (id, says) in [(failed, "it broke"), (panicked, "boom")] {
            settle(&tasks, &id, TaskStatus::Failed).await;
            let shown = serde_json::to_value(tasks.get(&id, &owner()).unwrap().unwrap()).unwrap();
            assert_eq!(shown["error"]["code"], -32603, "{shown}");
            assert!(
                shown["error"]["message"].as_str().unwrap().contains(says),
                "{shown}"
            );
            assert!(shown.get("result").is_none(), "{shown}");
        }
    }
}
