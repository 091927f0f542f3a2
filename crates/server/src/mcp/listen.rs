//! `subscriptions/listen` (2026-07-28, SEP-2575): the one request through
//! which a stateless client hears list changes.
//!
//! The client names the notifications it wants; the server acknowledges the
//! subset it will send (`notifications/subscriptions/acknowledged`, the first
//! message of the subscription) and tags each notification with
//! `_meta["io.modelcontextprotocol/subscriptionId"]`, the JSON-RPC id of the
//! listen request. Over Streamable HTTP they ride that request's response
//! stream ([`super::http`]). Nothing the client did not ask for is sent.
//!
//! Changes come from one [`Hub`] per process: the workspace scanner (tool
//! list) and an embedder's tools ([`super::ToolHost::tools_changed`]).

use serde_json::{Value, json};
use tokio::sync::broadcast;

/// The `_meta` key of every message of a subscription.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The request's method.
pub const METHOD: &str = "subscriptions/listen";

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

/// Where the changes of one server process are announced.
#[derive(Clone)]
pub struct Hub {
    tx: broadcast::Sender<Change>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            tx: broadcast::channel(64).0,
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
}

/// What this server agreed to send on one subscription.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Honoured {
    pub tools: bool,
}

impl Honoured {
    /// The subset of the requested notifications (`params.notifications`)
    /// this server sends: the tool list only (its one resource never changes, and
    /// its prompt list does not change while it runs).
    pub fn of(params: &Value) -> Honoured {
        let asked = &params["notifications"];
        Honoured {
            tools: asked["toolsListChanged"] == Value::Bool(true),
        }
    }

    pub fn wants(self, change: Change) -> bool {
        match change {
            Change::Tools => self.tools,
        }
    }

    fn as_json(self) -> Value {
        let mut o = serde_json::Map::new();
        if self.tools {
            o.insert("toolsListChanged".into(), Value::Bool(true));
        }
        Value::Object(o)
    }
}

/// The acknowledgement that opens subscription `id`.
pub fn acknowledgement(id: &Value, honoured: Honoured) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_was_asked_and_understood_is_honoured_and_everything_is_tagged() {
        let h = Honoured::of(
            &json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}}),
        );
        assert!(h.wants(Change::Tools));
        let ack = acknowledgement(&json!(7), h);
        assert_eq!(
            ack["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], 7);
        let none = Honoured::of(&json!({"notifications": {"promptsListChanged": true}}));
        assert!(!none.wants(Change::Tools));
        assert_eq!(
            acknowledgement(&json!("a"), none)["params"]["notifications"],
            json!({})
        );
        let n = notification(&json!("a"), Change::Tools);
        assert_eq!(n["method"], "notifications/tools/list_changed");
        assert_eq!(n["params"]["_meta"][SUBSCRIPTION_ID], "a");
    }
}
