//! cosign-compatible keyed signatures.
//!
//! A signature is ECDSA P-256 with SHA-256 over a *simple-signing payload*
//! (the JSON below), kept as a layer of media type [`PAYLOAD_MEDIA_TYPE`] in
//! an image manifest tagged `sha256-<hex>.sig` in the package's repository,
//! with the base64 of the DER signature in the layer's
//! `dev.cosignproject.cosign/signature` annotation: the layout `cosign sign
//! --key` writes and `cosign verify --key` reads.
//!
//! ```json
//! {"critical":{"identity":{"docker-reference":"HOST/REPO"},
//!              "image":{"docker-manifest-digest":"sha256:…"},
//!              "type":"cosign container image signature"},
//!  "optional":null}
//! ```
//!
//! Keys are PEM: a private key as PKCS#8 (`PRIVATE KEY`) or SEC1 (`EC
//! PRIVATE KEY`), a public key as `PUBLIC KEY` (SubjectPublicKeyInfo, what
//! `cosign.pub` holds).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{
    DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _, EncodePublicKey as _,
    LineEnding,
};
use serde::{Deserialize, Serialize};

use crate::{Error, Kind, Result, digest_hex, digest_of};

/// The media type of a signature's payload layer.
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation holding the signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";

/// The tag a package's signatures live under: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> Result<String> {
    let hex = digest_hex(digest)
        .ok_or_else(|| Error::new(Kind::Usage, format!("`{digest}` is not a sha256 digest")))?;
    Ok(format!("sha256-{hex}.sig"))
}

/// A signature as the registry keeps it: the payload's bytes and the
/// base64 DER signature over them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureRecord {
    /// The payload, as signed (base64 here, so the JSON keeps the bytes).
    #[serde(with = "b64")]
    pub payload: Vec<u8>,
    pub signature: String,
}

mod b64 {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

#[derive(Serialize, Deserialize)]
struct Payload {
    critical: Critical,
    optional: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The simple-signing payload for `digest` in `repository` (`HOST/REPO`).
pub fn payload(repository: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: repository.to_owned(),
            },
            image: Image {
                docker_manifest_digest: digest.to_owned(),
            },
            kind: PAYLOAD_TYPE.to_owned(),
        },
        optional: None,
    })
    .expect("JSON")
}

/// A private key, read from a PEM file.
pub struct PrivateKey {
    key: SigningKey,
}

impl PrivateKey {
    pub fn read(path: &Path) -> Result<PrivateKey> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
        PrivateKey::from_pem(&text)
            .map_err(|e| Error::new(e.kind, format!("{}: {}", path.display(), e.message)))
    }

    pub fn from_pem(text: &str) -> Result<PrivateKey> {
        if text.contains("ENCRYPTED SIGSTORE PRIVATE KEY")
            || text.contains("ENCRYPTED COSIGN PRIVATE KEY")
        {
            return Err(Error::new(
                Kind::Usage,
                "a password-protected cosign key is not read here; make a key with `agentfile keygen`, or give an unencrypted PKCS#8 P-256 key (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`)",
            ));
        }
        let key = if text.contains("BEGIN EC PRIVATE KEY") {
            p256::SecretKey::from_sec1_pem(text)
                .map(SigningKey::from)
                .map_err(|e| e.to_string())
        } else {
            SigningKey::from_pkcs8_pem(text).map_err(|e| e.to_string())
        };
        key.map(|key| PrivateKey { key }).map_err(|e| {
            Error::new(
                Kind::Usage,
                format!("not an ECDSA P-256 private key in PEM (PKCS#8 or SEC1): {e}"),
            )
        })
    }

    /// A new key.
    pub fn generate() -> PrivateKey {
        PrivateKey {
            key: SigningKey::random(&mut rand_core::OsRng),
        }
    }

    /// PKCS#8 PEM.
    pub fn to_pem(&self) -> String {
        self.key
            .to_pkcs8_pem(LineEnding::LF)
            .expect("a P-256 key encodes")
            .to_string()
    }

    pub fn public(&self) -> PublicKey {
        PublicKey {
            key: *self.key.verifying_key(),
            name: "the signing key".to_owned(),
        }
    }

    /// Sign `digest` in `repository`.
    pub fn sign(&self, repository: &str, digest: &str) -> SignatureRecord {
        let payload = payload(repository, digest);
        let sig: Signature = self.key.sign(&payload);
        SignatureRecord {
            signature: base64::engine::general_purpose::STANDARD.encode(sig.to_der().as_bytes()),
            payload,
        }
    }
}

/// A public key, and what to call it in a message (its file).
#[derive(Debug, Clone)]
pub struct PublicKey {
    key: VerifyingKey,
    pub name: String,
}

impl PublicKey {
    pub fn read(path: &Path) -> Result<PublicKey> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
        let key = VerifyingKey::from_public_key_pem(text.trim()).map_err(|e| {
            Error::new(
                Kind::Usage,
                format!(
                    "{}: not an ECDSA P-256 public key in PEM (`PUBLIC KEY`, as cosign.pub): {e}",
                    path.display()
                ),
            )
        })?;
        Ok(PublicKey {
            key,
            name: path.display().to_string(),
        })
    }

    /// Read every key of `paths`.
    pub fn read_all(paths: &[PathBuf]) -> Result<Vec<PublicKey>> {
        paths.iter().map(|p| PublicKey::read(p)).collect()
    }

    pub fn to_pem(&self) -> String {
        self.key
            .to_public_key_pem(LineEnding::LF)
            .expect("a P-256 key encodes")
    }

    /// A short fingerprint: the digest of the key's DER.
    pub fn fingerprint(&self) -> String {
        let der = self.key.to_public_key_der().expect("encodes");
        digest_of(der.as_bytes())[..19].to_owned()
    }

    fn verifies(&self, record: &SignatureRecord) -> bool {
        let Ok(der) = base64::engine::general_purpose::STANDARD.decode(record.signature.trim())
        else {
            return false;
        };
        let Ok(sig) = Signature::from_der(&der) else {
            return false;
        };
        self.key.verify(&record.payload, &sig).is_ok()
    }
}

/// Which key verified a package, and how many signatures were seen.
#[derive(Debug, Clone)]
pub struct Verified {
    pub key: String,
    pub signatures: usize,
}

/// Check that one of `records` is a signature of `digest` by one of `keys`.
/// The error says why not: no signature at all, none by a trusted key, or
/// one by a trusted key over another digest.
pub fn verify(records: &[SignatureRecord], digest: &str, keys: &[PublicKey]) -> Result<Verified> {
    if keys.is_empty() {
        return Err(Error::new(
            Kind::Usage,
            "no trusted key to check signatures with (`--key PUB`, or `[packages] trusted_keys`)",
        ));
    }
    if records.is_empty() {
        return Err(Error::new(
            Kind::Signature,
            format!(
                "{digest} is not signed: no signature under the tag {}",
                signature_tag(digest)?
            ),
        ));
    }
    let mut other_digest = None;
    for r in records {
        for k in keys {
            if !k.verifies(r) {
                continue;
            }
            let Ok(p) = serde_json::from_slice::<Payload>(&r.payload) else {
                continue;
            };
            if p.critical.kind != PAYLOAD_TYPE {
                continue;
            }
            if p.critical.image.docker_manifest_digest == digest {
                return Ok(Verified {
                    key: k.name.clone(),
                    signatures: records.len(),
                });
            }
            other_digest = Some(p.critical.image.docker_manifest_digest);
        }
    }
    Err(Error::new(
        Kind::Signature,
        match other_digest {
            Some(d) => format!(
                "{digest}: the trusted key signed {d}, not this package (a signature copied onto another package)"
            ),
            None => format!(
                "{digest} has {} signature{}, none by a trusted key ({})",
                records.len(),
                if records.len() == 1 { "" } else { "s" },
                keys.iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const E: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn public(k: &PrivateKey, name: &str) -> PublicKey {
        let mut p = k.public();
        p.name = name.into();
        p
    }

    #[test]
    fn a_signature_verifies_with_its_key_only() {
        let k = PrivateKey::generate();
        let other = PrivateKey::generate();
        let r = k.sign("127.0.0.1:5000/demo", D);
        let ok = verify(std::slice::from_ref(&r), D, &[public(&k, "k.pub")]).unwrap();
        assert_eq!(ok.key, "k.pub");
        let e = verify(std::slice::from_ref(&r), D, &[public(&other, "o.pub")]).unwrap_err();
        assert_eq!(e.kind, Kind::Signature);
        assert!(e.message.contains("none by a trusted key"), "{e}");
        let e = verify(&[], D, &[public(&k, "k.pub")]).unwrap_err();
        assert!(e.message.contains("not signed"), "{e}");
        let e = verify(&[r], E, &[public(&k, "k.pub")]).unwrap_err();
        assert!(e.message.contains("not this package"), "{e}");
    }

    #[test]
    fn a_changed_payload_does_not_verify() {
        let k = PrivateKey::generate();
        let mut r = k.sign("h/demo", D);
        r.payload[10] ^= 1;
        assert!(verify(&[r], D, &[k.public()]).is_err());
    }

    #[test]
    fn keys_round_trip_through_pem() {
        let k = PrivateKey::generate();
        let again = PrivateKey::from_pem(&k.to_pem()).unwrap();
        let r = again.sign("h/demo", D);
        let dir = std::env::temp_dir().join(format!("agentfile-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.pub"), k.public().to_pem()).unwrap();
        let pubkey = PublicKey::read(&dir.join("k.pub")).unwrap();
        assert!(verify(&[r], D, &[pubkey]).is_ok());
        let _ = std::fs::remove_dir_all(dir);
        assert!(PrivateKey::from_pem("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----").is_err());
    }

    #[test]
    fn the_payload_is_cosigns_shape() {
        let v: serde_json::Value = serde_json::from_slice(&payload("h/r", D)).unwrap();
        assert_eq!(v["critical"]["type"], PAYLOAD_TYPE);
        assert_eq!(v["critical"]["image"]["docker-manifest-digest"], D);
        assert_eq!(v["critical"]["identity"]["docker-reference"], "h/r");
        assert!(v["optional"].is_null());
    }
}
