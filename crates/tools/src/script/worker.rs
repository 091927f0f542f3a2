//! The engine in a worker process ([`crate::isolate`]), so a limit the engine
//! cannot enforce is enforced from outside it.
//!
//! The parent sends one [`Request`] line (the code, what to do, the limits).
//! The worker runs the engine as [`super::describe_here`] or
//! [`super::call_here`] would, with a host that writes each host call up as a
//! [`Up::Host`] line and waits for the parent's answer line; it ends with a
//! [`Up::Done`] line. The parent answers host calls through the caller's
//! [`Host`] on the calling thread and meanwhile holds the worker to:
//!
//! - the CPU limit: a deadline of [`Limits::cpu`] plus a grace period, pushed
//!   back by the time the parent spends answering host calls; past it the
//!   worker is killed ([`ScriptError::Timeout`]). Inside, the engine's own
//!   interrupt answers first wherever the script reaches a branch point, and
//!   `RLIMIT_CPU` ends a worker whose parent is gone;
//! - the caller giving up ([`Host::cancelled`], asked every few
//!   milliseconds): killed at once ([`ScriptError::Cancelled`]);
//! - memory: the engine's own limit, and the worker's address space
//!   ([`MEMORY_LIMIT_BYTES`]) for what is outside the engine's accounting; a
//!   worker that aborts is reported as out of memory;
//! - the size of what it sends ([`MAX_LINE_BYTES`]).
//!
//! The host-call cap and the wall-clock limit are counted inside the engine
//! (the same code in and out of a worker), which stops the script in a way it
//! cannot catch. A worker that answered is reused; one that was killed is
//! not.

// Off Linux the engine runs in the calling process and most of this goes
// unused.
#![cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Host, HostError, HostFn, Limits, ScriptError, ToolScheme};

/// The address space of a worker: the engine's 64 MiB and everything around
/// it (the program's own mappings, copies of code, arguments and results).
pub const MEMORY_LIMIT_BYTES: u64 = 1 << 30;

/// The longest line a worker may send: a result is at most
/// [`super::MAX_RESULT_BYTES`] and a host call's arguments
/// [`super::MAX_HOST_ARGS_BYTES`] of JSON; tools' schemes take the rest.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The worker that runs JavaScript.
pub(crate) static KIND: crate::isolate::Kind = crate::isolate::Kind {
    name: "javascript",
    memory: MEMORY_LIMIT_BYTES,
    serve,
    hook: &WORKER_HOOK,
};

crate::worker_hook!(KIND);

/// What the worker is asked to do.
#[derive(Serialize, Deserialize)]
struct Request {
    code: String,
    op: Op,
    limits: Limits,
}

#[derive(Serialize, Deserialize)]
enum Op {
    Describe,
    Call { name: String, args: Value },
}

/// A line from the worker.
#[derive(Serialize, Deserialize)]
enum Up {
    /// A host call; the parent answers with one `Result<Value, HostError>` line.
    Host {
        func: HostFn,
        args: Value,
    },
    Done(Result<Done, ScriptError>),
}

#[derive(Serialize, Deserialize)]
enum Done {
    Tools(Vec<ToolScheme>),
    Value(Value),
}

// ── the worker's side ───────────────────────────────────────────────────────

/// The worker's loop: one request at a time, until the input ends.
fn serve() {
    while let Some(line) = crate::isolate::recv_line() {
        let done = match serde_json::from_str::<Request>(&line) {
            Ok(req) => {
                // The backstop if the parent is gone: its deadline comes first.
                crate::isolate::limit_cpu(req.limits.cpu + grace(req.limits.cpu) * 2);
                run(req)
            }
            Err(e) => Err(ScriptError::Engine(format!(
                "bad request to the JavaScript worker: {e}"
            ))),
        };
        let text = serde_json::to_string(&Up::Done(done)).unwrap_or_else(|e| {
            let e = ScriptError::Result(format!("the result cannot be sent back: {e}"));
            serde_json::to_string(&Up::Done(Err(e))).unwrap_or_default()
        });
        if !crate::isolate::send_line(&text) {
            return;
        }
    }
}

fn run(req: Request) -> Result<Done, ScriptError> {
    match req.op {
        Op::Describe => super::describe_here(&req.code, &req.limits).map(Done::Tools),
        Op::Call { name, args } => super::call_here(
            &req.code,
            &name,
            args,
            std::rc::Rc::new(PipeHost),
            &req.limits,
        )
        .map(Done::Value),
    }
}

/// Host calls up the pipe to the parent.
struct PipeHost;

impl Host for PipeHost {
    fn call(&self, func: HostFn, args: Value) -> Result<Value, HostError> {
        let ask = serde_json::to_string(&Up::Host { func, args })
            .map_err(|e| HostError(format!("the arguments cannot be sent: {e}")))?;
        if !crate::isolate::send_line(&ask) {
            std::process::exit(0);
        }
        let Some(answer) = crate::isolate::recv_line() else {
            // The parent is gone: nothing is waiting for this script.
            std::process::exit(0);
        };
        serde_json::from_str(&answer).unwrap_or_else(|e| Err(HostError(format!("bad answer: {e}"))))
    }
}

// ── the parent's side ───────────────────────────────────────────────────────

/// How long past its CPU limit a worker may go before it is killed: the
/// engine's own interrupt answers first when it can.
fn grace(cpu: Duration) -> Duration {
    (cpu / 2).clamp(Duration::from_millis(250), Duration::from_secs(1))
}

pub(super) fn describe(code: &str, limits: &Limits) -> Result<Vec<ToolScheme>, ScriptError> {
    let req = Request {
        code: code.to_owned(),
        op: Op::Describe,
        limits: *limits,
    };
    match exchange(&req, &super::NoHost)? {
        Done::Tools(t) => Ok(t),
        Done::Value(_) => Err(ScriptError::Engine(
            "the JavaScript worker answered a description with a value".into(),
        )),
    }
}

pub(super) fn call(
    code: &str,
    name: &str,
    args: Value,
    host: &dyn Host,
    limits: &Limits,
) -> Result<Value, ScriptError> {
    let req = Request {
        code: code.to_owned(),
        op: Op::Call {
            name: name.to_owned(),
            args,
        },
        limits: *limits,
    };
    match exchange(&req, host)? {
        Done::Value(v) => Ok(v),
        Done::Tools(_) => Err(ScriptError::Engine(
            "the JavaScript worker answered a call with tools".into(),
        )),
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn exchange(_: &Request, _: &dyn Host) -> Result<Done, ScriptError> {
    Err(ScriptError::Engine(
        "JavaScript workers run only on Linux".into(),
    ))
}

/// Send the request to a worker, answer its host calls, and hold it to the
/// limits (see the module doc).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn exchange(req: &Request, host: &dyn Host) -> Result<Done, ScriptError> {
    use crate::isolate::Recv;
    use std::time::Instant;

    let limits = &req.limits;
    let line = serde_json::to_string(req)
        .map_err(|e| ScriptError::Engine(format!("the code cannot be sent to its worker: {e}")))?;
    let mut worker = crate::isolate::take(&KIND)
        .map_err(|m| ScriptError::Engine(format!("the JavaScript worker is unavailable: {m}")))?;
    let mut deadline = Instant::now() + limits.cpu + grace(limits.cpu);
    let mut sent = worker.send(&line);
    loop {
        let got = if sent {
            worker.recv(deadline, MAX_LINE_BYTES, &mut || host.cancelled())
        } else {
            Recv::Closed
        };
        let up = match got {
            Recv::Line(l) => serde_json::from_str::<Up>(&l),
            Recv::Deadline => {
                drop(worker);
                return Err(ScriptError::Timeout(limits.cpu));
            }
            Recv::Stopped => {
                drop(worker);
                return Err(ScriptError::Cancelled);
            }
            Recv::TooLong => {
                drop(worker);
                return Err(ScriptError::Result(format!(
                    "the script sent more than {} MiB at once",
                    MAX_LINE_BYTES >> 20
                )));
            }
            Recv::Closed => return Err(died(worker.end(Duration::from_millis(200)), limits)),
        };
        match up {
            Ok(Up::Done(r)) => {
                worker.release();
                return r;
            }
            Ok(Up::Host { func, args }) => {
                let asked = Instant::now();
                let answer = host.call(func, args);
                // Waiting on the host is not the script's CPU time.
                deadline += asked.elapsed();
                let text = serde_json::to_string(&answer).unwrap_or_else(|e| {
                    serde_json::to_string(&Err::<Value, _>(HostError(format!("bad answer: {e}"))))
                        .unwrap_or_default()
                });
                sent = worker.send(&text);
            }
            Err(e) => {
                drop(worker);
                return Err(ScriptError::Engine(format!(
                    "the JavaScript worker sent a line that is not its protocol: {e}"
                )));
            }
        }
    }
}

/// Why a worker that closed its output died.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn died(status: Option<std::process::ExitStatus>, limits: &Limits) -> ScriptError {
    use std::os::unix::process::ExitStatusExt;
    match status.and_then(|s| s.signal()) {
        // Its RLIMIT_CPU backstop.
        Some(libc::SIGXCPU | libc::SIGKILL) => ScriptError::Timeout(limits.cpu),
        // An allocation outside the engine failed under its address space.
        Some(libc::SIGABRT) => ScriptError::OutOfMemory(limits.memory),
        Some(sig) => ScriptError::Engine(format!(
            "the JavaScript engine crashed on this code (signal {sig})"
        )),
        None => ScriptError::Engine(format!(
            "the JavaScript worker exited on this code ({})",
            status.map_or_else(|| "unknown status".to_owned(), |s| s.to_string())
        )),
    }
}
