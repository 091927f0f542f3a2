//! Issue 30 items 7 and 8: what a JavaScript tool's host calls may reach.
//! Item 7: `env()` reads only what the bash tool's environment holds (an
//! allowlist, never a secret-named or configured key variable), and each call
//! is an event. Item 8: the agent's `abilities` judge every host call by what
//! it does (`tool("read")` is `fs`, `tool("bash")` is `sh`), and `sh:` rules
//! hold for every command of the parsed line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};

use crate::hardening::limited;
use crate::support::{fake, result_of, text};

const DEADLINE: Duration = Duration::from_secs(60);

fn tmp(name: &str) -> PathBuf {
    crate::support::tmp("hardening-host", name)
}

/// `agent.toml` in `dir` at the fake model, the provider key in `key_var`.
fn config(dir: &Path, server: &FakeServer, key_var: &str) {
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"{key_var}\"\n",
            server.base_url()
        ),
    )
    .unwrap();
}

/// `agentfile run FILE --output json` in `dir` under the suite's limits.
fn run(dir: &Path, file: &str, env: &[(&str, &str)]) -> std::process::Output {
    limited::run(
        dir,
        &[
            "run",
            file,
            "--input",
            "task=use the tools",
            "--output",
            "json",
        ],
        env,
        b"",
        DEADLINE,
    )
}

/// The session's stored events, read back under the suite's limits.
fn events(dir: &Path, session: &str) -> Vec<Value> {
    let o = limited::run(
        dir,
        &["sessions", "show", session, "--format", "json"],
        &[],
        b"",
        DEADLINE,
    );
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    v["events"].as_array().unwrap().clone()
}

/// The content of the tool result for the model's call of `tool`.
fn tool_result(evs: &[Value], tool: &str) -> String {
    evs.iter()
        .find(|e| e["type"] == "tool_result" && e["data"]["tool"] == tool)
        .and_then(|e| e["data"]["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {tool}: {evs:#?}"))
        .to_owned()
}

// ---------------------------------------------------------------------------
// Item 7: env()

const ENV_AGENT: &str = r#"---
title: Peeker
abilities:
  allow: [env]
---

## System
You read variables.

## Tools
```js
return {
  peek: {
    fn: ({ names }) => {
      const out = {};
      for (const n of names) {
        try { out[n] = { value: env(n) }; } catch (e) { out[n] = { refused: String(e && e.message || e) }; }
      }
      return JSON.stringify(out);
    },
    scheme: { name: "peek", description: "Reads variables",
      parameters: { type: "object", properties: { names: { type: "array", items: { type: "string" } } }, required: ["names"] } }
  },
};
```
"#;

/// Variables named like secrets (and the configured provider key), each with
/// a value that must never come back or be stored.
const SECRETS: &[(&str, &str)] = &[
    ("GITHUB_PAT", "ghp_leak_github_pat_0001"),
    ("DATABASE_URL", "postgres://u:leak_db_url_0002@db/x"),
    ("DB_PASS", "leak_db_pass_0003"),
    ("MYSQL_PWD", "leak_mysql_pwd_0004"),
    ("GPG_PASSPHRASE", "leak_gpg_passphrase_0005"),
    (
        "SLACK_WEBHOOK_URL",
        "https://hooks.slack.com/leak_webhook_0006",
    ),
    (
        "AGENTFILE_DATABASE_URL",
        "postgres://u:leak_af_db_0007@db/x",
    ),
    ("LLM_PAT", "leak-provider-key-0008"),
];

#[test]
fn item_07_env_never_returns_a_secret_and_every_call_is_an_event() {
    let dir = tmp("env");
    std::fs::write(dir.join("peek.agent.md"), ENV_AGENT).unwrap();
    let mut names: Vec<&str> = SECRETS.iter().map(|(k, _)| *k).collect();
    names.extend(["LANG", "FOO_SETTING", "LC_AGENTFILE_UNSET"]);
    let server = fake(vec![
        FakeReply::tool_call("peek", json!({ "names": names })),
        FakeReply::text("Done."),
    ]);
    // The provider key is `LLM_PAT`: the one the run itself uses.
    config(&dir, &server, "LLM_PAT");
    let mut env: Vec<(&str, &str)> = SECRETS.to_vec();
    env.push(("LANG", "C.UTF-8"));
    env.push(("FOO_SETTING", "harmless-foo-0009"));
    let o = run(&dir, "peek.agent.md", &env);
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r:#}\n{}", text(&o));
    let evs = events(&dir, r["session_id"].as_str().unwrap());
    let peek: Value = serde_json::from_str(&tool_result(&evs, "peek")).unwrap();

    for (name, _) in SECRETS {
        let got = &peek[*name];
        assert!(
            got["refused"].is_string(),
            "env({name}) was not refused: {got}"
        );
    }
    // The configured key variable says why.
    assert!(
        peek["LLM_PAT"]["refused"]
            .as_str()
            .unwrap()
            .contains("api_key_env"),
        "{peek:#}"
    );
    // A variable bash is given comes back as bash sees it; one bash is not
    // given does not (the same allowlist), and says which variables are.
    assert_eq!(peek["LANG"]["value"], "C.UTF-8", "{peek:#}");
    let foo = peek["FOO_SETTING"]["refused"]
        .as_str()
        .unwrap_or_else(|| panic!("{peek:#}"));
    assert!(foo.contains("LANG"), "{foo}");
    // One bash would be given, unset: null.
    assert!(
        peek["LC_AGENTFILE_UNSET"]
            .get("value")
            .is_some_and(Value::is_null),
        "{peek:#}"
    );

    // Every env call is recorded: a tool_call each, a policy_denied for each
    // refusal, a tool_result with the value for LANG.
    let calls: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "tool_call" && e["data"]["tool"] == "env")
        .collect();
    assert_eq!(calls.len(), names.len(), "{evs:#?}");
    for (name, _) in SECRETS {
        assert!(
            evs.iter().any(|e| e["type"] == "policy_denied"
                && e["data"]["tool"] == "env"
                && e["data"]["reason"].as_str().unwrap_or("").contains(name)),
            "no policy_denied for env({name}): {evs:#?}"
        );
    }
    assert!(
        evs.iter().any(|e| e["type"] == "tool_result"
            && e["data"]["tool"] == "env"
            && e["data"]["content"] == "C.UTF-8"),
        "{evs:#?}"
    );

    // No secret value anywhere: not in the events, not sent to the model, not
    // on the output.
    let stored = serde_json::to_string(&evs).unwrap();
    let sent: String = server
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    for (name, value) in SECRETS {
        assert!(!stored.contains(value), "{name}'s value is in the events");
        assert!(
            !sent.contains(value),
            "{name}'s value was sent to the model"
        );
        assert!(!text(&o).contains(value), "{name}'s value was printed");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// Item 8: abilities

/// Every attempt in `calls` (JavaScript expressions), each caught: the result
/// maps the expression to `{ok}` or `{refused}`.
fn attack_agent(abilities: &str, calls: &[&str]) -> String {
    let list: Vec<String> = calls
        .iter()
        .map(|c| format!("    [{}, () => {c}],\n", serde_json::to_string(c).unwrap()))
        .collect();
    format!(
        r#"---
title: Attacker
abilities: {abilities}
---

## System
You try things.

## Tools
```js
const tries = [
{}];
return {{
  attack: {{
    fn: () => {{
      const out = {{}};
      for (const [what, f] of tries) {{
        try {{ out[what] = {{ ok: String(f()) }}; }} catch (e) {{ out[what] = {{ refused: String(e && e.message || e) }}; }}
      }}
      return JSON.stringify(out);
    }},
    scheme: {{ name: "attack", description: "Tries", parameters: {{ type: "object", properties: {{}} }} }}
  }},
}};
```
"#,
        list.concat()
    )
}

/// A policy that would let each attempt through: the abilities alone must
/// stop them.
const OPEN_POLICY: &str =
    "[bash]\nallowlist = [\"*\"]\n\n[web_fetch]\nallow_domains = [\"127.0.0.1\"]\n";

/// Run `agent` (with the open policy) in a fresh folder holding `victim.txt`;
/// the attack's result and the stored events.
fn attack(name: &str, agent: &str) -> (PathBuf, Value, Vec<Value>) {
    let dir = tmp(name);
    std::fs::write(dir.join("attack.agent.md"), agent).unwrap();
    std::fs::write(dir.join("policy.toml"), OPEN_POLICY).unwrap();
    std::fs::write(dir.join("victim.txt"), "keep me\n").unwrap();
    let server = fake(vec![
        FakeReply::tool_call("attack", json!({})),
        FakeReply::text("Done."),
    ]);
    config(&dir, &server, crate::support::KEY_VAR);
    let o = run(&dir, "attack.agent.md", &[]);
    let r = result_of(&o);
    assert_eq!(r["status"], "completed", "{r:#}\n{}", text(&o));
    let evs = events(&dir, r["session_id"].as_str().unwrap());
    let out: Value = serde_json::from_str(&tool_result(&evs, "attack"))
        .unwrap_or_else(|e| panic!("{e}: {evs:#?}"));
    (dir, out, evs)
}

/// Each of `calls` was refused by the abilities, with a `policy_denied` event
/// whose rule names them.
fn assert_refused_by_abilities(out: &Value, evs: &[Value], calls: &[&str]) {
    for c in calls {
        let got = &out[*c];
        let why = got["refused"]
            .as_str()
            .unwrap_or_else(|| panic!("`{c}` was not refused: {got}"));
        assert!(
            why.contains("abilities of"),
            "`{c}`: refused by something else: {why}"
        );
    }
    let by_abilities = evs
        .iter()
        .filter(|e| {
            e["type"] == "policy_denied"
                && e["data"]["rule"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("abilities of"))
        })
        .count();
    assert_eq!(by_abilities, calls.len(), "{evs:#?}");
}

#[test]
fn item_08_tool_calls_are_judged_by_what_the_tool_does() {
    let refused = [
        r#"tool("read", {path: "victim.txt"})"#,
        r#"tool("write", {path: "new.txt", content: "x"})"#,
        r#"tool("edit", {path: "victim.txt", old: "keep", new: "gone"})"#,
        r#"tool("grep", {pattern: "keep", path: "."})"#,
        r#"tool("glob", {pattern: "*.txt"})"#,
        r#"tool("ls", {path: "."})"#,
        r#"tool("READ", {path: "victim.txt"})"#,
        r#"tool("web_fetch", {url: "http://127.0.0.1:9/"})"#,
        r#"tool("bash", {command: "rm -f victim.txt"})"#,
        r#"read("victim.txt")"#,
        r#"fetch("http://127.0.0.1:9/")"#,
    ];
    let agent = attack_agent(
        r#"{allow: [sh, tool], deny: [fs, network, "sh:rm"]}"#,
        &refused,
    );
    let (dir, out, evs) = attack("tools", &agent);
    assert_refused_by_abilities(&out, &evs, &refused);
    assert!(!dir.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("victim.txt")).unwrap(),
        "keep me\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn item_08_sh_rules_hold_for_every_command_of_the_line() {
    let refused = [
        r#"sh("/bin/rm -f victim.txt")"#,
        r#"sh("command rm -f victim.txt")"#,
        r#"sh("env rm -f victim.txt")"#,
        r#"sh("echo victim.txt | xargs rm -f")"#,
        r#"sh("sudo rm -f victim.txt")"#,
        r#"sh("echo $(rm -f victim.txt)")"#,
        r#"sh("true && rm -f victim.txt")"#,
        r#"sh("ls; /usr/bin/rm -f victim.txt")"#,
        r#"sh("bash -c 'rm -f victim.txt'")"#,
        r#"sh("find . -name victim.txt -exec rm {} \\;")"#,
        r#"sh("timeout 5 rm -f victim.txt")"#,
        r#"sh("`echo rm` -f victim.txt")"#,
        r#"tool("bash", {command: "/bin/rm -f victim.txt"})"#,
    ];
    let mut calls: Vec<&str> = refused.to_vec();
    // The ability still allows what it does not deny.
    let allowed = r#"sh("echo still-allowed")"#;
    calls.push(allowed);
    let agent = attack_agent(r#"{allow: [sh, tool], deny: ["sh:rm"]}"#, &calls);
    let (dir, out, evs) = attack("sh", &agent);
    assert_refused_by_abilities(&out, &evs, &refused);
    assert!(
        out[allowed]["ok"]
            .as_str()
            .is_some_and(|s| s.contains("still-allowed")),
        "{out:#}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("victim.txt")).unwrap(),
        "keep me\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn item_08_an_sh_allow_list_holds_for_every_command_of_the_line() {
    // Only `echo` is allowed: a second command, a wrapper's inner command or
    // a runner's is not.
    let refused = [
        r#"sh("echo a; rm -f victim.txt")"#,
        r#"sh("echo $(rm -f victim.txt)")"#,
        r#"sh("sudo echo a")"#,
        r#"sh("env rm -f victim.txt")"#,
    ];
    let mut calls: Vec<&str> = refused.to_vec();
    let allowed = r#"sh("echo a && /bin/echo b")"#;
    calls.push(allowed);
    let agent = attack_agent(r#"{allow: ["sh:echo"]}"#, &calls);
    let (dir, out, evs) = attack("sh-allow", &agent);
    assert_refused_by_abilities(&out, &evs, &refused);
    assert!(out[allowed]["ok"].is_string(), "{out:#}");
    assert!(dir.join("victim.txt").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
