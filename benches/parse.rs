//! Throughput of the Agentfile front end: lex, parse and validate a large
//! generated workflow held in memory (no prompt files, so this measures the
//! front end and not the disk). Target: at least 50 MB/s.
//!
//! Run with `cargo bench --bench parse`.

use std::path::PathBuf;

use agentfile::frontend::{Options, analyze_bytes};
use divan::counter::BytesCount;

fn main() {
    divan::main();
}

/// A workflow with `n` agents and goals: inline prompts with variables, escapes,
/// triple-quoted strings, outputs, USING lists, RUN and LOOP steps and comments.
fn generate(n: usize) -> String {
    let mut s = String::with_capacity(n * 400);
    s.push_str("# generated for benchmarking\nNAME bench-workflow\nINPUT topic DEFAULT \"compilers\"\nINPUT rounds DEFAULT 3\n");
    for i in 0..n {
        s.push_str(&format!(
            "AGENT agent_{i} \"You are reviewer number {i}. Be precise about $topic.\\nCite sources.\" -> notes_{i}\n"
        ));
    }
    for i in 0..n {
        let prev = if i == 0 {
            "topic".to_owned()
        } else {
            format!("summary_{}", i - 1)
        };
        if i % 10 == 0 {
            s.push_str(&format!(
                "GOAL goal_{i} \"\"\"\nStudy ${prev} in depth for $topic.\nList the findings as bullet points, one per line,\nand say which are uncertain.\n\"\"\" -> summary_{i}, risks_{i} USING agent_{i}, agent_{} # trailing comment\n",
                (i + 1) % n
            ));
        } else {
            s.push_str(&format!(
                "GOAL goal_{i} \"Refine ${prev} about $topic; keep it under 200 words and note open questions.\" -> summary_{i} USING agent_{i}\n"
            ));
        }
        if i % 20 == 19 {
            let goals: Vec<String> = (i - 19..=i).map(|g| format!("goal_{g}")).collect();
            let kind = if i % 40 == 39 { "LOOP" } else { "RUN" };
            let within = if kind == "LOOP" {
                " WITHIN $rounds"
            } else {
                ""
            };
            s.push_str(&format!(
                "{kind} step_{i} USING {}{within}\n",
                goals.join(", ")
            ));
        }
    }
    s
}

#[divan::bench(args = [1_000, 20_000])]
fn parse_and_validate(bencher: divan::Bencher, n: usize) {
    let src = generate(n);
    let path = PathBuf::from("bench/Agentfile");
    // The generated workflow must be valid, or we would be timing error paths.
    let check = analyze_bytes(path.clone(), src.clone().into_bytes(), Options::default());
    assert_eq!(check.errors(), 0, "{:?}", check.diagnostics.first());
    bencher
        .counter(BytesCount::new(src.len()))
        .with_inputs(|| src.clone().into_bytes())
        .bench_local_values(|bytes| analyze_bytes(path.clone(), bytes, Options::default()));
}
