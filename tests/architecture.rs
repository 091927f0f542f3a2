//! The architecture, checked: what ARCHITECTURE.md claims about which crate
//! may use which, and that the engine knows no format.
//!
//! - The workspace's crates (`cargo metadata`): no front end depends on
//!   another; the engine depends on no front end, nor on the registry that
//!   holds them; nothing on the server's way to the engine is a front end;
//!   telemetry lies below the engine and reaches no front end; the workflow
//!   generator (`agentfile-author`) lies above the registry; the agent-card
//!   reader (`agentfile-agent-card`) lies below every front end.
//! - A front end (and the card reader they share) reads a file and nothing
//!   else: its workspace dependencies are the plan, the syntax helpers, the
//!   config and the wire types (and, for a front end, the card reader); what
//!   needs a runtime (describing JavaScript tools) the registry passes in.
//! - Outside the front ends and the registry, no code compares a format
//!   name (`plan.format == "…"`, `Dialect::…`): the plan carries typed facts.
//! - Below the registry (the engine, the tools, the stores, the servers, the
//!   wire types and what lies beside them), no identifier names a format
//!   (`agentrc`, `workflow_md`, `AgentMd`, …): they hold format-blind facts
//!   (declared grants, compiled policies, read options).
//! - Inside each crate, no two sibling modules (top-level, or inside any
//!   module folder such as `mcp/`) import each other in a loop (the compiler
//!   enforces it between crates).
//! - No function of library or binary code is longer than a reader holds
//!   (150 lines; tests aside).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The front ends: one crate per format.
const FRONT_ENDS: &[&str] = &[
    "agentfile-dsl",
    "agentfile-workflow-md",
    "agentfile-workflow-yaml",
    "agentfile-agent-md",
    "agentfile-agentrc",
];

/// The registry: the one crate that knows every format.
const REGISTRY: &str = "agentfile-frontend";

/// The reader of agent files (`*.agent.md`): below every front end, since
/// the DSL, WORKFLOW.md, workflow.yaml and `agent-md` all read agent cards and
/// no front end may use another.
const AGENT_CARD: &str = "agentfile-agent-card";

const ENGINE: &str = "agentfile-engine";
const SERVER: &str = "agentfile-server";

/// Telemetry: a sink beside the engine, which attaches it to each run.
const TELEMETRY: &str = "agentfile-telemetry";

/// The workflow generator (`create`, `promote`): above the registry.
const AUTHOR: &str = "agentfile-author";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every workspace member and the members it depends on (any kind).
fn graph() -> BTreeMap<String, (PathBuf, BTreeSet<String>)> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    packages
        .iter()
        .map(|p| {
            let name = p["name"].as_str().unwrap().to_owned();
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap());
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                // Normal and build dependencies: a dev-dependency does not
                // make one crate part of another.
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|d| members.contains(*d))
                .map(str::to_owned)
                .collect();
            (name, (manifest.parent().unwrap().to_path_buf(), deps))
        })
        .collect()
}

/// Every member `from` reaches, itself excluded.
fn reach(g: &BTreeMap<String, (PathBuf, BTreeSet<String>)>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_owned()];
    while let Some(c) = todo.pop() {
        for d in &g[&c].1 {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn the_workspace_has_its_crates() {
    let g = graph();
    for c in FRONT_ENDS.iter().chain(&[
        REGISTRY,
        AGENT_CARD,
        AUTHOR,
        ENGINE,
        TELEMETRY,
        SERVER,
        "agentfile",
        "agentfile-plan",
        "agentfile-syntax",
    ]) {
        assert!(g.contains_key(*c), "workspace member `{c}` is missing");
    }
}

/// The card reader is shared by the front ends, so it lies below all of them:
/// it reaches no front end and not the registry (else a front end reading
/// agent cards would reach another through it).
#[test]
fn the_card_reader_lies_below_the_front_ends() {
    let g = graph();
    let bad: Vec<String> = reach(&g, AGENT_CARD)
        .into_iter()
        .filter(|d| FRONT_ENDS.contains(&d.as_str()) || d == REGISTRY)
        .collect();
    assert!(bad.is_empty(), "`{AGENT_CARD}` depends on {bad:?}");
}

/// What a front end may depend on in the workspace: the plan it lowers
/// into, the syntax helpers, the config and the wire types.
const FRONT_END_MAY_USE: &[&str] = &[
    "agentfile-plan",
    "agentfile-syntax",
    "agentfile-config",
    "agentfile-wire",
];

/// A front end reads a file and nothing else: it links no tool, store,
/// provider, script engine or policy language of the runtime. Each front end
/// depends on [`FRONT_END_MAY_USE`] and the card reader; the card reader on
/// [`FRONT_END_MAY_USE`] alone (a registry passes in what needs a runtime).
#[test]
fn a_front_end_reads_a_file_and_nothing_else() {
    let g = graph();
    let mut problems = Vec::new();
    for c in FRONT_ENDS.iter().chain(&[AGENT_CARD]) {
        let bad: Vec<&String> = g[*c]
            .1
            .iter()
            .filter(|d| {
                let allowed = FRONT_END_MAY_USE.contains(&d.as_str())
                    || (FRONT_ENDS.contains(c) && d.as_str() == AGENT_CARD);
                !allowed
            })
            .collect();
        if !bad.is_empty() {
            problems.push(format!("`{c}` depends on {bad:?}"));
        }
    }
    assert!(
        problems.is_empty(),
        "a front end may use only {FRONT_END_MAY_USE:?} (and `{AGENT_CARD}`):\n{}",
        problems.join("\n")
    );
}

/// The kernel sandbox knows nothing of policies, plans or tools: it takes a
/// `Spec` of paths and ports (what the tools crate derives from the policy).
#[test]
fn the_sandbox_is_a_leaf() {
    let g = graph();
    assert!(
        g.contains_key("agentfile-sandbox"),
        "workspace member `agentfile-sandbox` is missing"
    );
    let deps: Vec<String> = reach(&g, "agentfile-sandbox").into_iter().collect();
    assert!(deps.is_empty(), "agentfile-sandbox depends on {deps:?}");
}

#[test]
fn no_front_end_depends_on_another() {
    let g = graph();
    for f in FRONT_ENDS {
        let bad: Vec<String> = reach(&g, f)
            .into_iter()
            .filter(|d| FRONT_ENDS.contains(&d.as_str()) || d == REGISTRY)
            .collect();
        assert!(bad.is_empty(), "front end `{f}` depends on {bad:?}");
    }
}

#[test]
fn the_engine_knows_no_front_end() {
    let g = graph();
    let bad: Vec<String> = reach(&g, ENGINE)
        .into_iter()
        .filter(|d| FRONT_ENDS.contains(&d.as_str()) || d == REGISTRY)
        .collect();
    assert!(bad.is_empty(), "`{ENGINE}` depends on {bad:?}");
    // On the server's way to the engine: only crates that are no front end.
    for c in reach(&g, SERVER) {
        if reach(&g, &c).contains(ENGINE) {
            assert!(
                !FRONT_ENDS.contains(&c.as_str()) && c != REGISTRY,
                "`{SERVER}` reaches `{ENGINE}` through `{c}`"
            );
        }
    }
}

/// Telemetry sits below the engine and beside it: the engine uses it, and it
/// reaches neither the engine nor the tools, the registry or any front end.
#[test]
fn telemetry_is_below_the_engine_and_knows_no_front_end() {
    let g = graph();
    assert!(
        g[ENGINE].1.contains(TELEMETRY),
        "`{ENGINE}` no longer depends on `{TELEMETRY}`"
    );
    let bad: Vec<String> = reach(&g, TELEMETRY)
        .into_iter()
        .filter(|d| {
            FRONT_ENDS.contains(&d.as_str())
                || [REGISTRY, ENGINE, SERVER, "agentfile-tools"].contains(&d.as_str())
        })
        .collect();
    assert!(bad.is_empty(), "`{TELEMETRY}` depends on {bad:?}");
}

/// The generator writes workflows and checks them through the registry, so it
/// sits above it: no front end, nor the registry, nor the engine reaches it.
#[test]
fn the_author_is_above_the_registry() {
    let g = graph();
    assert!(
        g[AUTHOR].1.contains(REGISTRY),
        "`{AUTHOR}` no longer depends on `{REGISTRY}`"
    );
    for c in FRONT_ENDS.iter().chain(&[REGISTRY, ENGINE, TELEMETRY]) {
        assert!(
            !reach(&g, c).contains(AUTHOR),
            "`{c}` depends on `{AUTHOR}`"
        );
    }
}

/// The Rust files under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A line without its `//` comment (string contents aside: good enough for
/// the patterns below, which never hold `//`).
fn code(line: &str) -> &str {
    let t = line.trim_start();
    if t.starts_with("//") {
        return "";
    }
    match line.find("//") {
        Some(i) if !line[..i].contains('"') => &line[..i],
        _ => line,
    }
}

#[test]
fn no_format_name_is_compared_outside_the_front_ends() {
    let g = graph();
    let names = [
        "agentfile",
        "agentrc",
        "workflow-yaml",
        "workflow-md",
        "agent-md",
    ];
    let mut problems = Vec::new();
    for (crate_name, (dir, _)) in &g {
        if FRONT_ENDS.contains(&crate_name.as_str()) || crate_name == REGISTRY {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                let c = code(line);
                let compares_format = c.contains(".format ==")
                    || c.contains(".format !=")
                    || c.contains("format.as_str()")
                    || names.iter().any(|f| {
                        c.contains(&format!("== \"{f}\"")) || c.contains(&format!("!= \"{f}\""))
                    });
                // `--dialect`'s flag values are mapped at the CLI's edge.
                let names_dialect = [
                    "Agentfile",
                    "Agentrc",
                    "WorkflowYaml",
                    "WorkflowMd",
                    "AgentMd",
                ]
                .iter()
                .any(|d| c.contains(&format!("Dialect::{d}")))
                    && !c.contains("DialectArg::");
                if compares_format || names_dialect {
                    problems.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "format names compared outside the front ends and the registry:\n{}",
        problems.join("\n")
    );
}

/// The crates below the registry (and the servers above it) whose code names
/// no format: what differs between formats reaches them as typed facts.
const FORMAT_BLIND: &[&str] = &[
    "agentfile-wire",
    "agentfile-config",
    "agentfile-triggers",
    "agentfile-sandbox",
    "agentfile-llm",
    "agentfile-session",
    "agentfile-tools",
    "agentfile-telemetry",
    "agentfile-engine",
    "agentfile-server",
];

/// Formats named inside an identifier, compared with the identifier in
/// lower case and without underscores (`agentrc`, `Agentrc…`, `workflow_md`,
/// `WorkflowYaml`). The DSL's own name, `agentfile`, is every crate's prefix,
/// so it is not among them; `dsl` is, as a whole word of the identifier.
const FORMAT_WORDS: &[&str] = &["agentrc", "workflowmd", "workflowyaml", "agentmd"];

/// The identifiers of `code` (already [`strip`]ped) that name a format, with
/// their byte offsets.
fn format_identifiers(code: &str) -> Vec<(usize, &str)> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !ident(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && ident(b[i]) {
            i += 1;
        }
        let id = &code[start..i];
        if id.as_bytes()[0].is_ascii_digit() {
            continue; // a number, with its suffix
        }
        let flat = id.to_ascii_lowercase().replace('_', "");
        // Words: split at `_` and where a capital follows a small letter.
        let mut words = Vec::new();
        let mut word = String::new();
        let mut prev_small = false;
        for c in id.chars() {
            if c == '_' || (c.is_ascii_uppercase() && prev_small) {
                words.push(std::mem::take(&mut word));
            }
            if c != '_' {
                word.push(c.to_ascii_lowercase());
            }
            prev_small = c.is_ascii_lowercase() || c.is_ascii_digit();
        }
        words.push(word);
        if FORMAT_WORDS.iter().any(|w| flat.contains(w)) || words.iter().any(|w| w == "dsl") {
            out.push((start, id));
        }
    }
    out
}

#[test]
fn format_identifiers_are_found_in_code_only() {
    let text = "let plan_agentrc = 1; // agentrc\nlet x = \"workflow_md\"; AgentMdCard; DSL_NAME; dslx; Part::Dsl; agent_card";
    let code = strip(text);
    let found: Vec<&str> = format_identifiers(&code)
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    assert_eq!(found, ["plan_agentrc", "AgentMdCard", "DSL_NAME", "Dsl"]);
}

/// Below the registry no identifier names a format: the engine, the tools,
/// the stores, the servers and the wire types hold format-blind facts
/// (declared grants and their compiled policies, read options, a profile of
/// conformance). String literals and comments may name them: a message says
/// `agentrc: MOUNT`, a wire name stays what it was published as.
#[test]
fn no_identifier_names_a_format_below_the_registry() {
    let g = graph();
    let mut problems = Vec::new();
    for c in FORMAT_BLIND {
        let Some((dir, _)) = g.get(*c) else {
            problems.push(format!("workspace member `{c}` is missing"));
            continue;
        };
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let code = strip(&text);
            for (at, id) in format_identifiers(&code) {
                let n = line_at(&code, at);
                let line = text.lines().nth(n - 1).unwrap_or("").trim();
                problems.push(format!("{}:{n}: `{id}` in {line}", file.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "identifiers naming a format below the registry (name the fact instead):\n{}",
        problems.join("\n")
    );
}

/// `text` with its comments, string literals and character literals blanked
/// out (each byte becomes a space, line breaks stay), so what is left is code
/// whose braces and paths can be read by position and line.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |e| i + e);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (1, i + 2);
                while j < b.len() && depth > 0 {
                    if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                        depth += 1;
                        j += 2;
                    } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            // Raw strings: r"…", r#"…"#, br"…" (not an identifier ending in r).
            b'r' if (i == 0
                || !ident(b[i - 1])
                || (b[i - 1] == b'b' && (i < 2 || !ident(b[i - 2]))))
                && matches!(b.get(i + 1), Some(b'"' | b'#')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1; // a raw identifier, r#name
                    continue;
                }
                let open = i + 2 + hashes;
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let end = b[open..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |e| open + e);
                blank(&mut out, open, end);
                i = (end + close.len()).min(b.len());
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let j = j.min(b.len());
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            // A character literal ('a', '\n', '\u{1F600}', '{'), not a lifetime.
            b'\'' => {
                if b.get(i + 1) == Some(&b'\\') {
                    let end = b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map_or(b.len(), |e| i + 2 + e);
                    blank(&mut out, i + 1, end);
                    i = end + 1;
                } else if let Some(c) = text[i + 1..].chars().next()
                    && text[i + 1 + c.len_utf8()..].starts_with('\'')
                {
                    blank(&mut out, i + 1, i + 1 + c.len_utf8());
                    i += 2 + c.len_utf8();
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    // Only ASCII bytes were replaced, and only whole characters.
    String::from_utf8(out).expect("blanking keeps UTF-8")
}

/// The number of the line (from 1) that byte `at` of `text` lies on.
fn line_at(text: &str, at: usize) -> usize {
    text.as_bytes()[..at]
        .iter()
        .filter(|&&c| c == b'\n')
        .count()
        + 1
}

/// The byte just after the `}` that closes the `{` at `open`.
fn matching_brace(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// Where the item that starts at `from` opens its body: the first `{` outside
/// parentheses and brackets, or `None` when a `;` ends the item first
/// (`mod x;`, a trait's `fn f();`).
fn body_start(code: &[u8], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, &c) in code.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' if depth == 0 => return Some(j),
            b';' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// Whether the word `w` stands at `at` in `code` (no identifier character on
/// either side).
fn word_at(code: &[u8], at: usize, w: &str) -> bool {
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    code[at..].starts_with(w.as_bytes())
        && (at == 0 || !ident(code[at - 1]))
        && code.get(at + w.len()).is_none_or(|&c| !ident(c))
}

/// The byte ranges of `#[cfg(test)]` items in `code` (inline test modules,
/// test helpers), and the names of test modules kept in files of their own
/// (`#[cfg(test)] mod tests;`).
fn test_items(code: &str) -> (Vec<(usize, usize)>, Vec<String>) {
    let b = code.as_bytes();
    let (mut ranges, mut files) = (Vec::new(), Vec::new());
    let mut from = 0;
    while let Some(i) = code[from..].find("#[cfg(test)]").map(|i| from + i) {
        let after = i + "#[cfg(test)]".len();
        match body_start(b, after) {
            Some(open) if !code[after..open].contains(';') => {
                let end = matching_brace(b, open);
                ranges.push((i, end));
                from = end;
            }
            _ => {
                let item = code[after..].split(';').next().unwrap_or("");
                let words: Vec<&str> = item.split_whitespace().collect();
                if let Some(p) = words.iter().position(|w| *w == "mod")
                    && let Some(name) = words.get(p + 1)
                {
                    files.push((*name).to_owned());
                }
                from = after;
            }
        }
    }
    (ranges, files)
}

/// The source files of library and binary code: every crate's `src/` and the
/// root package's, without test modules that live in files of their own.
fn source_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let Ok(crates) = std::fs::read_dir(root().join("crates")) else {
        return files;
    };
    for c in crates.flatten() {
        rust_files(&c.path().join("src"), &mut files);
    }
    let mut tests = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let (_, names) = test_items(&strip(&text));
        let stem = f.file_stem().unwrap().to_str().unwrap();
        let dir = if matches!(stem, "mod" | "lib" | "main") {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        for n in names {
            tests.insert(dir.join(format!("{n}.rs")));
            tests.insert(dir.join(n));
        }
    }
    files.retain(|f| !tests.iter().any(|t| f.starts_with(t)));
    files.sort();
    files
}

/// The longest a function may be, in lines from `fn` to its closing brace: a
/// function a reader must hold whole.
const LONGEST_FUNCTION: usize = 150;

/// Functions still over [`LONGEST_FUNCTION`], by file and name, each waiting
/// for its split by whoever owns the file; a waiver that is no longer needed
/// fails the test, so the list only shrinks.
const LONG_FUNCTIONS_WAIVED: &[(&str, &str)] = &[];

#[test]
fn no_function_is_longer_than_a_reader_holds() {
    let mut problems = Vec::new();
    let mut waived: BTreeSet<(&str, &str)> = LONG_FUNCTIONS_WAIVED.iter().copied().collect();
    for f in source_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = strip(&text);
        let b = code.as_bytes();
        // Braces balance once comments and literals are blanked, or the scan
        // misread the file and would miss its functions.
        let opens = b.iter().filter(|&&c| c == b'{').count();
        let closes = b.iter().filter(|&&c| c == b'}').count();
        assert_eq!(opens, closes, "{}: braces do not balance", f.display());
        let (tests, _) = test_items(&code);
        let mut i = 0;
        while i < b.len() {
            if let Some(&(_, end)) = tests.iter().find(|(s, _)| *s == i) {
                i = end;
                continue;
            }
            if word_at(b, i, "fn")
                && let Some(open) = body_start(b, i)
            {
                let end = matching_brace(b, open);
                let lines = line_at(&code, end - 1) - line_at(&code, i) + 1;
                if lines > LONGEST_FUNCTION {
                    let name: String = code[i + 2..]
                        .trim_start()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    let rel = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
                    let waiver = waived.iter().copied().find(|&(f, n)| f == rel && n == name);
                    if let Some(w) = waiver {
                        waived.remove(&w);
                    } else {
                        problems.push(format!(
                            "{rel}:{}: fn {name} has {lines} lines",
                            line_at(&code, i)
                        ));
                    }
                }
                // Functions inside this one are counted in its lines already.
                i = end;
                continue;
            }
            i += 1;
        }
    }
    for (file, name) in waived {
        problems.push(format!(
            "{file}: fn {name} is waived but no longer over {LONGEST_FUNCTION} lines: drop its waiver"
        ));
    }
    assert!(
        problems.is_empty(),
        "functions over {LONGEST_FUNCTION} lines (split them into named helpers):\n{}",
        problems.join("\n")
    );
}

/// The module path of a source file under `src` (`mcp/tools.rs` and
/// `mcp/tools/mod.rs` are `[mcp, tools]`; a crate root is `[]`).
fn module_path(src: &Path, f: &Path) -> Vec<String> {
    let rel = f.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_str().unwrap().to_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin")
        || matches!(parts.as_slice(), [r] if r == "lib" || r == "main")
    {
        return Vec::new(); // a binary's root, or the library's
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The paths that a `crate::`, `super::` or `self::` path starting at `at`
/// names, each as its segments (a group `a::{b, c::d}` names `a::b` and
/// `a::c::d`); returns them and where the path ends.
fn path_tree(code: &[u8], mut at: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let skip_ws = |at: &mut usize| {
        while *at < code.len() && code[*at].is_ascii_whitespace() {
            *at += 1;
        }
    };
    let mut path = prefix;
    loop {
        skip_ws(&mut at);
        if code.get(at) == Some(&b'{') {
            at += 1;
            loop {
                skip_ws(&mut at);
                match code.get(at) {
                    Some(b'}') | None => return at + 1,
                    Some(b',') => at += 1,
                    _ => {
                        let before = at;
                        at = path_tree(code, at, path.clone(), out);
                        if at == before {
                            at += 1; // `*`, `as`: nothing more to read here
                        }
                    }
                }
            }
        }
        let start = at;
        while at < code.len() && ident(code[at]) {
            at += 1;
        }
        if at == start {
            break;
        }
        let seg = std::str::from_utf8(&code[start..at]).unwrap().to_owned();
        if seg != "self" || path.is_empty() {
            path.push(seg);
        }
        skip_ws(&mut at);
        if code[at..].starts_with(b"::") {
            at += 2;
        } else {
            break;
        }
    }
    out.push(path);
    at
}

/// The module paths named in one file: for each, the module that names it
/// (the file's, or an inline module's inside it), the absolute path named,
/// and the line.
fn module_refs(src: &Path, f: &Path) -> Vec<(Vec<String>, Vec<String>, usize)> {
    let text = std::fs::read_to_string(f).unwrap();
    let code = strip(&text);
    let b = code.as_bytes();
    let file_module = module_path(src, f);
    // Inline modules open here: (name, the brace depth inside them).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth -= 1;
            }
            _ if word_at(b, i, "mod") => {
                let rest = &code[i + 3..];
                let name: String = rest
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let after = rest.trim_start()[name.len()..].trim_start();
                if !name.is_empty() && after.starts_with('{') {
                    inline.push((name, depth + 1));
                }
            }
            _ if ["crate", "super", "self"].iter().any(|w| word_at(b, i, w))
                && (i < 2 || &b[i - 2..i] != b"::")
                && code[i..]
                    .trim_start_matches(|c: char| c.is_alphanumeric() || c == '_')
                    .trim_start()
                    .starts_with("::") =>
            {
                let here: Vec<String> = file_module
                    .iter()
                    .cloned()
                    .chain(inline.iter().map(|(n, _)| n.clone()))
                    .collect();
                let mut paths = Vec::new();
                let end = path_tree(b, i, Vec::new(), &mut paths);
                for p in paths {
                    let mut abs = here.clone();
                    let mut segs = p.into_iter().peekable();
                    match segs.next().as_deref() {
                        Some("crate") => abs.clear(),
                        Some("self") => {}
                        Some("super") => {
                            abs.pop();
                        }
                        _ => continue,
                    }
                    while segs.peek().is_some_and(|s| s == "super") {
                        segs.next();
                        abs.pop();
                    }
                    abs.extend(segs);
                    out.push((here.clone(), abs, line_at(&code, i)));
                }
                i = end.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The loops of a graph: its strongly connected parts of more than one node
/// (Tarjan's algorithm).
fn loops(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let l = self.low[v].min(self.low[w.as_str()]);
                    self.low.insert(v, l);
                } else if self.on_stack.contains(w.as_str()) {
                    let l = self.low[v].min(self.index[w.as_str()]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    part.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.found.push(part);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

/// Inside every module (a crate's root, `mcp/`, `ui/`, …), no two of its
/// submodules import each other, directly or around a loop. A path counts
/// wherever it is written (`crate::mcp::x`, `super::x`, `self::x`, in a `use`
/// or inline): it makes the module it is written in depend on `x`, and the
/// edge lies between the two siblings below the modules they share.
#[test]
fn no_two_modules_of_a_crate_import_each_other_in_a_loop() {
    let g = graph();
    let mut problems = Vec::new();
    for (crate_name, (dir, _)) in &g {
        let src = dir.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut modules: BTreeSet<Vec<String>> = BTreeSet::new();
        let mut refs = Vec::new();
        for f in &files {
            let m = module_path(&src, f);
            for n in 0..=m.len() {
                modules.insert(m[..n].to_vec());
            }
            for (here, named, line) in module_refs(&src, f) {
                for n in 0..=here.len() {
                    modules.insert(here[..n].to_vec());
                }
                let at = format!("{}:{line}", f.strip_prefix(&src).unwrap().display());
                refs.push((here, named, at));
            }
        }
        // parent module → child → child it uses → where.
        type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;
        let mut edges: BTreeMap<Vec<String>, Edges> = BTreeMap::new();
        for (here, named, at) in refs {
            let shared = here.iter().zip(&named).take_while(|(a, b)| a == b).count();
            if shared < here.len() && shared < named.len() && modules.contains(&named[..=shared]) {
                edges
                    .entry(named[..shared].to_vec())
                    .or_default()
                    .entry(here[shared].clone())
                    .or_default()
                    .entry(named[shared].clone())
                    .or_default()
                    .insert(at);
            }
        }
        for (parent, e) in &edges {
            let plain: BTreeMap<String, BTreeSet<String>> = e
                .iter()
                .map(|(from, to)| (from.clone(), to.keys().cloned().collect()))
                .collect();
            for part in loops(&plain) {
                let shown: Vec<String> =
                    part.iter()
                        .flat_map(|from| {
                            e[from].iter().filter(|(to, _)| part.contains(to)).map(
                                move |(to, at)| {
                                    let at: Vec<&String> = at.iter().take(3).collect();
                                    format!("  {from} -> {to} ({at:?})")
                                },
                            )
                        })
                        .collect();
                problems.push(format!(
                    "{crate_name}: in `crate::{}`, {} import each other in a loop:\n{}",
                    parent.join("::"),
                    part.join(", "),
                    shown.join("\n")
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Library crates whose errors are types: no `Result<…, String>` in their
/// library code (issue 44 §3). Where the text is data (a tool's answer, the
/// JavaScript host's reply), a named type says so (`script::HostError`).
const TYPED_ERRORS: &[&str] = &[
    "tools",
    "package",
    "engine",
    "session",
    "llm",
    "plan",
    "config",
    "syntax",
    "agent-card",
    "frontend",
    "dsl",
    "workflow-md",
    "workflow-yaml",
    "agent-md",
    "agentrc",
    "server",
    "sandbox",
    "author",
    "wire",
    "telemetry",
    "triggers",
    "testing",
];

/// A crate's library code without comments and without its tests: `//`
/// comments dropped, each `#[cfg(test)]` item (a `{…}` block, or `mod x;`
/// whose `tests.rs` file is skipped by the caller) blanked, newlines kept so
/// that offsets still give lines.
fn string_results_lib_code(text: &str) -> String {
    let src: String = text.lines().map(|l| format!("{}\n", code(l))).collect();
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while let Some(k) = src[i..].find("#[cfg(test)]").map(|k| i + k) {
        out.push_str(&src[i..k]);
        let mut j = k;
        while j < b.len() && b[j] != b';' && b[j] != b'{' {
            j += 1;
        }
        if j < b.len() && b[j] == b'{' {
            let mut depth = 0;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j += 1;
                        while j < b.len() && b[j] != b'"' {
                            j += if b[j] == b'\\' { 2 } else { 1 };
                        }
                    }
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        let end = (j + 1).min(b.len());
        out.extend(src[k..end].chars().filter(|c| *c == '\n'));
        i = end;
    }
    out.push_str(&src[i..]);
    out
}

/// Lines (1-based) where a `Result<…>` has `String` as its last type argument.
fn string_results_in(code: &str) -> Vec<usize> {
    let b = code.as_bytes();
    let mut hits = Vec::new();
    for (at, _) in code.match_indices("Result<") {
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let (mut depth, mut j, mut last) = (1, at + "Result<".len(), at + "Result<".len());
        while j < b.len() && depth > 0 {
            match b[j] {
                b'<' | b'(' | b'[' => depth += 1,
                b'>' if b[j - 1] == b'-' => {}
                b'>' | b')' | b']' => depth -= 1,
                b',' if depth == 1 => last = j + 1,
                _ => {}
            }
            j += 1;
        }
        // `io::Result<String>` has one argument: no error type.
        let two = last > at + "Result<".len();
        if depth == 0 && two && code[last..j - 1].trim() == "String" {
            hits.push(code[..at].matches('\n').count() + 1);
        }
    }
    hits
}

/// Every `Result<…, String>` in the library code of `crates/<name>`.
fn string_results(name: &str) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root().join("crates").join(name).join("src"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        // A module's `tests.rs` is its `#[cfg(test)] mod tests;`.
        if f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for line in string_results_in(&string_results_lib_code(&text)) {
            out.push(format!("{}:{line}", f.display()));
        }
    }
    out
}

#[test]
fn library_errors_are_types_not_strings() {
    let mut problems = Vec::new();
    for name in TYPED_ERRORS {
        problems.extend(string_results(name));
    }
    assert!(
        problems.is_empty(),
        "`Result<_, String>` in library code: return a `thiserror` enum whose message is the text, \
         or, where the text is data (a tool's answer), a named type:\n{}",
        problems.join("\n")
    );
    // Every library crate is held, a new one too.
    let mut unlisted: Vec<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_owned()))
        .filter(|n| !TYPED_ERRORS.contains(&n.as_str()))
        .collect();
    unlisted.sort();
    assert!(
        unlisted.is_empty(),
        "crates not held to typed errors (add them to TYPED_ERRORS): {unlisted:?}"
    );
    // The scanner finds what it should.
    assert_eq!(
        string_results_in(
            "fn f() -> Result<Result<u8, String>, Stop> {}\nfn g() -> io::Result<String> {}"
        ),
        [1]
    );
    assert!(
        string_results_in(&string_results_lib_code(
            "#[cfg(test)]\nmod t { fn f() -> Result<(), String> { \"}\" } }"
        ))
        .is_empty()
    );
}

/// Whether `code` names the engine's run API (`agentfile_engine::run`, or
/// `run` inside an `agentfile_engine::{…}` import): the line of each.
fn run_api_uses(code: &str) -> Vec<usize> {
    let mut at: Vec<usize> = code
        .match_indices("agentfile_engine::run")
        .filter(|(i, _)| {
            let next = code.as_bytes().get(i + "agentfile_engine::run".len());
            !next.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        })
        .map(|(i, _)| line_at(code, i))
        .collect();
    for (i, _) in code.match_indices("agentfile_engine::{") {
        let open = i + "agentfile_engine::".len();
        let close = matching_brace(code.as_bytes(), open);
        let inside = &code[open..close];
        if inside
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == "run")
        {
            at.push(line_at(code, i));
        }
    }
    at
}

/// Every door starts a run through the run service: the server crate names
/// no piece of the run API (`prepare`, `start_in`, a session choice), and
/// the CLI calls none of the pieces that start one.
#[test]
fn the_server_starts_runs_only_through_the_service() {
    let mut files = Vec::new();
    rust_files(&root().join("crates/server/src"), &mut files);
    let mut found = Vec::new();
    let mut service = false;
    for f in &files {
        let code = strip(&std::fs::read_to_string(f).unwrap());
        service |= code.contains("agentfile_engine::service");
        for line in run_api_uses(&code) {
            found.push(format!(
                "{}:{line}",
                f.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "the server reaches past the run service into the run API; call \
         agentfile_engine::service instead:\n{}",
        found.join("\n")
    );
    assert!(service, "the server does not use the run service at all");
    let mut cli = Vec::new();
    rust_files(&root().join("src"), &mut cli);
    for f in &cli {
        let code = strip(&std::fs::read_to_string(f).unwrap());
        for pat in [
            "::prepare(",
            "::start_in(",
            "runapi::start(",
            "run::start(",
            "SessionChoice",
        ] {
            for (i, _) in code.match_indices(pat) {
                found.push(format!(
                    "{}:{}: {pat}",
                    f.strip_prefix(root()).unwrap().display(),
                    line_at(&code, i)
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the CLI starts a run without the run service:\n{}",
        found.join("\n")
    );
    // The scanner finds what it should.
    assert_eq!(
        run_api_uses("use agentfile_engine::run::{self, X};").len(),
        1
    );
    assert_eq!(
        run_api_uses("use agentfile_engine::{executor, run};").len(),
        1
    );
    assert!(run_api_uses("use agentfile_engine::{executor, runner};").is_empty());
    assert!(run_api_uses("agentfile_engine::service::RunService").is_empty());
}
