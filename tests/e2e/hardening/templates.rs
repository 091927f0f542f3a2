//! Issue 30 items 4 (Handlebars templates abort), 6 (a large agentrc file
//! aborts `validate`), 15 (agentrc directives we support refused by default)
//! and 17 (`inspect --format json` of an agentrc file differs between the CLI
//! and JSON-RPC); with the property tests of the `.agent.md` template and
//! agentrc front ends, each bounded in time and memory.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use agentfile::agent_card::template;
use agentfile::frontend::{Options, analyze_bytes};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::hardening::limited;
use crate::support::{text, tmp};

const DEADLINE: Duration = Duration::from_secs(60);

fn ws(name: &str) -> PathBuf {
    tmp("hardening-templates", name)
}

/// The JSON-RPC request lines that open an MCP session, then `more`.
fn mcp_lines(more: &[Value]) -> Vec<u8> {
    let mut lines = vec![
        json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "hardening", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    lines.extend(more.iter().cloned());
    jsonl(&lines)
}

fn jsonl(lines: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        out.extend(serde_json::to_vec(l).unwrap());
        out.push(b'\n');
    }
    out
}

/// The reply to request `id` among the lines of `o`'s standard output.
fn reply(o: &Output, id: &Value) -> Value {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| &v["id"] == id)
        .unwrap_or_else(|| panic!("no reply to {id}:\n{}", text(o)))
}

// ── item 4: templates ───────────────────────────────────────────────────────

/// 86 bytes: a `## System` whose inline partial includes itself.
const RECURSIVE: &str =
    "---\ninput: x\n---\n# Rec\n\n## System\n{{#*inline \"p\"}}{{> p}}{{/inline}}{{> p}}\n";

/// Nine nested `#each` over ten items, each printing a line: 10⁹ lines.
fn nested_each() -> String {
    format!(
        "---\ninput: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n---\n# Loops\n\n## System\n{}{}{}\n",
        "{{#each @root.ctx.input}}".repeat(9),
        "x".repeat(1000),
        "{{/each}}".repeat(9)
    )
}

#[test]
fn item_04_a_recursive_partial_is_an_error_not_an_abort() {
    let dir = ws("rec");
    std::fs::write(dir.join("rec.agent.md"), RECURSIVE).unwrap();
    let o = limited::run(&dir, &["validate", "rec.agent.md"], &[], b"", DEADLINE);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("the partial `p` includes itself"),
        "{}",
        text(&o)
    );
}

#[test]
fn item_04_nested_each_is_an_error_not_a_4_gib_allocation() {
    let dir = ws("each");
    std::fs::write(dir.join("loops.agent.md"), nested_each()).unwrap();
    let started = Instant::now();
    let o = limited::run(&dir, &["validate", "loops.agent.md"], &[], b"", DEADLINE);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("renders more than 1 MiB") || t.contains("steps to render"),
        "{t}"
    );
    assert!(started.elapsed() < Duration::from_secs(20), "{t}");
}

#[test]
fn item_04_mcp_prompts_list_survives_both_templates() {
    let dir = ws("mcp");
    std::fs::write(dir.join("rec.agent.md"), RECURSIVE).unwrap();
    std::fs::write(dir.join("loops.agent.md"), nested_each()).unwrap();
    // A good agent beside them, whose command must still be listed.
    std::fs::write(
        dir.join("good.agent.md"),
        "---\ncommands:\n  - name: hello\n    description: Say hello\n    body: Say hello to $1.\n---\n# Good\n\n## System\nYou help with {{ctx.title}}.\n",
    )
    .unwrap();
    let input = mcp_lines(&[json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/list"})]);
    let o = limited::run(&dir, &["mcp", "--workspace", "."], &[], &input, DEADLINE);
    let r = reply(&o, &json!(2));
    let names: Vec<&str> = r["result"]["prompts"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"good.hello"), "{names:?}");
}

// ── item 6: a large agentrc file ────────────────────────────────────────────

/// Run the binary in `dir` under the suite's limits, returning its output
/// and its peak resident memory in KiB (`ru_maxrss` of `wait4`).
// The child is reaped by `wait4`, which `Child` does not know of.
#[allow(clippy::zombie_processes)]
fn run_measured(dir: &Path, args: &[&str], deadline: Duration) -> (Output, u64) {
    let mut c = limited::command(dir, args, &[]);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut b);
        b
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut b);
        b
    });
    let end = Instant::now() + deadline;
    let (status, rss) = loop {
        let mut status = 0;
        // SAFETY: plain FFI on our own child; `usage` is written by the call.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if got == pid {
            break (status, usage.ru_maxrss as u64);
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "agentfile {}: still running after {deadline:?}",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt;
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    };
    limited::assert_no_signal(&output, &format!("agentfile {}", args.join(" ")));
    (output, rss)
}

/// Peak memory of `validate` on `file` beyond what the binary takes on a
/// two-line file, in KiB.
fn validate_growth(dir: &Path, file: &str) -> (Output, u64) {
    std::fs::write(dir.join("Small"), "AGENT small\nAUDIT basic\n").unwrap();
    let (_, base) = run_measured(
        dir,
        &["validate", "Small", "--dialect", "agentrc"],
        DEADLINE,
    );
    let (o, peak) = run_measured(dir, &["validate", file, "--dialect", "agentrc"], DEADLINE);
    (o, peak.saturating_sub(base))
}

#[test]
fn item_06_many_cedar_policies_stay_within_a_bound() {
    let dir = ws("policies");
    let mut f =
        String::from("AGENT big\nAUDIT basic\nTOOL utcp:file_read\nMOUNT /workspace ro\nPOLICY\n");
    for i in 0..24_000 {
        f.push_str(&format!(
            "  permit(principal == AgentRC::Agent::\"big\", action == AgentRC::Action::\"tool.invoke\", resource == AgentRC::Tool::\"t{i}\");\n"
        ));
    }
    f.push_str("END\n");
    std::fs::write(dir.join("Agentfile"), &f).unwrap();
    let (o, grown) = validate_growth(&dir, "Agentfile");
    let input_kib = f.len() as u64 / 1024;
    // Was ~80× the file (a 50 MB file passed 4 GiB); now the input's copies
    // and at most 10,000 parsed policies.
    assert!(
        grown <= 8 * input_kib + 48 * 1024,
        "validate grew by {grown} KiB on a {input_kib} KiB file\n{}",
        text(&o)
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("more than 10000 policies"),
        "{}",
        text(&o)
    );
}

#[test]
fn item_06_many_directives_and_words_stay_within_a_bound() {
    let dir = ws("directives");
    let tools = "AGENT big\nAUDIT basic\nMOUNT /workspace ro\n".to_owned()
        + &"TOOL utcp:file_read\n".repeat(150_000);
    std::fs::write(dir.join("Tools"), &tools).unwrap();
    let words = format!("AGENT big\nAUDIT basic\nCMD {}\n", "a ".repeat(1_500_000));
    std::fs::write(dir.join("Words"), &words).unwrap();
    for (file, size, bound) in [
        ("Tools", tools.len(), "more than 10000 directives"),
        ("Words", words.len(), "more than 100000 words"),
    ] {
        let (o, grown) = validate_growth(&dir, file);
        let input_kib = size as u64 / 1024;
        assert!(
            grown <= 8 * input_kib + 32 * 1024,
            "{file}: validate grew by {grown} KiB on a {input_kib} KiB file\n{}",
            text(&o)
        );
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(bound), "{}", text(&o));
    }
}

// ── item 15: profiles on by default ─────────────────────────────────────────

/// Directives of four optional profiles, each implemented or checked.
const PROFILES: &str = "AGENT helper\nAUDIT basic\nTOOL utcp:file_read\nMOUNT /workspace ro\n\
RATELIMIT file_read 20/hour\nPLUGIN network\nHEALTHCHECK --interval=30s CMD utcp:ping\n\
SOP\n  Read before you write.\nEND\nPOLICY\n  permit(principal, action, resource);\nEND\n";

#[test]
fn item_15_optional_profiles_are_accepted_by_default() {
    let dir = ws("profiles");
    std::fs::write(dir.join("Agentfile"), PROFILES).unwrap();
    for cmd in ["validate", "inspect"] {
        let o = limited::run(&dir, &[cmd, "Agentfile"], &[], b"", DEADLINE);
        assert_eq!(o.status.code(), Some(0), "{cmd}: {}", text(&o));
        assert!(!text(&o).contains("agentrc-extension"), "{}", text(&o));
    }
}

#[test]
fn item_15_profile_core_refuses_them_unless_extensions_names_them() {
    let dir = ws("core");
    std::fs::write(dir.join("Agentfile"), PROFILES).unwrap();
    let o = limited::run(
        &dir,
        &["validate", "Agentfile", "--profile", "core"],
        &[],
        b"",
        DEADLINE,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    for d in ["RATELIMIT", "PLUGIN", "HEALTHCHECK", "SOP"] {
        assert!(
            t.contains(&format!("`{d}` belongs to the optional")),
            "{d}: {t}"
        );
    }
    assert!(t.contains("--profile core"), "{t}");
    for args in [
        &[
            "validate",
            "Agentfile",
            "--profile",
            "core",
            "--extensions",
            "all",
        ][..],
        &[
            "inspect",
            "Agentfile",
            "--profile",
            "core",
            "--extensions",
            "security,placement,observability,instruction",
        ],
    ] {
        let o = limited::run(&dir, args, &[], b"", DEADLINE);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
    }
}

#[test]
fn item_15_the_servers_take_the_same_profile_and_extensions() {
    let dir = ws("serve-profiles");
    std::fs::write(dir.join("Agentfile"), PROFILES).unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "validate", "params": {"path": "Agentfile"}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "validate",
               "params": {"path": "Agentfile", "profile": "core"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "validate",
               "params": {"path": "Agentfile", "profile": "core", "extensions": ["all"]}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "inspect",
               "params": {"path": "Agentfile", "profile": "core"}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "validate",
               "params": {"path": "Agentfile", "profile": "core", "extensions": ["plugins"]}}),
    ];
    let o = limited::run(&dir, &["serve"], &[], &jsonl(&requests), DEADLINE);
    let errors = |id: i64| reply(&o, &json!(id))["result"]["errors"].as_u64();
    assert_eq!(errors(1), Some(0), "{}", text(&o));
    assert_eq!(errors(2), Some(4), "{}", text(&o));
    assert_eq!(errors(3), Some(0), "{}", text(&o));
    assert!(reply(&o, &json!(4))["error"].is_object(), "{}", text(&o));
    let bad = reply(&o, &json!(5));
    assert!(
        bad["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`plugins`")),
        "{bad}"
    );
}

// ── item 17: one inspect answer ─────────────────────────────────────────────

#[test]
fn item_17_inspect_json_is_the_same_in_the_cli_and_over_json_rpc() {
    let dir = ws("inspect");
    std::fs::write(
        dir.join("Agentfile"),
        "AGENT helper\nAUDIT basic\nTOOL utcp:file_read\nMOUNT /workspace ro\nPOLICY\n  permit(principal, action, resource);\nEND\n",
    )
    .unwrap();
    let path = dir.join("Agentfile").display().to_string();
    let cli = limited::run(
        &dir,
        &["inspect", &path, "--format", "json"],
        &[],
        b"",
        DEADLINE,
    );
    assert_eq!(cli.status.code(), Some(0), "{}", text(&cli));
    let from_cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "inspect",
                         "params": {"path": path, "format": "json"}});
    let o = limited::run(&dir, &["serve"], &[], &jsonl(&[request]), DEADLINE);
    let from_rpc = reply(&o, &json!(1))["result"].clone();
    assert_eq!(from_cli, from_rpc);
    // Both parts: the plan a run executes, and the parse tree with grants.
    assert!(from_cli["graph"].is_object(), "{from_cli}");
    assert!(
        from_cli["agentrc"]["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("sha256:")),
        "{from_cli}"
    );
    assert!(from_cli["agentrc"]["directives"].is_array(), "{from_cli}");
}

// ── property tests: the `.agent.md` templates front end ─────────────────────

/// Leaves of a template: text, values, partial inclusions.
const TEMPLATE_LEAVES: &[&str] = &[
    "x",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "{{this}}",
    "{{ctx.input}}",
    "{{@index}}",
    "{{lookup ctx \"input\"}}",
    "{{> p}}",
    "{{> q}}",
    "{{> p x=1}}",
    "\n",
];

/// Now and then something malformed or refused.
const TEMPLATE_NOISE: &[&str] = &["{{> (lookup this \"p\")}}", "(", "{{", "{{#if}}", "{{/if}}"];

/// Well-formed templates (mostly): loops, conditions, inline partials and
/// partial blocks nested up to ten deep around the leaves, so that
/// recursive partials and deep loops over the data come up often.
fn template_source() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        12 => prop::sample::select(TEMPLATE_LEAVES).prop_map(str::to_owned),
        1 => prop::sample::select(TEMPLATE_NOISE).prop_map(str::to_owned),
    ];
    let node = leaf.prop_recursive(10, 96, 4, |inner| {
        let body = move || prop::collection::vec(inner.clone(), 0..4).prop_map(|v| v.concat());
        prop_oneof![
            3 => (
                prop::sample::select(&["@root.ctx.input", "../ctx.input", "ctx.input", "this"][..]),
                body()
            )
                .prop_map(|(p, b)| format!("{{{{#each {p}}}}}{b}{{{{/each}}}}")),
            1 => (body(), body()).prop_map(|(a, b)| format!("{{{{#if this}}}}{a}{{{{else}}}}{b}{{{{/if}}}}")),
            1 => body().prop_map(|b| format!("{{{{#with ctx}}}}{b}{{{{/with}}}}")),
            2 => (prop::sample::select(&["p", "q"][..]), body())
                .prop_map(|(n, b)| format!("{{{{#*inline \"{n}\"}}}}{b}{{{{/inline}}}}")),
            1 => body().prop_map(|b| format!("{{{{#> p}}}}{b}{{{{/p}}}}")),
            1 => (1usize..10, body()).prop_map(|(k, b)| format!(
                "{}{b}{}",
                "{{#each @root.ctx.input}}".repeat(k),
                "{{/each}}".repeat(k)
            )),
        ]
    });
    // Now and then the partials are defined up front, so that more of what
    // includes them renders.
    let prelude = prop::sample::select(
        &[
            "",
            "{{#*inline \"p\"}}p{{/inline}}{{#*inline \"q\"}}{{> p}}{{/inline}}",
        ][..],
    );
    (prelude, prop::collection::vec(node, 0..5)).prop_map(|(p, v)| format!("{p}{}", v.concat()))
}

/// The data a template renders over: ten items, the shape that made nine
/// nested loops 10⁹ iterations.
fn template_data() -> Value {
    json!({"ctx": {"input": (0..10).collect::<Vec<u32>>(), "title": "T"}})
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, max_shrink_iters: 64, .. ProptestConfig::default() })]

    /// Any template renders or fails with a reason, within its bounds and
    /// in bounded time: never an abort (which would take this process
    /// down), never more text than the bound.
    #[test]
    fn templates_render_within_their_bounds(src in template_source()) {
        let started = Instant::now();
        match template::render(&src, &template_data()) {
            Ok(out) => prop_assert!(out.len() <= template::MAX_OUTPUT),
            Err(f) => prop_assert!(!f.message.is_empty()),
        }
        prop_assert!(started.elapsed() < Duration::from_secs(10), "{:?} for {src}", started.elapsed());
    }

    /// The whole front end over such a template: a plan exactly when there
    /// are no errors.
    #[test]
    fn agent_files_with_any_template_never_panic(src in template_source()) {
        let file = format!("---\ninput: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n---\n# T\n\n## System\n{src}\n\n## Rules\n{src}\n");
        let path = std::env::temp_dir().join("agentfile-hardening-templates-prop").join("t.agent.md");
        let _ = std::fs::create_dir_all(path.parent().unwrap());
        let a = analyze_bytes(path, file.into_bytes(), Options::default());
        prop_assert_eq!(a.plan.is_some(), a.errors() == 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, max_shrink_iters: 8, .. ProptestConfig::default() })]

    /// A batch of generated agent files through the binary under 4 GiB:
    /// no abort, no timeout (item 4's files are among what it generates).
    #[test]
    fn agent_files_validate_under_the_memory_limit(srcs in prop::collection::vec(template_source(), 48)) {
        let dir = ws("prop-batch");
        let mut names = Vec::new();
        for (i, src) in srcs.iter().enumerate() {
            let name = format!("a{i}.agent.md");
            std::fs::write(
                dir.join(&name),
                format!("---\ninput: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n---\n# T\n\n## System\n{src}\n"),
            )
            .unwrap();
            names.push(name);
        }
        let mut args = vec!["validate"];
        args.extend(names.iter().map(String::as_str));
        let o = limited::run(&dir, &args, &[], b"", DEADLINE);
        prop_assert!(matches!(o.status.code(), Some(0 | 2)), "{}", text(&o));
    }
}

// ── property tests: the agentrc front end ───────────────────────────────────

const RC_LINES: &[&str] = &[
    "AGENT a\n",
    "AUDIT basic\n",
    "TOOL utcp:file_read\n",
    "MOUNT /workspace ro\n",
    "CMD a b c\n",
    "LABEL k=v k2=v2\n",
    "RATELIMIT file_read 20/hour\n",
    "HEALTHCHECK --interval=30s CMD utcp:ping\n",
    "ALLOW invoke utcp:file_read\n",
    "SOP\nbe careful\nEND\n",
    "CMD \\\n",
    "\n",
    "# comment\n",
    "garbage line\n",
    "POLICY\n",
];

const RC_POLICIES: &[&str] = &[
    "permit(principal, action, resource);\n",
    "forbid(principal, action == AgentRC::Action::\"filesystem.read\", resource) when { context.path like \"/w/*\" };\n",
    "permit(principal, action, resource) when { [1,2,3,4,5,6,7,8] == [] };\n",
    "permit(principal == AgentRC::Agent::\"a\", action == AgentRC::Action::\"tool.invoke\", resource == AgentRC::Tool::\"t\");\n",
    "permit(principal, action, resource) when { (((1))) };\n",
    "not cedar ;\n",
];

/// Runs of agentrc lines and of POLICY blocks, each repeated up to `max`
/// times: short files and long ones (item 6 was a long run of policies).
fn rc_source(max: usize) -> impl Strategy<Value = String> {
    let chunk = prop_oneof![
        (prop::sample::select(RC_LINES), 1..max).prop_map(|(l, n)| l.repeat(n)),
        (prop::sample::select(RC_POLICIES), 1..max)
            .prop_map(|(p, n)| format!("POLICY\n{}END\n", p.repeat(n))),
    ];
    prop::collection::vec(chunk, 0..8).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, max_shrink_iters: 64, .. ProptestConfig::default() })]

    /// In-process: never a panic, a plan exactly when there are no errors,
    /// whatever the profile.
    #[test]
    fn agentrc_sources_never_panic(src in rc_source(40), core in any::<bool>()) {
        let path = std::env::temp_dir().join("agentfile-hardening-rc-prop").join("Agentfile");
        let _ = std::fs::create_dir_all(path.parent().unwrap());
        let a = analyze_bytes(
            path,
            src.into_bytes(),
            Options {
                dialect: Some(agentfile::detect::Dialect::Agentrc),
                read: agentfile::plan::ReadOptions {
                    core_only: core,
                    ..Default::default()
                },
                ..Options::default()
            },
        );
        prop_assert_eq!(a.plan.is_some(), a.errors() == 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, max_shrink_iters: 8, .. ProptestConfig::default() })]

    /// Through the binary under 4 GiB, with long runs of lines: peak memory
    /// within a constant factor of the file (plus what the bounds allow),
    /// no abort, no timeout.
    #[test]
    fn long_agentrc_files_stay_within_a_bounded_memory(src in rc_source(20_000)) {
        let dir = ws("prop-rc");
        std::fs::write(dir.join("Agentfile"), &src).unwrap();
        let (o, grown) = validate_growth(&dir, "Agentfile");
        let input_kib = src.len() as u64 / 1024;
        prop_assert!(
            grown <= 8 * input_kib + 64 * 1024,
            "grew by {} KiB on a {} KiB file\n{}", grown, input_kib, text(&o)
        );
        prop_assert!(matches!(o.status.code(), Some(0 | 2)), "{}", text(&o));
    }
}

// ── issue 43, items 4 and 5: text from outside never becomes code ───────────

/// Values an attacker sends (a caller's input, a webhook body, a model's
/// answer): each would run a command, write a file or break the quoting if it
/// were pasted into the command line as written.
const HOSTILE: &[&str] = &[
    "x > injected.txt",
    "$(touch pwned-subst)",
    "`touch pwned-backquote`",
    "'; touch pwned-single; '",
    "\"; touch pwned-double; \"",
    "a\ntouch pwned-newline",
    "*",
];

/// No file the hostile values above would make exists in `dir`.
fn assert_nothing_injected(dir: &Path, o: &Output) {
    for f in [
        "injected.txt",
        "pwned-subst",
        "pwned-backquote",
        "pwned-single",
        "pwned-double",
        "pwned-newline",
    ] {
        assert!(!dir.join(f).exists(), "{f} was written:\n{}", text(o));
    }
}

/// A policy that lets `echo` and `cat` run (and nothing else), without the
/// kernel sandbox, which would not stop a write inside the workspace anyway:
/// only the quoting stands between the value and the shell.
const ECHO_POLICY: &str =
    "[bash]\nallowlist = [\"echo *\", \"cat\"]\n\n[sandbox]\nenabled = false\n";

/// A WORKFLOW.md whose bash steps print the input `topic`: bare, inside
/// `"…"` and inside `'…'`.
const ECHO_WORKFLOW: &str = "---\nname: Echo\nid: echo\ndescription: d\nversion: 1.0.0\ninputs:\n  type: object\n  properties: { topic: { type: string } }\n  required: [topic]\noutputs: { type: object }\nsteps:\n  - id: bare\n    kind: tool\n    tool: bash\n    inputs: { command: \"echo ${{ $input.topic }}\" }\n    next: double\n  - id: double\n    kind: tool\n    tool: bash\n    inputs: { command: 'echo \"about: ${{ $input.topic }}!\"' }\n    next: single\n  - id: single\n    kind: tool\n    tool: bash\n    inputs: { command: \"echo 'said: ${{ $input.topic }}'\" }\nresult:\n  bare: $steps.bare\n  double: $steps.double\n  single: $steps.single\n---\n";

fn echo_workspace(name: &str) -> PathBuf {
    let dir = ws(name);
    let w = dir.join(".workflows/echo");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("WORKFLOW.md"), ECHO_WORKFLOW).unwrap();
    std::fs::write(dir.join("policy.toml"), ECHO_POLICY).unwrap();
    dir
}

fn run_result(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not a result ({e}):\n{}", text(o)))
}

/// Issue 43 item 4: a bash step's `${{ }}` is one shell word. Each hostile
/// topic, given as `--input`, is printed as written by `echo` wherever it
/// stands in the command, and no file appears. (Before: `echo x >
/// injected.txt` wrote the file.)
#[test]
fn issue43_item_04_a_bash_step_prints_a_hostile_input_and_runs_nothing() {
    for (i, topic) in HOSTILE.iter().enumerate() {
        let dir = echo_workspace(&format!("echo-{i}"));
        let arg = format!("topic={topic}");
        let o = limited::run(
            &dir,
            &[
                "run",
                ".workflows/echo",
                "--output",
                "json",
                "--input",
                &arg,
            ],
            &[],
            b"",
            DEADLINE,
        );
        assert_eq!(o.status.code(), Some(0), "{topic:?}: {}", text(&o));
        let r = run_result(&o);
        assert_eq!(r["outputs"]["bare"], json!(topic), "{topic:?}: {r}");
        assert_eq!(
            r["outputs"]["double"],
            json!(format!("about: {topic}!")),
            "{topic:?}: {r}"
        );
        assert_eq!(
            r["outputs"]["single"],
            json!(format!("said: {topic}")),
            "{topic:?}: {r}"
        );
        assert_nothing_injected(&dir, &o);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The same through JSON-RPC, as a program (or a webhook relay) would send
/// it: the inputs object is the attacker's.
#[test]
fn issue43_item_04_a_json_rpc_caller_cannot_inject_through_inputs() {
    let dir = echo_workspace("echo-rpc");
    let path = dir.join(".workflows/echo").display().to_string();
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "run",
                         "params": {"path": path, "inputs": {"topic": "x > injected.txt"}}});
    let o = limited::run(&dir, &["serve"], &[], &jsonl(&[request]), DEADLINE);
    let r = reply(&o, &json!(1));
    assert_eq!(r["result"]["status"], "completed", "{r}\n{}", text(&o));
    assert_eq!(r["result"]["outputs"]["bare"], "x > injected.txt", "{r}");
    assert_nothing_injected(&dir, &o);
}

/// `${{ raw(…) }}` is the one way to splice a value as shell code: `validate`
/// warns, and the splice does what it says.
#[test]
fn issue43_item_04_raw_splices_on_purpose_and_validate_warns() {
    let dir = ws("raw");
    let w = dir.join(".workflows/raw");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(
        w.join("WORKFLOW.md"),
        ECHO_WORKFLOW.replace("id: echo", "id: raw").replace(
            "\"echo ${{ $input.topic }}\"",
            "\"echo ${{ raw($input.topic) }}\"",
        ),
    )
    .unwrap();
    std::fs::write(dir.join("policy.toml"), ECHO_POLICY).unwrap();
    let o = limited::run(&dir, &["validate", ".workflows/raw"], &[], b"", DEADLINE);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("warning: `${{ raw($input.topic) }}` splices its value into the `bash` command as shell code"), "{out}");
    let o = limited::run(
        &dir,
        &[
            "run",
            ".workflows/raw",
            "--output",
            "json",
            "--input",
            "topic=spliced > injected.txt",
        ],
        &[],
        b"",
        DEADLINE,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dir.join("injected.txt").exists(), "{}", text(&o));
}

/// A heredoc's body is a place no quoting keeps a value literal: `validate`
/// and `run` refuse the workflow before anything runs.
#[test]
fn issue43_item_04_a_value_in_a_heredoc_is_refused_before_the_run() {
    let dir = ws("heredoc");
    let w = dir.join(".workflows/echo");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(
        w.join("WORKFLOW.md"),
        ECHO_WORKFLOW.replace(
            "\"echo ${{ $input.topic }}\"",
            "\"cat <<EOF\\n${{ $input.topic }}\\nEOF\"",
        ),
    )
    .unwrap();
    std::fs::write(dir.join("policy.toml"), ECHO_POLICY).unwrap();
    let o = limited::run(
        &dir,
        &[
            "run",
            ".workflows/echo",
            "--input",
            "topic=$(touch pwned-subst)",
        ],
        &[],
        b"",
        DEADLINE,
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("error: `${{ $input.topic }}` stands inside a heredoc's body"),
        "{out}"
    );
    assert_nothing_injected(&dir, &o);
}

/// A bound command gets its inputs as JSON on stdin and its argv from the
/// config: a hostile input is data (`cat` prints it back) and runs nothing.
#[test]
fn issue43_item_04_a_bound_command_gets_a_hostile_input_as_data() {
    let dir = ws("command");
    let w = dir.join(".workflows/say");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(
        w.join("WORKFLOW.md"),
        "---\nname: Say\nid: say\ndescription: d\nversion: 1.0.0\ninputs:\n  type: object\n  properties: { topic: { type: string } }\n  required: [topic]\noutputs: { type: object }\nsteps:\n  - id: say\n    kind: tool\n    tool: say\n    inputs: { topic: $input.topic, line: \"about ${{ $input.topic }}\" }\n---\n",
    )
    .unwrap();
    std::fs::write(dir.join("agent.toml"), "[tools.say]\ncommand = [\"cat\"]\n").unwrap();
    std::fs::write(dir.join("policy.toml"), ECHO_POLICY).unwrap();
    for (i, topic) in HOSTILE.iter().enumerate() {
        let arg = format!("topic={topic}");
        let o = limited::run(
            &dir,
            &["run", ".workflows/say", "--output", "json", "--input", &arg],
            &[],
            b"",
            DEADLINE,
        );
        assert_eq!(o.status.code(), Some(0), "{i} {topic:?}: {}", text(&o));
        let r = run_result(&o);
        assert_eq!(r["outputs"]["topic"], json!(topic), "{r}");
        assert_eq!(r["outputs"]["line"], json!(format!("about {topic}")), "{r}");
        assert_nothing_injected(&dir, &o);
    }
}

/// A workflow.yaml shell step gets its trigger input as an environment
/// variable, never in its command line: a hostile value is printed.
#[test]
fn issue43_item_04_a_workflow_yaml_shell_step_gets_a_hostile_input_as_data() {
    let dir = ws("wy-shell");
    let w = dir.join("workflows/say");
    std::fs::create_dir_all(w.join("scripts")).unwrap();
    std::fs::write(
        w.join("workflow.yaml"),
        "specVersion: \"1.0\"\nname: say\nversion: 1.0.0\ndescription: Say the topic.\ntrigger:\n  type: command\n  input_var: TOPIC\nsteps:\n  - id: say\n    name: Say\n    action: shell\n    script:\n      bash: scripts/say.sh\n    goal: Print the topic.\n",
    )
    .unwrap();
    std::fs::write(w.join("scripts/say.sh"), "echo \"said: $TOPIC\"\n").unwrap();
    std::fs::write(dir.join("policy.toml"), ECHO_POLICY).unwrap();
    for (i, topic) in HOSTILE.iter().enumerate() {
        let arg = format!("TOPIC={topic}");
        let o = limited::run(
            &dir,
            &["run", "workflows/say", "--output", "json", "--input", &arg],
            &[],
            b"",
            DEADLINE,
        );
        assert_eq!(o.status.code(), Some(0), "{i} {topic:?}: {}", text(&o));
        let session = run_result(&o)["session_id"].as_str().unwrap().to_owned();
        let shown = limited::run(
            &dir,
            &["sessions", "show", &session, "--format", "json"],
            &[],
            b"",
            DEADLINE,
        );
        let v: Value = serde_json::from_slice(&shown.stdout).unwrap();
        let said = v["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "tool_result" && e["data"]["tool"] == "shell")
            .and_then(|e| e["data"]["content"].as_str())
            .unwrap_or_else(|| panic!("no shell result: {v}"))
            .to_owned();
        assert!(
            said.contains(&format!("said: {topic}")),
            "{topic:?}: {said}"
        );
        assert_nothing_injected(&dir, &o);
        assert_nothing_injected(&w, &o);
    }
}

/// Issue 43 item 5: the issue's own workflow. `prompt: "Brief these notes:
/// $steps.readit"` would send the model the characters `$steps.readit`, and
/// `notes: $steps.readit` would be dropped: `validate` refuses the first at
/// the path with the `${{ }}` spelling, warns about the second naming the
/// step, the input and what `agent` reads, and `run` starts nothing.
#[test]
fn issue43_item_05_a_bare_reference_in_a_prompt_is_an_error_and_an_unread_input_a_warning() {
    let dir = ws("bare");
    let w = dir.join(".workflows/brief");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(dir.join("notes.md"), "the notes").unwrap();
    std::fs::write(
        w.join("WORKFLOW.md"),
        "---\nname: Brief\nid: brief\ndescription: d\nversion: 1.0.0\ninputs: { type: object }\noutputs: { type: object }\nsteps:\n  - id: readit\n    kind: tool\n    tool: read\n    inputs: { path: notes.md }\n    next: brief\n  - id: brief\n    kind: tool\n    tool: agent\n    inputs:\n      prompt: \"Brief these notes: $steps.readit\"\n      notes: $steps.readit\n---\n",
    )
    .unwrap();
    let o = limited::run(
        &dir,
        &["validate", ".workflows/brief", "--format", "json"],
        &[],
        b"",
        DEADLINE,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let diags: Vec<&Value> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["diagnostics"].as_array().unwrap())
        .collect();
    let bare = diags
        .iter()
        .find(|d| d["code"] == "bare-reference")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(bare["severity"], "error", "{bare}");
    assert_eq!(
        (bare["line"].clone(), bare["column"].clone()),
        (json!(18), json!(35)),
        "{bare}"
    );
    assert!(
        bare["hint"]
            .as_str()
            .unwrap()
            .contains("did you mean `${{ $steps.readit }}`?"),
        "{bare}"
    );
    let unread = diags
        .iter()
        .find(|d| d["code"] == "unread-input")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(unread["severity"], "warning", "{unread}");
    assert_eq!(
        unread["message"],
        "step `brief` gives `agent` the input `notes`, which it does not read: `agent` reads `prompt`, `agent`",
        "{unread}"
    );
    assert!(
        unread["hint"]
            .as_str()
            .unwrap()
            .contains("${{ $steps.readit }}"),
        "{unread}"
    );
    // No model is configured: a run that got past validation would fail for
    // want of one, not with exit 2 and the diagnostic.
    let o = limited::run(&dir, &["run", ".workflows/brief"], &[], b"", DEADLINE);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("`$steps.readit` inside text is not interpolated"),
        "{}",
        text(&o)
    );
}
