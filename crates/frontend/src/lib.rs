//! The front door for workflow files: read a file, decide its format, run that
//! format's front end, and return diagnostics and (when valid) a plan.
//!
//! Every command that takes a workflow path (`validate`, `inspect`, `run`, the
//! servers' equivalents) goes through [`analyze`], so they all agree on what a
//! file means and report problems the same way. [`registry`] holds one row per
//! format (its names and its `analyze`); above the front ends sit [`detect`],
//! [`discover`] and [`inspect`]. It is not the engine: it runs no workflow;
//! nor the workflow generator (`create`, `promote`), which is
//! `agentfile-author`, above it.

mod base;
pub mod discover;
pub mod inspect;
pub mod package;
pub mod registry;
pub mod report;
pub mod scripts;

use std::path::{Path, PathBuf};

use agentfile_config::Config;
pub mod detect;

/// agentrc's optional profiles (`--extensions`), for every transport's
/// options.
pub use agentfile_agentrc::extension_names;

use agentfile_plan::diag::{self, Diagnostic, SourceMap, Span};
use agentfile_plan::{Plan, ReadOptions};
use detect::{Detected, Dialect, detect};
pub use scripts::ScriptEngine;

pub use agentfile_syntax::MAX_WORKFLOW_BYTES;

/// What reading a file takes besides the file: the config (profiles a
/// workflow requires), a forced dialect, the options every format shares,
/// and where the packages a workflow's base names are found.
#[derive(Default, Clone)]
pub struct Options<'a> {
    pub config: Option<&'a Config>,
    /// Force a dialect instead of guessing (`--dialect`).
    pub dialect: Option<Dialect>,
    pub read: ReadOptions,
    /// Finds the package an agentrc FROM names (CONTRACT §20). `None`: the
    /// config's `[packages]` ([`package::ConfigPackages`]), as every door
    /// wants.
    pub packages: Option<&'a dyn Packages>,
}

impl std::fmt::Debug for Options<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("config", &self.config)
            .field("dialect", &self.dialect)
            .field("read", &self.read)
            .field("packages", &self.packages.map(|_| "…"))
            .finish()
    }
}

/// Finds the package a workflow's base names (agentrc FROM) on this machine.
pub trait Packages: Send + Sync {
    /// The local workflow file of the package `reference` names (as FROM writes it, without `oci://`), and its manifest digest (`sha256:…`).
    /// `None`: the reference names no agentfile package but a container
    /// image (a Docker Hub name such as `python:3.11-slim`, or an image in a
    /// registry), whose boundaries there are none to inherit.
    fn resolve(
        &self,
        reference: &str,
    ) -> Result<Option<ResolvedBase>, Box<dyn std::error::Error + Send + Sync>>;
}

/// A package [`Packages::resolve`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedBase {
    /// Its workflow file (an agentrc Agentfile), or the folder holding it.
    pub workflow: PathBuf,
    /// Its manifest digest, `sha256:…`.
    pub digest: String,
}

/// The result of reading one workflow file.
#[derive(Debug)]
pub struct Analysis {
    /// The path as the user gave it (a folder resolves to its `Agentfile`).
    pub path: PathBuf,
    pub sources: SourceMap,
    /// Sorted by file, then position; at most
    /// [`diag::MAX_DIAGNOSTICS_PER_FILE`], errors kept before warnings.
    pub diagnostics: Vec<Diagnostic>,
    /// Errors found but left out of `diagnostics` by the cap.
    pub omitted_errors: usize,
    /// Warnings found but left out of `diagnostics` by the cap.
    pub omitted_warnings: usize,
    pub dialect: Option<Dialect>,
    /// Present only when there are no errors.
    pub plan: Option<Plan>,
}

/// A workflow that did not lower into a plan. Shown as every diagnostic
/// rendered for a person, then `PATH: invalid — N error(s); …`; a file that
/// could not be read at all as that one sentence and its hint (there is no
/// list for `validate` to show again).
#[derive(Debug, Clone, thiserror::Error)]
pub struct Invalid {
    pub path: PathBuf,
    /// Errors found, listed or omitted.
    pub errors: usize,
    /// The diagnostics rendered, and the note on any the cap left out.
    pub rendered: String,
    /// Why the file could not be read, with the hint, when that is the one
    /// problem.
    pub unreadable: Option<String>,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.unreadable {
            Some(why) => f.write_str(why),
            None => write!(
                f,
                "{}{}: invalid — {} error{}; `agentfile validate` shows the same list",
                self.rendered,
                self.path.display(),
                self.errors,
                if self.errors == 1 { "" } else { "s" }
            ),
        }
    }
}

impl Analysis {
    /// Every error found, listed or omitted.
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count() + self.omitted_errors
    }

    /// Every warning found, listed or omitted.
    pub fn warnings(&self) -> usize {
        self.diagnostics.iter().filter(|d| !d.is_error()).count() + self.omitted_warnings
    }

    /// How many diagnostics the cap left out.
    pub fn omitted(&self) -> usize {
        self.omitted_errors + self.omitted_warnings
    }

    /// The plan, or every diagnostic rendered for a person and a closing
    /// line naming the file and the number of errors (what `run` prints for
    /// an invalid workflow).
    pub fn into_plan(self) -> Result<Plan, Invalid> {
        if let Some(plan) = self.plan {
            return Ok(plan);
        }
        let mut rendered = String::new();
        for d in &self.diagnostics {
            rendered.push_str(&diag::render(&self.sources, d, diag::Style::default()));
        }
        if let Some(note) = self.omitted_note() {
            rendered.push_str(&note);
            rendered.push('\n');
        }
        let unreadable = match self.diagnostics.as_slice() {
            [d] if d.code == "missing-file" && d.span.is_none() => Some(match &d.hint {
                Some(h) => format!("{}: {}\n  = hint: {h}", self.path.display(), d.message),
                None => format!("{}: {}", self.path.display(), d.message),
            }),
            _ => None,
        };
        Err(Invalid {
            errors: self.errors(),
            path: self.path,
            rendered,
            unreadable,
        })
    }

    /// Read a run request's workflow: its text when it carries one, else its
    /// file (what [`agentfile_engine::run::Load`] asks of a caller).
    pub fn load_for_run(
        path: &Path,
        source: Option<&str>,
        options: Options<'_>,
    ) -> Result<Plan, Invalid> {
        match source {
            Some(text) => analyze_bytes(path.to_path_buf(), text.as_bytes().to_vec(), options),
            None => analyze(path, options),
        }
        .into_plan()
    }

    /// The closing "… and N more errors" line, when the cap left some out.
    pub fn omitted_note(&self) -> Option<String> {
        diag::omitted_note(self.omitted_errors, self.omitted_warnings)
    }

    fn failed(path: PathBuf, d: Diagnostic) -> Analysis {
        Analysis::stopped(path, SourceMap::default(), d, None)
    }

    /// Analysis that stopped at one diagnostic, before any front end ran.
    fn stopped(
        path: PathBuf,
        sources: SourceMap,
        d: Diagnostic,
        dialect: Option<Dialect>,
    ) -> Analysis {
        Analysis {
            path,
            sources,
            diagnostics: vec![d],
            omitted_errors: 0,
            omitted_warnings: 0,
            dialect,
            plan: None,
        }
    }
}

/// Read and analyse a workflow file (or a folder holding an `Agentfile`).
pub fn analyze(path: &Path, opts: Options<'_>) -> Analysis {
    if package::is_package(path) {
        return analyze_package(path, opts);
    }
    let path = if path.is_dir() {
        match registry::file_in(path) {
            Some(p) => p,
            None => {
                return Analysis::failed(
                    path.to_owned(),
                    Diagnostic::file_error(
                        "missing-file",
                        path,
                        format!(
                            "the folder holds no workflow file ({})",
                            registry::FOLDER_FILES.join(", ")
                        ),
                    )
                    .with_hint(
                        "name the workflow file itself, or use `agentfile list` to find one",
                    ),
                );
            }
        }
    } else {
        path.to_owned()
    };
    match std::fs::metadata(&path) {
        Ok(m) if m.len() > MAX_WORKFLOW_BYTES => {
            return Analysis::failed(
                path.clone(),
                Diagnostic::file_error(
                    "unreadable-file",
                    &path,
                    format!(
                        "file is {} bytes; workflow files are limited to {MAX_WORKFLOW_BYTES} bytes",
                        m.len()
                    ),
                ),
            );
        }
        Ok(m) if !m.is_file() => {
            return Analysis::failed(
                path.clone(),
                Diagnostic::file_error("unreadable-file", &path, "not a regular file"),
            );
        }
        _ => {}
    }
    match std::fs::read(&path) {
        Ok(bytes) => analyze_bytes(path, bytes, opts),
        Err(e) => {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "check the path; `agentfile list` shows the workflows under a folder"
            } else {
                "check the file's permissions"
            };
            Analysis::failed(
                path.clone(),
                Diagnostic::file_error(
                    "missing-file",
                    &path,
                    format!("cannot read workflow file: {e}"),
                )
                .with_hint(hint),
            )
        }
    }
}

/// Read the workflow of the package `path` names (`oci://REF`): resolved,
/// pulled and checked first ([`package::resolve`]); the plan says which
/// package and digest it came from.
fn analyze_package(path: &Path, opts: Options<'_>) -> Analysis {
    let text = path.to_string_lossy();
    let resolved = match package::resolve(&text, opts.config) {
        Ok(r) => r,
        Err(e) => {
            let (code, hint) = package::diagnostic_code(&e);
            return Analysis::failed(
                path.to_owned(),
                Diagnostic::file_error(code, path, e.to_string()).with_hint(hint),
            );
        }
    };
    let mut a = analyze(&resolved.workflow, opts);
    if let Some(plan) = a.plan.as_mut() {
        plan.package = Some(resolved.package);
    }
    a
}

/// Analyse workflow text that is already in memory. Prompt files named by FROM
/// are still read relative to `path`.
pub fn analyze_bytes(path: PathBuf, bytes: Vec<u8>, opts: Options<'_>) -> Analysis {
    // A base an agentrc FROM names is found under the config's [packages]
    // unless the caller brought its own finder.
    let default = package::ConfigPackages {
        config: opts.config,
    };
    let opts = Options {
        packages: opts.packages.or(Some(&default)),
        ..opts
    };
    let mut sources = SourceMap::default();
    let (text, bad_utf8) = match String::from_utf8(bytes) {
        Ok(t) => (t, None),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let byte = e.as_bytes()[at];
            (
                String::from_utf8_lossy(e.as_bytes()).into_owned(),
                Some((at, byte)),
            )
        }
    };
    let text = match text.strip_prefix('\u{feff}') {
        Some(t) => t.to_owned(),
        None => text,
    };
    let file = sources.add(path.clone(), text);
    if let Some((at, byte)) = bad_utf8 {
        let d = Diagnostic::error(
            "not-utf8",
            Span::new(file, at, at + 1),
            format!("the file is not UTF-8 text: invalid byte 0x{byte:02X}"),
        )
        .with_hint("save the file as UTF-8");
        return Analysis::stopped(path, sources, d, None);
    }
    let text = &sources.file(file).text;
    let dialect = match (opts.dialect, detect(&path, text)) {
        // `--dialect` chooses between the two formats named `Agentfile`; a file
        // called workflow.yaml or WORKFLOW.md is that format whatever the flag.
        (
            _,
            Detected::Format(
                d @ (Dialect::WorkflowYaml | Dialect::WorkflowMd | Dialect::AgentMd),
                _,
            ),
        ) => d,
        (Some(d), _) => d,
        (None, Detected::Format(d, _)) => d,
        (None, Detected::Ambiguous { dsl, agentrc }) => {
            let d = Diagnostic::error(
                "ambiguous-dialect",
                Span::new(file, agentrc.offset, agentrc.offset + agentrc.word.len()),
                format!(
                    "cannot tell which Agentfile dialect this is: `{}` (line {}) is agentrc, `{}` (line {}) is the workflow DSL",
                    agentrc.word, agentrc.line, dsl.word, dsl.line
                ),
            )
            .with_hint("pass --dialect agentfile or --dialect agentrc");
            return Analysis::stopped(path, sources, d, None);
        }
    };
    let (mut diagnostics, plan) = (registry::format(dialect).analyze)(&mut sources, file, &opts);
    // With errors present, "unused" warnings are mostly echoes of them (a typo in
    // a USING makes the real agent look unused), so they wait for a clean file.
    if diagnostics.iter().any(Diagnostic::is_error) {
        diagnostics.retain(|d| d.is_error() || !d.code.starts_with("unused-"));
    }
    let has_errors = diagnostics.iter().any(Diagnostic::is_error);
    let (mut diagnostics, omitted_errors, omitted_warnings) = cap(diagnostics);
    // Only now, for what is shown: the search is linear in the names defined.
    diag::resolve_suggestions(&mut diagnostics);
    let plan = if has_errors { None } else { plan };
    Analysis {
        path,
        sources,
        diagnostics,
        omitted_errors,
        omitted_warnings,
        dialect: Some(dialect),
        plan,
    }
}

/// Keep at most [`diag::MAX_DIAGNOSTICS_PER_FILE`] diagnostics, the earliest
/// errors first and then the earliest warnings, sorted by file and position;
/// returns them with the numbers of errors and warnings left out.
fn cap(all: Vec<Diagnostic>) -> (Vec<Diagnostic>, usize, usize) {
    let key = |d: &Diagnostic| d.span.map(|s| (s.file.0, s.start, s.end));
    // The index keeps diagnostics at one place in the order they were found.
    let mut all: Vec<(usize, Diagnostic)> = all.into_iter().enumerate().collect();
    let total_errors = all.iter().filter(|(_, d)| d.is_error()).count();
    let total_warnings = all.len() - total_errors;
    if all.len() > diag::MAX_DIAGNOSTICS_PER_FILE {
        all.sort_by_key(|(i, d)| (!d.is_error(), key(d), *i));
        all.truncate(diag::MAX_DIAGNOSTICS_PER_FILE);
    }
    all.sort_by_key(|(i, d)| (key(d), *i));
    let kept: Vec<Diagnostic> = all.into_iter().map(|(_, d)| d).collect();
    let kept_errors = kept.iter().filter(|d| d.is_error()).count();
    let kept_warnings = kept.len() - kept_errors;
    (
        kept,
        total_errors - kept_errors,
        total_warnings - kept_warnings,
    )
}

/// Warn where the policy beside a workflow opens its control files to the
/// run (`[control] writable`): a model can then rewrite what its next run
/// reads. Nothing is said when there is no policy or it does not parse
/// (`run` reports that).
pub fn check_policy(a: &mut Analysis, policy: Option<&Path>) {
    let dir = a
        .path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Ok(p) = agentfile_tools::Policy::load(policy, dir) else {
        return;
    };
    let writable = p.control_writable();
    let Some(file) = p.source().map(Path::to_path_buf) else {
        return;
    };
    if writable.is_empty() {
        return;
    }
    let Ok(text) = std::fs::read_to_string(&file) else {
        return;
    };
    let offset = |line: usize, col: usize| -> usize {
        let start: usize = text
            .split_inclusive('\n')
            .take(line.saturating_sub(1))
            .map(str::len)
            .sum();
        let rest = text.get(start..).unwrap_or("");
        start
            + rest
                .char_indices()
                .nth(col.saturating_sub(1))
                .map_or(0, |(i, _)| i)
    };
    let spans: Vec<(String, usize)> = writable
        .into_iter()
        .map(|(pat, line, col)| (pat, offset(line, col)))
        .collect();
    let id = a.sources.add(file, text);
    for (pat, at) in spans {
        a.diagnostics.push(
            Diagnostic::warning(
                "control-writable",
                Span::new(id, at, at + pat.len() + 2),
                format!(
                    "`{pat}` in [control] writable lets this workflow's runs rewrite files that decide what its next run may do"
                ),
            )
            .with_hint(
                "keep it only for a workflow that generates workflows; review what each run changed before the next",
            ),
        );
    }
}
