//! `agentfile validate --format json`: diagnostics for machines.

use schemars::JsonSchema;
use serde::Serialize;

use crate::diag::{Diagnostic, Severity, SourceMap};
use crate::frontend::Analysis;

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

impl DiagnosticJson {
    pub fn new(map: &SourceMap, d: &Diagnostic, fallback_path: &str) -> DiagnosticJson {
        let (path, start, end) = match d.span {
            Some(s) => {
                let f = map.file(s.file);
                let (l, c) = f.line_col(s.start);
                let (el, ec) = f.line_col(s.end);
                (f.path.display().to_string(), Some((l, c)), Some((el, ec)))
            }
            None => (
                d.path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| fallback_path.to_owned()),
                None,
                None,
            ),
        };
        DiagnosticJson {
            severity: d.severity,
            code: d.code.to_owned(),
            message: d.message.clone(),
            path,
            line: start.map(|s| s.0),
            column: start.map(|s| s.1),
            end_line: end.map(|e| e.0),
            end_column: end.map(|e| e.1),
            hint: d.hint.clone(),
            notes: d
                .notes
                .iter()
                .map(|(span, message)| {
                    let f = map.file(span.file);
                    let (line, column) = f.line_col(span.start);
                    NoteJson {
                        message: message.clone(),
                        path: f.path.display().to_string(),
                        line,
                        column,
                    }
                })
                .collect(),
        }
    }
}

impl FileReport {
    pub fn new(a: &Analysis) -> FileReport {
        let path = a.path.display().to_string();
        FileReport {
            dialect: a.dialect.map(|d| d.as_str().to_owned()),
            ok: a.errors() == 0,
            diagnostics: a
                .diagnostics
                .iter()
                .map(|d| DiagnosticJson::new(&a.sources, d, &path))
                .collect(),
            omitted_diagnostics: a.omitted(),
            path,
        }
    }
}

impl ValidateReport {
    pub fn new(analyses: &[Analysis]) -> ValidateReport {
        let files: Vec<FileReport> = analyses.iter().map(FileReport::new).collect();
        let errors = analyses.iter().map(Analysis::errors).sum();
        let warnings = analyses.iter().map(Analysis::warnings).sum();
        ValidateReport {
            schema_version: REPORT_SCHEMA_VERSION,
            ok: errors == 0,
            errors,
            warnings,
            files,
        }
    }
}
