//! `bash`: run an allowed command line in the workspace.
//!
//! The shell runs as `bash --noprofile --norc -c LINE` in its own process group,
//! with stdin closed, an environment rebuilt from a short allowlist (no secrets
//! can reach it; see [`crate::secrets`]), a timeout, and capped output. On timeout,
//! on cancellation, when the call's future is dropped, and also after the shell
//! exits (so background jobs it left behind do not linger), the whole group is
//! killed with SIGKILL.
//!
//! Every command runs under the resource limits of the config's `[bash]`
//! section ([`BashSection`]): file size, CPU time, processes and optionally
//! address space, set with `setrlimit` in the child between fork and exec, so
//! an allowed `yes > out.txt` stops at the file-size limit instead of filling
//! the disk. When a limit ends or cuts a command, the output says which limit
//! and which config key sets it ([`limit_notes`]).
//!
//! The output is fitted to the result cap by [`super::fit`]: each stream's
//! note states how many bytes the stream produced in all, and is never cut.
//!
//! Where the run has a kernel sandbox ([`ToolSandbox`]), the command runs in
//! it: the sandbox makes the session the group kill reaches, and holds files,
//! network and processes to what the policy allows.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use super::human_bytes;
use crate::confine::ToolSandbox;
use crate::{CommandOutcome, ToolOutput};
use agentfile_config::BashSection;

/// How long to wait for the output pipes after the group was killed (a process
/// that escaped the group could hold them open forever).
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// The bash to run: `/bin/bash` when present, else `bash` from `PATH`.
fn bash_program() -> &'static str {
    if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "bash"
    }
}

/// Kills the process group when dropped, unless disarmed.
struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid
            && pgid > 0
        {
            // SAFETY: killpg has no memory-safety preconditions; a stale group
            // id makes it fail with ESRCH, which is ignored.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The type of `setrlimit`'s first argument on this platform.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type Resource = libc::c_int;

/// One `setrlimit` to make in the child.
#[derive(Debug, Clone, Copy)]
struct Rlimit {
    resource: Resource,
    soft: libc::rlim_t,
    hard: libc::rlim_t,
}

/// The limits of `[bash]` as `setrlimit` calls, worked out in the parent (the
/// child may only make async-signal-safe calls). A configured value above the
/// hard limit this process already has is lowered to it: an unprivileged
/// process cannot raise a hard limit, and asking would make `setrlimit` fail.
fn rlimits(limits: &BashSection) -> Vec<Rlimit> {
    let mut out = Vec::new();
    let wanted = [
        (libc::RLIMIT_FSIZE, limits.max_file_bytes, 0),
        // The soft CPU limit sends SIGXCPU, which says what happened; the hard
        // one, a little later, SIGKILLs a process that ignores it.
        (libc::RLIMIT_CPU, limits.max_cpu_seconds, 5),
        (libc::RLIMIT_NPROC, limits.max_processes, 0),
        (libc::RLIMIT_AS, limits.max_memory_bytes, 0),
    ];
    for (resource, value, grace) in wanted {
        if value == 0 {
            continue;
        }
        let mut current = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        let hard = if unsafe { libc::getrlimit(resource, &mut current) } == 0 {
            current.rlim_max
        } else {
            libc::RLIM_INFINITY
        };
        let value = value as libc::rlim_t;
        let clamp = |v: libc::rlim_t| {
            if hard == libc::RLIM_INFINITY {
                v
            } else {
                v.min(hard)
            }
        };
        out.push(Rlimit {
            resource,
            soft: clamp(value),
            hard: clamp(value.saturating_add(grace)),
        });
    }
    out
}

/// Run `command` in `cwd` under `limits`, its output fitted to `cap` bytes,
/// with `stdin` written to its standard input (else it reads nothing).
/// Never fails: problems are error outputs.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    command: &str,
    stdin: Option<Vec<u8>>,
    cwd: &Path,
    env: &[(String, String)],
    timeout: Duration,
    cap: usize,
    limits: &BashSection,
    cancel: &CancellationToken,
    sandbox: Option<&ToolSandbox>,
) -> ToolOutput {
    let sandboxed = sandbox.is_some_and(ToolSandbox::is_on);
    let mut cmd = command_for(command, stdin.is_some(), cwd, env, limits, sandboxed);
    let mut jail = match sandbox.map(|s| s.enter(&mut cmd)).transpose() {
        Ok(j) => j.flatten(),
        Err(e) => return ToolOutput::error(format!("cannot prepare the sandbox: {e}")),
    };
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if sandboxed => {
            return ToolOutput::error(format!("cannot start bash in the sandbox: {e}"));
        }
        Err(e) => return ToolOutput::error(format!("cannot start bash: {e}")),
    };
    if let Some(j) = &mut jail
        && let Err(e) = j.started()
    {
        let _ = child.start_kill();
        return ToolOutput::error(format!("cannot start bash in the sandbox: {e}"));
    }
    let mut guard = GroupGuard {
        pgid: child.id().and_then(|id| i32::try_from(id).ok()),
    };
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A program that never reads its input must not block the run: the
        // write happens beside it and a closed pipe is not an error.
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = pipe.write_all(&bytes).await;
            let _ = pipe.shutdown().await;
        });
    }
    let out_task = child
        .stdout
        .take()
        .map(|s| tokio::spawn(read_capped(s, cap)));
    let err_task = child
        .stderr
        .take()
        .map(|s| tokio::spawn(read_capped(s, cap)));

    let end = tokio::select! {
        status = child.wait() => End::Exited(status),
        _ = tokio::time::sleep(timeout) => End::TimedOut,
        _ = cancel.cancelled() => End::Cancelled,
    };
    // Kill the whole group: on timeout or cancel because that is the point, and
    // after a normal exit so background jobs it started stop with it.
    guard.kill();
    if !matches!(end, End::Exited(_)) {
        let _ = child.wait().await;
    }
    let stdout = collect(out_task).await;
    let stderr = collect(err_task).await;

    let (head, signal, is_error) = end_line(&end, timeout, started);
    let mut notes = limit_notes(signal, &stdout.seen, &stderr.seen, limits);
    let hit_limit = !notes.is_empty();
    notes.insert(0, head);
    let exit_code = match &end {
        End::Exited(Ok(status)) => status.code(),
        _ => None,
    };
    ToolOutput {
        content: format_output(&notes, &stdout, &stderr, cap),
        is_error: is_error || hit_limit,
        command: Some(CommandOutcome {
            exit_code,
            signal,
            truncated: stdout.is_cut() || stderr.is_cut(),
            stdout: String::from_utf8_lossy(&stdout.kept).into_owned(),
            stderr: String::from_utf8_lossy(&stderr.kept).into_owned(),
        }),
    }
}

/// The `bash -c` command: a clean environment of `env`, its own process
/// group (or, `sandboxed`, the session the sandbox makes), and `limits` set
/// in the child before it runs.
fn command_for(
    command: &str,
    piped_stdin: bool,
    cwd: &Path,
    env: &[(String, String)],
    limits: &BashSection,
    sandboxed: bool,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(bash_program());
    cmd.arg("--noprofile")
        .arg("--norc")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(if piped_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if !sandboxed {
        cmd.process_group(0);
    }
    let rl = rlimits(limits);
    // SAFETY: the closure only calls setrlimit, which is async-signal-safe (a
    // plain system call), on data computed before the fork; it allocates
    // nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            for r in &rl {
                let lim = libc::rlimit {
                    rlim_cur: r.soft,
                    rlim_max: r.hard,
                };
                if libc::setrlimit(r.resource, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd
}

/// How the command ended.
enum End {
    Exited(std::io::Result<std::process::ExitStatus>),
    TimedOut,
    Cancelled,
}

/// What a reader task kept of a stream, waiting at most [`PIPE_GRACE`] for
/// it (a background job may hold the pipe open).
async fn collect(task: Option<tokio::task::JoinHandle<Stream>>) -> Stream {
    match task {
        Some(t) => match tokio::time::timeout(PIPE_GRACE, t).await {
            Ok(Ok(r)) => r,
            _ => Stream::default(),
        },
        None => Stream::default(),
    }
}

/// The report's first line for how the command ended, the signal that
/// killed it, and whether the ending is an error of itself.
fn end_line(end: &End, timeout: Duration, started: Instant) -> (String, Option<i32>, bool) {
    let mut head = String::new();
    let mut signal = None;
    let is_error = match end {
        End::Exited(Ok(status)) => {
            match status.code() {
                Some(code) => head.push_str(&format!("exit code: {code}")),
                None => {
                    use std::os::unix::process::ExitStatusExt;
                    signal = status.signal();
                    match signal {
                        Some(sig) => head.push_str(&format!(
                            "exit: killed by signal {sig} ({})",
                            signal_name(sig)
                        )),
                        None => head.push_str("exit: killed by a signal"),
                    }
                }
            }
            false
        }
        End::Exited(Err(e)) => {
            head.push_str(&format!("could not wait for bash: {e}"));
            true
        }
        End::TimedOut => {
            head.push_str(&format!(
                "timed out after {} s; the command and everything it started were killed",
                timeout.as_secs()
            ));
            true
        }
        End::Cancelled => {
            head.push_str(&format!(
                "cancelled after {:.1} s; the command and everything it started were killed",
                started.elapsed().as_secs_f64()
            ));
            true
        }
    };
    (head, signal, is_error)
}

/// Lay out the head lines and both streams in at most `cap` bytes: each
/// stream gets what it needs while both fit, else the smaller keeps what it
/// needs up to half of the room and the other gets the rest. A cut stream
/// ends with a note saying how many bytes it produced in all.
fn format_output(head: &[String], stdout: &Stream, stderr: &Stream, cap: usize) -> String {
    let mut text = head.join("\n");
    text.push('\n');
    let streams = [("stdout", stdout), ("stderr", stderr)];
    let shown: Vec<(&str, String, u64)> = streams
        .iter()
        .filter(|(_, s)| s.total > 0)
        .map(|(n, s)| (*n, String::from_utf8_lossy(&s.kept).into_owned(), s.total))
        .collect();
    let note = |name: &str, total: u64, kept: usize| {
        format!(
            "[{name}: {} in all ({total} bytes); only the first {kept} bytes are shown]\n",
            human_bytes(total)
        )
    };
    // Room for each stream's header and (longest possible) note comes off the
    // top, so that the notes always fit.
    let overhead: usize = shown
        .iter()
        .map(|(name, body, total)| {
            let header = format!("--- {name} ---\n").len();
            header + note(name, (*total).max(body.len() as u64), body.len()).len() + 1
        })
        .sum();
    let room = cap.saturating_sub(text.len() + overhead);
    let wants: Vec<usize> = shown.iter().map(|(_, t, _)| t.len()).collect();
    let budgets: Vec<usize> = match wants.as_slice() {
        [a, b] if a + b > room => {
            let half = room / 2;
            if *a <= half {
                vec![*a, room - a]
            } else if *b <= half {
                vec![room - b, *b]
            } else {
                vec![half, room - half]
            }
        }
        [a] => vec![(*a).min(room)],
        other => other.to_vec(),
    };
    for ((name, body, total), budget) in shown.iter().zip(budgets) {
        text.push_str(&format!("--- {name} ---\n"));
        let kept = super::prefix(body, budget);
        text.push_str(kept);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        // The lossy text differs in length from the bytes produced only where
        // they were not UTF-8; either way, a cut is said with the true total.
        if kept.len() < body.len() || *total > body.len() as u64 {
            text.push_str(&note(name, *total, kept.len()));
        }
    }
    text.trim_end().to_owned()
}

/// The notes that say a `[bash]` limit stopped or cut the command, found from
/// the signal that killed it or from what it and bash wrote (the message of a
/// process killed inside a pipeline or a compound command, or of a program
/// that ignores the signal and sees the system call fail).
fn limit_notes(
    signal: Option<i32>,
    stdout: &Seen,
    stderr: &Seen,
    limits: &BashSection,
) -> Vec<String> {
    let mut notes = Vec::new();
    let fsize = signal == Some(libc::SIGXFSZ) || stderr.file_too_large || stdout.file_too_large;
    if fsize && limits.max_file_bytes > 0 {
        notes.push(format!(
            "the command hit the {} file-size limit ([bash] max_file_bytes): a file it wrote was cut at that size; write less (or to a pipe), or raise the limit in the config",
            human_bytes(limits.max_file_bytes)
        ));
    }
    let cpu = signal == Some(libc::SIGXCPU) || stderr.cpu_exceeded;
    if cpu && limits.max_cpu_seconds > 0 {
        notes.push(format!(
            "the command hit the {} s CPU-time limit ([bash] max_cpu_seconds) and was killed",
            limits.max_cpu_seconds
        ));
    }
    if stderr.fork_failed && limits.max_processes > 0 {
        notes.push(format!(
            "the command could not start a process: the user may have at most {} processes at once while it runs ([bash] max_processes)",
            limits.max_processes
        ));
    }
    if stderr.out_of_memory && limits.max_memory_bytes > 0 {
        notes.push(format!(
            "the command ran out of memory, probably at the {} address-space limit ([bash] max_memory_bytes)",
            human_bytes(limits.max_memory_bytes)
        ));
    }
    notes
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGINT => "SIGINT",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGXCPU => "SIGXCPU",
        _ => "signal",
    }
}

/// What the messages of a stream said about the limits.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    file_too_large: bool,
    cpu_exceeded: bool,
    fork_failed: bool,
    out_of_memory: bool,
}

impl Seen {
    fn scan(&mut self, bytes: &[u8]) {
        let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        // bash's words for a child killed by SIGXFSZ / SIGXCPU, and strerror
        // of EFBIG, EAGAIN from fork, ENOMEM.
        self.file_too_large |= has(b"File size limit exceeded") || has(b"File too large");
        self.cpu_exceeded |= has(b"CPU time limit exceeded");
        self.fork_failed |= has(b"fork: retry") || has(b"fork: Resource temporarily unavailable");
        self.out_of_memory |= has(b"Cannot allocate memory") || has(b"memory exhausted");
    }
}

/// One output stream: its first bytes, how many it produced in all, and what
/// its messages said about the limits (looked for in all of it, since such a
/// message usually comes last, past the kept part).
#[derive(Debug, Default)]
struct Stream {
    kept: Vec<u8>,
    total: u64,
    seen: Seen,
}

impl Stream {
    /// It produced more than it kept.
    fn is_cut(&self) -> bool {
        self.total > self.kept.len() as u64
    }
}

/// The longest message [`Seen::scan`] looks for, less one: how many bytes of
/// one read are kept to find a message split across two reads.
const SCAN_OVERLAP: usize = 40;

/// Read everything, keeping the first `cap` bytes and counting the rest (the
/// pipe is drained so the process never blocks on a full pipe).
async fn read_capped(mut r: impl AsyncRead + Unpin, cap: usize) -> Stream {
    let mut s = Stream::default();
    let mut buf = vec![0u8; SCAN_OVERLAP + 16 * 1024];
    let mut carry = 0;
    loop {
        match r.read(&mut buf[carry..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(s.kept.len());
                let take = room.min(n);
                s.kept.extend_from_slice(&buf[carry..carry + take]);
                s.total += n as u64;
                let end = carry + n;
                s.seen.scan(&buf[..end]);
                carry = end.min(SCAN_OVERLAP);
                buf.copy_within(end - carry..end, 0);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(text: &str) -> Seen {
        let mut s = Seen::default();
        s.scan(text.as_bytes());
        s
    }

    #[test]
    fn each_limit_is_named_with_its_key() {
        let limits = BashSection {
            max_memory_bytes: 512 << 20,
            ..BashSection::default()
        };
        let none = Seen::default();
        let notes = |sig, err: &str| limit_notes(sig, &none, &seen(err), &limits).join("\n");
        assert!(
            notes(Some(libc::SIGXFSZ), "")
                .contains("the command hit the 1 GiB file-size limit ([bash] max_file_bytes)")
        );
        assert!(
            notes(
                None,
                "bash: line 1: 7 File size limit exceeded (core dumped) yes > x"
            )
            .contains("[bash] max_file_bytes")
        );
        assert!(notes(None, "OSError: [Errno 27] File too large").contains("max_file_bytes"));
        assert!(
            notes(Some(libc::SIGXCPU), "")
                .contains("the command hit the 600 s CPU-time limit ([bash] max_cpu_seconds)")
        );
        assert!(
            notes(None, "bash: fork: retry: Resource temporarily unavailable")
                .contains("at most 4096 processes at once while it runs ([bash] max_processes)")
        );
        assert!(
            notes(None, "x: Cannot allocate memory")
                .contains("512 MiB address-space limit ([bash] max_memory_bytes)")
        );
        assert_eq!(notes(Some(libc::SIGKILL), "File not found"), "");
        // A limit that is off is never blamed.
        let off = BashSection {
            max_file_bytes: 0,
            ..BashSection::default()
        };
        assert!(limit_notes(Some(libc::SIGXFSZ), &none, &none, &off).is_empty());
    }

    async fn sh(command: &str, cap: usize) -> ToolOutput {
        let env = [("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
        run(
            command,
            None,
            &std::env::temp_dir(),
            &env,
            Duration::from_secs(10),
            cap,
            &BashSection::default(),
            &CancellationToken::new(),
            None,
        )
        .await
    }

    #[tokio::test]
    async fn the_outcome_holds_what_the_report_shows() {
        let out = sh(
            "echo 'exit code: 0'; echo '--- stderr ---' >&2; exit 3",
            4096,
        )
        .await;
        assert_eq!(
            out.content,
            "exit code: 3\n--- stdout ---\nexit code: 0\n--- stderr ---\n--- stderr ---"
        );
        assert!(!out.is_error);
        let c = out.command.unwrap();
        assert_eq!(c.exit_code, Some(3));
        assert!(!c.succeeded());
        assert_eq!(c.signal, None);
        assert_eq!(c.stdout, "exit code: 0\n");
        assert_eq!(c.stderr, "--- stderr ---\n");
        assert!(!c.truncated);

        let c = sh("kill -9 $$", 4096).await.command.unwrap();
        assert_eq!((c.exit_code, c.signal), (None, Some(libc::SIGKILL)));

        // Past the cap, the stream is cut and says so.
        let c = sh("printf '%0100d' 0", 10).await.command.unwrap();
        assert!(c.succeeded());
        assert_eq!(c.stdout, "0000000000");
        assert!(c.truncated);
    }

    #[tokio::test]
    async fn a_message_split_across_reads_is_still_seen() {
        let msg = b"bash: line 1: 9 File size limit exceeded";
        for split in 1..msg.len() {
            let (a, b) = msg.split_at(split);
            let reader = tokio::io::AsyncReadExt::chain(a, b);
            let s = read_capped(reader, 4).await;
            assert!(s.seen.file_too_large, "split at {split}");
            assert_eq!(s.total, msg.len() as u64);
            assert_eq!(s.kept, b"bash");
        }
    }
}
