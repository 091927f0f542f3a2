//! Processes started under the limits every test of this suite holds them to:
//! a 4 GiB address space (RLIMIT_AS) and a deadline. A process killed by a
//! signal (134 abort, 137 kill, 139 segfault) or still running at its deadline
//! fails the test with what it printed.
#![allow(dead_code)] // each module uses its own part

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The address space every process of this suite may use.
pub const ADDRESS_SPACE: u64 = 4 << 30;

/// `cmd` with the address-space limit applied in the child before exec.
pub fn limit(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only `setrlimit`, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: ADDRESS_SPACE as libc::rlim_t,
                rlim_max: ADDRESS_SPACE as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    cmd
}

/// The built binary with `args` in `dir`, as `support::agentfile` sets it
/// up (test key, no colours), under the limits.
pub fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.args(args)
        .current_dir(dir)
        .env(crate::support::KEY_VAR, "test-key-0123456789")
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG");
    for (k, v) in env {
        c.env(k, v);
    }
    limit(&mut c);
    c
}

/// Run the binary to its end with `stdin` as its input (closed after), under
/// the limits; panics if it died of a signal or outlived `deadline`.
pub fn run(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: &[u8],
    deadline: Duration,
) -> Output {
    let mut c = command(dir, args, env);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    finish(
        child,
        stdin,
        deadline,
        &format!("agentfile {}", args.join(" ")),
    )
}

/// Feed `stdin` to `child` (then close it), collect its output, and wait at
/// most `deadline`; panics as [`run`] does.
pub fn finish(mut child: Child, stdin: &[u8], deadline: Duration, what: &str) -> Output {
    let mut input = child.stdin.take();
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        if let Some(i) = input.as_mut() {
            let _ = i.write_all(&data);
        }
        drop(input);
    });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let status = wait(&mut child, deadline);
    let _ = feeder.join();
    let output = Output {
        status: status.unwrap_or_else(|| {
            let _ = child.kill();
            child.wait().unwrap()
        }),
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    };
    if status.is_none() {
        panic!(
            "{what}: still running after {deadline:?}\n{}",
            crate::support::text(&output)
        );
    }
    assert_no_signal(&output, what);
    output
}

/// Wait for `child` until `deadline`; `None` if it is still running.
pub fn wait(child: &mut Child, deadline: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + deadline;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Panics if the process died of a signal.
pub fn assert_no_signal(o: &Output, what: &str) {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = o.status.signal() {
        panic!(
            "{what}: killed by signal {sig}\n{}",
            crate::support::text(o)
        );
    }
    let code = o.status.code().unwrap_or(-1);
    assert!(
        !matches!(code, 134 | 137 | 139),
        "{what}: exit {code} (a crash)\n{}",
        crate::support::text(o)
    );
}
