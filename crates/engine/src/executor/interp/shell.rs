//! A shell node: a declared script run the way the bash tool runs a command.

use super::*;

impl<'a> RunCx<'a> {
    pub(super) async fn run_shell(
        &self,
        scope: &Scope,
        path: &str,
        script: &str,
        interpreter: &str,
        args: &[String],
        vars: &[(String, String)],
    ) -> Result<Outcome, Stop> {
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        self.check_store()?;
        let id = format!("node:{path}");
        let arguments = json!({"script": script, "args": args});
        self.emit(
            scope,
            EventBody::ToolCall {
                id: id.clone(),
                tool: "shell".into(),
                arguments: arguments.clone(),
            },
        );
        if let Some(replay) = &self.replay {
            return self.replayed_step(scope, replay, path, &id, "shell", &arguments);
        }
        let file = self.root.join(script);
        let r = self
            .tools
            .run_script(
                agentfile_tools::Script {
                    path: &file,
                    interpreter,
                    args,
                    env: vars,
                },
                &self.tool_cx,
            )
            .await;
        self.emit(
            scope,
            EventBody::ToolResult {
                id,
                tool: "shell".into(),
                content: r.output.content.clone(),
                is_error: r.output.is_error,
                duration_ms: r.duration.as_millis() as u64,
            },
        );
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        let Some(command) = r
            .output
            .command
            .as_ref()
            .filter(|c| c.succeeded() && !r.output.is_error)
        else {
            return Err(Stop::Failed(format!(
                "step `{path}`: script `{script}` failed: {}",
                agentfile_config::text::truncate(&r.output.content, 2000)
            )));
        };
        // Like a tool's: JSON when the script printed JSON, else its text.
        Ok(Outcome {
            value: Arc::new(command_value(command)),
            ..Outcome::default()
        })
    }
}
