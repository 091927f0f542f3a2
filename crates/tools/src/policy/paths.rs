//! Paths as the policy sees them: expanded, absolute, normalised, and with every
//! symlink resolved, so that `..`, absolute paths, `~` and links pointing out of
//! the workspace all end up as the real place a tool would touch.
//!
//! What this is for: turning a path a model wrote (`../x`, `~/.ssh/id_rsa`,
//! `link/../../etc`) into the one path that is matched against `allow`/`deny`, and
//! compiling those patterns (`$WORKSPACE/**`, `~/.ssh/*`) into matchers where `*`
//! is one segment and `**` any depth.
//!
//! What it is not: a sandbox. Resolution happens at check time; a path that is
//! swapped for a symlink between the check and the tool's use is a race this
//! module cannot close. Tools narrow the window by acting on the resolved path the
//! gate hands them rather than on the model's spelling.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

/// How many symlinks one resolution may follow before it is called a loop
/// (the same limit as Linux's `MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a path could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("empty path")]
    Empty,
    #[error("path contains a NUL byte")]
    Nul,
    #[error("`~{0}` names another user's home, which is not supported")]
    OtherUser(String),
    #[error("`~` used but the home directory is unknown")]
    NoHome,
    #[error("too many levels of symbolic links in `{0}`")]
    SymlinkLoop(String),
}

/// Why a policy path pattern could not be expanded or compiled; each holds
/// the pattern as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("empty pattern")]
    Empty,
    #[error("pattern {0:?}: `~user` is not supported; write the path out")]
    OtherUser(String),
    #[error("pattern {0:?} uses `~` but HOME is not set")]
    NoHome(String),
    /// Its literal directory part does not resolve.
    #[error("pattern {raw:?}: {source}")]
    Resolve { raw: String, source: PathError },
    #[error("invalid pattern {raw:?}: {kind}")]
    Glob {
        raw: String,
        kind: globset::ErrorKind,
    },
}

/// A path after resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute and `..`-normalised, symlinks untouched: what the model named.
    pub lexical: PathBuf,
    /// Every symlink of the existing part followed (dangling ones too), then the
    /// rest normalised: the place a tool would actually read or write.
    pub real: PathBuf,
}

/// Expand `~` and make `raw` absolute against `base`, without normalising.
pub fn absolute(raw: &str, base: &Path, home: Option<&Path>) -> Result<PathBuf, PathError> {
    if raw.is_empty() {
        return Err(PathError::Empty);
    }
    if raw.contains('\0') {
        return Err(PathError::Nul);
    }
    if let Some(rest) = raw.strip_prefix('~') {
        let (user, tail) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        if !user.is_empty() {
            return Err(PathError::OtherUser(user.to_owned()));
        }
        let home = home.ok_or(PathError::NoHome)?;
        return Ok(if tail.is_empty() {
            home.to_path_buf()
        } else {
            home.join(tail)
        });
    }
    let p = Path::new(raw);
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    })
}

/// `path` with `.` dropped and `..` applied to the components before it (never
/// above the root). Symlinks are not consulted.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Resolve `raw` (relative to `base`) the way the kernel would, component by
/// component: a symlink is replaced by its target *before* a following `..` is
/// applied (so `link/..` is the link target's parent, as for `open(2)`), dangling
/// symlinks are followed to where they point (a write through one lands there),
/// and once a component does not exist the rest is normalised lexically.
pub fn resolve(raw: &str, base: &Path, home: Option<&Path>) -> Result<Resolved, PathError> {
    let abs = absolute(raw, base, home)?;
    let lexical = normalize(&abs);
    let real = realpath(&abs)?;
    Ok(Resolved { lexical, real })
}

/// The real path of an absolute path, tolerating parts that do not exist.
pub fn realpath(abs: &Path) -> Result<PathBuf, PathError> {
    let pending: VecDeque<OsString> = abs
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    walk(PathBuf::from("/"), pending, abs)
}

/// Real paths of many absolute paths that share folders (a run's control
/// files): each folder is resolved once, then only the last component of
/// each path is looked at. The same answers as [`realpath`] for each.
#[derive(Default)]
pub struct RealPaths {
    folders: std::collections::HashMap<PathBuf, PathBuf>,
}

impl RealPaths {
    pub fn realpath(&mut self, abs: &Path) -> Result<PathBuf, PathError> {
        let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
            return realpath(abs);
        };
        let real_parent = match self.folders.get(parent) {
            Some(r) => r.clone(),
            None => {
                let r = realpath(parent)?;
                self.folders.insert(parent.to_owned(), r.clone());
                r
            }
        };
        walk(real_parent, VecDeque::from([name.to_os_string()]), abs)
    }
}

/// Resolve the components `pending` from `out`, a real folder (or a path
/// already past what exists), following symlinks; `abs` names the walk in
/// errors.
fn walk(
    mut out: PathBuf,
    mut pending: VecDeque<OsString>,
    abs: &Path,
) -> Result<PathBuf, PathError> {
    let mut missing = false;
    let mut hops = 0usize;
    while let Some(c) = pending.pop_front() {
        if c == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&c);
        if missing {
            out = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(PathError::SymlinkLoop(abs.display().to_string()));
                }
                let Ok(target) = std::fs::read_link(&next) else {
                    // Unreadable link: treat it as the end of what we can know.
                    missing = true;
                    out = next;
                    continue;
                };
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                let comps: Vec<OsString> = target
                    .components()
                    .filter_map(|c| match c {
                        Component::Normal(n) => Some(n.to_os_string()),
                        Component::ParentDir => Some(OsString::from("..")),
                        _ => None,
                    })
                    .collect();
                for comp in comps.into_iter().rev() {
                    pending.push_front(comp);
                }
            }
            Ok(_) => out = next,
            Err(_) => {
                // Not there (or not ours to look at): from here on nothing can be
                // a symlink we could follow, so the rest is plain text.
                missing = true;
                out = next;
            }
        }
    }
    Ok(out)
}

/// True when `path` is `dir` or below it (both already resolved).
pub fn is_within(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// `path` relative to `base` when inside it, else as it is; for display.
pub fn display_relative(path: &Path, base: &Path) -> String {
    match path.strip_prefix(base) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// A compiled policy path pattern: `*` one segment, `**` any depth.
#[derive(Debug, Clone)]
pub struct PathPattern {
    /// As written in policy.toml, for messages.
    pub source: String,
    matchers: Vec<Matcher>,
    /// The literal folder part, resolved.
    root: PathBuf,
}

/// One way a pattern matches. Most patterns (`$WORKSPACE/**`, the built-in
/// `.agentfile/**` and `.git/**`, an `allowed_dirs` entry) are a literal
/// directory with `/**` or nothing after it; those are compared as bytes,
/// because building a glob's regex costs about 0.25 M instructions each and
/// every run binds several. The rest are globs.
#[derive(Debug, Clone)]
enum Matcher {
    /// Exactly this path.
    Exact(Vec<u8>),
    /// This directory or anything below it (`dir/**`, which also means `dir`).
    Under(Vec<u8>),
    Glob(std::sync::Arc<GlobMatcher>),
}

impl Matcher {
    fn is_match(&self, path: &Path) -> bool {
        let p = path.as_os_str().as_encoded_bytes();
        match self {
            Matcher::Exact(e) => p == e.as_slice(),
            Matcher::Under(dir) => {
                p.starts_with(dir)
                    && (p.len() == dir.len() || dir.ends_with(b"/") || p[dir.len()] == b'/')
            }
            Matcher::Glob(g) => g.is_match(path),
        }
    }
}

/// Compiled globs by their expanded text, shared by every run in the process.
///
/// Each matcher is a compiled regex of some 13 KB; a policy binds about 16 of
/// them per run, so a server with 1,000 runs in flight held 200 MB of identical
/// matchers before they were shared. Bounded: past the cap, globs are compiled
/// per use again.
fn shared_matcher(text: &str) -> Result<std::sync::Arc<GlobMatcher>, globset::Error> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    const CAP: usize = 4096;
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<GlobMatcher>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(m) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(text) {
        return Ok(m.clone());
    }
    let m = Arc::new(
        GlobBuilder::new(text)
            .literal_separator(true)
            .build()?
            .compile_matcher(),
    );
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() < CAP {
        map.insert(text.to_owned(), m.clone());
    }
    Ok(m)
}

impl PathPattern {
    /// Compile `raw` with `$WORKSPACE` and `~` expanded. A relative pattern is
    /// anchored at the workspace (so the seed's `allow = ["**"]` means the
    /// workspace, not the whole disk). The literal directory part of the pattern is
    /// resolved like a path, so a pattern and a path name the same place even when
    /// the home directory or workspace sits behind a symlink. `dir/**` also
    /// matches `dir` itself, so listing the workspace root is allowed by
    /// `$WORKSPACE/**`.
    pub fn compile(
        raw: &str,
        workspace: &Path,
        home: Option<&Path>,
    ) -> Result<PathPattern, PatternError> {
        let (real, rest) = expand_parts(raw, workspace, home)?;
        let literal = real.as_os_str().as_encoded_bytes().to_vec();
        let matchers = match rest.as_str() {
            "" => vec![Matcher::Exact(literal)],
            "**" => vec![Matcher::Under(literal)],
            _ => {
                let expanded = glob_text(&real, &rest);
                let mut texts = vec![expanded.clone()];
                if let Some(base) = expanded.strip_suffix("/**")
                    && !base.is_empty()
                {
                    texts.push(base.to_owned());
                }
                let mut matchers = Vec::new();
                for t in texts {
                    let m = shared_matcher(&t).map_err(|e| PatternError::Glob {
                        raw: raw.to_owned(),
                        kind: e.kind().clone(),
                    })?;
                    matchers.push(Matcher::Glob(m));
                }
                matchers
            }
        };
        Ok(PathPattern {
            source: raw.to_owned(),
            matchers,
            root: real,
        })
    }

    pub fn is_match(&self, path: &Path) -> bool {
        self.matchers.iter().any(|m| m.is_match(path))
    }

    /// The path or folder this pattern names when it has no glob past
    /// `dir/**` (`$WORKSPACE/**`, `~/.ssh/**`, `/etc/passwd`): what a kernel
    /// rule can name. `None` for a glob.
    pub fn plain_root(&self) -> Option<PathBuf> {
        match self.matchers.first()? {
            Matcher::Exact(p) | Matcher::Under(p) => Some(PathBuf::from(std::ffi::OsString::from(
                String::from_utf8_lossy(p).into_owned(),
            ))),
            Matcher::Glob(_) => None,
        }
    }

    /// The literal folder a pattern starts with (`$WORKSPACE/src` of
    /// `$WORKSPACE/src/**/*.rs`): the smallest folder a kernel rule can
    /// name that covers every match.
    pub fn literal_root(&self) -> PathBuf {
        self.root.clone()
    }
}

/// Characters that make a path segment a glob.
fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

/// The absolute glob text of a policy pattern.
pub(crate) fn expand_pattern(
    raw: &str,
    workspace: &Path,
    home: Option<&Path>,
) -> Result<String, PatternError> {
    let (real, rest) = expand_parts(raw, workspace, home)?;
    Ok(glob_text(&real, &rest))
}

/// `real` escaped, then the globbing `rest` (if any) after a `/`.
fn glob_text(real: &Path, rest: &str) -> String {
    let mut out = globset::escape(&real.display().to_string());
    if !rest.is_empty() {
        if !out.ends_with('/') {
            out.push('/');
        }
        out.push_str(rest);
    }
    out
}

/// A policy pattern split into its literal directory part, resolved like any
/// path (the home directory or workspace may sit behind a symlink), and the
/// globbing rest (empty when the whole pattern is literal).
fn expand_parts(
    raw: &str,
    workspace: &Path,
    home: Option<&Path>,
) -> Result<(PathBuf, String), PatternError> {
    let raw_trim = raw.trim();
    if raw_trim.is_empty() {
        return Err(PatternError::Empty);
    }
    let ws = workspace.display().to_string();
    let mut text = raw_trim
        .replace("${WORKSPACE}", &ws)
        .replace("$WORKSPACE", &ws);
    if let Some(rest) = text.strip_prefix('~') {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Err(PatternError::OtherUser(raw.to_owned()));
        }
        let home = home.ok_or_else(|| PatternError::NoHome(raw.to_owned()))?;
        text = format!("{}{rest}", home.display());
    }
    if !text.starts_with('/') {
        text = format!("{ws}/{text}");
    }
    // Split into the literal directory prefix and the globbing rest, resolve the
    // prefix like any path, and escape it (a workspace may contain `[`).
    let segments: Vec<&str> = text.split('/').collect();
    let first_glob = segments
        .iter()
        .position(|s| has_glob_meta(s))
        .unwrap_or(segments.len());
    let prefix = segments[..first_glob].join("/");
    let rest = segments[first_glob..].join("/");
    let prefix = if prefix.is_empty() {
        "/".to_owned()
    } else {
        prefix
    };
    let real = realpath(Path::new(&prefix)).map_err(|source| PatternError::Resolve {
        raw: raw.to_owned(),
        source,
    })?;
    Ok((real, rest))
}

/// `*` matches any run of characters (spaces and `/` included); everything else
/// is literal. A pattern ending in ` *` also matches the bare command
/// (`git log *` matches `git log`), because that is what people mean by it.
/// Used for bash command patterns and `[mcp]` `server:tool` patterns.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    if let Some(stem) = pattern.strip_suffix(" *")
        && stem == text
    {
        return true;
    }
    star_match(pattern.as_bytes(), text.as_bytes())
}

fn star_match(p: &[u8], t: &[u8]) -> bool {
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<usize> = None;
    let mut mark = 0usize;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            pi += 1;
            mark = ti;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_semantics() {
        assert!(wildcard_match("git log *", "git log --oneline -5"));
        assert!(wildcard_match("git log *", "git log"));
        assert!(!wildcard_match("git log *", "git logx"));
        assert!(wildcard_match("curl * | bash", "curl http://x/y | bash"));
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("pwd", "pwd"));
        assert!(!wildcard_match("pwd", "pwd -P"));
        assert!(wildcard_match("a*b*c", "axxbyyc"));
        assert!(!wildcard_match("a*b*c", "axxbyy"));
        assert!(wildcard_match("github:*", "github:create_issue"));
    }

    /// The byte matchers for literal patterns answer exactly what the globs
    /// they replace would, workspace names with glob characters included.
    #[test]
    fn literal_patterns_match_like_their_globs() {
        let ws_dirs = ["/w", "/w[1]", "/w{a,b}", "/w*", "/", "/a b/c"];
        let candidates = [
            "/",
            "/w",
            "/w/",
            "/w/x",
            "/w/x/y",
            "/wx",
            "/w1",
            "/w[1]",
            "/w[1]/f",
            "/w{a,b}",
            "/w{a,b}/.git",
            "/wa",
            "/w*",
            "/w*/z",
            "/wzz",
            "/a b/c",
            "/a b/c/d",
            "/a b/cd",
            "/w/.agentfile",
            "/w/.agentfile/sessions.db",
            "/w/.agentfilex",
            "/w/\nx",
        ];
        for ws in ws_dirs {
            let ws = Path::new(ws);
            for raw in [
                "$WORKSPACE/**",
                "$WORKSPACE/.agentfile/**",
                "$WORKSPACE",
                "/w/x",
                "/**",
            ] {
                let fast = PathPattern::compile(raw, ws, None).unwrap();
                let text = expand_pattern(raw, ws, None).unwrap();
                let mut globs = vec![text.clone()];
                if let Some(base) = text.strip_suffix("/**").filter(|b| !b.is_empty()) {
                    globs.push(base.to_owned());
                }
                let globs: Vec<GlobMatcher> = globs
                    .iter()
                    .map(|t| {
                        GlobBuilder::new(t)
                            .literal_separator(true)
                            .build()
                            .unwrap()
                            .compile_matcher()
                    })
                    .collect();
                for c in candidates {
                    let want = globs.iter().any(|g| g.is_match(c));
                    assert_eq!(
                        fast.is_match(Path::new(c)),
                        want,
                        "{raw} in {} against {c}",
                        ws.display()
                    );
                }
            }
        }
    }

    #[test]
    fn real_paths_of_shared_folders_match_realpath_one_by_one() {
        use std::os::unix::fs::symlink;
        let dir = std::env::temp_dir().join(format!("af-realpaths-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws/sub")).unwrap();
        std::fs::write(dir.join("ws/sub/file"), "x").unwrap();
        symlink(dir.join("ws/sub"), dir.join("ws/linked")).unwrap();
        symlink("sub/file", dir.join("ws/rel")).unwrap();
        symlink("loop", dir.join("ws/loop")).unwrap();
        let dir = realpath(&dir).unwrap();
        let mut reals = RealPaths::default();
        for p in [
            "ws/sub/file",
            "ws/linked/file",
            "ws/linked/missing",
            "ws/rel",
            "ws/missing/deeper/file",
            "ws/missing/other",
            "ws/linked",
            "ws",
        ] {
            let abs = dir.join(p);
            assert_eq!(
                reals.realpath(&abs).unwrap(),
                realpath(&abs).unwrap(),
                "{p}"
            );
        }
        assert!(matches!(
            reals.realpath(&dir.join("ws/loop")),
            Err(PathError::SymlinkLoop(_))
        ));
        assert_eq!(reals.realpath(Path::new("/")).unwrap(), PathBuf::from("/"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn normalize_never_climbs_above_root() {
        assert_eq!(
            normalize(Path::new("/a/../../b/./c")),
            PathBuf::from("/b/c")
        );
    }

    #[test]
    fn tilde_forms() {
        let home = Path::new("/home/u");
        let base = Path::new("/w");
        assert_eq!(
            absolute("~", base, Some(home)).unwrap(),
            PathBuf::from("/home/u")
        );
        assert_eq!(
            absolute("~/.ssh/id", base, Some(home)).unwrap(),
            PathBuf::from("/home/u/.ssh/id")
        );
        assert!(matches!(
            absolute("~root/x", base, Some(home)),
            Err(PathError::OtherUser(_))
        ));
        assert_eq!(
            absolute("a~b", base, Some(home)).unwrap(),
            PathBuf::from("/w/a~b")
        );
    }

    #[test]
    fn symlink_then_dotdot_follows_the_link() {
        let dir = std::env::temp_dir().join(format!("af-paths-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws")).unwrap();
        std::fs::create_dir_all(dir.join("out/deep")).unwrap();
        let dir = dir.canonicalize().unwrap();
        std::os::unix::fs::symlink(dir.join("out/deep"), dir.join("ws/link")).unwrap();
        std::os::unix::fs::symlink(dir.join("out/nothing-yet"), dir.join("ws/dangling")).unwrap();
        let ws = dir.join("ws");
        let r = resolve("link/../secret", &ws, None).unwrap();
        assert_eq!(r.real, dir.join("out/secret"));
        assert_eq!(r.lexical, ws.join("secret"));
        let d = resolve("dangling", &ws, None).unwrap();
        assert_eq!(d.real, dir.join("out/nothing-yet"));
        std::os::unix::fs::symlink("loop", ws.join("loop")).unwrap();
        assert!(matches!(
            resolve("loop/x", &ws, None),
            Err(PathError::SymlinkLoop(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn patterns_one_segment_and_any_depth() {
        let ws = Path::new("/nonexistent-ws");
        let home = Path::new("/nonexistent-home");
        let p = PathPattern::compile("$WORKSPACE/**", ws, Some(home)).unwrap();
        assert!(p.is_match(Path::new("/nonexistent-ws")));
        assert!(p.is_match(Path::new("/nonexistent-ws/a/b/c")));
        assert!(!p.is_match(Path::new("/nonexistent-wsx/a")));
        let s = PathPattern::compile("~/.ssh/*", ws, Some(home)).unwrap();
        assert!(s.is_match(Path::new("/nonexistent-home/.ssh/id_rsa")));
        assert!(!s.is_match(Path::new("/nonexistent-home/.ssh/a/b")));
        let rel = PathPattern::compile("src/*.rs", ws, Some(home)).unwrap();
        assert!(rel.is_match(Path::new("/nonexistent-ws/src/main.rs")));
        assert!(!rel.is_match(Path::new("/nonexistent-ws/src/a/main.rs")));
        assert!(PathPattern::compile("a/[", ws, Some(home)).is_err());
    }
}
