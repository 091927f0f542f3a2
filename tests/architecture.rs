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
