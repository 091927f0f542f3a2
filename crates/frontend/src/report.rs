//! The wire form of a validation (`protocol::diagnostics`) built from the
//! front end's analyses: lines and columns counted from the source map.

use crate::Analysis;
use agentfile_plan::diag::{Diagnostic, SourceMap};
use agentfile_wire::diagnostics::{
    DiagnosticJson, FileReport, NoteJson, REPORT_SCHEMA_VERSION, ValidateReport,
};

/// One diagnostic on the wire: lines and columns from the source map; a
/// diagnostic without a span names its own path, else `fallback_path`.
pub fn diagnostic_json(map: &SourceMap, d: &Diagnostic, fallback_path: &str) -> DiagnosticJson {
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

/// One file's analysis on the wire.
pub fn file_report(a: &Analysis) -> FileReport {
    let path = a.path.display().to_string();
    FileReport {
        dialect: a.dialect.map(|d| d.as_str().to_owned()),
        ok: a.errors() == 0,
        diagnostics: a
            .diagnostics
            .iter()
            .map(|d| diagnostic_json(&a.sources, d, &path))
            .collect(),
        omitted_diagnostics: a.omitted(),
        path,
    }
}

/// A validation of several files on the wire (`validate --format json`,
/// JSON-RPC `validate`).
pub fn validate_report(analyses: &[Analysis]) -> ValidateReport {
    let files: Vec<FileReport> = analyses.iter().map(file_report).collect();
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
