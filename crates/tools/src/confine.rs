//! The kernel sandbox of a run's programs, derived from the same policy the
//! gate uses (see the `agentfile-sandbox` crate for how it is enforced).
//!
//! | the policy says | the kernel enforces |
//! |---|---|
//! | `[write]`/`[edit] allow` (the workspace by default), `allowed_dirs`, `[sandbox] writable` | Landlock: writes only beneath those folders' literal parts, and the run's private temporary folder (`TMPDIR`) |
//! | `[read] deny` without a glob, the secrets folders, the session store | hidden behind empty read-only mounts |
//! | `.git/hooks`, `.git/config`, the run's protected folders, `[write] deny` without a glob | read-only |
//! | `[web_fetch]` allows hosts | an egress proxy applying its rules is the only way out; otherwise no network |
//! | `[sandbox] ports` | those ports of this machine's loopback |
//! | — | an IPC namespace and a devpts of its own; before Landlock ABI 9, `/tmp`, `/var/tmp` and `/run` (their unix sockets) hidden but for the writable folders in them; at most `[bash] max_processes` (default 512 in the sandbox) processes per call, by a pids cgroup |
//!
//! Where the kernel cannot hold a sandbox, [`ToolSandbox::warning`] says so
//! once and `[sandbox] required` chooses between refusing to start programs
//! and running them gated only.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use agentfile_sandbox::proxy::{self, Refusal};
use agentfile_sandbox::{Guest, Sandbox, Spec};
use agentfile_wire::events::SandboxInfo;
use url::Url;

use crate::Denial;
use crate::policy::paths::PathPattern;
use crate::policy::{Gate, Policy, Request, SandboxSection};

/// Secrets folders and files hidden from every program, under the home
/// directory.
pub const SECRET_PATHS: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gcloud",
    ".config/gh",
    ".config/agentfile",
    ".password-store",
];

/// Sockets that reach a more privileged service.
const SOCKETS: &[&str] = &[
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/podman",
    "/run/containerd",
];

enum State {
    /// `[sandbox] enabled = false`.
    Off,
    On(Sandbox),
    Unavailable {
        reason: String,
        required: bool,
    },
}

/// A run's sandbox, as the toolbox uses it. Prepared when the toolbox is
/// made for a run that may start programs ([`ToolSandbox::new`]), else when
/// its first program starts ([`ToolSandbox::deferred`]): a run that starts
/// none pays nothing for it — no kernel probe (a fork and four namespaces),
/// no temporary folder, no Landlock ruleset.
pub struct ToolSandbox {
    gate: Arc<Gate>,
    mcp_servers: bool,
    prepared: OnceLock<Prepared>,
    /// What preparing takes, until it is done.
    recipe: Mutex<Option<Recipe>>,
    /// What `run_started.sandbox` says of a run not prepared at its start.
    deferred: SandboxInfo,
}

/// The sandbox as prepared.
struct Prepared {
    state: State,
    info: SandboxInfo,
    gate_only: Vec<String>,
    /// The run's private temporary folder, removed with the toolbox.
    _tmp: Option<TempDir>,
}

struct Recipe {
    section: SandboxSection,
    environment: Vec<(String, String)>,
    store: Option<PathBuf>,
    /// `[bash] max_processes` when the config sets it ([`ToolSandbox::bounded_by`]).
    max_processes: Option<Option<u64>>,
}

impl std::fmt::Debug for ToolSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSandbox")
            .field("info", self.info())
            .finish()
    }
}

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn private_tmp() -> std::io::Result<TempDir> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir().canonicalize()?;
    for _ in 0..16 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = base.join(format!(
            "agentfile-run-{}-{}-{nanos:x}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(TempDir(dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(
        "no free name for the run's temporary folder",
    ))
}

/// The sandbox `section` asks for, for the programs of a run bound as
/// `gate`; `environment` is the one programs derive theirs from (for
/// `XDG_RUNTIME_DIR`); `store` is a session store configured outside the
/// workspace (`session.path`), hidden like the one inside it.
fn prepare(
    section: &SandboxSection,
    gate: &Gate,
    environment: &[(String, String)],
    store: Option<&Path>,
) -> Prepared {
    let inputs = gate.sandbox_inputs();
    let mut gate_only = inputs.gate_only.clone();
    if section.enabled == Some(false) {
        return Prepared {
            state: State::Off,
            info: SandboxInfo {
                enforced: false,
                fs: "none".into(),
                net: "host".into(),
                reason: Some("[sandbox] enabled = false".into()),
            },
            gate_only,
            _tmp: None,
        };
    }
    let required = section.required == Some(true);
    let unavailable = |reason: String, gate_only| Prepared {
        info: SandboxInfo {
            enforced: false,
            fs: "none".into(),
            net: "host".into(),
            reason: Some(reason.clone()),
        },
        state: State::Unavailable { reason, required },
        gate_only,
        _tmp: None,
    };
    let probe = agentfile_sandbox::probe();
    if let Some(why) = probe.landlock.clone().or_else(|| probe.seccomp.clone()) {
        return unavailable(why, gate_only);
    }
    let tmp = match private_tmp() {
        Ok(t) => t,
        Err(e) => {
            return unavailable(
                format!("cannot make the run's temporary folder: {e}"),
                gate_only,
            );
        }
    };
    // The run's scratch folder (`runs/<session>/fs`) is staged by a
    // rename once the run starts, so what is bound into the hidden store
    // is the run's own folder above it, made now if need be.
    let run_dir: Option<PathBuf> = inputs
        .scratch
        .as_ref()
        .and_then(|s| s.parent())
        .map(Path::to_path_buf);
    if let Some(d) = &run_dir {
        let _ = std::fs::create_dir_all(d);
    }
    let mut writable = inputs.writable.clone();
    writable.extend(run_dir.clone());
    for p in &section.writable {
        match PathPattern::compile(&p.text, gate.workspace(), gate.home()) {
            Ok(c) => writable.push(c.plain_root().unwrap_or_else(|| c.literal_root())),
            Err(e) => gate_only.push(format!("[sandbox] writable {:?}: {e}", p.text)),
        }
    }
    let hidden = hidden_paths(gate, environment, &inputs, store);
    // A writable root that a hidden path covers, or that is hidden
    // itself, would undo the hiding; the hiding wins.
    let writable: Vec<PathBuf> = resolve_all(writable)
        .into_iter()
        .filter(|w| !hidden.iter().any(|h| w.starts_with(h)) || Some(w) == inputs.scratch.as_ref())
        .collect();
    let ws = gate.workspace();
    let mut read_only = vec![ws.join(".git/hooks"), ws.join(".git/config")];
    read_only.extend(inputs.read_only.iter().cloned());
    let read_only = resolve_all(read_only);
    let exposed = run_dir
        .as_ref()
        .filter(|s| s.is_dir())
        .map(|s| (inputs.store.clone(), s.clone()));
    let spec = Spec {
        writable,
        hidden,
        read_only,
        exposed,
        tmp: tmp.0.clone(),
        proxy: inputs.hosts.is_some(),
        ports: section.ports.clone(),
        max_processes: Some(agentfile_sandbox::DEFAULT_MAX_PROCESSES),
    };
    match Sandbox::new(spec) {
        Ok(sb) => {
            let partial = sb.partial().map(str::to_owned);
            let net = describe_net(
                &sb,
                inputs.hosts.as_deref(),
                &section.ports,
                partial.is_some(),
            );
            let (fs, reason) = match &partial {
                None => (format!("landlock (ABI {})", sb.landlock_abi()), None),
                Some(why) => (
                    format!("landlock (ABI {}), without namespaces", sb.landlock_abi()),
                    Some(format!("partial: {why}")),
                ),
            };
            Prepared {
                info: SandboxInfo {
                    enforced: true,
                    fs,
                    net,
                    reason,
                },
                state: State::On(sb),
                gate_only,
                _tmp: Some(tmp),
            }
        }
        Err(e) => unavailable(e.0, gate_only),
    }
}

impl ToolSandbox {
    /// The sandbox of a run under `policy`, bound as `gate`, prepared now: for
    /// a run that may start programs. `environment` is the one programs derive
    /// theirs from (for `XDG_RUNTIME_DIR`); `store` is a session store
    /// configured outside the workspace (`session.path`), hidden like the one
    /// inside it.
    pub fn new(
        policy: &Policy,
        gate: Arc<Gate>,
        environment: &[(String, String)],
        store: Option<&Path>,
    ) -> ToolSandbox {
        let sb = Self::deferred(policy, gate, environment, store);
        sb.prepared();
        sb
    }

    /// The same sandbox, prepared when the run's first program starts (a run
    /// whose tools start none: bash off, no MCP server the sandbox holds, no
    /// shell step). Until then `run_started` says it was not needed.
    pub fn deferred(
        policy: &Policy,
        gate: Arc<Gate>,
        environment: &[(String, String)],
        store: Option<&Path>,
    ) -> ToolSandbox {
        let section = policy.sandbox().clone();
        let sb = ToolSandbox {
            mcp_servers: section.mcp_servers == Some(true),
            deferred: SandboxInfo {
                enforced: false,
                fs: "none".into(),
                net: "host".into(),
                reason: Some(
                    "not prepared: no tool of this run starts a program (bash is off, no shell \
                     step, no MCP server in the sandbox); it is prepared if one does"
                        .into(),
                ),
            },
            gate,
            prepared: OnceLock::new(),
            recipe: Mutex::new(Some(Recipe {
                // Turned off costs nothing to say so: said at once.
                section,
                environment: environment.to_vec(),
                store: store.map(Path::to_path_buf),
                max_processes: None,
            })),
        };
        if sb
            .lock_recipe()
            .as_ref()
            .is_some_and(|r| r.section.enabled == Some(false))
        {
            sb.prepared();
        }
        sb
    }

    fn lock_recipe(&self) -> std::sync::MutexGuard<'_, Option<Recipe>> {
        self.recipe.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sandbox, prepared now if it was not.
    fn prepared(&self) -> &Prepared {
        self.prepared.get_or_init(|| {
            let Some(r) = self.lock_recipe().take() else {
                // Unreachable: the recipe is taken only here, once.
                return Prepared {
                    state: State::Unavailable {
                        reason: "the sandbox could not be prepared".into(),
                        required: true,
                    },
                    info: SandboxInfo {
                        enforced: false,
                        fs: "none".into(),
                        net: "host".into(),
                        reason: Some("the sandbox could not be prepared".into()),
                    },
                    gate_only: Vec::new(),
                    _tmp: None,
                };
            };
            let p = prepare(&r.section, &self.gate, &r.environment, r.store.as_deref());
            if let (State::On(sb), Some(max)) = (&p.state, r.max_processes) {
                sb.set_max_processes(max);
            }
            p
        })
    }

    /// What `run_started.sandbox` says: the prepared sandbox, or that a run
    /// that starts no program did not need one.
    pub fn info(&self) -> &SandboxInfo {
        match self.prepared.get() {
            Some(p) => &p.info,
            None => &self.deferred,
        }
    }

    /// What is enforced, for `inspect --sandbox`.
    pub fn spec(&self) -> Option<&Spec> {
        match &self.prepared().state {
            State::On(sb) => Some(sb.spec()),
            _ => None,
        }
    }

    /// Rules only the gate applies.
    pub fn gate_only(&self) -> &[String] {
        &self.prepared().gate_only
    }

    /// Stdio MCP servers run in the sandbox too.
    pub fn covers_mcp_servers(&self) -> bool {
        self.mcp_servers
    }

    /// Whether the programs it starts see the run's control files as
    /// read-only mounts (the whole sandbox). In the partial mode Landlock
    /// cannot hold a file inside a folder it lets them write; unavailable,
    /// nothing holds them but the gate.
    pub fn holds_control_files(&self) -> bool {
        let p = self.prepared();
        matches!(p.state, State::On(_)) && p.info.reason.is_none()
    }

    /// The one line a run shows when the sandbox is not enforced here (for
    /// a sandbox prepared at the start; one prepared later warns nobody).
    pub fn warning(&self) -> Option<String> {
        let p = self.prepared.get()?;
        if let (State::On(_), Some(reason)) = (&p.state, &p.info.reason) {
            return Some(format!(
                "sandbox: {reason}; files are held by Landlock and the network by Landlock and seccomp, but the session store, .git and the run's protected folders by the gate only, and a program can outlive its call if agentfile is killed"
            ));
        }
        match &p.state {
            State::Unavailable { reason, required } => Some(if *required {
                format!(
                    "sandbox: unavailable: {reason}; programs will not be started ([sandbox] required = true)"
                )
            } else {
                format!(
                    "sandbox: unavailable: {reason}; tools run gated by the policy only (set [sandbox] required = true to refuse them instead)"
                )
            }),
            _ => None,
        }
    }

    /// Whether a program may be started at all: refused only where the
    /// sandbox is required and unavailable.
    pub fn admit(&self, tool: &str) -> Result<(), Denial> {
        match &self.prepared().state {
            State::Unavailable {
                reason,
                required: true,
            } => Err(Denial {
                tool: tool.to_owned(),
                rule: "[sandbox] required = true".to_owned(),
                reason: format!("the sandbox is unavailable on this machine: {reason}"),
            }),
            _ => Ok(()),
        }
    }

    /// Put the process `cmd` starts in the sandbox (when it is on); call
    /// [`Jail::started`] once it is spawned. `cmd` must not set a process
    /// group.
    pub fn enter(&self, cmd: &mut tokio::process::Command) -> std::io::Result<Option<Jail>> {
        let State::On(sb) = &self.prepared().state else {
            return Ok(None);
        };
        cmd.envs(sb.env());
        let guest = sb.command(cmd)?;
        Ok(Some(Jail {
            guest,
            check: proxy_check(self.gate.clone()),
            tasks: Vec::new(),
        }))
    }

    /// Whether programs are put in a sandbox.
    pub fn is_on(&self) -> bool {
        matches!(self.prepared().state, State::On(_))
    }

    /// Honour `[bash] max_processes` as the bound on each call's processes
    /// (a pids cgroup, which unlike `RLIMIT_NPROC` binds root too): a value
    /// set in the config is the bound (0: none); the config's default
    /// leaves the sandbox's own, [`agentfile_sandbox::DEFAULT_MAX_PROCESSES`].
    pub fn bounded_by(self, configured_max_processes: u64) -> ToolSandbox {
        if configured_max_processes == agentfile_config::BashSection::default().max_processes {
            return self;
        }
        let max = (configured_max_processes > 0).then_some(configured_max_processes);
        match self.prepared.get() {
            Some(p) => {
                if let State::On(sb) = &p.state {
                    sb.set_max_processes(max);
                }
            }
            None => {
                if let Some(r) = self.lock_recipe().as_mut() {
                    r.max_processes = Some(max);
                }
            }
        }
        self
    }
}

/// What no program of a run may read: the secrets folders under `~`, the
/// usual socket folders, `$XDG_RUNTIME_DIR`, `[read] deny` without a glob,
/// and the session store (inside the workspace and `session.path`, with a
/// SQLite file's journal files); resolved.
fn hidden_paths(
    gate: &Gate,
    environment: &[(String, String)],
    inputs: &crate::policy::SandboxInputs,
    store: Option<&Path>,
) -> Vec<PathBuf> {
    let mut hidden: Vec<PathBuf> = Vec::new();
    if let Some(home) = gate.home() {
        hidden.extend(SECRET_PATHS.iter().map(|p| home.join(p)));
    }
    hidden.extend(SOCKETS.iter().map(PathBuf::from));
    if let Some((_, dir)) = environment
        .iter()
        .find(|(k, v)| k == "XDG_RUNTIME_DIR" && v.starts_with('/'))
    {
        hidden.push(PathBuf::from(dir));
    }
    hidden.extend(inputs.hidden.iter().cloned());
    hidden.push(inputs.store.clone());
    if let Some(store) = store {
        let store = if store.is_absolute() {
            store.to_path_buf()
        } else {
            gate.workspace().join(store)
        };
        // A SQLite file comes with its journal files.
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = store.clone().into_os_string();
            p.push(suffix);
            hidden.push(PathBuf::from(p));
        }
    }
    resolve_all(hidden)
}

/// What `run_started.sandbox.net` says of a sandbox: the proxy (when
/// `hosts` names the section whose host rules it applies), the ports.
fn describe_net(sb: &Sandbox, hosts: Option<&str>, ports: &[u16], partial: bool) -> String {
    let mut net = match (hosts, partial) {
        (Some(label), false) => format!("proxy ([{label}] hosts)"),
        (Some(label), true) => format!(
            "proxy ([{label}] hosts) at 127.0.0.1:{}, the only TCP port (Landlock); no UDP (seccomp)",
            sb.proxy_port().unwrap_or_default()
        ),
        (None, false) => "none".to_owned(),
        (None, true) => "no TCP (Landlock), no UDP (seccomp)".to_owned(),
    };
    if !ports.is_empty() {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        if partial {
            net.push_str(&format!(", TCP ports {} on any host", ports.join(" ")));
        } else {
            net.push_str(&format!(", loopback ports {}", ports.join(" ")));
        }
    }
    net
}

fn resolve_all(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        let p = p.canonicalize().unwrap_or(p);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// A process in the sandbox: the proxy and forwarders serving it, stopped
/// when dropped.
pub struct Jail {
    guest: Guest,
    check: proxy::Check,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Jail {
    /// The process was spawned: serve its listeners.
    pub fn started(&mut self) -> std::io::Result<()> {
        for (port, listener) in self.guest.listeners()? {
            let task = if port == agentfile_sandbox::PROXY_PORT {
                proxy::serve(listener, self.check.clone())?
            } else {
                proxy::forward(listener, port)?
            };
            self.tasks.push(task);
        }
        Ok(())
    }
}

impl Drop for Jail {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The proxy's judge: the web policy's host rules and rate limit, then its
/// checks of the addresses the host resolves to; the connection goes to an
/// approved one.
fn proxy_check(gate: Arc<Gate>) -> proxy::Check {
    Arc::new(move |host: String, port: u16| {
        let gate = gate.clone();
        Box::pin(async move {
            let shown = if host.contains(':') {
                format!("[{host}]")
            } else {
                host.clone()
            };
            let url = Url::parse(&format!("http://{shown}:{port}/"))
                .map_err(|e| Refusal(format!("`{host}` is not a host name: {e}")))?;
            // As a web_fetch call is judged: host rules, guards, and the
            // section's rate limit (each connection counts as one call).
            let verdict = gate
                .check(&Request::Fetch { url: &url })
                .map_err(|d| Refusal(format!("denied by policy ({}): {}", d.rule, d.reason)))?
                .url
                .ok_or_else(|| Refusal(format!("`{host}`: the URL was not judged")))?;
            let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
                Ok(ip) => vec![SocketAddr::new(ip, port)],
                Err(_) => tokio::net::lookup_host((host.as_str(), port))
                    .await
                    .map_err(|e| Refusal(format!("`{host}` does not resolve: {e}")))?
                    .collect(),
            };
            let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
            gate.check_addrs(&verdict, &ips)
                .map_err(|d| Refusal(format!("denied by policy ({}): {}", d.rule, d.reason)))?;
            addrs
                .first()
                .copied()
                .ok_or_else(|| Refusal(format!("`{host}` has no addresses")))
        })
    })
}

/// Where a path lies for messages: relative to the workspace when inside.
pub fn shown(p: &Path, ws: &Path) -> String {
    crate::policy::paths::display_relative(p, ws)
}

impl ToolSandbox {
    /// What is enforced here, for `inspect --sandbox --format json`.
    pub fn describe(&self) -> serde_json::Value {
        let this = self.prepared();
        let probe = agentfile_sandbox::probe();
        let paths = |v: &[PathBuf], only_present: bool| -> Vec<String> {
            v.iter()
                .filter(|p| !only_present || p.symlink_metadata().is_ok())
                .map(|p| p.display().to_string())
                .collect()
        };
        let mut out = serde_json::json!({
            "enforced": this.info.enforced,
            "fs": this.info.fs,
            "net": this.info.net,
            "kernel": {
                "landlock_abi": probe.landlock_abi,
                "landlock": probe.landlock.as_deref().unwrap_or("available"),
                "namespaces": probe.namespaces.as_deref().unwrap_or("available"),
                "seccomp": probe.seccomp.as_deref().unwrap_or("available"),
            },
            "gate_only": this.gate_only,
        });
        if let Some(r) = &this.info.reason {
            out["reason"] = r.clone().into();
        }
        if let State::Unavailable { required, .. } = &this.state {
            out["when_unavailable"] = if *required {
                "programs are not started ([sandbox] required = true)"
            } else {
                "programs run gated by the policy only"
            }
            .into();
        }
        if !probe.simulated.is_empty() {
            out["simulated"] = probe.simulated.clone().into();
        }
        if let Some(spec) = self.spec() {
            out["writable"] = paths(&spec.writable, false).into();
            out["temporary_folder"] = "private to the run (TMPDIR)".into();
            let partial = this.info.reason.is_some();
            let inside_writable = |p: &PathBuf| spec.writable.iter().any(|w| p.starts_with(w));
            let (held, unheld): (Vec<PathBuf>, Vec<PathBuf>) = spec
                .hidden
                .iter()
                .cloned()
                .partition(|h| !partial || !inside_writable(h));
            out["hidden"] = paths(&held, true).into();
            if partial {
                // Without a mount namespace nothing inside a writable folder
                // can be hidden or made read-only.
                let mut gate_only = paths(&unheld, true);
                gate_only.extend(paths(&spec.read_only, true));
                out["gate_only_paths"] = gate_only.into();
            } else {
                out["read_only"] = paths(&spec.read_only, true).into();
            }
            if let Some((_, scratch)) = &spec.exposed {
                out["scratch"] = scratch.display().to_string().into();
            }
            let mut refused: Vec<&str> = agentfile_sandbox::filter::denied()
                .iter()
                .map(|(n, _)| *n)
                .chain(["clone with CLONE_NEW*", "clone3 (ENOSYS)"])
                .collect();
            if partial {
                refused.extend([
                    "setsid",
                    "UDP and raw IP sockets",
                    "packet sockets",
                    "SysV IPC and POSIX message queues",
                ]);
            }
            out["processes"] = serde_json::json!({
                "session": if partial {
                    "own session (setsid refused), killed with its parent; no PID namespace: a program can outlive its call if agentfile is killed"
                } else {
                    "own session and PID namespace: everything a program starts ends with it, and with the run"
                },
                "no_new_privs": true,
                "seccomp_refuses": refused,
            });
            out["mcp_servers"] = self.mcp_servers.into();
        }
        if let State::On(sb) = &this.state {
            let iso = sb.isolation();
            out["isolation"] = serde_json::json!({
                "unix_sockets": {
                    "isolated": iso.unix_sockets_isolated,
                    "hidden_folders": paths(&iso.socket_folders_hidden, false),
                    "how": iso.unix_sockets,
                },
                "ipc": { "isolated": iso.ipc_isolated, "how": iso.ipc },
                "terminals": { "isolated": iso.terminals_isolated, "how": iso.terminals },
                "processes": {
                    "bounded": iso.max_processes.is_some(),
                    "max": iso.max_processes,
                    "how": iso.processes,
                },
            });
        }
        out
    }

    /// The same, as text.
    pub fn describe_text(&self) -> String {
        let this = self.prepared();
        let d = self.describe();
        let mut s = String::new();
        let line = |s: &mut String, t: String| {
            s.push_str(&t);
            s.push('\n');
        };
        let list = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let k = &d["kernel"];
        match (this.info.enforced, &this.info.reason) {
            (true, None) => line(&mut s, "sandbox: enforced".into()),
            (true, Some(r)) => line(&mut s, format!("sandbox: enforced, {r}")),
            (false, r) => line(
                &mut s,
                format!("sandbox: not enforced: {}", r.as_deref().unwrap_or("")),
            ),
        }
        if let Some(w) = d["when_unavailable"].as_str() {
            line(&mut s, format!("  then: {w}"));
        }
        line(
            &mut s,
            format!(
                "kernel: Landlock {}; namespaces: {}; seccomp: {}",
                if probe_abi(k) > 0 {
                    format!("ABI {}", probe_abi(k))
                } else {
                    k["landlock"].as_str().unwrap_or("").to_owned()
                },
                k["namespaces"].as_str().unwrap_or(""),
                k["seccomp"].as_str().unwrap_or(""),
            ),
        );
        if !list(&d["simulated"]).is_empty() {
            line(
                &mut s,
                format!(
                    "simulated: {} (AGENTFILE_SANDBOX_SIMULATE)",
                    list(&d["simulated"]).join(", ")
                ),
            );
        }
        if self.spec().is_some() {
            line(&mut s, format!("files: {}", this.info.fs));
            for (label, key) in [
                ("writable", "writable"),
                ("hidden", "hidden"),
                ("read-only", "read_only"),
                (
                    "gate only (inside a writable folder, no mount namespace)",
                    "gate_only_paths",
                ),
            ] {
                let items = list(&d[key]);
                if !items.is_empty() {
                    line(&mut s, format!("  {label}:"));
                    for i in items {
                        line(&mut s, format!("    {i}"));
                    }
                }
            }
            line(
                &mut s,
                "  temporary folder: private to the run (TMPDIR)".into(),
            );
            let iso = &d["isolation"];
            if iso["unix_sockets"]["isolated"] == true {
                line(&mut s, format!("network: {}", this.info.net));
            } else {
                line(
                    &mut s,
                    format!(
                        "network: {} (IP; named unix sockets: see below)",
                        this.info.net
                    ),
                );
            }
            line(&mut s, "isolation from the rest of the machine:".into());
            for (label, key) in [
                ("unix sockets", "unix_sockets"),
                ("IPC", "ipc"),
                ("terminals", "terminals"),
                ("process count", "processes"),
            ] {
                line(
                    &mut s,
                    format!("  {label}: {}", iso[key]["how"].as_str().unwrap_or("")),
                );
            }
            line(
                &mut s,
                format!(
                    "processes: {}; no_new_privs",
                    d["processes"]["session"].as_str().unwrap_or("")
                ),
            );
            line(
                &mut s,
                format!(
                    "  seccomp refuses: {}",
                    list(&d["processes"]["seccomp_refuses"]).join(", ")
                ),
            );
            line(
                &mut s,
                format!(
                    "mcp servers: {}",
                    if self.mcp_servers {
                        "in the sandbox"
                    } else {
                        "not sandboxed ([sandbox] mcp_servers = true puts them in)"
                    }
                ),
            );
        }
        if !this.gate_only.is_empty() {
            line(
                &mut s,
                "gate only (no kernel rule can express these):".into(),
            );
            for g in &this.gate_only {
                line(&mut s, format!("  {g}"));
            }
        }
        s
    }
}

fn probe_abi(k: &serde_json::Value) -> i64 {
    k["landlock_abi"].as_i64().unwrap_or(0)
}

/// Why this machine cannot hold the sandbox, if it cannot.
pub fn unavailable() -> Option<String> {
    agentfile_sandbox::probe().unavailable()
}
