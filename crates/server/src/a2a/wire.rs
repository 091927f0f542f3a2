//! The A2A wire in both generations this server speaks: 1.0 (the proto3 JSON
//! mapping of `a2a.proto`, which the official `a2a-sdk` 1.x sends: camelCase
//! fields, enums as `TASK_STATE_WORKING` and `ROLE_AGENT`, a part by which
//! field it sets, a stream item by which of `task`, `statusUpdate`,
//! `artifactUpdate` it holds) and 0.3 (`kind` tags, `working`, `agent`,
//! `final` on the last status update).
//!
//! The rest of the module builds one neutral shape ([`Task`], [`Update`])
//! and [`Version`] writes it in the caller's generation; what comes in is
//! read the same way for both ([`Incoming::read`]). Nothing here touches the
//! store or the run service.

use serde_json::{Map, Value, json};

/// Which generation a request speaks (by its method's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// A2A 1.0: `SendMessage`, `GetTask`, …
    V1,
    /// A2A 0.3: `message/send`, `tasks/get`, …
    V03,
}

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Working,
    InputRequired,
    Completed,
    Failed,
    Canceled,
}

impl State {
    fn name(self, v: Version) -> &'static str {
        match (v, self) {
            (Version::V1, State::Working) => "TASK_STATE_WORKING",
            (Version::V1, State::InputRequired) => "TASK_STATE_INPUT_REQUIRED",
            (Version::V1, State::Completed) => "TASK_STATE_COMPLETED",
            (Version::V1, State::Failed) => "TASK_STATE_FAILED",
            (Version::V1, State::Canceled) => "TASK_STATE_CANCELED",
            (Version::V03, State::Working) => "working",
            (Version::V03, State::InputRequired) => "input-required",
            (Version::V03, State::Completed) => "completed",
            (Version::V03, State::Failed) => "failed",
            (Version::V03, State::Canceled) => "canceled",
        }
    }

    /// Whether a stream ends here (a final state, or one that waits for the
    /// client, which answers with a new message).
    pub fn ends_stream(self) -> bool {
        self != State::Working
    }

    /// Whether nothing will change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Canceled)
    }
}

/// One part of a message or an artifact.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text {
        text: String,
        metadata: Option<Value>,
    },
    Data {
        data: Value,
        metadata: Option<Value>,
    },
}

impl Part {
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text {
            text: text.into(),
            metadata: None,
        }
    }

    pub fn data(data: Value) -> Part {
        Part::Data {
            data,
            metadata: None,
        }
    }

    fn write(&self, v: Version) -> Value {
        let (mut o, metadata) = match self {
            Part::Text { text, metadata } => {
                let mut o = Map::new();
                if v == Version::V03 {
                    o.insert("kind".into(), "text".into());
                }
                o.insert("text".into(), text.clone().into());
                (o, metadata)
            }
            Part::Data { data, metadata } => {
                let mut o = Map::new();
                let data = match (v, data) {
                    // 0.3's data part holds an object only.
                    (Version::V03, Value::Object(_)) | (Version::V1, _) => data.clone(),
                    (Version::V03, other) => json!({ "value": other }),
                };
                if v == Version::V03 {
                    o.insert("kind".into(), "data".into());
                } else {
                    o.insert("mediaType".into(), "application/json".into());
                }
                o.insert("data".into(), data);
                (o, metadata)
            }
        };
        if let Some(m) = metadata {
            o.insert("metadata".into(), m.clone());
        }
        Value::Object(o)
    }
}

/// A message from the agent (the status of a task says why it stands where
/// it does).
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub id: String,
    pub task_id: String,
    pub context_id: String,
    pub parts: Vec<Part>,
}

impl Message {
    fn write(&self, v: Version) -> Value {
        let mut o = json!({
            "messageId": self.id,
            "taskId": self.task_id,
            "contextId": self.context_id,
            "role": if v == Version::V1 { "ROLE_AGENT" } else { "agent" },
            "parts": self.parts.iter().map(|p| p.write(v)).collect::<Vec<_>>(),
        });
        if v == Version::V03 {
            o["kind"] = "message".into();
        }
        o
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub state: State,
    pub message: Option<Message>,
    /// RFC 3339 UTC.
    pub timestamp: String,
}

impl Status {
    fn write(&self, v: Version) -> Value {
        let mut o = json!({ "state": self.state.name(v), "timestamp": self.timestamp });
        if let Some(m) = &self.message {
            o["message"] = m.write(v);
        }
        o
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Artifact {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub parts: Vec<Part>,
}

impl Artifact {
    fn write(&self, v: Version) -> Value {
        let mut o = json!({
            "artifactId": self.id,
            "name": self.name,
            "parts": self.parts.iter().map(|p| p.write(v)).collect::<Vec<_>>(),
        });
        if let Some(d) = &self.description {
            o["description"] = d.clone().into();
        }
        o
    }
}

/// A task: a session as A2A sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: Status,
    pub artifacts: Vec<Artifact>,
    pub metadata: Value,
}

/// One item of a stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Update {
    Task(Task),
    Status {
        task_id: String,
        context_id: String,
        status: Status,
    },
    Artifact {
        task_id: String,
        context_id: String,
        artifact: Artifact,
    },
}

impl Version {
    /// A task as `GetTask`, `CancelTask` (and 0.3's `message/send`) return it.
    pub fn task(self, t: &Task) -> Value {
        let mut o = json!({
            "id": t.id,
            "contextId": t.context_id,
            "status": t.status.write(self),
            "artifacts": t.artifacts.iter().map(|a| a.write(self)).collect::<Vec<_>>(),
            "metadata": t.metadata,
        });
        if self == Version::V03 {
            o["kind"] = "task".into();
        }
        o
    }

    /// The result of a (non-streaming) send: 1.0's `SendMessageResponse`
    /// holds the task; 0.3 returns the task itself.
    pub fn sent(self, t: &Task) -> Value {
        match self {
            Version::V1 => json!({ "task": self.task(t) }),
            Version::V03 => self.task(t),
        }
    }

    /// One stream item: 1.0's `StreamResponse`, 0.3's tagged event.
    pub fn update(self, u: &Update) -> Value {
        match (self, u) {
            (Version::V1, Update::Task(t)) => json!({ "task": self.task(t) }),
            (Version::V03, Update::Task(t)) => self.task(t),
            (
                _,
                Update::Status {
                    task_id,
                    context_id,
                    status,
                },
            ) => {
                let event = json!({
                    "taskId": task_id,
                    "contextId": context_id,
                    "status": status.write(self),
                });
                match self {
                    Version::V1 => json!({ "statusUpdate": event }),
                    Version::V03 => {
                        let mut e = event;
                        e["kind"] = "status-update".into();
                        e["final"] = status.state.ends_stream().into();
                        e
                    }
                }
            }
            (
                _,
                Update::Artifact {
                    task_id,
                    context_id,
                    artifact,
                },
            ) => {
                let event = json!({
                    "taskId": task_id,
                    "contextId": context_id,
                    "artifact": artifact.write(self),
                    "append": false,
                    "lastChunk": true,
                });
                match self {
                    Version::V1 => json!({ "artifactUpdate": event }),
                    Version::V03 => {
                        let mut e = event;
                        e["kind"] = "artifact-update".into();
                        e
                    }
                }
            }
        }
    }
}

/// What a client's message says, in either generation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Incoming {
    /// `taskId`: an answer to the task's question (an approval, a signal).
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    /// `metadata.skill` (of the message, else of the request).
    pub skill: Option<String>,
    /// The first data part.
    pub data: Option<Value>,
    /// The text parts, joined by newlines.
    pub text: Option<String>,
}

impl Incoming {
    /// Read `params` of `SendMessage` / `message/send` (and the streaming
    /// ones).
    pub fn read(params: &Value) -> Result<Incoming, Fault> {
        let Some(message) = params.get("message").filter(|m| m.is_object()) else {
            return Err(Fault::invalid_params(
                "the request has no `message` object: send {\"message\": {\"role\": \"ROLE_USER\", \
                 \"parts\": [{\"data\": {…inputs…}}], \"metadata\": {\"skill\": \"<skill id>\"}, \
                 \"messageId\": \"…\"}}",
            ));
        };
        let text_of = |v: &Value, key: &str| {
            v.get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let Some(parts) = message.get("parts").and_then(Value::as_array) else {
            return Err(Fault::invalid_params("the message has no `parts` list"));
        };
        let mut data = None;
        let mut texts = Vec::new();
        for p in parts {
            if let Some(d) = p.get("data") {
                // 0.3 wraps nothing; 1.0's `data` is any JSON value.
                data.get_or_insert_with(|| d.clone());
            } else if let Some(t) = p.get("text").and_then(Value::as_str) {
                texts.push(t.to_owned());
            }
        }
        let skill = message
            .get("metadata")
            .and_then(|m| text_of(m, "skill"))
            .or_else(|| params.get("metadata").and_then(|m| text_of(m, "skill")));
        Ok(Incoming {
            task_id: text_of(message, "taskId"),
            context_id: text_of(message, "contextId"),
            skill,
            data,
            text: (!texts.is_empty()).then(|| texts.join("\n")),
        })
    }
}

/// A JSON-RPC error of the A2A binding: its code, its message, and what
/// 1.0 carries as a `google.rpc.ErrorInfo` (reason, metadata).
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub code: i64,
    pub message: String,
    reason: &'static str,
    metadata: Map<String, Value>,
}

impl Fault {
    fn new(code: i64, reason: &'static str, message: impl Into<String>) -> Fault {
        Fault {
            code,
            message: message.into(),
            reason,
            metadata: Map::new(),
        }
    }

    pub fn parse(message: impl Into<String>) -> Fault {
        Fault::new(-32700, "PARSE_ERROR", message)
    }

    pub fn invalid_request(message: impl Into<String>) -> Fault {
        Fault::new(-32600, "INVALID_REQUEST", message)
    }

    pub fn method_not_found(method: &str) -> Fault {
        Fault::new(
            -32601,
            "METHOD_NOT_FOUND",
            format!(
                "no method `{method}` here: A2A 1.0's SendMessage, SendStreamingMessage, GetTask, \
                 ListTasks, CancelTask, SubscribeToTask, GetExtendedAgentCard, or 0.3's \
                 message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe"
            ),
        )
    }

    pub fn invalid_params(message: impl Into<String>) -> Fault {
        Fault::new(-32602, "INVALID_PARAMS", message)
    }

    pub fn internal(message: impl Into<String>) -> Fault {
        Fault::new(-32603, "INTERNAL_ERROR", message)
    }

    pub fn task_not_found(id: &str) -> Fault {
        Fault::new(-32001, "TASK_NOT_FOUND", format!("no task `{id}`"))
    }

    pub fn not_cancelable(id: &str, state: &str) -> Fault {
        Fault::new(
            -32002,
            "TASK_NOT_CANCELABLE",
            format!("task `{id}` has ended ({state}) and cannot be canceled"),
        )
    }

    pub fn push_not_supported() -> Fault {
        Fault::new(
            -32003,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "push notifications are not supported: stream (SendStreamingMessage, \
             SubscribeToTask) or poll GetTask",
        )
    }

    pub fn unsupported(message: impl Into<String>) -> Fault {
        Fault::new(-32004, "UNSUPPORTED_OPERATION", message)
    }

    pub fn version(asked: &str) -> Fault {
        Fault::new(
            -32009,
            "VERSION_NOT_SUPPORTED",
            format!(
                "A2A-Version {asked} is not served by this method: 1.0 methods (SendMessage, …) \
                 take A2A-Version 1.0, 0.3 clients call message/send, tasks/get, …"
            ),
        )
    }

    /// The same fault with `key` in its metadata (a string, as ErrorInfo's
    /// metadata holds).
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Fault {
        self.metadata
            .insert(key.to_owned(), Value::String(value.into()));
        self
    }

    /// The `error` object of a JSON-RPC response.
    pub fn write(&self, v: Version) -> Value {
        let data = match v {
            Version::V1 => json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": self.reason,
                "domain": "a2a-protocol.org",
                "metadata": self.metadata,
            }]),
            Version::V03 => Value::Object(self.metadata.clone()),
        };
        json!({ "code": self.code, "message": self.message, "data": data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task {
            id: "s1".into(),
            context_id: "c1".into(),
            status: Status {
                state: State::Completed,
                message: None,
                timestamp: "2026-01-01T00:00:00.000Z".into(),
            },
            artifacts: vec![Artifact {
                id: "outputs".into(),
                name: "outputs".into(),
                description: None,
                parts: vec![Part::data(json!({"greet": "hi"})), Part::text("hi")],
            }],
            metadata: json!({}),
        }
    }

    #[test]
    fn a_task_is_written_in_each_generation() {
        let v1 = Version::V1.sent(&task());
        assert_eq!(v1["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(
            v1["task"]["artifacts"][0]["parts"][0]["data"]["greet"],
            "hi"
        );
        assert_eq!(v1["task"]["artifacts"][0]["parts"][1]["text"], "hi");
        let v03 = Version::V03.sent(&task());
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], "completed");
        assert_eq!(v03["artifacts"][0]["parts"][0]["kind"], "data");
    }

    #[test]
    fn updates_name_what_they_hold() {
        let status = Update::Status {
            task_id: "s1".into(),
            context_id: "c1".into(),
            status: Status {
                state: State::InputRequired,
                message: None,
                timestamp: String::new(),
            },
        };
        assert_eq!(
            Version::V1.update(&status)["statusUpdate"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );
        let old = Version::V03.update(&status);
        assert_eq!(old["kind"], "status-update");
        assert_eq!(old["final"], true);
    }

    #[test]
    fn both_generations_of_a_message_read_alike() {
        let v1 = json!({"message": {"messageId": "m", "role": "ROLE_USER", "taskId": "t",
            "parts": [{"text": "go"}, {"data": {"topic": "tides"}}], "metadata": {"skill": "hello"}}});
        let v03 = json!({"message": {"kind": "message", "messageId": "m", "role": "user", "taskId": "t",
            "parts": [{"kind": "text", "text": "go"}, {"kind": "data", "data": {"topic": "tides"}}],
            "metadata": {"skill": "hello"}}});
        let a = Incoming::read(&v1).unwrap();
        assert_eq!(a, Incoming::read(&v03).unwrap());
        assert_eq!(a.skill.as_deref(), Some("hello"));
        assert_eq!(a.task_id.as_deref(), Some("t"));
        assert_eq!(a.data, Some(json!({"topic": "tides"})));
        assert_eq!(a.text.as_deref(), Some("go"));
        assert!(Incoming::read(&json!({})).is_err());
    }

    #[test]
    fn faults_carry_error_info_in_1_0() {
        let f = Fault::invalid_params("bad").with("skill", "x");
        let e = f.write(Version::V1);
        assert_eq!(e["code"], -32602);
        assert_eq!(e["data"][0]["reason"], "INVALID_PARAMS");
        assert_eq!(e["data"][0]["metadata"]["skill"], "x");
        assert_eq!(f.write(Version::V03)["data"]["skill"], "x");
    }
}
