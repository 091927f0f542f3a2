//! `subscriptions/listen` (2026-07-28, SEP-2575): the one request through
//! which a stateless client hears list changes and, with the tasks extension,
//! the status of its tasks.
//!
//! The client names the notifications it wants; the server acknowledges the
//! subset it will send (`notifications/subscriptions/acknowledged`, the first
//! message of the subscription) and tags each notification with
//! `_meta["io.modelcontextprotocol/subscriptionId"]`, the JSON-RPC id of the
//! listen request. Over Streamable HTTP they ride that request's response
//! stream ([`super::http`]); on stdio, the one output ([`super::transport`]).
//! Both read the same stream of messages from [`open`]. Nothing the client
//! did not ask for is sent.
//!
//! Task status (`notifications: {taskIds: [...]}`, the tasks extension):
//! only a client that declared `io.modelcontextprotocol/tasks` may ask
//! (else `-32021`); of the ids it names, those of its own known tasks are
//! honoured ([`TaskSource::followable`]), and each gets `notifications/tasks`
//! with what `tasks/get` would answer: once at once (the state when the
//! subscription opens, so a change in between is never lost) and then at
//! each change of status, until the task ends. No task notification goes
//! anywhere else.
//!
//! Changes come from one [`Hub`] per process: the workspace scanner (tool
//! list), an embedder's tools ([`super::ToolHost::tools_changed`]) and the
//! events of the runs started as tasks ([`Hub::task_event`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::principal::Principal;

/// The `_meta` key of every message of a subscription.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The request's method.
pub const METHOD: &str = "subscriptions/listen";
/// The tasks extension a client must declare to ask for task status.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The most task ids one subscription follows (the rest are not honoured).
pub const MAX_TASK_IDS: usize = 256;

/// A change a client can subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The tool list (`toolsListChanged`).
    Tools,
}

impl Change {
    fn method(self) -> &'static str {
        match self {
            Change::Tools => "notifications/tools/list_changed",
        }
    }
}

/// Where task status comes from: the session store, read by
/// [`super::tasks`] (this module knows no store).
pub trait TaskSource: Send + Sync + 'static {
    /// Those of `ids` that `who` may follow: known tasks of theirs, not
    /// expired (an unknown id and another principal's are left out alike).
    fn followable<'a>(
        &'a self,
        who: &'a Principal,
        ids: Vec<String>,
    ) -> Pin<Box<dyn Future<Output = Vec<String>> + Send + 'a>>;

    /// Send task `id`'s state (the params of `notifications/tasks`: what
    /// `tasks/get` answers) on `out` now and at each change of its status,
    /// until it ends or `out` closes.
    fn follow(&self, id: String, out: mpsc::Sender<Value>);
}

/// Where the changes of one server process are announced.
#[derive(Clone)]
pub struct Hub {
    tx: broadcast::Sender<Change>,
    /// The session id of each event of a run started as a task: its status
    /// may have changed.
    task_events: broadcast::Sender<Arc<str>>,
    tasks: Arc<OnceLock<Arc<dyn TaskSource>>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            tx: broadcast::channel(64).0,
            task_events: broadcast::channel(256).0,
            tasks: Arc::default(),
        }
    }
}

impl Hub {
    /// Tell every listener (nobody listening is fine).
    pub fn changed(&self, change: Change) {
        let _ = self.tx.send(change);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }

    /// Task `id`'s run had an event (nobody following it is fine).
    pub fn task_event(&self, id: &str) {
        if self.task_events.receiver_count() > 0 {
            let _ = self.task_events.send(Arc::from(id));
        }
    }

    /// The ids of tasks whose runs have events from now on.
    pub fn task_events(&self) -> broadcast::Receiver<Arc<str>> {
        self.task_events.subscribe()
    }

    /// Where task status is read from (set once, at start).
    pub fn set_tasks(&self, source: Arc<dyn TaskSource>) {
        let _ = self.tasks.set(source);
    }
}

/// What this server agreed to send on one subscription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Honoured {
    pub tools: bool,
    /// The task ids followed; `None` when the client asked for none.
    pub tasks: Option<Vec<String>>,
}

impl Honoured {
    /// The subset of the requested list notifications (`params.notifications`)
    /// this server sends: the tool list only (its one resource never changes,
    /// and its prompt list does not change while it runs). Task ids are
    /// decided by [`open`].
    pub fn of(params: &Value) -> Honoured {
        let asked = &params["notifications"];
        Honoured {
            tools: asked["toolsListChanged"] == Value::Bool(true),
            tasks: None,
        }
    }

    pub fn wants(&self, change: Change) -> bool {
        match change {
            Change::Tools => self.tools,
        }
    }

    fn as_json(&self) -> Value {
        let mut o = serde_json::Map::new();
        if self.tools {
            o.insert("toolsListChanged".into(), Value::Bool(true));
        }
        if let Some(ids) = &self.tasks {
            o.insert("taskIds".into(), json!(ids));
        }
        Value::Object(o)
    }
}

/// The task ids a listen request asks for (`notifications.taskIds`), each
/// once, at most [`MAX_TASK_IDS`]; `None` when it names none.
pub fn asked_tasks(params: &Value) -> Option<Vec<String>> {
    let ids = params["notifications"]["taskIds"].as_array()?;
    let mut out: Vec<String> = Vec::new();
    for id in ids.iter().filter_map(Value::as_str) {
        if out.len() < MAX_TASK_IDS && !out.iter().any(|o| o == id) {
            out.push(id.to_owned());
        }
    }
    Some(out)
}

/// Whether the request declared the tasks extension in its 2026 `_meta`.
fn declares_tasks(params: &Value) -> bool {
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
        .get(TASKS_EXTENSION)
        .is_some_and(|e| !e.is_null())
}

/// The acknowledgement that opens subscription `id`.
pub fn acknowledgement(id: &Value, honoured: &Honoured) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": honoured.as_json(), "_meta": {SUBSCRIPTION_ID: id}}
    })
}

/// `change` as a notification of subscription `id`.
pub fn notification(id: &Value, change: Change) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": change.method(),
        "params": {"_meta": {SUBSCRIPTION_ID: id}}
    })
}

/// A task's state (`params`, as [`TaskSource::follow`] sends it) as a
/// `notifications/tasks` of subscription `id`.
pub fn task_notification(id: &Value, mut params: Value) -> Value {
    if let Some(o) = params.as_object_mut() {
        let meta = o.entry("_meta").or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.insert(SUBSCRIPTION_ID.into(), id.clone());
        }
    }
    json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
}

/// The `-32021` a client gets that asks for task status without declaring
/// the tasks extension.
fn missing_tasks_capability(id: &Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32021,
            "message": "Missing required client capability",
            "data": {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
        }
    })
}

/// A listen request, read.
pub enum Opened {
    /// The subscription's messages: the acknowledgement, then its
    /// notifications, until the consumer drops it or `stop` fires.
    Stream(Messages),
    /// The error reply to the request (nothing was subscribed).
    Refused(Value),
}

/// Open the subscription of listen request `msg` (its `id` and `params`) for
/// `who`; it ends when `stop` fires or the consumer drops the stream.
pub fn open(msg: &Value, hub: &Hub, who: Principal, stop: CancellationToken) -> Opened {
    let id = msg["id"].clone();
    let params = &msg["params"];
    let mut honoured = Honoured::of(params);
    let asked = asked_tasks(params);
    if asked.is_some() && !declares_tasks(params) {
        return Opened::Refused(missing_tasks_capability(&id));
    }
    let (tx, rx) = mpsc::channel::<Value>(64);
    // Subscribed before the acknowledgement: no change after it is missed.
    let changes = hub.subscribe();
    let source = hub.tasks.get().cloned();
    tokio::spawn(async move {
        let (task_tx, task_rx) = mpsc::channel::<Value>(16);
        if let Some(ids) = asked {
            let followed = match &source {
                Some(s) => s.followable(&who, ids).await,
                None => Vec::new(),
            };
            for t in &followed {
                if let Some(s) = &source {
                    // Buffered until the acknowledgement has gone out.
                    s.follow(t.clone(), task_tx.clone());
                }
            }
            honoured.tasks = Some(followed);
        }
        drop(task_tx);
        if tx.send(acknowledgement(&id, &honoured)).await.is_err() {
            return;
        }
        relay(&id, &honoured, changes, task_rx, &tx, &stop).await;
    });
    Opened::Stream(Messages(rx))
}

/// The messages of one subscription, in order.
pub struct Messages(mpsc::Receiver<Value>);

impl Stream for Messages {
    type Item = Value;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Value>> {
        self.0.poll_recv(cx)
    }
}

/// Pass the changes `honoured` names and the followed tasks' states to
/// `out`, tagged with subscription `id`, until `stop` or `out` closes.
async fn relay(
    id: &Value,
    honoured: &Honoured,
    mut changes: broadcast::Receiver<Change>,
    mut tasks: mpsc::Receiver<Value>,
    out: &mpsc::Sender<Value>,
    stop: &CancellationToken,
) {
    let mut following = true;
    loop {
        let message = tokio::select! {
            _ = stop.cancelled() => return,
            _ = out.closed() => return,
            c = changes.recv() => match c {
                Ok(c) if honoured.wants(c) => notification(id, c),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            t = tasks.recv(), if following => match t {
                Some(state) => task_notification(id, state),
                None => {
                    // Every followed task has ended.
                    following = false;
                    continue;
                }
            },
        };
        if out.send(message).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_was_asked_and_understood_is_honoured_and_everything_is_tagged() {
        let h = Honoured::of(
            &json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}}),
        );
        assert!(h.wants(Change::Tools));
        let ack = acknowledgement(&json!(7), &h);
        assert_eq!(
            ack["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], 7);
        let none = Honoured::of(&json!({"notifications": {"promptsListChanged": true}}));
        assert!(!none.wants(Change::Tools));
        assert_eq!(
            acknowledgement(&json!("a"), &none)["params"]["notifications"],
            json!({})
        );
        let n = notification(&json!("a"), Change::Tools);
        assert_eq!(n["method"], "notifications/tools/list_changed");
        assert_eq!(n["params"]["_meta"][SUBSCRIPTION_ID], "a");
    }

    #[test]
    fn task_ids_are_read_once_each_and_task_notifications_are_tagged() {
        let p = json!({"notifications": {"taskIds": ["a", "b", "a", 3]}});
        assert_eq!(asked_tasks(&p), Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(asked_tasks(&json!({"notifications": {}})), None);
        let h = Honoured {
            tools: false,
            tasks: Some(vec!["a".into()]),
        };
        assert_eq!(
            acknowledgement(&json!(1), &h)["params"]["notifications"],
            json!({"taskIds": ["a"]})
        );
        let n = task_notification(&json!(1), json!({"taskId": "a", "status": "working"}));
        assert_eq!(n["method"], "notifications/tasks");
        assert_eq!(n["params"]["status"], "working");
        assert_eq!(n["params"]["_meta"][SUBSCRIPTION_ID], 1);
    }

    #[tokio::test]
    async fn task_status_needs_the_extension_declared() {
        let hub = Hub::default();
        let msg = json!({"jsonrpc": "2.0", "id": 4, "method": METHOD,
            "params": {"notifications": {"taskIds": ["x"]}, "_meta": {}}});
        match open(&msg, &hub, Principal::local(), CancellationToken::new()) {
            Opened::Refused(e) => {
                assert_eq!(e["id"], 4);
                assert_eq!(e["error"]["code"], -32021);
            }
            Opened::Stream(_) => panic!("subscribed without the extension"),
        }
        let mut declared = msg.clone();
        declared["params"]["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities":
            {"extensions": {TASKS_EXTENSION: {}}}});
        let Opened::Stream(mut s) = open(
            &declared,
            &hub,
            Principal::local(),
            CancellationToken::new(),
        ) else {
            panic!("refused a declaring client");
        };
        // No task source here: nothing followed, and it says so.
        let ack = futures::StreamExt::next(&mut s).await.unwrap();
        assert_eq!(ack["params"]["notifications"], json!({"taskIds": []}));
    }
}
