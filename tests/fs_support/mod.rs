//! File helpers shared by the end-to-end tests.

use std::path::Path;

/// Copy the folder `from` to `to`, recursively, leaving out entries named in
/// `skip` (at any depth).
pub fn copy_dir(from: &Path, to: &Path, skip: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(&name), skip);
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}
