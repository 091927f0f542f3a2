//! Test files for workflows (`*.test.yaml`, CONTRACT §19): what a workflow
//! should do, written as cases of inputs and expectations.
//!
//! Layout:
//!
//! - [`parse`] / [`load`] read a test file into a [`TestFile`], or every
//!   problem in it at once as [`Diagnostic`]s with `file:line:col` (the same
//!   diagnostics `agentfile validate` renders for workflows).
//! - [`check`] compares what a finished run produced ([`Observed`]) with a
//!   case's [`Expect`], and lists every expectation that does not hold.
//! - [`discover`] finds test files under a folder.
//! - [`report`] writes the cases' outcomes as text, JSON or JUnit XML.
//!
//! It deliberately runs nothing: no engine, no provider, no tools. The
//! `agentfile test` command runs each case through the run service (in a
//! scratch copy of the workspace, with the case's cassette) and hands the
//! result here to be judged and reported.

mod check;
mod discover;
mod read;
pub mod report;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentfile_plan::diag::{self, Diagnostic, SourceMap};

pub use check::{Failure, Observed, check, output};
pub use discover::{discover, is_test_file};

/// One test file: the workflow it tests and its cases.
#[derive(Debug, Clone, PartialEq)]
pub struct TestFile {
    /// The test file, as given.
    pub path: PathBuf,
    /// The workflow as written, joined to the test file's folder (a file of
    /// any format, or a folder holding one).
    pub workflow: PathBuf,
    pub cases: Vec<Case>,
}

/// One case: inputs to run the workflow with, and what must hold after.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub name: String,
    /// The line of the test file the case starts on (1-based).
    pub line: usize,
    pub inputs: BTreeMap<String, serde_json::Value>,
    /// Recorded model answers, joined to the test file's folder.
    pub cassette: Option<PathBuf>,
    pub expect: Expect,
    /// A model's verdict on one output (`--live` only).
    pub judge: Option<Judge>,
}

/// What a case's run must show; every field is optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expect {
    /// `completed`, `failed`, `waiting_approval`, `suspended` or `cancelled`.
    pub status: Option<String>,
    /// Per output, matchers that must all hold.
    pub outputs: BTreeMap<String, Vec<Matcher>>,
    /// Tools that must have been called at least once.
    pub tools: Vec<String>,
    /// Ceilings: model responses, tokens in and out, estimated cost.
    pub max_turns: Option<u64>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

/// One expectation on an output.
#[derive(Debug, Clone, PartialEq)]
pub enum Matcher {
    /// The output is this JSON value.
    Equals(serde_json::Value),
    /// The output's text holds this (a string as is, other values as compact
    /// JSON).
    Contains(String),
    /// A regular expression found in the output's text; it compiled when the
    /// test file was read.
    Matches(String),
    /// A JSON Schema the output is valid against; it compiled when the test
    /// file was read.
    Schema(serde_json::Value),
}

/// Ask a model whether an output meets a criterion.
#[derive(Debug, Clone, PartialEq)]
pub struct Judge {
    pub output: String,
    pub criteria: String,
}

/// The states a run ends in (or stops at) that `expect.status` may name.
pub const STATUSES: &[&str] = &[
    "completed",
    "failed",
    "waiting_approval",
    "suspended",
    "cancelled",
];

/// The largest test file [`load`] reads (the same bound as a workflow's).
pub const MAX_TEST_FILE_BYTES: u64 = agentfile_syntax::MAX_WORKFLOW_BYTES;

/// How strictly a test file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// A `cassette:` that does not exist is an error. `agentfile test --record`
    /// reads with `false`: recording is what creates them.
    pub require_cassettes: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            require_cassettes: true,
        }
    }
}

/// A test file that could not be read: every problem found, and the sources
/// their spans point into.
#[derive(Debug, Clone, thiserror::Error)]
pub struct Invalid {
    /// The test file, as given.
    pub path: PathBuf,
    /// The test file's text (empty when it could not be read at all).
    pub sources: SourceMap,
    /// Sorted by position; at most [`diag::MAX_DIAGNOSTICS_PER_FILE`].
    pub diagnostics: Vec<Diagnostic>,
    /// Errors found but left out of `diagnostics`.
    pub omitted: usize,
    /// The workflow the file names, when that part of it was readable and
    /// the path exists: `validate` checks it as well.
    pub workflow: Option<PathBuf>,
}

impl Invalid {
    /// Errors found, listed or omitted (a test file has no warnings).
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count() + self.omitted
    }

    /// Every diagnostic rendered for a person, then
    /// `PATH: invalid — N errors`.
    pub fn render(&self, style: diag::Style) -> String {
        let mut out = String::new();
        for d in &self.diagnostics {
            out.push_str(&diag::render(&self.sources, d, style));
        }
        if let Some(note) = diag::omitted_note(self.omitted, 0) {
            out.push_str(&note);
            out.push('\n');
        }
        let n = self.errors();
        out.push_str(&format!(
            "{}: invalid — {n} error{}\n",
            self.path.display(),
            if n == 1 { "" } else { "s" }
        ));
        out
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.render(diag::Style::default()).trim_end())
    }
}

/// Read and check a test file's text: every problem at once.
pub fn parse(path: &Path, text: &str) -> Result<TestFile, Invalid> {
    parse_with(path, text, Options::default())
}

/// [`parse`] with [`Options`].
pub fn parse_with(path: &Path, text: &str, options: Options) -> Result<TestFile, Invalid> {
    read::parse(path, text, options)
}

/// Read the file (at most [`MAX_TEST_FILE_BYTES`]), then [`parse`] it.
pub fn load(path: &Path) -> Result<TestFile, Invalid> {
    load_with(path, Options::default())
}

/// [`load`] with [`Options`].
pub fn load_with(path: &Path, options: Options) -> Result<TestFile, Invalid> {
    read::load(path, options)
}
