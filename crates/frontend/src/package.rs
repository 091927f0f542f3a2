//! Workflows from OCI packages (CONTRACT §20): `oci://REF[@sha256:…]`
//! wherever a workflow path is accepted, and the packages agentrc's `FROM`
//! names.
//!
//! A reference resolves to a package in the cache (pulled when the cache
//! lacks it or the reference is a tag), checked file by file against its
//! digests; with `[packages] require_signature` it must carry a signature
//! by a key of `trusted_keys` before its workflow is even read. The front
//! end then reads the cached workflow file as any other, and the plan says
//! which package and digest it came from.

use std::future::Future;
use std::path::PathBuf;

use agentfile_config::{Config, PackagesSection};
use agentfile_package::registry::{Options as RemoteOptions, Remote};
use agentfile_package::sign::{self, PublicKey};
use agentfile_package::{Cache, Cached, Error, Kind, Reference};
use agentfile_wire::events::PackageRef;

/// A package resolved to a workflow file on this machine.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The cached workflow file.
    pub workflow: PathBuf,
    pub package: PackageRef,
}

/// The packages `[packages] serve` names, as workflow paths (`oci://…`).
pub fn served(config: Option<&Config>) -> Vec<PathBuf> {
    config
        .map(|c| c.packages.serve.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let bare = r
                .strip_prefix(agentfile_package::reference::SCHEME)
                .unwrap_or(r);
            PathBuf::from(format!("{}{bare}", agentfile_package::reference::SCHEME))
        })
        .collect()
}

/// Whether a workflow path names a package.
pub fn is_package(path: &std::path::Path) -> bool {
    path.to_str().is_some_and(Reference::is_package)
}

/// The cache the config names, else the user's.
pub fn cache(settings: &PackagesSection) -> Result<Cache, Error> {
    match &settings.cache {
        Some(dir) => Ok(Cache::at(dir.clone())),
        None => Cache::default_location(),
    }
}

/// How to reach registries under `settings`.
pub fn remote_options(settings: &PackagesSection) -> RemoteOptions {
    RemoteOptions {
        plain_http: settings.plain_http,
        docker_config: None,
    }
}

/// Resolve `reference` (with or without `oci://`) under `config`'s
/// `[packages]`: the cached package, pulled when needed, its signature
/// checked when one is required.
pub fn resolve(reference: &str, config: Option<&Config>) -> Result<Resolved, Error> {
    let settings = config.map(|c| c.packages.clone()).unwrap_or_default();
    let r = Reference::parse(reference)?;
    let cache = cache(&settings)?;
    let options = remote_options(&settings);
    let cached = match r.digest().map(|d| cache.load(d)).transpose()?.flatten() {
        Some(c) => c,
        None => {
            let remote = Remote::new(&r, &options)?;
            block_on(remote.pull(&r, &cache))?
        }
    };
    let signed_by = if settings.require_signature {
        Some(check_signature(&r, &cached, &settings, &cache, &options)?)
    } else {
        None
    };
    let bare = reference
        .strip_prefix(agentfile_package::reference::SCHEME)
        .unwrap_or(reference);
    Ok(Resolved {
        workflow: cached.workflow(),
        package: PackageRef {
            reference: bare.to_owned(),
            digest: cached.digest.clone(),
            signed_by,
        },
    })
}

/// The trusted key that signed `cached`: from the signatures the cache
/// kept, else from the registry's (kept for the next run).
fn check_signature(
    r: &Reference,
    cached: &Cached,
    settings: &PackagesSection,
    cache: &Cache,
    options: &RemoteOptions,
) -> Result<String, Error> {
    if settings.trusted_keys.is_empty() {
        return Err(Error::new(
            Kind::Signature,
            "[packages] require_signature is set but trusted_keys names no key; add the public key (PEM) the packages are signed with",
        ));
    }
    let keys = PublicKey::read_all(&settings.trusted_keys)?;
    let kept = cache.signatures(&cached.digest)?;
    if let Ok(v) = sign::verify(&kept, &cached.digest, &keys) {
        return Ok(v.key);
    }
    let fetched =
        Remote::new(r, options).and_then(|remote| block_on(remote.signatures(r, &cached.digest)));
    let records = match fetched {
        Ok(records) => records,
        Err(e) => {
            return Err(Error::new(
                Kind::Signature,
                format!(
                    "{}: no trusted signature is kept for it, and the registry could not be asked for one ({e})",
                    cached.digest
                ),
            ));
        }
    };
    cache.keep_signatures(&cached.digest, &records)?;
    sign::verify(&records, &cached.digest, &keys).map(|v| v.key)
}

/// Run `future` to completion on a runtime of its own, on a thread of its
/// own: callers are sync code that may itself run inside a runtime.
pub fn block_on<T: Send>(future: impl Future<Output = T> + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for a registry request")
                .block_on(future)
        })
        .join()
        .expect("the registry request's thread")
    })
}

/// What a package error is as a diagnostic: its code and a hint.
pub fn diagnostic_code(e: &Error) -> (&'static str, &'static str) {
    match e.kind {
        Kind::Signature => (
            "untrusted-package",
            "sign the package with `agentfile sign REF --key KEY` and list the public key in [packages] trusted_keys",
        ),
        Kind::Integrity => (
            "package-unavailable",
            "the package's bytes do not match their digests: pull it again from a registry you trust",
        ),
        _ => (
            "package-unavailable",
            "check the reference and that the registry is reachable (`agentfile pull REF`)",
        ),
    }
}

/// Why a workflow was not packed.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// The workflow does not validate.
    #[error("{0}")]
    Invalid(#[from] crate::Invalid),
    #[error("{0}")]
    Package(#[from] Error),
}

/// Pack the workflow at `path` (a file, or a folder holding one): it must
/// validate; every file of its folder goes in but what [`Ignore`] leaves out,
/// and every file the front end read must be among them. For agentrc, the
/// placement directives are left out of the packed file, so they stay out of
/// the digest as they stay out of the declaration's (CONTRACT §12).
///
/// [`Ignore`]: agentfile_package::pack::Ignore
pub fn pack(
    path: &std::path::Path,
    options: crate::Options<'_>,
) -> Result<agentfile_package::Package, PackError> {
    use agentfile_package::pack::{self, Ignore, Meta};
    let (analysis, read) = agentfile_plan::diag::record_sources(|| crate::analyze(path, options));
    let file = analysis.path.clone();
    let plan = analysis.into_plan()?;
    let root = if path.is_dir() {
        path.to_path_buf()
    } else {
        file.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf)
    };
    let root = root
        .canonicalize()
        .map_err(|e| Error::new(Kind::Io, format!("{}: {e}", root.display())))?;
    let relative = |p: &std::path::Path| -> Option<String> {
        let p = p.canonicalize().ok()?;
        let rel = p.strip_prefix(&root).ok()?;
        Some(rel.to_string_lossy().replace('\\', "/"))
    };
    let entry = relative(&file).ok_or_else(|| {
        Error::new(
            Kind::Pack,
            format!("{} is not inside {}", file.display(), root.display()),
        )
    })?;
    let mut files = pack::collect(&root, &Ignore::of(&root)?)?;
    for p in &read {
        let Some(rel) = relative(p) else {
            return Err(Error::new(
                Kind::Pack,
                format!(
                    "the workflow reads {}, outside the package's folder {}; move it into the folder",
                    p.display(),
                    root.display()
                ),
            )
            .into());
        };
        if !files.iter().any(|f| f.path == rel) {
            return Err(Error::new(
                Kind::Pack,
                format!(
                    "the workflow reads {rel}, which {} leaves out of the package",
                    pack::IGNORE_FILE
                ),
            )
            .into());
        }
    }
    if let Some(decl) = &plan.declared
        && let Some(f) = files.iter_mut().find(|f| f.path == entry)
    {
        let placement: Vec<(u32, u32)> = decl
            .directives
            .iter()
            .filter(|d| d.placement)
            .map(|d| (d.line, d.end_line.max(d.line)))
            .collect();
        f.bytes = without_lines(&f.bytes, &placement);
    }
    let meta = Meta {
        format: plan.format.clone(),
        name: plan.name.clone(),
        version: plan.version.clone(),
        description: plan.description.clone(),
        entry,
        inputs: serde_json::Value::Object(plan.input_schema_or_built()),
        declaration_digest: plan.declared.as_ref().map(|d| d.digest.clone()),
    };
    Ok(pack::build(&meta, files)?)
}

/// `bytes` without the 1-based, inclusive line ranges `drop`.
fn without_lines(bytes: &[u8], drop: &[(u32, u32)]) -> Vec<u8> {
    if drop.is_empty() {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len());
    for (i, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        let n = i as u32 + 1;
        if !drop.iter().any(|(a, b)| (*a..=*b).contains(&n)) {
            out.extend_from_slice(line);
        }
    }
    out
}

/// The resolver of agentrc `FROM` every door uses: [`resolve`] under the
/// config's `[packages]` (cache, plain HTTP, required signatures).
pub struct ConfigPackages<'a> {
    pub config: Option<&'a Config>,
}

impl crate::Packages for ConfigPackages<'_> {
    fn resolve(
        &self,
        reference: &str,
    ) -> Result<Option<crate::ResolvedBase>, Box<dyn std::error::Error + Send + Sync>> {
        if !names_a_registry(reference) {
            return Ok(None);
        }
        match resolve(reference, self.config) {
            Ok(r) => Ok(Some(crate::ResolvedBase {
                workflow: r.workflow,
                digest: r.package.digest,
            })),
            Err(e) if e.kind == Kind::NotAPackage => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether `reference` names its registry (`ghcr.io/…`, `localhost:5000/…`,
/// `127.0.0.1:5000/…`), as Docker tells a host from a Docker Hub name: a
/// first segment with a `.` or a `:`, or `localhost`. A Docker Hub name
/// (`python:3.11-slim`, `acme/base:1`) is a container image's.
pub fn names_a_registry(reference: &str) -> bool {
    let bare = reference
        .strip_prefix(agentfile_package::reference::SCHEME)
        .unwrap_or(reference);
    match bare.split_once('/') {
        Some((first, _)) => first == "localhost" || first.contains('.') || first.contains(':'),
        None => false,
    }
}
