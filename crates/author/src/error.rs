//! Why `create` or `promote` stopped: [`AuthorError`], whose text is what
//! the CLI prints and the MCP tools return.

use std::path::PathBuf;

use super::generate::{FileError, NameError};

/// Why the manifest schema bundled in the binary cannot be used (a build
/// bug, not the user's).
#[derive(Debug, thiserror::Error)]
pub enum BundledSchemaError {
    #[error("the bundled manifest schema is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the bundled manifest schema does not compile: {0}")]
    NotCompiling(jsonschema::ValidationError<'static>),
}

/// A `create` or `promote` that could not go on. Paths are shown as the
/// caller should see them (`shown`: relative to the workspace, with `/`).
#[derive(Debug, thiserror::Error)]
pub enum AuthorError {
    /// `cannot read …`, `cannot create …`, `cannot write …`, `cannot read
    /// the folder …`.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot copy {} to {}: {source}", from.display(), to.display())]
    CopyFile {
        from: PathBuf,
        to: PathBuf,
        source: std::io::Error,
    },
    /// `what` (`the staged workflow`, `the archive copy`) could not be
    /// renamed into `to`.
    #[error("cannot move {what} to {to}: {source}")]
    Move {
        what: &'static str,
        to: String,
        source: std::io::Error,
    },
    #[error("create needs a description of what the workflow should do")]
    NoDescription,
    #[error(transparent)]
    Name(#[from] NameError),
    #[error(transparent)]
    File(#[from] FileError),
    /// Something is already where `create` or `promote` would put its
    /// result; nothing was changed.
    #[error(transparent)]
    Exists(#[from] Exists),

    // The manifest.
    #[error("{} is not valid JSON: {source}", path.display())]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{} does not follow manifest.schema.json at `{pointer}`: {message}; \
         repair it or re-run `agentfile create`",
        path.display()
    )]
    BreaksSchema {
        path: PathBuf,
        pointer: String,
        message: String,
    },
    #[error(
        "{} cannot be read as a manifest: {source}; repair it or re-run `agentfile create`",
        path.display()
    )]
    NotAManifest {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot serialise the manifest: {0}")]
    SerialiseManifest(#[source] serde_json::Error),
    #[error("cannot serialise {}: {source}", path.display())]
    Serialise {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A manifest this module made breaks the schema: a bug, reported
    /// rather than written.
    #[error(
        "internal error: the manifest would break manifest.schema.json at `{pointer}` \
         ({message}); {} was left as it was — please report this",
        path.display()
    )]
    WouldBreakSchema {
        path: PathBuf,
        pointer: String,
        message: String,
    },
    /// The bundled manifest schema is broken (a build bug); found once and
    /// kept for every later call.
    #[error("{0}")]
    BundledSchema(&'static BundledSchemaError),

    // Staging a generated workflow.
    #[error("{} is not a regular file: a generated workflow.yaml must be one", path.display())]
    ConfigNotAFile { path: PathBuf },
    #[error(
        "{} is missing: the generation run wrote no workflow.yaml; re-run `agentfile create`",
        path.display()
    )]
    ConfigMissing { path: PathBuf },
    #[error("{} should be a folder (not a file or a link)", path.display())]
    NotAFolder { path: PathBuf },
    #[error(
        "refusing to copy the symbolic link {}: replace it with the file it points to",
        path.display()
    )]
    Symlink { path: PathBuf },
    #[error("{} is neither a regular file nor a folder; remove it", path.display())]
    OddFile { path: PathBuf },

    // Promotion.
    #[error(
        "{shown} holds no {}: promote takes a generation run folder, \
         artifacts/<name>/<run-id>, as `agentfile create` writes it",
        super::generate::MANIFEST_FILE
    )]
    NoManifest { shown: String },
    #[error(
        "{shown}/{} is for workflow `{name}`, run `{run_id}`, but sits in \
         {shown}: a run folder must be artifacts/{name}/{run_id}; move it back, or \
         promote the folder the manifest belongs to",
        super::generate::MANIFEST_FILE
    )]
    Misplaced {
        shown: String,
        name: String,
        run_id: String,
    },
    #[error(transparent)]
    NotPromotable(#[from] NotPromotable),
    #[error(
        "{shown}/{} is missing: the run has no workflow to promote; run \
         `agentfile create` again",
        super::generate::GENERATED_CONFIG
    )]
    NoWorkflow { shown: String },
    #[error("{archive} has no parent folder")]
    NoArchiveParent { archive: String },
    /// The workflow is in place; what came after failed.
    #[error("{name} was promoted to {target}, but {source}")]
    PromotedBut {
        name: String,
        target: String,
        source: Box<AuthorError>,
    },
    #[error("{name} was promoted to {target} and archived to {archive}, but {source}")]
    ArchivedBut {
        name: String,
        target: String,
        archive: String,
        source: Box<AuthorError>,
    },
    #[error(
        "{name} was promoted to {target}, but archiving the run failed: {source}; \
         copy {shown} to {archive} by hand"
    )]
    ArchiveFailed {
        name: String,
        target: String,
        shown: String,
        archive: String,
        source: Box<AuthorError>,
    },
    /// A failure that the manifest could not record either.
    #[error("{error} (and the manifest could not record it: {save})")]
    Unrecorded {
        error: Box<AuthorError>,
        save: Box<AuthorError>,
    },
}

/// Something already where `create` or `promote` would write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exists {
    #[error("workflows/{name} already exists; choose another name (--name)")]
    Name { name: String },
    /// Every run id tried (they are seconds) had its folder.
    #[error("{} already exists", dir.display())]
    RunDir { dir: PathBuf },
    #[error(
        "{target} already exists: promote never overwrites a workflow; remove or \
         rename it, then promote again"
    )]
    Target { target: String },
    #[error(
        "{archive} already exists: this run was archived before; remove it, then \
         promote again"
    )]
    Archive { archive: String },
    /// Another process placed the workflow while this one staged it.
    #[error(
        "{target} appeared while promoting: left it as it was; remove or rename \
         it, then promote again"
    )]
    Appeared { target: String },
}

/// Why a run cannot be promoted (from its manifest's status), and what to
/// do. `shown` is the run folder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotPromotable {
    #[error(
        "{shown} is still being generated (status `generating`), or its run was \
         interrupted: wait for `agentfile create` to finish, or run it again"
    )]
    Generating { shown: String },
    #[error(
        "{shown} has not passed validation (status `{status}`): validate it with \
         `agentfile validate {shown}`, or run `agentfile create` again"
    )]
    Unvalidated { shown: String, status: String },
    #[error("{shown} was already promoted to {target} (status `{status}`)")]
    AlreadyPromoted {
        shown: String,
        target: String,
        status: String,
    },
    /// `last`: the manifest's last error, `phase: message`.
    #[error("{shown} failed ({last}): fix the cause and run `agentfile create` again")]
    Failed { shown: String, last: String },
    #[error("{shown} has an unknown status `{status}` and cannot be promoted")]
    UnknownStatus { shown: String, status: String },
}
