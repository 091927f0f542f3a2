//! `glob` and `grep`, built on ripgrep's crates: `ignore` walks the tree
//! (honouring .gitignore, in parallel for grep), `globset` matches names,
//! `grep-regex` and `grep-searcher` search contents.
//!
//! Both list only what the policy lets `read` read: every file is put through
//! [`Gate::readable`] before it is listed or opened, so a grep never reads a file
//! `read` could not, and symlinks are not followed (a link pointing out of the
//! workspace is neither listed by grep nor searched; glob lists it only when its
//! target is readable).
//!
//! What these are not: a shell glob or a full ripgrep. No `--type`, no
//! multi-line mode, no replacement; output is sorted by path so the same search
//! gives the same answer every time.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use globset::GlobBuilder;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::WalkState;
use ignore::overrides::OverrideBuilder;

use crate::tools::ToolOutput;
use crate::tools::policy::Gate;
use crate::tools::policy::paths::{self, Resolved};

/// Split a glob tool pattern into the directory to search (as the model would
/// write a path) and the pattern relative to it: `/etc/**/x` searches `/etc`,
/// `src/**/*.rs` with `path = "."` searches `.`.
pub fn split_glob(pattern: &str, path: Option<&str>) -> Result<(String, String), String> {
    let pattern = pattern.trim();
    if pattern.is_empty() {
        return Err("`pattern` is empty".to_owned());
    }
    let absolute = pattern.starts_with('/') || pattern.starts_with('~');
    let segs: Vec<&str> = pattern.split('/').collect();
    let first_glob = segs
        .iter()
        .position(|s| s.contains(['*', '?', '[', '{']))
        .unwrap_or(segs.len());
    if segs[first_glob..].contains(&"..") {
        return Err(
            "`..` after a wildcard is not supported; put it before the wildcards".to_owned(),
        );
    }
    // A pattern without wildcards names one path: search its directory for it.
    let split_at = if first_glob == segs.len() {
        segs.len().saturating_sub(1)
    } else {
        first_glob
    };
    let prefix = segs[..split_at].join("/");
    let rest = segs[split_at..].join("/");
    let base = if absolute {
        if prefix.is_empty() {
            "/".to_owned()
        } else {
            prefix
        }
    } else {
        let root = path.unwrap_or(".");
        if prefix.is_empty() {
            root.to_owned()
        } else {
            format!("{}/{prefix}", root.trim_end_matches('/'))
        }
    };
    Ok((base, rest))
}

/// `glob{pattern, path?, respect_gitignore?}` on a resolved, allowed base.
pub fn glob(
    gate: &Gate,
    base: &Resolved,
    pattern: &str,
    respect_gitignore: bool,
    max_entries: usize,
) -> ToolOutput {
    let matcher = match GlobBuilder::new(pattern).literal_separator(true).build() {
        Ok(g) => g.compile_matcher(),
        Err(e) => return ToolOutput::error(format!("invalid glob `{pattern}`: {}", e.kind())),
    };
    if !base.real.is_dir() {
        return ToolOutput::error(format!(
            "`{}` is not a directory",
            paths::display_relative(&base.real, gate.workspace())
        ));
    }
    let mentions_hidden = pattern.split('/').any(|s| s.starts_with('.'));
    let mut walker = ignore::WalkBuilder::new(&base.real);
    walker
        .standard_filters(respect_gitignore)
        .hidden(!mentions_hidden)
        .require_git(false)
        .follow_links(false);
    let mut found = Vec::new();
    for entry in walker.build().flatten() {
        let p = entry.path();
        let Ok(rel) = p.strip_prefix(&base.real) else {
            continue;
        };
        if rel.as_os_str().is_empty() || !matcher.is_match(rel) {
            continue;
        }
        let real = if entry.path_is_symlink() {
            match paths::realpath(p) {
                Ok(r) => r,
                Err(_) => continue,
            }
        } else {
            p.to_path_buf()
        };
        if gate.readable(&real) {
            found.push(paths::display_relative(p, gate.workspace()));
        }
    }
    found.sort();
    if found.is_empty() {
        return ToolOutput::ok(format!("no files match `{pattern}`"));
    }
    let total = found.len();
    let mut out: String = found
        .iter()
        .take(max_entries)
        .map(|s| format!("{s}\n"))
        .collect();
    if total > max_entries {
        out.push_str(&format!(
            "[{} more matches not shown; narrow the pattern]\n",
            total - max_entries
        ));
    }
    ToolOutput::ok(out.trim_end().to_owned())
}

/// How to grep.
#[derive(Debug, Clone)]
pub struct GrepOptions {
    pub pattern: String,
    pub case_insensitive: bool,
    pub fixed_strings: bool,
    /// Lines of context before and after each match.
    pub context: usize,
    /// Only files whose path (relative to the root) matches this glob.
    pub glob: Option<String>,
    pub respect_gitignore: bool,
    /// Search hidden files and folders too.
    pub hidden: bool,
    /// Stop once this much output has been produced.
    pub max_output: usize,
    /// Longer lines are cut (minified files would swamp the result).
    pub max_line_chars: usize,
    /// Worker threads; 0 for the number of CPUs.
    pub threads: usize,
}

impl GrepOptions {
    pub fn new(pattern: impl Into<String>) -> GrepOptions {
        GrepOptions {
            pattern: pattern.into(),
            case_insensitive: false,
            fixed_strings: false,
            context: 0,
            glob: None,
            respect_gitignore: true,
            hidden: false,
            max_output: usize::MAX,
            max_line_chars: usize::MAX,
            threads: 0,
        }
    }
}

/// What a grep found.
#[derive(Debug, Default)]
pub struct GrepResult {
    /// (path as shown, its output lines), sorted by path.
    pub files: Vec<(String, Vec<u8>)>,
    pub matches: u64,
    /// Output stopped at `max_output`.
    pub truncated: bool,
    /// Files skipped because `read` may not read them.
    pub denied: usize,
}

impl GrepResult {
    /// All output, in path order.
    pub fn text(&self) -> String {
        let mut out = Vec::new();
        for (_, bytes) in &self.files {
            out.extend_from_slice(bytes);
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Search `root` (a file or a directory, resolved and allowed) for the pattern.
pub fn grep(gate: &Gate, root: &Path, opts: &GrepOptions) -> Result<GrepResult, String> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(opts.case_insensitive)
        .fixed_strings(opts.fixed_strings)
        .line_terminator(Some(b'\n'))
        .build(&opts.pattern)
        .map_err(|e| format!("invalid regular expression: {e}"))?;
    let searcher = SearcherBuilder::new()
        .line_number(true)
        .before_context(opts.context)
        .after_context(opts.context)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .build();
    let shared = Shared {
        gate,
        workspace: gate.workspace(),
        opts,
        out_bytes: AtomicUsize::new(0),
        matches: AtomicU64::new(0),
        denied: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        files: Mutex::new(Vec::new()),
    };
    if root.is_file() {
        if !gate.readable(root) {
            shared.denied.fetch_add(1, Ordering::Relaxed);
        } else {
            let mut s = searcher.clone();
            shared.search_file(&mut s, &matcher, root);
        }
    } else {
        let mut walker = ignore::WalkBuilder::new(root);
        walker
            .standard_filters(opts.respect_gitignore)
            .hidden(!opts.hidden)
            .require_git(false)
            .follow_links(false)
            .threads(opts.threads);
        if let Some(g) = &opts.glob {
            let mut ob = OverrideBuilder::new(root);
            ob.add(g).map_err(|e| format!("invalid glob `{g}`: {e}"))?;
            let ov = ob.build().map_err(|e| format!("invalid glob `{g}`: {e}"))?;
            walker.overrides(ov);
        }
        let shared_ref = &shared;
        walker.build_parallel().run(|| {
            let mut searcher = searcher.clone();
            let matcher = matcher.clone();
            Box::new(move |entry| {
                if shared_ref.stop.load(Ordering::Relaxed) {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                // Not following symlinks, a file entry's path is already its
                // real path (the root is resolved), so the read check needs no
                // further system calls.
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                let path = entry.path();
                if !shared_ref.gate.readable(path) {
                    shared_ref.denied.fetch_add(1, Ordering::Relaxed);
                    return WalkState::Continue;
                }
                shared_ref.search_file(&mut searcher, &matcher, path);
                if shared_ref.stop.load(Ordering::Relaxed) {
                    WalkState::Quit
                } else {
                    WalkState::Continue
                }
            })
        });
    }
    let mut files = shared.files.into_inner().unwrap_or_else(|p| p.into_inner());
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(GrepResult {
        files,
        matches: shared.matches.load(Ordering::Relaxed),
        truncated: shared.stop.load(Ordering::Relaxed),
        denied: shared.denied.load(Ordering::Relaxed),
    })
}

/// The grep tool's answer for the model.
pub fn grep_tool(gate: &Gate, root: &Resolved, opts: &GrepOptions) -> ToolOutput {
    let result = match grep(gate, &root.real, opts) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e),
    };
    let mut out = result.text();
    if result.files.is_empty() {
        out = format!("no matches for `{}`", opts.pattern);
    }
    if result.truncated {
        out.push_str(&format!(
            "\n[output stopped at {} bytes; narrow the search with path or glob]",
            opts.max_output
        ));
    }
    if result.denied > 0 {
        out.push_str(&format!(
            "\n[{} files not searched: the policy does not allow reading them]",
            result.denied
        ));
    }
    ToolOutput::ok(out.trim_end().to_owned())
}

struct Shared<'a> {
    gate: &'a Gate,
    workspace: &'a Path,
    opts: &'a GrepOptions,
    out_bytes: AtomicUsize,
    matches: AtomicU64,
    denied: AtomicUsize,
    stop: AtomicBool,
    files: Mutex<Vec<(String, Vec<u8>)>>,
}

impl Shared<'_> {
    fn search_file(
        &self,
        searcher: &mut Searcher,
        matcher: &grep_regex::RegexMatcher,
        path: &Path,
    ) {
        let mut sink = FileSink {
            shared: self,
            path,
            shown: None,
            buf: Vec::new(),
            matches: 0,
        };
        // An unreadable file (vanished, permissions) is skipped like ripgrep does.
        let _ = searcher.search_path(matcher, path, &mut sink);
        if sink.matches > 0 {
            self.matches.fetch_add(sink.matches, Ordering::Relaxed);
            let shown = sink.shown.take().unwrap_or_default();
            let buf = std::mem::take(&mut sink.buf);
            self.files
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((shown, buf));
        }
    }
}

struct FileSink<'s, 'a> {
    shared: &'s Shared<'a>,
    path: &'s Path,
    /// Computed on the first match only: most files have none.
    shown: Option<String>,
    buf: Vec<u8>,
    matches: u64,
}

impl FileSink<'_, '_> {
    fn line(&mut self, sep: u8, number: Option<u64>, bytes: &[u8]) -> bool {
        let shown = self
            .shown
            .get_or_insert_with(|| paths::display_relative(self.path, self.shared.workspace));
        let before = self.buf.len();
        self.buf.extend_from_slice(shown.as_bytes());
        self.buf.push(sep);
        if let Some(n) = number {
            self.buf.extend_from_slice(n.to_string().as_bytes());
            self.buf.push(sep);
        }
        let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let max = self.shared.opts.max_line_chars;
        if line.len() > max {
            let text = String::from_utf8_lossy(line);
            let cut: String = text.chars().take(max).collect();
            self.buf.extend_from_slice(cut.as_bytes());
            self.buf.extend_from_slice(" […]".as_bytes());
        } else {
            self.buf.extend_from_slice(line);
        }
        self.buf.push(b'\n');
        let added = self.buf.len() - before;
        let total = self.shared.out_bytes.fetch_add(added, Ordering::Relaxed) + added;
        if total > self.shared.opts.max_output {
            self.shared.stop.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }
}

impl Sink for FileSink<'_, '_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.matches += 1;
        Ok(self.line(b':', m.line_number(), m.bytes()))
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        Ok(self.line(b'-', c.line_number(), c.bytes()))
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        self.buf.extend_from_slice(b"--\n");
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_glob_forms() {
        assert_eq!(
            split_glob("src/**/*.rs", None).unwrap(),
            ("./src".into(), "**/*.rs".into())
        );
        assert_eq!(
            split_glob("*.rs", Some("lib")).unwrap(),
            ("lib".into(), "*.rs".into())
        );
        assert_eq!(
            split_glob("/etc/*", None).unwrap(),
            ("/etc".into(), "*".into())
        );
        assert_eq!(
            split_glob("~/.ssh/*", None).unwrap(),
            ("~/.ssh".into(), "*".into())
        );
        assert_eq!(
            split_glob("../*", None).unwrap(),
            ("./..".into(), "*".into())
        );
        assert_eq!(
            split_glob("Cargo.toml", None).unwrap(),
            (".".into(), "Cargo.toml".into())
        );
        assert!(split_glob("*/../x", None).is_err());
    }
}
