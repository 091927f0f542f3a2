//! `agentfile validate --format json`: diagnostics for machines.

use schemars::JsonSchema;
use serde::Serialize;

pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// The whole result of one `validate` call.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ValidateReport {
    pub schema_version: u32,
    /// True when no file has an error (warnings allowed).
    pub ok: bool,
    pub errors: usize,
    pub warnings: usize,
    pub files: Vec<FileReport>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FileReport {
    pub path: String,
    /// The detected format, when the file could be read.
    pub dialect: Option<String>,
    pub ok: bool,
    /// At most 200 per file (errors kept before warnings), sorted by position.
    pub diagnostics: Vec<DiagnosticJson>,
    /// How many more diagnostics this file has that `diagnostics` leaves out
    /// (the report's `errors` and `warnings` count them too). 0 when all are listed.
    pub omitted_diagnostics: usize,
}

/// One problem. Lines and columns are 1-based; columns count characters.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DiagnosticJson {
    pub severity: Severity,
    /// Stable kebab-case class of the problem (`undefined-agent`).
    pub code: String,
    pub message: String,
    /// The file the problem is in (the workflow or a prompt file it loads).
    pub path: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub end_line: Option<u32>,
    pub end_column: Option<u32>,
    pub hint: Option<String>,
    pub notes: Vec<NoteJson>,
}

/// A related place ("first defined here").
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NoteJson {
    pub message: String,
    pub path: String,
    pub line: u32,
    pub column: u32,
}

/// How bad a diagnostic is. Warnings never fail `validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}
