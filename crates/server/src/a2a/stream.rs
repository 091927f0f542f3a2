//! A task followed as its run's events arrive: the streams of
//! `SendStreamingMessage` / `SubscribeToTask` (0.3's `message/stream`,
//! `tasks/resubscribe`) as server-sent events, and the wait of a blocking
//! `SendMessage`.
//!
//! Both read the store through the gateway's long poll (`event`), so they
//! follow a run of this process at once and one of another process on the
//! same store as it writes. A stream opens with the task, then sends a
//! status update as the run starts, as each goal, step or node starts and
//! as a tool is called, and an artifact update with each goal's output;
//! when the task ends (completed, failed, canceled) or waits for its client
//! (input-required) it sends the outputs artifact and the final status, and
//! closes. An interrupted run met on the way is resumed here.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, header};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::Value;

use super::reply::{Fault, Version};
use super::tasks::{self, Owned};
use super::{A2a, Body};
use agentfile_session::SessionStatus;
use agentfile_wire::a2a::{
    Artifact, JsonRpcResponse, Part, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState,
    TaskStatus, TaskStatusUpdateEvent,
};
use agentfile_wire::events::{Event, EventBody};
use agentfile_wire::rpc::EventParams;

/// How long one wait for new events lasts before a keep-alive comment.
const WAIT: Duration = Duration::from_secs(15);
/// Events read at once.
const PAGE: usize = 200;

/// Whether a session in `status` may be where its task stops (so its task
/// is looked at).
fn may_end(status: SessionStatus) -> bool {
    !matches!(status, SessionStatus::Queued | SessionStatus::Running)
}

/// A task's updates, read from the store.
struct Follow {
    a2a: Arc<A2a>,
    owned: Owned,
    after: u64,
    pending: VecDeque<StreamResponse>,
    ended: bool,
}

/// What a stream sends next.
enum Item {
    Update(Box<StreamResponse>),
    KeepAlive,
    Fault(Fault),
}

impl Follow {
    /// Follow `owned` from event `after`, opening with `first`.
    fn new(a2a: Arc<A2a>, owned: Owned, first: Task, after: u64) -> Follow {
        let ended = first.status.state.ends_stream();
        Follow {
            a2a,
            owned,
            after,
            pending: VecDeque::from([StreamResponse::Task(first)]),
            ended,
        }
    }

    async fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(u) = self.pending.pop_front() {
                return Some(Item::Update(Box::new(u)));
            }
            if self.ended {
                return None;
            }
            let started = tokio::time::Instant::now();
            let asked = self.a2a.gateway.events(EventParams {
                session_id: self.owned.id().to_owned(),
                after_seq: self.after,
                wait_ms: WAIT.as_millis() as u64,
                limit: Some(PAGE),
            });
            let page = tokio::select! {
                _ = self.a2a.stop.cancelled() => return None,
                page = asked => page,
            };
            let page = match page {
                Ok(p) => p,
                Err(e) => {
                    self.ended = true;
                    return Some(Item::Fault(Fault::internal(e.message)));
                }
            };
            let full = page.events.len() >= PAGE;
            for e in &page.events {
                self.after = e.seq;
                if let Some(u) = update_of(&self.owned, e) {
                    self.pending.push_back(u);
                }
            }
            if full {
                continue;
            }
            if may_end(page.status) {
                match self.end_if_settled().await {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(f) => {
                        self.ended = true;
                        return Some(Item::Fault(f));
                    }
                }
            }
            if page.events.is_empty() {
                if started.elapsed() >= WAIT / 2 {
                    return Some(Item::KeepAlive);
                }
                // Answered at once with nothing new (a run no one runs
                // yet): look again shortly rather than spin.
                tokio::select! {
                    _ = self.a2a.stop.cancelled() => return None,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }

    /// When the task now ends the stream: queue its artifacts and its final
    /// status, and say so.
    async fn end_if_settled(&mut self) -> Result<bool, Fault> {
        self.owned = tasks::reload(&self.a2a, &self.owned).await?;
        let task = tasks::task_of(&self.a2a, &self.owned, true).await?;
        if !task.status.state.ends_stream() {
            return Ok(false);
        }
        for artifact in task.artifacts {
            self.pending.push_back(artifact_update(
                task.id.clone(),
                task.context_id.clone(),
                artifact,
            ));
        }
        self.pending
            .push_back(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task.id,
                context_id: task.context_id,
                status: task.status,
                metadata: None,
            }));
        self.ended = true;
        Ok(true)
    }
}

/// `artifact` of a task, whole, as a stream sends it.
fn artifact_update(task_id: String, context_id: String, artifact: Artifact) -> StreamResponse {
    StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id,
        context_id,
        artifact,
        append: false,
        last_chunk: true,
        metadata: None,
    })
}

/// What event `e` of task `o` tells a client, if anything.
fn update_of(o: &Owned, e: &Event) -> Option<StreamResponse> {
    let name = |n: &Option<String>| n.clone().unwrap_or_default();
    let say = |text: String| {
        let id = format!("{}-{}", o.id(), e.seq);
        Some(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: o.id().to_owned(),
            context_id: o.context(),
            status: TaskStatus {
                state: TaskState::Working,
                message: Some(tasks::agent_message(
                    id,
                    o.id(),
                    o.context(),
                    vec![Part::text(text)],
                )),
                timestamp: Some(e.ts.clone()),
            },
            metadata: None,
        }))
    };
    match &e.body {
        EventBody::RunStarted { .. } => say(format!("run of `{}` started", o.meta.workflow)),
        EventBody::StepStarted { kind, .. } => {
            say(format!("{kind} step `{}` started", name(&e.step)))
        }
        EventBody::GoalStarted { outcome, .. } => {
            let outcome: String = outcome.chars().take(200).collect();
            say(format!("goal `{}` started: {outcome}", name(&e.goal)))
        }
        EventBody::NodeStarted { kind } => say(format!("{kind} `{}` started", name(&e.node))),
        EventBody::ToolCall { tool, .. } => say(format!("calling tool `{tool}`")),
        EventBody::ApprovalResolved { approved, .. } => say(format!(
            "approval {}",
            if *approved { "given" } else { "refused" }
        )),
        EventBody::GoalComplete { output, fields, .. } => {
            let goal = name(&e.goal);
            let mut parts = vec![Part::text(output.clone())];
            if !fields.is_empty() {
                parts.push(tasks::json_part(Value::Object(
                    fields.clone().into_iter().collect(),
                )));
            }
            Some(artifact_update(
                o.id().to_owned(),
                o.context(),
                Artifact {
                    artifact_id: format!("goal-{goal}"),
                    name: Some(goal.clone()),
                    description: Some(format!("The output of goal `{goal}`")),
                    parts,
                    ..Artifact::default()
                },
            ))
        }
        _ => None,
    }
}

/// The stream of task `owned` from event `after`, opening with `first`, as
/// server-sent events answering JSON-RPC request `rpc_id`; `hold` keeps
/// its place among the open streams.
pub fn respond(
    a2a: &Arc<A2a>,
    owned: Owned,
    first: Task,
    after: u64,
    version: Version,
    rpc_id: Value,
    hold: super::Hold,
) -> Response<Body> {
    let mut follow = Follow::new(a2a.clone(), owned, first, after);
    // The follower runs on its own task (its futures are not `Sync`, which a
    // body must be); it stops when the client goes or the server stops.
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let _hold = hold;
        loop {
            // A client that went frees its place at once, not at the next event.
            let item = tokio::select! {
                item = follow.next() => item,
                _ = tx.closed() => return,
            };
            let Some(item) = item else {
                return;
            };
            let msg = match item {
                Item::Update(u) => JsonRpcResponse::result(rpc_id.clone(), version.update(&u)),
                Item::Fault(f) => JsonRpcResponse::error(rpc_id.clone(), f.write(version)),
                Item::KeepAlive => {
                    if tx
                        .send(Bytes::from_static(b": keep-alive\n\n"))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    continue;
                }
            };
            let msg = serde_json::to_string(&msg).unwrap_or_default();
            let text = format!("data: {msg}\n\n");
            if tx.send(Bytes::from(text)).await.is_err() {
                return;
            }
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        let bytes = rx.recv().await?;
        Some((Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    let mut r = Response::new(StreamBody::new(frames).boxed());
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// Wait until task `o` ends or asks its client (or `within` passes, or the
/// server stops): the task then.
pub async fn settle(a2a: &Arc<A2a>, mut o: Owned, within: Duration) -> Result<Task, Fault> {
    let deadline = tokio::time::Instant::now() + within;
    let mut after = o.meta.last_seq;
    let mut status = o.meta.status;
    loop {
        if may_end(status) {
            o = tasks::reload(a2a, &o).await?;
            let task = tasks::task_of(a2a, &o, true).await?;
            if task.status.state.ends_stream() {
                return Ok(task);
            }
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() || a2a.stop.is_cancelled() {
            let o = tasks::reload(a2a, &o).await?;
            return tasks::task_of(a2a, &o, false).await;
        }
        let started = tokio::time::Instant::now();
        let asked = a2a.gateway.events(EventParams {
            session_id: o.id().to_owned(),
            after_seq: after,
            wait_ms: left.min(WAIT).as_millis() as u64,
            limit: Some(1),
        });
        let page = tokio::select! {
            _ = a2a.stop.cancelled() => continue,
            page = asked => page.map_err(|e| Fault::internal(e.message))?,
        };
        after = page.last_seq.max(after);
        status = page.status;
        if page.events.is_empty() && started.elapsed() < Duration::from_millis(50) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
