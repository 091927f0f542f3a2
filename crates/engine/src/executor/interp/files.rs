//! File nodes: `read_files` and `write_file`, through the policy like the file
//! tools.

use super::*;

impl<'a> RunCx<'a> {
    /// A `read_files` node: the files' text, each in a block naming it.
    pub(super) fn run_read_files(
        &self,
        scope: &Scope,
        path: &str,
        paths: &[String],
    ) -> Result<Outcome, Stop> {
        self.check_store()?;
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        let text = crate::executor::artifacts::read(self.tools, &self.root, paths)
            .map_err(|e| self.file_stop(scope, path, e))?;
        Ok(Outcome {
            value: Arc::new(Value::String(text)),
            ..Outcome::default()
        })
    }

    /// A `write_file` node: one file, or a folder of the files a content
    /// block names; an `artifact` event for each.
    pub(super) fn run_write_file(
        &self,
        scope: &Scope,
        path: &str,
        file: &str,
        content: Option<&agentfile_plan::expr::Template>,
        env: &Env,
    ) -> Result<Outcome, Stop> {
        self.check_store()?;
        if self.cancel.is_cancelled() {
            return Err(self.stop_for_cancel());
        }
        let text = content.map(|c| c.render(env));
        let written = match text {
            Some(t) if !file.ends_with('/') => {
                crate::executor::artifacts::write(self.tools, &self.root, file, &t).map(|w| vec![w])
            }
            t => crate::executor::artifacts::folder(self.tools, &self.root, file, t.as_deref()),
        }
        .map_err(|e| self.file_stop(scope, path, e))?;
        let files: Vec<Value> = written
            .iter()
            .map(|w| json!({"path": w.path, "bytes": w.bytes}))
            .collect();
        for w in written {
            self.emit(
                scope,
                EventBody::Artifact {
                    path: w.path,
                    bytes: w.bytes,
                    sha256: w.sha256,
                },
            );
        }
        Ok(Outcome {
            value: Arc::new(json!({"path": file, "files": files})),
            ..Outcome::default()
        })
    }

    /// A file operation of a node stopped: a denial is recorded as a
    /// `policy_denied` event, like a model's denied call.
    pub(super) fn file_stop(
        &self,
        scope: &Scope,
        path: &str,
        e: crate::executor::artifacts::FileError,
    ) -> Stop {
        if let crate::executor::artifacts::FileError::Denied {
            tool, rule, reason, ..
        } = &e
        {
            self.emit(
                scope,
                EventBody::PolicyDenied {
                    id: format!("node:{path}"),
                    tool: (*tool).to_owned(),
                    rule: rule.clone(),
                    reason: reason.clone(),
                },
            );
        }
        match e.into_stop() {
            Stop::Denied(m) => Stop::Denied(format!("step `{path}`: {m}")),
            Stop::Failed(m) => Stop::Failed(format!("step `{path}`: {m}")),
            other => other,
        }
    }
}
