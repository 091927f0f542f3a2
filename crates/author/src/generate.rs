//! `agentfile create` / `promote`: the generation run's manifest, the built-in
//! generator workflow, and promotion (CONTRACT §10).
//!
//! A generation run lives in `artifacts/<name>/<run-id>/`: the generator
//! workflow (embedded in the binary, see [`GENERATOR_FILES`]) runs with that
//! folder as its workflow root, each step leaving its numbered artifact
//! there, while [`ManifestSink`] keeps `manifest.json` in step with the run's
//! events. [`promote`] then copies the generated package to
//! `workflows/<name>/` and archives the run under `outputs/`.
//!
//! This module does not run anything itself: the executor drives the
//! generator and reports through events; validation of the generated
//! `03-workflow.yaml` belongs to the workflow.yaml front end.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use agentfile_session::events::EventSink;
use agentfile_session::file::write_atomic;
use agentfile_wire::events::Event;

use super::{AuthorError, BundledSchemaError, Exists, NotPromotable};

/// The Agentfile spec version written into manifests.
pub const SPEC_VERSION: &str = "1.0";
/// The manifest's `generator` field.
pub const GENERATOR: &str = "agentfile create";
pub const MANIFEST_FILE: &str = "manifest.json";
pub const STATUS_FILE: &str = "workflow_status.json";

/// Phase names, as `manifest.json` spells them.
pub const GENERATION: &str = "generation";
pub const VALIDATION: &str = "validation";
pub const PROMOTION: &str = "promotion";
pub const ARCHIVAL: &str = "archival";

/// Longest name `--name` accepts: it becomes a folder name in three places.
pub const MAX_NAME_LEN: usize = 64;

const MANIFEST_SCHEMA: &str = include_str!("schemas/manifest.schema.json");

// ---------------------------------------------------------------------------
// Time

/// Now, as the run id of a new generation run: `YYYY-MM-DDTHH-MM-SS`, UTC
/// (sortable, and safe as a folder name everywhere).
pub fn run_id_now() -> String {
    run_id_of(&timestamp_now())
}

/// Now, as manifests write times: `YYYY-MM-DDTHH:MM:SSZ`.
pub fn timestamp_now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

fn run_id_of(timestamp: &str) -> String {
    timestamp.trim_end_matches('Z').replace(':', "-")
}

/// An event's RFC 3339 time at the manifest's precision; now when it does
/// not parse, so a malformed time never makes the manifest invalid.
fn seconds(ts: &str) -> String {
    humantime::parse_rfc3339(ts)
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_else(|_| timestamp_now())
}

// ---------------------------------------------------------------------------
// Names

/// Words that say little about what a workflow does; dropped from a slug
/// unless nothing else is left.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "build", "by", "can",
    "could", "create", "each", "every", "for", "from", "generate", "how", "i", "in", "into", "is",
    "it", "its", "make", "me", "my", "need", "new", "of", "on", "or", "our", "please", "should",
    "so", "some", "that", "the", "their", "them", "then", "these", "this", "those", "to", "us",
    "use", "using", "want", "we", "what", "when", "which", "who", "will", "with", "workflow",
    "would", "you", "your",
];

const SLUG_MAX_WORDS: usize = 4;
const SLUG_MAX_LEN: usize = 40;

/// A workflow name from free text: lowercase ASCII words joined by `-`, at
/// most four words and 40 characters, filler words dropped; `workflow` when
/// the text holds nothing usable.
pub fn slug(description: &str) -> String {
    let words = words(description);
    let meaningful: Vec<&String> = words
        .iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect();
    let chosen: Vec<&String> = if meaningful.is_empty() {
        words.iter().collect()
    } else {
        meaningful
    };
    let mut out = String::new();
    // A name starts with a letter: words in front that start with a digit go.
    for w in chosen
        .into_iter()
        .skip_while(|w| !w.starts_with(|c: char| c.is_ascii_lowercase()))
        .take(SLUG_MAX_WORDS)
    {
        if out.is_empty() {
            out = w.chars().take(SLUG_MAX_LEN).collect();
        } else if out.len() + 1 + w.len() <= SLUG_MAX_LEN {
            out.push('-');
            out.push_str(w);
        } else {
            break;
        }
    }
    if out.is_empty() {
        "workflow".to_owned()
    } else {
        out
    }
}

/// Lowercase ASCII words of `text`: common accented Latin letters folded,
/// apostrophes joined (`don't` → `dont`), other letters dropped, anything
/// else a separator.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
        } else if let Some(folded) = fold(c) {
            word.push_str(folded);
        } else if matches!(c, '\'' | '\u{2019}') || c.is_alphanumeric() {
            // Joined or dropped, but not a break between words.
        } else if !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

fn fold(c: char) -> Option<&'static str> {
    Some(match c.to_lowercase().next()? {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' => "a",
        'æ' => "ae",
        'ç' => "c",
        'è' | 'é' | 'ê' | 'ë' => "e",
        'ì' | 'í' | 'î' | 'ï' => "i",
        'ñ' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' => "o",
        'œ' => "oe",
        'ß' => "ss",
        'ù' | 'ú' | 'û' | 'ü' => "u",
        'ý' | 'ÿ' => "y",
        _ => return None,
    })
}

fn is_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Check a workflow name given with `--name`: it becomes
/// `workflows/<name>/`, so it must match the schema's `^[a-z][a-z0-9-]*$`.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if !is_name(name) {
        return Err(NameError::Invalid {
            name: name.to_owned(),
        });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// A workflow name that [`check_name`] refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("the workflow name is empty: give one such as `pr-summarizer`")]
    Empty,
    #[error(
        "`{name}` is not a valid workflow name: use lowercase letters, digits and hyphens, \
         starting with a letter (for example `{}`)",
        slug(name)
    )]
    Invalid { name: String },
    #[error(
        "the workflow name `{name}` is {} characters long: keep it to {MAX_NAME_LEN} or fewer",
        name.len()
    )]
    TooLong { name: String },
}

// ---------------------------------------------------------------------------
// Manifest

/// `manifest.json`: the control plane of one generation run, as
/// `manifest.schema.json` describes it. Statuses are the schema's strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    #[serde(rename = "specVersion")]
    pub spec_version: String,
    pub workflow: String,
    pub run_id: String,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    pub execution_mode: String,
    pub generator: String,
    /// `generating → generated → validating → validated → promoting →
    /// registered → archived`, or `failed`.
    pub status: String,
    pub phases: Phases,
    #[serde(default)]
    pub steps: Vec<StepRecord>,
    #[serde(default)]
    pub files: Vec<FileRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<Promotion>,
    #[serde(default)]
    pub errors: Vec<ErrorRecord>,
    /// Fields other tools added; kept so a load and save loses nothing.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    #[serde(default)]
    pub generation: Phase,
    #[serde(default)]
    pub validation: Phase,
    #[serde(default)]
    pub promotion: Phase,
    #[serde(default)]
    pub archival: Phase,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// `pending`, `in_progress`, `completed`, `failed` or `skipped`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

impl Default for Phase {
    fn default() -> Self {
        Phase {
            status: "pending".into(),
            started_at: None,
            completed_at: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `pending`, `in_progress`, `completed`, `failed`, `skipped` or
    /// `awaiting_approval`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// The file the step produced, or its folder (`04-agents/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl StepRecord {
    fn pending(id: &str, name: Option<&str>) -> StepRecord {
        StepRecord {
            id: id.into(),
            name: name.map(Into::into),
            status: "pending".into(),
            started_at: None,
            completed_at: None,
            artifact: None,
            error: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRecord {
    /// Relative to the run folder, with `/`.
    pub path: String,
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produced_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// SHA-256 of the content, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Promotion {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorRecord {
    pub at: String,
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    pub message: String,
}

/// The bundled manifest schema, compiled once.
fn manifest_validator() -> Result<&'static jsonschema::Validator, AuthorError> {
    static COMPILED: OnceLock<Result<jsonschema::Validator, BundledSchemaError>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let schema: Value =
                serde_json::from_str(MANIFEST_SCHEMA).map_err(BundledSchemaError::NotJson)?;
            jsonschema::options()
                .should_validate_formats(true)
                .build(&schema)
                .map_err(BundledSchemaError::NotCompiling)
        })
        .as_ref()
        .map_err(AuthorError::BundledSchema)
}

/// The first way `value` breaks the manifest schema: (JSON pointer, message).
fn manifest_violation(value: &Value) -> Result<Option<(String, String)>, AuthorError> {
    Ok(manifest_validator()?.iter_errors(value).next().map(|e| {
        let pointer = e.instance_path().as_str().to_owned();
        (
            if pointer.is_empty() {
                "/".into()
            } else {
                pointer
            },
            e.to_string(),
        )
    }))
}

/// Step status that a later event may still move.
fn is_open(status: &str) -> bool {
    matches!(status, "pending" | "in_progress" | "awaiting_approval")
}

impl Manifest {
    /// A new run's manifest: generation under way, every step pending, the
    /// manifest itself the only file.
    pub fn new(workflow: &str, run_id: &str, steps: &[(String, String)]) -> Manifest {
        let now = timestamp_now();
        Manifest {
            spec_version: SPEC_VERSION.into(),
            workflow: workflow.into(),
            run_id: run_id.into(),
            created_at: now.clone(),
            updated_at: Some(now.clone()),
            execution_mode: "cli".into(),
            generator: GENERATOR.into(),
            status: "generating".into(),
            phases: Phases {
                generation: Phase {
                    status: "in_progress".into(),
                    started_at: Some(now),
                    completed_at: None,
                },
                ..Phases::default()
            },
            steps: steps
                .iter()
                .map(|(id, name)| StepRecord::pending(id, Some(name)))
                .collect(),
            files: vec![FileRecord {
                path: MANIFEST_FILE.into(),
                role: "manifest".into(),
                produced_by: Some("init".into()),
                size_bytes: None,
                checksum: None,
            }],
            promotion: None,
            errors: Vec::new(),
            extra: Map::new(),
        }
    }

    /// Read `dir/manifest.json`, refusing one that breaks the schema.
    pub fn load(dir: &Path) -> Result<Manifest, AuthorError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| AuthorError::Io {
            what: "read",
            path: path.clone(),
            source,
        })?;
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(source) => return Err(AuthorError::NotJson { path, source }),
        };
        if let Some((pointer, message)) = manifest_violation(&value)? {
            return Err(AuthorError::BreaksSchema {
                path,
                pointer,
                message,
            });
        }
        serde_json::from_value(value).map_err(|source| AuthorError::NotAManifest { path, source })
    }

    /// Stamp `updated_at` and write `dir/manifest.json` atomically.
    pub fn save(&mut self, dir: &Path) -> Result<(), AuthorError> {
        self.updated_at = Some(timestamp_now());
        self.write_to(dir)
    }

    /// Write as is, after checking the schema: a violation here is a bug in
    /// this module, reported rather than written.
    fn write_to(&self, dir: &Path) -> Result<(), AuthorError> {
        let value = serde_json::to_value(self).map_err(AuthorError::SerialiseManifest)?;
        let path = dir.join(MANIFEST_FILE);
        if let Some((pointer, message)) = manifest_violation(&value)? {
            return Err(AuthorError::WouldBreakSchema {
                path,
                pointer,
                message,
            });
        }
        let mut bytes =
            serde_json::to_vec_pretty(&value).map_err(AuthorError::SerialiseManifest)?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes, false).map_err(|source| AuthorError::Io {
            what: "write",
            path,
            source,
        })
    }

    fn phase_mut(&mut self, phase: &str) -> Option<&mut Phase> {
        let p = &mut self.phases;
        match phase {
            GENERATION => Some(&mut p.generation),
            VALIDATION => Some(&mut p.validation),
            PROMOTION => Some(&mut p.promotion),
            ARCHIVAL => Some(&mut p.archival),
            _ => {
                debug_assert!(false, "unknown manifest phase `{phase}`");
                None
            }
        }
    }

    /// Mark `phase` (one of [`GENERATION`], [`VALIDATION`], [`PROMOTION`],
    /// [`ARCHIVAL`]) under way; the run's status follows (`generating`,
    /// `validating`, `promoting`; archival keeps `registered`).
    pub fn start_phase(&mut self, phase: &str) {
        self.start_phase_at(phase, timestamp_now());
    }

    fn start_phase_at(&mut self, phase: &str, at: String) {
        if let Some(p) = self.phase_mut(phase) {
            p.status = "in_progress".into();
            p.started_at = Some(at);
            p.completed_at = None;
        }
        let status = match phase {
            GENERATION => "generating",
            VALIDATION => "validating",
            PROMOTION => "promoting",
            _ => return,
        };
        self.status = status.into();
    }

    /// Mark `phase` done; the run's status follows (`generated`,
    /// `validated`, `registered`, `archived`).
    pub fn complete_phase(&mut self, phase: &str) {
        self.complete_phase_at(phase, timestamp_now());
    }

    fn complete_phase_at(&mut self, phase: &str, at: String) {
        if let Some(p) = self.phase_mut(phase) {
            p.status = "completed".into();
            p.started_at.get_or_insert_with(|| at.clone());
            p.completed_at = Some(at);
        }
        let status = match phase {
            GENERATION => "generated",
            VALIDATION => "validated",
            PROMOTION => "registered",
            ARCHIVAL => "archived",
            _ => return,
        };
        self.status = status.into();
    }

    /// Record a failure: an entry in `errors[]`, the phase `failed`, the run
    /// `failed`, and the step (when named and still open) `failed`.
    pub fn fail(&mut self, phase: &str, step_id: Option<&str>, message: &str) {
        self.fail_at(phase, step_id, message, timestamp_now());
    }

    fn fail_at(&mut self, phase: &str, step_id: Option<&str>, message: &str, at: String) {
        if let Some(id) = step_id
            && let Some(step) = self.steps.iter_mut().find(|s| s.id == id)
            && is_open(&step.status)
        {
            step.status = "failed".into();
            step.error = Some(message.into());
        }
        self.errors.push(ErrorRecord {
            at,
            phase: phase.into(),
            step_id: step_id.map(Into::into),
            message: message.into(),
        });
        if let Some(p) = self.phase_mut(phase) {
            p.status = "failed".into();
        }
        self.status = "failed".into();
    }

    /// Set the run's overall status (one of the schema's statuses).
    pub fn set_status(&mut self, status: &str) {
        self.status = status.into();
    }

    /// Follow one run event; true when the manifest changed. Only the kinds
    /// below matter, read by name and from the event's JSON so this keeps
    /// working as event types are added.
    pub fn apply(&mut self, event: &Event) -> bool {
        let kind = event.kind();
        if !APPLIED.contains(&kind) {
            return false;
        }
        let body = serde_json::to_value(&event.body).unwrap_or(Value::Null);
        let data = body.get("data").unwrap_or(&Value::Null);
        self.apply_parts(kind, event.step.as_deref(), &event.ts, data)
    }

    /// [`Manifest::apply`] on an event's parts: its `type`, top-level step
    /// id, RFC 3339 time and `data`.
    ///
    /// `artifact` (`data: {path, bytes, sha256}`, the path relative to the
    /// run folder) registers the file under the role its place in the
    /// layout gives it. A path outside the layout (`notes.md`, `../x`) is
    /// skipped: the schema's roles are a closed list, and such a file is no
    /// part of the workflow that promotion copies.
    pub fn apply_parts(&mut self, kind: &str, step: Option<&str>, ts: &str, data: &Value) -> bool {
        if !APPLIED.contains(&kind) {
            return false;
        }
        let before = self.clone();
        let at = seconds(ts);
        match kind {
            "step_started" => {
                if let Some(id) = step {
                    let s = self.step_record(id);
                    s.status = "in_progress".into();
                    s.started_at = Some(at);
                    s.completed_at = None;
                    s.error = None;
                }
            }
            "approval_required" => {
                if let Some(s) = step.and_then(|id| self.steps.iter_mut().find(|s| s.id == id)) {
                    s.status = "awaiting_approval".into();
                }
            }
            "approval_resolved" => {
                let approved = data.get("approved").and_then(Value::as_bool) == Some(true);
                if let Some(id) = step
                    && let Some(s) = self.steps.iter_mut().find(|s| s.id == id)
                {
                    if approved {
                        s.status = "in_progress".into();
                    } else {
                        let message = match data.get("note").and_then(Value::as_str) {
                            Some(note) if !note.is_empty() => format!("approval rejected: {note}"),
                            _ => "approval rejected".to_owned(),
                        };
                        s.status = "failed".into();
                        s.error = Some(message.clone());
                        self.errors.push(ErrorRecord {
                            at,
                            phase: GENERATION.into(),
                            step_id: Some(id.into()),
                            message,
                        });
                    }
                }
            }
            "step_complete" => {
                if let Some(id) = step {
                    let artifact = self.artifact_of(id);
                    if let Some(s) = self.steps.iter_mut().find(|s| s.id == id) {
                        s.status = "completed".into();
                        s.completed_at = Some(at);
                        if artifact.is_some() {
                            s.artifact = artifact;
                        }
                    }
                }
            }
            "artifact" => self.register_file(step, data),
            "run_failed" | "run_cancelled" => {
                let message = if kind == "run_cancelled" {
                    "cancelled".to_owned()
                } else {
                    data.get("error")
                        .and_then(Value::as_str)
                        .filter(|e| !e.is_empty())
                        .unwrap_or("the run failed")
                        .to_owned()
                };
                // The step under way is the one that failed; `fail_at` marks it.
                let failed_step = self
                    .steps
                    .iter()
                    .filter(|s| matches!(s.status.as_str(), "in_progress" | "awaiting_approval"))
                    .map(|s| s.id.clone())
                    .collect::<Vec<_>>();
                for id in failed_step.iter().skip(1) {
                    if let Some(s) = self.steps.iter_mut().find(|s| &s.id == id) {
                        s.status = "failed".into();
                        s.error = Some(message.clone());
                    }
                }
                let first = failed_step.first().map(String::as_str).or(step);
                self.fail_at(GENERATION, first, &message, at);
            }
            "run_complete" => {
                for s in &mut self.steps {
                    if s.status == "pending" {
                        s.status = "skipped".into();
                    }
                }
                self.complete_phase_at(GENERATION, at);
            }
            _ => {}
        }
        *self != before
    }

    /// The record of step `id`, added when the manifest did not list it, so
    /// what the run did is never lost.
    fn step_record(&mut self, id: &str) -> &mut StepRecord {
        let i = match self.steps.iter().position(|s| s.id == id) {
            Some(i) => i,
            None => {
                self.steps.push(StepRecord::pending(id, None));
                self.steps.len() - 1
            }
        };
        &mut self.steps[i]
    }

    /// What a step's `artifact` field says: its folder (`04-agents/`) when
    /// its files are inside one, else its last file.
    fn artifact_of(&self, step: &str) -> Option<String> {
        let last = self
            .files
            .iter()
            .rev()
            .find(|f| f.produced_by.as_deref() == Some(step))?;
        Some(match last.path.split_once('/') {
            Some((folder, _)) => format!("{folder}/"),
            None => last.path.clone(),
        })
    }

    fn register_file(&mut self, step: Option<&str>, data: &Value) {
        let Some(path) = data
            .get("path")
            .and_then(Value::as_str)
            .and_then(|p| self.run_relative(p))
        else {
            return;
        };
        let Some(role) = role_of(&path) else {
            return;
        };
        let size = data.get("bytes").and_then(Value::as_u64);
        let checksum = data
            .get("sha256")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match self.files.iter_mut().find(|f| f.path == path) {
            Some(f) => {
                f.role = role.into();
                if let Some(step) = step {
                    f.produced_by = Some(step.into());
                }
                f.size_bytes = size.or(f.size_bytes);
                f.checksum = checksum.or(f.checksum.take());
            }
            None => self.files.push(FileRecord {
                path,
                role: role.into(),
                produced_by: step.map(Into::into),
                size_bytes: size,
                checksum,
            }),
        }
        // An artifact reported after its step completed still names it.
        if let Some(id) = step {
            let artifact = self.artifact_of(id);
            if let Some(s) = self
                .steps
                .iter_mut()
                .find(|s| s.id == id && s.status == "completed")
            {
                s.artifact = artifact;
            }
        }
    }

    /// `path` relative to the run folder, with `/`: as given when already
    /// relative, or the part after `<workflow>/<run-id>/` when a longer path
    /// names the run folder; `None` for anything that leaves it.
    fn run_relative(&self, path: &str) -> Option<String> {
        let path = path.replace('\\', "/");
        let parts: Vec<&str> = path
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .collect();
        let inside = parts
            .windows(2)
            .rposition(|w| w[0] == self.workflow && w[1] == self.run_id)
            .map(|i| &parts[i + 2..]);
        let parts = match inside {
            Some(rest) => rest,
            None if path.starts_with('/') || path.contains(':') => return None,
            None => &parts[..],
        };
        if parts.is_empty() || parts.contains(&"..") {
            return None;
        }
        Some(parts.join("/"))
    }
}

/// Event types [`Manifest::apply`] follows.
const APPLIED: &[&str] = &[
    "step_started",
    "approval_required",
    "approval_resolved",
    "step_complete",
    "artifact",
    "run_failed",
    "run_cancelled",
    "run_complete",
];

/// The schema role of a file in the run folder, by its place in the layout.
fn role_of(path: &str) -> Option<&'static str> {
    match path.split_once('/') {
        None if path == MANIFEST_FILE => Some("manifest"),
        None if path.starts_with("01-") => Some("clarification"),
        None if path.starts_with("02-") => Some("design"),
        None if path.starts_with("03-") => Some("workflow_config"),
        None if path.starts_with("07-") => Some("review"),
        Some(("04-agents", _)) => Some("agent"),
        Some(("05-skills", _)) => Some("skill"),
        Some(("06-scripts", rest)) if rest.starts_with("cli/") => Some("script_cli"),
        Some(("06-scripts", _)) => Some("script_ide"),
        _ => None,
    }
}

/// Keeps `manifest.json` in step with a generation run: every event that
/// changes the manifest saves it. A save that fails never stops the run;
/// the first failure is kept for [`ManifestSink::error`].
pub struct ManifestSink {
    dir: PathBuf,
    manifest: Mutex<Manifest>,
    error: Mutex<Option<String>>,
}

/// A poisoned lock still holds a usable manifest: a panic elsewhere must not
/// also stop the bookkeeping.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ManifestSink {
    /// A sink writing `manifest` to `dir/manifest.json` (it does not save
    /// until the first change; call [`Manifest::save`] first for that).
    pub fn new(dir: impl Into<PathBuf>, manifest: Manifest) -> ManifestSink {
        ManifestSink {
            dir: dir.into(),
            manifest: Mutex::new(manifest),
            error: Mutex::new(None),
        }
    }

    /// The manifest as it stands now.
    pub fn manifest(&self) -> Manifest {
        lock(&self.manifest).clone()
    }

    /// The first save that failed, if any.
    pub fn error(&self) -> Option<String> {
        lock(&self.error).clone()
    }
}

impl EventSink for ManifestSink {
    fn send(&self, event: &Event) {
        let mut m = lock(&self.manifest);
        if m.apply(event)
            && let Err(e) = m.save(&self.dir)
        {
            lock(&self.error).get_or_insert(e.to_string());
        }
    }
}

// ---------------------------------------------------------------------------
// Staging and promotion

/// The artifact layout's parts and where each goes in a workflow folder.
const LAYOUT: &[(&str, &str)] = &[
    ("04-agents", "agents"),
    ("05-skills", "skills"),
    ("06-scripts", "scripts"),
];
pub(super) const GENERATED_CONFIG: &str = "03-workflow.yaml";

/// Assemble a workflow folder in `into` (created when missing) from a
/// generation run's artifacts: `03-workflow.yaml` → `workflow.yaml`,
/// `04-agents/` → `agents/`, `05-skills/` → `skills/`, `06-scripts/` →
/// `scripts/`. Only regular files and folders are copied; a symbolic link is
/// refused, as it could point anywhere once promoted.
pub fn stage_workflow(artifact_dir: &Path, into: &Path) -> Result<(), AuthorError> {
    let config = artifact_dir.join(GENERATED_CONFIG);
    match std::fs::symlink_metadata(&config) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(AuthorError::ConfigNotAFile { path: config }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(AuthorError::ConfigMissing { path: config });
        }
        Err(source) => return Err(io("read", &config, source)),
    }
    std::fs::create_dir_all(into).map_err(|e| io("create", into, e))?;
    let target = into.join("workflow.yaml");
    std::fs::copy(&config, &target).map_err(|source| AuthorError::CopyFile {
        from: config.clone(),
        to: target.clone(),
        source,
    })?;
    for (from, to) in LAYOUT {
        let from = artifact_dir.join(from);
        match std::fs::symlink_metadata(&from) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(io("read", &from, source)),
            Ok(meta) if meta.is_dir() => copy_tree(&from, &into.join(to))?,
            Ok(_) => return Err(AuthorError::NotAFolder { path: from }),
        }
    }
    Ok(())
}

/// An [`AuthorError::Io`]: `cannot {what} {path}: {source}`.
fn io(what: &'static str, path: &Path, source: std::io::Error) -> AuthorError {
    AuthorError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Copy a folder recursively: regular files and folders only.
fn copy_tree(from: &Path, to: &Path) -> Result<(), AuthorError> {
    std::fs::create_dir_all(to).map_err(|e| io("create", to, e))?;
    let entries = std::fs::read_dir(from).map_err(|e| io("read the folder", from, e))?;
    let mut entries: Vec<_> = entries
        .collect::<Result<_, _>>()
        .map_err(|e| io("read the folder", from, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| io("read", &src, e))?;
        if kind.is_symlink() {
            return Err(AuthorError::Symlink { path: src });
        } else if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst).map_err(|source| AuthorError::CopyFile {
                from: src.clone(),
                to: dst.clone(),
                source,
            })?;
        } else {
            return Err(AuthorError::OddFile { path: src });
        }
    }
    Ok(())
}

/// What [`promote`] did; paths relative to the workspace, with `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Promoted {
    pub name: String,
    pub run_id: String,
    /// `workflows/<name>`.
    pub target: String,
    /// `outputs/<name>/<run-id>/build`.
    pub archive: String,
}

/// A folder name unique to this process for staging beside its final place.
fn partial_name(name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        ".{name}.partial-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// `path` relative to `workspace` with `/`, or whole when outside it.
fn workspace_relative(workspace: &Path, path: &Path) -> String {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let path = canon(path);
    let shown = match path.strip_prefix(canon(workspace)) {
        Ok(rel) => rel.to_path_buf(),
        Err(_) => path,
    };
    shown
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
        .replace("//", "/")
}

/// Why a run with this manifest cannot be promoted, and what to do.
fn not_promotable(m: &Manifest, shown: &str) -> Option<NotPromotable> {
    let status = m.status.as_str();
    let shown = shown.to_owned();
    Some(match status {
        // `promoting`: an earlier promote stopped before placing the
        // workflow (it is placed atomically), so trying again is safe.
        "validated" | "promoting" => return None,
        // A promotion that failed placed nothing: once its cause is fixed,
        // it may be tried again.
        "failed"
            if m.phases.validation.status == "completed"
                && m.phases.promotion.status == "failed" =>
        {
            return None;
        }
        "generating" => NotPromotable::Generating { shown },
        "generated" | "validating" => NotPromotable::Unvalidated {
            shown,
            status: status.to_owned(),
        },
        "registered" | "archived" => NotPromotable::AlreadyPromoted {
            shown,
            target: m
                .promotion
                .as_ref()
                .and_then(|p| p.target.as_deref())
                .unwrap_or("workflows/")
                .to_owned(),
            status: status.to_owned(),
        },
        "failed" => NotPromotable::Failed {
            shown,
            last: m
                .errors
                .last()
                .map(|e| format!("{}: {}", e.phase, e.message))
                .unwrap_or_else(|| "see errors in its manifest.json".into()),
        },
        other => NotPromotable::UnknownStatus {
            shown,
            status: other.to_owned(),
        },
    })
}

/// Promote a validated generation run: copy its workflow to
/// `workflows/<name>/` (with `workflow_status.json`), then archive the run
/// folder to `outputs/<name>/<run-id>/build/`, saving the manifest at each
/// transition. A relative `artifact_dir` is taken from `workspace`.
///
/// Nothing is overwritten: an existing `workflows/<name>/` or archive
/// refuses the promotion before anything changes. A failure after that is
/// recorded in the manifest (status `failed`) and returned.
pub fn promote(workspace: &Path, artifact_dir: &Path) -> Result<Promoted, AuthorError> {
    let dir = workspace.join(artifact_dir);
    let shown = workspace_relative(workspace, &dir);
    if !dir.join(MANIFEST_FILE).is_file() {
        return Err(AuthorError::NoManifest { shown });
    }
    let mut m = Manifest::load(&dir)?;
    let (name, run_id) = (m.workflow.clone(), m.run_id.clone());
    let canon = dir.canonicalize().unwrap_or_else(|_| dir.clone());
    let folder = canon.file_name().map(|n| n.to_string_lossy().into_owned());
    let parent = canon
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    if folder.as_deref() != Some(&run_id) || parent.as_deref() != Some(&name) {
        return Err(AuthorError::Misplaced {
            shown,
            name,
            run_id,
        });
    }
    if let Some(why) = not_promotable(&m, &shown) {
        return Err(why.into());
    }
    let places = Places::of(workspace, &name, &run_id);
    let Places {
        target,
        target_rel,
        archive,
        archive_rel,
    } = &places;
    if std::fs::symlink_metadata(target).is_ok() {
        return Err(Exists::Target {
            target: target_rel.clone(),
        }
        .into());
    }
    if std::fs::symlink_metadata(archive).is_ok() {
        return Err(Exists::Archive {
            archive: archive_rel.clone(),
        }
        .into());
    }
    if !dir.join(GENERATED_CONFIG).is_file() {
        return Err(AuthorError::NoWorkflow { shown });
    }

    m.start_phase(PROMOTION);
    m.save(&dir)?;

    // The workflow is staged beside its place and renamed into it, so
    // `workflows/<name>/` is either absent or complete.
    let workflows = workspace.join("workflows");
    let staging = workflows.join(partial_name(&name));
    let placed = place_workflow(&dir, &m, &shown, &places, &workflows, &staging);
    if let Err(e) = placed {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(record_failure(&mut m, &dir, PROMOTION, e));
    }

    m.promotion = Some(Promotion {
        target: Some(target_rel.clone()),
        promoted_at: Some(timestamp_now()),
        archive_path: Some(archive_rel.clone()),
    });
    m.complete_phase(PROMOTION);
    let promoted_but = |e| AuthorError::PromotedBut {
        name: name.clone(),
        target: target_rel.clone(),
        source: Box::new(e),
    };
    m.save(&dir).map_err(promoted_but)?;

    m.start_phase(ARCHIVAL);
    m.save(&dir).map_err(promoted_but)?;
    let Some(run_parent) = archive.parent() else {
        return Err(record_failure(
            &mut m,
            &dir,
            ARCHIVAL,
            AuthorError::NoArchiveParent {
                archive: archive_rel.clone(),
            },
        ));
    };
    let partial = run_parent.join(partial_name("build"));
    let archived = archive_run(&dir, &m, &places, run_parent, &partial);
    match archived {
        Ok(done) => {
            m = done;
            m.write_to(&dir).map_err(|e| AuthorError::ArchivedBut {
                name: name.clone(),
                target: target_rel.clone(),
                archive: archive_rel.clone(),
                source: Box::new(e),
            })?;
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&partial);
            let e = AuthorError::ArchiveFailed {
                name: name.clone(),
                target: target_rel.clone(),
                shown: shown.clone(),
                archive: archive_rel.clone(),
                source: Box::new(e),
            };
            return Err(record_failure(&mut m, &dir, ARCHIVAL, e));
        }
    }
    Ok(Promoted {
        name,
        run_id,
        target: places.target_rel,
        archive: places.archive_rel,
    })
}

/// Where a promotion puts a run: its workflow's folder and its archive, each
/// as a path and as shown (relative to the workspace).
struct Places {
    target: PathBuf,
    target_rel: String,
    archive: PathBuf,
    archive_rel: String,
}

impl Places {
    fn of(workspace: &Path, name: &str, run_id: &str) -> Places {
        Places {
            target_rel: format!("workflows/{name}"),
            archive_rel: format!("outputs/{name}/{run_id}/build"),
            target: workspace.join("workflows").join(name),
            archive: workspace
                .join("outputs")
                .join(name)
                .join(run_id)
                .join("build"),
        }
    }
}

/// Stage the run's workflow (with its `workflow_status.json`) at `staging`,
/// beside its place, and rename it into place, so `workflows/<name>/` is
/// either absent or complete. The caller removes `staging` on failure.
fn place_workflow(
    dir: &Path,
    m: &Manifest,
    shown: &str,
    places: &Places,
    workflows: &Path,
    staging: &Path,
) -> Result<(), AuthorError> {
    let (name, run_id) = (&m.workflow, &m.run_id);
    let Places {
        target,
        target_rel,
        archive_rel,
        ..
    } = places;
    std::fs::create_dir_all(workflows).map_err(|e| io("create", workflows, e))?;
    stage_workflow(dir, staging)?;
    let status = json!({
        "workflow": name,
        "run_id": run_id,
        "status": "registered",
        "registered_at": timestamp_now(),
        "source_run_id": run_id,
        "artifact_directory": shown,
        "target_directory": target_rel,
        "archive": archive_rel,
        "generator": m.generator,
    });
    write_json(&staging.join(STATUS_FILE), &status)?;
    if std::fs::symlink_metadata(target).is_ok() {
        return Err(Exists::Appeared {
            target: target_rel.clone(),
        }
        .into());
    }
    std::fs::rename(staging, target).map_err(|source| AuthorError::Move {
        what: "the staged workflow",
        to: target_rel.clone(),
        source,
    })
}

/// Copy the run folder to a partial archive beside `places.archive`, with
/// the manifest as it will read once archived, and rename it into place;
/// that manifest. The caller removes `partial` on failure.
fn archive_run(
    dir: &Path,
    m: &Manifest,
    places: &Places,
    run_parent: &Path,
    partial: &Path,
) -> Result<Manifest, AuthorError> {
    let Places {
        archive,
        archive_rel,
        ..
    } = places;
    std::fs::create_dir_all(run_parent).map_err(|e| io("create", run_parent, e))?;
    copy_tree(dir, partial)?;
    let mut done = m.clone();
    done.complete_phase(ARCHIVAL);
    done.updated_at = Some(timestamp_now());
    done.write_to(partial)?;
    std::fs::rename(partial, archive).map_err(|source| AuthorError::Move {
        what: "the archive copy",
        to: archive_rel.clone(),
        source,
    })?;
    Ok(done)
}

/// Record `message` as the failure of `phase` and save; the message to
/// return, noting a save that failed too.
fn record_failure(m: &mut Manifest, dir: &Path, phase: &str, error: AuthorError) -> AuthorError {
    m.fail(phase, None, &error.to_string());
    match m.save(dir) {
        Ok(()) => error,
        Err(save) => AuthorError::Unrecorded {
            error: Box::new(error),
            save: Box::new(save),
        },
    }
}

fn write_json(path: &Path, value: &Value) -> Result<(), AuthorError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| AuthorError::Serialise {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes, false).map_err(|e| io("write", path, e))
}

// ---------------------------------------------------------------------------
// The generator workflow

/// The built-in generator workflow (`workflow-creator`) that `agentfile
/// create` runs: (path in the package, content). Agent and skill paths in
/// its workflow.yaml are relative to the package; `input` and `produces`
/// to the run folder it writes.
pub const GENERATOR_FILES: &[(&str, &str)] = &[
    ("workflow.yaml", GENERATOR_WORKFLOW),
    (
        "agents/analyst.md",
        include_str!("generator/agents/analyst.md"),
    ),
    (
        "agents/architect.md",
        include_str!("generator/agents/architect.md"),
    ),
    (
        "agents/generator.md",
        include_str!("generator/agents/generator.md"),
    ),
    (
        "agents/reviewer.md",
        include_str!("generator/agents/reviewer.md"),
    ),
    (
        "skills/clarify-request.md",
        include_str!("generator/skills/clarify-request.md"),
    ),
    (
        "skills/design-workflow.md",
        include_str!("generator/skills/design-workflow.md"),
    ),
    (
        "skills/generate-yaml.md",
        include_str!("generator/skills/generate-yaml.md"),
    ),
    (
        "skills/generate-agents.md",
        include_str!("generator/skills/generate-agents.md"),
    ),
    (
        "skills/generate-skills.md",
        include_str!("generator/skills/generate-skills.md"),
    ),
    (
        "skills/generate-scripts.md",
        include_str!("generator/skills/generate-scripts.md"),
    ),
    (
        "skills/review-workflow.md",
        include_str!("generator/skills/review-workflow.md"),
    ),
];

const GENERATOR_WORKFLOW: &str = include_str!("generator/workflow.yaml");

/// Write the generator package into `dir`, touching only files whose content
/// differs (so a second call changes nothing); the path of its
/// workflow.yaml.
pub fn materialize(dir: &Path) -> Result<PathBuf, FileError> {
    for (rel, content) in GENERATOR_FILES {
        let path = dir.join(rel);
        if std::fs::read(&path).is_ok_and(|old| old == content.as_bytes()) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| FileError::Create {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        write_atomic(&path, content.as_bytes(), false).map_err(|source| FileError::Write {
            path: path.clone(),
            source,
        })?;
    }
    Ok(dir.join("workflow.yaml"))
}

/// A file or folder that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// (id, name) of the generator's steps, in order, read from its embedded
/// workflow.yaml (a test keeps that file readable, so this is never empty).
pub fn generator_steps() -> Vec<(String, String)> {
    let Ok(doc) = agentfile_syntax::yaml::parse(GENERATOR_WORKFLOW, 0) else {
        return Vec::new();
    };
    let text = |s: &Value, key: &str| s.get(key).and_then(Value::as_str).map(str::to_owned);
    doc.value
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| Some((text(s, "id")?, text(s, "name")?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system temp dir, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            static N: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!(
                "af-generate-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const RUN: &str = "2026-11-25T10-00-00";

    fn assert_valid(m: &Manifest) {
        let v = serde_json::to_value(m).unwrap();
        assert_eq!(manifest_violation(&v).unwrap(), None, "{v:#}");
    }

    fn manifest() -> Manifest {
        Manifest::new("meeting-notes", RUN, &generator_steps())
    }

    fn event(kind: &str, step: Option<&str>, data: Value) -> Event {
        let mut v = json!({
            "schema_version": 1, "session_id": "s", "seq": 1,
            "ts": "2026-11-25T10:00:05.250Z", "type": kind, "data": data,
        });
        if let Some(step) = step {
            v["step"] = json!(step);
        }
        serde_json::from_value(v).unwrap()
    }

    fn usage() -> Value {
        json!({"input_tokens": 0, "output_tokens": 0, "cost_usd": null, "turns": 0, "tool_calls": 0})
    }

    fn artifact(m: &mut Manifest, step: &str, path: &str) -> bool {
        let data = json!({"path": path, "bytes": 12, "sha256": "ab".repeat(32)});
        let changed = m.apply_parts("artifact", Some(step), "2026-11-25T10:00:06Z", &data);
        assert_valid(m);
        changed
    }

    fn step<'a>(m: &'a Manifest, id: &str) -> &'a StepRecord {
        m.steps.iter().find(|s| s.id == id).unwrap()
    }

    #[test]
    fn timestamps_have_the_manifest_shapes() {
        let run = run_id_now();
        assert_eq!(run.len(), 19, "{run}");
        assert!(run.chars().enumerate().all(|(i, c)| match i {
            4 | 7 | 13 | 16 => c == '-',
            10 => c == 'T',
            _ => c.is_ascii_digit(),
        }));
        let ts = timestamp_now();
        assert!(humantime::parse_rfc3339(&ts).is_ok(), "{ts}");
        assert!(ts.ends_with('Z') && ts.len() == 20, "{ts}");
        assert_eq!(run_id_of("2026-02-23T10:41:22Z"), "2026-02-23T10-41-22");
        assert_eq!(seconds("2026-11-25T10:00:05.250Z"), "2026-11-25T10:00:05Z");
    }

    #[test]
    fn slugs() {
        for (text, want) in [
            (
                "Create a workflow that reviews pull requests",
                "reviews-pull-requests",
            ),
            (
                "Summarize my meeting notes and pull out action items",
                "summarize-meeting-notes-pull",
            ),
            ("The", "the"),
            ("", "workflow"),
            ("!!! ???", "workflow"),
            ("日本語", "workflow"),
            ("Résumé parser", "resume-parser"),
            (
                "Don't panic: triage the on-call pager",
                "dont-panic-triage-call",
            ),
            ("3D model viewer", "model-viewer"),
            ("2025", "workflow"),
            ("Translate it", "translate"),
            (
                "supercalifragilisticexpialidocious antidisestablishmentarianism",
                "supercalifragilisticexpialidocious",
            ),
            ("x".repeat(60).as_str(), "x".repeat(40).as_str()),
        ] {
            let got = slug(text);
            assert_eq!(got, want, "slug({text:?})");
            assert!(is_name(&got) && got.len() <= 40, "{got}");
            assert!(check_name(&got).is_ok());
        }
    }

    #[test]
    fn names() {
        assert!(check_name("pr-summarizer").is_ok());
        assert!(check_name("a1").is_ok());
        let e = check_name("PR Summarizer").unwrap_err().to_string();
        assert!(e.contains("`pr-summarizer`"), "{e}");
        assert!(check_name("").unwrap_err().to_string().contains("empty"));
        assert!(check_name("1abc").is_err());
        assert!(check_name("../etc").is_err());
        assert!(
            check_name(&"a".repeat(65))
                .unwrap_err()
                .to_string()
                .contains("64")
        );
    }

    #[test]
    fn a_new_manifest_follows_the_schema() {
        let m = manifest();
        assert_valid(&m);
        assert_eq!(m.status, "generating");
        assert_eq!(m.phases.generation.status, "in_progress");
        assert!(m.phases.generation.started_at.is_some());
        assert_eq!(m.phases.archival.status, "pending");
        assert_eq!(m.steps.len(), 7);
        assert!(m.steps.iter().all(|s| s.status == "pending"));
        assert_eq!(m.files.len(), 1);
        assert_eq!(m.files[0].role, "manifest");
        assert_eq!(m.files[0].produced_by.as_deref(), Some("init"));
    }

    #[test]
    fn a_whole_generation_run() {
        let mut m = manifest();
        let started = event(
            "step_started",
            Some("clarify"),
            json!({"kind": "run", "goals": []}),
        );
        assert!(m.apply(&started));
        assert_valid(&m);
        assert_eq!(step(&m, "clarify").status, "in_progress");
        assert_eq!(
            step(&m, "clarify").started_at.as_deref(),
            Some("2026-11-25T10:00:05Z")
        );
        assert!(artifact(&mut m, "clarify", "01-clarification.md"));
        assert!(m.apply(&event("step_complete", Some("clarify"), json!({}))));
        assert_valid(&m);
        let s = step(&m, "clarify");
        assert_eq!(s.status, "completed");
        assert_eq!(s.artifact.as_deref(), Some("01-clarification.md"));

        // A folder step names its folder, and each file gets its role.
        m.apply_parts(
            "step_started",
            Some("generate-scripts"),
            "2026-11-25T10:01:00Z",
            &json!({}),
        );
        assert!(artifact(
            &mut m,
            "generate-scripts",
            "06-scripts/cli/run.sh"
        ));
        assert!(artifact(
            &mut m,
            "generate-scripts",
            "./06-scripts/README.md"
        ));
        assert!(!artifact(
            &mut m,
            "generate-scripts",
            "06-scripts/README.md"
        ));
        m.apply(&event("step_complete", Some("generate-scripts"), json!({})));
        assert_eq!(
            step(&m, "generate-scripts").artifact.as_deref(),
            Some("06-scripts/")
        );
        let roles: Vec<(&str, &str)> = m
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.role.as_str()))
            .collect();
        assert_eq!(
            roles,
            [
                ("manifest.json", "manifest"),
                ("01-clarification.md", "clarification"),
                ("06-scripts/cli/run.sh", "script_cli"),
                ("06-scripts/README.md", "script_ide"),
            ]
        );
        assert_eq!(m.files[1].size_bytes, Some(12));
        assert_eq!(m.files[1].checksum.as_deref().map(str::len), Some(64));

        // Events that do not concern the manifest change nothing.
        let noise = event("warning", Some("design"), json!({"message": "slow"}));
        assert!(!m.apply(&noise));

        let done = event(
            "run_complete",
            None,
            json!({"outputs": {}, "usage": usage()}),
        );
        assert!(m.apply(&done));
        assert_valid(&m);
        assert_eq!(m.status, "generated");
        assert_eq!(m.phases.generation.status, "completed");
        assert_eq!(step(&m, "design").status, "skipped");
        assert!(!m.apply(&done), "applying twice changes nothing");
    }

    #[test]
    fn artifact_paths_and_roles() {
        let mut m = manifest();
        for (path, role) in [
            ("02-design.md", Some("design")),
            ("03-workflow.yaml", Some("workflow_config")),
            ("04-agents/coordinator.md", Some("agent")),
            ("05-skills/x.md", Some("skill")),
            ("06-scripts/ide/steps.md", Some("script_ide")),
            ("07-review.md", Some("review")),
            (
                "artifacts/meeting-notes/2026-11-25T10-00-00/05-skills/y.md",
                Some("skill"),
            ),
            (
                "/abs/artifacts/meeting-notes/2026-11-25T10-00-00/04-agents/z.md",
                Some("agent"),
            ),
            ("04-agents\\win.md", Some("agent")),
            ("notes.md", None),
            ("../02-design.md", None),
            ("/etc/passwd", None),
            ("04-agents", None),
        ] {
            let changed = artifact(&mut m, "design", path);
            assert_eq!(changed, role.is_some(), "{path}");
            if let Some(role) = role {
                assert_eq!(m.files.last().unwrap().role, role, "{path}");
            }
        }
        assert!(m.files.iter().any(|f| f.path == "04-agents/win.md"));
        assert!(m.files.iter().any(|f| f.path == "05-skills/y.md"));
    }

    #[test]
    fn approvals() {
        let mut m = manifest();
        m.apply(&event(
            "step_started",
            Some("design"),
            json!({"kind": "run", "goals": []}),
        ));
        assert!(m.apply(&event(
            "approval_required",
            Some("design"),
            json!({"reason": "gate"})
        )));
        assert_valid(&m);
        assert_eq!(step(&m, "design").status, "awaiting_approval");
        assert!(m.apply(&event(
            "approval_resolved",
            Some("design"),
            json!({"approved": true})
        )));
        assert_eq!(step(&m, "design").status, "in_progress");
        m.apply(&event(
            "approval_required",
            Some("design"),
            json!({"reason": "gate"}),
        ));
        let no = json!({"approved": false, "note": "too vague"});
        assert!(m.apply(&event("approval_resolved", Some("design"), no)));
        assert_valid(&m);
        let s = step(&m, "design");
        assert_eq!(s.status, "failed");
        assert_eq!(s.error.as_deref(), Some("approval rejected: too vague"));
        assert_eq!(m.errors.len(), 1);
        assert_eq!(m.errors[0].step_id.as_deref(), Some("design"));
    }

    #[test]
    fn failure_and_cancellation() {
        let mut m = manifest();
        m.apply(&event(
            "step_started",
            Some("design"),
            json!({"kind": "run", "goals": []}),
        ));
        let failed =
            json!({"error": "model unreachable", "termination_reason": "error", "usage": usage()});
        assert!(m.apply(&event("run_failed", None, failed)));
        assert_valid(&m);
        assert_eq!(m.status, "failed");
        assert_eq!(m.phases.generation.status, "failed");
        let s = step(&m, "design");
        assert_eq!(
            (s.status.as_str(), s.error.as_deref()),
            ("failed", Some("model unreachable"))
        );
        assert_eq!(step(&m, "review").status, "pending");
        assert_eq!(m.errors[0].phase, "generation");
        assert_eq!(m.errors[0].step_id.as_deref(), Some("design"));

        let mut m = manifest();
        m.apply(&event(
            "step_started",
            Some("clarify"),
            json!({"kind": "run", "goals": []}),
        ));
        assert!(m.apply(&event("run_cancelled", None, json!({"usage": usage()}))));
        assert_valid(&m);
        assert_eq!(m.status, "failed");
        assert_eq!(step(&m, "clarify").error.as_deref(), Some("cancelled"));
    }

    #[test]
    fn an_unknown_step_is_recorded() {
        let mut m = manifest();
        assert!(m.apply(&event(
            "step_started",
            Some("extra"),
            json!({"kind": "run", "goals": []})
        )));
        assert_valid(&m);
        assert_eq!(step(&m, "extra").status, "in_progress");
    }

    #[test]
    fn phases_move_the_status() {
        let mut m = manifest();
        for (phase, started, completed) in [
            (GENERATION, "generating", "generated"),
            (VALIDATION, "validating", "validated"),
            (PROMOTION, "promoting", "registered"),
            (ARCHIVAL, "registered", "archived"),
        ] {
            m.start_phase(phase);
            assert_valid(&m);
            assert_eq!(m.status, started);
            m.complete_phase(phase);
            assert_valid(&m);
            assert_eq!(m.status, completed);
        }
        m.fail(
            VALIDATION,
            Some("generate-config"),
            "steps[2]: missing goal",
        );
        assert_valid(&m);
        assert_eq!(m.status, "failed");
        assert_eq!(m.phases.validation.status, "failed");
        assert_eq!(step(&m, "generate-config").status, "failed");
        m.set_status("generated");
        assert_valid(&m);
    }

    #[test]
    fn save_and_load() {
        let dir = Scratch::new("save");
        let mut m = manifest();
        m.extra.insert("note".into(), json!("kept"));
        m.save(&dir.0).unwrap();
        let loaded = Manifest::load(&dir.0).unwrap();
        assert_eq!(loaded, m);
        assert!(
            std::fs::read_dir(&dir.0).unwrap().count() == 1,
            "no temporary file left behind"
        );

        // A manifest that breaks the schema is refused on save and on load.
        m.status = "bogus".into();
        let e = m.save(&dir.0).unwrap_err().to_string();
        assert!(e.contains("/status"), "{e}");
        assert_eq!(Manifest::load(&dir.0).unwrap().status, "generating");
        m.status = "generating".into();
        m.created_at = "yesterday".into();
        let e = m.save(&dir.0).unwrap_err().to_string();
        assert!(e.contains("/created_at"), "{e}");
        std::fs::write(dir.0.join(MANIFEST_FILE), r#"{"workflow": "Bad Name"}"#).unwrap();
        let e = Manifest::load(&dir.0).unwrap_err().to_string();
        assert!(e.contains("manifest.schema.json"), "{e}");
        let e = Manifest::load(&dir.0.join("nowhere"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn the_sink_saves_each_change() {
        let dir = Scratch::new("sink");
        let sink = ManifestSink::new(&dir.0, manifest());
        sink.send(&event(
            "step_started",
            Some("clarify"),
            json!({"kind": "run", "goals": []}),
        ));
        assert_eq!(sink.error(), None);
        let on_disk = Manifest::load(&dir.0).unwrap();
        assert_eq!(step(&on_disk, "clarify").status, "in_progress");
        assert_eq!(on_disk, sink.manifest());

        // A save that fails is kept, never raised.
        let gone = ManifestSink::new(dir.0.join("missing"), manifest());
        gone.send(&event(
            "step_started",
            Some("clarify"),
            json!({"kind": "run", "goals": []}),
        ));
        gone.send(&event("step_complete", Some("clarify"), json!({})));
        assert!(gone.error().unwrap().contains("cannot write"));
    }

    /// A run folder with a generated workflow, its manifest at `status`.
    fn generated_run(workspace: &Path, status: &str) -> PathBuf {
        let dir = workspace.join("artifacts/meeting-notes").join(RUN);
        for (rel, text) in [
            ("01-clarification.md", "# Clarification"),
            ("03-workflow.yaml", "name: meeting-notes\n"),
            ("04-agents/writer.md", "# Agent: Writer"),
            ("05-skills/summarize.md", "# Skill: Summarize"),
            ("06-scripts/cli/run.sh", "#!/usr/bin/env bash\n"),
            ("07-review.md", "# Review"),
        ] {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let mut m = manifest();
        m.complete_phase(GENERATION);
        m.start_phase(VALIDATION);
        m.complete_phase(VALIDATION);
        m.set_status(status);
        m.save(&dir).unwrap();
        dir
    }

    #[test]
    fn staging_maps_the_layout() {
        let ws = Scratch::new("stage");
        let dir = generated_run(&ws.0, "validated");
        let into = ws.0.join("staged");
        stage_workflow(&dir, &into).unwrap();
        for rel in [
            "workflow.yaml",
            "agents/writer.md",
            "skills/summarize.md",
            "scripts/cli/run.sh",
        ] {
            assert!(into.join(rel).is_file(), "{rel}");
        }
        assert!(!into.join("07-review.md").exists());
        assert!(!into.join(MANIFEST_FILE).exists());

        // Optional folders may be missing; the workflow may not.
        std::fs::remove_dir_all(dir.join("05-skills")).unwrap();
        stage_workflow(&dir, &ws.0.join("staged2")).unwrap();
        std::fs::remove_file(dir.join("03-workflow.yaml")).unwrap();
        let e = stage_workflow(&dir, &ws.0.join("staged3"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("03-workflow.yaml is missing"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn staging_refuses_links() {
        let ws = Scratch::new("links");
        let dir = generated_run(&ws.0, "validated");
        std::os::unix::fs::symlink("/etc/passwd", dir.join("04-agents/evil.md")).unwrap();
        let e = stage_workflow(&dir, &ws.0.join("staged"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn promotion_registers_and_archives() {
        let ws = Scratch::new("promote");
        let dir = generated_run(&ws.0, "validated");
        let done = promote(
            &ws.0,
            Path::new("artifacts/meeting-notes/2026-11-25T10-00-00"),
        )
        .unwrap();
        assert_eq!(
            done,
            Promoted {
                name: "meeting-notes".into(),
                run_id: RUN.into(),
                target: "workflows/meeting-notes".into(),
                archive: format!("outputs/meeting-notes/{RUN}/build"),
            }
        );
        let target = ws.0.join("workflows/meeting-notes");
        assert!(target.join("workflow.yaml").is_file());
        assert!(target.join("agents/writer.md").is_file());
        let status: Value =
            serde_json::from_slice(&std::fs::read(target.join(STATUS_FILE)).unwrap()).unwrap();
        assert_eq!(status["status"], "registered");
        assert_eq!(status["source_run_id"], RUN);
        assert_eq!(
            status["artifact_directory"],
            format!("artifacts/meeting-notes/{RUN}")
        );
        assert_eq!(status["target_directory"], "workflows/meeting-notes");
        assert_eq!(
            status["archive"],
            format!("outputs/meeting-notes/{RUN}/build")
        );

        let m = Manifest::load(&dir).unwrap();
        assert_eq!(m.status, "archived");
        assert_eq!(m.phases.promotion.status, "completed");
        assert_eq!(m.phases.archival.status, "completed");
        let p = m.promotion.as_ref().unwrap();
        assert_eq!(p.target.as_deref(), Some("workflows/meeting-notes"));
        let archive = ws.0.join(&done.archive);
        assert_eq!(Manifest::load(&archive).unwrap(), m);
        assert!(archive.join("07-review.md").is_file());
        assert!(archive.join("04-agents/writer.md").is_file());
        let leftovers: Vec<_> = std::fs::read_dir(ws.0.join("workflows"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["meeting-notes"]);

        // A second promotion is refused and changes nothing.
        let e = promote(&ws.0, &dir).unwrap_err().to_string();
        assert!(e.contains("already promoted"), "{e}");
        assert_eq!(Manifest::load(&dir).unwrap(), m);
    }

    #[test]
    fn promotion_needs_a_validated_run() {
        let ws = Scratch::new("unvalidated");
        let dir = generated_run(&ws.0, "generated");
        let before = std::fs::read(dir.join(MANIFEST_FILE)).unwrap();
        let e = promote(&ws.0, &dir).unwrap_err().to_string();
        assert!(
            e.contains("status `generated`") && e.contains("agentfile validate"),
            "{e}"
        );
        assert_eq!(std::fs::read(dir.join(MANIFEST_FILE)).unwrap(), before);
        assert!(!ws.0.join("workflows").exists());

        let e = promote(&ws.0, Path::new("artifacts"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds no manifest.json"), "{e}");
    }

    #[test]
    fn promotion_never_overwrites() {
        let ws = Scratch::new("exists");
        let dir = generated_run(&ws.0, "validated");
        let target = ws.0.join("workflows/meeting-notes");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("workflow.yaml"), "mine").unwrap();
        let e = promote(&ws.0, &dir).unwrap_err();
        assert!(
            matches!(&e, AuthorError::Exists(Exists::Target { target }) if target == "workflows/meeting-notes"),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(
            e.contains("already exists") && e.contains("remove or rename"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(target.join("workflow.yaml")).unwrap(),
            "mine"
        );
        assert_eq!(Manifest::load(&dir).unwrap().status, "validated");
    }

    #[test]
    fn promotion_checks_the_folder_names() {
        let ws = Scratch::new("moved");
        let dir = generated_run(&ws.0, "validated");
        let moved = ws.0.join("artifacts/other-name").join(RUN);
        std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
        std::fs::rename(&dir, &moved).unwrap();
        let e = promote(&ws.0, &moved).unwrap_err().to_string();
        assert!(
            e.contains("artifacts/meeting-notes/2026-11-25T10-00-00"),
            "{e}"
        );
        assert!(!ws.0.join("workflows").exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_failed_promotion_is_recorded_and_may_be_retried() {
        let ws = Scratch::new("retry");
        let dir = generated_run(&ws.0, "validated");
        let link = dir.join("05-skills/link.md");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        let e = promote(&ws.0, &dir).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        let m = Manifest::load(&dir).unwrap();
        assert_eq!(m.status, "failed");
        assert_eq!(m.phases.promotion.status, "failed");
        assert_eq!(m.errors.last().unwrap().phase, "promotion");
        assert!(!ws.0.join("workflows/meeting-notes").exists());
        assert_eq!(
            std::fs::read_dir(ws.0.join("workflows")).unwrap().count(),
            0
        );

        std::fs::remove_file(&link).unwrap();
        promote(&ws.0, &dir).unwrap();
        assert_eq!(Manifest::load(&dir).unwrap().status, "archived");
    }

    #[test]
    fn materialize_is_idempotent() {
        let dir = Scratch::new("materialize");
        let wf = materialize(&dir.0).unwrap();
        assert_eq!(wf, dir.0.join("workflow.yaml"));
        for (rel, content) in GENERATOR_FILES {
            assert_eq!(std::fs::read_to_string(dir.0.join(rel)).unwrap(), *content);
        }
        let stamp = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
        let before = stamp(&wf);
        std::fs::write(dir.0.join("agents/analyst.md"), "edited").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        materialize(&dir.0).unwrap();
        assert_eq!(stamp(&wf), before, "an unchanged file is not rewritten");
        assert_eq!(
            std::fs::read_to_string(dir.0.join("agents/analyst.md")).unwrap(),
            GENERATOR_FILES[1].1
        );
    }

    fn workflow_schema_errors(text: &str) -> Vec<String> {
        let schema: Value = serde_json::from_str(include_str!(
            "../../workflow-yaml/src/schemas/workflow.schema.json"
        ))
        .unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let doc = agentfile_syntax::yaml::parse(text, 0).unwrap();
        validator
            .iter_errors(&doc.value)
            .map(|e| format!("{}: {e}", e.instance_path().as_str()))
            .collect()
    }

    #[test]
    fn the_generator_workflow_follows_the_schema() {
        assert_eq!(
            workflow_schema_errors(GENERATOR_WORKFLOW),
            Vec::<String>::new()
        );
        let doc = agentfile_syntax::yaml::parse(GENERATOR_WORKFLOW, 0).unwrap();
        assert_eq!(doc.value["name"], "workflow-creator");
        let produces: Vec<&str> = doc.value["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["produces"].as_str().unwrap())
            .collect();
        assert_eq!(
            produces,
            [
                "01-clarification.md",
                "02-design.md",
                "03-workflow.yaml",
                "04-agents/",
                "05-skills/",
                "06-scripts/",
                "07-review.md"
            ]
        );
        // Every agent and skill it names is in the package.
        for s in doc.value["steps"].as_array().unwrap() {
            for key in ["agent", "skill"] {
                let path = s[key].as_str().unwrap();
                assert!(GENERATOR_FILES.iter().any(|(p, _)| *p == path), "{path}");
            }
        }
    }

    #[test]
    fn the_generator_steps() {
        let ids: Vec<String> = generator_steps().into_iter().map(|(id, _)| id).collect();
        assert_eq!(
            ids,
            [
                "clarify",
                "design",
                "generate-config",
                "generate-agents",
                "generate-skills",
                "generate-scripts",
                "review"
            ]
        );
        assert_eq!(generator_steps()[0].1, "Clarify Request");
    }

    #[test]
    fn agent_and_skill_files_have_their_sections() {
        for (path, text) in GENERATOR_FILES {
            let sections: &[&str] = if path.starts_with("agents/") {
                &[
                    "# Agent: ",
                    "## Persona",
                    "## Responsibilities",
                    "## Rules",
                    "## Output Format",
                ]
            } else if path.starts_with("skills/") {
                &["# Skill: ", "## Purpose", "## Instructions", "## Examples"]
            } else {
                continue;
            };
            let mut at = 0;
            for section in sections {
                let found = text[at..].find(&format!("\n{section}")).map(|i| at + i + 1);
                let found = if at == 0 && text.starts_with(section) {
                    Some(0)
                } else {
                    found
                };
                at = found.unwrap_or_else(|| panic!("{path}: no `{section}` after byte {at}"));
            }
        }
    }

    /// The example the generate-yaml skill teaches is itself a valid workflow.
    #[test]
    fn the_taught_yaml_example_is_valid() {
        let skill = GENERATOR_FILES
            .iter()
            .find(|(p, _)| *p == "skills/generate-yaml.md")
            .unwrap()
            .1;
        let (_, example) = skill.split_once("## Examples\n").unwrap();
        assert_eq!(workflow_schema_errors(example), Vec::<String>::new());
    }
}
