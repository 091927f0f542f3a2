//! The plan's expressions: parsing, and evaluating a 3-operator condition
//! against a step output (the hot path of every branch `when`, loop `while`
//! and step `inputs` mapping).
//!
//! Run with `cargo bench --bench expr`.

use std::borrow::Cow;

use agentfile::plan::expr::{Lookup, Root, compile_value, parse};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

const COND: &str = "$steps.evaluate.score < 0.8 && $input.tier == \"free\" || !$item.done";

struct Scope {
    input: Value,
    step: Value,
    item: Value,
}

impl Lookup for Scope {
    fn lookup(&self, root: &Root) -> Option<Cow<'_, Value>> {
        match root {
            Root::Input => Some(Cow::Borrowed(&self.input)),
            Root::Step(id) if id == "evaluate" => Some(Cow::Borrowed(&self.step)),
            Root::Item => Some(Cow::Borrowed(&self.item)),
            _ => None,
        }
    }
}

fn scope() -> Scope {
    Scope {
        input: json!({"tier": "free", "brief": "x".repeat(200)}),
        step: json!({"score": 0.75, "feedback": "more detail", "copy": "y".repeat(2000)}),
        item: json!({"done": false, "url": "https://example.com"}),
    }
}

#[divan::bench]
fn parse_condition() -> bool {
    parse(divan::black_box(COND)).is_ok()
}

#[divan::bench]
fn eval_condition(bencher: divan::Bencher) {
    let (e, s) = match parse(COND) {
        Ok(e) => (e, scope()),
        Err(err) => panic!("the bench's condition does not parse: {err}"),
    };
    bencher.bench(|| divan::black_box(&e).eval(&s));
}

#[divan::bench]
fn eval_inputs_mapping(bencher: divan::Bencher) {
    let mapping = json!({
        "brief": "$input.brief",
        "previousAttempt": "$steps.evaluate.feedback",
        "note": "score ${{ $steps.evaluate.score }} for ${{ $item.url }}",
        "fixed": 3,
    });
    let (v, s) = match compile_value(&mapping) {
        Ok(v) => (v, scope()),
        Err((at, err)) => panic!("the bench's mapping does not compile at {at}: {err}"),
    };
    bencher.bench(|| divan::black_box(&v).eval(&s));
}
