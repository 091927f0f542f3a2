//! Workflows as signed OCI packages (CONTRACT §20).
//!
//! A package is an OCI image manifest whose `artifactType` is
//! [`ARTIFACT_TYPE`], with a small JSON config ([`PackageConfig`]: the
//! workflow's format, name, entry file, inputs and every file's digest) and
//! one reproducible tar+gzip layer of the workflow's files ([`pack`]). The
//! same files give the same bytes, and so the same digest, on any machine.
//!
//! - [`pack`] collects a workflow's folder and builds the package in memory;
//!   [`layout`] writes it as an OCI image layout archive (`pack -o`).
//! - [`registry`] pushes and pulls packages and their signatures over the
//!   OCI distribution API (the `oci-client` crate), with `~/.docker/config.json`
//!   credentials.
//! - [`cache`] keeps pulled packages by digest, extracted read-only, and
//!   checks every file against the config's digests each time one is used.
//! - [`sign`] makes and checks cosign-compatible keyed signatures: ECDSA P-256
//!   over the simple-signing payload, stored under the `sha256-<hex>.sig` tag.
//!
//! It knows no workflow format: the caller reads the workflow and fills in
//! [`Meta`]; nothing here parses or runs one.

pub mod cache;
pub mod layout;
pub mod pack;
pub mod reference;
pub mod registry;
pub mod sign;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use cache::{Cache, Cached};
pub use pack::{Meta, Package, Source};
pub use reference::Reference;

/// The manifest's `artifactType`.
pub const ARTIFACT_TYPE: &str = "application/vnd.agentfile.workflow.v1+json";
/// The config blob's media type.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.agentfile.workflow.config.v1+json";
/// The one layer's media type.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// An OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// Most bytes a package's files may hold, unpacked.
pub const MAX_UNPACKED_BYTES: u64 = 64 * 1024 * 1024;
/// Most files a package may hold.
pub const MAX_FILES: usize = 10_000;
/// Most bytes of a manifest or config blob read from a registry.
pub const MAX_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;

/// What a package's config blob says about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageConfig {
    /// The format's name (`agentfile`, `workflow-md`, `agentrc`, …).
    pub format: String,
    /// The workflow's name.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The workflow file, relative to the package's root (`/`-separated).
    pub entry: String,
    /// The JSON Schema of the run's inputs.
    #[serde(default)]
    pub inputs: serde_json::Value,
    /// agentrc: the declaration's digest (CONTRACT §12), which leaves the
    /// placement directives out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declaration_digest: Option<String>,
    /// Every file of the layer and its digest, sorted by path.
    pub files: BTreeMap<String, FileEntry>,
}

/// One file of a package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// `sha256:<hex>` of its bytes.
    pub digest: String,
    pub size: u64,
    /// Whether it was executable by its owner when packed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
}

/// What went wrong, by kind: each door maps a kind to its exit status or
/// error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A reference, a flag or a key the caller gave is not usable.
    Usage,
    /// The workflow's files cannot be packed as they are.
    Pack,
    /// The registry could not be reached or refused the request.
    Registry,
    /// Bytes did not match their digest: a tampered or damaged package.
    Integrity,
    /// No signature, or none by a trusted key, or one that does not verify.
    Signature,
    /// The local file system (the cache, a key file).
    Io,
    /// The reference names something else than an agentfile package (a
    /// container image).
    NotAPackage,
}

/// An error of this crate: its kind and a sentence for a person.
#[derive(Debug, Clone, thiserror::Error)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn io(what: impl fmt::Display, e: std::io::Error) -> Error {
        Error::new(Kind::Io, format!("{what}: {e}"))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    let h = Sha256::digest(bytes);
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in h {
        use std::fmt::Write as _;
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The hex part of a `sha256:<hex>` digest, when it is one.
pub fn digest_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(hex)
}

/// An OCI descriptor, as manifests write one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An OCI image manifest: a package's, or a signature's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub schema_version: u32,
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Manifest {
    /// Read a manifest's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Manifest> {
        serde_json::from_slice(bytes)
            .map_err(|e| Error::new(Kind::Integrity, format!("not an OCI image manifest: {e}")))
    }

    /// The package this manifest describes: its one layer, with the
    /// artifact type checked.
    pub fn package_layer(&self) -> Result<&Descriptor> {
        if self.artifact_type.as_deref() != Some(ARTIFACT_TYPE)
            && self.config.media_type != CONFIG_MEDIA_TYPE
        {
            return Err(Error::new(
                Kind::NotAPackage,
                format!(
                    "not an agentfile package: its artifact type is {}, not {ARTIFACT_TYPE}",
                    self.artifact_type
                        .as_deref()
                        .unwrap_or(&self.config.media_type)
                ),
            ));
        }
        match self.layers.as_slice() {
            [layer] if layer.media_type == LAYER_MEDIA_TYPE => Ok(layer),
            _ => Err(Error::new(
                Kind::Integrity,
                format!(
                    "an agentfile package has one {LAYER_MEDIA_TYPE} layer; this one has {}",
                    self.layers.len()
                ),
            )),
        }
    }
}

/// `bytes` checked against `digest`.
pub(crate) fn check_digest(what: &str, bytes: &[u8], digest: &str) -> Result<()> {
    let got = digest_of(bytes);
    if got == digest {
        Ok(())
    } else {
        Err(Error::new(
            Kind::Integrity,
            format!("{what} does not match its digest: expected {digest}, got {got}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_sha256_hex() {
        let d = digest_of(b"");
        assert_eq!(
            d,
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(digest_hex(&d).is_some());
        assert!(digest_hex("sha256:E3").is_none());
        assert!(digest_hex("md5:00").is_none());
    }
}
