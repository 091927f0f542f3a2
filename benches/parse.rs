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

/// The sizes a benchmark runs at: `full` under `cargo bench` (`--bench`), the
/// smallest alone when `cargo test` smoke-tests the benchmarks in a debug build.
fn sizes(full: &'static [usize]) -> &'static [usize] {
    if std::env::args().any(|a| a == "--bench") {
        full
    } else {
        &full[..1]
    }
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

#[divan::bench(args = sizes(&[1_000, 20_000]))]
fn parse_and_validate(bencher: divan::Bencher, n: usize) {
    analyze_valid(bencher, "bench/Agentfile", generate(n));
}

/// Time the front end on `src` as the file at `path`, which must be valid
/// (or we would be timing error paths).
fn analyze_valid(bencher: divan::Bencher, path: &str, src: String) {
    let path = PathBuf::from(path);
    let check = analyze_bytes(path.clone(), src.clone().into_bytes(), Options::default());
    assert_eq!(check.errors(), 0, "{:?}", check.diagnostics.first());
    bencher
        .counter(BytesCount::new(src.len()))
        .with_inputs(|| src.clone().into_bytes())
        .bench_local_values(|bytes| analyze_bytes(path.clone(), bytes, Options::default()));
}

/// Error-heavy inputs of about 1 MB each, as `validate` sees them: analysis plus
/// rendering what is shown. Target: ≤ 1 s each in release (they once took
/// minutes: every undefined name was compared with every defined name, and every
/// excerpt repeated its whole line).
fn error_shape(shape: &str) -> String {
    let goals = |n: usize| {
        (0..n)
            .map(|i| format!("goal_{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match shape {
        // 20,000 goals each reading an undefined `$var`.
        "undefined-vars" => {
            let n = 20_000;
            let mut s = String::from("NAME big\n");
            for i in 0..n {
                s.push_str(&format!("GOAL goal_{i} \"Use $missing_{i} here\"\n"));
            }
            s.push_str(&format!("RUN main USING {}\n", goals(n)));
            s
        }
        // One 1 MB line holding 130,000 undefined variables.
        "one-line" => {
            let vars: Vec<String> = (0..130_000).map(|i| format!("$m{i}")).collect();
            format!(
                "NAME big\nGOAL g \"{}\"\nRUN main USING g\n",
                vars.join(" ")
            )
        }
        // 25,000 goals naming agents that do not exist.
        "undefined-agents" => {
            let n = 25_000;
            let mut s = String::from("NAME big\n");
            for i in 0..n {
                s.push_str(&format!("GOAL goal_{i} \"x\" USING agent_{i}\n"));
            }
            s.push_str(&format!("RUN main USING {}\n", goals(n)));
            s
        }
        // Each goal reads the next one's output before it has run.
        "use-before-definition" => {
            let n = 30_000;
            let mut s = String::from("NAME big\n");
            for i in 0..n {
                s.push_str(&format!("GOAL goal_{i} \"read $goal_{}\"\n", i + 1));
            }
            s.push_str(&format!(
                "GOAL goal_{n} \"end\"\nRUN main USING {}, goal_{n}\n",
                goals(n)
            ));
            s
        }
        // One name defined 70,000 times.
        "duplicate-goals" => format!(
            "NAME x\n{}RUN main USING same\n",
            "GOAL same \"x\"\n".repeat(70_000)
        ),
        _ => unreachable!("unknown shape {shape}"),
    }
}

#[divan::bench(args = ["undefined-vars", "one-line", "undefined-agents", "use-before-definition", "duplicate-goals"])]
fn validate_errors(bencher: divan::Bencher, shape: &str) {
    use agentfile::diag::{Style, render};
    let src = error_shape(shape);
    let path = PathBuf::from("bench/Agentfile");
    bencher
        .counter(BytesCount::new(src.len()))
        .with_inputs(|| src.clone().into_bytes())
        .bench_local_values(|bytes| {
            let a = analyze_bytes(path.clone(), bytes, Options::default());
            assert!(a.errors() > 0);
            a.diagnostics
                .iter()
                .map(|d| render(&a.sources, d, Style::default()).len())
                .sum::<usize>()
        });
}

/// A WORKFLOW.md of `n` steps: tool steps reading earlier steps' outputs,
/// a branch every 50 steps, a parallel of two and a map every 100, each
/// with an output schema, retry and timeout (about 260 bytes per step).
fn generate_workflow_md(n: usize) -> String {
    let mut s = String::with_capacity(n * 300);
    s.push_str("---\nname: Bench\nid: bench\ndescription: A generated workflow for benchmarking.\nversion: 1.0.0\ninputs:\n  type: object\n  properties:\n    root: { type: string }\n    items: { type: array, items: { type: string } }\n  required: [root]\noutputs: { type: object }\nsteps:\n");
    for i in 0..n {
        let next = if i + 1 == n {
            "$end".to_owned()
        } else {
            format!("s{}", i + 1)
        };
        let read = if i == 0 {
            "$input.root".to_owned()
        } else {
            format!("$steps.s{}.path", i - 1)
        };
        if i % 50 == 49 {
            s.push_str(&format!(
                "  - id: s{i}\n    kind: branch\n    branches:\n      - when: $input.root != null && $input.root != \"x{i}\"\n        next: {next}\n      - when: \"true\"\n        next: {next}\n"
            ));
        } else if i % 100 == 10 {
            s.push_str(&format!(
                "  - id: s{i}\n    kind: parallel\n    branches:\n      - id: left\n        steps:\n          - id: lo\n            kind: tool\n            tool: ls\n            inputs: {{ path: {read} }}\n      - id: right\n        steps:\n          - id: ri\n            kind: tool\n            tool: glob\n            inputs: {{ pattern: \"*.md\" }}\n    next: {next}\n"
            ));
        } else if i % 100 == 20 {
            s.push_str(&format!(
                "  - id: s{i}\n    kind: map\n    over: $input.items\n    parallelism: 4\n    steps:\n      - id: each\n        kind: tool\n        tool: read\n        inputs: {{ path: $item }}\n    next: {next}\n"
            ));
        } else {
            s.push_str(&format!(
                "  - id: s{i}\n    kind: tool\n    tool: ls\n    inputs: {{ path: {read}, note: \"step {i} of the generated workflow\" }}\n    outputs: {{ type: object, properties: {{ path: {{ type: string }} }} }}\n    retry: {{ max_attempts: 3, backoff: exponential, initial_ms: 100 }}\n    timeout_ms: 20000\n    next: {next}\n"
            ));
        }
    }
    s.push_str("---\n# Bench\n\nThe body is documentation.\n");
    s
}

/// Parse + validate throughput of a generated WORKFLOW.md (YAML front
/// matter, JSON Schema, semantic checks, lowering into the plan).
#[divan::bench(args = sizes(&[1_000, 4_000]))]
fn workflow_md(bencher: divan::Bencher, n: usize) {
    analyze_valid(
        bencher,
        "bench/.workflows/bench/WORKFLOW.md",
        generate_workflow_md(n),
    );
}

/// A workflow.yaml of `n` agent steps over 8 agent and 8 skill files (in a
/// temporary folder): each reads the previous step's artifact, every tenth
/// three earlier ones, every fiftieth is gated (about 330 bytes per step).
fn generate_workflow_yaml(n: usize) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("agentfile-bench-wy-{}", std::process::id()));
    let wf = dir.join("workflows/bench");
    for sub in ["agents", "skills"] {
        std::fs::create_dir_all(wf.join(sub)).unwrap();
        for i in 0..8 {
            std::fs::write(
                wf.join(format!("{sub}/r{i}.md")),
                format!("# {sub} {i}\n\nSome instructions, $5 each.\n").repeat(20),
            )
            .unwrap();
        }
    }
    let mut s = String::with_capacity(n * 340);
    s.push_str("specVersion: \"1.0\"\nname: bench\nversion: 1.0.0\ndescription: A generated workflow for benchmarking.\ntrigger:\n  type: command\n  input_var: INPUT_PATH\nsteps:\n");
    for i in 0..n {
        let input = match i {
            0 => "$INPUT_PATH".to_owned(),
            i if i % 10 == 9 && i >= 3 => format!(
                "|\n      outputs/{:05}.md\n      outputs/{:05}.md\n      outputs/{:05}.md",
                i - 1,
                i - 2,
                i - 3
            ),
            i => format!("outputs/{:05}.md", i - 1),
        };
        let gate = if i % 50 == 49 {
            "\n    gate: human-approval"
        } else {
            ""
        };
        s.push_str(&format!(
            "  - id: s{i}\n    name: Step {i} of the generated workflow\n    agent: agents/r{}.md\n    skill: skills/r{}.md\n    input: {input}\n    goal: >\n      Do step {i} carefully and write the result.\n    produces: outputs/{i:05}.md{gate}\n",
            i % 8,
            (i + 3) % 8
        ));
    }
    (wf.join("workflow.yaml"), s)
}

/// Parse + validate throughput of a generated workflow.yaml (YAML, the
/// bundled schema per step, file checks, lowering into the plan).
#[divan::bench(args = sizes(&[1_000, 10_000]))]
fn workflow_yaml(bencher: divan::Bencher, n: usize) {
    let (path, src) = generate_workflow_yaml(n);
    analyze_valid(bencher, path.to_str().unwrap(), src);
}
