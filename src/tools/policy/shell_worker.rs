//! Shell analysis in a child process, under a memory and a time limit.
//!
//! Why a process: the parser ([`brush_parser`] 0.4) does not finish on some
//! inputs. Its tokenizer, inside `$(`, `$((` or `${`, queues here-document
//! tokens while it waits for the newline that starts the body
//! (`consume_nested_construct` in `tokenizer.rs`); on a line such as
//! `$( << || cat ) ` the queue grows without end, so fifteen characters allocate
//! until the machine has no memory left. Other loops and the PEG grammar's
//! backtracking have not been proved bounded either, so bounding the input's
//! length or nesting cannot be argued to bound the parser. A thread cannot be
//! stopped and an allocator cannot refuse without aborting the whole process;
//! a child can be limited (`RLIMIT_AS`) and killed. So the analysis runs in a
//! worker process, and a line the worker cannot answer within the limits —
//! because it ran out of memory, ran past the deadline, overflowed its stack or
//! crashed — is refused with a reason that says so. Nothing the model writes can
//! take down the calling process, and with it every run of a `serve`/`mcp`
//! server.
//!
//! The worker is the calling program itself, started again from
//! `/proc/self/exe` with [`WORKER_ENV`] set. A function placed in `.init_array`
//! sees that variable before `main` runs and serves requests instead, so this
//! works in any program that links the library — the `agentfile` binary, test
//! binaries, benches, a host program — without a hidden subcommand. It sets its
//! own limits (address space [`MEMORY_LIMIT_BYTES`], no core files), greets
//! the parent with [`HELLO`] (so a program in which the hook did not run is
//! detected, not trusted), then answers one JSON line per request, arming
//! `alarm(2)` for [`TIME_LIMIT`] around each. The parent also waits at most
//! [`TIME_LIMIT`] plus a grace period and kills a worker that does not answer.
//!
//! Workers are kept and reused (a few idle ones at most); one that dies is
//! simply not returned to the pool, and the next call starts a fresh one.
//!
//! What this is not: a sandbox for anything that runs commands. It only parses;
//! the request and the answer are plain data.
//!
//! Where the hook cannot be installed (targets other than Linux and Android),
//! analysis runs in the calling process, without these bounds.

// Off Linux the worker is not built and its constants go unused.
#![cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::bash::{Analysis, Unanalysable};

/// The environment variable (and its value) that makes a program a worker.
pub const WORKER_ENV: &str = "AGENTFILE_INTERNAL_SHELL_ANALYSIS_WORKER";
const WORKER_TOKEN: &str = "1";

/// What a worker says first, so the parent knows the hook ran.
const HELLO: &str = "agentfile-shell-analysis-worker 1";

/// The address space one worker may use.
pub const MEMORY_LIMIT_BYTES: u64 = 512 * 1024 * 1024;

/// How long one line may take to analyse.
pub const TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Idle workers kept for reuse.
const MAX_IDLE: usize = 4;

#[derive(Serialize, Deserialize)]
struct Ask {
    line: String,
    home: Option<String>,
}

#[derive(Serialize, Deserialize)]
enum Answer {
    Ok(Analysis),
    Refused(String),
}

/// Analyse `line` in a worker (see the module doc). Never panics; every failure
/// is a refusal with its reason.
pub fn analyze(line: &str, home: Option<&Path>) -> Result<Analysis, Unanalysable> {
    imp::analyze(line, home)
}

fn home_text(home: Option<&Path>) -> Result<Option<String>, Unanalysable> {
    match home {
        None => Ok(None),
        Some(h) => h.to_str().map(|s| Some(s.to_owned())).ok_or_else(|| {
            Unanalysable(format!(
                "the home directory {} is not UTF-8, so `~` cannot be checked",
                h.display()
            ))
        }),
    }
}

/// Answer one request, in whatever process this runs.
fn answer(ask: &Ask) -> Answer {
    let home = ask.home.as_deref().map(Path::new);
    let result = std::panic::catch_unwind(|| super::bash::analyze_here(&ask.line, home));
    match result {
        Ok(Ok(a)) => Answer::Ok(a),
        Ok(Err(u)) => Answer::Refused(u.0),
        Err(_) => Answer::Refused("the shell analysis failed on this line".to_owned()),
    }
}

fn limits_text() -> String {
    format!(
        "{} MiB of memory and {} s",
        MEMORY_LIMIT_BYTES / (1024 * 1024),
        TIME_LIMIT.as_secs()
    )
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use super::*;

    pub fn analyze(line: &str, home: Option<&Path>) -> Result<Analysis, Unanalysable> {
        let ask = Ask {
            line: line.to_owned(),
            home: home_text(home)?,
        };
        match answer(&ask) {
            Answer::Ok(a) => Ok(a),
            Answer::Refused(r) => Err(Unanalysable(r)),
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use std::io::{BufRead, Read, Write};
    use std::os::fd::AsRawFd;
    use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use super::*;

    /// Runs before `main` in every program that links this library; returns at
    /// once unless the program was started as a worker.
    #[used]
    #[unsafe(link_section = ".init_array")]
    static WORKER_HOOK: extern "C" fn() = worker_hook;

    extern "C" fn worker_hook() {
        if std::env::var_os(WORKER_ENV).is_some_and(|v| v == WORKER_TOKEN) {
            serve();
        }
    }

    /// The worker's life: limit itself, greet, answer lines until stdin closes.
    fn serve() -> ! {
        set_limits();
        let stdin = std::io::stdin();
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{HELLO}").and_then(|()| out.flush()).is_err() {
            std::process::exit(1);
        }
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            let reply = match serde_json::from_str::<Ask>(&line) {
                Ok(ask) => {
                    // SAFETY: alarm has no memory-safety preconditions. SIGALRM's
                    // default action ends this process, which is the point: the
                    // parent sees the pipe close and refuses the line.
                    unsafe { libc::alarm(TIME_LIMIT.as_secs().max(1) as libc::c_uint) };
                    let a = answer(&ask);
                    // SAFETY: as above; 0 cancels the pending alarm.
                    unsafe { libc::alarm(0) };
                    a
                }
                Err(e) => Answer::Refused(format!("bad request to the shell analyser: {e}")),
            };
            let Ok(text) = serde_json::to_string(&reply) else {
                std::process::exit(1);
            };
            if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
                break;
            }
        }
        std::process::exit(0);
    }

    fn set_limits() {
        // SAFETY: getrlimit/setrlimit only read and write the struct passed;
        // signal() with SIG_DFL installs no handler code.
        unsafe {
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let want = MEMORY_LIMIT_BYTES as libc::rlim_t;
            let lim = if libc::getrlimit(libc::RLIMIT_AS, &mut cur) == 0 {
                // Never raise what the parent was given.
                libc::rlimit {
                    rlim_cur: want.min(cur.rlim_max),
                    rlim_max: want.min(cur.rlim_max),
                }
            } else {
                libc::rlimit {
                    rlim_cur: want,
                    rlim_max: want,
                }
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                // Unlimited analysis is what this process exists to prevent.
                std::process::exit(1);
            }
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            // An ignored SIGALRM would be inherited across exec and void the
            // deadline.
            libc::signal(libc::SIGALRM, libc::SIG_DFL);
        }
    }

    struct Worker {
        child: Child,
        stdin: ChildStdin,
        stdout: ChildStdout,
        buf: Vec<u8>,
    }

    impl Drop for Worker {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Why a worker gave no answer.
    enum Failure {
        /// It could not be started or greeted wrongly: analysis is unavailable.
        Start(String),
        /// It died or ran past the deadline on this line.
        Limit,
    }

    static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

    pub fn analyze(line: &str, home: Option<&Path>) -> Result<Analysis, Unanalysable> {
        let ask = Ask {
            line: line.to_owned(),
            home: home_text(home)?,
        };
        let request = serde_json::to_string(&ask)
            .map_err(|e| Unanalysable(format!("the command cannot be sent for analysis: {e}")))?;
        let mut worker = take_idle().map_or_else(spawn, Ok).map_err(unavailable)?;
        match worker.ask(&request) {
            Ok(reply) => {
                if let Ok(mut idle) = IDLE.lock()
                    && idle.len() < MAX_IDLE
                {
                    idle.push(worker);
                }
                match reply {
                    Answer::Ok(a) => Ok(a),
                    Answer::Refused(r) => Err(Unanalysable(r)),
                }
            }
            Err(Failure::Start(m)) => Err(unavailable(m)),
            Err(Failure::Limit) => Err(Unanalysable(format!(
                "the shell analysis of this line did not finish within its limits ({}); \
                 simplify the command or split it into several",
                limits_text()
            ))),
        }
    }

    /// An idle worker that is still alive (one killed from outside while idle
    /// is dropped here, so its death is not blamed on the next line).
    fn take_idle() -> Option<Worker> {
        let mut idle = IDLE.lock().ok()?;
        while let Some(mut w) = idle.pop() {
            if matches!(w.child.try_wait(), Ok(None)) {
                return Some(w);
            }
        }
        None
    }

    fn unavailable(m: String) -> Unanalysable {
        Unanalysable(format!("the shell analyser is unavailable: {m}"))
    }

    fn spawn() -> Result<Worker, String> {
        // Reading the hook keeps the object file that holds it in the link, so
        // the program we start again has it too.
        let _ = std::hint::black_box(WORKER_HOOK as usize);
        let mut child = Command::new("/proc/self/exe")
            .env_clear()
            .env(WORKER_ENV, WORKER_TOKEN)
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start it from /proc/self/exe: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("its pipes were not set up".to_owned());
        };
        let mut w = Worker {
            child,
            stdin,
            stdout,
            buf: Vec::new(),
        };
        match w.read_line(Instant::now() + TIME_LIMIT) {
            Some(l) if l == HELLO => Ok(w),
            Some(l) => Err(format!("it greeted with {l:?}, not {HELLO:?}")),
            None => Err(
                "it exited at start (this program does not carry the worker hook, \
                 or the process limits are too low to start it)"
                    .to_owned(),
            ),
        }
    }

    impl Worker {
        fn ask(&mut self, request: &str) -> Result<Answer, Failure> {
            let mut bytes = Vec::with_capacity(request.len() + 1);
            bytes.extend_from_slice(request.as_bytes());
            bytes.push(b'\n');
            if self
                .stdin
                .write_all(&bytes)
                .and_then(|()| self.stdin.flush())
                .is_err()
            {
                return Err(Failure::Limit);
            }
            let grace = Duration::from_secs(2);
            let Some(line) = self.read_line(Instant::now() + TIME_LIMIT + grace) else {
                let _ = self.child.kill();
                return Err(Failure::Limit);
            };
            serde_json::from_str(&line).map_err(|e| Failure::Start(format!("bad answer: {e}")))
        }

        /// The next line from the worker, or `None` when it closed its end or
        /// the deadline passed.
        fn read_line(&mut self, deadline: Instant) -> Option<String> {
            loop {
                if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                    let rest = self.buf.split_off(pos + 1);
                    let mut line = std::mem::replace(&mut self.buf, rest);
                    line.pop();
                    return String::from_utf8(line).ok();
                }
                let left = deadline.checked_duration_since(Instant::now())?;
                let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
                let mut pfd = libc::pollfd {
                    fd: self.stdout.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, owned by this frame, for the call.
                let n = unsafe { libc::poll(&mut pfd, 1, ms) };
                if n < 0 {
                    if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return None;
                }
                if n == 0 {
                    continue; // the deadline check above ends this
                }
                let mut chunk = [0u8; 64 * 1024];
                match self.stdout.read(&mut chunk) {
                    Ok(0) => return None,
                    Ok(k) => self.buf.extend_from_slice(chunk.get(..k)?),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return None,
                }
            }
        }
    }
}
