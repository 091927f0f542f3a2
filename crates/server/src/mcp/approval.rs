//! Human approval of supervised goals through the MCP client: an
//! `elicitation/create` form (approve yes/no, an optional note) where the
//! client declared form elicitation, else the `approve` tool.
//!
//! The engine asks this [`Approver`] first and, when it answers
//! [`Approval::Unavailable`] (no elicitation, the user dismissed the form, the
//! client is gone), waits for the `approve` tool instead. [`Phase`] tells the
//! `run` tool which of the two is happening: while the form is open the call
//! keeps waiting; once the decision must come through `approve`, the call
//! returns so the model can ask the user and call it (a model blocked in its
//! own `run` call could never call `approve`).

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, ProtocolVersion};
use rmcp::service::{Peer, RequestContext};
use serde_json::json;
use tokio::sync::watch;

use super::Client;
use agentfile_engine::executor::{Approval, ApprovalRequest, Approver};

/// Where a run stands with approvals, as the `run` tool needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not waiting for a human (or not any more).
    Running,
    /// The approval form is open in the client.
    Asking,
    /// Waiting for the `approve` tool.
    NeedsApproveTool,
}

/// Asks the user through the client's elicitation form, or says the decision
/// must come through the `approve` tool.
pub struct McpApprover {
    pub client: Arc<Client>,
    /// The peer of the call that started the run (per request: a 2026-07-28
    /// client has no connection-wide peer info).
    pub peer: Option<Peer<RoleServer>>,
    /// Whether that call's client declared form elicitation and speaks a
    /// revision where the server may send `elicitation/create`.
    pub can_elicit: bool,
    pub phase: Arc<watch::Sender<Phase>>,
}

/// Whether the client of `ctx` can be sent an `elicitation/create` form: it
/// declared form elicitation, on a revision before 2026-07-28 (which has no
/// server-to-client requests).
pub fn can_elicit(ctx: &RequestContext<RoleServer>) -> bool {
    let before_2026 = ctx
        .protocol_version()
        .is_none_or(|v| v < ProtocolVersion::V_2026_07_28);
    before_2026
        && ctx.client_capabilities().is_some_and(|c| {
            c.elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some() || e.url.is_none())
        })
}

impl McpApprover {
    fn unavailable(&self, why: impl Into<String>) -> Approval {
        self.phase.send_replace(Phase::NeedsApproveTool);
        Approval::Unavailable(why.into())
    }
}

impl Approver for McpApprover {
    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let peer = match &self.peer {
                Some(p) if !self.client.input_closed() => p,
                _ => return self.unavailable("the MCP client is not connected"),
            };
            if !self.can_elicit {
                return self.unavailable(
                    "the MCP client cannot show an approval form (no elicitation); call the `approve` tool",
                );
            }
            let outcome = req
                .outcome
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("");
            let message = if req.goal.is_empty() {
                // An approval step of a workflow: no goal, the step asks.
                format!(
                    "agentfile: approve step `{}` (session {})?\n\n{outcome}",
                    req.step, req.session_id
                )
            } else {
                format!(
                    "agentfile: approve goal `{}` (step `{}`, session {}) before it runs?\n\n{outcome}",
                    req.goal, req.step, req.session_id
                )
            };
            let schema = json!({
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Approve",
                        "description": "Go ahead (unchecked: reject; the workflow decides what a rejection does)",
                        "default": true
                    },
                    "note": {
                        "type": "string",
                        "title": "Note",
                        "description": "Recorded with your decision (optional)"
                    }
                },
                "required": ["approve"]
            });
            let schema = match schema {
                serde_json::Value::Object(o) => ElicitationSchema::from_json_schema(o),
                _ => unreachable!("a JSON object literal"),
            };
            let requested_schema = match schema {
                Ok(s) => s,
                Err(e) => return self.unavailable(format!("cannot build the approval form: {e}")),
            };
            self.phase.send_replace(Phase::Asking);
            let ask = peer.create_elicitation(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema,
            });
            let answer = tokio::select! {
                a = ask => a,
                _ = self.client.io.input_closed.cancelled() => {
                    return self.unavailable("the MCP client closed the connection");
                }
            };
            match answer {
                Ok(r) if r.action == ElicitationAction::Accept => {
                    let content = r.content.unwrap_or_default();
                    let note = content
                        .get("note")
                        .and_then(|n| n.as_str())
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned);
                    let approve = match content.get("approve") {
                        Some(serde_json::Value::Bool(b)) => *b,
                        Some(serde_json::Value::String(s)) => {
                            matches!(s.trim().to_lowercase().as_str(), "true" | "yes" | "y")
                        }
                        _ => {
                            return self.unavailable(
                                "the approval form came back without a decision; call the `approve` tool",
                            );
                        }
                    };
                    self.phase.send_replace(Phase::Running);
                    let note = note.or_else(|| Some("answered in the MCP client".to_owned()));
                    if approve {
                        Approval::Approved(note)
                    } else {
                        Approval::Rejected(note)
                    }
                }
                Ok(_) => self.unavailable(
                    "the user dismissed the approval form; ask them, then call the `approve` tool",
                ),
                Err(e) => self.unavailable(format!(
                    "the approval form failed ({e}); call the `approve` tool"
                )),
            }
        })
    }
}
