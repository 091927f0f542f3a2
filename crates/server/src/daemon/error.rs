//! Why the daemon could not do what it was asked: [`DaemonError`], whose
//! text is what the CLI prints, the RPC error carries and a NATS requester
//! reads in `error`.

use std::path::PathBuf;

use agentfile_engine::executor::BindError;
use agentfile_session::StoreError;
use agentfile_wire::rpc::RpcError;

use super::nats::SubscribeFailed;
use super::registry::DefaultsError;

/// A daemon that could not start, or a fire that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("workspace {}: {source}", path.display())]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The gateway, its config or its store could not be opened: its message.
    #[error("{}", .0.message)]
    Gateway(RpcError),
    #[error(transparent)]
    Defaults(#[from] DefaultsError),
    #[error("no trigger `{0}` is registered; `agentfile triggers list` shows them")]
    UnknownTrigger(String),
    #[error("trigger `{trigger}` is refused: {why}")]
    Refused { trigger: String, why: String },
    #[error("the daemon is shutting down and takes no more fires")]
    ShuttingDown,
    #[error("cannot record the fire: {0}")]
    Record(StoreError),
    #[error("the inputs do not fit workflow `{workflow}` ({}): {why}", path.display())]
    Unfit {
        workflow: String,
        path: PathBuf,
        why: Unfit,
    },
    #[error(transparent)]
    Payload(#[from] NotAnObject),
    /// One subscribed trigger of an event, and why it did not fire.
    #[error("{trigger}: {source}")]
    Trigger {
        trigger: String,
        source: Box<DaemonError>,
    },
    #[error("[daemon] webhooks = {addr:?}: cannot listen there: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    /// The listener's own address could not be read.
    #[error("{0}")]
    Bound(std::io::Error),
    #[error(transparent)]
    Nats(#[from] SubscribeFailed),
}

/// How inputs do not fit a trigger's workflow.
#[derive(Debug, thiserror::Error)]
pub enum Unfit {
    #[error("`{key}`: expected a string, number or boolean, not {kind}")]
    NotText { key: String, kind: &'static str },
    #[error(transparent)]
    Bind(#[from] BindError),
}

/// A payload that is not a JSON object (nor null): `kind` says what it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the payload must be a JSON object (its fields are the workflow's inputs), not {kind}")]
pub struct NotAnObject {
    pub kind: &'static str,
}
