//! How the A2A door answers: in the generation the caller spoke
//! ([`Version`], by its method's name) and, when it refuses, with a
//! JSON-RPC error whose words are this server's ([`Fault`]).
//!
//! The shapes are `agentfile_wire::a2a`'s: the door builds 1.0 values
//! ([`Task`], [`StreamResponse`]) and a 0.3 caller gets them through the
//! wire's `v0_3` conversions. Nothing here reads the store.

use serde::Serialize;
use serde_json::{Map, Value};

use agentfile_wire::a2a::{
    JsonRpcError, SendMessageResponse, StreamResponse, Task, error_code, v0_3,
};

/// Which generation a request speaks (by its method's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// A2A 1.0: `SendMessage`, `GetTask`, …
    V1,
    /// A2A 0.3: `message/send`, `tasks/get`, …
    V03,
}

fn to_json(v: impl Serialize) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

impl Version {
    /// A task as `GetTask`, `CancelTask` (and 0.3's `message/send`) return it.
    pub fn task(self, t: &Task) -> Value {
        match self {
            Version::V1 => to_json(t),
            Version::V03 => to_json(v0_3::Task::from(t)),
        }
    }

    /// The result of a (non-streaming) send: 1.0's `SendMessageResponse`
    /// holds the task; 0.3 returns the task itself.
    pub fn sent(self, t: Task) -> Value {
        match self {
            Version::V1 => to_json(SendMessageResponse::Task(t)),
            Version::V03 => self.task(&t),
        }
    }

    /// One stream item: 1.0's `StreamResponse`, 0.3's `kind`-tagged event.
    pub fn update(self, u: &StreamResponse) -> Value {
        match self {
            Version::V1 => to_json(u),
            Version::V03 => to_json(v0_3::StreamResponse::from(u)),
        }
    }
}

/// A JSON-RPC error of the A2A binding: its code, its message, and the
/// metadata 1.0 carries in a `google.rpc.ErrorInfo` (0.3 as `data`).
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub code: i64,
    pub message: String,
    metadata: Map<String, Value>,
}

impl Fault {
    fn new(code: i64, message: impl Into<String>) -> Fault {
        Fault {
            code,
            message: message.into(),
            metadata: Map::new(),
        }
    }

    pub fn parse(message: impl Into<String>) -> Fault {
        Fault::new(error_code::PARSE_ERROR, message)
    }

    pub fn invalid_request(message: impl Into<String>) -> Fault {
        Fault::new(error_code::INVALID_REQUEST, message)
    }

    pub fn method_not_found(method: &str) -> Fault {
        Fault::new(
            error_code::METHOD_NOT_FOUND,
            format!(
                "no method `{method}` here: A2A 1.0's SendMessage, SendStreamingMessage, GetTask, \
                 ListTasks, CancelTask, SubscribeToTask, GetExtendedAgentCard, or 0.3's \
                 message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe"
            ),
        )
    }

    pub fn invalid_params(message: impl Into<String>) -> Fault {
        Fault::new(error_code::INVALID_PARAMS, message)
    }

    pub fn internal(message: impl Into<String>) -> Fault {
        Fault::new(error_code::INTERNAL_ERROR, message)
    }

    pub fn task_not_found(id: &str) -> Fault {
        Fault::new(error_code::TASK_NOT_FOUND, format!("no task `{id}`"))
    }

    pub fn not_cancelable(id: &str, state: &str) -> Fault {
        Fault::new(
            error_code::TASK_NOT_CANCELABLE,
            format!("task `{id}` has ended ({state}) and cannot be canceled"),
        )
    }

    pub fn push_not_supported() -> Fault {
        Fault::new(
            error_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications are not supported: stream (SendStreamingMessage, \
             SubscribeToTask) or poll GetTask",
        )
    }

    pub fn unsupported(message: impl Into<String>) -> Fault {
        Fault::new(error_code::UNSUPPORTED_OPERATION, message)
    }

    pub fn version(asked: &str) -> Fault {
        Fault::new(
            error_code::VERSION_NOT_SUPPORTED,
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

    /// The `error` of a JSON-RPC response in generation `v`.
    pub fn write(&self, v: Version) -> JsonRpcError {
        match v {
            Version::V1 => {
                JsonRpcError::with_info(self.code, self.message.clone(), self.metadata.clone())
            }
            Version::V03 => v0_3::error(self.code, self.message.clone(), self.metadata.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_wire::a2a::{Artifact, Part, TaskState, TaskStatus};
    use serde_json::json;

    fn task() -> Task {
        Task {
            id: "s1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: Some("2026-01-01T00:00:00.000Z".into()),
            },
            artifacts: vec![Artifact {
                artifact_id: "outputs".into(),
                name: Some("outputs".into()),
                parts: vec![Part::data(json!({"greet": "hi"})), Part::text("hi")],
                ..Artifact::default()
            }],
            ..Task::default()
        }
    }

    #[test]
    fn a_task_is_written_in_each_generation() {
        let v1 = Version::V1.sent(task());
        assert_eq!(v1["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(
            v1["task"]["artifacts"][0]["parts"][0]["data"]["greet"],
            "hi"
        );
        assert_eq!(v1["task"]["artifacts"][0]["parts"][1]["text"], "hi");
        let v03 = Version::V03.sent(task());
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], "completed");
        assert_eq!(v03["artifacts"][0]["parts"][0]["kind"], "data");
    }

    #[test]
    fn faults_carry_error_info_in_1_0() {
        let f = Fault::invalid_params("bad").with("skill", "x");
        let e = serde_json::to_value(f.write(Version::V1)).unwrap();
        assert_eq!(e["code"], -32602);
        assert_eq!(e["data"][0]["reason"], "INVALID_PARAMS");
        assert_eq!(e["data"][0]["metadata"]["skill"], "x");
        let old = serde_json::to_value(f.write(Version::V03)).unwrap();
        assert_eq!(old["data"]["skill"], "x");
    }
}
