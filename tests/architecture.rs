//! The architecture, checked: what ARCHITECTURE.md claims about which crate
//! may use which, and that the engine knows no format.
//!
//! - The workspace's crates (`cargo metadata`): no front end depends on
//!   another; the engine depends on no front end, nor on the registry that
//!   holds them; nothing on the server's way to the engine is a front end;
//!   telemetry lies below the engine and reaches no front end; the workflow
//!   generator (`agentfile-author`) lies above the registry.
//! - Outside the front ends and the registry, no code compares a format
//!   name (`plan.format == "…"`, `Dialect::…`): the plan carries typed facts.
//! - Inside each crate, no two top-level modules import each other in a
//!   loop (the compiler enforces it between crates).

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
        AUTHOR,
        ENGINE,
        TELEMETRY,
        SERVER,
        "agentfile",
        "agentfile-plan",
    ]) {
        assert!(g.contains_key(*c), "workspace member `{c}` is missing");
    }
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

/// `crate::x` names in a line (also `crate::{x, y}`).
fn crate_refs(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
        rest = after;
    }
    out
}

#[test]
fn no_two_modules_of_a_crate_import_each_other_in_a_loop() {
    let g = graph();
    let mut problems = Vec::new();
    for (crate_name, (dir, _)) in &g {
        let src = dir.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        // Top-level module of each file; the crate root and binaries are none.
        let module_of = |f: &Path| -> Option<String> {
            let rel = f.strip_prefix(&src).ok()?;
            let first = rel.components().next()?.as_os_str().to_str()?;
            let m = first.trim_end_matches(".rs");
            (!matches!(m, "lib" | "main" | "bin")).then(|| m.to_owned())
        };
        let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(f)).collect();
        let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for f in &files {
            let Some(m) = module_of(f) else { continue };
            let text = std::fs::read_to_string(f).unwrap();
            for line in text.lines() {
                for t in crate_refs(code(line)) {
                    if t != m && modules.contains(&t) {
                        edges
                            .entry(m.clone())
                            .or_default()
                            .entry(t)
                            .or_default()
                            .insert(f.strip_prefix(&src).unwrap().display().to_string());
                    }
                }
            }
        }
        // A loop: some module reaches itself.
        for m in &modules {
            let mut seen = BTreeSet::new();
            let mut todo: Vec<String> = edges
                .get(m)
                .map(|e| e.keys().cloned().collect())
                .unwrap_or_default();
            while let Some(n) = todo.pop() {
                if &n == m {
                    let out: Vec<String> = edges[m]
                        .iter()
                        .map(|(t, files)| format!("{m} -> {t} ({files:?})"))
                        .collect();
                    problems.push(format!(
                        "{crate_name}: module `{m}` is in a loop: {}",
                        out.join("; ")
                    ));
                    break;
                }
                if seen.insert(n.clone())
                    && let Some(e) = edges.get(&n)
                {
                    todo.extend(e.keys().cloned());
                }
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
    "engine",
    "session",
    "llm",
    "plan",
    "config",
    "syntax",
    "frontend",
    "dsl",
    "workflow-md",
    "workflow-yaml",
    "agent-md",
    "agentrc",
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
    // Not yet converted; counted so that a report can say how many remain.
    for name in ["server", "sandbox", "author"] {
        let left = string_results(name);
        eprintln!("{name}: {} `Result<_, String>` left", left.len());
    }
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
