//! Work in a child process, under limits a thread cannot be held to.
//!
//! Some work cannot be bounded from inside the thread that does it. The shell
//! parser (`tools::policy::bash::worker`) does not finish on some
//! inputs and allocates without end on others; the JavaScript engine
//! (`script`) checks its CPU limit only at JavaScript branch points,
//! so a built-in such as `Array.prototype.join.call({length: 1e15})` loops
//! inside C and never looks. A thread cannot be stopped, and an allocator
//! cannot refuse without aborting the whole process; a child process can be
//! limited (`RLIMIT_AS`, `RLIMIT_CPU`) and killed. Nothing such work meets can
//! then take down the calling process, and with it every run of a
//! `serve`/`mcp` server.
//!
//! A worker is the calling program itself, started again from
//! `/proc/self/exe` with [`WORKER_ENV`] set to the name of a [`Kind`]. A
//! function placed in `.init_array` ([`worker_hook!`]) sees that variable before `main` runs and
//! serves that kind's requests instead, so this works in any program that
//! links the library — the `agentfile` binary, test binaries, benches, a host
//! program — without a hidden subcommand. The worker sets its own limits
//! (address space [`Kind::memory`], no core files, default `SIGALRM` and
//! `SIGXCPU` actions), greets the parent (so a program in which the hook did
//! not run is detected, not trusted), then runs the kind's `serve`, which
//! reads and writes JSON lines ([`recv_line`], [`send_line`]) until its
//! standard input closes. Its environment is empty and its folder is `/`.
//!
//! The parent ([`take`], [`Worker`]) waits for each line with a deadline, can
//! be told to give up early (a cancelled run), refuses lines past a size, and
//! kills a worker that does not answer in time. Workers are kept and reused (a
//! few idle ones per kind); one that died or was killed is not returned, and
//! the next request starts a fresh one.
//!
//! Only on Linux (and Android): elsewhere [`AVAILABLE`] is false and callers
//! do the work in the calling process, without these bounds.

// Off Linux the workers are not built and most of this goes unused.
#![cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]

use std::time::Duration;

/// The environment variable that makes a program a worker; its value names
/// the [`Kind`].
pub const WORKER_ENV: &str = "AGENTFILE_INTERNAL_WORKER";

/// Whether work can go to a worker process on this platform.
pub const AVAILABLE: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// One kind of worker: what it serves, under what address-space limit.
pub struct Kind {
    /// Its name: [`WORKER_ENV`]'s value and part of the greeting.
    pub name: &'static str,
    /// The address space the worker may use (never more than the parent's).
    pub memory: u64,
    /// Answers requests with [`recv_line`] and [`send_line`] until the input
    /// ends (or it chooses to stop).
    pub serve: fn(),
    /// The `.init_array` entry that serves this kind ([`worker_hook!`]),
    /// read when a worker starts so the linker keeps it in every program
    /// that starts one.
    pub hook: &'static extern "C" fn(),
}

/// Make the program a worker of `$kind` when it is started as one: an
/// `.init_array` entry, `WORKER_HOOK`, that runs before `main` and returns
/// at once unless [`WORKER_ENV`] names this kind. Each kind declares its own
/// (beside its [`Kind`], whose `hook` points at it), so this module knows
/// no kind.
#[macro_export]
#[doc(hidden)]
macro_rules! worker_hook {
    ($kind:path) => {
        #[cfg_attr(
            any(target_os = "linux", target_os = "android"),
            unsafe(link_section = ".init_array")
        )]
        #[used]
        static WORKER_HOOK: extern "C" fn() = {
            extern "C" fn hook() {
                $crate::isolate::serve_if_worker(&$kind);
            }
            hook
        };
    };
}

/// How long a new worker may take to greet.
const START_LIMIT: Duration = Duration::from_secs(10);

/// Idle workers kept for reuse, per kind.
const MAX_IDLE: usize = 4;

fn hello(kind: &Kind) -> String {
    format!("agentfile-worker {} 1", kind.name)
}

/// In a worker: the next line from the parent (without its newline), or
/// `None` when the input ended.
pub fn recv_line() -> Option<String> {
    use std::io::BufRead;
    let mut s = String::new();
    match std::io::stdin().lock().read_line(&mut s) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            if s.ends_with('\n') {
                s.pop();
            }
            Some(s)
        }
    }
}

/// In a worker: send one line (a newline is added); false if the parent is
/// gone.
pub fn send_line(line: &str) -> bool {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .is_ok()
}

pub use imp::*;

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use super::*;

    /// Serve as a worker: never, off Linux.
    pub fn serve_if_worker(_: &Kind) {}

    /// In a worker: end this process by `SIGALRM` after `d` (0: cancel).
    pub fn alarm(_: Duration) {}

    /// In a worker: end this process by `SIGXCPU` once it has used `d` more
    /// CPU time (rounded up to whole seconds).
    pub fn limit_cpu(_: Duration) {}
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
    use std::sync::Mutex;
    use std::time::Instant;

    use super::*;

    /// Serve as a worker of `kind` if this program was started as one:
    /// called before `main` (from `.init_array`, see [`worker_hook!`]);
    /// returns at once in an ordinary start.
    pub fn serve_if_worker(kind: &Kind) {
        if std::env::var_os(WORKER_ENV).is_some_and(|name| name == kind.name) {
            serve(kind);
        }
    }

    /// The worker's life: limit itself, greet, serve, exit.
    fn serve(kind: &Kind) -> ! {
        set_limits(kind.memory);
        if !send_line(&hello(kind)) {
            std::process::exit(1);
        }
        (kind.serve)();
        std::process::exit(0);
    }

    fn set_limits(memory: u64) {
        // SAFETY: getrlimit/setrlimit only read and write the struct passed;
        // signal() with SIG_DFL installs no handler code.
        unsafe {
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let want = memory as libc::rlim_t;
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
                // Unlimited work is what this process exists to prevent.
                std::process::exit(1);
            }
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            // An ignored SIGALRM or SIGXCPU would be inherited across exec and
            // void the limits.
            libc::signal(libc::SIGALRM, libc::SIG_DFL);
            libc::signal(libc::SIGXCPU, libc::SIG_DFL);
        }
    }

    /// In a worker: end this process by `SIGALRM` after `d` (0: cancel).
    pub fn alarm(d: Duration) {
        let secs = if d.is_zero() {
            0
        } else {
            d.as_secs_f64().ceil().clamp(1.0, f64::from(u32::MAX)) as libc::c_uint
        };
        // SAFETY: alarm has no memory-safety preconditions. SIGALRM's default
        // action ends this process, which is the point: the parent sees the
        // pipe close.
        unsafe { libc::alarm(secs) };
    }

    /// In a worker: end this process by `SIGXCPU` once it has used `d` more
    /// CPU time (rounded up to whole seconds). A backstop for a parent that is
    /// gone: the parent's own deadline normally comes first.
    pub fn limit_cpu(d: Duration) {
        // SAFETY: getrusage and get/setrlimit only read and write the structs
        // passed.
        unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
                return;
            }
            let used = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) as u64 + 1;
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_CPU, &mut cur) != 0 {
                return;
            }
            let want = (used + d.as_secs_f64().ceil() as u64) as libc::rlim_t;
            // Only the soft limit moves, so the next request can raise it again.
            let lim = libc::rlimit {
                rlim_cur: want.min(cur.rlim_max),
                rlim_max: cur.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_CPU, &lim);
        }
    }

    /// A worker process, ready for a request.
    pub struct Worker {
        kind: &'static Kind,
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

    /// What waiting for a worker's line gave.
    pub enum Recv {
        Line(String),
        /// It closed its output: it exited or died.
        Closed,
        /// The deadline passed first.
        Deadline,
        /// The caller's `stop` said to give up.
        Stopped,
        /// The line is longer than the caller accepts.
        TooLong,
    }

    static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

    /// Why a worker could not be started.
    #[derive(Debug, thiserror::Error)]
    pub enum StartError {
        #[error("cannot start it from /proc/self/exe: {0}")]
        Exec(std::io::Error),
        #[error("its pipes were not set up")]
        Pipes,
        #[error("it greeted with {got:?}, not {want:?}")]
        Greeting { got: String, want: String },
        #[error("it did not greet within {} s", START_LIMIT.as_secs())]
        Silent,
        #[error(
            "it exited at start (this program does not carry the worker hook, \
             or the process limits are too low to start it)"
        )]
        Exited,
    }

    /// A worker of `kind`: an idle one that is still alive, or a new one.
    pub fn take(kind: &'static Kind) -> Result<Worker, StartError> {
        if let Ok(mut idle) = IDLE.lock() {
            while let Some(i) = idle.iter().rposition(|w| std::ptr::eq(w.kind, kind)) {
                let mut w = idle.swap_remove(i);
                // One killed from outside while idle is dropped here, so its
                // death is not blamed on the next request.
                if matches!(w.child.try_wait(), Ok(None)) {
                    return Ok(w);
                }
            }
        }
        spawn(kind)
    }

    fn spawn(kind: &'static Kind) -> Result<Worker, StartError> {
        // Reading the hook keeps the object file that holds it in the link, so
        // the program we start again has it too.
        let _ = std::hint::black_box(kind.hook as *const _ as usize);
        let mut child = Command::new("/proc/self/exe")
            .env_clear()
            .env(WORKER_ENV, kind.name)
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(StartError::Exec)?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(StartError::Pipes);
        };
        let mut w = Worker {
            kind,
            child,
            stdin,
            stdout,
            buf: Vec::new(),
        };
        let want = hello(kind);
        match w.recv(Instant::now() + START_LIMIT, want.len() + 1, &mut || false) {
            Recv::Line(l) if l == want => Ok(w),
            Recv::Line(got) => Err(StartError::Greeting { got, want }),
            Recv::Deadline => Err(StartError::Silent),
            _ => Err(StartError::Exited),
        }
    }

    impl Worker {
        /// Send one line (a newline is added); false if the worker is gone.
        pub fn send(&mut self, line: &str) -> bool {
            let mut bytes = Vec::with_capacity(line.len() + 1);
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
            self.stdin
                .write_all(&bytes)
                .and_then(|()| self.stdin.flush())
                .is_ok()
        }

        /// The next line from the worker, at most `max` bytes, waiting until
        /// `deadline`; `stop` is asked every few milliseconds whether to give
        /// up.
        pub fn recv(
            &mut self,
            deadline: Instant,
            max: usize,
            stop: &mut dyn FnMut() -> bool,
        ) -> Recv {
            /// How often `stop` is asked while the worker works.
            const SLICE: Duration = Duration::from_millis(25);
            loop {
                if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                    let rest = self.buf.split_off(pos + 1);
                    let mut line = std::mem::replace(&mut self.buf, rest);
                    line.pop();
                    return match String::from_utf8(line) {
                        Ok(l) => Recv::Line(l),
                        Err(_) => Recv::Closed,
                    };
                }
                if self.buf.len() > max {
                    return Recv::TooLong;
                }
                if stop() {
                    return Recv::Stopped;
                }
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    return Recv::Deadline;
                };
                let ms = left.min(SLICE).as_millis().clamp(1, i32::MAX as u128) as i32;
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
                    return Recv::Closed;
                }
                if n == 0 {
                    continue; // the checks above end this
                }
                let mut chunk = [0u8; 64 * 1024];
                match self.stdout.read(&mut chunk) {
                    Ok(0) => return Recv::Closed,
                    Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return Recv::Closed,
                }
            }
        }

        /// Put the worker back for the next request (or end it, if enough are
        /// idle or it left something unread).
        pub fn release(self) {
            if !self.buf.is_empty() {
                return;
            }
            if let Ok(mut idle) = IDLE.lock()
                && idle
                    .iter()
                    .filter(|w| std::ptr::eq(w.kind, self.kind))
                    .count()
                    < MAX_IDLE
            {
                idle.push(self);
            }
        }

        /// End the worker: after up to `grace` for it to exit by itself (it
        /// closed its output), killed. How it ended, if that can be told.
        pub fn end(mut self, grace: Duration) -> Option<ExitStatus> {
            let until = Instant::now() + grace;
            loop {
                match self.child.try_wait() {
                    Ok(Some(s)) => return Some(s),
                    Ok(None) if Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Ok(None) => break,
                    Err(_) => return None,
                }
            }
            let _ = self.child.kill();
            self.child.wait().ok()
        }
    }
}
