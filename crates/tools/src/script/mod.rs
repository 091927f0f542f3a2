//! The JavaScript sandbox for agent files' `## Tools` (CONTRACT §11).
//!
//! The code is a function body that returns `{ name: { fn, scheme } }`. It
//! runs in QuickJS (through `rquickjs`): a small embeddable engine with a
//! memory limit and an interrupt hook. Boa, the pure-Rust alternative, has no
//! memory limit.
//!
//! The interrupt hook fires only at JavaScript branch points, so a built-in
//! that loops inside C (`Array.prototype.join.call({length: 1e15}, "")`,
//! `copyWithin`, `reverse` …) never reaches it. So on Linux the engine runs in
//! a worker process ([`worker`], on [`crate::isolate`]) that the caller kills
//! at the CPU deadline; the engine's own checks still answer first wherever
//! they can. Host calls travel from the worker back to the caller's [`Host`],
//! so the caller judges them as before. Workers are reused between calls.
//!
//! What this module promises:
//! - The script has no file, network, process or environment access of its
//!   own: no `require`, `process`, module loader, `std`/`os`. The only way out
//!   is the host functions `read`, `write`, `fetch`, `sh`, `tool`, `env`, each
//!   one call to [`Host::call`], which the caller judges (abilities, policy).
//! - Every call runs in a fresh runtime: nothing is shared between calls.
//! - A CPU-time limit (time spent waiting on host calls not counted), a memory
//!   limit and a stack limit: an infinite loop, a huge allocation or unbounded
//!   recursion becomes a [`ScriptError`], never a hang or a crash — also
//!   inside a built-in, where the worker is killed.
//! - A cap on host calls per call and a wall-clock limit that counts the time
//!   in them: a loop of host calls ends with a [`ScriptError`] that names the
//!   limit, whatever the script catches.
//! - A caller that gives up ([`Host::cancelled`]) stops the script at once.
//! - Nothing here panics on any code or arguments.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

pub(crate) mod worker;

use rquickjs::function::Rest;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Exception, Function, Object, Runtime};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What one script run may use.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Limits {
    /// Time the script may compute (host calls excluded).
    pub cpu: Duration,
    /// Bytes the engine may allocate.
    pub memory: usize,
    /// Bytes of native stack the engine may use (recursion depth).
    pub stack: usize,
    /// Host calls (`read`, `write`, `fetch`, `sh`, `tool`, `env`) one run may
    /// make.
    pub host_calls: u32,
    /// Time from the start of the run after which no host call is answered
    /// (time in host calls counted; one already running finishes under its
    /// own timeout).
    pub wall: Duration,
}

/// Default [`Limits::host_calls`]: a tool that reads or runs something for
/// each of a few hundred items fits; a loop of host calls stops within a
/// second, its events (a `tool_call` and a `tool_result` each, results cut at
/// 64 KiB) bounded to a few MB of session.
pub const DEFAULT_HOST_CALLS: u32 = 1000;

/// Default [`Limits::wall`]: more than twice the bash tool's default timeout
/// (120 s), so a tool around one slow command and a few quick calls fits; a
/// loop of slow calls ends in minutes, not hours.
pub const DEFAULT_WALL: Duration = Duration::from_secs(300);

impl Default for Limits {
    /// 2 s of CPU, 64 MiB, 512 KiB of stack (well inside the 2 MiB of a
    /// blocking-pool thread), [`DEFAULT_HOST_CALLS`] host calls and
    /// [`DEFAULT_WALL`].
    fn default() -> Limits {
        Limits {
            cpu: Duration::from_secs(2),
            memory: 64 << 20,
            stack: 512 << 10,
            host_calls: DEFAULT_HOST_CALLS,
            wall: DEFAULT_WALL,
        }
    }
}

/// The largest tool result, as JSON.
pub const MAX_RESULT_BYTES: usize = 1 << 20;

/// The largest arguments of one host call, as JSON (a `write`'s content).
pub const MAX_HOST_ARGS_BYTES: usize = 8 << 20;

/// One tool as the code declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolScheme {
    /// The key in the returned object.
    pub key: String,
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// The host functions a script can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostFn {
    Read,
    Write,
    Fetch,
    Sh,
    Tool,
    Env,
}

impl HostFn {
    pub const ALL: [HostFn; 6] = [
        HostFn::Read,
        HostFn::Write,
        HostFn::Fetch,
        HostFn::Sh,
        HostFn::Tool,
        HostFn::Env,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HostFn::Read => "read",
            HostFn::Write => "write",
            HostFn::Fetch => "fetch",
            HostFn::Sh => "sh",
            HostFn::Tool => "tool",
            HostFn::Env => "env",
        }
    }

    /// The JSON arguments object the host receives, built from the script's
    /// positional arguments.
    fn fields(self) -> &'static [&'static str] {
        match self {
            HostFn::Read => &["path"],
            HostFn::Write => &["path", "content"],
            HostFn::Fetch => &["url"],
            HostFn::Sh => &["command"],
            HostFn::Tool => &["name", "args"],
            HostFn::Env => &["name"],
        }
    }
}

/// A host function's refusal or failure (a denial, a tool's error text, a
/// bad argument): thrown in the script as an `Error` with this message, which
/// the script may catch or let through to the model. Plain text on the
/// worker's pipe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HostError(pub String);

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for HostError {
    fn from(message: String) -> HostError {
        HostError(message)
    }
}

impl From<&str> for HostError {
    fn from(message: &str) -> HostError {
        HostError(message.to_owned())
    }
}

/// What the script may call. Blocking: called on the calling thread.
pub trait Host {
    /// `Ok(value)` is returned to the script; `Err(error)` is thrown in it
    /// as an `Error` with that message.
    fn call(&self, func: HostFn, args: Value) -> Result<Value, HostError>;

    /// Whether the caller has given up (its run was cancelled): asked every
    /// few milliseconds while the script runs, which then stops at once with
    /// [`ScriptError::Cancelled`].
    fn cancelled(&self) -> bool {
        false
    }
}

/// A host that refuses everything (used while tools are described).
struct NoHost;

impl Host for NoHost {
    fn call(&self, _: HostFn, _: Value) -> Result<Value, HostError> {
        Err("host functions are not available while tools are being described".into())
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum ScriptError {
    /// The code does not compile, or throws while building its tools.
    #[error("{message}{}", at(*line, *column))]
    Syntax {
        message: String,
        line: Option<u32>,
        column: Option<u32>,
    },
    /// The value the code returns is not `{ name: { fn, scheme } }`.
    #[error("{0}")]
    Shape(String),
    /// The tool threw, or its promise was rejected or never settled.
    #[error("{0}")]
    Thrown(String),
    #[error("it ran past its CPU time limit of {} and was stopped", humantime::format_duration(*.0))]
    Timeout(Duration),
    #[error("it ran out of its memory limit of {} MiB and was stopped", .0 >> 20)]
    OutOfMemory(usize),
    #[error(
        "it made more than {0} host calls (read, write, fetch, sh, tool, env) in one call and was stopped; \
         do the work in fewer calls (one `sh` for many files) or split it across tool calls"
    )]
    HostCalls(u32),
    #[error(
        "it ran past its wall-clock limit of {}, host calls included, and was stopped before its next host call",
        humantime::format_duration(*.0)
    )]
    WallTime(Duration),
    /// The caller gave up ([`Host::cancelled`]).
    #[error("it was stopped because the run stopped")]
    Cancelled,
    /// The engine's worker process could not start or died of something
    /// other than a limit.
    #[error("{0}")]
    Engine(String),
    /// The result cannot be sent back as JSON.
    #[error("{0}")]
    Result(String),
    #[error("no tool `{name}`; the tools are: {}", known.join(", "))]
    UnknownTool { name: String, known: Vec<String> },
}

fn at(line: Option<u32>, column: Option<u32>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
        (Some(l), None) => format!(" (line {l})"),
        _ => String::new(),
    }
}

/// Evaluate the code (calling no tool) and return its tools in order.
pub fn describe(code: &str, limits: &Limits) -> Result<Vec<ToolScheme>, ScriptError> {
    if crate::isolate::AVAILABLE {
        return worker::describe(code, limits);
    }
    describe_here(code, limits)
}

/// Call tool `name` (case-insensitive, by key or scheme name) with `args`;
/// its result as JSON (`undefined` is `null`). Host calls go to `host`, on the
/// calling thread.
pub fn call(
    code: &str,
    name: &str,
    args: Value,
    host: Rc<dyn Host>,
    limits: &Limits,
) -> Result<Value, ScriptError> {
    if crate::isolate::AVAILABLE {
        return worker::call(code, name, args, &*host, limits);
    }
    call_here(code, name, args, host, limits)
}

/// [`describe`] in this process: only the engine's own limits.
fn describe_here(code: &str, limits: &Limits) -> Result<Vec<ToolScheme>, ScriptError> {
    run(code, Rc::new(NoHost), limits, |_, tools| {
        Ok(tools.into_iter().map(|(s, _)| s).collect())
    })
}

/// [`call`] in this process: only the engine's own limits.
fn call_here(
    code: &str,
    name: &str,
    args: Value,
    host: Rc<dyn Host>,
    limits: &Limits,
) -> Result<Value, ScriptError> {
    let args = serde_json::to_string(&args).unwrap_or_else(|_| "{}".into());
    run(code, host, limits, |ctx, tools| {
        let known: Vec<String> = tools.iter().map(|(s, _)| s.name.clone()).collect();
        let Some((_, f)) = tools
            .into_iter()
            .find(|(s, _)| s.name.eq_ignore_ascii_case(name) || s.key.eq_ignore_ascii_case(name))
        else {
            return Err(ScriptError::UnknownTool {
                name: name.to_owned(),
                known,
            });
        };
        let input = ctx
            .json_parse(args.as_str())
            .catch(ctx)
            .map_err(|e| ScriptError::Thrown(format!("the arguments are not JSON: {e}")))?;
        let out: rquickjs::Value = f.call((input,)).catch(ctx).map_err(Failure::Caught)?;
        let out = match out.as_promise() {
            Some(p) => match p.finish::<rquickjs::Value>().catch(ctx) {
                Ok(v) => v,
                Err(CaughtError::Error(rquickjs::Error::WouldBlock)) => {
                    return Err(ScriptError::Thrown(
                        "the tool's promise never settled".into(),
                    ));
                }
                Err(e) => return Err(Failure::Caught(e).into()),
            },
            None => out,
        };
        if out.is_function() {
            return Err(ScriptError::Result(
                "the tool returned a function, which is not JSON".into(),
            ));
        }
        let text = match ctx.json_stringify(out).catch(ctx) {
            Ok(Some(s)) => s
                .to_string()
                .map_err(|e| ScriptError::Result(format!("the result is not text: {e}")))?,
            Ok(None) => return Ok(Value::Null),
            Err(e) => {
                return Err(ScriptError::Result(format!(
                    "the result cannot be turned into JSON: {}",
                    caught_text(&e)
                )));
            }
        };
        if text.len() > MAX_RESULT_BYTES {
            return Err(ScriptError::Result(format!(
                "the result is {} bytes of JSON; the limit is {MAX_RESULT_BYTES}",
                text.len()
            )));
        }
        serde_json::from_str(&text)
            .map_err(|e| ScriptError::Result(format!("the result is not JSON: {e}")))
    })
}

/// A failure inside the engine, mapped to a [`ScriptError`] once the clock
/// and limits are known.
enum Failure<'js> {
    Caught(CaughtError<'js>),
    Script(ScriptError),
}

impl From<ScriptError> for Failure<'_> {
    fn from(e: ScriptError) -> Self {
        Failure::Script(e)
    }
}

impl From<Failure<'_>> for ScriptError {
    fn from(f: Failure<'_>) -> ScriptError {
        match f {
            Failure::Script(e) => e,
            Failure::Caught(e) => ScriptError::Thrown(caught_text(&e)),
        }
    }
}

fn caught_text(e: &CaughtError<'_>) -> String {
    match e {
        CaughtError::Exception(x) => {
            let msg = x.message().unwrap_or_default();
            let name: Option<String> = x.get("name").ok();
            match name {
                Some(n) if !n.is_empty() && n != "Error" => format!("{n}: {msg}"),
                _ => msg,
            }
        }
        CaughtError::Value(v) => {
            let ctx = v.ctx().clone();
            match ctx.json_stringify(v.clone()) {
                Ok(Some(s)) => format!("threw {}", s.to_string().unwrap_or_default()),
                _ => format!("threw a {}", v.type_name()),
            }
        }
        CaughtError::Error(e) => e.to_string(),
    }
}

/// The script's clocks and counters: a CPU deadline pushed back by time
/// spent in host calls, the host calls made, and why the engine was told to
/// stop (the interrupt handler stops it, and a script cannot catch that).
struct Clock {
    deadline: Cell<Instant>,
    started: Instant,
    calls: Cell<u32>,
    stop: Cell<Option<Stopped>>,
}

/// Why the interrupt handler stopped the script.
#[derive(Debug, Clone, Copy)]
enum Stopped {
    Cpu,
    HostCalls,
    Wall,
    Cancelled,
}

impl Clock {
    fn stopped(&self) -> bool {
        self.stop.get().is_some()
    }

    /// The error for the reason the script was stopped, if it was.
    fn error(&self, limits: &Limits) -> Option<ScriptError> {
        Some(match self.stop.get()? {
            Stopped::Cpu => ScriptError::Timeout(limits.cpu),
            Stopped::HostCalls => ScriptError::HostCalls(limits.host_calls),
            Stopped::Wall => ScriptError::WallTime(limits.wall),
            Stopped::Cancelled => ScriptError::Cancelled,
        })
    }

    /// Count a host call; `Some(reason)` if it must not be made.
    fn admit(&self, limits: &Limits, host: &dyn Host) -> Option<Stopped> {
        if let Some(s) = self.stop.get() {
            return Some(s);
        }
        let n = self.calls.get().saturating_add(1);
        self.calls.set(n);
        let why = if n > limits.host_calls {
            Stopped::HostCalls
        } else if self.started.elapsed() >= limits.wall {
            Stopped::Wall
        } else if host.cancelled() {
            Stopped::Cancelled
        } else {
            return None;
        };
        self.stop.set(Some(why));
        Some(why)
    }
}

type Tools<'js> = Vec<(ToolScheme, Function<'js>)>;

/// Set up a fresh engine, evaluate the code, collect its tools, and run `f`.
fn run<T>(
    code: &str,
    host: Rc<dyn Host>,
    limits: &Limits,
    f: impl for<'js> FnOnce(&Ctx<'js>, Tools<'js>) -> Result<T, ScriptError>,
) -> Result<T, ScriptError> {
    let limits = *limits;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_inner(code, host, &limits, f)
    }));
    match outcome {
        Ok(r) => r,
        Err(_) => Err(ScriptError::Thrown(
            "the JavaScript engine failed on this code".into(),
        )),
    }
}

fn run_inner<T>(
    code: &str,
    host: Rc<dyn Host>,
    limits: &Limits,
    f: impl for<'js> FnOnce(&Ctx<'js>, Tools<'js>) -> Result<T, ScriptError>,
) -> Result<T, ScriptError> {
    let engine = |e: rquickjs::Error| ScriptError::Thrown(format!("cannot start the engine: {e}"));
    let rt = Runtime::new().map_err(engine)?;
    rt.set_memory_limit(limits.memory);
    rt.set_max_stack_size(limits.stack);
    let now = Instant::now();
    let clock = Rc::new(Clock {
        deadline: Cell::new(now + limits.cpu),
        started: now,
        calls: Cell::new(0),
        stop: Cell::new(None),
    });
    let watch = clock.clone();
    // The handler must be 'static; `Rc` is fine: the runtime never leaves
    // this thread.
    let handler: Box<dyn FnMut() -> bool> = Box::new(move || {
        if watch.stopped() {
            return true;
        }
        if Instant::now() >= watch.deadline.get() {
            watch.stop.set(Some(Stopped::Cpu));
            return true;
        }
        false
    });
    // SAFETY-free: `set_interrupt_handler` takes a `Box<dyn FnMut>` without
    // `Send` unless the `parallel` feature is on, which it is not.
    rt.set_interrupt_handler(Some(handler));
    let ctx = Context::full(&rt).map_err(engine)?;
    let memory = limits.memory;
    ctx.with(|ctx| {
        let map = |e: CaughtError<'_>, syntax: bool| -> ScriptError {
            if let Some(e) = clock.error(limits) {
                return e;
            }
            let text = caught_text(&e);
            if is_oom(&e, &text) {
                return ScriptError::OutOfMemory(memory);
            }
            if syntax {
                let (line, column) = position(&e);
                return ScriptError::Syntax {
                    message: text,
                    line,
                    column,
                };
            }
            ScriptError::Thrown(text)
        };
        install(&ctx, host, clock.clone(), *limits)
            .map_err(|e| ScriptError::Thrown(format!("cannot set up the sandbox: {e}")))?;
        let wrapped = format!("(function(){{\n{code}\n}})()");
        let value: rquickjs::Value = ctx.eval(wrapped).catch(&ctx).map_err(|e| map(e, true))?;
        let tools = collect(&ctx, value)?;
        let out = f(&ctx, tools);
        // Stopped (the limit, not whatever the script made of it), even if
        // the script caught the host call's error and returned.
        if let Some(e) = clock.error(limits) {
            return Err(e);
        }
        match out {
            Ok(v) => Ok(v),
            Err(ScriptError::Thrown(t)) if t.contains("out of memory") => {
                Err(ScriptError::OutOfMemory(memory))
            }
            Err(e) => Err(e),
        }
    })
}

fn is_oom(e: &CaughtError<'_>, text: &str) -> bool {
    matches!(e, CaughtError::Error(rquickjs::Error::Allocation)) || text.contains("out of memory")
}

/// The 1-based line and column of a compile error in the code as written
/// (the wrapper's first line removed).
fn position(e: &CaughtError<'_>) -> (Option<u32>, Option<u32>) {
    let CaughtError::Exception(x) = e else {
        return (None, None);
    };
    let line: Option<u32> = x.get::<_, Option<u32>>("lineNumber").ok().flatten();
    let column: Option<u32> = x.get::<_, Option<u32>>("columnNumber").ok().flatten();
    if let Some(l) = line {
        return (l.checked_sub(1).filter(|l| *l > 0), column);
    }
    // Else from the stack: `at <eval>:LINE:COL`.
    let stack = x.stack().unwrap_or_default();
    let nums: Vec<u32> = stack
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    match nums.as_slice() {
        [l, c, ..] => (l.checked_sub(1).filter(|l| *l > 0), Some(*c)),
        [l] => (l.checked_sub(1).filter(|l| *l > 0), None),
        [] => (None, None),
    }
}

/// The returned object's tools, checked.
fn collect<'js>(ctx: &Ctx<'js>, value: rquickjs::Value<'js>) -> Result<Tools<'js>, ScriptError> {
    let Some(obj) = value
        .as_object()
        .filter(|_| !value.is_function() && !value.is_array())
    else {
        return Err(ScriptError::Shape(format!(
            "the code must return an object of tools (`return {{ name: {{ fn, scheme }} }}`); it returned {}",
            describe_value(&value)
        )));
    };
    let mut out: Tools<'js> = Vec::new();
    for key in obj.keys::<String>() {
        let key =
            key.map_err(|e| ScriptError::Shape(format!("a tool's name cannot be read: {e}")))?;
        let entry: rquickjs::Value = obj
            .get(key.as_str())
            .map_err(|e| ScriptError::Shape(format!("tool `{key}` cannot be read: {e}")))?;
        let Some(entry) = entry.as_object() else {
            return Err(ScriptError::Shape(format!(
                "tool `{key}` must be `{{ fn, scheme }}`; it is {}",
                describe_value(&entry)
            )));
        };
        let func: rquickjs::Value = entry
            .get("fn")
            .unwrap_or_else(|_| rquickjs::Value::new_undefined(ctx.clone()));
        let Some(func) = func.as_function().cloned() else {
            return Err(ScriptError::Shape(format!(
                "tool `{key}`: `fn` must be a function; it is {}",
                describe_value(&func)
            )));
        };
        let scheme: rquickjs::Value = entry
            .get("scheme")
            .unwrap_or_else(|_| rquickjs::Value::new_undefined(ctx.clone()));
        let Some(scheme) = scheme.as_object() else {
            return Err(ScriptError::Shape(format!(
                "tool `{key}`: `scheme` must be an object `{{ name, description, parameters }}`; it is {}",
                describe_value(&scheme)
            )));
        };
        let text = |field: &str| -> Result<String, ScriptError> {
            let v: rquickjs::Value = scheme
                .get(field)
                .unwrap_or_else(|_| rquickjs::Value::new_undefined(ctx.clone()));
            match v.as_string().and_then(|s| s.to_string().ok()) {
                Some(s) if !s.trim().is_empty() => Ok(s),
                _ => Err(ScriptError::Shape(format!(
                    "tool `{key}`: `scheme.{field}` must be non-empty text; it is {}",
                    describe_value(&v)
                ))),
            }
        };
        let name = text("name")?;
        let description = text("description")?;
        if !name.eq_ignore_ascii_case(&key) {
            return Err(ScriptError::Shape(format!(
                "tool `{key}`: `scheme.name` is `{name}`; the two must match (case-insensitively)"
            )));
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            || name.len() > 64
        {
            return Err(ScriptError::Shape(format!(
                "tool `{name}`: a tool name is up to 64 letters, digits, `_` and `-`"
            )));
        }
        let params: rquickjs::Value = scheme
            .get("parameters")
            .unwrap_or_else(|_| rquickjs::Value::new_undefined(ctx.clone()));
        if params.as_object().is_none() || params.is_array() || params.is_function() {
            return Err(ScriptError::Shape(format!(
                "tool `{key}`: `scheme.parameters` must be a JSON Schema object; it is {}",
                describe_value(&params)
            )));
        }
        let parameters = match ctx.json_stringify(params) {
            Ok(Some(s)) => s
                .to_string()
                .ok()
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or(Value::Null),
            _ => Value::Null,
        };
        if !parameters.is_object() {
            return Err(ScriptError::Shape(format!(
                "tool `{key}`: `scheme.parameters` is not JSON"
            )));
        }
        if let Some((first, _)) = out.iter().find(|(s, _)| s.name.eq_ignore_ascii_case(&name)) {
            return Err(ScriptError::Shape(format!(
                "two tools are named `{}` and `{name}`: tool names are case-insensitive",
                first.name
            )));
        }
        out.push((
            ToolScheme {
                key,
                name,
                description,
                parameters,
            },
            func,
        ));
    }
    if out.is_empty() {
        return Err(ScriptError::Shape(
            "the code returned an object with no tools".into(),
        ));
    }
    Ok(out)
}

fn describe_value(v: &rquickjs::Value<'_>) -> String {
    if v.is_undefined() {
        "undefined".into()
    } else if v.is_null() {
        "null".into()
    } else if v.is_array() {
        "an array".into()
    } else if v.is_function() {
        "a function".into()
    } else if v.is_number() {
        "a number".into()
    } else if v.is_string() {
        "text".into()
    } else if v.is_bool() {
        "a boolean".into()
    } else {
        format!("a {}", v.type_name())
    }
}

/// The host functions, as globals.
fn install<'js>(
    ctx: &Ctx<'js>,
    host: Rc<dyn Host>,
    clock: Rc<Clock>,
    limits: Limits,
) -> rquickjs::Result<()> {
    let globals: Object<'js> = ctx.globals();
    for func in HostFn::ALL {
        let host = host.clone();
        let clock = clock.clone();
        let f = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>,
                  args: Rest<rquickjs::Value<'js>>|
                  -> rquickjs::Result<rquickjs::Value<'js>> {
                if clock.admit(&limits, &*host).is_some() {
                    // The interrupt handler ends the script at its next
                    // branch; this throw only unwinds to there.
                    return Err(Exception::throw_message(&ctx, "the script was stopped"));
                }
                let json = host_args(&ctx, func, &args.0)
                    .map_err(|m| Exception::throw_message(&ctx, &m.0))?;
                let size = json.to_string().len();
                if size > MAX_HOST_ARGS_BYTES {
                    return Err(Exception::throw_message(
                        &ctx,
                        &format!(
                            "{}(): the arguments are {size} bytes of JSON; the limit is {MAX_HOST_ARGS_BYTES}",
                            func.name()
                        ),
                    ));
                }
                let started = Instant::now();
                let answer = host.call(func, json);
                // Waiting on the host is not the script's CPU time.
                clock.deadline.set(clock.deadline.get() + started.elapsed());
                match answer {
                    Ok(v) => {
                        let text = serde_json::to_string(&v).unwrap_or_else(|_| "null".into());
                        ctx.json_parse(text)
                    }
                    Err(m) => Err(Exception::throw_message(&ctx, &m.0)),
                }
            },
        )?
        .with_name(func.name())?;
        globals.set(func.name(), f)?;
    }
    // `console.log` and friends go nowhere: a tool's output is its result.
    let console = Object::new(ctx.clone())?;
    for name in ["log", "info", "warn", "error", "debug"] {
        console.set(
            name,
            Function::new(ctx.clone(), |_: Rest<rquickjs::Value<'js>>| {})?,
        )?;
    }
    globals.set("console", console)?;
    Ok(())
}

/// The JSON object a host function receives.
fn host_args<'js>(
    ctx: &Ctx<'js>,
    func: HostFn,
    args: &[rquickjs::Value<'js>],
) -> Result<Value, HostError> {
    let mut obj = serde_json::Map::new();
    for (i, field) in func.fields().iter().enumerate() {
        let v = args.get(i);
        let json = match (field, v) {
            (&"args", None) => Value::Object(Default::default()),
            (&"args", Some(v)) => match ctx.json_stringify(v.clone()) {
                Ok(Some(s)) => s
                    .to_string()
                    .ok()
                    .and_then(|s| serde_json::from_str(&s).ok())
                    .unwrap_or(Value::Null),
                _ => Value::Null,
            },
            (_, Some(v)) if v.is_string() => Value::String(
                v.as_string()
                    .and_then(|s| s.to_string().ok())
                    .unwrap_or_default(),
            ),
            (_, Some(v)) if v.is_number() || v.is_bool() => match ctx.json_stringify(v.clone()) {
                Ok(Some(s)) => Value::String(s.to_string().unwrap_or_default()),
                _ => Value::Null,
            },
            _ => {
                let wanted: Vec<&str> = func.fields().to_vec();
                return Err(HostError(format!(
                    "{}({}): `{field}` must be text",
                    func.name(),
                    wanted.join(", ")
                )));
            }
        };
        obj.insert((*field).to_owned(), json);
    }
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests;
