//! Packages on this machine, by digest: `<cache>/sha256/<hex>/` holds the
//! manifest, the config, the signatures seen for it, and `files/` (the layer
//! unpacked, read-only).
//!
//! Nothing is trusted because it sits in the cache: [`Cache::load`] checks the
//! manifest against the digest asked for, the config against the manifest,
//! and every file against the config, each time, and refuses a file more or
//! less than the config lists.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::pack::safe_path;
use crate::sign::SignatureRecord;
use crate::{
    Error, Kind, MAX_FILES, MAX_UNPACKED_BYTES, Manifest, PackageConfig, Result, check_digest,
    digest_hex, digest_of,
};

/// The cache folder.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

/// A package in the cache, checked.
#[derive(Debug, Clone)]
pub struct Cached {
    pub digest: String,
    pub manifest: Vec<u8>,
    pub config: PackageConfig,
    /// The package's root: its files.
    pub dir: PathBuf,
}

impl Cached {
    /// The workflow file.
    pub fn workflow(&self) -> PathBuf {
        self.dir.join(&self.config.entry)
    }
}

const SIGNATURES: &str = "signatures.json";

/// A name no other writer in this process or another uses at once: two runs
/// of a server may pull the same package together.
fn unique(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

impl Cache {
    pub fn at(root: impl Into<PathBuf>) -> Cache {
        Cache { root: root.into() }
    }

    /// `AGENTFILE_CACHE_DIR`, else `$XDG_CACHE_HOME/agentfile/packages`, else
    /// `~/.cache/agentfile/packages`.
    pub fn default_location() -> Result<Cache> {
        if let Some(d) = std::env::var_os("AGENTFILE_CACHE_DIR").filter(|d| !d.is_empty()) {
            return Ok(Cache::at(PathBuf::from(d).join("packages")));
        }
        if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
            return Ok(Cache::at(PathBuf::from(d).join("agentfile/packages")));
        }
        match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
            Some(h) => Ok(Cache::at(
                PathBuf::from(h).join(".cache/agentfile/packages"),
            )),
            None => Err(Error::new(
                Kind::Usage,
                "no cache folder for packages: set AGENTFILE_CACHE_DIR or HOME",
            )),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dir_of(&self, digest: &str) -> Result<PathBuf> {
        let hex = digest_hex(digest)
            .ok_or_else(|| Error::new(Kind::Usage, format!("`{digest}` is not a sha256 digest")))?;
        Ok(self.root.join("sha256").join(hex))
    }

    /// The package of `digest`, when the cache holds it; checked file by
    /// file. A damaged entry is an [`Kind::Integrity`] error naming the file
    /// (and the way out: pull it again).
    pub fn load(&self, digest: &str) -> Result<Option<Cached>> {
        let dir = self.dir_of(digest)?;
        let manifest = match std::fs::read(dir.join("manifest.json")) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(dir.display(), e)),
        };
        let damaged = |e: Error| {
            Error::new(
                Kind::Integrity,
                format!(
                    "the cached package {digest} is damaged ({e}); remove {} and pull it again",
                    dir.display()
                ),
            )
        };
        check_digest("the manifest", &manifest, digest).map_err(damaged)?;
        let m = Manifest::parse(&manifest).map_err(damaged)?;
        let config_bytes =
            std::fs::read(dir.join("config.json")).map_err(|e| damaged(Error::io("config", e)))?;
        check_digest("the config", &config_bytes, &m.config.digest).map_err(damaged)?;
        let config = parse_config(&config_bytes).map_err(damaged)?;
        let files = dir.join("files");
        check_files(&files, &config).map_err(damaged)?;
        Ok(Some(Cached {
            digest: digest.to_owned(),
            manifest,
            config,
            dir: files,
        }))
    }

    /// Check a package's bytes against `digest` and each other, unpack it
    /// and keep it. Idempotent: a package already kept is loaded as it is.
    pub fn store(
        &self,
        digest: &str,
        manifest: &[u8],
        config_bytes: &[u8],
        layer: &[u8],
    ) -> Result<Cached> {
        check_digest("the manifest", manifest, digest)?;
        let m = Manifest::parse(manifest)?;
        let layer_desc = m.package_layer()?;
        check_digest("the config", config_bytes, &m.config.digest)?;
        check_digest("the layer", layer, &layer_desc.digest)?;
        let config = parse_config(config_bytes)?;
        if !safe_path(&config.entry) || !config.files.contains_key(&config.entry) {
            return Err(Error::new(
                Kind::Integrity,
                format!(
                    "the package's workflow file `{}` is not among its files",
                    config.entry
                ),
            ));
        }
        if let Some(c) = self.load(digest)? {
            return Ok(c);
        }
        let dir = self.dir_of(digest)?;
        let parent = dir.parent().expect("under sha256/");
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent.display(), e))?;
        let tmp = parent.join(unique(&format!(
            ".tmp-{}",
            &digest_hex(digest).unwrap_or_default()[..12]
        )));
        let _ = make_writable(&tmp);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join("files")).map_err(|e| Error::io(tmp.display(), e))?;
        let result = (|| {
            unpack(layer, &tmp.join("files"), &config)?;
            check_files(&tmp.join("files"), &config)?;
            std::fs::write(tmp.join("config.json"), config_bytes)
                .map_err(|e| Error::io(tmp.display(), e))?;
            // The manifest last: its presence marks a complete entry.
            std::fs::write(tmp.join("manifest.json"), manifest)
                .map_err(|e| Error::io(tmp.display(), e))?;
            read_only(&tmp.join("files"));
            match std::fs::rename(&tmp, &dir) {
                Ok(()) => Ok(()),
                // Another process kept it first.
                Err(_) if dir.join("manifest.json").exists() => Ok(()),
                Err(e) => Err(Error::io(dir.display(), e)),
            }
        })();
        if tmp.exists() {
            let _ = make_writable(&tmp);
            let _ = std::fs::remove_dir_all(&tmp);
        }
        result?;
        self.load(digest)?
            .ok_or_else(|| Error::new(Kind::Io, format!("{} vanished", dir.display())))
    }

    /// Signatures seen for `digest` (kept by [`Cache::keep_signatures`]), so
    /// a run by digest can check them without the registry.
    pub fn signatures(&self, digest: &str) -> Result<Vec<SignatureRecord>> {
        let path = self.dir_of(digest)?.join(SIGNATURES);
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| Error::new(Kind::Integrity, format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::io(path.display(), e)),
        }
    }

    /// Keep `records` beside the package of `digest` (replacing what was
    /// kept: the registry's list is the current one).
    pub fn keep_signatures(&self, digest: &str, records: &[SignatureRecord]) -> Result<()> {
        let dir = self.dir_of(digest)?;
        if !dir.exists() {
            return Ok(());
        }
        let path = dir.join(SIGNATURES);
        let tmp = dir.join(unique(&format!(".{SIGNATURES}")));
        let bytes = serde_json::to_vec_pretty(records).expect("JSON");
        std::fs::write(&tmp, bytes).map_err(|e| Error::io(tmp.display(), e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(path.display(), e))
    }
}

fn parse_config(bytes: &[u8]) -> Result<PackageConfig> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::new(
            Kind::Integrity,
            format!("the package's config is not an agentfile package config: {e}"),
        )
    })
}

/// Unpack `layer` into `dest`, refusing anything but regular files at safe
/// paths that the config lists, and more bytes than it lists.
fn unpack(layer: &[u8], dest: &Path, config: &PackageConfig) -> Result<()> {
    let limit = config.files.values().map(|f| f.size).sum::<u64>();
    if limit > MAX_UNPACKED_BYTES || config.files.len() > MAX_FILES {
        return Err(Error::new(
            Kind::Integrity,
            format!(
                "the package lists more than a package may hold ({} files, {limit} bytes)",
                config.files.len()
            ),
        ));
    }
    let gz = flate2::read::GzDecoder::new(layer);
    // One byte over the listed total shows a layer that lies about its size.
    let mut archive =
        tar::Archive::new(gz.take(limit + 1 + 1024 * (config.files.len() as u64 + 2)));
    let entries = archive
        .entries()
        .map_err(|e| Error::new(Kind::Integrity, format!("the layer is not tar+gzip: {e}")))?;
    let mut seen = std::collections::BTreeSet::new();
    for entry in entries {
        let mut entry =
            entry.map_err(|e| Error::new(Kind::Integrity, format!("the layer: {e}")))?;
        let path = entry
            .path()
            .map_err(|e| Error::new(Kind::Integrity, format!("the layer: {e}")))?
            .to_string_lossy()
            .into_owned();
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(Error::new(
                Kind::Integrity,
                format!("the layer holds `{path}`, which is not a regular file"),
            ));
        }
        let Some(listed) = config.files.get(&path).filter(|_| safe_path(&path)) else {
            return Err(Error::new(
                Kind::Integrity,
                format!("the layer holds `{path}`, which the config does not list"),
            ));
        };
        if !seen.insert(path.clone()) {
            return Err(Error::new(
                Kind::Integrity,
                format!("the layer holds `{path}` twice"),
            ));
        }
        let mut bytes = Vec::with_capacity(listed.size.min(1 << 20) as usize);
        (&mut entry)
            .take(listed.size + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::new(Kind::Integrity, format!("the layer, `{path}`: {e}")))?;
        check_digest(&format!("`{path}`"), &bytes, &listed.digest)?;
        let target = dest.join(&path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent.display(), e))?;
        }
        std::fs::write(&target, &bytes).map_err(|e| Error::io(target.display(), e))?;
        set_mode(&target, if listed.executable { 0o555 } else { 0o444 });
    }
    if let Some(missing) = config.files.keys().find(|k| !seen.contains(*k)) {
        return Err(Error::new(
            Kind::Integrity,
            format!("the config lists `{missing}`, which the layer does not hold"),
        ));
    }
    Ok(())
}

/// Every file under `files` is one the config lists, with its digest, and
/// every file it lists is there.
fn check_files(files: &Path, config: &PackageConfig) -> Result<()> {
    let mut found = 0usize;
    check_dir(files, files, config, &mut found)?;
    if found != config.files.len() {
        let missing = config
            .files
            .keys()
            .find(|k| !files.join(k).is_file())
            .cloned()
            .unwrap_or_default();
        return Err(Error::new(
            Kind::Integrity,
            format!("`{missing}` is missing"),
        ));
    }
    Ok(())
}

fn check_dir(root: &Path, dir: &Path, config: &PackageConfig, found: &mut usize) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir.display(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir.display(), e))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(path.display(), e))?;
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        if kind.is_dir() {
            check_dir(root, &path, config, found)?;
            continue;
        }
        let Some(listed) = config.files.get(&rel).filter(|_| kind.is_file()) else {
            return Err(Error::new(
                Kind::Integrity,
                format!("`{rel}` is not one of the package's files"),
            ));
        };
        let bytes = std::fs::read(&path).map_err(|e| Error::io(path.display(), e))?;
        if digest_of(&bytes) != listed.digest {
            return Err(Error::new(
                Kind::Integrity,
                format!("`{rel}` was changed after it was unpacked"),
            ));
        }
        *found += 1;
    }
    Ok(())
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) {}

/// Folders read-only too, so a tool of a run cannot add a file.
fn read_only(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                read_only(&e.path());
            }
        }
    }
    set_mode(dir, 0o555);
}

fn make_writable(dir: &Path) -> std::io::Result<()> {
    set_mode(dir, 0o755);
    for e in std::fs::read_dir(dir)?.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            make_writable(&e.path())?;
        } else {
            set_mode(&e.path(), 0o644);
        }
    }
    Ok(())
}

/// Remove a cached entry (tests, `pull --refresh`): its folders are
/// read-only.
pub fn remove(dir: &Path) -> std::io::Result<()> {
    make_writable(dir)?;
    std::fs::remove_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::{Meta, Source, build};

    fn package(text: &str) -> crate::Package {
        build(
            &Meta {
                format: "agentfile".into(),
                name: "demo".into(),
                entry: "Agentfile".into(),
                ..Meta::default()
            },
            vec![
                Source {
                    path: "Agentfile".into(),
                    bytes: text.as_bytes().to_vec(),
                    executable: false,
                },
                Source {
                    path: "scripts/run.sh".into(),
                    bytes: b"echo hi\n".to_vec(),
                    executable: true,
                },
            ],
        )
        .unwrap()
    }

    fn cache() -> Cache {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        Cache::at(std::env::temp_dir().join(format!(
            "agentfile-cache-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        )))
    }

    #[test]
    fn a_stored_package_loads_with_its_files() {
        let c = cache();
        let p = package("NAME demo\n");
        let kept = c
            .store(&p.digest, &p.manifest, &p.config_bytes, &p.layer)
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(kept.workflow()).unwrap(),
            "NAME demo\n"
        );
        let again = c.load(&p.digest).unwrap().unwrap();
        assert_eq!(again.config, p.config);
        // Stored twice: the same entry.
        c.store(&p.digest, &p.manifest, &p.config_bytes, &p.layer)
            .unwrap();
        let _ = remove(c.root());
    }

    #[test]
    fn the_same_package_stored_by_many_threads_at_once_is_kept_once() {
        let c = cache();
        let p = package("NAME demo\n");
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    c.store(&p.digest, &p.manifest, &p.config_bytes, &p.layer)
                        .unwrap();
                });
            }
        });
        assert!(c.load(&p.digest).unwrap().is_some());
        let left: Vec<_> = std::fs::read_dir(c.root().join("sha256"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "no temporary folder is left: {left:?}");
        let _ = remove(c.root());
    }

    #[test]
    fn a_wrong_digest_or_a_tampered_layer_is_refused() {
        let c = cache();
        let p = package("NAME demo\n");
        let other = package("NAME other\n");
        let e = c
            .store(&other.digest, &p.manifest, &p.config_bytes, &p.layer)
            .unwrap_err();
        assert_eq!(e.kind, Kind::Integrity);
        let mut layer = p.layer.clone();
        let mid = layer.len() / 2;
        layer[mid] ^= 1;
        let e = c
            .store(&p.digest, &p.manifest, &p.config_bytes, &layer)
            .unwrap_err();
        assert_eq!(e.kind, Kind::Integrity, "{e}");
        assert!(c.load(&p.digest).unwrap().is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_file_changed_in_the_cache_is_found() {
        let c = cache();
        let p = package("NAME demo\n");
        let kept = c
            .store(&p.digest, &p.manifest, &p.config_bytes, &p.layer)
            .unwrap();
        let wf = kept.workflow();
        set_mode(&wf, 0o644);
        std::fs::write(&wf, "NAME evil\n").unwrap();
        let e = c.load(&p.digest).unwrap_err();
        assert!(e.message.contains("changed after it was unpacked"), "{e}");
        set_mode(&kept.dir, 0o755);
        std::fs::write(kept.dir.join("extra"), "x").unwrap();
        std::fs::write(&wf, "NAME demo\n").unwrap();
        let e = c.load(&p.digest).unwrap_err();
        assert!(e.message.contains("extra"), "{e}");
        let _ = remove(c.root());
    }
}
