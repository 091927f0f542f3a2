//! A package as an OCI image layout archive (`agentfile pack -o FILE`): a tar
//! of `oci-layout`, `index.json` and `blobs/sha256/…`, which `skopeo copy
//! oci-archive:FILE docker://…` and `oras` read. Reproducible like the layer.

use std::collections::BTreeMap;

use crate::{Error, Kind, MANIFEST_MEDIA_TYPE, Package, Result, digest_hex};

/// The archive's bytes; `tag`, when given, is the index's
/// `org.opencontainers.image.ref.name`.
pub fn archive(package: &Package, tag: Option<&str>) -> Result<Vec<u8>> {
    let m = package.manifest();
    let mut annotations = BTreeMap::new();
    if let Some(t) = tag {
        annotations.insert("org.opencontainers.image.ref.name".to_owned(), t.to_owned());
    }
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": MANIFEST_MEDIA_TYPE,
            "digest": package.digest,
            "size": package.manifest.len(),
            "artifactType": m.artifact_type,
            "annotations": annotations,
        }],
    });
    let mut blobs: BTreeMap<&str, &[u8]> = BTreeMap::new();
    blobs.insert(&package.digest, &package.manifest);
    blobs.insert(&m.config.digest, &package.config_bytes);
    blobs.insert(&m.layers[0].digest, &package.layer);
    let mut files: Vec<(String, Vec<u8>)> = vec![
        (
            "oci-layout".to_owned(),
            br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
        ),
        (
            "index.json".to_owned(),
            serde_json::to_vec(&index).expect("JSON"),
        ),
    ];
    for (digest, bytes) in blobs {
        let hex = digest_hex(digest).expect("digests this crate wrote");
        files.push((format!("blobs/sha256/{hex}"), bytes.to_vec()));
    }
    files.sort();
    let mut tar = tar::Builder::new(Vec::new());
    for (path, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        tar.append_data(&mut header, &path, bytes.as_slice())
            .map_err(|e| Error::new(Kind::Pack, format!("{path}: {e}")))?;
    }
    tar.into_inner()
        .map_err(|e| Error::new(Kind::Pack, format!("writing the archive: {e}")))
}
