use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;

const OBJ: &str = r#"{ type: "object", properties: {} }"#;

fn tool(name: &str, body: &str) -> String {
    format!(
        "{name}: {{ fn: {body}, scheme: {{ name: \"{name}\", description: \"the {name} tool\", parameters: {OBJ} }} }}"
    )
}

fn code(tools: &[(&str, &str)]) -> String {
    let parts: Vec<String> = tools.iter().map(|(n, b)| tool(n, b)).collect();
    format!("return {{ {} }};", parts.join(",\n"))
}

#[derive(Default)]
struct Recorder {
    calls: RefCell<Vec<(HostFn, Value)>>,
    sleep: Duration,
}

impl Host for Recorder {
    fn call(&self, func: HostFn, args: Value) -> Result<Value, HostError> {
        self.calls.borrow_mut().push((func, args.clone()));
        std::thread::sleep(self.sleep);
        match func {
            HostFn::Read if args["path"] == "secret" => Err("denied by policy".into()),
            HostFn::Read => Ok(json!(format!(
                "content of {}",
                args["path"].as_str().unwrap_or("")
            ))),
            _ => Ok(json!({"ok": true})),
        }
    }
}

fn short() -> Limits {
    Limits {
        cpu: Duration::from_millis(200),
        ..Limits::default()
    }
}

fn run_tool(src: &str, name: &str, args: Value) -> Result<Value, ScriptError> {
    call(src, name, args, Rc::new(Recorder::default()), &short())
}

#[test]
fn describes_tools_in_order() {
    let src = code(&[("b", "() => 1"), ("a", "() => 2")]);
    let tools = describe(&src, &Limits::default()).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["b", "a"]);
    assert_eq!(tools[0].description, "the b tool");
    assert_eq!(
        tools[0].parameters,
        json!({"type": "object", "properties": {}})
    );
}

#[test]
fn calls_sync_and_async_tools_case_insensitively() {
    let src = code(&[
        ("add", "({a, b}) => a + b"),
        ("later", "async ({x}) => x * 2"),
    ]);
    assert_eq!(
        run_tool(&src, "ADD", json!({"a": 2, "b": 3})).unwrap(),
        json!(5)
    );
    assert_eq!(
        run_tool(&src, "later", json!({"x": 21})).unwrap(),
        json!(42)
    );
    let e = run_tool(&src, "nope", json!({})).unwrap_err();
    assert!(matches!(e, ScriptError::UnknownTool { .. }), "{e}");
    assert!(e.to_string().contains("add, later"), "{e}");
}

#[test]
fn host_calls_round_trip_and_errors_are_catchable() {
    let src = code(&[
        ("r", "async ({p}) => (await read(p)).toUpperCase()"),
        (
            "c",
            "() => { try { read(\"secret\"); return \"no\"; } catch (e) { return \"caught: \" + e.message; } }",
        ),
        ("t", "() => tool(\"ls\", {path: \".\"})"),
    ]);
    let host = Rc::new(Recorder::default());
    let v = call(&src, "r", json!({"p": "a.txt"}), host.clone(), &short()).unwrap();
    assert_eq!(v, json!("CONTENT OF A.TXT"));
    let v = call(&src, "c", json!({}), host.clone(), &short()).unwrap();
    assert_eq!(v, json!("caught: denied by policy"));
    let v = call(&src, "t", json!({}), host.clone(), &short()).unwrap();
    assert_eq!(v, json!({"ok": true}));
    let calls = host.calls.borrow();
    assert_eq!(calls[0], (HostFn::Read, json!({"path": "a.txt"})));
    assert_eq!(
        calls[2],
        (HostFn::Tool, json!({"name": "ls", "args": {"path": "."}}))
    );
}

#[test]
fn the_sandbox_has_no_escape_hatches() {
    let src = code(&[
        ("req", "() => require('fs')"),
        (
            "kinds",
            "() => [typeof require, typeof process, typeof std, typeof os, typeof importScripts].join(',')",
        ),
    ]);
    let e = run_tool(&src, "req", json!({})).unwrap_err();
    assert!(e.to_string().contains("require is not defined"), "{e}");
    assert_eq!(
        run_tool(&src, "kinds", json!({})).unwrap(),
        json!("undefined,undefined,undefined,undefined,undefined")
    );
}

#[test]
fn infinite_loops_are_stopped_even_inside_try() {
    let src = code(&[
        ("spin", "() => { while (true) {} }"),
        (
            "trap",
            "() => { for (;;) { try { while (true) {} } catch (e) {} } }",
        ),
        ("later", "async () => { while (true) {} }"),
    ]);
    for name in ["spin", "trap", "later"] {
        let t = Instant::now();
        let e = run_tool(&src, name, json!({})).unwrap_err();
        assert!(matches!(e, ScriptError::Timeout(_)), "{name}: {e}");
        assert!(
            t.elapsed() < Duration::from_millis(1200),
            "{name}: {:?}",
            t.elapsed()
        );
    }
    // A loop while the tools are being built is stopped too.
    let e = describe("while (true) {}", &short()).unwrap_err();
    assert!(matches!(e, ScriptError::Timeout(_)), "{e}");
}

#[test]
fn time_in_host_calls_is_not_cpu_time() {
    let src = code(&[("slow", "() => read(\"a\")")]);
    let host = Rc::new(Recorder {
        sleep: Duration::from_millis(300),
        ..Recorder::default()
    });
    assert_eq!(
        call(&src, "slow", json!({}), host, &short()).unwrap(),
        json!("content of a")
    );
}

#[test]
fn memory_and_recursion_are_bounded() {
    let src = code(&[
        (
            "hog",
            "() => { const a = []; for (;;) a.push(new Array(100000).fill(1)); }",
        ),
        ("big", "() => 'x'.repeat(1 << 28)"),
        (
            "deep",
            "() => { const f = (n) => f(n + 1) + 1; return f(0); }",
        ),
    ]);
    let limits = Limits {
        memory: 16 << 20,
        ..Limits::default()
    };
    for name in ["hog", "big"] {
        let e = call(&src, name, json!({}), Rc::new(Recorder::default()), &limits).unwrap_err();
        assert!(matches!(e, ScriptError::OutOfMemory(_)), "{name}: {e}");
    }
    let e = call(
        &src,
        "deep",
        json!({}),
        Rc::new(Recorder::default()),
        &limits,
    )
    .unwrap_err();
    assert!(e.to_string().contains("call stack size exceeded"), "{e}");
}

#[test]
fn syntax_errors_name_the_line_of_the_code() {
    let e = describe(
        "const a = 1;\nconst b = 2;\nconst c = ;\nreturn {};",
        &short(),
    )
    .unwrap_err();
    match e {
        ScriptError::Syntax { line, .. } => assert_eq!(line, Some(3), "{e}"),
        other => panic!("{other}"),
    }
}

#[test]
fn shapes_are_checked() {
    let cases = [
        ("return 3;", "returned a number"),
        ("return { a: 1 };", "tool `a` must be"),
        (&code(&[("a", "1")]) as &str, "`fn` must be a function"),
        (
            "return { a: { fn: () => 1 } };",
            "`scheme` must be an object",
        ),
        (
            "return { a: { fn: () => 1, scheme: { name: 'a', parameters: {} } } };",
            "`scheme.description`",
        ),
        (
            "return { a: { fn: () => 1, scheme: { name: 'b', description: 'd', parameters: {} } } };",
            "must match",
        ),
        (
            "return { a: { fn: () => 1, scheme: { name: 'a', description: 'd', parameters: 3 } } };",
            "`scheme.parameters`",
        ),
        (
            "return { a: { fn: () => 1, scheme: { name: 'a', description: 'd', parameters: {} } }, A: { fn: () => 1, scheme: { name: 'A', description: 'd', parameters: {} } } };",
            "case-insensitive",
        ),
        ("return {};", "no tools"),
    ];
    for (src, want) in cases {
        let e = describe(src, &short()).unwrap_err();
        assert!(matches!(e, ScriptError::Shape(_)), "{src}: {e}");
        assert!(e.to_string().contains(want), "{src}: {e}");
    }
}

#[test]
fn results_must_be_json_and_promises_must_settle() {
    let src = code(&[
        ("f", "() => () => 1"),
        ("cyc", "() => { const a = {}; a.a = a; return a; }"),
        ("never", "() => new Promise(() => {})"),
        ("undef", "() => undefined"),
        ("rej", "async () => { throw new TypeError('bad input') }"),
    ]);
    assert!(matches!(
        run_tool(&src, "f", json!({})),
        Err(ScriptError::Result(_))
    ));
    assert!(matches!(
        run_tool(&src, "cyc", json!({})),
        Err(ScriptError::Result(_))
    ));
    let e = run_tool(&src, "never", json!({})).unwrap_err();
    assert!(e.to_string().contains("never settled"), "{e}");
    assert_eq!(run_tool(&src, "undef", json!({})).unwrap(), Value::Null);
    let e = run_tool(&src, "rej", json!({})).unwrap_err();
    assert_eq!(e.to_string(), "TypeError: bad input");
}

#[test]
fn garbage_never_panics() {
    for src in [
        "",
        "}",
        "return",
        "{{{{",
        "return new Proxy({}, { ownKeys() { throw 1 } })",
        "throw null",
        "return { get a() { throw new Error('x') } }",
    ] {
        let _ = describe(src, &short());
    }
    let deep = format!("return {}1{};", "[".repeat(100_000), "]".repeat(100_000));
    let _ = describe(&deep, &short());
}

/// Built-ins that loop inside the engine's C code never reach its interrupt
/// point; the worker is killed at the deadline instead (issue 30, item 1).
#[test]
fn builtins_that_loop_in_c_are_stopped_from_outside() {
    let calls = [
        "Array.prototype.join.call({ length: 1e15 }, '')",
        "Array.prototype.copyWithin.call({ length: 1e15 }, 0, 1)",
        "Array.prototype.reverse.call({ length: 1e15 })",
    ];
    for c in calls {
        let src = code(&[("t", &format!("() => {c}"))]);
        let t = Instant::now();
        let e = run_tool(&src, "t", json!({})).unwrap_err();
        assert!(matches!(e, ScriptError::Timeout(_)), "{c}: {e}");
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{c}: {:?}",
            t.elapsed()
        );
        let t = Instant::now();
        let e = describe(&format!("{c};\n{src}"), &short()).unwrap_err();
        assert!(matches!(e, ScriptError::Timeout(_)), "{c}: {e}");
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{c}: {:?}",
            t.elapsed()
        );
    }
    // The worker after a kill: the next call gets a fresh one.
    let src = code(&[("ok", "() => 'fine'")]);
    assert_eq!(run_tool(&src, "ok", json!({})).unwrap(), json!("fine"));
}

/// Host calls are capped per call, and the script cannot catch its way past
/// the cap (issue 30, item 2).
#[test]
fn host_calls_are_capped_even_when_the_script_catches() {
    let src = code(&[
        ("loop", "() => { while (true) { read('a'); } }"),
        (
            "swallow",
            "() => { for (;;) { try { read('a'); } catch (e) {} } }",
        ),
        (
            "once",
            "() => { try { read('a'); read('a'); read('a'); } catch (e) {} return 'returned'; }",
        ),
    ]);
    let limits = Limits {
        host_calls: 2,
        ..short()
    };
    for name in ["loop", "swallow", "once"] {
        let host = Rc::new(Recorder::default());
        let e = call(&src, name, json!({}), host.clone(), &limits).unwrap_err();
        assert_eq!(e, ScriptError::HostCalls(2), "{name}: {e}");
        assert!(e.to_string().contains("more than 2 host calls"), "{e}");
        assert_eq!(host.calls.borrow().len(), 2, "{name}");
    }
    // Under the cap, all is well.
    let host = Rc::new(Recorder::default());
    let src = code(&[("two", "() => read('a') + read('b')")]);
    assert_eq!(
        call(&src, "two", json!({}), host, &limits).unwrap(),
        json!("content of acontent of b")
    );
}

/// Time in host calls counts toward the wall-clock limit (issue 30, item 2).
#[test]
fn time_in_host_calls_counts_toward_the_wall_clock_limit() {
    let src = code(&[("slow", "() => { for (;;) read('a'); }")]);
    let host = Rc::new(Recorder {
        sleep: Duration::from_millis(100),
        ..Recorder::default()
    });
    let limits = Limits {
        wall: Duration::from_millis(350),
        ..short()
    };
    let t = Instant::now();
    let e = call(&src, "slow", json!({}), host.clone(), &limits).unwrap_err();
    assert!(matches!(e, ScriptError::WallTime(_)), "{e}");
    assert!(e.to_string().contains("wall-clock limit of 350ms"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let n = host.calls.borrow().len();
    assert!((3..=5).contains(&n), "{n} calls");
}

/// A caller that gives up stops a script stuck in a built-in at once, not at
/// its CPU limit.
#[test]
fn a_cancelled_caller_stops_the_script_at_once() {
    struct GivesUp(Instant);
    impl Host for GivesUp {
        fn call(&self, _: HostFn, _: Value) -> Result<Value, HostError> {
            Ok(Value::Null)
        }
        fn cancelled(&self) -> bool {
            Instant::now() >= self.0
        }
    }
    let limits = Limits {
        cpu: Duration::from_secs(20),
        host_calls: u32::MAX,
        ..Limits::default()
    };
    for body in [
        "() => Array.prototype.join.call({ length: 1e15 }, '')",
        "() => { for (;;) {} }",
        "() => { for (;;) read('a'); }",
    ] {
        let src = code(&[("t", body)]);
        let t = Instant::now();
        let host = Rc::new(GivesUp(t + Duration::from_millis(200)));
        let e = call(&src, "t", json!({}), host, &limits).unwrap_err();
        assert_eq!(e, ScriptError::Cancelled, "{body}");
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{body}: {:?}",
            t.elapsed()
        );
    }
}

/// What the worker costs per call, against the engine in this process:
/// `cargo test --lib script::tests::worker_overhead -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
#[cfg(any(target_os = "linux", target_os = "android"))]
fn worker_overhead() {
    let src = code(&[("add", "({a, b}) => a + b"), ("r", "() => read('x')")]);
    let host: Rc<dyn Host> = Rc::new(Recorder::default());
    let limits = Limits::default();
    // The median of single calls: the machine may be busy with other work.
    let time = |f: &dyn Fn()| {
        f(); // warm: the worker started, the pages in
        let mut each: Vec<Duration> = (0..301)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect();
        each.sort();
        each[each.len() / 2]
    };
    let rows = [
        (
            "describe, in process",
            time(&|| {
                describe_here(&src, &limits).unwrap();
            }),
        ),
        (
            "describe, worker",
            time(&|| {
                describe(&src, &limits).unwrap();
            }),
        ),
        (
            "call, in process",
            time(&|| {
                call_here(&src, "add", json!({"a": 1, "b": 2}), host.clone(), &limits).unwrap();
            }),
        ),
        (
            "call, worker",
            time(&|| {
                call(&src, "add", json!({"a": 1, "b": 2}), host.clone(), &limits).unwrap();
            }),
        ),
        (
            "call + 1 host call, in process",
            time(&|| {
                call_here(&src, "r", json!({}), host.clone(), &limits).unwrap();
            }),
        ),
        (
            "call + 1 host call, worker",
            time(&|| {
                call(&src, "r", json!({}), host.clone(), &limits).unwrap();
            }),
        ),
    ];
    for (what, t) in rows {
        println!("{what:32} {t:?} (median)");
    }
    drop(crate::isolate::take(&worker::KIND).unwrap()); // the idle one
    let spawn = time(&|| drop(crate::isolate::take(&worker::KIND).unwrap()));
    println!("{:32} {spawn:?} (median)", "a fresh worker (spawn + greet)");
}
