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

/// The book's event reference (`docs/src/reference/events.md`) is generated
/// from the event schema, field by field, with the schema's descriptions; this
/// test fails when it drifts. Regenerate with `UPDATE_SNAPSHOTS=1 cargo test
/// --test e2e protocol::`.
#[test]
fn the_event_reference_page_matches_the_code() {
    let schema =
        serde_json::to_value(schemars::schema_for!(agentfile::wire::events::Event)).unwrap();
    let page = events_page(&schema);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/events.md");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &page).unwrap();
    } else {
        assert!(
            std::fs::read_to_string(&path).ok().as_deref() == Some(page.as_str()),
            "docs/src/reference/events.md is out of date; run UPDATE_SNAPSHOTS=1 cargo test --test e2e protocol::"
        );
    }
}

/// One Markdown page: the envelope's fields, then a section per event type.
fn events_page(schema: &serde_json::Value) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "# Events\n\n\
         <!-- Generated from the wire types by tests/e2e/protocol.rs; do not edit. -->\n\n\
         Every run produces one ordered stream of events. The same objects appear in\n\
         `--output stream-json`, in JSON-RPC `event` notifications, in MCP progress\n\
         and log notifications, in the session store (`agentfile sessions show ID\n\
         --format json`) and in telemetry. Their JSON Schema is\n\
         `protocol/event.schema.json`.\n\n\
         ```json\n\
         {\"schema_version\":1,\"session_id\":\"…\",\"seq\":7,\"ts\":\"2026-11-22T10:00:00.123Z\",\"type\":\"tool_call\",\n \
         \"step\":\"implementation\",\"goal\":\"fix\",\"agent\":\"creative\",\"iteration\":2,\"data\":{…}}\n\
         ```\n\n\
         `seq` is dense and increasing per session over stored events: a consumer\n\
         that saw `seq` N asks for everything after N. `llm_delta` is transient:\n\
         never stored, it carries the `seq` of the last stored event.\n\n\
         ## Every event\n\n",
    );
    fields_table(&mut out, schema, &schema["properties"], &schema["required"]);
    let defs = &schema["$defs"];
    for variant in schema["oneOf"].as_array().unwrap() {
        let name = variant["properties"]["type"]["const"].as_str().unwrap();
        let _ = write!(out, "\n## `{name}`\n\n");
        if let Some(d) = variant["description"].as_str() {
            let _ = writeln!(out, "{}\n", one_paragraph(d));
        }
        let data = &variant["properties"]["data"];
        match data["properties"].as_object() {
            Some(p) if !p.is_empty() => {
                fields_table(&mut out, defs, &data["properties"], &data["required"])
            }
            _ => out.push_str("No `data` fields.\n"),
        }
    }
    out
}

fn fields_table(
    out: &mut String,
    root: &serde_json::Value,
    props: &serde_json::Value,
    required: &serde_json::Value,
) {
    use std::fmt::Write;
    let _ = root;
    out.push_str("| field | type | |\n|---|---|---|\n");
    let required: Vec<&str> = required
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    for (name, p) in props.as_object().unwrap() {
        let optional = if required.contains(&name.as_str()) {
            ""
        } else {
            " (optional)"
        };
        let desc = p["description"]
            .as_str()
            .map(one_paragraph)
            .unwrap_or_default()
            .replace('|', "\\|");
        let _ = writeln!(
            out,
            "| `{name}` | {}{optional} | {desc} |",
            type_name(p).replace('|', "\\|")
        );
    }
}

/// A schema's type in a few words: `string`, `integer or null`, `Usage`.
fn type_name(p: &serde_json::Value) -> String {
    if let Some(r) = p["$ref"].as_str() {
        return r.rsplit('/').next().unwrap_or(r).to_owned();
    }
    if let Some(any) = p["anyOf"].as_array().or(p["oneOf"].as_array()) {
        return any.iter().map(type_name).collect::<Vec<_>>().join(" or ");
    }
    if let Some(c) = p.get("const") {
        return format!("`{c}`");
    }
    if let Some(e) = p["enum"].as_array() {
        return e
            .iter()
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
            .join(", ");
    }
    let one = |t: &str| match t {
        "array" => format!("list of {}", type_name(&p["items"])),
        "object" => match p.get("additionalProperties") {
            Some(a) if a.is_object() => format!("map of {}", type_name(a)),
            _ => "object".to_owned(),
        },
        other => other.to_owned(),
    };
    match &p["type"] {
        serde_json::Value::String(t) => one(t),
        serde_json::Value::Array(ts) => ts
            .iter()
            .filter_map(|t| t.as_str())
            .map(one)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".to_owned(),
    }
}

/// A doc comment's lines as one paragraph.
fn one_paragraph(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The book's MCP reference (`docs/src/reference/mcp.md`): the fixed tools
/// as `tools/list` describes them, generated like `protocol/mcp-tools.json`.
#[test]
fn the_mcp_reference_page_matches_the_code() {
    use std::fmt::Write;
    let tools = serde_json::to_value(agentfile::server::mcp::tools::fixed()).unwrap();
    let mut page = String::from(
        "# MCP\n\n\
         <!-- Generated from the server's tool definitions by tests/e2e/protocol.rs; do not edit. -->\n\n\
         `agentfile mcp` serves MCP on stdio, and on HTTP with `--http ADDR`. It speaks\n\
         revision 2026-07-28 and revisions 2024-11-05 to 2025-11-25, runs workflows as\n\
         MCP tasks, reports progress, asks approvals by elicitation, and can run on the\n\
         host's own model by sampling. How each of these works, and how to add the\n\
         server to an editor, is in [Editors and MCP](../guides/editors-and-mcp.md).\n\n\
         Besides the tools below, each valid workflow in the workspace is a tool of its\n\
         own, `run_<name>`, whose input schema is the workflow's inputs. The prompts\n\
         `run`, `list` and `create` show as slash commands in most hosts. The full\n\
         schemas are in `protocol/mcp-tools.json`; the tools take the same parameters\n\
         as the JSON-RPC methods of `agentfile serve` ([JSON-RPC](json-rpc.md)).\n\n\
         ## Tools\n",
    );
    for tool in tools.as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let _ = write!(page, "\n### `{name}`\n\n");
        if let Some(d) = tool["description"].as_str() {
            let _ = writeln!(page, "{}\n", one_paragraph(d));
        }
        let schema = &tool["inputSchema"];
        match schema["properties"].as_object() {
            Some(p) if !p.is_empty() => fields_table(
                &mut page,
                schema,
                &schema["properties"],
                &schema["required"],
            ),
            _ => page.push_str("No parameters.\n"),
        }
        if tool["annotations"]["readOnlyHint"] == serde_json::Value::Bool(true) {
            page.push_str("\nRead-only (`readOnlyHint`).\n");
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/mcp.md");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &page).unwrap();
    } else {
        assert!(
            std::fs::read_to_string(&path).ok().as_deref() == Some(page.as_str()),
            "docs/src/reference/mcp.md is out of date; run UPDATE_SNAPSHOTS=1 cargo test --test e2e protocol::"
        );
    }
}

/// The book's list of diagnostics (`docs/src/reference/diagnostics.md`),
/// generated from `diag::CODES`, the table the fixture tests hold to one
/// fixture per code.
#[test]
fn the_diagnostics_reference_page_matches_the_code() {
    use std::fmt::Write;
    let mut page = String::from(
        "# Diagnostics\n\n\
         <!-- Generated from agentfile::diag::CODES by tests/e2e/protocol.rs; do not edit. -->\n\n\
         Every problem `agentfile validate` reports has a code: `--format json` gives\n\
         it as `code`, and `fixtures/invalid/<code>/` (or a variant of the name) holds\n\
         a file that produces it with the exact output expected. How to read a\n\
         report is in [Checking and inspecting](../guides/checking.md).\n\n\
         | code | severity | what it means |\n|---|---|---|\n",
    );
    for (code, severity, meaning) in agentfile::diag::CODES {
        let severity = severity.as_str();
        let _ = writeln!(
            page,
            "| `{code}` | {severity} | {} |",
            markdown_text(meaning).replace('|', "\\|")
        );
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/diagnostics.md");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &page).unwrap();
    } else {
        assert!(
            std::fs::read_to_string(&path).ok().as_deref() == Some(page.as_str()),
            "docs/src/reference/diagnostics.md is out of date; run UPDATE_SNAPSHOTS=1 cargo test --test e2e protocol::"
        );
    }
}

/// Text for a Markdown page: `<` and `>` outside code spans written as
/// entities, so `sh:<command>` is not read as an HTML tag.
fn markdown_text(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                part.to_owned()
            } else {
                part.replace('<', "&lt;").replace('>', "&gt;")
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}
