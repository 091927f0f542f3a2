//! Reading a test file: YAML with spans, checked field by field, so every
//! problem is reported at once at its line and column. A field in error is
//! reported and skipped; the rest of the file is still checked.

use std::collections::{BTreeMap, HashMap};
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use agentfile_plan::diag::{self, Diagnostic, FileId, SourceMap, Span};
use agentfile_plan::values::{human, schema_problem};
use agentfile_syntax::yaml::{self, Doc, segment};
use serde_json::{Map, Value};

use crate::{
    Case, Expect, Invalid, Judge, MAX_TEST_FILE_BYTES, Matcher, Options, STATUSES, TestFile,
};

const TOP_KEYS: &[&str] = &["workflow", "cases"];
const CASE_KEYS: &[&str] = &["name", "inputs", "cassette", "expect", "judge"];
const EXPECT_KEYS: &[&str] = &[
    "status",
    "outputs",
    "tools",
    "max_turns",
    "max_tokens",
    "max_cost_usd",
];
const MATCHER_KEYS: &[&str] = &["equals", "contains", "matches", "schema"];
const JUDGE_KEYS: &[&str] = &["output", "criteria"];

/// Read `path` (bounded), then parse it.
pub(crate) fn load(path: &Path, options: Options) -> Result<TestFile, Invalid> {
    let fail = |d: Diagnostic| Invalid {
        path: path.to_owned(),
        sources: SourceMap::default(),
        diagnostics: vec![d],
        omitted: 0,
        workflow: None,
    };
    let unreadable = |why: String| fail(Diagnostic::file_error("unreadable-file", path, why));
    let too_large = |n: u64| {
        unreadable(format!(
            "file is {n} bytes; test files are limited to {MAX_TEST_FILE_BYTES} bytes"
        ))
    };
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => return Err(unreadable("not a regular file".into())),
        Ok(m) if m.len() > MAX_TEST_FILE_BYTES => return Err(too_large(m.len())),
        _ => {}
    }
    let mut bytes = Vec::new();
    // Bounded again while reading: the file may grow after the check.
    let read = std::fs::File::open(path).and_then(|f| {
        f.take(MAX_TEST_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map(|_| ())
    });
    if let Err(e) = read {
        let hint = if e.kind() == std::io::ErrorKind::NotFound {
            "check the path; `agentfile test` finds `*.test.yaml` files under a folder"
        } else {
            "check the file's permissions"
        };
        let d = Diagnostic::file_error("missing-file", path, format!("cannot read test file: {e}"))
            .with_hint(hint);
        return Err(fail(d));
    }
    if bytes.len() as u64 > MAX_TEST_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    match String::from_utf8(bytes) {
        Ok(text) => parse(
            path,
            text.strip_prefix('\u{feff}').unwrap_or(&text),
            options,
        ),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let byte = e.as_bytes()[at];
            let mut sources = SourceMap::default();
            let file = sources.add(
                path.to_owned(),
                String::from_utf8_lossy(e.as_bytes()).into_owned(),
            );
            let d = Diagnostic::error(
                "not-utf8",
                Span::new(file, at, at + 1),
                format!("the file is not UTF-8 text: invalid byte 0x{byte:02X}"),
            )
            .with_hint("save the file as UTF-8");
            Err(invalid(path, sources, vec![d], None))
        }
    }
}

/// Parse and check a test file's text.
pub(crate) fn parse(path: &Path, text: &str, options: Options) -> Result<TestFile, Invalid> {
    let mut sources = SourceMap::default();
    let file = sources.add(path.to_owned(), text.to_owned());
    let doc = match yaml::parse(text, 0) {
        Ok(doc) => doc,
        Err(e) => {
            let message = e.message.replace("the front matter", "the test file");
            let mut d = Diagnostic::error(e.code, Span::new(file, e.start, e.end), message);
            // The reader's other hints speak of workflows.
            if let Some(h) = e.hint.filter(|_| e.code == "yaml-syntax") {
                d = d.with_hint(h);
            }
            return Err(invalid(path, sources, vec![d], None));
        }
    };
    let mut r = Reader {
        file,
        text,
        dir: folder(path),
        options,
        doc,
        diags: Vec::new(),
        workflow: None,
    };
    let root = Arc::clone(&r.doc.value);
    let read = r.top(&root);
    match read {
        Some((workflow, cases)) if r.diags.is_empty() => Ok(TestFile {
            path: path.to_owned(),
            workflow,
            cases,
        }),
        _ => Err(invalid(path, sources, r.diags, r.workflow)),
    }
}

/// The diagnostics sorted by position and capped.
fn invalid(
    path: &Path,
    sources: SourceMap,
    mut diagnostics: Vec<Diagnostic>,
    workflow: Option<PathBuf>,
) -> Invalid {
    diagnostics.sort_by_key(|d| d.span.map(|s| (s.start, s.end)));
    let omitted = diagnostics
        .len()
        .saturating_sub(diag::MAX_DIAGNOSTICS_PER_FILE);
    diagnostics.truncate(diag::MAX_DIAGNOSTICS_PER_FILE);
    Invalid {
        path: path.to_owned(),
        sources,
        diagnostics,
        omitted,
        workflow,
    }
}

/// The folder relative paths in `path` start from.
fn folder(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::new(),
    }
}

/// `written` joined to `dir`, without `.` components (`..` stays: a symbolic
/// link may stand before it).
fn resolve(dir: &Path, written: &str) -> PathBuf {
    // A package (`oci://REF`) is no path of this folder.
    if written.starts_with("oci://") {
        return PathBuf::from(written);
    }
    let joined = dir.join(written);
    let mut out: PathBuf = joined
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// What a value is, for "must be X, not Y".
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "a whole number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// `cases[0].expect`, or `the test file` for the root.
fn place(ptr: &str) -> String {
    if ptr.is_empty() {
        "the test file".to_owned()
    } else {
        format!("`{}`", human(ptr))
    }
}

struct Reader<'t> {
    file: FileId,
    text: &'t str,
    /// The test file's folder: paths in it start here.
    dir: PathBuf,
    options: Options,
    doc: Doc,
    diags: Vec<Diagnostic>,
    /// The workflow named, once its path was read and found.
    workflow: Option<PathBuf>,
}

impl Reader<'_> {
    /// Where the node at `ptr` (its key, with `at_key`) was written, cut to
    /// its first line.
    fn span(&self, ptr: &str, at_key: bool) -> Span {
        let at = self.doc.at(ptr);
        let (start, end) = match (at_key, at.key) {
            (true, Some(k)) => k,
            _ => (at.start, at.end),
        };
        let end = end.min(self.text.len()).max(start);
        let start = start.min(end);
        let end = self
            .text
            .get(start..end)
            .and_then(|s| s.find('\n'))
            .map_or(end, |i| start + i);
        Span::new(self.file, start, end.max(start + 1))
    }

    fn error(
        &mut self,
        code: &'static str,
        ptr: &str,
        at_key: bool,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        let hint = hint.into();
        let mut d = Diagnostic::error(code, self.span(ptr, at_key), message);
        if !hint.is_empty() {
            d = d.with_hint(hint);
        }
        self.diags.push(d);
    }

    /// `ptr` holds a value of the wrong type.
    fn wrong_type(&mut self, ptr: &str, v: &Value, want: &str) {
        let field = ptr.rsplit('/').next().unwrap_or("");
        let hint = match v {
            Value::Bool(_) | Value::Number(_) | Value::Null if want == "a string" => {
                format!(
                    "YAML reads `{v}` as {}; quote it: `{field}: \"{v}\"`",
                    kind(v)
                )
            }
            _ => String::new(),
        };
        let message = format!("{} must be {want}, not {}", place(ptr), kind(v));
        self.error("test-file", ptr, false, message, hint);
    }

    /// A required field missing from the mapping at `ptr`.
    fn missing(&mut self, ptr: &str, field: &str, hint: &str) {
        let message = format!("{} has no `{field}`", place(ptr));
        self.error("test-file", ptr, false, message, hint);
    }

    /// The mapping at `ptr`, its keys checked against `keys` (with a
    /// did-you-mean for each unknown one).
    fn mapping<'v>(
        &mut self,
        v: &'v Value,
        ptr: &str,
        keys: &[&str],
        other: &str,
    ) -> Option<&'v Map<String, Value>> {
        let Value::Object(map) = v else {
            self.wrong_type(ptr, v, "a mapping");
            return None;
        };
        for k in map.keys().filter(|k| !keys.contains(&k.as_str())) {
            let hint = match diag::suggest(k, keys.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None if other.is_empty() => format!("the keys here are: {}", keys.join(", ")),
                None => other.to_owned(),
            };
            let at = format!("{ptr}/{}", segment(k));
            let message = format!("unknown key `{k}` in {}", place(ptr));
            self.error("unknown-field", &at, true, message, hint);
        }
        Some(map)
    }

    /// A string that is not blank.
    fn text(&mut self, v: &Value, ptr: &str) -> Option<String> {
        match v {
            Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
            Value::String(_) => {
                let message = format!("{} is empty", place(ptr));
                self.error("test-file", ptr, false, message, "");
                None
            }
            _ => {
                self.wrong_type(ptr, v, "a string");
                None
            }
        }
    }

    /// A whole number, zero or more.
    fn count(&mut self, v: &Value, ptr: &str) -> Option<u64> {
        let n = v.as_u64();
        if n.is_none() {
            self.wrong_type(ptr, v, "a whole number, zero or more");
        }
        n
    }

    /// A path relative to the test file's folder; with `must_exist`, one
    /// that exists.
    fn path(&mut self, v: &Value, ptr: &str, what: &str, must_exist: bool) -> Option<PathBuf> {
        let written = self.text(v, ptr)?;
        let resolved = resolve(&self.dir, &written);
        // A package (`oci://REF`) is pulled when the case runs.
        if !must_exist || resolved.exists() || written.starts_with("oci://") {
            return Some(resolved);
        }
        let message = format!("the {what} `{written}` does not exist");
        let hint = self.missing_hint(&written, &resolved);
        self.error("missing-file", ptr, false, message, hint);
        None
    }

    /// A close name in the folder `resolved` points into, or where paths
    /// start.
    fn missing_hint(&self, written: &str, resolved: &Path) -> String {
        let names: Vec<String> = resolved
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .and_then(|p| std::fs::read_dir(p).ok())
            .into_iter()
            .flatten()
            .take(1000)
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        let name = resolved
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(found) = diag::suggest(&name, names.iter().map(String::as_str)) {
            let prefix = written.rfind('/').map_or("", |i| &written[..=i]);
            return format!("did you mean `{prefix}{found}`?");
        }
        let dir = if self.dir.as_os_str().is_empty() {
            ".".to_owned()
        } else {
            self.dir.display().to_string()
        };
        format!("paths are relative to the test file's folder (`{dir}`)")
    }

    /// The line (1-based) the node at `ptr` starts on.
    fn line(&self, ptr: &str) -> usize {
        let at = self.doc.at(ptr).start.min(self.text.len());
        self.text.as_bytes()[..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// The whole file: its workflow and cases.
    fn top(&mut self, root: &Value) -> Option<(PathBuf, Vec<Case>)> {
        if root.is_null() {
            let hint = "write `workflow: PATH` and a list of `cases:`, each with a `name`";
            self.error("test-file", "", false, "the test file is empty", hint);
            return None;
        }
        if !root.is_object() {
            let message = format!(
                "a test file must be a mapping of `workflow:` and `cases:`, not {}",
                kind(root)
            );
            self.error("test-file", "", false, message, "");
            return None;
        }
        let map = self.mapping(root, "", TOP_KEYS, "")?;
        let workflow = match map.get("workflow") {
            Some(v) => self.path(v, "/workflow", "workflow", true),
            None => {
                let hint = "add `workflow: PATH`, relative to the test file's folder";
                self.missing("", "workflow", hint);
                None
            }
        };
        self.workflow.clone_from(&workflow);
        let hint = "add `cases:` with a list of cases, each with a `name` and what to `expect`";
        let cases = match map.get("cases") {
            None => {
                self.missing("", "cases", hint);
                Vec::new()
            }
            Some(Value::Array(items)) if items.is_empty() => {
                self.error("test-file", "/cases", false, "`cases` is empty", hint);
                Vec::new()
            }
            Some(Value::Array(items)) => self.cases(items),
            Some(v) => {
                self.wrong_type("/cases", v, "a list");
                Vec::new()
            }
        };
        Some((workflow?, cases))
    }

    /// Every case, and no two with one name.
    fn cases(&mut self, items: &[Value]) -> Vec<Case> {
        let mut out = Vec::new();
        let mut seen: HashMap<String, String> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            let ptr = format!("/cases/{i}");
            let name = item.get("name").and_then(Value::as_str).map(str::trim);
            if let Some(name) = name.filter(|n| !n.is_empty()) {
                let at = format!("{ptr}/name");
                match seen.get(name) {
                    Some(first) => {
                        let message = format!("two cases named `{name}`");
                        let note = (self.span(first, false), "first named here".to_owned());
                        let mut d = Diagnostic::error("duplicate-name", self.span(&at, false), message)
                            .with_hint("a case's name is how reports and `--case` find it: make each one unique in its file");
                        d.notes.push(note);
                        self.diags.push(d);
                    }
                    None => {
                        seen.insert(name.to_owned(), at);
                    }
                }
            }
            if let Some(case) = self.case(item, &ptr) {
                out.push(case);
            }
        }
        out
    }

    fn case(&mut self, v: &Value, ptr: &str) -> Option<Case> {
        let before = self.diags.len();
        let map = self.mapping(v, ptr, CASE_KEYS, "")?;
        let name = match map.get("name") {
            Some(n) => self.text(n, &format!("{ptr}/name")),
            None => {
                self.missing(ptr, "name", "add `name:` saying what the case checks");
                None
            }
        };
        let inputs = match map.get("inputs") {
            None => BTreeMap::new(),
            Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(v) => {
                self.wrong_type(
                    &format!("{ptr}/inputs"),
                    v,
                    "a mapping of input names to values",
                );
                BTreeMap::new()
            }
        };
        let cassette = map.get("cassette").and_then(|v| {
            let must = self.options.require_cassettes;
            self.path(v, &format!("{ptr}/cassette"), "cassette", must)
        });
        let expect = map
            .get("expect")
            .map(|v| self.expect(v, &format!("{ptr}/expect")))
            .unwrap_or_default();
        let judge = map
            .get("judge")
            .and_then(|v| self.judge(v, &format!("{ptr}/judge")));
        if self.diags.len() > before {
            return None;
        }
        Some(Case {
            name: name?,
            line: self.line(ptr),
            inputs,
            cassette,
            expect,
            judge,
        })
    }

    fn expect(&mut self, v: &Value, ptr: &str) -> Expect {
        let mut e = Expect::default();
        let Some(map) = self.mapping(v, ptr, EXPECT_KEYS, "") else {
            return e;
        };
        let at = |k: &str| format!("{ptr}/{k}");
        if let Some(v) = map.get("status") {
            e.status = self.status(v, &at("status"));
        }
        if let Some(v) = map.get("outputs") {
            e.outputs = self.outputs(v, &at("outputs"));
        }
        match map.get("tools") {
            None => {}
            Some(Value::Array(items)) => {
                for (i, t) in items.iter().enumerate() {
                    e.tools.extend(self.text(t, &format!("{ptr}/tools/{i}")));
                }
            }
            Some(v) => self.wrong_type(&at("tools"), v, "a list of tool names"),
        }
        e.max_turns = map
            .get("max_turns")
            .and_then(|v| self.count(v, &at("max_turns")));
        e.max_tokens = map
            .get("max_tokens")
            .and_then(|v| self.count(v, &at("max_tokens")));
        if let Some(v) = map.get("max_cost_usd") {
            match v.as_f64().filter(|c| *c >= 0.0) {
                Some(c) => e.max_cost_usd = Some(c),
                None => {
                    self.wrong_type(&at("max_cost_usd"), v, "a number of dollars, zero or more")
                }
            }
        }
        e
    }

    fn status(&mut self, v: &Value, ptr: &str) -> Option<String> {
        let s = self.text(v, ptr)?;
        if STATUSES.contains(&s.as_str()) {
            return Some(s);
        }
        // `fail` for `failed`: a prefix is as good a guess as a typo.
        let close = diag::suggest(&s, STATUSES.iter().copied())
            .or_else(|| STATUSES.iter().copied().find(|t| t.starts_with(s.as_str())));
        let hint = match close {
            Some(found) => format!("did you mean `{found}`?"),
            None => format!("the statuses are: {}", STATUSES.join(", ")),
        };
        let message = format!("unknown status `{s}`");
        self.error("unknown-status", ptr, false, message, hint);
        None
    }

    /// `outputs:`: per output, a matcher, a plain value (equals) or a list
    /// of matchers.
    fn outputs(&mut self, v: &Value, ptr: &str) -> BTreeMap<String, Vec<Matcher>> {
        let mut out = BTreeMap::new();
        let Value::Object(map) = v else {
            self.wrong_type(ptr, v, "a mapping of output names to matchers");
            return out;
        };
        for (name, m) in map {
            let at = format!("{ptr}/{}", segment(name));
            let matchers = match m {
                Value::Array(items) if items.is_empty() => {
                    let hint = "to expect an empty list, write `equals: []`";
                    let message = format!("{} is an empty list of matchers", place(&at));
                    self.error("test-file", &at, false, message, hint);
                    Vec::new()
                }
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.listed_matcher(item, &format!("{at}/{i}")))
                    .collect(),
                _ => self.matcher(m, &at).into_iter().collect(),
            };
            out.insert(name.clone(), matchers);
        }
        out
    }

    /// An item of a list of matchers: a matcher mapping, never a plain value
    /// (a list of plain values reads as the list expected).
    fn listed_matcher(&mut self, v: &Value, ptr: &str) -> Option<Matcher> {
        if v.is_object() {
            return self.matcher(v, ptr);
        }
        let message = format!("{} in a list of matchers is not a matcher", place(ptr));
        let hint = "write each as `{ equals: … }`, `{ contains: … }`, `{ matches: … }` or `{ schema: … }`; to expect the list itself, write `equals: [ … ]`";
        self.error("test-file", ptr, false, message, hint);
        None
    }

    /// One matcher: a mapping of exactly one kind, or a plain value (equals).
    fn matcher(&mut self, v: &Value, ptr: &str) -> Option<Matcher> {
        let Value::Object(map) = v else {
            return Some(Matcher::Equals(v.clone()));
        };
        let before = self.diags.len();
        let other = "a matcher is one of equals, contains, matches, schema; to expect this mapping itself, write `equals: { … }`";
        self.mapping(v, ptr, MATCHER_KEYS, other)?;
        let kinds: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| MATCHER_KEYS.contains(k))
            .collect();
        match kinds.as_slice() {
            [] if self.diags.len() == before => {
                let message = format!("{} has no matcher", place(ptr));
                self.error("test-file", ptr, false, message, other);
                None
            }
            [] => None,
            [one] => self.one_matcher(one, &map[*one], &format!("{ptr}/{one}")),
            [first, second, ..] => {
                let message = format!(
                    "{} has two matchers in one mapping (`{first}`, `{second}`)",
                    place(ptr)
                );
                let hint = "write a list, one matcher each: `[{ contains: … }, { matches: … }]`";
                self.error("test-file", &format!("{ptr}/{second}"), true, message, hint);
                None
            }
        }
    }

    fn one_matcher(&mut self, kind: &str, v: &Value, ptr: &str) -> Option<Matcher> {
        match kind {
            "equals" => Some(Matcher::Equals(v.clone())),
            "contains" => self.text(v, ptr).map(Matcher::Contains),
            "matches" => {
                let pattern = self.text(v, ptr)?;
                if let Err(e) = regex::Regex::new(&pattern) {
                    let message = format!(
                        "{} is not a regular expression: {}",
                        place(ptr),
                        regex_problem(&e)
                    );
                    let hint = "the syntax is Rust's `regex` crate; escape `\\ . + * ? ( ) [ ] { } | ^ $` with `\\` to match them literally";
                    self.error("bad-matcher", ptr, false, message, hint);
                    return None;
                }
                Some(Matcher::Matches(pattern))
            }
            _ => {
                if !matches!(v, Value::Object(_) | Value::Bool(_)) {
                    self.wrong_type(ptr, v, "a JSON Schema (a mapping)");
                    return None;
                }
                if let Some(problem) = schema_problem(v) {
                    let message = format!("{} is not a valid JSON Schema: {problem}", place(ptr));
                    self.error("bad-matcher", ptr, false, message, "");
                    return None;
                }
                Some(Matcher::Schema(v.clone()))
            }
        }
    }

    fn judge(&mut self, v: &Value, ptr: &str) -> Option<Judge> {
        let map = self.mapping(v, ptr, JUDGE_KEYS, "")?;
        let mut field = |name: &str, hint: &str| match map.get(name) {
            Some(v) => self.text(v, &format!("{ptr}/{name}")),
            None => {
                self.missing(ptr, name, hint);
                None
            }
        };
        let output = field("output", "add `output:`, the name of the output to judge");
        let criteria = field("criteria", "add `criteria:`, what the output must do");
        Some(Judge {
            output: output?,
            criteria: criteria?,
        })
    }
}

/// A regex error in one line: the parser's own words without its drawing.
fn regex_problem(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .unwrap_or_else(|| text.lines().next().unwrap_or("invalid"))
        .to_owned()
}

#[cfg(test)]
mod tests;
