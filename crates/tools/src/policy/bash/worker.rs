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
//! The worker is a [`crate::isolate`] worker of kind [`KIND`]: the calling
//! program itself, started again, under an address-space limit
//! ([`MEMORY_LIMIT_BYTES`]). It answers one JSON line per request, arming
//! `alarm(2)` for [`TIME_LIMIT`] around each; the parent also waits at most
//! [`TIME_LIMIT`] plus a grace period and kills a worker that does not answer.
//! Workers are kept and reused; one that dies is simply not reused.
//!
//! What this is not: a sandbox for anything that runs commands. It only parses;
//! the request and the answer are plain data.
//!
//! Where workers cannot run (targets other than Linux and Android), analysis
//! runs in the calling process, without these bounds.

// Off Linux the worker is not built and its constants go unused.
#![cfg_attr(not(any(target_os = "linux", target_os = "android")), allow(dead_code))]

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Analysis, Unanalysable};

/// The address space one worker may use.
pub const MEMORY_LIMIT_BYTES: u64 = 512 * 1024 * 1024;

/// How long one line may take to analyse.
pub const TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The worker that analyses shell lines.
pub(crate) static KIND: crate::isolate::Kind = crate::isolate::Kind {
    name: "shell-analysis",
    memory: MEMORY_LIMIT_BYTES,
    serve,
    hook: &WORKER_HOOK,
};

crate::worker_hook!(KIND);

/// The worker's loop: one answer per request line, each under an alarm.
fn serve() {
    while let Some(line) = crate::isolate::recv_line() {
        let reply = match serde_json::from_str::<Ask>(&line) {
            Ok(ask) => {
                crate::isolate::alarm(TIME_LIMIT);
                let a = answer(&ask);
                crate::isolate::alarm(std::time::Duration::ZERO);
                a
            }
            Err(e) => Answer::Refused(format!("bad request to the shell analyser: {e}")),
        };
        let Ok(text) = serde_json::to_string(&reply) else {
            return;
        };
        if !crate::isolate::send_line(&text) {
            return;
        }
    }
}

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
    let result = std::panic::catch_unwind(|| super::analyze_here(&ask.line, home));
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
    use std::time::{Duration, Instant};

    use super::*;
    use crate::isolate::Recv;

    /// The longest answer read back.
    const MAX_ANSWER_BYTES: usize = 16 << 20;

    pub fn analyze(line: &str, home: Option<&Path>) -> Result<Analysis, Unanalysable> {
        let ask = Ask {
            line: line.to_owned(),
            home: home_text(home)?,
        };
        let request = serde_json::to_string(&ask)
            .map_err(|e| Unanalysable(format!("the command cannot be sent for analysis: {e}")))?;
        let mut worker = crate::isolate::take(&KIND).map_err(unavailable)?;
        let grace = Duration::from_secs(2);
        let reply = if worker.send(&request) {
            worker.recv(
                Instant::now() + TIME_LIMIT + grace,
                MAX_ANSWER_BYTES,
                &mut || false,
            )
        } else {
            Recv::Closed
        };
        match reply {
            Recv::Line(l) => match serde_json::from_str::<Answer>(&l) {
                Ok(a) => {
                    worker.release();
                    match a {
                        Answer::Ok(a) => Ok(a),
                        Answer::Refused(r) => Err(Unanalysable(r)),
                    }
                }
                Err(e) => Err(unavailable(format!("bad answer: {e}"))),
            },
            _ => {
                let _ = worker.end(Duration::ZERO);
                Err(Unanalysable(format!(
                    "the shell analysis of this line did not finish within its limits ({}); \
                     simplify the command or split it into several",
                    limits_text()
                )))
            }
        }
    }

    fn unavailable(m: impl std::fmt::Display) -> Unanalysable {
        Unanalysable(format!("the shell analyser is unavailable: {m}"))
    }
}
