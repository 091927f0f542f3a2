//! The front end never panics, whatever it is fed: arbitrary bytes, and token
//! soups built from the language's own pieces (which reach far deeper into the
//! parser and validator than random bytes do). Every diagnostic it produces must
//! also render, so spans always land inside their file.

use std::path::PathBuf;

use agentfile_frontend::{Options, analyze_bytes};
use agentfile_plan::diag::{EXCERPT_WINDOW, Style, render};
use proptest::prelude::*;

fn check(bytes: Vec<u8>) {
    check_as("Agentfile", bytes);
}

/// The same for a WORKFLOW.md: its front matter, YAML and all.
fn check_workflow_md(bytes: Vec<u8>) {
    check_as(".workflows/fuzz/WORKFLOW.md", bytes);
}

fn check_as(file: &str, bytes: Vec<u8>) {
    // A path inside an empty folder, so FROM paths resolve to nothing real.
    let path = std::env::temp_dir()
        .join("agentfile-never-panics")
        .join(file);
    let _ = std::fs::create_dir_all(path.parent().unwrap());
    let a = analyze_bytes(path, bytes, Options::default());
    for d in &a.diagnostics {
        let text = render(&a.sources, d, Style::default());
        assert!(text.contains(d.severity.as_str()));
        // Excerpt and caret lines (`12 | …`, `   | …`) stay within the window:
        // the gutter, `| `, two `…` marks and 2 × EXCERPT_WINDOW characters.
        for line in text.lines() {
            let Some((gutter, rest)) = line.split_once(" | ") else {
                continue;
            };
            if gutter.chars().all(|c| c.is_ascii_digit() || c == ' ') {
                assert!(
                    rest.chars().count() <= 2 * EXCERPT_WINDOW + 2,
                    "an excerpt of {} characters:\n{text}",
                    rest.chars().count()
                );
            }
        }
    }
    // A valid result always carries a plan, an invalid one never does.
    assert_eq!(a.plan.is_some(), a.errors() == 0);
}

const PIECES: &[&str] = &[
    "NAME",
    "INPUT",
    "AGENT",
    "GOAL",
    "RUN",
    "LOOP",
    "CONVERGE",
    "FROM",
    "USING",
    "WITHIN",
    "DEFAULT",
    "REQUIRES",
    "SUPERVISED",
    "UNSUPERVISED",
    "HUMAN",
    "SECURITY",
    "goal",
    "a",
    "b",
    "x-y",
    "_z",
    "$a",
    "$b",
    "$$",
    "$",
    "${a}",
    "\"",
    "\"\"\"",
    "\"text $a\"",
    "\"esc \\d \\\"\"",
    ",",
    "->",
    "-",
    ">",
    "#",
    "# comment",
    "\n",
    "\r\n",
    "\n\n",
    " ",
    "\t",
    "0",
    "5",
    "99999999999999",
    "2.5",
    "agents/x.md",
    "../up.md",
    "/dev/null",
    "~/x",
    "é",
    "日本",
    "\u{feff}",
    "\0",
    "CMD",
    "TOOL",
    "# syntax=agentrc",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..60).prop_map(|v| v.join(" "))
}

fn tight_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..60).prop_map(|v| v.concat())
}

/// Pieces of WORKFLOW.md front matter: YAML syntax (flow and block, anchors,
/// aliases, tags, quotes) and AIP-15's own fields, kinds and expressions.
const WMD_PIECES: &[&str] = &[
    "---\n",
    "\n",
    "  ",
    "    ",
    "- ",
    ": ",
    ":",
    "{",
    "}",
    "[",
    "]",
    ", ",
    "&a ",
    "*a",
    "!!str ",
    "!!binary ",
    "? ",
    "|\n",
    ">-\n",
    "\"",
    "'",
    "#",
    "~",
    "null",
    "true",
    "1",
    "-1",
    "1e9",
    "name: W\n",
    "id: wf\n",
    "description: d\n",
    "version: 1.0.0\n",
    "inputs: { type: object }\n",
    "outputs: { type: object }\n",
    "steps:\n",
    "id: ",
    "kind: ",
    "tool",
    "branch",
    "parallel",
    "map",
    "loop",
    "approval",
    "suspend",
    "subworkflow",
    "tool: ls",
    "tool: agent",
    "inputs: ",
    "outputs: ",
    "next: ",
    "$end",
    "branches: ",
    "when: ",
    "over: ",
    "while: ",
    "steps: ",
    "workflow: wf",
    "retry: { max_attempts: 2 }",
    "timeout_ms: 5",
    "compensation: ",
    "start: ",
    "result: ",
    "resume: { on: [e] }",
    "on_approve: { next: a }",
    "on_reject: ",
    "approvers: [{ role: r }]",
    "max_steps: 3",
    "triggers: [{ kind: cron }]",
    "inputsFiles: { k: { path: a } }",
    "outputsFiles: { k: { path: <isoDate> } }",
    "action: x",
    "code: x",
    "$input.x",
    "$steps.a.b",
    "$item",
    "$index",
    "==",
    "&&",
    "!",
    "${{ $input.x }}",
    "a",
    "b",
    "\t",
    "é",
    "\u{feff}",
    "\0",
    "\r\n",
];

fn wmd_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WMD_PIECES), 0..80).prop_map(|v| v.concat())
}

/// A valid workflow with its step lines shuffled in: well-formed YAML that
/// breaks AIP-15's rules in every way the pieces allow.
fn wmd_steps() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            prop::sample::select(&["a", "b", "c", "wf"][..]),
            prop::sample::select(&["tool", "branch", "parallel", "map", "loop", "approval", "suspend", "subworkflow", "x"][..]),
            prop::sample::select(WMD_PIECES),
        ),
        0..12,
    )
    .prop_map(|steps| {
        let mut s = String::from("---\nname: W\nid: wf\ndescription: d\nversion: 1.0.0\ninputs: { type: object }\noutputs: { type: object }\nsteps:\n");
        for (id, kind, extra) in steps {
            s.push_str(&format!("  - id: {id}\n    kind: {kind}\n    {extra}\n"));
        }
        s.push_str("---\n");
        s
    })
}

/// A workflow.yaml's step fields, valid and not: paths that leave the
/// folder, placeholders, lists, shell steps, gates, unknown keys.
const WY_FIELDS: &[&str] = &[
    "agent: agents/a.md",
    "agent: ../x.md",
    "agent: /etc/passwd",
    "skill: skills/s.md",
    "skill: {x}",
    "input: $IN",
    "input: $OTHER",
    "input: out/a.md",
    "input: |\n      out/a.md\n      out/b/\n      $IN",
    "input: [out/a.md, 3]",
    "input: \"{request}\"",
    "produces: out/a.md",
    "produces: out/b/",
    "produces: scripts/x.sh",
    "produces: ../escape",
    "produces: \"\"",
    "gate: human-approval",
    "gate: yes",
    "action: shell",
    "script: { bash: scripts/s.sh }",
    "script: { pwsh: scripts/ide/s.ps1 }",
    "script: {}",
    "goal: g",
    "name: n",
    "prodcues: x",
    "id: [1]",
    "\u{0}",
];

fn wy_steps() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            prop::sample::select(&["a", "b", "c", "A!"][..]),
            prop::collection::vec(prop::sample::select(WY_FIELDS), 0..6),
        ),
        0..10,
    )
    .prop_map(|steps| {
        let mut s = String::from("specVersion: \"1.0\"\nname: w\nversion: 1.0.0\ndescription: d\ntrigger: { type: command, input_var: IN }\nsteps:\n");
        for (id, fields) in steps {
            s.push_str(&format!("  - id: {id}\n"));
            for f in fields {
                s.push_str(&format!("    {f}\n"));
            }
        }
        s
    })
}

fn check_workflow_yaml(bytes: Vec<u8>) {
    check_as("workflows/fuzz/workflow.yaml", bytes.clone());
    // `--lenient` takes other paths through the front end.
    let path = std::env::temp_dir()
        .join("agentfile-never-panics")
        .join("workflows/fuzz/workflow.yaml");
    let a = analyze_bytes(
        path,
        bytes,
        Options {
            read: agentfile_plan::ReadOptions {
                lenient: true,
                ..Default::default()
            },
            ..Options::default()
        },
    );
    assert_eq!(a.plan.is_some(), a.errors() == 0);
}

/// Pieces of agentrc Agentfiles, both syntaxes: directives, blocks, heredocs,
/// continuations, flags, quotes and Cedar.
const RC_PIECES: &[&str] = &[
    "\n",
    " ",
    "\t",
    "\\\n",
    "#",
    "# syntax=agentrc.agentfile/v0.1\n",
    "AGENT ",
    "FROM ",
    "CMD ",
    "TOOL ",
    "MOUNT ",
    "CRED ",
    "URL ",
    "POLICY",
    "POLICY ",
    "AUDIT ",
    "END",
    "SOP",
    "SOP ",
    "<<EOF",
    "<<-EOF",
    "EOF",
    "IDENTITY ",
    "CAPABILITY ",
    "COPY ",
    "ADD ",
    "LABEL ",
    "HEALTHCHECK ",
    "ENV ",
    "RUN ",
    "ALLOW ",
    "DENY ",
    "BIND ",
    "ISOLATION ",
    "TIMEOUT ",
    "--chmod=755",
    "--remote",
    "--cached",
    "--runtime",
    "--interval=30s",
    "name=x",
    "description=\"a b",
    "\"",
    "'",
    "=",
    "utcp:file_read",
    "mcp:gh.issue",
    "mcp:",
    "/workspace",
    "/mnt/tools/x",
    "/mnt/SOP",
    "/mnt/tools/../../x",
    "rw",
    "ro",
    "env:X",
    "ghp_0123456789abcdefABCDEF",
    "https://api.github.com",
    "dns:a.b:443",
    "network",
    "model.name",
    "[\"a\"",
    "permit(",
    "forbid(",
    "principal",
    "action",
    "resource",
    "==",
    "in",
    "AgentRC::Agent::\"x\"",
    "AgentRC::Action::\"tool.invoke\"",
    "AgentRC::Tool::\"file_read\"",
    "?principal",
    "@id(\"p\")",
    ")",
    ";",
    "when {",
    "}",
    "context.path like \"/w/*\"",
    ",",
    "é",
    "\0",
];

fn rc_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(RC_PIECES), 0..80).prop_map(|v| v.concat())
}

fn check_agentrc(text: String) {
    let path = std::env::temp_dir()
        .join("agentfile-never-panics-rc")
        .join("Agentfile");
    let _ = std::fs::create_dir_all(path.parent().unwrap());
    for extensions in [&[][..], &["all".to_owned()][..]] {
        let a = analyze_bytes(
            path.clone(),
            text.clone().into_bytes(),
            Options {
                dialect: Some(agentfile_frontend::detect::Dialect::Agentrc),
                read: agentfile_plan::ReadOptions {
                    extensions: extensions.to_vec(),
                    ..Default::default()
                },
                ..Options::default()
            },
        );
        assert_eq!(a.plan.is_some(), a.errors() == 0);
        for d in &a.diagnostics {
            let _ = render(&a.sources, d, Style::default());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn agentrc_soup(text in rc_soup()) {
        check_agentrc(text);
    }

    #[test]
    fn workflow_yaml_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        check_workflow_yaml(bytes);
    }

    #[test]
    fn workflow_yaml_soup(text in wmd_soup()) {
        check_workflow_yaml(text.into_bytes());
    }

    #[test]
    fn workflow_yaml_steps(text in wy_steps()) {
        check_workflow_yaml(text.into_bytes());
    }

    #[test]
    fn workflow_md_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut b = b"---\n".to_vec();
        b.extend(bytes);
        check_workflow_md(b);
    }

    #[test]
    fn workflow_md_soup(text in wmd_soup()) {
        check_workflow_md(text.into_bytes());
    }

    #[test]
    fn workflow_md_steps(text in wmd_steps()) {
        check_workflow_md(text.into_bytes());
    }

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        check(bytes);
    }

    #[test]
    fn arbitrary_text(text in "\\PC{0,300}") {
        check(text.into_bytes());
    }

    #[test]
    fn token_soup(text in soup()) {
        check(text.into_bytes());
    }

    #[test]
    fn token_soup_without_spaces(text in tight_soup()) {
        check(text.into_bytes());
    }

    /// Long lines: language pieces between long runs of text, so spans land
    /// before, inside and after the excerpt window, beside multi-byte text.
    #[test]
    fn long_lines(parts in prop::collection::vec(
        (prop::sample::select(PIECES), 0usize..300, prop::sample::select(&["x", "é", "\t", " "][..])),
        0..12,
    )) {
        let text: String = parts
            .into_iter()
            .map(|(piece, n, fill)| format!("{piece}{}", fill.repeat(n)))
            .collect();
        check(text.into_bytes());
    }
}

/// Mutations of a real workflow: every truncation and every single-byte change
/// of the seed's TDD workflow.
#[test]
fn every_prefix_and_byte_flip_of_a_real_workflow() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/valid/full-dialect/Agentfile");
    let src = std::fs::read(&path).unwrap();
    for cut in 0..=src.len() {
        let a = analyze_bytes(path.clone(), src[..cut].to_vec(), Options::default());
        for d in &a.diagnostics {
            render(&a.sources, d, Style::default());
        }
    }
    for i in 0..src.len() {
        for b in [b'"', b'\n', b'$', b',', b' ', 0xff] {
            let mut m = src.clone();
            m[i] = b;
            let a = analyze_bytes(path.clone(), m, Options::default());
            for d in &a.diagnostics {
                render(&a.sources, d, Style::default());
            }
        }
    }
}
