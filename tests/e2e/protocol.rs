//! The JSON Schemas in `protocol/` are generated from the wire types in
//! `src/protocol/` and `src/plan/` (listed by `src/schemas/`); this test fails when they drift apart.
//! Regenerate with `UPDATE_SNAPSHOTS=1 cargo test --test e2e protocol::`.

use std::path::Path;

#[test]
fn protocol_schemas_match_the_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol");
    let mut stale = Vec::new();
    for (name, schema) in agentfile::schemas::published() {
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        let path = dir.join(name);
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "protocol schemas out of date: {stale:?}; run UPDATE_SNAPSHOTS=1 cargo test --test e2e protocol::"
    );
}

/// The MCP server's fixed tools (`run`, `event`, `cancel`, `approve`,
/// `signal`, `validate`, `inspect`, `list`) as `tools/list` describes them,
/// kept in `protocol/mcp-tools.json` so a change to the MCP surface shows in
/// review like a change to the JSON-RPC one.
#[test]
fn mcp_tools_match_the_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol/mcp-tools.json");
    let tools = agentfile::server::mcp::tools::fixed();
    let text = serde_json::to_string_pretty(&serde_json::json!({ "tools": tools })).unwrap() + "\n";
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &text).unwrap();
    } else {
        assert!(
            std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()),
            "protocol/mcp-tools.json is out of date; run UPDATE_SNAPSHOTS=1 cargo test --test e2e protocol::"
        );
    }
}

/// The MCP tools' schemas use only the `format`s JSON Schema defines:
/// clients warn on the user's terminal about any other (Claude Code prints
/// `unknown format "uint64" ignored` once per use), and schemars writes one
/// for every Rust number type.
#[test]
fn mcp_tool_schemas_use_only_formats_json_schema_defines() {
    const KNOWN: &[&str] = &[
        "date-time",
        "date",
        "time",
        "duration",
        "email",
        "idn-email",
        "hostname",
        "idn-hostname",
        "ipv4",
        "ipv6",
        "uri",
        "uri-reference",
        "iri",
        "iri-reference",
        "uuid",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
        "regex",
    ];
    fn walk(v: &serde_json::Value, at: &str, bad: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(serde_json::Value::String(f)) = m.get("format")
                    && !KNOWN.contains(&f.as_str())
                {
                    bad.push(format!("{at}: {f}"));
                }
                for (k, x) in m {
                    walk(x, &format!("{at}/{k}"), bad);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}/{i}"), bad);
                }
            }
            _ => {}
        }
    }
    let tools = serde_json::to_value(agentfile::server::mcp::tools::fixed()).unwrap();
    let mut bad = Vec::new();
    walk(&tools, "", &mut bad);
    assert!(
        bad.is_empty(),
        "formats no client knows:\n{}",
        bad.join("\n")
    );
}

/// Every `$ref` in the OpenRPC document points at something in it.
#[test]
fn openrpc_references_resolve() {
    fn walk<'a>(v: &'a serde_json::Value, refs: &mut Vec<&'a str>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(serde_json::Value::String(r)) = m.get("$ref") {
                    refs.push(r);
                }
                m.values().for_each(|x| walk(x, refs));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, refs)),
            _ => {}
        }
    }
    let doc = agentfile::schemas::openrpc::document();
    let mut refs = Vec::new();
    walk(&doc, &mut refs);
    assert!(refs.len() > 10);
    for r in refs {
        let pointer = r.strip_prefix('#').expect("local reference");
        assert!(doc.pointer(pointer).is_some(), "dangling {r}");
    }
    let methods = doc["methods"].as_array().unwrap();
    assert_eq!(methods.len(), agentfile::server::jsonrpc::METHODS.len());
}

/// The wire types depend on no other crate of the workspace, so every crate
/// can use them without a cycle and they change only when the wire does
/// (the compiler holds the rest once the manifest names none).
#[test]
fn protocol_depends_on_nothing_else_in_the_workspace() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/wire/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let offenders: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("agentfile"))
        .collect();
    assert!(
        offenders.is_empty(),
        "{} names workspace crates: {offenders:?}",
        manifest.display()
    );
}
