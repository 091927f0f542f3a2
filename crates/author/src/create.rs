//! `agentfile create` (and the MCP `create` tool) around one run of the
//! built-in generator: [`begin`] picks the name and run id, makes
//! `artifacts/<name>/<run-id>/` with its manifest and gives the run's
//! inputs and a [`ManifestSink`]; the caller runs the generator like any
//! workflow (its own sinks, approver and cancellation); [`finish`] validates
//! what it wrote and records the verdict in the manifest.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentfile_frontend::{self as frontend, Options};

use super::generate::{self as g, Manifest, ManifestSink};
use super::{AuthorError, Exists};

/// A generation run, set up.
pub struct Begun {
    pub name: String,
    pub run_id: String,
    /// `artifacts/<name>/<run-id>`, absolute.
    pub dir: PathBuf,
    /// The same, relative to the workspace, with `/`.
    pub rel: String,
    /// The generator's workflow.yaml, materialized under `.agentfile/`.
    pub workflow: PathBuf,
    /// Keeps `manifest.json` as the run's events arrive.
    pub sink: Arc<ManifestSink>,
    description: String,
}

impl Begun {
    /// The generator run's inputs: the request and its root.
    pub fn inputs(&self) -> Vec<(String, String)> {
        vec![
            (
                "WORKFLOW_REQUEST".to_owned(),
                format!(
                    "Create a workflow named {}. {}",
                    self.name,
                    self.description.trim()
                ),
            ),
            (
                agentfile_workflow_yaml::ROOT_FIELD.to_owned(),
                self.dir.display().to_string(),
            ),
        ]
    }
}

/// What a generation run made.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Created {
    pub name: String,
    pub run_id: String,
    /// `artifacts/<name>/<run-id>`.
    pub artifacts: String,
    /// The manifest's status (`validated` when promotable).
    pub status: String,
    /// The generated workflow validated without errors.
    pub valid: bool,
    /// Its problems, `03-workflow.yaml:line:col: code: message`.
    pub diagnostics: Vec<String>,
}

/// Set up a generation run in the workspace `ws`.
pub fn begin(ws: &Path, description: &str, name: Option<&str>) -> Result<Begun, AuthorError> {
    if description.trim().is_empty() {
        return Err(AuthorError::NoDescription);
    }
    let name = match name {
        Some(n) => {
            g::check_name(n)?;
            n.to_owned()
        }
        None => g::slug(description),
    };
    if ws.join("workflows").join(&name).exists() {
        return Err(Exists::Name { name }.into());
    }
    // Run ids are seconds: wait for a free one rather than share a folder.
    let mut tries = 0;
    let (run_id, dir) = loop {
        let id = g::run_id_now();
        let dir = ws.join("artifacts").join(&name).join(&id);
        if !dir.exists() {
            break (id, dir);
        }
        tries += 1;
        if tries > 3 {
            return Err(Exists::RunDir { dir }.into());
        }
        std::thread::sleep(std::time::Duration::from_millis(1000));
    };
    std::fs::create_dir_all(&dir).map_err(|source| AuthorError::Io {
        what: "create",
        path: dir.clone(),
        source,
    })?;
    let workflow = g::materialize(&ws.join(".agentfile").join("generator"))?;
    let mut manifest = Manifest::new(&name, &run_id, &g::generator_steps());
    manifest.save(&dir)?;
    Ok(Begun {
        rel: format!("artifacts/{name}/{run_id}"),
        sink: Arc::new(ManifestSink::new(dir.clone(), manifest)),
        name,
        run_id,
        dir,
        workflow,
        description: description.to_owned(),
    })
}

/// After the generator run: on success validate the workflow it wrote (a
/// staged copy, laid out as `workflows/<name>/`), and record the verdict.
/// `status` is the run's (`completed`, `failed`, …), `error` why it stopped.
pub fn finish(b: &Begun, ws: &Path, status: &str, error: Option<&str>) -> Created {
    let mut m = b.sink.manifest();
    let mut diagnostics = Vec::new();
    let mut valid = false;
    if status == "completed" {
        m.start_phase(g::VALIDATION);
        let _ = m.save(&b.dir);
        let tmp = ws
            .join(".agentfile")
            .join("tmp")
            .join(format!("create-{}-{}", b.name, b.run_id));
        let stage = tmp.join("workflows").join(&b.name);
        let _ = std::fs::remove_dir_all(&tmp);
        match g::stage_workflow(&b.dir, &stage) {
            Err(e) => {
                let e = e.to_string();
                diagnostics.push(e.clone());
                m.fail(g::VALIDATION, Some("generate-config"), &e);
            }
            Ok(()) => {
                let an = frontend::analyze(&stage.join("workflow.yaml"), Options::default());
                for d in &an.diagnostics {
                    // Named as the run folder has them: the staged copy goes.
                    let at = d
                        .span
                        .map(|sp| {
                            let f = an.sources.file(sp.file);
                            let (l, c) = f.line_col(sp.start);
                            let file = match f.path.file_name().and_then(|n| n.to_str()) {
                                Some("workflow.yaml") => "03-workflow.yaml".to_owned(),
                                _ => f.path.display().to_string(),
                            };
                            format!("{file}:{l}:{c}: ")
                        })
                        .unwrap_or_default();
                    diagnostics.push(format!("{at}{}: {}", d.code, d.message));
                }
                if let Some(p) = &an.plan
                    && p.name != b.name
                {
                    diagnostics.push(format!(
                        "03-workflow.yaml: the workflow is named `{}`, not `{}`",
                        p.name, b.name
                    ));
                }
                valid = an.errors() == 0 && an.plan.as_ref().is_some_and(|p| p.name == b.name);
                if valid {
                    m.complete_phase(g::VALIDATION);
                } else {
                    m.fail(
                        g::VALIDATION,
                        Some("generate-config"),
                        &format!(
                            "the generated workflow is invalid: {}",
                            diagnostics.join("; ")
                        ),
                    );
                }
            }
        }
        let _ = std::fs::remove_dir_all(&tmp);
    } else if m.status != "failed" {
        m.fail(
            g::GENERATION,
            None,
            error.unwrap_or("the generation run did not complete"),
        );
    }
    if let Err(e) = m.save(&b.dir) {
        diagnostics.push(format!("the manifest could not be saved: {e}"));
    }
    Created {
        name: b.name.clone(),
        run_id: b.run_id.clone(),
        artifacts: b.rel.clone(),
        status: m.status.clone(),
        valid,
        diagnostics,
    }
}
