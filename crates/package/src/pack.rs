//! Building a package: a workflow's files as one reproducible tar+gzip layer,
//! a config blob that lists them, and the manifest over both.
//!
//! Reproducible means the same files give the same bytes on any machine:
//! entries sorted by path, no folders, mtime 0, owner 0:0 with no names,
//! mode 0644 (0755 for a file its owner may execute), gzip with no name and
//! no time; the config's JSON has sorted keys; the manifest carries no date.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Component, Path};

use crate::{
    ARTIFACT_TYPE, CONFIG_MEDIA_TYPE, Descriptor, Error, FileEntry, Kind, LAYER_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE, MAX_FILES, MAX_UNPACKED_BYTES, Manifest, PackageConfig, Result, digest_of,
};

/// The ignore file a workflow's folder may hold: one pattern per line, as
/// [`Ignore`] reads them.
pub const IGNORE_FILE: &str = ".agentfileignore";

/// What a package says about its workflow, besides its files.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    pub format: String,
    pub name: String,
    pub version: Option<String>,
    pub description: Option<String>,
    /// The workflow file, relative to the package's root.
    pub entry: String,
    pub inputs: serde_json::Value,
    pub declaration_digest: Option<String>,
}

/// One file to pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// Relative to the package's root, `/`-separated.
    pub path: String,
    pub bytes: Vec<u8>,
    pub executable: bool,
}

/// A package built in memory.
#[derive(Debug, Clone)]
pub struct Package {
    pub manifest: Vec<u8>,
    /// The manifest's digest: the package's name by content.
    pub digest: String,
    pub config: PackageConfig,
    pub config_bytes: Vec<u8>,
    pub layer: Vec<u8>,
}

impl Package {
    /// The manifest, read back.
    pub fn manifest(&self) -> Manifest {
        Manifest::parse(&self.manifest).expect("a manifest this crate wrote")
    }

    /// The files' total size, unpacked.
    pub fn unpacked_bytes(&self) -> u64 {
        self.config.files.values().map(|f| f.size).sum()
    }
}

/// Which files of a folder a package leaves out: hidden files and folders
/// (`.git`, `.agentfile`, the ignore file itself), the runner's own config
/// at the root (`agent.toml`, `agent.json`: where to send model calls is the
/// runner's choice), and what `.agentfileignore` names.
///
/// A pattern is a path relative to the root in `/` form; `*` matches within
/// one segment, `**` any depth; a pattern without `/` matches a name at any
/// depth; a trailing `/` matches a folder and everything in it.
#[derive(Debug, Clone, Default)]
pub struct Ignore {
    patterns: Vec<(String, bool)>,
}

impl Ignore {
    /// The ignore file of `root`, when it has one.
    pub fn of(root: &Path) -> Result<Ignore> {
        let path = root.join(IGNORE_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ignore::default()),
            Err(e) => return Err(Error::io(path.display(), e)),
        };
        Ok(Ignore::parse(&text))
    }

    pub fn parse(text: &str) -> Ignore {
        let patterns = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                let dir = l.ends_with('/');
                (l.trim_matches('/').to_owned(), dir)
            })
            .filter(|(p, _)| !p.is_empty())
            .collect();
        Ignore { patterns }
    }

    /// Whether `rel` (a `/`-separated path; `dir` when it is a folder) is
    /// left out.
    pub fn ignores(&self, rel: &str, dir: bool) -> bool {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if name.starts_with('.') || (!dir && (rel == "agent.toml" || rel == "agent.json")) {
            return true;
        }
        self.patterns.iter().any(|(p, only_dir)| {
            if *only_dir && !dir {
                return false;
            }
            if p.contains('/') {
                glob(p, rel)
            } else {
                glob(p, name)
            }
        })
    }
}

/// `*` within a segment, `**` across segments.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let t: Vec<&str> = text.split('/').collect();
    segments(&p, &t)
}

fn segments(p: &[&str], t: &[&str]) -> bool {
    match p.split_first() {
        None => t.is_empty(),
        Some((&"**", rest)) => (0..=t.len()).any(|i| segments(rest, &t[i..])),
        Some((head, rest)) => match t.split_first() {
            Some((first, more)) => {
                segment(head.as_bytes(), first.as_bytes()) && segments(rest, more)
            }
            None => false,
        },
    }
}

fn segment(p: &[u8], t: &[u8]) -> bool {
    match p.split_first() {
        None => t.is_empty(),
        Some((b'*', rest)) => (0..=t.len()).any(|i| segment(rest, &t[i..])),
        Some((b'?', rest)) => !t.is_empty() && segment(rest, &t[1..]),
        Some((c, rest)) => t.first() == Some(c) && segment(rest, &t[1..]),
    }
}

/// Every file under `root` a package of it holds, sorted by path. A link is
/// followed when it stays inside `root` (its target's bytes are packed under
/// the link's name) and refused when it leads out.
pub fn collect(root: &Path, ignore: &Ignore) -> Result<Vec<Source>> {
    let canonical = root
        .canonicalize()
        .map_err(|e| Error::io(root.display(), e))?;
    let mut out = Vec::new();
    let mut total = 0u64;
    walk(&canonical, &canonical, "", ignore, &mut out, &mut total)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn walk(
    root: &Path,
    dir: &Path,
    prefix: &str,
    ignore: &Ignore,
    out: &mut Vec<Source>,
    total: &mut u64,
) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir.display(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir.display(), e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(Error::new(
                Kind::Pack,
                format!(
                    "{}: a file name that is not UTF-8 cannot be packed",
                    entry.path().display()
                ),
            ));
        };
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let path = entry.path();
        let target = path
            .canonicalize()
            .map_err(|e| Error::io(path.display(), e))?;
        if !target.starts_with(root) {
            return Err(Error::new(
                Kind::Pack,
                format!(
                    "{rel} links to {}, outside the package's folder; copy the file in, or name it in {IGNORE_FILE}",
                    target.display()
                ),
            ));
        }
        let meta = std::fs::metadata(&target).map_err(|e| Error::io(path.display(), e))?;
        if ignore.ignores(&rel, meta.is_dir()) {
            continue;
        }
        if meta.is_dir() {
            walk(root, &path, &rel, ignore, out, total)?;
            continue;
        }
        if !meta.is_file() {
            return Err(Error::new(
                Kind::Pack,
                format!("{rel} is not a regular file; name it in {IGNORE_FILE} to leave it out"),
            ));
        }
        *total += meta.len();
        if *total > MAX_UNPACKED_BYTES || out.len() >= MAX_FILES {
            return Err(Error::new(
                Kind::Pack,
                format!(
                    "the folder holds more than a package may ({MAX_FILES} files, {} MiB); name what the workflow does not need in {IGNORE_FILE}",
                    MAX_UNPACKED_BYTES / (1024 * 1024)
                ),
            ));
        }
        let bytes = std::fs::read(&target).map_err(|e| Error::io(path.display(), e))?;
        out.push(Source {
            path: rel,
            bytes,
            executable: executable(&meta),
        });
    }
    Ok(())
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    meta.permissions().mode() & 0o100 != 0
}

#[cfg(not(unix))]
fn executable(_: &std::fs::Metadata) -> bool {
    false
}

/// Whether `rel` is a path a package may hold: relative, `/`-separated,
/// with no `.`, `..` or empty segment.
pub fn safe_path(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.contains('\\')
        && !rel.contains('\0')
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        && rel
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// Build the package of `files` (sorted or not) described by `meta`.
pub fn build(meta: &Meta, mut files: Vec<Source>) -> Result<Package> {
    files.sort_by(|a, b| a.path.cmp(&b.path));
    if let Some(w) = files.windows(2).find(|w| w[0].path == w[1].path) {
        return Err(Error::new(
            Kind::Pack,
            format!("{} is listed twice", w[0].path),
        ));
    }
    if let Some(bad) = files.iter().find(|f| !safe_path(&f.path)) {
        return Err(Error::new(
            Kind::Pack,
            format!("`{}` is not a path a package may hold", bad.path),
        ));
    }
    if !files.iter().any(|f| f.path == meta.entry) {
        return Err(Error::new(
            Kind::Pack,
            format!(
                "the workflow file {} is not among the files packed",
                meta.entry
            ),
        ));
    }
    let layer = layer(&files)?;
    let config = PackageConfig {
        format: meta.format.clone(),
        name: meta.name.clone(),
        version: meta.version.clone(),
        description: meta.description.clone(),
        entry: meta.entry.clone(),
        inputs: meta.inputs.clone(),
        declaration_digest: meta.declaration_digest.clone(),
        files: files
            .iter()
            .map(|f| {
                (
                    f.path.clone(),
                    FileEntry {
                        digest: digest_of(&f.bytes),
                        size: f.bytes.len() as u64,
                        executable: f.executable,
                    },
                )
            })
            .collect(),
    };
    let config_bytes = canonical_json(&config);
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "org.opencontainers.image.title".to_owned(),
        meta.name.clone(),
    );
    if let Some(d) = &meta.description {
        annotations.insert("org.opencontainers.image.description".to_owned(), d.clone());
    }
    if let Some(v) = &meta.version {
        annotations.insert("org.opencontainers.image.version".to_owned(), v.clone());
    }
    let manifest = Manifest {
        schema_version: 2,
        media_type: MANIFEST_MEDIA_TYPE.to_owned(),
        artifact_type: Some(ARTIFACT_TYPE.to_owned()),
        config: Descriptor {
            media_type: CONFIG_MEDIA_TYPE.to_owned(),
            digest: digest_of(&config_bytes),
            size: config_bytes.len() as u64,
            artifact_type: None,
            annotations: BTreeMap::new(),
        },
        layers: vec![Descriptor {
            media_type: LAYER_MEDIA_TYPE.to_owned(),
            digest: digest_of(&layer),
            size: layer.len() as u64,
            artifact_type: None,
            annotations: BTreeMap::new(),
        }],
        annotations,
    };
    let manifest = serde_json::to_vec(&manifest).expect("a manifest is JSON");
    Ok(Package {
        digest: digest_of(&manifest),
        manifest,
        config,
        config_bytes,
        layer,
    })
}

/// JSON with every object's keys sorted (serde_json here keeps insertion
/// order, and a schema from a workflow keeps its author's).
pub(crate) fn canonical_json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    fn sort(v: serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(map) => {
                let sorted: BTreeMap<String, serde_json::Value> =
                    map.into_iter().map(|(k, v)| (k, sort(v))).collect();
                serde_json::Value::Object(sorted.into_iter().collect())
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.into_iter().map(sort).collect())
            }
            other => other,
        }
    }
    let v = serde_json::to_value(value).expect("serialisable");
    serde_json::to_vec(&sort(v)).expect("JSON")
}

/// The tar+gzip layer of `files` (sorted).
fn layer(files: &[Source]) -> Result<Vec<u8>> {
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for f in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(f.bytes.len() as u64);
        header.set_mode(if f.executable { 0o755 } else { 0o644 });
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        tar.append_data(&mut header, &f.path, f.bytes.as_slice())
            .map_err(|e| Error::new(Kind::Pack, format!("{}: {e}", f.path)))?;
    }
    let gz = tar
        .into_inner()
        .map_err(|e| Error::new(Kind::Pack, format!("writing the layer: {e}")))?;
    let mut bytes = gz
        .finish()
        .map_err(|e| Error::new(Kind::Pack, format!("compressing the layer: {e}")))?;
    bytes.flush().ok();
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            format: "agentfile".into(),
            name: "demo".into(),
            entry: "Agentfile".into(),
            inputs: serde_json::json!({"type": "object", "properties": {"b": {}, "a": {}}}),
            ..Meta::default()
        }
    }

    fn folder(files: &[(&str, &str)]) -> tempdir::Dir {
        let d = tempdir::Dir::new();
        for (p, text) in files {
            let path = d.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        d
    }

    mod tempdir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "agentfile-pack-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    const FILES: &[(&str, &str)] = &[
        ("Agentfile", "NAME demo\n"),
        ("agents/a.md", "hello"),
        ("agent.toml", "[llm]\n"),
        (".git/HEAD", "ref"),
        ("notes/skip.log", "x"),
        (".agentfileignore", "*.log\n"),
    ];

    #[test]
    fn the_same_files_in_two_folders_give_the_same_digest() {
        let a = folder(FILES);
        let b = folder(FILES);
        let pa = build(
            &meta(),
            collect(a.path(), &Ignore::of(a.path()).unwrap()).unwrap(),
        )
        .unwrap();
        let pb = build(
            &meta(),
            collect(b.path(), &Ignore::of(b.path()).unwrap()).unwrap(),
        )
        .unwrap();
        assert_eq!(pa.digest, pb.digest);
        assert_eq!(pa.layer, pb.layer);
        let names: Vec<_> = pa.config.files.keys().cloned().collect();
        assert_eq!(names, ["Agentfile", "agents/a.md"]);
    }

    #[test]
    fn one_changed_byte_gives_another_digest() {
        let a = folder(FILES);
        let p1 = build(&meta(), collect(a.path(), &Ignore::default()).unwrap()).unwrap();
        std::fs::write(a.path().join("agents/a.md"), "hellp").unwrap();
        let p2 = build(&meta(), collect(a.path(), &Ignore::default()).unwrap()).unwrap();
        assert_ne!(p1.digest, p2.digest);
    }

    #[test]
    fn the_config_is_canonical_json() {
        let a = folder(FILES);
        let p = build(&meta(), collect(a.path(), &Ignore::default()).unwrap()).unwrap();
        let text = String::from_utf8(p.config_bytes.clone()).unwrap();
        assert!(
            text.find("\"a\"").unwrap() < text.find("\"b\"").unwrap(),
            "{text}"
        );
        let m = p.manifest();
        assert_eq!(m.artifact_type.as_deref(), Some(ARTIFACT_TYPE));
        assert_eq!(m.config.digest, digest_of(&p.config_bytes));
        assert_eq!(m.layers[0].digest, digest_of(&p.layer));
    }

    #[test]
    fn unsafe_paths_and_a_missing_entry_are_refused() {
        for bad in ["../x", "/etc/passwd", "a//b", "a/./b", ""] {
            assert!(!safe_path(bad), "{bad}");
        }
        let src = |p: &str| Source {
            path: p.into(),
            bytes: vec![],
            executable: false,
        };
        let e = build(&meta(), vec![src("Agentfile"), src("../x")]).unwrap_err();
        assert_eq!(e.kind, Kind::Pack);
        let e = build(&meta(), vec![src("other")]).unwrap_err();
        assert!(e.message.contains("Agentfile"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_link_out_of_the_folder_is_refused() {
        let a = folder(&[("Agentfile", "NAME x\n")]);
        std::os::unix::fs::symlink("/etc/hostname", a.path().join("leak")).unwrap();
        let e = collect(a.path(), &Ignore::default()).unwrap_err();
        assert!(e.message.contains("outside the package"), "{e}");
    }

    #[test]
    fn ignore_patterns() {
        let i = Ignore::parse("# c\n*.log\ntests/\nsub/**/tmp\n/abs.txt\n");
        assert!(i.ignores("a.log", false));
        assert!(i.ignores("deep/b.log", false));
        assert!(i.ignores("tests", true));
        assert!(!i.ignores("tests", false));
        assert!(i.ignores("sub/x/y/tmp", false));
        assert!(i.ignores("abs.txt", false));
        assert!(!i.ignores("keep.md", false));
        assert!(i.ignores(".hidden", false));
        assert!(i.ignores("agent.toml", false));
        assert!(!i.ignores("sub/agent.toml", false));
    }
}
