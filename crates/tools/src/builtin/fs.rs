//! `read`, `write`, `edit` and `ls`: plain file operations on a path the gate has
//! already resolved and allowed.
//!
//! These are blocking functions; the toolbox runs them on the blocking pool.
//! Every failure is a [`ToolOutput::error`] the model can act on (missing file,
//! a directory where a file was expected, text not found), never a panic.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::{first_newline, fit, human_bytes, note_room};
use crate::ToolOutput;
use crate::policy::paths::{self, Resolved};
use crate::policy::{Gate, Tool};

/// How many bytes are inspected for a NUL to call a file binary.
const BINARY_SNIFF: usize = 8 * 1024;

fn io_error(shown: &str, e: &std::io::Error) -> ToolOutput {
    let what = match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist".to_owned(),
        std::io::ErrorKind::PermissionDenied => "is not readable (permission denied)".to_owned(),
        _ => format!("cannot be accessed: {e}"),
    };
    ToolOutput::error(format!("`{shown}` {what}"))
}

/// `read{path, offset?, limit?}`: lines from `offset` (1-based), at most
/// `limit` of them, in at most `cap` bytes with the note after them.
///
/// The file is read in chunks, and a line only as far as the cap: a file that
/// is one gigabyte-long line costs the cap in memory, not the line. When the
/// answer stops early its note gives the file's true size and the `offset` to
/// go on from.
pub fn read(
    path: &Resolved,
    shown: &str,
    offset: Option<u64>,
    limit: Option<u64>,
    cap: usize,
) -> ToolOutput {
    let meta = match fs::metadata(&path.real) {
        Ok(m) => m,
        Err(e) => return io_error(shown, &e),
    };
    if meta.is_dir() {
        return ToolOutput::error(format!("`{shown}` is a directory; use ls to list it"));
    }
    if !meta.is_file() {
        // A FIFO or device would block or never end.
        return ToolOutput::error(format!("`{shown}` is not a regular file"));
    }
    let file = match fs::File::open(&path.real) {
        Ok(f) => f,
        Err(e) => return io_error(shown, &e),
    };
    let size = meta.len();
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let sniff = match reader.fill_buf() {
        Ok(b) => b,
        Err(e) => return io_error(shown, &e),
    };
    if sniff[..sniff.len().min(BINARY_SNIFF)].contains(&0) {
        return ToolOutput::ok(format!(
            "`{shown}` is a binary file ({size} bytes); not shown"
        ));
    }
    let first = offset.unwrap_or(1).max(1);
    let count = limit.unwrap_or(u64::MAX);
    let budget = cap.saturating_sub(note_room(cap));
    let mut pos = 0u64;
    let mut line_no = 1u64;
    // Whether the bytes skipped so far end inside a line (one without its
    // terminator, at the end of the file, still counts as a line).
    let mut mid_line = false;
    // Skip to the first line wanted without holding any line.
    while line_no < first {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) => return io_error(shown, &e),
        };
        if chunk.is_empty() {
            let lines = line_no - 1 + u64::from(mid_line);
            return ToolOutput::ok(format!(
                "`{shown}` has {lines} lines; nothing at offset {first}"
            ));
        }
        let used = match first_newline(chunk) {
            Some(i) => {
                line_no += 1;
                mid_line = false;
                i + 1
            }
            None => {
                mid_line = true;
                chunk.len()
            }
        };
        reader.consume(used);
        pos += used as u64;
    }
    let start = pos;
    let mut out = String::new();
    let mut line = Vec::new();
    let mut shown_lines = 0u64;
    let stop = loop {
        if shown_lines == count {
            match reader.fill_buf() {
                Ok([]) => break None,
                Ok(_) => break Some(Stop::Limit),
                Err(e) => return io_error(shown, &e),
            }
        }
        let room = budget.saturating_sub(out.len());
        line.clear();
        // At most `room + 1` bytes: one more than fits says it does not.
        let got = match (&mut reader)
            .take(room as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(n) => n,
            Err(e) => return io_error(shown, &e),
        };
        if got == 0 {
            break None;
        }
        let text = String::from_utf8_lossy(&line);
        if text.len() > room {
            if shown_lines > 0 {
                break Some(Stop::Full);
            }
            // Not even one line fits: show what does of it.
            let part = super::prefix(&text, room);
            out.push_str(part);
            pos += part.len().min(line.len()) as u64;
            break Some(Stop::LongLine);
        }
        out.push_str(&text);
        pos += got as u64;
        line_no += 1;
        shown_lines += 1;
    };
    if shown_lines == 0 && stop.is_none() {
        let lines = if first > 1 { line_no - 1 } else { 0 };
        if first > 1 {
            return ToolOutput::ok(format!(
                "`{shown}` has {lines} lines; nothing at offset {first}"
            ));
        }
        return ToolOutput::ok(String::new());
    }
    let Some(stop) = stop else {
        return ToolOutput::ok(out);
    };
    let last = line_no.saturating_sub(1).max(first);
    let range = if shown_lines > 1 {
        format!("lines {first}-{last}")
    } else {
        format!("line {first}")
    };
    let note = match stop {
        Stop::Limit | Stop::Full => format!(
            "[showed {range} (bytes {}-{pos}) of `{shown}`, which has {size} bytes in all{}; more lines follow: read again with offset={line_no} to continue]",
            start + 1,
            if matches!(stop, Stop::Full) {
                format!("; the answer is capped at {}", human_bytes(cap as u64))
            } else {
                String::new()
            },
        ),
        Stop::LongLine => format!(
            "[line {line_no} of `{shown}` is longer than the {} cap: showed its first {} bytes; the file has {size} bytes in all; read again with offset={} to go on after this line, or look inside it with grep]",
            human_bytes(cap as u64),
            pos - start,
            line_no + 1
        ),
    };
    ToolOutput::ok(fit(&out, &[note], cap, |shown_bytes, total| {
        format!("[cut to {shown_bytes} of {total} bytes]")
    }))
}

/// Why `read` stopped before the end of the file.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// `limit` lines were shown.
    Limit,
    /// The next line does not fit in what is left of the cap.
    Full,
    /// The first line wanted alone is longer than the cap.
    LongLine,
}

/// `write{path, content}`.
pub fn write(path: &Resolved, shown: &str, content: &str) -> ToolOutput {
    match fs::metadata(&path.real) {
        Ok(m) if m.is_dir() => return ToolOutput::error(format!("`{shown}` is a directory")),
        Ok(m) if !m.is_file() => {
            return ToolOutput::error(format!("`{shown}` is not a regular file"));
        }
        _ => {}
    }
    if let Some(parent) = path.real.parent()
        && let Err(e) = fs::create_dir_all(parent)
    {
        return ToolOutput::error(format!("cannot create the folder for `{shown}`: {e}"));
    }
    match fs::write(&path.real, content) {
        Ok(()) => ToolOutput::ok(format!("wrote {} bytes to `{shown}`", content.len())),
        Err(e) => ToolOutput::error(format!("cannot write `{shown}`: {e}")),
    }
}

/// `edit{path, old, new, replace_all?}`.
pub fn edit(path: &Resolved, shown: &str, old: &str, new: &str, replace_all: bool) -> ToolOutput {
    if old.is_empty() {
        return ToolOutput::error("`old` is empty; give the exact text to replace");
    }
    if old == new {
        return ToolOutput::error("`old` and `new` are the same; nothing to do");
    }
    match fs::metadata(&path.real) {
        Ok(m) if !m.is_file() => {
            return ToolOutput::error(format!("`{shown}` is not a regular file"));
        }
        Err(e) => return io_error(shown, &e),
        _ => {}
    }
    let bytes = match fs::read(&path.real) {
        Ok(b) => b,
        Err(e) => return io_error(shown, &e),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolOutput::error(format!(
            "`{shown}` is not UTF-8 text; edit only changes text files"
        ));
    };
    let count = text.matches(old).count();
    if count == 0 {
        let hint = if !old.trim().is_empty() && text.contains(old.trim()) {
            " (it does occur with different leading or trailing whitespace)"
        } else {
            ""
        };
        return ToolOutput::error(format!(
            "the text to replace was not found in `{shown}`{hint}; read the file and copy the text exactly"
        ));
    }
    if count > 1 && !replace_all {
        return ToolOutput::error(format!(
            "the text to replace occurs {count} times in `{shown}`; include more surrounding text to make it unique, or set replace_all"
        ));
    }
    let updated = if replace_all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    match fs::write(&path.real, updated) {
        Ok(()) => ToolOutput::ok(format!(
            "replaced {count} occurrence{} in `{shown}`",
            if count == 1 { "" } else { "s" }
        )),
        Err(e) => ToolOutput::error(format!("cannot write `{shown}`: {e}")),
    }
}

/// `ls{path}`: entries `ls`'s own rules do not allow, or that any file tool's
/// deny rules name, are not listed.
pub fn ls(gate: &Gate, path: &Resolved, shown: &str, max_entries: usize) -> ToolOutput {
    let dir = &path.real;
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return ToolOutput::error(format!("`{shown}` is not a directory; use read"));
        }
        Err(e) => return io_error(shown, &e),
    };
    let mut lines = Vec::new();
    let mut hidden = 0usize;
    for entry in entries.flatten() {
        let p = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(meta) = fs::symlink_metadata(&p) else {
            continue;
        };
        let (real, is_link) = if meta.file_type().is_symlink() {
            match paths::realpath(&p) {
                Ok(r) => (r, true),
                Err(_) => {
                    hidden += 1;
                    continue;
                }
            }
        } else {
            (p.clone(), false)
        };
        if !gate.listable(Tool::Ls, &real) {
            hidden += 1;
            continue;
        }
        let target = if is_link {
            fs::metadata(&real).ok()
        } else {
            Some(meta)
        };
        let line = match target {
            Some(m) if m.is_dir() => format!("{name}/"),
            Some(m) => format!("{name}  ({} bytes)", m.len()),
            None => format!("{name}  (broken link)"),
        };
        lines.push(line);
    }
    lines.sort();
    let total = lines.len();
    let mut out = String::new();
    if total == 0 {
        out.push_str(&format!("`{shown}` is empty"));
    }
    for l in lines.iter().take(max_entries) {
        out.push_str(l);
        out.push('\n');
    }
    if total > max_entries {
        out.push_str(&format!(
            "[{} more entries not shown]\n",
            total - max_entries
        ));
    }
    if hidden > 0 {
        out.push_str(&format!(
            "[{hidden} entries not shown: the policy does not allow listing them]\n"
        ));
    }
    ToolOutput::ok(out.trim_end().to_owned())
}

/// Shown form of a resolved path: relative to the workspace when inside it.
pub fn shown(path: &Resolved, workspace: &Path) -> String {
    paths::display_relative(&path.real, workspace)
}
