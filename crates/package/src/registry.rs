//! Packages and signatures in an OCI registry, over the distribution API
//! (the `oci-client` crate speaks it, token auth included).
//!
//! Credentials come from the Docker config (`$DOCKER_CONFIG/config.json`,
//! else `~/.docker/config.json`): an `auths` entry, or a credential helper
//! (`credHelpers`, `credsStore`) asked as Docker asks it. Plain HTTP is for a
//! registry on this machine only.

use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine as _;
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;

use crate::sign::{PAYLOAD_MEDIA_TYPE, SIGNATURE_ANNOTATION, SignatureRecord, signature_tag};
use crate::{
    Cache, Cached, Descriptor, Error, Kind, MANIFEST_MEDIA_TYPE, MAX_DOCUMENT_BYTES,
    MAX_UNPACKED_BYTES, Manifest, Package, Reference, Result, digest_of,
};

/// How to reach a registry.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Speak plain HTTP (a registry on this machine only).
    pub plain_http: bool,
    /// The Docker config to read credentials from (default: the usual one).
    pub docker_config: Option<PathBuf>,
}

/// A client for the registry one reference names.
pub struct Remote {
    client: oci_client::Client,
    auth: RegistryAuth,
}

/// What a manifest request accepts: ours, and the image kinds a registry
/// may answer with instead (told apart as [`Kind::NotAPackage`]).
const ACCEPT: &[&str] = &[
    MANIFEST_MEDIA_TYPE,
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

impl Remote {
    /// A client for `reference`'s registry, with its credentials.
    pub fn new(reference: &Reference, options: &Options) -> Result<Remote> {
        if options.plain_http && !reference.is_loopback() {
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "--plain-http is for a registry on this machine; {} is not (a remote registry is reached over HTTPS)",
                    reference.registry()
                ),
            ));
        }
        let config = ClientConfig {
            protocol: if options.plain_http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(std::time::Duration::from_secs(10)),
            read_timeout: Some(std::time::Duration::from_secs(60)),
            ..ClientConfig::default()
        };
        install_tls();
        Ok(Remote {
            client: oci_client::Client::new(config),
            auth: credentials(reference.registry(), options.docker_config.as_deref())?,
        })
    }

    /// Push `package` to `reference` (its tag, or its digest when it has no
    /// tag); returns the manifest's digest.
    pub async fn push(&self, reference: &Reference, package: &Package) -> Result<String> {
        let r = reference.oci();
        self.login(r, RegistryOperation::Push).await?;
        let m = package.manifest();
        self.put_blob(r, &package.config_bytes, &m.config.digest)
            .await?;
        self.put_blob(r, &package.layer, &m.layers[0].digest)
            .await?;
        let target = match reference.tag() {
            Some(_) => reference.clone(),
            None => reference.with_digest(&package.digest),
        };
        self.put_manifest(&target, &package.manifest).await?;
        Ok(package.digest.clone())
    }

    async fn login(&self, r: &oci_client::Reference, op: RegistryOperation) -> Result<()> {
        self.client
            .auth(r, &self.auth, op)
            .await
            .map(|_| ())
            .map_err(|e| registry_error(r, e))
    }

    async fn put_blob(&self, r: &oci_client::Reference, bytes: &[u8], digest: &str) -> Result<()> {
        if self
            .client
            .blob_exists(r, digest)
            .await
            .map_err(|e| registry_error(r, e))?
        {
            return Ok(());
        }
        self.client
            .push_blob(r, bytes.to_vec(), digest)
            .await
            .map(|_| ())
            .map_err(|e| registry_error(r, e))
    }

    async fn put_manifest(&self, target: &Reference, manifest: &[u8]) -> Result<()> {
        let content_type = http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE);
        self.client
            .push_manifest_raw(target.oci(), manifest.to_vec(), content_type)
            .await
            .map(|_| ())
            .map_err(|e| registry_error(target.oci(), e))
    }

    /// The manifest `reference` names and its digest; `None` when the
    /// registry has no such tag or digest.
    async fn manifest(&self, reference: &Reference) -> Result<Option<(Vec<u8>, String)>> {
        let r = reference.oci();
        match self.client.pull_manifest_raw(r, &self.auth, ACCEPT).await {
            Ok((bytes, digest)) => {
                if bytes.len() > MAX_DOCUMENT_BYTES {
                    return Err(Error::new(
                        Kind::Integrity,
                        format!("{reference}: the manifest is over {MAX_DOCUMENT_BYTES} bytes"),
                    ));
                }
                let computed = digest_of(&bytes);
                if let Some(asked) = reference.digest()
                    && asked != computed
                {
                    return Err(Error::new(
                        Kind::Integrity,
                        format!(
                            "{reference}: the registry sent a manifest whose digest is {computed}"
                        ),
                    ));
                }
                let _ = digest;
                Ok(Some((bytes.to_vec(), computed)))
            }
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(registry_error(r, e)),
        }
    }

    /// The digest `reference` names now (a tag resolved).
    pub async fn resolve(&self, reference: &Reference) -> Result<String> {
        if let Some(d) = reference.digest() {
            return Ok(d.to_owned());
        }
        match self.manifest(reference).await? {
            Some((_, d)) => Ok(d),
            None => Err(missing(reference)),
        }
    }

    /// Pull `reference` into `cache` (a pinned digest the cache holds needs
    /// no registry) and check it.
    pub async fn pull(&self, reference: &Reference, cache: &Cache) -> Result<Cached> {
        if let Some(d) = reference.digest()
            && let Some(c) = cache.load(d)?
        {
            return Ok(c);
        }
        let Some((manifest, digest)) = self.manifest(reference).await? else {
            return Err(missing(reference));
        };
        if let Some(c) = cache.load(&digest)? {
            return Ok(c);
        }
        let m = Manifest::parse(&manifest).map_err(|e| {
            Error::new(
                Kind::NotAPackage,
                format!("{reference} is not an agentfile package ({e})"),
            )
        })?;
        let layer = m.package_layer()?.clone();
        let pinned = reference.with_digest(&digest);
        let config = self
            .blob(&pinned, &m.config, MAX_DOCUMENT_BYTES as u64)
            .await?;
        let layer = self.blob(&pinned, &layer, MAX_UNPACKED_BYTES).await?;
        cache.store(&digest, &manifest, &config, &layer)
    }

    async fn blob(&self, reference: &Reference, d: &Descriptor, limit: u64) -> Result<Vec<u8>> {
        if d.size > limit {
            return Err(Error::new(
                Kind::Integrity,
                format!(
                    "{reference}: a blob of {} bytes is over the {limit}-byte limit",
                    d.size
                ),
            ));
        }
        let mut out = Vec::with_capacity(d.size as usize);
        self.client
            .pull_blob(reference.oci(), d.digest.as_str(), &mut out)
            .await
            .map_err(|e| registry_error(reference.oci(), e))?;
        crate::check_digest(
            &format!("{reference}: the blob {}", d.digest),
            &out,
            &d.digest,
        )?;
        Ok(out)
    }

    /// The signatures stored for `digest` in `reference`'s repository
    /// (none when the signature tag does not exist).
    pub async fn signatures(
        &self,
        reference: &Reference,
        digest: &str,
    ) -> Result<Vec<SignatureRecord>> {
        let tag = reference.with_tag(&signature_tag(digest)?);
        let Some((bytes, _)) = self.manifest(&tag).await? else {
            return Ok(Vec::new());
        };
        let m = Manifest::parse(&bytes)?;
        let mut out = Vec::new();
        for layer in m
            .layers
            .iter()
            .filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE)
        {
            let Some(sig) = layer.annotations.get(SIGNATURE_ANNOTATION) else {
                continue;
            };
            let payload = self.blob(&tag, layer, MAX_DOCUMENT_BYTES as u64).await?;
            out.push(SignatureRecord {
                payload,
                signature: sig.clone(),
            });
        }
        Ok(out)
    }

    /// Add `record` to the signatures of `digest` (cosign's layout: one
    /// manifest under `sha256-<hex>.sig`, a layer per signature).
    pub async fn push_signature(
        &self,
        reference: &Reference,
        digest: &str,
        record: &SignatureRecord,
    ) -> Result<()> {
        let tag = reference.with_tag(&signature_tag(digest)?);
        self.login(tag.oci(), RegistryOperation::Push).await?;
        let mut layers: Vec<(Vec<u8>, Descriptor)> = Vec::new();
        if let Some((bytes, _)) = self.manifest(&tag).await? {
            for layer in Manifest::parse(&bytes)?.layers {
                if layer.media_type != PAYLOAD_MEDIA_TYPE {
                    continue;
                }
                let payload = self.blob(&tag, &layer, MAX_DOCUMENT_BYTES as u64).await?;
                layers.push((payload, layer));
            }
        }
        let mut annotations = BTreeMap::new();
        annotations.insert(SIGNATURE_ANNOTATION.to_owned(), record.signature.clone());
        let new = Descriptor {
            media_type: PAYLOAD_MEDIA_TYPE.to_owned(),
            digest: digest_of(&record.payload),
            size: record.payload.len() as u64,
            artifact_type: None,
            annotations,
        };
        if !layers.iter().any(|(_, d)| *d == new) {
            layers.push((record.payload.clone(), new));
        }
        for (payload, d) in &layers {
            self.put_blob(tag.oci(), payload, &d.digest).await?;
        }
        let config = signature_config(layers.iter().map(|(_, d)| d.digest.as_str()));
        let config_digest = digest_of(&config);
        self.put_blob(tag.oci(), &config, &config_digest).await?;
        let manifest = Manifest {
            schema_version: 2,
            media_type: MANIFEST_MEDIA_TYPE.to_owned(),
            artifact_type: None,
            config: Descriptor {
                media_type: "application/vnd.oci.image.config.v1+json".to_owned(),
                digest: config_digest,
                size: config.len() as u64,
                artifact_type: None,
                annotations: BTreeMap::new(),
            },
            layers: layers.into_iter().map(|(_, d)| d).collect(),
            annotations: BTreeMap::new(),
        };
        self.put_manifest(&tag, &serde_json::to_vec(&manifest).expect("JSON"))
            .await
    }
}

/// The image config cosign writes for a signature manifest.
fn signature_config<'a>(layers: impl Iterator<Item = &'a str>) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "architecture": "",
        "config": {},
        "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": layers.collect::<Vec<_>>()},
    }))
    .expect("JSON")
}

fn missing(reference: &Reference) -> Error {
    Error::new(
        Kind::Registry,
        format!("{reference}: the registry has no such package (check the repository and the tag)"),
    )
}

fn not_found(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NotFound | OciErrorCode::NameUnknown
            )
        }),
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        _ => false,
    }
}

fn registry_error(r: &oci_client::Reference, e: OciDistributionError) -> Error {
    let host = r.resolve_registry();
    if let OciDistributionError::DigestError(d) = &e {
        return Error::new(
            Kind::Integrity,
            format!("registry {host} sent bytes that do not match their digest: {d}"),
        );
    }
    let hint = match &e {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => {
            " (log in with `docker login`, or add the registry to ~/.docker/config.json)"
        }
        OciDistributionError::RequestError(err) if err.is_connect() || err.is_timeout() => {
            " (is the registry running? a registry on this machine without TLS needs --plain-http)"
        }
        _ => "",
    };
    Error::new(Kind::Registry, format!("registry {host}: {e}{hint}"))
}

/// The credentials the Docker config gives `registry`.
fn credentials(registry: &str, file: Option<&std::path::Path>) -> Result<RegistryAuth> {
    let path = match file {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
            Some(d) => PathBuf::from(d).join("config.json"),
            None => match std::env::var_os("HOME") {
                Some(h) => PathBuf::from(h).join(".docker/config.json"),
                None => return Ok(RegistryAuth::Anonymous),
            },
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryAuth::Anonymous),
        Err(e) => return Err(Error::io(path.display(), e)),
    };
    let config: DockerConfig = serde_json::from_str(&text).map_err(|e| {
        Error::new(
            Kind::Usage,
            format!("{}: not a Docker config: {e}", path.display()),
        )
    })?;
    let keys = registry_keys(registry);
    if let Some(helper) = keys
        .iter()
        .find_map(|k| config.cred_helpers.get(k))
        .or(config.creds_store.as_ref())
        && let Some(auth) = ask_helper(helper, registry)?
    {
        return Ok(auth);
    }
    for k in &keys {
        if let Some(entry) = config.auths.get(k) {
            return entry.auth(&path);
        }
    }
    Ok(RegistryAuth::Anonymous)
}

/// The keys a Docker config may file `registry` under.
fn registry_keys(registry: &str) -> Vec<String> {
    let mut keys = vec![
        registry.to_owned(),
        format!("https://{registry}"),
        format!("http://{registry}"),
        format!("https://{registry}/v1/"),
        format!("https://{registry}/v2/"),
    ];
    if registry == "index.docker.io" || registry == "docker.io" {
        keys.push("https://index.docker.io/v1/".to_owned());
        keys.push("docker.io".to_owned());
    }
    keys
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct DockerConfig {
    auths: BTreeMap<String, AuthEntry>,
    #[serde(rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
    #[serde(rename = "credsStore")]
    creds_store: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    registrytoken: Option<String>,
}

impl AuthEntry {
    fn auth(&self, path: &std::path::Path) -> Result<RegistryAuth> {
        if let Some(t) = &self.registrytoken {
            return Ok(RegistryAuth::Bearer(t.clone()));
        }
        if let (Some(u), Some(p)) = (&self.username, &self.password) {
            return Ok(RegistryAuth::Basic(u.clone(), p.clone()));
        }
        let Some(encoded) = &self.auth else {
            return Ok(RegistryAuth::Anonymous);
        };
        let bad = || {
            Error::new(
                Kind::Usage,
                format!(
                    "{}: an `auth` entry is not base64 of USER:PASSWORD",
                    path.display()
                ),
            )
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| bad())?;
        let text = String::from_utf8(decoded).map_err(|_| bad())?;
        let (u, p) = text.split_once(':').ok_or_else(bad)?;
        Ok(RegistryAuth::Basic(u.to_owned(), p.to_owned()))
    }
}

/// Ask `docker-credential-<helper>` for `registry`'s credentials, as Docker
/// does (the server on stdin, `{Username, Secret}` on stdout).
fn ask_helper(helper: &str, registry: &str) -> Result<Option<RegistryAuth>> {
    use std::io::Write as _;
    if !helper
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(Error::new(
            Kind::Usage,
            format!(
                "the Docker config names the credential helper `{helper}`, which is not a program name"
            ),
        ));
    }
    let program = format!("docker-credential-{helper}");
    // A helper gets what finds its store (the user's home, the session's
    // keyring bus), never the rest of this process's environment.
    let mut command = std::process::Command::new(&program);
    command.env_clear();
    for var in [
        "PATH",
        "HOME",
        "USER",
        "XDG_RUNTIME_DIR",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "DBUS_SESSION_BUS_ADDRESS",
        "PASSWORD_STORE_DIR",
        "GNUPGHOME",
    ] {
        if let Some(v) = std::env::var_os(var) {
            command.env(var, v);
        }
    }
    let child = command
        .arg("get")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        // Docker too goes on without a helper it cannot start.
        return Ok(None);
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(registry.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io(&program, e))?;
    if !out.status.success() {
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(rename = "Username")]
        username: String,
        #[serde(rename = "Secret")]
        secret: String,
    }
    let a: Answer = serde_json::from_slice(&out.stdout).map_err(|e| {
        Error::new(
            Kind::Registry,
            format!("{program} answered something else than credentials: {e}"),
        )
    })?;
    Ok(Some(if a.username == "<token>" {
        RegistryAuth::Bearer(a.secret)
    } else {
        RegistryAuth::Basic(a.username, a.secret)
    }))
}

/// rustls's ring provider as the process's default, once, before oci-client
/// builds its HTTPS client (the workspace builds reqwest without a provider
/// of its own; `agentfile_llm::install_tls` does the same for the rest). A
/// provider already installed is kept.
fn install_tls() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_is_refused_for_a_remote_registry() {
        let r = Reference::parse("ghcr.io/a/b:1").unwrap();
        let e = Remote::new(
            &r,
            &Options {
                plain_http: true,
                docker_config: None,
            },
        )
        .err()
        .unwrap();
        assert_eq!(e.kind, Kind::Usage);
    }

    #[test]
    fn docker_config_auths_are_read() {
        let dir = std::env::temp_dir().join(format!("agentfile-docker-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.json");
        let auth = base64::engine::general_purpose::STANDARD.encode("me:secret");
        std::fs::write(
            &path,
            format!(r#"{{"auths":{{"https://reg.example:5000":{{"auth":"{auth}"}}}}}}"#),
        )
        .unwrap();
        assert_eq!(
            credentials("reg.example:5000", Some(&path)).unwrap(),
            RegistryAuth::Basic("me".into(), "secret".into())
        );
        assert_eq!(
            credentials("other.example", Some(&path)).unwrap(),
            RegistryAuth::Anonymous
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
