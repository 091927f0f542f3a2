//! `agentfile pack`, `push`, `pull`, `sign`, `verify` and `keygen`: workflows
//! as signed OCI packages (CONTRACT §20). The work is `agentfile_package`'s
//! and the front door's (`frontend::package`); this module turns flags into
//! those calls and their results into lines.
//!
//! Exit codes: 0 done; 1 the registry or the file system failed; 2 a bad
//! reference, flag, key or workflow; 3 a signature missing, untrusted or not
//! matching, or bytes that do not match their digest (refused, as a policy
//! refuses).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentfile::config::{Config, PackagesSection};
use agentfile::frontend::{Options, package as door};
use agentfile::package::registry::Remote;
use agentfile::package::sign::{self, PrivateKey, PublicKey};
use agentfile::package::{Error, Kind, Reference, layout};

use super::args::ReadArgs;
use super::{EXIT_INVALID, config_for};

/// Where the registry is and how to reach it: every command that talks to
/// one.
#[derive(clap::Args, Clone, Default)]
pub(super) struct RegistryArgs {
    /// Speak plain HTTP to a registry on this machine (a remote registry is
    /// always reached over HTTPS).
    #[arg(long)]
    plain_http: bool,
    /// Config file ([packages]: cache, trusted_keys, plain_http; default:
    /// ./agent.json, ./agent.toml).
    #[arg(long)]
    config: Option<PathBuf>,
}

impl RegistryArgs {
    /// `[packages]` of the config for `workflow`, with the flags on top.
    fn settings(&self, workflow: &Path) -> Result<PackagesSection, Error> {
        let config = config_for(self.config.as_deref(), workflow)
            .map_err(|e| Error::new(Kind::Usage, format!("{e:#}")))?;
        let mut settings = config
            .as_ref()
            .map(|c: &Config| c.packages.clone())
            .unwrap_or_default();
        settings.plain_http |= self.plain_http;
        Ok(settings)
    }

    /// The reference, the settings, and a client for its registry.
    fn remote(
        &self,
        reference: &str,
        workflow: &Path,
    ) -> Result<(Reference, PackagesSection, Remote), Error> {
        let r = Reference::parse(reference)?;
        let settings = self.settings(workflow)?;
        let remote = Remote::new(&r, &door::remote_options(&settings))?;
        Ok((r, settings, remote))
    }
}

#[derive(clap::Args)]
pub(super) struct PackArgs {
    /// The workflow file, or a folder holding one.
    path: PathBuf,
    /// Write the package as an OCI image layout archive (what `skopeo copy
    /// oci-archive:FILE docker://…` reads).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Text for people, json for programs.
    #[arg(long, value_enum, default_value_t = super::args::ReportFormat::Text)]
    format: super::args::ReportFormat,
    #[command(flatten)]
    registry: RegistryArgs,
    #[command(flatten)]
    read: ReadArgs,
}

#[derive(clap::Args)]
pub(super) struct PushArgs {
    /// The workflow file, or a folder holding one.
    path: PathBuf,
    /// Where to push: HOST[:PORT]/REPOSITORY[:TAG].
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
    #[command(flatten)]
    read: ReadArgs,
}

#[derive(clap::Args)]
pub(super) struct PullArgs {
    /// HOST[:PORT]/REPOSITORY[:TAG][@sha256:…] (`oci://` optional).
    reference: String,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(clap::Args)]
pub(super) struct SignArgs {
    /// The package to sign: HOST[:PORT]/REPOSITORY[:TAG][@sha256:…].
    reference: String,
    /// The private key (PEM: PKCS#8 or SEC1, ECDSA P-256; `agentfile keygen`
    /// makes one).
    #[arg(long, value_name = "KEY")]
    key: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(clap::Args)]
pub(super) struct VerifyArgs {
    /// The package to check: HOST[:PORT]/REPOSITORY[:TAG][@sha256:…].
    reference: String,
    /// A trusted public key (PEM, as cosign.pub); repeat for several
    /// (default: [packages] trusted_keys).
    #[arg(long, value_name = "PUB")]
    key: Vec<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

#[derive(clap::Args)]
pub(super) struct KeygenArgs {
    /// Write PREFIX.key (the private key, mode 0600) and PREFIX.pub.
    #[arg(default_value = "agentfile")]
    prefix: PathBuf,
}

/// The exit code and message of a package error.
fn fail(e: &Error) -> ExitCode {
    eprintln!("agentfile: error: {e}");
    ExitCode::from(match e.kind {
        Kind::Usage | Kind::Pack | Kind::NotAPackage => EXIT_INVALID,
        Kind::Signature | Kind::Integrity => 3,
        Kind::Registry | Kind::Io => 1,
    })
}

fn packed(
    path: &Path,
    registry: &RegistryArgs,
    read: &ReadArgs,
) -> Result<agentfile::package::Package, ExitCode> {
    let config = match config_for(registry.config.as_deref(), path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agentfile: error: {e:#}");
            return Err(ExitCode::from(EXIT_INVALID));
        }
    };
    let options = Options {
        config: config.as_ref(),
        read: read.options(),
        ..Options::default()
    };
    match door::pack(path, options) {
        Ok(p) => Ok(p),
        Err(door::PackError::Invalid(e)) => {
            eprint!("{e}");
            if !e.to_string().ends_with('\n') {
                eprintln!();
            }
            Err(ExitCode::from(EXIT_INVALID))
        }
        Err(door::PackError::Package(e)) => Err(fail(&e)),
    }
}

pub(super) fn pack(args: PackArgs) -> ExitCode {
    let package = match packed(&args.path, &args.registry, &args.read) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let Some(out) = &args.output {
        let bytes = match layout::archive(&package, None) {
            Ok(b) => b,
            Err(e) => return fail(&e),
        };
        if let Err(e) = std::fs::write(out, bytes) {
            eprintln!("agentfile: error: {}: {e}", out.display());
            return ExitCode::from(1);
        }
    }
    let files = package.config.files.len();
    let stdout = &mut std::io::stdout();
    let written = match args.format {
        super::args::ReportFormat::Json => writeln!(
            stdout,
            "{}",
            serde_json::json!({
                "digest": package.digest,
                "artifactType": agentfile::package::ARTIFACT_TYPE,
                "name": package.config.name,
                "format": package.config.format,
                "version": package.config.version,
                "entry": package.config.entry,
                "files": package.config.files.keys().collect::<Vec<_>>(),
                "bytes": package.unpacked_bytes(),
                "layerBytes": package.layer.len(),
                "output": args.output.as_ref().map(|p| p.display().to_string()),
            })
        ),
        super::args::ReportFormat::Text => {
            eprintln!(
                "packed {} ({}): {} file{}, {} bytes{}",
                package.config.name,
                package.config.format,
                files,
                if files == 1 { "" } else { "s" },
                package.unpacked_bytes(),
                args.output
                    .as_ref()
                    .map(|p| format!(", written to {}", p.display()))
                    .unwrap_or_default()
            );
            writeln!(stdout, "{}", package.digest)
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::SUCCESS,
    }
}

pub(super) fn push(args: PushArgs) -> ExitCode {
    let package = match packed(&args.path, &args.registry, &args.read) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let result = (|| {
        let (r, _, remote) = args.registry.remote(&args.reference, &args.path)?;
        let digest = door::block_on(remote.push(&r, &package))?;
        Ok::<_, Error>(r.with_digest(&digest))
    })();
    match result {
        Ok(pinned) => {
            eprintln!(
                "pushed {} ({} files, {} bytes)",
                package.config.name,
                package.config.files.len(),
                package.layer.len()
            );
            println!("{pinned}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

pub(super) fn pull(args: PullArgs) -> ExitCode {
    let result = (|| {
        let (r, settings, remote) = args.registry.remote(&args.reference, Path::new("."))?;
        let cache = door::cache(&settings)?;
        let cached = door::block_on(remote.pull(&r, &cache))?;
        Ok::<_, Error>((r.with_digest(&cached.digest), cached))
    })();
    match result {
        Ok((pinned, cached)) => {
            eprintln!(
                "pulled {} ({}, {} files) into {}",
                cached.config.name,
                cached.config.format,
                cached.config.files.len(),
                cached.dir.display()
            );
            println!("{pinned}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

pub(super) fn sign(args: SignArgs) -> ExitCode {
    let result = (|| {
        let key = PrivateKey::read(&args.key)?;
        let (r, _, remote) = args.registry.remote(&args.reference, Path::new("."))?;
        door::block_on(async {
            let digest = remote.resolve(&r).await?;
            let record = key.sign(&r.repository_name(), &digest);
            remote.push_signature(&r, &digest, &record).await?;
            Ok::<_, Error>(r.with_digest(&digest))
        })
    })();
    match result {
        Ok(pinned) => {
            eprintln!(
                "signed with {} (tag {})",
                args.key.display(),
                pinned
                    .digest()
                    .and_then(|d| sign::signature_tag(d).ok())
                    .unwrap_or_default()
            );
            println!("{pinned}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

pub(super) fn verify(args: VerifyArgs) -> ExitCode {
    let result = (|| {
        let (r, settings, remote) = args.registry.remote(&args.reference, Path::new("."))?;
        let paths = if args.key.is_empty() {
            settings.trusted_keys.clone()
        } else {
            args.key.clone()
        };
        let keys = PublicKey::read_all(&paths)?;
        door::block_on(async {
            let digest = remote.resolve(&r).await?;
            let records = remote.signatures(&r, &digest).await?;
            let v = sign::verify(&records, &digest, &keys)?;
            Ok::<_, Error>((r.with_digest(&digest), v))
        })
    })();
    match result {
        Ok((pinned, v)) => {
            eprintln!(
                "verified: signed by {} ({} signature{} under the tag)",
                v.key,
                v.signatures,
                if v.signatures == 1 { "" } else { "s" }
            );
            println!("{pinned}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

pub(super) fn keygen(args: KeygenArgs) -> ExitCode {
    let private = args.prefix.with_extension("key");
    let public = args.prefix.with_extension("pub");
    for p in [&private, &public] {
        if p.exists() {
            eprintln!(
                "agentfile: error: {} exists; keygen does not overwrite a key",
                p.display()
            );
            return ExitCode::from(EXIT_INVALID);
        }
    }
    let key = PrivateKey::generate();
    if let Err(e) = write_private(&private, key.to_pem().as_bytes())
        .and_then(|()| std::fs::write(&public, key.public().to_pem()))
    {
        eprintln!("agentfile: error: {e}");
        return ExitCode::from(1);
    }
    eprintln!(
        "wrote {} (keep it secret) and {} (give it to who verifies: `agentfile verify REF --key {}`, `cosign verify --key {}`)",
        private.display(),
        public.display(),
        public.display(),
        public.display()
    );
    println!("{}", key.public().fingerprint());
    ExitCode::SUCCESS
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)
}
