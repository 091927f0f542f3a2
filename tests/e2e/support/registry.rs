//! A real OCI registry on loopback for the package tests (`agentfile
//! pack/push/pull/sign/verify`), and the two outside checkers that read what
//! we push: `skopeo` and `tests/oci/verify_cosign.py` (cosign's keyed
//! verification written independently of us, in Python with `cryptography`).
//!
//! The registry is Debian's `docker-registry` (distribution v2.8,
//! `/usr/bin/docker-registry`), started as `docker-registry serve CONFIG` on a
//! free `127.0.0.1` port with its storage in a scratch folder, plain HTTP and
//! no auth; ready once `GET /v2/` answers 200; killed when dropped. It stores
//! OCI image manifests (`application/vnd.oci.image.manifest.v1+json`), custom
//! layer media types and layer annotations as pushed (the manifest's digest is
//! the digest of the bytes PUT).
//!
//! skopeo needs `--tls-verify=false` for a plain-HTTP registry (without it:
//! "http: server gave HTTP response to HTTPS client"); a reference is
//! `docker://HOST/REPO:TAG` or `docker://HOST/REPO@sha256:HEX`:
//!
//! ```text
//! skopeo inspect --raw --tls-verify=false docker://127.0.0.1:PORT/REPO:TAG
//! skopeo list-tags --tls-verify=false docker://127.0.0.1:PORT/REPO
//! skopeo copy --src-tls-verify=false docker://127.0.0.1:PORT/REPO:TAG oci:DIR:TAG
//! skopeo copy --dest-tls-verify=false oci:DIR:TAG docker://127.0.0.1:PORT/REPO:TAG
//! ```
//!
//! `inspect --raw` prints the manifest's bytes as stored (their sha256 is the
//! digest); `copy` reads `/etc/containers/policy.json` (Debian's
//! containers-common, a dependency of skopeo) and keeps the digest. Checked
//! with skopeo 1.9.3 against docker-registry 2.8.2.
//!
//! The verifier: `AGENTFILE_PY tests/oci/verify_cosign.py --registry HOST
//! --repo REPO --digest sha256:HEX --key cosign.pub --plain-http [--all]`
//! prints `verified` and exits 0, or prints why not and exits 1 ([`verify_cosign`]).
//!
//! Without `docker-registry` or `skopeo` the helpers print `SKIPPED: …` and
//! return `None`, and the test returns (passes); `scripts/test.sh` installs
//! both.
#![allow(dead_code)] // until tests/e2e/package.rs uses every part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::Dir;

/// `name` in the usual binary folders, or on `PATH`.
fn find_binary(name: &str) -> Option<PathBuf> {
    for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin"] {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Debian's `docker-registry`, if installed (no notice).
pub fn docker_registry() -> Option<PathBuf> {
    find_binary("docker-registry")
}

/// A fresh [`Registry`], or `None` after printing `SKIPPED: …` when
/// `docker-registry` is not installed.
pub fn registry() -> Option<Registry> {
    if docker_registry().is_none() {
        eprintln!(
            "SKIPPED: docker-registry not installed (`apt-get install docker-registry`, or run scripts/test.sh, which installs it)"
        );
        return None;
    }
    Some(Registry::start())
}

/// `skopeo`, or `None` after printing `SKIPPED: …`.
pub fn skopeo() -> Option<PathBuf> {
    let p = find_binary("skopeo");
    if p.is_none() {
        eprintln!(
            "SKIPPED: skopeo not installed (`apt-get install skopeo`, or run scripts/test.sh, which installs it)"
        );
    }
    p
}

/// The python that runs `tests/oci/verify_cosign.py`: `AGENTFILE_PY` (the
/// venv `scripts/test.sh` makes at `target/py-mcp`, with `cryptography`), as
/// `tests/e2e/mcp_python.rs` finds it. Without it, or when it cannot import
/// `cryptography`: a panic when `CI` is set (CI must not skip the check),
/// else `None` after printing `SKIPPED: …`.
pub fn cosign_verify_py() -> Option<PathBuf> {
    let why = match std::env::var_os("AGENTFILE_PY").filter(|p| !p.is_empty()) {
        None => "AGENTFILE_PY is not set".to_owned(),
        Some(py) => {
            let ok = Command::new(&py)
                .args(["-c", "import cryptography"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Some(PathBuf::from(py));
            }
            format!(
                "AGENTFILE_PY ({}) cannot import cryptography",
                py.to_string_lossy()
            )
        }
    };
    if std::env::var_os("CI").is_some() {
        panic!(
            "{why}: CI must run the cosign verification (scripts/test.sh makes the venv and sets it)"
        );
    }
    eprintln!(
        "SKIPPED: {why} (scripts/test.sh makes a venv with `cryptography` and sets it) — no independent cosign verification"
    );
    None
}

/// `tests/oci/verify_cosign.py`.
pub fn verify_cosign_script() -> PathBuf {
    super::repo().join("tests/oci/verify_cosign.py")
}

/// `py verify_cosign.py --registry HOST --repo REPO --digest DIGEST --key KEY
/// --plain-http`: success and `verified` on stdout when a signature at
/// `REPO:sha256-HEX.sig` verifies with the PEM public key at `key`.
pub fn verify_cosign(py: &Path, host: &str, repo: &str, digest: &str, key: &Path) -> Output {
    Command::new(py)
        .arg(verify_cosign_script())
        .args([
            "--registry",
            host,
            "--repo",
            repo,
            "--digest",
            digest,
            "--key",
        ])
        .arg(key)
        .arg("--plain-http")
        .stdin(Stdio::null())
        .output()
        .expect("run tests/oci/verify_cosign.py")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// The status code of `GET /v2/` at `127.0.0.1:port`, if it answered.
fn v2_status(port: u16) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 64];
    let mut n = 0;
    while n < 12 {
        match s.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    // "HTTP/1.1 200 OK"
    std::str::from_utf8(&head[..n])
        .ok()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A `docker-registry serve` on a free loopback port, plain HTTP, no auth,
/// its storage in a scratch folder; killed (and the folder removed) when
/// dropped.
pub struct Registry {
    child: Child,
    port: u16,
    dir: Dir,
}

impl Registry {
    /// Starts one and waits (20 s at most) until `GET /v2/` answers 200.
    /// Panics when `docker-registry` is missing or does not come up (with its
    /// log); [`registry`] is the skipping way in.
    pub fn start() -> Registry {
        let bin = docker_registry().expect("docker-registry not installed");
        let dir = Dir::new("registry");
        // A port taken between choosing it and the registry binding it: try another.
        for _ in 0..3 {
            let port = free_port();
            let storage = dir.path().join("storage");
            std::fs::create_dir_all(&storage).unwrap();
            let config = dir.path().join("config.yml");
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: agentfile-test-registry\n",
                    storage.display()
                ),
            )
            .unwrap();
            let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
            let mut child = Command::new(&bin)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start docker-registry");
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if v2_status(port) == Some(200) {
                    return Registry { child, port, dir };
                }
                if child.try_wait().unwrap().is_some() {
                    break; // exited: most likely the port; try another
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "docker-registry did not answer GET /v2/ with 200 in 20 s; its log:\n{}",
                        std::fs::read_to_string(dir.path().join("registry.log"))
                            .unwrap_or_default()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!(
            "docker-registry exited before it answered, three times; its last log:\n{}",
            std::fs::read_to_string(dir.path().join("registry.log")).unwrap_or_default()
        );
    }

    /// `127.0.0.1:PORT`, the registry part of a reference (`HOST/REPO:TAG`).
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`, the base of the HTTP API (`/v2/…`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The registry's storage folder (`docker/registry/v2/…` under it).
    pub fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// `skopeo inspect --raw --tls-verify=false docker://HOST/REFERENCE`,
    /// `reference` being `REPO:TAG` or `REPO@sha256:HEX`: the manifest's bytes
    /// as stored on stdout.
    pub fn skopeo_inspect_raw(&self, skopeo: &Path, reference: &str) -> Output {
        Command::new(skopeo)
            .args(["inspect", "--raw", "--tls-verify=false"])
            .arg(format!("docker://{}/{reference}", self.host()))
            .stdin(Stdio::null())
            .output()
            .expect("run skopeo")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    fn sha256(b: &[u8]) -> String {
        format!("sha256:{:x}", Sha256::digest(b))
    }

    /// A blob pushed as the distribution API has it: POST an upload, PUT its bytes with the digest.
    fn push_blob(http: &reqwest::blocking::Client, base: &str, repo: &str, bytes: &[u8]) -> String {
        let digest = sha256(bytes);
        let r = http
            .post(format!("{base}/v2/{repo}/blobs/uploads/"))
            .send()
            .unwrap();
        assert_eq!(r.status(), 202, "{:?}", r.text());
        let loc = r.headers()["location"].to_str().unwrap().to_owned();
        let loc = if loc.starts_with('/') {
            format!("{base}{loc}")
        } else {
            loc
        };
        let sep = if loc.contains('?') { '&' } else { '?' };
        let r = http
            .put(format!("{loc}{sep}digest={digest}"))
            .header("content-type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .unwrap();
        assert_eq!(r.status(), 201, "{:?}", r.text());
        digest
    }

    /// The harness itself: the registry comes up, keeps an OCI manifest with a
    /// custom layer type and an annotation byte for byte under the digest of
    /// what was PUT, and skopeo reads it back with the documented flags.
    #[test]
    fn the_test_registry_keeps_an_oci_manifest_that_skopeo_reads_back() {
        let Some(reg) = super::registry() else { return };
        let http = crate::support::blocking_http();
        let base = reg.url();
        let repo = "team/agent";
        let config = push_blob(&http, &base, repo, b"{}");
        let layer = push_blob(&http, &base, repo, b"package bytes");
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","size":2,"digest":"{config}"}},"layers":[{{"mediaType":"application/vnd.dev.cosign.simplesigning.v1+json","size":13,"digest":"{layer}","annotations":{{"dev.cosignproject.cosign/signature":"c2ln"}}}}]}}"#
        );
        let r = http
            .put(format!("{base}/v2/{repo}/manifests/v1"))
            .header("content-type", "application/vnd.oci.image.manifest.v1+json")
            .body(manifest.clone())
            .send()
            .unwrap();
        assert_eq!(r.status(), 201, "{:?}", r.text());
        let digest = r.headers()["docker-content-digest"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(digest, sha256(manifest.as_bytes()));

        let Some(skopeo) = super::skopeo() else {
            return;
        };
        for reference in [format!("{repo}:v1"), format!("{repo}@{digest}")] {
            let o = reg.skopeo_inspect_raw(&skopeo, &reference);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(String::from_utf8_lossy(&o.stdout), manifest);
        }
    }
}
