//! A2A (Agent2Agent) wire types: the JSON the protocol's JSON-RPC binding
//! carries, as the official `a2a-sdk` 1.x speaks it (CONTRACT §21).
//!
//! Version 1.0 is the proto3 JSON mapping of `a2a.proto`: field names in
//! camelCase, enums as their names (`TASK_STATE_COMPLETED`, `ROLE_USER`), a
//! `Part` one of `text` / `raw` / `url` / `data`, a response one of `task` /
//! `message` (/ `statusUpdate` / `artifactUpdate` on a stream). Every field
//! is optional on the way in (proto3 JSON leaves out default values), so each
//! struct reads with its defaults. [`v0_3`] holds the older generation's
//! shapes (`kind`-tagged parts and results, kebab-case states), which 0.3
//! agents still answer with.
//!
//! What this is not: a client or a server. Nothing here does I/O; the tools
//! crate's A2A client and the server's A2A door both build on these types:
//! the server builds 1.0 values and writes them for a 0.3 client through the
//! `From` conversions of [`v0_3`], and reads a 0.3 request as its 1.0 twin
//! ([`v0_3::MessageSendParams::current`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version this binding speaks, sent in [`VERSION_HEADER`].
pub const PROTOCOL_VERSION: &str = "1.0";
/// The HTTP header a client names the protocol version in.
pub const VERSION_HEADER: &str = "A2A-Version";
/// Where an agent publishes its card, below its base URL.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// The protocol binding name of JSON-RPC in an [`AgentInterface`].
pub const JSONRPC_BINDING: &str = "JSONRPC";

/// The JSON-RPC method names of version 1.0.
pub mod method {
    pub const SEND_MESSAGE: &str = "SendMessage";
    pub const SEND_STREAMING_MESSAGE: &str = "SendStreamingMessage";
    pub const GET_TASK: &str = "GetTask";
    pub const LIST_TASKS: &str = "ListTasks";
    pub const CANCEL_TASK: &str = "CancelTask";
    pub const SUBSCRIBE_TO_TASK: &str = "SubscribeToTask";
    pub const GET_EXTENDED_AGENT_CARD: &str = "GetExtendedAgentCard";
    pub const CREATE_TASK_PUSH_NOTIFICATION_CONFIG: &str = "CreateTaskPushNotificationConfig";
    pub const GET_TASK_PUSH_NOTIFICATION_CONFIG: &str = "GetTaskPushNotificationConfig";
    pub const LIST_TASK_PUSH_NOTIFICATION_CONFIGS: &str = "ListTaskPushNotificationConfigs";
    pub const DELETE_TASK_PUSH_NOTIFICATION_CONFIG: &str = "DeleteTaskPushNotificationConfig";
}

/// The error codes of a JSON-RPC error: JSON-RPC's own and A2A's.
pub mod error_code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    pub const INVALID_AGENT_RESPONSE: i64 = -32006;
    pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
    pub const EXTENSION_SUPPORT_REQUIRED: i64 = -32008;
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;

    /// The `reason` a 1.0 error's [`ErrorInfo`](super::ErrorInfo) gives for
    /// `code`, as the `a2a-sdk` names them (`TASK_NOT_FOUND`).
    pub fn reason(code: i64) -> &'static str {
        match code {
            PARSE_ERROR => "PARSE_ERROR",
            INVALID_REQUEST => "INVALID_REQUEST",
            METHOD_NOT_FOUND => "METHOD_NOT_FOUND",
            INVALID_PARAMS => "INVALID_PARAMS",
            INTERNAL_ERROR => "INTERNAL_ERROR",
            TASK_NOT_FOUND => "TASK_NOT_FOUND",
            TASK_NOT_CANCELABLE => "TASK_NOT_CANCELABLE",
            PUSH_NOTIFICATION_NOT_SUPPORTED => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            UNSUPPORTED_OPERATION => "UNSUPPORTED_OPERATION",
            CONTENT_TYPE_NOT_SUPPORTED => "CONTENT_TYPE_NOT_SUPPORTED",
            INVALID_AGENT_RESPONSE => "INVALID_AGENT_RESPONSE",
            EXTENDED_CARD_NOT_CONFIGURED => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            EXTENSION_SUPPORT_REQUIRED => "EXTENSION_SUPPORT_REQUIRED",
            VERSION_NOT_SUPPORTED => "VERSION_NOT_SUPPORTED",
            _ => "UNKNOWN_ERROR",
        }
    }
}

/// `google.rpc.ErrorInfo`: what a 1.0 JSON-RPC error's `data` (a list of
/// typed details) opens with: the reason of its code and string metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ErrorInfo {
    #[serde(rename = "@type")]
    pub type_url: String,
    pub reason: String,
    pub domain: String,
    pub metadata: Map<String, Value>,
}

impl ErrorInfo {
    /// The detail's `@type`.
    pub const TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
    /// The domain of A2A's reasons.
    pub const DOMAIN: &str = "a2a-protocol.org";

    /// The detail of an error of `code`.
    pub fn new(code: i64, metadata: Map<String, Value>) -> ErrorInfo {
        ErrorInfo {
            type_url: ErrorInfo::TYPE.to_owned(),
            reason: error_code::reason(code).to_owned(),
            domain: ErrorInfo::DOMAIN.to_owned(),
            metadata,
        }
    }
}

/// What an agent says about itself. Read generically: fields a card of
/// another generation carries ([`AgentCard::url`], `protocolVersion`) are
/// kept, and anything else lands in [`AgentCard::extra`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub supported_interfaces: Vec<AgentInterface>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
    pub capabilities: AgentCapabilities,
    /// Scheme name → scheme (`{"httpAuthSecurityScheme": {"scheme": "Bearer"}}`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub security_schemes: BTreeMap<String, Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub security_requirements: Vec<Value>,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
    /// 0.3: the agent's endpoint (1.0 lists it in `supportedInterfaces`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// 0.3: the protocol version the card's `url` speaks (`"0.3.0"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// 0.3: the binding of `url` (`"JSONRPC"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_transport: Option<String>,
    /// Fields this type does not name, kept as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One endpoint of an agent: where, in which binding and version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub protocol_version: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentProvider {
    pub url: String,
    pub organization: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCapabilities {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AgentExtension>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended_agent_card: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentExtension {
    pub uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// One thing an agent can do. Fields beyond the protocol's (an input
/// schema an agent publishes, say) are kept in [`AgentSkill::extra`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub input_modes: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_modes: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub security_requirements: Vec<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Who sent a message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Role {
    #[default]
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "ROLE_USER", alias = "user")]
    User,
    #[serde(rename = "ROLE_AGENT", alias = "agent")]
    Agent,
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TaskState {
    #[default]
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    /// The task is over: nothing more will happen to it.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// The task waits for its client (input or authentication).
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// A stream of the task ends here: it is over, or waits for its client
    /// (0.3 marks such a status update `final`).
    pub fn ends_stream(self) -> bool {
        self.is_terminal() || self.is_interrupted()
    }

    /// The 1.0 name (`TASK_STATE_COMPLETED`).
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }
}

/// A piece of content: one of `text`, `raw` (base64), `url`, `data` (any
/// JSON value), with optional metadata, file name and media type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Part {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

impl Part {
    pub fn text(text: impl Into<String>) -> Part {
        Part {
            text: Some(text.into()),
            ..Part::default()
        }
    }

    pub fn data(data: Value) -> Part {
        Part {
            data: Some(data),
            ..Part::default()
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Message {
    pub message_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskArtifactUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    /// The parts add to the artifact of the same id sent before.
    pub append: bool,
    pub last_chunk: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SendMessageConfiguration {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// Answer with the task at once rather than when it is done or
    /// interrupted (1.0's replacement of 0.3's `blocking`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_immediately: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_push_notification_config: Option<Value>,
}

/// Params of `SendMessage` and `SendStreamingMessage`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SendMessageRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub message: Message,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// Params of `GetTask`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct GetTaskRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
}

/// Params of `CancelTask`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct CancelTaskRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// Params of `SubscribeToTask`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscribeToTaskRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
}

/// Params of `ListTasks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ListTasksRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_timestamp_after: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_artifacts: Option<bool>,
}

/// The result of `ListTasks`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct ListTasksResponse {
    pub tasks: Vec<Task>,
    /// Empty on the last page.
    pub next_page_token: String,
    pub page_size: i32,
    pub total_size: i32,
}

/// The result of `SendMessage`: the task it started (or continued), or a
/// message when the agent answered without a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// One event of `SendStreamingMessage` / `SubscribeToTask` (the `result` of
/// each SSE `data:` line's JSON-RPC response).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// A JSON-RPC 2.0 request as A2A sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcRequest {
    pub jsonrpc: String,
    pub id: Value,
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

impl JsonRpcRequest {
    pub fn new(id: impl Into<Value>, method: &str, params: Value) -> JsonRpcRequest {
        JsonRpcRequest {
            jsonrpc: "2.0".to_owned(),
            id: id.into(),
            method: method.to_owned(),
            params,
        }
    }
}

/// A JSON-RPC 2.0 response: `result` or `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcResponse {
    #[serde(default)]
    pub jsonrpc: String,
    #[serde(default)]
    pub id: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<JsonRpcError>,
}

impl JsonRpcResponse {
    /// The answer `result` to request `id`.
    pub fn result(id: Value, result: Value) -> JsonRpcResponse {
        JsonRpcResponse {
            jsonrpc: "2.0".to_owned(),
            id,
            result: Some(result),
            error: None,
        }
    }

    /// The refusal `error` of request `id`.
    pub fn error(id: Value, error: JsonRpcError) -> JsonRpcResponse {
        JsonRpcResponse {
            jsonrpc: "2.0".to_owned(),
            id,
            result: None,
            error: Some(error),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonRpcError {
    pub code: i64,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl JsonRpcError {
    /// An error of `code` as a 1.0 agent answers it: `data` holds the
    /// code's [`ErrorInfo`] with `metadata` (0.3 has [`v0_3::error`]).
    pub fn with_info(
        code: i64,
        message: impl Into<String>,
        metadata: Map<String, Value>,
    ) -> JsonRpcError {
        let info = serde_json::to_value(ErrorInfo::new(code, metadata)).unwrap_or_default();
        JsonRpcError {
            code,
            message: message.into(),
            data: Some(Value::Array(vec![info])),
        }
    }
}

/// The 0.3 generation (`message/send`, `tasks/get`): parts and results
/// carry a `kind`, states are kebab-case, roles lower-case.
pub mod v0_3 {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::{Map, Value};

    /// The version a 0.3 client names itself by.
    pub const PROTOCOL_VERSION: &str = "0.3";

    pub mod method {
        pub const SEND_MESSAGE: &str = "message/send";
        pub const SEND_STREAMING_MESSAGE: &str = "message/stream";
        pub const GET_TASK: &str = "tasks/get";
        pub const CANCEL_TASK: &str = "tasks/cancel";
        pub const RESUBSCRIBE: &str = "tasks/resubscribe";
        pub const GET_AUTHENTICATED_EXTENDED_CARD: &str = "agent/getAuthenticatedExtendedCard";
        /// What the push-notification methods' names start with
        /// (`tasks/pushNotificationConfig/set`, `…/get`, …).
        pub const PUSH_NOTIFICATION_CONFIG_PREFIX: &str = "tasks/pushNotificationConfig/";
    }

    /// An error of `code` as a 0.3 agent answers it: `data` is the metadata
    /// itself (1.0 wraps it in an [`ErrorInfo`](super::ErrorInfo)).
    pub fn error(
        code: i64,
        message: impl Into<String>,
        metadata: Map<String, Value>,
    ) -> super::JsonRpcError {
        super::JsonRpcError {
            code,
            message: message.into(),
            data: Some(Value::Object(metadata)),
        }
    }

    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    pub enum Role {
        #[default]
        User,
        Agent,
    }

    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "kebab-case")]
    pub enum TaskState {
        Submitted,
        Working,
        InputRequired,
        Completed,
        Canceled,
        Failed,
        Rejected,
        AuthRequired,
        #[default]
        #[serde(other)]
        Unknown,
    }

    impl From<super::TaskState> for TaskState {
        fn from(s: super::TaskState) -> TaskState {
            use super::TaskState as S;
            match s {
                S::Submitted => TaskState::Submitted,
                S::Working => TaskState::Working,
                S::InputRequired => TaskState::InputRequired,
                S::Completed => TaskState::Completed,
                S::Canceled => TaskState::Canceled,
                S::Failed => TaskState::Failed,
                S::Rejected => TaskState::Rejected,
                S::AuthRequired => TaskState::AuthRequired,
                S::Unspecified => TaskState::Unknown,
            }
        }
    }

    impl TaskState {
        /// The same state in 1.0's terms.
        pub fn current(self) -> super::TaskState {
            use super::TaskState as S;
            match self {
                TaskState::Submitted => S::Submitted,
                TaskState::Working => S::Working,
                TaskState::InputRequired => S::InputRequired,
                TaskState::Completed => S::Completed,
                TaskState::Canceled => S::Canceled,
                TaskState::Failed => S::Failed,
                TaskState::Rejected => S::Rejected,
                TaskState::AuthRequired => S::AuthRequired,
                TaskState::Unknown => S::Unspecified,
            }
        }
    }

    /// A part: `{"kind": "text", "text"}`, `{"kind": "data", "data"}` or
    /// `{"kind": "file", "file"}`, kept flat so any of them reads.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Part {
        pub kind: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub text: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub data: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub file: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
    }

    impl Part {
        pub fn text(text: impl Into<String>) -> Part {
            Part {
                kind: "text".to_owned(),
                text: Some(text.into()),
                ..Part::default()
            }
        }

        pub fn data(data: Value) -> Part {
            Part {
                kind: "data".to_owned(),
                data: Some(data),
                ..Part::default()
            }
        }

        /// A 1.0 part in 0.3's terms: `text`, `data` (an object: any other
        /// value is wrapped as `{"value": …}`), or `file` for `raw` / `url`.
        pub fn from_current(p: &super::Part) -> Part {
            let mut part = if let Some(text) = &p.text {
                Part::text(text.clone())
            } else if let Some(data) = &p.data {
                Part::data(match data {
                    Value::Object(_) => data.clone(),
                    other => serde_json::json!({ "value": other }),
                })
            } else {
                let mut file = Map::new();
                let mut put = |k: &str, v: &Option<String>| {
                    if let Some(v) = v {
                        file.insert(k.to_owned(), Value::String(v.clone()));
                    }
                };
                put("bytes", &p.raw);
                put("uri", &p.url);
                put("name", &p.filename);
                put("mimeType", &p.media_type);
                Part {
                    kind: "file".to_owned(),
                    file: Some(Value::Object(file)),
                    ..Part::default()
                }
            };
            part.metadata = p.metadata.clone();
            part
        }

        /// The same part in 1.0's terms.
        pub fn current(&self) -> super::Part {
            let file = |k: &str| {
                self.file
                    .as_ref()
                    .and_then(|f| f.get(k))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            super::Part {
                text: self.text.clone(),
                data: self.data.clone(),
                raw: file("bytes"),
                url: file("uri"),
                filename: file("name"),
                media_type: file("mimeType"),
                metadata: self.metadata.clone(),
            }
        }
    }

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Message {
        pub kind: String,
        pub message_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub context_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub task_id: Option<String>,
        pub role: Role,
        pub parts: Vec<Part>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
    }

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TaskStatus {
        pub state: TaskState,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub message: Option<Message>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub timestamp: Option<String>,
    }

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Artifact {
        pub artifact_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub description: Option<String>,
        pub parts: Vec<Part>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
    }

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Task {
        pub kind: String,
        pub id: String,
        pub context_id: String,
        pub status: TaskStatus,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub artifacts: Vec<Artifact>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub history: Vec<Message>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
    }

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct MessageSendConfiguration {
        #[serde(skip_serializing_if = "Option::is_none")]
        pub accepted_output_modes: Option<Vec<String>>,
        /// Wait for the task to finish before answering (the default).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub blocking: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub history_length: Option<i32>,
    }

    /// Params of `message/send` and `message/stream`.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct MessageSendParams {
        pub message: Message,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub configuration: Option<MessageSendConfiguration>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
    }

    impl MessageSendParams {
        /// The same request in 1.0's terms (`blocking: false` is
        /// `returnImmediately`).
        pub fn current(&self) -> super::SendMessageRequest {
            super::SendMessageRequest {
                tenant: None,
                message: self.message.current(),
                configuration: self.configuration.as_ref().map(|c| {
                    super::SendMessageConfiguration {
                        accepted_output_modes: c.accepted_output_modes.clone().unwrap_or_default(),
                        history_length: c.history_length,
                        return_immediately: c.blocking.map(|b| !b),
                        task_push_notification_config: None,
                    }
                }),
                metadata: self.metadata.clone(),
            }
        }
    }

    impl Message {
        /// The same message in 1.0's terms.
        pub fn current(&self) -> super::Message {
            super::Message {
                message_id: self.message_id.clone(),
                context_id: self.context_id.clone(),
                task_id: self.task_id.clone(),
                role: match self.role {
                    Role::User => super::Role::User,
                    Role::Agent => super::Role::Agent,
                },
                parts: self.parts.iter().map(Part::current).collect(),
                metadata: self.metadata.clone(),
                ..super::Message::default()
            }
        }
    }

    impl From<&super::Message> for Message {
        fn from(m: &super::Message) -> Message {
            Message {
                kind: "message".to_owned(),
                message_id: m.message_id.clone(),
                context_id: m.context_id.clone(),
                task_id: m.task_id.clone(),
                role: match m.role {
                    super::Role::Agent => Role::Agent,
                    super::Role::User | super::Role::Unspecified => Role::User,
                },
                parts: m.parts.iter().map(Part::from_current).collect(),
                metadata: m.metadata.clone(),
            }
        }
    }

    impl From<&super::TaskStatus> for TaskStatus {
        fn from(s: &super::TaskStatus) -> TaskStatus {
            TaskStatus {
                state: s.state.into(),
                message: s.message.as_ref().map(Message::from),
                timestamp: s.timestamp.clone(),
            }
        }
    }

    impl From<&super::Artifact> for Artifact {
        fn from(a: &super::Artifact) -> Artifact {
            Artifact {
                artifact_id: a.artifact_id.clone(),
                name: a.name.clone(),
                description: a.description.clone(),
                parts: a.parts.iter().map(Part::from_current).collect(),
                metadata: a.metadata.clone(),
            }
        }
    }

    impl From<&super::Task> for Task {
        fn from(t: &super::Task) -> Task {
            Task {
                kind: "task".to_owned(),
                id: t.id.clone(),
                context_id: t.context_id.clone(),
                status: (&t.status).into(),
                artifacts: t.artifacts.iter().map(Artifact::from).collect(),
                history: t.history.iter().map(Message::from).collect(),
                metadata: t.metadata.clone(),
            }
        }
    }

    /// A status update of a stream (`kind: "status-update"`); `final` marks
    /// the last one.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TaskStatusUpdateEvent {
        pub kind: String,
        pub task_id: String,
        pub context_id: String,
        pub status: TaskStatus,
        #[serde(rename = "final")]
        pub is_final: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
    }

    impl From<&super::TaskStatusUpdateEvent> for TaskStatusUpdateEvent {
        fn from(e: &super::TaskStatusUpdateEvent) -> TaskStatusUpdateEvent {
            TaskStatusUpdateEvent {
                kind: "status-update".to_owned(),
                task_id: e.task_id.clone(),
                context_id: e.context_id.clone(),
                status: (&e.status).into(),
                is_final: e.status.state.ends_stream(),
                metadata: e.metadata.clone(),
            }
        }
    }

    /// An artifact update of a stream (`kind: "artifact-update"`).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TaskArtifactUpdateEvent {
        pub kind: String,
        pub task_id: String,
        pub context_id: String,
        pub artifact: Artifact,
        pub append: bool,
        pub last_chunk: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
    }

    impl From<&super::TaskArtifactUpdateEvent> for TaskArtifactUpdateEvent {
        fn from(e: &super::TaskArtifactUpdateEvent) -> TaskArtifactUpdateEvent {
            TaskArtifactUpdateEvent {
                kind: "artifact-update".to_owned(),
                task_id: e.task_id.clone(),
                context_id: e.context_id.clone(),
                artifact: (&e.artifact).into(),
                append: e.append,
                last_chunk: e.last_chunk,
                metadata: e.metadata.clone(),
            }
        }
    }

    /// One item of a 0.3 stream: the object itself, told apart by its
    /// `kind` (written only: a reader looks at `kind` first).
    #[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
    #[serde(untagged)]
    pub enum StreamResponse {
        Task(Task),
        Message(Message),
        StatusUpdate(TaskStatusUpdateEvent),
        ArtifactUpdate(TaskArtifactUpdateEvent),
    }

    impl From<&super::StreamResponse> for StreamResponse {
        fn from(r: &super::StreamResponse) -> StreamResponse {
            match r {
                super::StreamResponse::Task(t) => StreamResponse::Task(t.into()),
                super::StreamResponse::Message(m) => StreamResponse::Message(m.into()),
                super::StreamResponse::StatusUpdate(e) => StreamResponse::StatusUpdate(e.into()),
                super::StreamResponse::ArtifactUpdate(e) => {
                    StreamResponse::ArtifactUpdate(e.into())
                }
            }
        }
    }

    /// Params of `tasks/get`.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TaskQueryParams {
        pub id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub history_length: Option<i32>,
    }

    /// Params of `tasks/cancel`.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TaskIdParams {
        pub id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub metadata: Option<Map<String, Value>>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_send_request_reads_as_the_sdk_writes_it() {
        let req = SendMessageRequest {
            message: Message {
                message_id: "m1".into(),
                role: Role::User,
                parts: vec![Part::data(json!({"topic": "tides"}))],
                metadata: Some(Map::from_iter([("skill".to_owned(), json!("summarise"))])),
                ..Message::default()
            },
            ..SendMessageRequest::default()
        };
        assert_eq!(
            serde_json::to_value(&req).unwrap(),
            json!({"message": {"messageId": "m1", "role": "ROLE_USER",
                "parts": [{"data": {"topic": "tides"}}], "metadata": {"skill": "summarise"}}})
        );
    }

    #[test]
    fn responses_read_with_their_defaults_left_out() {
        let r: SendMessageResponse = serde_json::from_value(json!({"task": {
            "id": "t1", "status": {"state": "TASK_STATE_WORKING"}}}))
        .unwrap();
        let SendMessageResponse::Task(t) = r else {
            panic!("a task")
        };
        assert_eq!(t.status.state, TaskState::Working);
        assert!(t.artifacts.is_empty() && t.context_id.is_empty());
        let s: StreamResponse = serde_json::from_value(json!({"artifactUpdate": {
            "taskId": "t1", "artifact": {"artifactId": "a", "parts": [{"text": "hi"}]}, "append": true}}))
        .unwrap();
        assert!(
            matches!(s, StreamResponse::ArtifactUpdate(a) if a.append && a.artifact.parts[0].text.as_deref() == Some("hi"))
        );
    }

    #[test]
    fn a_card_keeps_what_it_does_not_name() {
        let c: AgentCard = serde_json::from_value(json!({
            "name": "n", "protocolVersion": "0.3.0", "url": "http://x/a2a",
            "capabilities": {"streaming": true},
            "skills": [{"id": "s", "name": "S", "inputSchema": {"type": "object"}}],
            "somethingNew": 1
        }))
        .unwrap();
        assert_eq!(c.protocol_version.as_deref(), Some("0.3.0"));
        assert_eq!(c.skills[0].extra["inputSchema"], json!({"type": "object"}));
        assert_eq!(c.extra["somethingNew"], json!(1));
        assert_eq!(c.capabilities.streaming, Some(true));
    }

    #[test]
    fn the_older_generation_reads_too() {
        let t: v0_3::Task = serde_json::from_value(json!({"kind": "task", "id": "t",
            "status": {"state": "input-required"},
            "artifacts": [{"artifactId": "a", "parts": [{"kind": "data", "data": {"x": 1}}]}]}))
        .unwrap();
        assert_eq!(t.status.state.current(), TaskState::InputRequired);
        assert_eq!(
            t.artifacts[0].parts[0].current().data,
            Some(json!({"x": 1}))
        );
        let odd: v0_3::TaskStatus = serde_json::from_value(json!({"state": "paused"})).unwrap();
        assert_eq!(odd.state, v0_3::TaskState::Unknown);
    }

    #[test]
    fn a_task_is_written_for_the_older_generation() {
        let task = Task {
            id: "s1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state: TaskState::InputRequired,
                ..TaskStatus::default()
            },
            artifacts: vec![Artifact {
                artifact_id: "outputs".into(),
                parts: vec![
                    Part::data(json!({"greet": "hi"})),
                    Part::data(json!(3)),
                    Part::text("hi"),
                ],
                ..Artifact::default()
            }],
            ..Task::default()
        };
        let old = serde_json::to_value(v0_3::Task::from(&task)).unwrap();
        assert_eq!(old["kind"], "task");
        assert_eq!(old["status"]["state"], "input-required");
        let parts = &old["artifacts"][0]["parts"];
        assert_eq!(parts[0], json!({"kind": "data", "data": {"greet": "hi"}}));
        assert_eq!(parts[1]["data"], json!({"value": 3}));
        assert_eq!(parts[2], json!({"kind": "text", "text": "hi"}));
        let update = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "s1".into(),
            status: task.status.clone(),
            ..TaskStatusUpdateEvent::default()
        });
        let old = serde_json::to_value(v0_3::StreamResponse::from(&update)).unwrap();
        assert_eq!(old["kind"], "status-update");
        assert_eq!(old["final"], true);
    }

    #[test]
    fn a_0_3_send_reads_as_its_1_0_twin() {
        let p: v0_3::MessageSendParams = serde_json::from_value(json!({"message": {
            "kind": "message", "messageId": "m", "role": "user", "taskId": "t",
            "parts": [{"kind": "text", "text": "go"}, {"kind": "data", "data": {"topic": "tides"}}],
            "metadata": {"skill": "hello"}}, "configuration": {"blocking": false}}))
        .unwrap();
        let now = p.current();
        assert_eq!(now.message.role, Role::User);
        assert_eq!(now.message.parts[1].data, Some(json!({"topic": "tides"})));
        assert_eq!(now.configuration.unwrap().return_immediately, Some(true));
    }

    #[test]
    fn errors_carry_error_info_in_1_0_and_metadata_in_0_3() {
        let meta = Map::from_iter([("skill".to_owned(), json!("x"))]);
        let e = serde_json::to_value(JsonRpcError::with_info(
            error_code::INVALID_PARAMS,
            "bad",
            meta.clone(),
        ))
        .unwrap();
        assert_eq!(e["data"][0]["@type"], ErrorInfo::TYPE);
        assert_eq!(e["data"][0]["reason"], "INVALID_PARAMS");
        assert_eq!(e["data"][0]["metadata"]["skill"], "x");
        let old = v0_3::error(error_code::INVALID_PARAMS, "bad", meta);
        assert_eq!(old.data, Some(json!({"skill": "x"})));
    }
}
