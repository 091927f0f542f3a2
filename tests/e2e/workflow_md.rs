//! WORKFLOW.md end to end: AIP-15's twelve EXAMPLES.md files (verbatim in
//! `examples/aip-15/.workflows/`), their tool ids bound to small command tools
//! (`examples/aip-15/tools/fake_tools.py`), validated and run by the built
//! binary; each pattern's behaviour asserted from its outputs and the tools'
//! own log.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::bin;

/// A fresh copy of the examples project.
fn project(name: &str) -> PathBuf {
    let d = crate::support::tmp("wmd", name);
    crate::support::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/aip-15"),
        &d,
        &[".agentfile", "tool-log.jsonl"],
    );
    d
}

/// Edit one example in place (`when: true` → `when: "true"` and the like).
fn patch(dir: &Path, id: &str, from: &str, to: &str) {
    let p = dir.join(".workflows").join(id).join("WORKFLOW.md");
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains(from), "{id} has no `{from}`");
    std::fs::write(&p, text.replace(from, to)).unwrap();
}

fn agentfile(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `validate --format json`: the exit code and each diagnostic as
/// `path:line:col code: message (hint)`.
fn validate(dir: &Path, path: &str) -> (i32, String) {
    let o = agentfile(dir, &["validate", path, "--format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {}", text(&o)));
    let mut lines = Vec::new();
    for f in v["files"].as_array().unwrap() {
        for d in f["diagnostics"].as_array().unwrap() {
            lines.push(format!(
                "{}:{}:{} {}: {} ({})",
                d["path"].as_str().unwrap_or(""),
                d["line"],
                d["column"],
                d["code"].as_str().unwrap_or(""),
                d["message"].as_str().unwrap_or(""),
                d["hint"].as_str().unwrap_or("")
            ));
        }
    }
    (o.status.code().unwrap_or(-1), lines.join("\n"))
}

/// `run --output json`: the exit code and the result object.
fn run(dir: &Path, workflow: &str, args: &[&str]) -> (i32, Value) {
    let path = format!(".workflows/{workflow}");
    let mut all = vec!["run", path.as_str(), "--output", "json"];
    all.extend_from_slice(args);
    let o = agentfile(dir, &all);
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{workflow}: not JSON ({e}): {}", text(&o)));
    (o.status.code().unwrap_or(-1), v)
}

/// The tools the run called, in order, with their arguments.
fn tool_log(dir: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(dir.join("tool-log.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["tool"].as_str().unwrap().to_owned(), v["args"].clone())
        })
        .collect()
}

fn tools(dir: &Path) -> Vec<String> {
    tool_log(dir).into_iter().map(|(t, _)| t).collect()
}

#[test]
fn examples_the_schema_accepts_validate_clean() {
    let dir = project("valid");
    for id in [
        "pricing-snapshot-brief",
        "customer-360",
        "contract-send",
        "order-fulfillment-saga",
        "iterative-copy-refinement",
        "customer-renewal",
        "listing-search-report",
    ] {
        let (code, diags) = validate(&dir, &format!(".workflows/{id}"));
        assert_eq!(code, 0, "{id}: {diags}");
        assert!(diags.is_empty(), "{id}: {diags}");
    }
}

#[test]
fn examples_the_schema_refuses_fail_at_the_right_line() {
    let dir = project("invalid");
    // (`when: true`, a YAML boolean where the schema wants a string, is read
    // as that literal with a warning: lead-triage, onboarding-after-payment
    // and bulk-lead-triage validate; tests/e2e/hardening/yaml.rs, item 14.)
    let cases: &[(&str, &[&str])] = &[
        // The seed forbids inline tool bodies.
        (
            "report-writer",
            &["report-writer/WORKFLOW.md:34:5 forbidden-field"],
        ),
        (
            "stripe-invoice-sync",
            &[
                "stripe-invoice-sync/WORKFLOW.md:24:3 schema: unknown field `mode` in `runtime`",
                "stripe-invoice-sync/WORKFLOW.md:35:5 forbidden-field",
            ],
        ),
    ];
    for (id, wanted) in cases {
        let (code, out) = validate(&dir, &format!(".workflows/{id}"));
        assert_eq!(code, 2, "{id}: {out}");
        for w in *wanted {
            assert!(out.contains(w), "{id}: expected `{w}` in:\n{out}");
        }
    }
}

#[test]
fn sequential_pipeline_feeds_each_step_the_last() {
    let dir = project("seq");
    let (code, r) = run(
        &dir,
        "pricing-snapshot-brief",
        &["--input", "productUrl=https://x.test/pricing"],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["outputs"]["path"], "notes/pricing.md");
    let log = tool_log(&dir);
    let names: Vec<&str> = log.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        names,
        ["pricing-snapshot", "text-summarise", "append-to-notes"]
    );
    assert_eq!(log[2].1["line"], "2 tiers");
}

#[test]
fn branch_routes_by_the_enriched_size() {
    let dir = project("branch");
    patch(&dir, "lead-triage", "when: true", "when: \"true\"");
    let (code, r) = run(
        &dir,
        "lead-triage",
        &["--input", "email=big@corp.test", "--approve-all"],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["outputs"]["ownerId"], "ae-7");
    let (code, r) = run(
        &dir,
        "lead-triage",
        &["--input", "email=small@shop.test", "--approve-all"],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["outputs"]["messageId"], "m-small@shop.test");
    assert_eq!(
        tools(&dir),
        [
            "clearbit-enrich",
            "salesforce-assign-account-exec",
            "clearbit-enrich",
            "send-email-brevo"
        ]
    );
}

#[test]
fn parallel_branches_join_before_the_merge() {
    let dir = project("parallel");
    let (code, r) = run(&dir, "customer-360", &["--input", "customerEmail=a@b.test"]);
    assert_eq!(code, 0, "{r}");
    let summary = &r["outputs"]["summary"];
    for (k, source) in [
        ("stripe", "stripe"),
        ("hubspot", "hubspot"),
        ("linear", "linear"),
    ] {
        assert_eq!(summary[k]["source"], source, "{summary}");
    }
    assert_eq!(
        tools(&dir).last().map(String::as_str),
        Some("merge-objects")
    );
}

#[test]
fn approval_routes_reject_to_revise_and_back() {
    let dir = project("approval");
    let (code, r) = run(
        &dir,
        "contract-send",
        &["--input", "customerId=c-1", "--input", "productSku=sku-9"],
    );
    // Nobody at a terminal: the run stops, waiting for a decision.
    assert_eq!(code, 3, "{r}");
    let id = r["session_id"].as_str().unwrap().to_owned();
    let o = agentfile(
        &dir,
        &["sessions", "approve", &id, "--reject", "--note", "clause 3"],
    );
    assert!(o.status.success(), "{}", text(&o));
    // Rejected: revise runs, and the review asks again.
    let o = agentfile(&dir, &["sessions", "resume", &id]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("legal-review@2"), "{}", text(&o));
    for _ in 0..2 {
        // The second review, then `send` (approval: always).
        let o = agentfile(&dir, &["sessions", "approve", &id]);
        assert!(o.status.success(), "{}", text(&o));
        let _ = agentfile(&dir, &["sessions", "resume", &id]);
    }
    let o = agentfile(&dir, &["sessions", "show", &id, "--format", "json"]);
    assert!(text(&o).contains("completed"), "{}", text(&o));
    assert_eq!(
        tools(&dir),
        [
            "contract-draft",
            "contract-revise",
            "send-contract-to-customer"
        ]
    );
}

#[test]
fn suspend_is_resumed_by_a_signal_from_another_process() {
    let dir = project("suspend");
    patch(
        &dir,
        "onboarding-after-payment",
        "when: true",
        "when: \"true\"",
    );
    let (code, r) = run(
        &dir,
        "onboarding-after-payment",
        &[
            "--input",
            "customerId=c-42",
            "--input",
            "email=c@x.test",
            "--approve-all",
        ],
    );
    assert_eq!(code, 6, "suspended: {r}");
    assert_eq!(r["status"], "suspended");
    let id = r["session_id"].as_str().unwrap();
    let o = agentfile(
        &dir,
        &[
            "sessions",
            "signal",
            id,
            "stripe.charge.succeeded",
            ".workflows/onboarding-after-payment",
            "--payload",
            r#"{"chargeId": "ch-1"}"#,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(tools(&dir), ["send-email-brevo", "provision-workspace"]);
    assert_eq!(tool_log(&dir)[1].1["customerId"], "c-42");
}

#[test]
fn saga_compensates_completed_steps_in_reverse() {
    let dir = project("saga");
    let (code, r) = run(
        &dir,
        "order-fulfillment-saga",
        &["--input", "orderId=o-fail", "--approve-all"],
    );
    assert_eq!(code, 1, "{r}");
    assert!(r["error"].as_str().unwrap().contains("ship"), "{r}");
    assert_eq!(
        tools(&dir),
        [
            "inventory-reserve",
            "stripe-charge",
            "ship-package",
            "stripe-refund",
            "inventory-release"
        ]
    );
    let log = tool_log(&dir);
    assert_eq!(log[3].1["chargeId"], "ch-o-fail");
    assert_eq!(log[4].1["reservationId"], "res-o-fail");
    // A good order: no compensation.
    let dir = project("saga-ok");
    let (code, r) = run(
        &dir,
        "order-fulfillment-saga",
        &["--input", "orderId=o-1", "--approve-all"],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["outputs"]["trackingId"], "trk-1");
}

#[test]
fn map_keeps_input_order_and_result_shapes_the_output() {
    let dir = project("map");
    let (code, r) = run(
        &dir,
        "listing-search-report",
        &["--input", "query=flat", "--input", "recipient=me"],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(
        r["outputs"],
        serde_json::json!({
            "count": 3,
            "reportPath": "reports/listings.md",
            "delivery": {"id": "msg-1", "to": "me"}
        })
    );
    let log = tool_log(&dir);
    let enrich = &log.iter().find(|(t, _)| t == "listings-enrich").unwrap().1;
    let refs: Vec<&str> = enrich["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["ref"].as_str().unwrap())
        .collect();
    assert_eq!(
        refs,
        ["https://x.test/a", "https://x.test/b", "https://x.test/c"]
    );
}

#[test]
fn loop_stops_when_its_condition_turns_false() {
    let dir = project("loop");
    let (code, r) = run(&dir, "iterative-copy-refinement", &["--input", "brief=b"]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["outputs"]["score"], 0.9);
    let n = tools(&dir).iter().filter(|t| *t == "copy-generate").count();
    assert_eq!(n, 3);
}

#[test]
fn subworkflows_run_as_one_step_and_return_their_outputs() {
    let dir = project("sub");
    let (code, r) = run(
        &dir,
        "customer-renewal",
        &[
            "--input",
            "customerId=c-1",
            "--input",
            "customerEmail=c@x.test",
            "--approve-all",
        ],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["outputs"]["sentAt"], "2026-11-25T10:00:00Z");
    let t = tools(&dir);
    assert!(t.contains(&"merge-objects".to_owned()), "{t:?}");
    assert_eq!(
        t.last().map(String::as_str),
        Some("send-contract-to-customer")
    );
    // A map over a sub-workflow: one result per item, in order.
    patch(&dir, "lead-triage", "when: true", "when: \"true\"");
    let inputs = dir.join("in.json");
    std::fs::write(
        &inputs,
        r#"{"emails": ["big@a.test", "small@b.test", "big@c.test"]}"#,
    )
    .unwrap();
    let (code, r) = run(
        &dir,
        "bulk-lead-triage",
        &["--inputs-json", "in.json", "--approve-all"],
    );
    assert_eq!(code, 0, "{r}");
    let results = r["outputs"]["result"].as_array().expect("a list");
    assert_eq!(results.len(), 3, "{r}");
    assert_eq!(results[0]["ownerId"], "ae-7");
    assert_eq!(results[1]["messageId"], "m-small@b.test");
}

#[test]
fn inputs_are_checked_against_the_schema_before_any_step() {
    let dir = project("inputs");
    let o = agentfile(&dir, &["run", ".workflows/customer-360"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("customerEmail"), "{}", text(&o));
    patch(&dir, "lead-triage", "when: true", "when: \"true\"");
    std::fs::write(dir.join("in.json"), r#"{"emails": "not-a-list"}"#).unwrap();
    let o = agentfile(
        &dir,
        &[
            "run",
            ".workflows/bulk-lead-triage",
            "--inputs-json",
            "in.json",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("emails"), "{}", text(&o));
    assert!(tools(&dir).is_empty());
}

#[test]
fn a_step_output_that_breaks_its_schema_fails_the_step() {
    let dir = project("outschema");
    // text-summarise returns a string `markdown`; demand a number.
    patch(
        &dir,
        "pricing-snapshot-brief",
        "properties: { markdown: { type: string } }",
        "properties: { markdown: { type: number } }, required: [markdown]",
    );
    let (code, r) = run(
        &dir,
        "pricing-snapshot-brief",
        &["--input", "productUrl=https://x.test"],
    );
    assert_eq!(code, 1, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("outputs` schema"),
        "{r}"
    );
    assert_eq!(tools(&dir), ["pricing-snapshot", "text-summarise"]);
}

#[test]
fn hostile_files_get_a_diagnostic_not_a_crash() {
    let dir = project("hostile");
    let head = "---\nname: H\nid: hostile\ndescription: d\nversion: 1.0.0\ninputs: { type: object }\noutputs: { type: object }\n";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "deep",
            format!(
                "{head}steps: {}1{}\n---\n",
                "[".repeat(1000),
                "]".repeat(1000)
            ),
            "too-deep",
        ),
        (
            "unclosed",
            format!("{head}steps: []\n"),
            "unclosed-front-matter",
        ),
        (
            "self",
            format!(
                "{head}steps:\n  - id: again\n    kind: subworkflow\n    workflow: self\n---\n"
            ),
            "subworkflow-cycle",
        ),
        (
            "spin",
            format!(
                "{head}steps:\n  - id: aa\n    kind: tool\n    tool: ls\n    next: bb\n  - id: bb\n    kind: branch\n    branches:\n      - when: \"true\"\n        next: aa\n---\n"
            ),
            "cycle",
        ),
        (
            // Steps nested 1,000 levels deep (maps in maps).
            "nested",
            format!(
                "{head}steps:\n  {}{{id: leaf, kind: tool, tool: ls}}{}\n---\n",
                "{id: m, kind: map, over: $input.x, steps: [".repeat(1000),
                "]}".repeat(1000)
            ),
            "too-deep",
        ),
        (
            // A 10 MB file: a long description and 20,000 steps.
            "huge",
            {
                let mut s = format!(
                    "---\nname: H\nid: huge\ndescription: \"{}\"\nversion: 1.0.0\ninputs: {{ type: object }}\noutputs: {{ type: object }}\nsteps:\n",
                    "x".repeat(5_000_000)
                );
                for i in 0..20_000 {
                    s.push_str(&format!(
                        "  - id: s{i}\n    kind: tool\n    tool: ls\n    inputs: {{ path: \"{}\" }}\n",
                        "p".repeat(200)
                    ));
                }
                s.push_str("---\n");
                assert!(s.len() > 10_000_000);
                s
            },
            "",
        ),
        (
            "ops",
            format!(
                "{head}steps:\n  - id: bb\n    kind: branch\n    branches:\n      - when: \"{}\"\n        next: $end\n---\n",
                vec!["$input.x == 1"; 2500].join(" && ")
            ),
            "",
        ),
    ];
    for (name, body, code) in cases {
        let wdir = dir
            .join(".workflows")
            .join(if name == "self" { "self" } else { name });
        std::fs::create_dir_all(&wdir).unwrap();
        std::fs::write(wdir.join("WORKFLOW.md"), &body).unwrap();
        let (status, diags) = validate(&dir, wdir.join("WORKFLOW.md").to_str().unwrap());
        if code.is_empty() {
            assert!(status == 0 || status == 2, "{name}: {diags}");
        } else {
            assert_eq!(status, 2, "{name}: {diags}");
            assert!(diags.contains(&format!(" {code}: ")), "{name}: {diags}");
        }
    }
}

/// EXAMPLES #10 with its inline body replaced by a bound tool: the draft is
/// staged into the run's scratch folder, the tool writes its report there,
/// and the report is synced back under the interpolated path; the scratch
/// folder is gone afterwards. A policy that denies the destination stops the
/// sync, and a missing input file stops the run before any step.
#[test]
fn file_contract_stages_inputs_and_syncs_outputs_back() {
    let dir = project("files");
    patch(
        &dir,
        "report-writer",
        "tool: { entry: ./workflow.ts#writeReportStep }",
        "tool: write-report",
    );
    std::fs::create_dir_all(dir.join("drafts")).unwrap();
    std::fs::write(dir.join("drafts/input.md"), "draft body\n").unwrap();
    let (code, r) = run(&dir, "report-writer", &["--input", "title=Weekly"]);
    assert_eq!(code, 0, "{r}");
    let session = r["session_id"].as_str().unwrap();
    let reports: Vec<_> = std::fs::read_dir(dir.join("reports"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(reports.len(), 1, "{reports:?}");
    let name = &reports[0];
    assert!(
        name.starts_with("report-writer-20") && name.ends_with(".md") && name.len() == 27,
        "{name}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("reports").join(name)).unwrap(),
        "# Weekly\n\ndraft body\n\n"
    );
    let root = dir.join(".agentfile/runs").join(session);
    assert!(
        !root.exists(),
        "the scratch folder is removed after the sync"
    );
    // The tool was given the scratch folder, inside the session's own.
    let log = tool_log(&dir);
    let given = log[0].1["_workflowFsRoot"].as_str().unwrap();
    assert!(
        given.ends_with(&format!(".agentfile/runs/{session}/fs")),
        "{given}"
    );

    // The policy denies the destination: the run fails, nothing is written.
    std::fs::remove_dir_all(dir.join("reports")).unwrap();
    let policy = std::fs::read_to_string(dir.join("policy.toml")).unwrap();
    std::fs::write(
        dir.join("policy.toml"),
        format!(
            "{policy}\n[write]\nallow = [\"$WORKSPACE/**\"]\ndeny = [\"$WORKSPACE/reports/**\"]\n"
        ),
    )
    .unwrap();
    let (code, r) = run(&dir, "report-writer", &["--input", "title=Weekly"]);
    assert_ne!(code, 0, "{r}");
    assert_eq!(r["termination_reason"], "policy_denied", "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("output file `report`"),
        "{r}"
    );
    assert!(!dir.join("reports").exists());

    // The declared input is missing: the run stops before its first step.
    std::fs::write(dir.join("policy.toml"), policy).unwrap();
    std::fs::remove_file(dir.join("drafts/input.md")).unwrap();
    let before = tool_log(&dir).len();
    let (code, r) = run(&dir, "report-writer", &["--input", "title=Weekly"]);
    assert_eq!(code, 1, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("cannot stage input file `source` from drafts/input.md"),
        "{r}"
    );
    assert_eq!(tool_log(&dir).len(), before, "no step ran");
}

/// `action:` refs resolve through `[actions."<ref>"]`; an unbound one is an
/// error at the ref naming how to bind it.
#[test]
fn action_refs_resolve_through_the_config() {
    let dir = project("action");
    patch(
        &dir,
        "pricing-snapshot-brief",
        "tool: pricing-snapshot",
        "action: \"@acme/web/snapshot\"",
    );
    let (code, out) = validate(&dir, ".workflows/pricing-snapshot-brief/WORKFLOW.md");
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(
            "WORKFLOW.md:22:13 unresolved-action: action `@acme/web/snapshot` is not bound to a tool"
        ),
        "{out}"
    );
    let config = std::fs::read_to_string(dir.join("agent.toml")).unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!("{config}\n[actions.\"@acme/web/snapshot\"]\ntool = \"pricing-snapshot\"\n"),
    )
    .unwrap();
    let (code, out) = validate(&dir, ".workflows/pricing-snapshot-brief/WORKFLOW.md");
    assert_eq!((code, out.as_str()), (0, ""));
    let (code, r) = run(
        &dir,
        "pricing-snapshot-brief",
        &["--input", "productUrl=https://x.test/pricing"],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(tools(&dir)[0], "pricing-snapshot");
}

/// A map over 100,000 items runs a bounded number at a time and stops
/// cleanly at the workflow's `max_steps`, having started no more.
#[test]
fn a_map_over_100000_items_is_bounded() {
    let dir = project("big-map");
    let wdir = dir.join(".workflows/big-map");
    std::fs::create_dir_all(&wdir).unwrap();
    std::fs::write(
        wdir.join("WORKFLOW.md"),
        "---\nname: Big map\nid: big-map\ndescription: d\nversion: 1.0.0\nmax_steps: 300\ninputs:\n  type: object\n  properties: { items: { type: array } }\n  required: [items]\noutputs: { type: object }\nsteps:\n  - id: each\n    kind: map\n    over: $input.items\n    steps:\n      - id: look\n        kind: tool\n        tool: ls\n        inputs: { path: . }\n---\n",
    )
    .unwrap();
    let items: Vec<u32> = (0..100_000).collect();
    std::fs::write(
        dir.join("items.json"),
        serde_json::json!({ "items": items }).to_string(),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let (code, r) = run(&dir, "big-map", &["--inputs-json", "items.json"]);
    assert_eq!(code, 1, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("max_steps = 300"),
        "{r}"
    );
    assert!(
        r["usage"]["tool_calls"].as_u64().unwrap() < 600,
        "items kept starting after the limit: {r}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

/// CONTRACT §15: triggers are declared on the plan, and a webhook needs the
/// host's listener — `validate` reads the project's agent.toml for it.
#[test]
fn triggers_are_declared_and_webhooks_need_the_daemon_listener() {
    let dir = project("triggers");
    let wf = dir.join(".workflows/pricing-snapshot-brief/WORKFLOW.md");
    let text = std::fs::read_to_string(&wf).unwrap();
    let text = text.replacen(
        "\nsteps:",
        "\ntriggers:\n  - kind: webhook\n    path: /report\n  - kind: schedule\n    cron: \"0 9 * * MON\"\n    timezone: Europe/Paris\n    overlap: skip\nroutines:\n  - ref: \"@agentik/routines-standard/daily\"\nsteps:",
        1,
    );
    std::fs::write(&wf, &text).unwrap();
    let (code, diags) = validate(&dir, ".workflows/pricing-snapshot-brief/WORKFLOW.md");
    assert_eq!(code, 2, "{diags}");
    assert!(diags.contains(" webhooks-disabled: webhook triggers need the daemon's webhook listener: set `[daemon] webhooks = \"127.0.0.1:8787\"` in agent.toml"), "{diags}");
    assert!(
        diags.contains(" routine-ref: routine `ref:` needs a routine registry"),
        "{diags}"
    );
    assert!(!diags.contains("unsupported-trigger"), "{diags}");

    std::fs::write(
        &wf,
        text.replace(
            "routines:\n  - ref: \"@agentik/routines-standard/daily\"\n",
            "",
        ),
    )
    .unwrap();
    let toml = std::fs::read_to_string(dir.join("agent.toml")).unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!("{toml}\n[daemon]\nwebhooks = \"127.0.0.1:8787\"\n"),
    )
    .unwrap();
    let (code, diags) = validate(&dir, ".workflows/pricing-snapshot-brief/WORKFLOW.md");
    assert_eq!((code, diags.as_str()), (0, ""));
    let o = agentfile(
        &dir,
        &[
            "inspect",
            ".workflows/pricing-snapshot-brief/WORKFLOW.md",
            "--format",
            "json",
        ],
    );
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &plan["triggers"];
    assert_eq!(t[0]["id"], "pricing-snapshot-brief#0");
    assert_eq!(t[0]["kind"], "webhook");
    assert_eq!(t[0]["webhook"]["secret_env"], "AGENTFILE_WEBHOOK_SECRET");
    assert_eq!(t[1]["schedule"]["timezone"], "Europe/Paris");
    assert_eq!(t[1]["policy"]["overlap"], "skip");
    let _ = std::fs::remove_dir_all(&dir);
}
