//! The startup cost of an agent file's JavaScript tool: every call goes to a
//! worker process (reused from call to call; on Linux), which builds a fresh
//! QuickJS runtime, evaluates the `## Tools` code, finds the tool and calls it
//! (nothing is shared between calls); host calls come back over its pipes.
//! Also what `validate` pays to describe the tools. What the worker adds
//! against the engine in the calling process: the ignored unit test
//! `script::tests::worker_overhead`.
//!
//! Run with `cargo bench --bench script`.

use std::rc::Rc;

use agentfile::script::{self, Host, HostError, HostFn, Limits};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

const CODE: &str = r#"
const obj = { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } };
return {
  add: { fn: ({ a, b }) => a + b, scheme: { name: "add", description: "Adds", parameters: obj } },
  head: { fn: async ({ path }) => (await read(path)).slice(0, 10), scheme: { name: "head", description: "Reads", parameters: obj } },
};
"#;

struct Quiet;

impl Host for Quiet {
    fn call(&self, _: HostFn, _: Value) -> Result<Value, HostError> {
        Ok(json!("0123456789abcdef"))
    }
}

#[divan::bench]
fn describe_two_tools() -> usize {
    script::describe(divan::black_box(CODE), &Limits::default())
        .unwrap()
        .len()
}

#[divan::bench]
fn call_sync_tool() -> Value {
    script::call(
        divan::black_box(CODE),
        "add",
        json!({"a": 2, "b": 3}),
        Rc::new(Quiet),
        &Limits::default(),
    )
    .unwrap()
}

#[divan::bench]
fn call_async_tool_with_a_host_call() -> Value {
    script::call(
        divan::black_box(CODE),
        "head",
        json!({"path": "x"}),
        Rc::new(Quiet),
        &Limits::default(),
    )
    .unwrap()
}
