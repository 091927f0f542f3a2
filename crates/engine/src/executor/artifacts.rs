//! The runtime's own file work for a plan: the files a node reads as its
//! input (`read_files`) and the artifacts it writes (`write_file`), both
//! judged by the policy as `read`/`write` calls through
//! [`ToolSet::host_path`], so a workflow file cannot reach what a model's
//! tool call could not.
//!
//! Paths are relative to the run's root (the workflow's folder for a
//! workflow.yaml). Reads are bounded per file and in total; writes replace
//! the file atomically, so a crash leaves the old artifact or the new one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::Stop;
use agentfile_tools::ToolSet;
use agentfile_tools::policy::Tool;

/// The most one input file may hold.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// The most one node may read in all.
pub const MAX_TOTAL_BYTES: u64 = 8 << 20;
/// The most files one folder may give.
pub const MAX_FOLDER_FILES: usize = 500;
/// How deep a folder is walked.
const MAX_DEPTH: usize = 8;

/// A file written or found, for its `artifact` event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Written {
    /// Relative to the run's root, with `/`.
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// Why a file operation stopped: denied by the policy (rule, reason) or
/// failed.
pub(crate) enum FileError {
    Denied {
        tool: &'static str,
        rule: String,
        reason: String,
        message: String,
    },
    Failed(String),
}

impl FileError {
    pub(crate) fn into_stop(self) -> Stop {
        match self {
            FileError::Denied { message, .. } => Stop::Denied(message),
            FileError::Failed(m) => Stop::Failed(m),
        }
    }
}

fn allowed(tools: &dyn ToolSet, tool: Tool, abs: &Path, shown: &str) -> Result<PathBuf, FileError> {
    tools
        .host_path(tool, &abs.to_string_lossy())
        .map_err(|d| FileError::Denied {
            tool: if tool == Tool::Read { "read" } else { "write" },
            message: format!(
                "{} `{shown}` was denied by the policy ({}): {}",
                if tool == Tool::Read {
                    "reading"
                } else {
                    "writing"
                },
                d.rule,
                d.reason
            ),
            rule: d.rule,
            reason: d.reason,
        })
}

/// Read `paths` (files or folders under `root`): one file's text as it is,
/// else each file in a `<file path="…">` block, in the order given (a
/// folder's files in name order).
pub(crate) fn read(
    tools: &dyn ToolSet,
    root: &Path,
    paths: &[String],
) -> Result<String, FileError> {
    let mut files: Vec<(String, String)> = Vec::new();
    let mut total = 0u64;
    let mut single = paths.len() == 1;
    for p in paths {
        let abs = root.join(p);
        let real = allowed(tools, Tool::Read, &abs, p)?;
        let meta = std::fs::metadata(&real)
            .map_err(|e| FileError::Failed(format!("cannot read `{p}`: {e}")))?;
        if meta.is_dir() {
            single = false;
            let mut found = Vec::new();
            walk(&real, "", 0, &mut found)
                .map_err(|e| FileError::Failed(format!("cannot list `{p}`: {e}")))?;
            if found.len() > MAX_FOLDER_FILES {
                return Err(FileError::Failed(format!(
                    "the folder `{p}` holds more than {MAX_FOLDER_FILES} files; name the files the step needs"
                )));
            }
            for rel in found {
                let shown = format!("{}/{rel}", p.trim_end_matches('/'));
                // Each file is judged on its own: a deny rule may cover one.
                let real = allowed(tools, Tool::Read, &root.join(&shown), &shown)?;
                let text = read_one(&real, &shown, &mut total)?;
                files.push((shown, text));
            }
        } else {
            let text = read_one(&real, p, &mut total)?;
            files.push((p.clone(), text));
        }
    }
    if single && files.len() == 1 {
        return Ok(files.pop().map(|(_, t)| t).unwrap_or_default());
    }
    let blocks: Vec<String> = files
        .into_iter()
        .map(|(p, t)| format!("<file path=\"{p}\">\n{}\n</file>", t.trim_end_matches('\n')))
        .collect();
    Ok(blocks.join("\n\n"))
}

fn read_one(real: &Path, shown: &str, total: &mut u64) -> Result<String, FileError> {
    let meta = std::fs::metadata(real)
        .map_err(|e| FileError::Failed(format!("cannot read `{shown}`: {e}")))?;
    if !meta.is_file() {
        return Err(FileError::Failed(format!(
            "`{shown}` is not a regular file"
        )));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(FileError::Failed(format!(
            "`{shown}` is {} bytes; a step's input file may hold at most {MAX_FILE_BYTES}",
            meta.len()
        )));
    }
    *total += meta.len();
    if *total > MAX_TOTAL_BYTES {
        return Err(FileError::Failed(format!(
            "the step's input files hold more than {MAX_TOTAL_BYTES} bytes in all"
        )));
    }
    let bytes = std::fs::read(real)
        .map_err(|e| FileError::Failed(format!("cannot read `{shown}`: {e}")))?;
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(FileError::Failed(format!(
            "`{shown}` is a binary file; a step's input must be text"
        )));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Regular files under `dir`, relative, sorted; hidden entries and symlinks
/// are skipped.
fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) -> std::io::Result<()> {
    if depth > MAX_DEPTH || out.len() > MAX_FOLDER_FILES {
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let Ok(t) = e.file_type() else { continue };
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if t.is_dir() {
            walk(&e.path(), &rel, depth + 1, out)?;
        } else if t.is_file() {
            out.push(rel);
        }
    }
    Ok(())
}

/// Write `content` to `path` under `root`, replacing it atomically.
pub(crate) fn write(
    tools: &dyn ToolSet,
    root: &Path,
    path: &str,
    content: &str,
) -> Result<Written, FileError> {
    let abs = root.join(path);
    let real = allowed(tools, Tool::Write, &abs, path)?;
    let failed = |e: std::io::Error| FileError::Failed(format!("cannot write `{path}`: {e}"));
    let dir = real
        .parent()
        .ok_or_else(|| FileError::Failed(format!("cannot write `{path}`: no parent folder")))?;
    std::fs::create_dir_all(dir).map_err(failed)?;
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &real)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(failed(e));
    }
    Ok(Written {
        path: path.to_owned(),
        bytes: content.len() as u64,
        sha256: hex(&Sha256::digest(content.as_bytes())),
    })
}

/// `<file path="a.md">…</file>` blocks of an answer: (path, content). The
/// same shape a step's several input files are given in.
pub(crate) fn file_blocks(answer: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = answer;
    while let Some(open) = rest.find("<file path=\"") {
        let after = &rest[open + "<file path=\"".len()..];
        let Some(q) = after.find('"') else { break };
        let name = after[..q].to_owned();
        let Some(gt) = after[q..].find('>') else {
            break;
        };
        let body = &after[q + gt + 1..];
        let Some(close) = body.find("</file>") else {
            break;
        };
        let content = body[..close].strip_prefix('\n').unwrap_or(&body[..close]);
        let content = content.strip_suffix('\n').unwrap_or(content);
        out.push((name, format!("{content}\n")));
        rest = &body[close + "</file>".len()..];
    }
    out
}

/// Why a file name from an answer cannot be written under its folder.
fn block_path_problem(p: &str) -> Option<&'static str> {
    let path = Path::new(p);
    if p.is_empty() || path.is_absolute() || p.starts_with('~') {
        return Some("it must be a path relative to the step's folder");
    }
    if path
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Some("it must stay inside the step's folder");
    }
    None
}

/// The files of the folder `path` a goal was to fill: first those its
/// `answer` gives as `<file path="…">` blocks are written, then the folder
/// must hold at least one file.
pub(crate) fn folder(
    tools: &dyn ToolSet,
    root: &Path,
    path: &str,
    answer: Option<&str>,
) -> Result<Vec<Written>, FileError> {
    let base = path.trim_end_matches('/');
    for (name, content) in answer.map(file_blocks).unwrap_or_default() {
        if let Some(p) = block_path_problem(&name) {
            return Err(FileError::Failed(format!(
                "the answer names the file `{name}`: {p}"
            )));
        }
        write(tools, root, &format!("{base}/{name}"), &content)?;
    }
    let real = allowed(tools, Tool::Read, &root.join(base), path)?;
    let mut found = Vec::new();
    if real.is_dir() {
        walk(&real, "", 0, &mut found)
            .map_err(|e| FileError::Failed(format!("cannot list `{path}`: {e}")))?;
    }
    if found.is_empty() {
        return Err(FileError::Failed(format!(
            "the step was to write its files into `{base}/`, but the folder holds none"
        )));
    }
    let mut out = Vec::new();
    for rel in found.into_iter().take(MAX_FOLDER_FILES) {
        let bytes = std::fs::read(real.join(&rel))
            .map_err(|e| FileError::Failed(format!("cannot read `{base}/{rel}`: {e}")))?;
        out.push(Written {
            path: format!("{base}/{rel}"),
            bytes: bytes.len() as u64,
            sha256: hex(&Sha256::digest(&bytes)),
        });
    }
    Ok(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_blocks_are_read_back() {
        let a = "Here:\n<file path=\"a.md\">\n# A\n</file>\n<file path=\"sub/b.md\">B</file>\n<file path=\"x";
        assert_eq!(
            file_blocks(a),
            vec![
                ("a.md".to_owned(), "# A\n".to_owned()),
                ("sub/b.md".to_owned(), "B\n".to_owned())
            ]
        );
        assert!(block_path_problem("../x").is_some());
        assert!(block_path_problem("/x").is_some());
        assert!(block_path_problem("a/b.md").is_none());
    }
}
