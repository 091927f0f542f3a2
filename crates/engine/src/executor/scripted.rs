//! JavaScript tools of an agent file (`## Tools`): one call runs in a fresh
//! sandbox (a worker process on Linux, see [`agentfile_tools::script`]) driven from a
//! blocking thread, and each host function it calls (`read`,
//! `write`, `fetch`, `sh`, `tool`, `env`) comes back here to be judged by the
//! agent's abilities and then by the policy gate, as the built-in tool it
//! stands for, with its own `tool_call` / `policy_denied` / `tool_result`
//! events. A refusal is an exception in the script, never a run failure.
//!
//! A call is bounded by the script limits ([`script::Limits`]: CPU time, memory,
//! host calls, wall-clock time); a cancelled run (`--timeout`, a budget, a
//! client's cancel) stops the script at once, its worker killed.

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::{RunCx, Stop};
use agentfile_plan::agent::AgentCard;
use agentfile_session::events::Scope;
use agentfile_tools::ToolOutput;
use agentfile_tools::script::{self, HostError, HostFn, ScriptError};
use agentfile_wire::events::EventBody;

/// One host function call, sent from the script's thread.
struct HostRequest {
    func: HostFn,
    args: Value,
    reply: oneshot::Sender<Result<Value, HostError>>,
}

/// The script's side of the bridge: blocks its thread until the run answers.
struct ChannelHost {
    tx: mpsc::Sender<HostRequest>,
}

impl script::Host for ChannelHost {
    fn call(&self, func: HostFn, args: Value) -> Result<Value, HostError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .blocking_send(HostRequest { func, args, reply })
            .map_err(|_| HostError::from("the run has stopped"))?;
        rx.blocking_recv()
            .unwrap_or_else(|_| Err("the run has stopped".into()))
    }

    /// The run dropped its end: it stopped, and nothing waits for the script.
    fn cancelled(&self) -> bool {
        self.tx.is_closed()
    }
}

impl RunCx<'_> {
    /// Run the agent's JavaScript tool `name` (recorded as one tool call with
    /// nested host calls).
    pub(super) async fn script_call(
        &self,
        scope: &Scope,
        card: &AgentCard,
        id: &str,
        name: &str,
        args: Value,
    ) -> Result<ToolOutput, Stop> {
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        self.check_store()?;
        self.budget.record_tool_call();
        self.emit(
            scope,
            EventBody::ToolCall {
                id: id.to_owned(),
                tool: name.to_owned(),
                arguments: args.clone(),
            },
        );
        let started = std::time::Instant::now();
        let output = self.run_script(scope, card, id, name, args).await?;
        self.defer(
            scope,
            EventBody::ToolResult {
                id: id.to_owned(),
                tool: name.to_owned(),
                content: output.content.clone(),
                is_error: output.is_error,
                duration_ms: started.elapsed().as_millis() as u64,
            },
        );
        Ok(output)
    }

    async fn run_script(
        &self,
        scope: &Scope,
        card: &AgentCard,
        id: &str,
        name: &str,
        args: Value,
    ) -> Result<ToolOutput, Stop> {
        let Some(code) = card.script.as_ref().map(|s| s.code.clone()) else {
            return Ok(ToolOutput::error(format!(
                "agent `{}` has no JavaScript tools",
                card.title
            )));
        };
        let (tx, mut rx) = mpsc::channel::<HostRequest>(1);
        let tool = name.to_owned();
        let mut job = tokio::task::spawn_blocking(move || {
            script::call(
                &code,
                &tool,
                args,
                std::rc::Rc::new(ChannelHost { tx }),
                &script::Limits::default(),
            )
        });
        let mut n = 0u32;
        let result = loop {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(self.stop_for_cancel()),
                done = &mut job => break done,
                Some(req) = rx.recv() => {
                    n += 1;
                    let answer = self.host_call(scope, card, &format!("{id}.{n}"), req.func, req.args).await?;
                    let _ = req.reply.send(answer);
                }
            }
        };
        Ok(match result {
            Ok(Ok(value)) => ToolOutput::ok(match value {
                Value::String(s) => s,
                other => other.to_string(),
            }),
            Ok(Err(e)) => ToolOutput::error(describe(name, &e)),
            Err(join) => ToolOutput::error(format!("tool `{name}` crashed: {join}")),
        })
    }

    /// One host function: abilities (judged by what the call does, see
    /// [`super::abilities`]), then the policy gate through the tool it stands
    /// for; `env` is answered from the bash tool's environment.
    async fn host_call(
        &self,
        scope: &Scope,
        card: &AgentCard,
        id: &str,
        func: HostFn,
        args: Value,
    ) -> Result<Result<Value, HostError>, Stop> {
        let text = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let (tool, tool_args) = match func {
            HostFn::Read => ("read".to_owned(), json!({ "path": text("path") })),
            HostFn::Write => (
                "write".to_owned(),
                json!({ "path": text("path"), "content": text("content") }),
            ),
            HostFn::Fetch => ("web_fetch".to_owned(), json!({ "url": text("url") })),
            HostFn::Sh => ("bash".to_owned(), json!({ "command": text("command") })),
            HostFn::Tool => (
                text("name"),
                args.get("args").cloned().unwrap_or_else(|| json!({})),
            ),
            HostFn::Env => ("env".to_owned(), json!({ "name": text("name") })),
        };
        if let Some(abilities) = &card.abilities {
            let needs = super::abilities::needs(func, &tool, &tool_args);
            let verdict = if needs.line.is_none() {
                super::abilities::judge(abilities, &needs)
            } else {
                // The shell analysis runs in a worker process: off the async
                // threads.
                let abilities = abilities.clone();
                tokio::task::spawn_blocking(move || super::abilities::judge(&abilities, &needs))
                    .await
                    .unwrap_or(Err(super::abilities::Refused::Unchecked))
            };
            if let Err(reason) = verdict {
                let rule = format!("abilities of {}", card.file);
                self.emit(
                    scope,
                    EventBody::PolicyDenied {
                        id: id.to_owned(),
                        tool: func.name().to_owned(),
                        rule: rule.clone(),
                        reason: reason.to_string(),
                    },
                );
                return Ok(Err(HostError(format!("denied ({rule}): {reason}"))));
            }
        }
        if func == HostFn::Env {
            return self.env_call(scope, id, &text("name")).await;
        }
        if func == HostFn::Tool && (tool.is_empty() || card.script_tool(&tool).is_some()) {
            return Ok(Err(HostError(format!(
                "`tool(\"{tool}\")`: call a built-in or MCP tool; the agent's own JavaScript tools call each other directly"
            ))));
        }
        let (output, denied) = self.gated_call(scope, id, &tool, tool_args).await?;
        Ok(match denied {
            Some(d) => Err(HostError(format!(
                "denied by policy ({}): {}",
                d.rule, d.reason
            ))),
            None if output.is_error => Err(HostError(output.content)),
            None => Ok(Value::String(output.content)),
        })
    }

    /// `env(name)`: what the bash tool's environment holds, by the one
    /// secrets rule ([`agentfile_tools::secrets`]), recorded like every host
    /// call (`tool_call`, `policy_denied` when refused, `tool_result`; the
    /// value shown is one a shell would be given anyway).
    async fn env_call(
        &self,
        scope: &Scope,
        id: &str,
        name: &str,
    ) -> Result<Result<Value, HostError>, Stop> {
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        self.check_store()?;
        self.budget.record_tool_call();
        self.emit(
            scope,
            EventBody::ToolCall {
                id: id.to_owned(),
                tool: "env".to_owned(),
                arguments: json!({ "name": name }),
            },
        );
        let started = std::time::Instant::now();
        let (answer, content, is_error) = match self.tools.env_var(name) {
            Ok(Some(v)) => (Ok(Value::String(v.clone())), v, false),
            Ok(None) => (Ok(Value::Null), "null".to_owned(), false),
            Err(d) => {
                self.emit(
                    scope,
                    EventBody::PolicyDenied {
                        id: id.to_owned(),
                        tool: "env".to_owned(),
                        rule: d.rule.clone(),
                        reason: d.reason.clone(),
                    },
                );
                let m = format!("denied ({}): {}", d.rule, d.reason);
                (Err(HostError(m.clone())), m, true)
            }
        };
        self.defer(
            scope,
            EventBody::ToolResult {
                id: id.to_owned(),
                tool: "env".to_owned(),
                content,
                is_error,
                duration_ms: started.elapsed().as_millis() as u64,
            },
        );
        Ok(answer)
    }

    /// The agent's `required.startup` tool, before its first turn: a failure
    /// stops the goal with the tool's error.
    pub(super) async fn startup(&self, scope: &Scope, card: &AgentCard) -> Result<(), Stop> {
        let Some(tool) = &card.startup else {
            return Ok(());
        };
        let id = format!("startup:{tool}");
        let out = self.script_call(scope, card, &id, tool, json!({})).await?;
        if out.is_error {
            return Err(Stop::Failed(format!(
                "agent `{}` did not start: its startup tool `{tool}` failed: {}",
                card.file, out.content
            )));
        }
        Ok(())
    }
}

/// A script failure in words for the model.
fn describe(name: &str, e: &ScriptError) -> String {
    format!("tool `{name}` failed: {e}")
}
