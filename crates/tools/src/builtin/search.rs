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
//! A file is searched through [`Bounded`], which hands the searcher at most
//! [`GrepOptions::max_line_bytes`] of any line and at most
//! [`GrepOptions::max_file_bytes`] of any file, reading in chunks: a file with
//! a gigabyte-long line costs a megabyte of memory, not the gigabyte twice over
//! (grep-searcher's buffer otherwise grows to hold the whole line). What was
//! cut is said in the tool's output, file by file.
//!
//! What these are not: a shell glob or a full ripgrep. No `--type`, no
//! multi-line mode, no replacement; output is sorted by path so the same search
//! gives the same answer every time.

use std::io::Read;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use globset::GlobBuilder;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::WalkState;
use ignore::overrides::OverrideBuilder;

use super::{first_newline, fit, human_bytes, note_room, some_names};
use crate::ToolOutput;
use crate::policy::paths::{self, Resolved};
use crate::policy::{Gate, Tool};

/// A glob or grep request that cannot be searched.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("`pattern` is empty")]
    EmptyPattern,
    #[error("`..` after a wildcard is not supported; put it before the wildcards")]
    DotDotAfterWildcard,
    #[error("invalid regular expression: {0}")]
    Regex(grep_regex::Error),
    #[error("invalid glob `{glob}`: {source}")]
    Glob { glob: String, source: ignore::Error },
}

/// Split a glob tool pattern into the directory to search (as the model would
/// write a path) and the pattern relative to it: `/etc/**/x` searches `/etc`,
/// `src/**/*.rs` with `path = "."` searches `.`.
pub fn split_glob(pattern: &str, path: Option<&str>) -> Result<(String, String), SearchError> {
    let pattern = pattern.trim();
    if pattern.is_empty() {
        return Err(SearchError::EmptyPattern);
    }
    let absolute = pattern.starts_with('/') || pattern.starts_with('~');
    let segs: Vec<&str> = pattern.split('/').collect();
    let first_glob = segs
        .iter()
        .position(|s| s.contains(['*', '?', '[', '{']))
        .unwrap_or(segs.len());
    if segs[first_glob..].contains(&"..") {
        return Err(SearchError::DotDotAfterWildcard);
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
        if gate.readable(Tool::Glob, &real) {
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
    /// Only the first this many bytes of a line are searched; the rest of a
    /// longer line is skipped (and the line counted in the result). Bounds the
    /// memory a search takes, whatever the file.
    pub max_line_bytes: usize,
    /// Only the first this many bytes of a file are searched. Bounds the time
    /// one huge file takes.
    pub max_file_bytes: u64,
    /// Worker threads; 0 for the number of CPUs.
    pub threads: usize,
}

/// Default [`GrepOptions::max_line_bytes`]: 1 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;
/// Default [`GrepOptions::max_file_bytes`]: 256 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 256 << 20;

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
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
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
    /// Files with lines longer than `max_line_bytes` (shown path, how many
    /// such lines), sorted by path.
    pub long_lines: Vec<(String, u64)>,
    /// Files larger than `max_file_bytes` (shown path, size), sorted by path.
    pub too_big: Vec<(String, u64)>,
    /// Files that could not be read (shown path, why), sorted by path.
    pub unreadable: Vec<(String, String)>,
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
pub fn grep(gate: &Gate, root: &Path, opts: &GrepOptions) -> Result<GrepResult, SearchError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(opts.case_insensitive)
        .fixed_strings(opts.fixed_strings)
        .line_terminator(Some(b'\n'))
        .build(&opts.pattern)
        .map_err(SearchError::Regex)?;
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
        skipped: Mutex::new(Skipped::default()),
    };
    if root.is_file() {
        if !gate.readable(Tool::Grep, root) {
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
            let bad = |source| SearchError::Glob {
                glob: g.clone(),
                source,
            };
            ob.add(g).map_err(bad)?;
            let ov = ob.build().map_err(bad)?;
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
                if !shared_ref.gate.readable(Tool::Grep, path) {
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
    let mut skipped = shared
        .skipped
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    skipped.long_lines.sort();
    skipped.too_big.sort();
    skipped.unreadable.sort();
    Ok(GrepResult {
        files,
        matches: shared.matches.load(Ordering::Relaxed),
        truncated: shared.stop.load(Ordering::Relaxed),
        denied: shared.denied.load(Ordering::Relaxed),
        long_lines: skipped.long_lines,
        too_big: skipped.too_big,
        unreadable: skipped.unreadable,
    })
}

/// The grep tool's answer for the model, fitted to `opts.max_output` bytes
/// with its notes (what was cut or skipped, and how to narrow) after the cap.
pub fn grep_tool(gate: &Gate, root: &Resolved, opts: &GrepOptions) -> ToolOutput {
    // Leave room under the cap for the notes, so the cap never cuts one.
    let mut search = opts.clone();
    search.max_output = opts.max_output.saturating_sub(note_room(opts.max_output));
    let result = match grep(gate, &root.real, &search) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let mut body = result.text();
    if result.files.is_empty() {
        body = format!("no matches for `{}`", opts.pattern);
    }
    let body = body.trim_end();
    let names = |v: &[String]| some_names(v, 5);
    let mut notes = Vec::new();
    if result.truncated {
        notes.push(format!(
            "[output stopped at the {} cap after {} matches in {} files; more may follow: narrow the search with path or glob]",
            human_bytes(opts.max_output as u64),
            result.matches,
            result.files.len()
        ));
    }
    if !result.long_lines.is_empty() {
        let lines: u64 = result.long_lines.iter().map(|(_, n)| n).sum();
        let files: Vec<String> = result
            .long_lines
            .iter()
            .map(|(p, _)| format!("`{p}`"))
            .collect();
        notes.push(format!(
            "[{lines} lines longer than {} were searched only in their first {} (the line cap), in {}]",
            human_bytes(opts.max_line_bytes as u64),
            human_bytes(opts.max_line_bytes as u64),
            names(&files)
        ));
    }
    if !result.too_big.is_empty() {
        let files: Vec<String> = result
            .too_big
            .iter()
            .map(|(p, size)| format!("`{p}` ({})", human_bytes(*size)))
            .collect();
        notes.push(format!(
            "[{} files were searched only in their first {} (the per-file cap): {}; matches past that are not shown; read such a file by parts with read offset/limit]",
            result.too_big.len(),
            human_bytes(opts.max_file_bytes),
            names(&files)
        ));
    }
    if !result.unreadable.is_empty() {
        let files: Vec<String> = result
            .unreadable
            .iter()
            .map(|(p, why)| format!("`{p}` ({why})"))
            .collect();
        notes.push(format!(
            "[{} files could not be read: {}]",
            result.unreadable.len(),
            names(&files)
        ));
    }
    if result.denied > 0 {
        notes.push(format!(
            "[{} files not searched: the policy does not allow reading them]",
            result.denied
        ));
    }
    let out = fit(body, &notes, opts.max_output, |shown, total| {
        format!("[output cut to its first {shown} of {total} bytes]")
    });
    ToolOutput::ok(out)
}

/// What a search left out, file by file.
#[derive(Debug, Default)]
struct Skipped {
    long_lines: Vec<(String, u64)>,
    too_big: Vec<(String, u64)>,
    unreadable: Vec<(String, String)>,
}

/// A reader that passes a file to the searcher with every line cut to at most
/// `max_line` bytes (the rest of a longer line is skipped, its line terminator
/// kept, so line numbers stay right) and stops after `max_scan` bytes of the
/// file. The searcher's buffer then never holds more than a few cut lines,
/// whatever the file holds.
struct Bounded<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    max_line: usize,
    /// Bytes of the current line passed on so far.
    line_len: usize,
    /// Dropping the rest of an over-long line.
    skipping: bool,
    /// Lines that were cut.
    cut_lines: u64,
}

impl<R: Read> Bounded<R> {
    fn new(inner: R, max_line: usize) -> Bounded<R> {
        Bounded {
            inner,
            buf: vec![0; 64 * 1024],
            pos: 0,
            len: 0,
            max_line: max_line.max(1),
            line_len: 0,
            skipping: false,
            cut_lines: 0,
        }
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            if self.pos == self.len {
                self.pos = 0;
                self.len = self.inner.read(&mut self.buf)?;
                if self.len == 0 {
                    return Ok(0);
                }
            }
            let avail = &self.buf[self.pos..self.len];
            if self.skipping {
                match first_newline(avail) {
                    Some(i) => {
                        // Keep the terminator: it ends the cut line.
                        self.pos += i;
                        self.skipping = false;
                        self.line_len = 0;
                    }
                    None => self.pos = self.len,
                }
                continue;
            }
            // No window is longer than a line may be, so a line that both
            // starts and ends inside one is short enough.
            let w = avail.len().min(out.len()).min(self.max_line);
            let window = &avail[..w];
            let room = self.max_line - self.line_len;
            let n = match first_newline(window) {
                Some(first) if first <= room => {
                    let last = window.iter().rposition(|b| *b == b'\n').unwrap_or(first);
                    self.line_len = w - last - 1;
                    w
                }
                Some(_) => room,
                None if room >= w => {
                    self.line_len += w;
                    w
                }
                None => room,
            };
            if n < w {
                // The current line goes on past the cap: pass on what fits
                // and drop the rest of it.
                self.line_len = self.max_line;
                self.skipping = true;
                self.cut_lines += 1;
            }
            out[..n].copy_from_slice(&window[..n]);
            self.pos += n;
            if n > 0 {
                return Ok(n);
            }
        }
    }
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
    skipped: Mutex<Skipped>,
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
        let shown = || paths::display_relative(path, self.workspace);
        let skipped = || self.skipped.lock().unwrap_or_else(|p| p.into_inner());
        // An unreadable file (vanished, permissions) is skipped, and said.
        let opened = std::fs::File::open(path).and_then(|f| Ok((f.metadata()?.len(), f)));
        let (size, file) = match opened {
            Ok(x) => x,
            Err(e) => {
                skipped().unreadable.push((shown(), e.kind().to_string()));
                return;
            }
        };
        let mut reader = Bounded::new(
            file.take(self.opts.max_file_bytes),
            self.opts.max_line_bytes,
        );
        if let Err(e) = searcher.search_reader(matcher, &mut reader, &mut sink) {
            skipped().unreadable.push((shown(), e.to_string()));
        }
        if reader.cut_lines > 0 {
            skipped().long_lines.push((shown(), reader.cut_lines));
        }
        if size > self.opts.max_file_bytes {
            skipped().too_big.push((shown(), size));
        }
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

    /// Every line cut to `max` bytes, terminators kept.
    fn cut_lines(data: &[u8], max: usize) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let mut cut = 0;
        for (i, line) in data.split(|b| *b == b'\n').enumerate() {
            if i > 0 {
                out.push(b'\n');
            }
            out.extend_from_slice(&line[..line.len().min(max)]);
            cut += u64::from(line.len() > max);
        }
        (out, cut)
    }

    /// Reads in pieces of uneven sizes, as the searcher might.
    struct Uneven<'a>(&'a [u8], usize);
    impl Read for Uneven<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            self.1 = self.1 * 7 % 13 + 1;
            let n = out.len().min(self.0.len()).min(self.1 * 997 % 5000 + 1);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn bounded_cuts_every_long_line_and_only_those() {
        let mut seed = 42u64;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for round in 0..200 {
            let mut data = Vec::new();
            for _ in 0..next(40) {
                let len = match next(4) {
                    0 => next(5),
                    1 => next(200),
                    _ => next(20_000),
                };
                data.extend((0..len).map(|i| b'a' + (i % 26) as u8));
                if next(10) > 0 {
                    data.push(b'\n');
                }
            }
            let max = [1, 2, 7, 64, 100, 4096, 1 << 20][round % 7];
            let mut reader = Bounded::new(Uneven(&data, round), max);
            let mut got = Vec::new();
            let mut piece = vec![0u8; 1 + round * 37 % 3000];
            loop {
                let n = reader.read(&mut piece).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&piece[..n]);
            }
            let (want, cut) = cut_lines(&data, max);
            assert!(got == want, "round {round}, max {max}");
            assert_eq!(reader.cut_lines, cut, "round {round}, max {max}");
        }
    }

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
