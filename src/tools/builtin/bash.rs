//! `bash`: run an allowed command line in the workspace.
//!
//! The shell runs as `bash --noprofile --norc -c LINE` in its own process group,
//! with stdin closed, an environment rebuilt from a short allowlist (no secrets
//! can reach it; see [`child_env`]), a timeout, and capped output. On timeout,
//! on cancellation, when the call's future is dropped, and also after the shell
//! exits (so background jobs it left behind do not linger), the whole group is
//! killed with SIGKILL.
//!
//! What this is not: a sandbox. The command runs with the runtime's own user
//! rights; what it may do was decided by the policy before it started.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::tools::ToolOutput;
use crate::tools::policy::bash::CHILD_ENV;

/// How long to wait for the output pipes after the group was killed (a process
/// that escaped the group could hold them open forever).
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// Is this variable name a secret by its shape?
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    const SUFFIXES: &[&str] = &[
        "_API_KEY",
        "_APIKEY",
        "_TOKEN",
        "_SECRET",
        "_PASSWORD",
        "_PASSWD",
        "_KEY",
        "_CREDENTIALS",
        "_ACCESS_KEY_ID",
        "_SECRET_ACCESS_KEY",
        "_SESSION_TOKEN",
        "_PAT",
    ];
    SUFFIXES.iter().any(|s| n.ends_with(s))
        || n.starts_with("AWS_")
        || n.contains("SECRET")
        || n.contains("PASSWORD")
        || n.contains("TOKEN")
        || n == "API_KEY"
}

/// The environment the shell gets: only [`CHILD_ENV`] names and `LC_*` from
/// `vars`, never anything shaped like a secret or named in `secret_names`
/// (the configured key variables), and a `PATH` without empty or relative
/// entries (those would run programs from the workspace).
pub fn child_env(
    vars: impl IntoIterator<Item = (String, String)>,
    secret_names: &BTreeSet<String>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in vars {
        let wanted = CHILD_ENV.contains(&k.as_str()) || k.starts_with("LC_");
        if !wanted || is_secret_name(&k) || secret_names.contains(&k) {
            continue;
        }
        let v = if k == "PATH" {
            v.split(':')
                .filter(|p| p.starts_with('/'))
                .collect::<Vec<_>>()
                .join(":")
        } else {
            v
        };
        out.push((k, v));
    }
    if !out.iter().any(|(k, _)| k == "PATH") {
        out.push(("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()));
    }
    out.sort();
    out
}

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

/// Run `command` in `cwd`. Never fails: problems are error outputs.
pub async fn run(
    command: &str,
    cwd: &Path,
    env: &[(String, String)],
    timeout: Duration,
    cap: usize,
    cancel: &CancellationToken,
) -> ToolOutput {
    let mut cmd = tokio::process::Command::new(bash_program());
    cmd.arg("--noprofile")
        .arg("--norc")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("cannot start bash: {e}")),
    };
    let mut guard = GroupGuard {
        pgid: child.id().and_then(|id| i32::try_from(id).ok()),
    };
    let out_task = child
        .stdout
        .take()
        .map(|s| tokio::spawn(read_capped(s, cap)));
    let err_task = child
        .stderr
        .take()
        .map(|s| tokio::spawn(read_capped(s, cap)));

    enum End {
        Exited(std::io::Result<std::process::ExitStatus>),
        TimedOut,
        Cancelled,
    }
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
    let collect = |task: Option<tokio::task::JoinHandle<(Vec<u8>, u64)>>| async move {
        match task {
            Some(t) => match tokio::time::timeout(PIPE_GRACE, t).await {
                Ok(Ok(r)) => r,
                _ => (Vec::new(), 0),
            },
            None => (Vec::new(), 0),
        }
    };
    let (stdout, out_more) = collect(out_task).await;
    let (stderr, err_more) = collect(err_task).await;

    let mut text = String::new();
    let is_error = match &end {
        End::Exited(Ok(status)) => {
            match status.code() {
                Some(code) => text.push_str(&format!("exit code: {code}\n")),
                None => text.push_str("exit: killed by a signal\n"),
            }
            false
        }
        End::Exited(Err(e)) => {
            text.push_str(&format!("could not wait for bash: {e}\n"));
            true
        }
        End::TimedOut => {
            text.push_str(&format!(
                "timed out after {} s; the command and everything it started were killed\n",
                timeout.as_secs()
            ));
            true
        }
        End::Cancelled => {
            text.push_str(&format!(
                "cancelled after {:.1} s; the command and everything it started were killed\n",
                started.elapsed().as_secs_f64()
            ));
            true
        }
    };
    append_stream(&mut text, "stdout", &stdout, out_more);
    append_stream(&mut text, "stderr", &stderr, err_more);
    ToolOutput {
        content: text.trim_end().to_owned(),
        is_error,
    }
}

fn append_stream(text: &mut String, name: &str, bytes: &[u8], more: u64) {
    if bytes.is_empty() && more == 0 {
        return;
    }
    text.push_str(&format!("--- {name} ---\n"));
    text.push_str(&String::from_utf8_lossy(bytes));
    if !text.ends_with('\n') {
        text.push('\n');
    }
    if more > 0 {
        text.push_str(&format!("[truncated: {more} more bytes]\n"));
    }
}

/// Read everything, keeping the first `cap` bytes and counting the rest (the
/// pipe is drained so the process never blocks on a full pipe).
async fn read_capped(mut r: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                let take = room.min(n);
                kept.extend_from_slice(&buf[..take]);
                dropped += (n - take) as u64;
            }
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_pass() {
        let vars = [
            ("PATH", "/usr/bin:.:relative:/bin:"),
            ("HOME", "/home/u"),
            ("ANTHROPIC_API_KEY", "x"),
            ("GITHUB_TOKEN", "x"),
            ("MY_SECRET", "x"),
            ("DB_PASSWORD", "x"),
            ("AWS_ACCESS_KEY_ID", "x"),
            ("LC_ALL", "C"),
            ("RANDOM_THING", "x"),
            ("LANG", "C.UTF-8"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let mut extra = BTreeSet::new();
        extra.insert("LANG".to_owned());
        let env = child_env(vars, &extra);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["HOME", "LC_ALL", "PATH"]);
        assert_eq!(env[2].1, "/usr/bin:/bin");
    }
}
