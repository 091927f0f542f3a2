//! The security corpus (`fixtures/policy/corpus.toml`) run against a real
//! workspace with symlinks pointing out of it: every attempt must be denied —
//! with a rule named, nothing run, no secret shown — and every allowed
//! counterpart must pass the gate (and, for bash, really run).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use agentfile_config::Config;
use agentfile_tools::policy::{Policy, Request};
use agentfile_tools::{MemoryStore, ToolContext, ToolSet, Toolbox, ToolboxOptions};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SECRET_ENV: &str = "SECRET-ENV-VALUE-7d1c";

#[derive(Debug, Deserialize)]
struct Corpus {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    category: String,
    #[serde(default = "bash")]
    tool: String,
    deny: String,
    allow: Option<String>,
}

fn bash() -> String {
    "bash".to_owned()
}

/// The temporary layout described at the top of corpus.toml.
struct Layout {
    root: PathBuf,
    ws: PathBuf,
    out: PathBuf,
    home: PathBuf,
}

impl Drop for Layout {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn layout() -> Layout {
    static N: AtomicUsize = AtomicUsize::new(0);
    let root = std::env::temp_dir().join(format!(
        "agentfile-corpus-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let ws = root.join("ws");
    let out = root.join("outside");
    let home = root.join("home");
    for d in [
        ws.join("src"),
        ws.join(".git/hooks"),
        out.join("victim"),
        home.join(".ssh"),
        home.join(".aws"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    let write = |p: PathBuf, s: &str| std::fs::write(p, s).unwrap();
    write(ws.join("notes.txt"), "hello notes\n");
    write(
        ws.join("src/main.rs"),
        "fn main() { println!(\"hello\"); }\n",
    );
    write(ws.join(".git/config"), "[core]\n");
    write(out.join("secret.txt"), "SECRET-OUTSIDE\n");
    write(home.join(".ssh/id_rsa"), "SECRET-SSH-KEY\n");
    write(home.join(".aws/credentials"), "SECRET-AWS\n");
    let link =
        |target: &Path, name: &str| std::os::unix::fs::symlink(target, ws.join(name)).unwrap();
    link(&out, "link_out");
    link(&home.join(".ssh/id_rsa"), "key_link");
    link(&out.join("PWNED-dangling"), "dangling");
    link(&ws.join("src"), "inner_link");
    Layout {
        root,
        ws,
        out,
        home,
    }
}

fn toolbox(l: &Layout) -> Toolbox {
    let policy_path = crate::repo().join("fixtures/policy/corpus-policy.toml");
    toolbox_with(l, Policy::from_file(&policy_path).unwrap())
}

fn toolbox_with(l: &Layout, policy: Policy) -> Toolbox {
    let memory = MemoryStore::open(&l.ws.join(".agentfile/sessions.db")).unwrap();
    let env = vec![
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("HOME".to_owned(), l.home.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("AGENTFILE_TEST_API_KEY".to_owned(), SECRET_ENV.to_owned()),
    ];
    let options = ToolboxOptions {
        home: Some(l.home.clone()),
        environment: Some(env),
        ..ToolboxOptions::default()
    };
    Toolbox::with_options(&Config::default(), policy, &l.ws, memory, options).unwrap()
}

fn ctx(l: &Layout) -> ToolContext {
    ToolContext {
        workspace: l.ws.clone(),
        agent_id: "corpus".to_owned(),
        cancel: CancellationToken::new(),
    }
}

fn fill(s: &str, l: &Layout) -> String {
    s.replace("%WS%", &l.ws.display().to_string())
        .replace("%OUT%", &l.out.display().to_string())
        .replace("%HOME%", &l.home.display().to_string())
}

fn args(tool: &str, main: &str) -> Value {
    match tool {
        "bash" => json!({"command": main}),
        "read" | "ls" => json!({"path": main}),
        "write" => json!({"path": main, "content": "PWNED\n"}),
        "edit" => json!({"path": main, "old": "no such text 9f2", "new": "x"}),
        "glob" => json!({"pattern": main}),
        "grep" => json!({"pattern": "SECRET|hello", "path": main}),
        "web_fetch" => json!({"url": main}),
        other => panic!("corpus tool {other} is not handled"),
    }
}

/// Judge a case: `Ok(rule)` when denied, `Err(output)` when it ran.
async fn attempt(tb: &Toolbox, l: &Layout, tool: &str, main: &str) -> Result<String, String> {
    if tool == "web_fetch" {
        // Judged by the gate alone: whatever the verdict, no test touches the
        // network beyond loopback.
        let url = url::Url::parse(main).map_err(|e| format!("bad URL in corpus: {e}"))?;
        return match tb.gate().check(&Request::Fetch { url: &url }) {
            Ok(_) => Err("allowed by the gate".to_owned()),
            Err(d) => Ok(d.rule),
        };
    }
    let r = tb.call(tool, args(tool, main), &ctx(l)).await;
    match r.denied {
        Some(d) => {
            assert!(
                r.output.is_error,
                "a denial must be an error output: {main:?}"
            );
            assert!(
                r.output.content.contains(&d.rule),
                "the output must name the rule: {}",
                r.output.content
            );
            assert!(
                !r.output.content.contains("SECRET-"),
                "a denial leaked a secret: {}",
                r.output.content
            );
            Ok(d.rule)
        }
        None => Err(r.output.content),
    }
}

fn find_markers(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with("PWNED") {
            found.push(p.clone());
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            find_markers(&p, found);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attempt_is_denied_and_every_counterpart_allowed() {
    let text = std::fs::read_to_string(crate::repo().join("fixtures/policy/corpus.toml")).unwrap();
    let corpus: Corpus = toml::from_str(&text).unwrap();
    let l = layout();
    let tb = toolbox(&l);

    let mut per_category: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &corpus.case {
        let deny = fill(&case.deny, &l);
        match attempt(&tb, &l, &case.tool, &deny).await {
            Ok(rule) => {
                // Shown with --nocapture: which rule stopped each attempt.
                eprintln!("[{}] {} {deny:?}\n    -> {rule}", case.category, case.tool);
                per_category.entry(case.category.clone()).or_default().0 += 1;
            }
            Err(out) => failures.push(format!(
                "NOT DENIED [{}] {} {deny:?}\n    output: {out}",
                case.category, case.tool
            )),
        }
        if let Some(allow) = &case.allow {
            let allow = fill(allow, &l);
            match attempt(&tb, &l, &case.tool, &allow).await {
                Err(out) => {
                    assert!(
                        !out.contains("SECRET-"),
                        "an allowed call showed a secret: {out}"
                    );
                    per_category.entry(case.category.clone()).or_default().1 += 1;
                }
                Ok(rule) => failures.push(format!(
                    "NOT ALLOWED [{}] {} {allow:?}\n    rule: {rule}",
                    case.category, case.tool
                )),
            }
        }
    }
    for (cat, (d, a)) in &per_category {
        eprintln!("{cat:>14}: {d:3} denied, {a:3} allowed counterparts");
    }
    assert!(
        failures.is_empty(),
        "{} corpus failures:\n{}",
        failures.len(),
        failures.join("\n")
    );

    let denied: usize = per_category.values().map(|(d, _)| d).sum();
    assert!(
        denied >= 150,
        "the corpus must hold at least 150 attempts, has {denied}"
    );
    for cat in [
        "chaining",
        "newlines",
        "substitution",
        "wrappers",
        "quoting",
        "globbing",
        "traversal",
        "absolute",
        "symlinks",
        "tilde",
        "unicode",
        "env",
        "redirections",
        "ssrf",
    ] {
        assert!(
            per_category.get(cat).is_some_and(|c| c.0 > 0),
            "no attempts in category {cat}"
        );
    }

    // Nothing denied ran.
    let mut markers = Vec::new();
    find_markers(&l.root, &mut markers);
    assert!(markers.is_empty(), "denied commands ran: {markers:?}");
    assert!(l.out.join("victim").is_dir(), "a denied rm ran");
    assert_eq!(
        std::fs::read_to_string(l.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(l.home.join(".ssh/id_rsa")).unwrap(),
        "SECRET-SSH-KEY\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_never_sees_secrets() {
    let l = layout();
    let tb = toolbox(&l);
    let r = tb
        .call(
            "bash",
            json!({"command": "echo \"[$AGENTFILE_TEST_API_KEY][$HOME][$PATH]\""}),
            &ctx(&l),
        )
        .await;
    assert!(r.denied.is_none(), "{:?}", r.denied);
    assert!(
        !r.output.content.contains(SECRET_ENV),
        "{}",
        r.output.content
    );
    assert!(
        r.output
            .content
            .contains(&format!("[][{}]", l.home.display())),
        "{}",
        r.output.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_never_show_what_read_cannot_read() {
    let l = layout();
    let tb = toolbox(&l);
    let c = ctx(&l);
    let ls = tb.call("ls", json!({"path": "."}), &c).await;
    let glob = tb.call("glob", json!({"pattern": "*"}), &c).await;
    let glob_all = tb
        .call(
            "glob",
            json!({"pattern": "**/*", "respect_gitignore": false}),
            &c,
        )
        .await;
    let grep = tb
        .call("grep", json!({"pattern": "SECRET", "path": "."}), &c)
        .await;
    for (name, r) in [
        ("ls", &ls),
        ("glob", &glob),
        ("glob **", &glob_all),
        ("grep", &grep),
    ] {
        assert!(r.denied.is_none(), "{name}: {:?}", r.denied);
        let out = &r.output.content;
        for hidden in ["key_link", "link_out", "dangling", ".agentfile", "SECRET-"] {
            assert!(!out.contains(hidden), "{name} listed {hidden}:\n{out}");
        }
    }
    assert!(
        ls.output.content.contains("notes.txt"),
        "{}",
        ls.output.content
    );
    assert!(
        ls.output.content.contains("inner_link/"),
        "{}",
        ls.output.content
    );
    assert!(
        glob.output.content.contains("notes.txt"),
        "{}",
        glob.output.content
    );
    assert!(
        glob_all.output.content.contains("src/main.rs"),
        "{}",
        glob_all.output.content
    );
    assert!(
        grep.output.content.starts_with("no matches"),
        "{}",
        grep.output.content
    );
}

#[derive(Debug, Deserialize)]
struct AllowLists {
    policy: Vec<AllowListPolicy>,
}

#[derive(Debug, Deserialize)]
struct AllowListPolicy {
    name: String,
    text: String,
    cases: Vec<AllowListCase>,
    #[serde(default)]
    servers_impossible: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct AllowListCase {
    tool: String,
    deny: String,
    allow: String,
    #[serde(default)]
    policy_extra: String,
}

fn judge(gate: &agentfile_tools::policy::Gate, tool: &str, arg: &str) -> Result<(), String> {
    use agentfile_tools::policy::Tool;
    let r = match tool {
        "bash" => gate.check(&Request::Bash { command: arg }),
        "web_fetch" => {
            let url = url::Url::parse(arg).map_err(|e| format!("bad URL in fixture: {e}"))?;
            gate.check(&Request::Fetch { url: &url })
        }
        "mcp" => {
            let (server, tool) = arg.split_once(':').ok_or("mcp case needs server:tool")?;
            gate.check(&Request::Mcp { server, tool })
        }
        other => {
            let tool = Tool::from_name(other).ok_or(format!("unknown tool {other}"))?;
            gate.check(&Request::Path { tool, path: arg })
        }
    };
    r.map(|_| ())
        .map_err(|d| format!("{}: {}", d.rule, d.reason))
}

#[test]
fn allow_lists_restrict_whatever_default_deny_says() {
    let text =
        std::fs::read_to_string(crate::repo().join("fixtures/policy/allow-lists.toml")).unwrap();
    let lists: AllowLists = toml::from_str(&text).unwrap();
    let l = layout();
    let mut failures = Vec::new();
    for p in &lists.policy {
        for top in ["", "default_deny = false\n", "default_deny = true\n"] {
            for case in &p.cases {
                let policy_text = fill(&format!("{top}{}{}", p.text, case.policy_extra), &l);
                let policy = Policy::parse(&policy_text, Path::new("allow-lists.toml"))
                    .unwrap_or_else(|e| panic!("{}: {e}", p.name));
                let gate = policy.bind(&l.ws, Some(&l.home)).unwrap();
                let what = format!("[{}] {:?} {}", p.name, top.trim(), case.tool);
                let deny = fill(&case.deny, &l);
                if judge(&gate, &case.tool, &deny).is_ok() {
                    failures.push(format!("NOT DENIED {what} {deny:?}"));
                }
                let allow = fill(&case.allow, &l);
                if let Err(why) = judge(&gate, &case.tool, &allow) {
                    failures.push(format!("NOT ALLOWED {what} {allow:?}: {why}"));
                }
                for server in &p.servers_impossible {
                    if gate.mcp_server_possible(server) {
                        failures.push(format!("SERVER POSSIBLE {what} {server}"));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_lists_by_its_own_rules() {
    let l = layout();
    // ls on the workspace and home, no [read] allow at all: ls must list what
    // its own section allows; read's deny of ~/.ssh still hides the key.
    let policy = Policy::parse(
        "default_deny = true\n[ls]\nallow = [\"$WORKSPACE/**\", \"~/**\"]\n[read]\ndeny = [\"~/.ssh/*\"]\n",
        Path::new("policy.toml"),
    )
    .unwrap();
    let tb = toolbox_with(&l, policy);
    let c = ctx(&l);
    let ws = tb.call("ls", json!({"path": "."}), &c).await;
    assert!(ws.denied.is_none(), "{:?}", ws.denied);
    let out = &ws.output.content;
    for shown in ["notes.txt", "src/", "inner_link/"] {
        assert!(out.contains(shown), "ls . did not show {shown}:\n{out}");
    }
    for hidden in ["link_out", "key_link", "dangling", ".agentfile"] {
        assert!(!out.contains(hidden), "ls . showed {hidden}:\n{out}");
    }
    let home = l.home.display().to_string();
    let h = tb.call("ls", json!({"path": home}), &c).await;
    assert!(h.output.content.contains(".ssh/"), "{}", h.output.content);
    let ssh = tb
        .call("ls", json!({"path": format!("{home}/.ssh")}), &c)
        .await;
    assert!(ssh.denied.is_none(), "{:?}", ssh.denied);
    assert!(
        !ssh.output.content.contains("id_rsa"),
        "{}",
        ssh.output.content
    );
    // read itself stays off: ls opened no door for it.
    let r = tb.call("read", json!({"path": "notes.txt"}), &c).await;
    assert!(r.denied.is_some(), "{}", r.output.content);
}
