//! Finding test files: `*.test.yaml` (or `*.test.yml`) under a folder.

use std::path::{Path, PathBuf};

/// Folders never searched: the runtime's own state, version control, build
/// output, installed packages (and every hidden folder).
const SKIPPED: &[&str] = &[".agentfile", ".git", "target", "node_modules"];

/// Folders nested deeper than this are not searched (a loop of bind mounts
/// cannot keep the search going).
const MAX_DEPTH: usize = 64;

/// Whether `path` is named like a test file (`*.test.yaml`, `*.test.yml`).
pub fn is_test_file(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        let stem = n
            .strip_suffix(".test.yaml")
            .or_else(|| n.strip_suffix(".test.yml"));
        stem.is_some_and(|s| !s.is_empty())
    })
}

/// The test files under `dir`, recursively and sorted: hidden folders,
/// `.agentfile`, `.git`, `target` and `node_modules` skipped, links to
/// folders not followed. A `dir` that is itself a test file is the one found.
pub fn discover(dir: &Path) -> Vec<PathBuf> {
    if is_test_file(dir) && dir.is_file() {
        return vec![dir.to_owned()];
    }
    let mut found = Vec::new();
    let mut todo = vec![(dir.to_owned(), 0usize)];
    while let Some((folder, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() {
                let skip = name.starts_with('.') || SKIPPED.contains(&name.as_ref());
                if !skip && depth < MAX_DEPTH {
                    todo.push((path, depth + 1));
                }
            } else if is_test_file(&path) && (kind.is_file() || path.is_file()) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_files_are_named_so() {
        assert!(is_test_file(Path::new("tests/a.test.yaml")));
        assert!(is_test_file(Path::new("a.test.yml")));
        assert!(!is_test_file(Path::new(".test.yaml")));
        assert!(!is_test_file(Path::new("a.yaml")));
        assert!(!is_test_file(Path::new("a.test.yaml.bak")));
    }

    #[test]
    fn discovery_skips_hidden_and_build_folders() {
        let root = std::env::temp_dir().join(format!("agentfile-discover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (p, body) in [
            ("b.test.yaml", ""),
            ("tests/a.test.yaml", ""),
            ("tests/deep/c.test.yml", ""),
            ("tests/notes.yaml", ""),
            (".hidden/x.test.yaml", ""),
            (".agentfile/x.test.yaml", ""),
            ("target/x.test.yaml", ""),
            ("node_modules/x.test.yaml", ""),
            (".git/x.test.yaml", ""),
        ] {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        let found: Vec<String> = discover(&root)
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            found,
            ["b.test.yaml", "tests/a.test.yaml", "tests/deep/c.test.yml"]
        );
        // A test file named itself.
        let one = root.join("b.test.yaml");
        assert_eq!(discover(&one), [one]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
