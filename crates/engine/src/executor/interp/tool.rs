//! Tool and bound-command nodes: one call through the policy gate; the value is
//! the tool's output, or a command's stdout as its typed result holds it (the
//! text report the model reads is never parsed back).

use super::*;

impl<'a> RunCx<'a> {
    pub(super) async fn run_tool(
        &self,
        scope: &Scope,
        path: &str,
        tool: &str,
        args: Value,
    ) -> Result<Outcome, Stop> {
        let args = match args {
            Value::Object(_) => args,
            Value::Null => json!({}),
            other => {
                return Err(Stop::Failed(format!(
                    "step `{path}`: the arguments of `{tool}` must be an object, not {}",
                    kind_of(&other)
                )));
            }
        };
        let id = format!("node:{path}");
        let (output, denied) = self.gated_call(scope, &id, tool, args).await?;
        if let Some(d) = denied {
            return Err(Stop::Denied(format!(
                "step `{path}`: `{tool}` was denied by the policy ({}): {}",
                d.rule, d.reason
            )));
        }
        // A deterministic step's command that exits non-zero failed, even
        // though a model would just read the exit code.
        let command_failed = output.command.as_ref().is_some_and(|c| !c.succeeded());
        if output.is_error || command_failed {
            return Err(Stop::Failed(format!(
                "step `{path}`: `{tool}` failed: {}",
                agentfile_config::text::truncate(&output.content, 2000)
            )));
        }
        let value = match &output.command {
            Some(c) => command_value(c),
            None => parse_output(&output.content),
        };
        Ok(Outcome {
            value: Arc::new(value),
            tool_calls: 1,
            ..Outcome::default()
        })
    }

    pub(super) async fn run_command(
        &self,
        scope: &Scope,
        path: &str,
        tool: &str,
        argv: &[String],
        args: Value,
    ) -> Result<Outcome, Stop> {
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        self.check_store()?;
        self.budget.record_tool_call();
        let id = format!("node:{path}");
        self.emit(
            scope,
            EventBody::ToolCall {
                id: id.clone(),
                tool: tool.to_owned(),
                arguments: args.clone(),
            },
        );
        if let Some(replay) = &self.replay {
            return self.replayed_step(scope, replay, path, &id, tool, &args);
        }
        let input = serde_json::to_vec(&args).unwrap_or_default();
        let r = self.tools.run_command(argv, input, &self.tool_cx).await;
        if let Some(d) = &r.denied {
            self.emit(
                scope,
                EventBody::PolicyDenied {
                    id: id.clone(),
                    tool: tool.to_owned(),
                    rule: d.rule.clone(),
                    reason: d.reason.clone(),
                },
            );
        }
        self.emit(
            scope,
            EventBody::ToolResult {
                id,
                tool: tool.to_owned(),
                content: r.output.content.clone(),
                is_error: r.output.is_error,
                duration_ms: r.duration.as_millis() as u64,
            },
        );
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        if let Some(d) = r.denied {
            return Err(Stop::Denied(format!(
                "step `{path}`: `{tool}` (`{}`) was denied by the policy ({}): {}",
                argv.join(" "),
                d.rule,
                d.reason
            )));
        }
        let Some(command) = r
            .output
            .command
            .as_ref()
            .filter(|c| c.succeeded() && !r.output.is_error)
        else {
            return Err(Stop::Failed(format!(
                "step `{path}`: `{tool}` failed: {}",
                agentfile_config::text::truncate(&r.output.content, 2000)
            )));
        };
        Ok(Outcome {
            value: Arc::new(command_value(command)),
            tool_calls: 1,
            ..Outcome::default()
        })
    }
}

/// What a command printed on stdout, as a value: JSON when it is JSON, else
/// the text without its final newlines.
pub(super) fn command_value(c: &agentfile_tools::CommandOutcome) -> Value {
    parse_output(c.stdout.trim_end_matches('\n'))
}

/// A tool's text as a value: JSON when it is JSON, else the text.
pub(super) fn parse_output(content: &str) -> Value {
    let t = content.trim_start();
    if t.starts_with(['{', '['])
        && let Ok(v) = serde_json::from_str(content)
    {
        return v;
    }
    Value::String(content.to_owned())
}

impl RunCx<'_> {
    /// A command or script step of a replay: its recorded result and output,
    /// nothing run.
    pub(super) fn replayed_step(
        &self,
        scope: &Scope,
        replay: &super::super::replay::ReplayJournal,
        path: &str,
        id: &str,
        tool: &str,
        args: &Value,
    ) -> Result<Outcome, Stop> {
        let (content, is_error) = replay
            .result(scope, id, tool, args)
            .map_err(|d| Stop::Failed(d.to_string()))?;
        self.emit(
            scope,
            EventBody::ToolResult {
                id: id.to_owned(),
                tool: tool.to_owned(),
                content,
                is_error,
                duration_ms: 0,
            },
        );
        let value = replay
            .output(path)
            .map_err(|d| Stop::Failed(d.to_string()))?;
        Ok(Outcome {
            value: Arc::new(value),
            tool_calls: 1,
            ..Outcome::default()
        })
    }
}
