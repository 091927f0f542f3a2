//! Workflows as signed OCI packages (CONTRACT §20), against a real registry
//! on loopback (Debian's `docker-registry`) and read back by outside tools
//! (`skopeo`, and `tests/oci/verify_cosign.py`, cosign's keyed verification
//! written independently of us).
//!
//! Without `docker-registry` the registry tests print `SKIPPED: …` and pass;
//! `scripts/test.sh` installs it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::registry;
use crate::support::{self, Dir, agentfile, text};

/// The agentrc example in `dir/src`, with its tests left behind.
fn project(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    support::copy_dir(&support::repo().join("examples/agentrc"), &src, &["tests"]);
    src
}

/// A folder to run packages in: the example's workspace files and a config
/// whose `[packages]` keeps its own cache and speaks plain HTTP to loopback.
fn runner(dir: &Path, name: &str, packages: &str) -> PathBuf {
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    for f in ["notes.txt", "model.json"] {
        std::fs::copy(
            support::repo().join("examples/agentrc").join(f),
            run.join(f),
        )
        .unwrap();
    }
    std::fs::write(
        run.join("agent.toml"),
        format!("[agent]\nworkspace = \".\"\n\n[packages]\nplain_http = true\ncache = \"cache\"\n{packages}"),
    )
    .unwrap();
    run
}

const TASK: &str = "task=What does notes.txt say?";

/// `agentfile run WORKFLOW` on the example's scripted model, as JSON.
fn run_json(dir: &Path, workflow: &str) -> std::process::Output {
    agentfile(
        dir,
        &[
            "run",
            workflow,
            "--provider",
            "fake",
            "--script",
            "model.json",
            "--input",
            TASK,
            "--output",
            "json",
        ],
        &[],
    )
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

fn digest_of_pinned(pinned: &str) -> String {
    pinned.rsplit_once('@').expect("REF@sha256:…").1.to_owned()
}

#[test]
fn pack_gives_the_same_digest_in_two_folders_and_another_for_one_changed_byte() {
    let dir = Dir::new("package-pack");
    let a = project(&dir.path().join("a"));
    let b = project(&dir.path().join("b"));
    let pack = |p: &Path| {
        let o = agentfile(
            dir.path(),
            &["pack", p.to_str().unwrap(), "--format", "json"],
            &[],
        );
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let first = pack(&a);
    assert_eq!(
        first["digest"],
        pack(&b)["digest"],
        "the same files, another folder"
    );
    assert_eq!(
        first["artifactType"],
        "application/vnd.agentfile.workflow.v1+json"
    );
    let files: Vec<&str> = first["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"Agentfile") && files.contains(&"notes.txt"),
        "{files:?}"
    );
    assert!(
        !files.contains(&"agent.toml"),
        "the runner's config stays out: {files:?}"
    );
    // A run's store, a hidden folder, is left out: packing after a run
    // gives the same digest.
    std::fs::create_dir_all(a.join(".agentfile")).unwrap();
    std::fs::write(a.join(".agentfile/sessions.db"), "x").unwrap();
    assert_eq!(first["digest"], pack(&a)["digest"]);
    // Placement stays out of the digest (CONTRACT §12).
    let agentfile_path = b.join("Agentfile");
    let original = std::fs::read_to_string(&agentfile_path).unwrap();
    std::fs::write(
        &agentfile_path,
        original.replace("AUDIT all\n", "AUDIT all\nISOLATION microvm\n"),
    )
    .unwrap();
    assert_eq!(
        first["digest"],
        pack(&b)["digest"],
        "a placement directive added"
    );
    std::fs::write(b.join("notes.txt"), {
        let mut t = std::fs::read(a.join("notes.txt")).unwrap();
        t[0] ^= 1;
        t
    })
    .unwrap();
    assert_ne!(first["digest"], pack(&b)["digest"], "one changed byte");
    // -o writes an OCI image layout archive holding the same manifest.
    let archive = dir.path().join("agentrc.tar");
    let o = agentfile(
        dir.path(),
        &["pack", a.to_str().unwrap(), "-o", archive.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(stdout(&o), first["digest"].as_str().unwrap());
    let bytes = std::fs::read(&archive).unwrap();
    let hex = first["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:");
    let names = String::from_utf8_lossy(&bytes);
    assert!(names.contains("oci-layout") && names.contains(&format!("blobs/sha256/{hex}")));
}

#[test]
fn a_file_outside_the_folder_is_refused_by_pack() {
    let dir = Dir::new("package-outside");
    let src = dir.path().join("wf");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(dir.path().join("shared.md"), "You review.").unwrap();
    std::fs::write(
        src.join("Agentfile"),
        "NAME outside\nAGENT a FROM ../shared.md\nGOAL g \"Review\" USING a\nRUN main USING g\n",
    )
    .unwrap();
    let o = agentfile(dir.path(), &["pack", "wf"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("outside the package's folder"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_pushed_package_is_pulled_and_run_by_digest_with_the_folders_outputs() {
    let Some(reg) = registry::registry() else {
        return;
    };
    let dir = Dir::new("package-push");
    let src = project(dir.path());
    let folder = run_json(&src, "Agentfile");
    assert!(folder.status.success(), "{}", text(&folder));
    let folder = support::result_of(&folder);
    std::fs::remove_dir_all(src.join(".agentfile")).unwrap();

    let reference = format!("{}/team/notes:1.0", reg.host());
    let o = agentfile(
        dir.path(),
        &["push", "src", &reference, "--plain-http"],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let pinned = stdout(&o);
    assert!(
        pinned.starts_with(&format!("{reference}@sha256:")),
        "{pinned}"
    );
    let digest = digest_of_pinned(&pinned);

    if let Some(skopeo) = registry::skopeo() {
        let raw = reg.skopeo_inspect_raw(&skopeo, "team/notes:1.0");
        assert!(raw.status.success(), "{}", text(&raw));
        let manifest: Value = serde_json::from_slice(&raw.stdout).unwrap();
        assert_eq!(
            manifest["artifactType"],
            "application/vnd.agentfile.workflow.v1+json"
        );
        assert_eq!(agentfile::package::digest_of(&raw.stdout), digest);
    }

    let run = runner(dir.path(), "run", "");
    let o = agentfile(&run, &["pull", &reference], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(stdout(&o), pinned);
    let by_digest = format!("oci://{}/team/notes@{digest}", reg.host());
    let o = run_json(&run, &by_digest);
    assert!(o.status.success(), "{}", text(&o));
    let packaged = support::result_of(&o);
    assert_eq!(packaged["outputs"], folder["outputs"], "{packaged}");
    let session = packaged["session_id"].as_str().unwrap();
    let events = support::events(&run, session);
    let started = &events[0]["data"];
    assert_eq!(started["package"]["digest"], digest.as_str(), "{started}");
    assert_eq!(
        started["package"]["ref"],
        format!("{}/team/notes@{digest}", reg.host()),
        "{started}"
    );
    // The web view names the package and the digest that ran.
    let snap = ui_snapshot(&run, session);
    assert_eq!(snap["package"]["digest"], digest.as_str(), "{snap}");
    assert!(
        snap["events"].to_string().contains(&digest),
        "the run line: {snap}"
    );
    // The tools ran in the runner's workspace, not in the cache.
    assert_eq!(
        events[0]["data"]["workspace"],
        run.canonicalize().unwrap().display().to_string()
    );

    // A test file may name the package: its cases record and replay.
    std::fs::write(
        run.join("notes.test.yaml"),
        format!(
            "workflow: {by_digest}\ncases:\n  - name: reads the notes\n    inputs: {{ task: \"What does notes.txt say?\" }}\n    cassette: notes.cassette.jsonl\n    expect:\n      status: completed\n"
        ),
    )
    .unwrap();
    let o = agentfile(
        &run,
        &[
            "test",
            "notes.test.yaml",
            "--record",
            "--provider",
            "fake",
            "--script",
            "model.json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = agentfile(&run, &["test", "notes.test.yaml"], &[]);
    assert!(o.status.success(), "{}", text(&o));

    // By digest, a cached package needs no registry.
    drop(reg);
    let o = run_json(&run, &by_digest);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(support::result_of(&o)["outputs"], folder["outputs"]);
    let o = agentfile(&run, &["validate", &by_digest], &[]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn signatures_are_checked_and_an_untrusted_package_never_runs() {
    let Some(reg) = registry::registry() else {
        return;
    };
    let dir = Dir::new("package-sign");
    project(dir.path());
    let host = reg.host();
    let o = agentfile(dir.path(), &["keygen", "team"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = agentfile(dir.path(), &["keygen", "other"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let key = dir.path().join("team.pub");

    let reference = format!("{host}/team/notes:1.0");
    let o = agentfile(
        dir.path(),
        &["push", "src", &reference, "--plain-http"],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let digest = digest_of_pinned(&stdout(&o));
    let verify = |k: &str| {
        agentfile(
            dir.path(),
            &["verify", &reference, "--key", k, "--plain-http"],
            &[],
        )
    };

    let o = verify("team.pub");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("is not signed"), "{}", text(&o));

    let o = agentfile(
        dir.path(),
        &["sign", &reference, "--key", "team.key", "--plain-http"],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = verify("team.pub");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("verified: signed by team.pub"),
        "{}",
        text(&o)
    );
    let o = verify("other.pub");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("none by a trusted key"), "{}", text(&o));
    if let Some(py) = registry::cosign_verify_py() {
        let o = registry::verify_cosign(&py, &host, "team/notes", &digest, &key);
        assert!(o.status.success(), "the independent verifier: {}", text(&o));
        assert_eq!(stdout(&o), "verified");
    }

    // Required signatures: the signed package runs, an unsigned one is
    // refused before anything runs.
    let trusted = format!(
        "require_signature = true\ntrusted_keys = [\"{}\"]\n",
        key.display()
    );
    let run = runner(dir.path(), "run", &trusted);
    let o = run_json(&run, &format!("oci://{reference}"));
    assert!(o.status.success(), "{}", text(&o));
    let session = support::result_of(&o)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let started = support::events(&run, &session)[0]["data"].clone();
    assert_eq!(
        started["package"]["signed_by"],
        key.display().to_string(),
        "{started}"
    );

    // Signed, but by a key this runner does not trust: refused.
    let other = runner(
        dir.path(),
        "other",
        &format!(
            "require_signature = true\ntrusted_keys = [\"{}\"]\n",
            dir.path().join("other.pub").display()
        ),
    );
    let o = run_json(&other, &format!("oci://{reference}"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("none by a trusted key"), "{}", text(&o));
    assert!(!other.join(".agentfile").exists(), "nothing ran");

    let unsigned = format!("{host}/team/unsigned:1.0");
    let o = agentfile(dir.path(), &["push", "src", &unsigned, "--plain-http"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let strict = runner(dir.path(), "strict", &trusted);
    let o = run_json(&strict, &format!("oci://{unsigned}"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is not signed"), "{}", text(&o));
    assert!(
        !strict.join(".agentfile").exists(),
        "nothing ran, nothing stored"
    );

    // The servers refuse it the same way.
    let rpc = support::stdio_reply(
        &strict,
        "serve",
        &[json!({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {"path": format!("oci://{unsigned}"), "inputs": {"task": "x"}}}).to_string()],
    );
    assert!(
        rpc["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("is not signed"),
        "{rpc}"
    );
    let mcp = support::stdio_reply(
        &strict,
        "mcp",
        &[
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string(),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "run", "arguments": {"path": format!("oci://{unsigned}"), "inputs": {"task": "x"}}}}).to_string(),
        ],
    );
    assert_eq!(mcp["result"]["isError"], true, "{mcp}");
    assert!(mcp.to_string().contains("is not signed"), "{mcp}");
    assert!(
        !strict.join(".agentfile/sessions.db").exists() || {
            let o = agentfile(&strict, &["sessions", "list", "--format", "json"], &[]);
            stdout(&o) == "[]"
        }
    );

    // A tampered layer in the registry is refused on pull.
    let blobs = reg.storage().join("docker/registry/v2/blobs/sha256");
    // The manifest as the registry keeps it: the copy the signed run pulled.
    let cached = run
        .join("cache/sha256")
        .join(digest.trim_start_matches("sha256:"))
        .join("manifest.json");
    let manifest: Value = serde_json::from_slice(&std::fs::read(cached).unwrap()).unwrap();
    {
        let layer = manifest["layers"][0]["digest"].as_str().unwrap();
        let hex = layer.trim_start_matches("sha256:");
        let data = blobs.join(&hex[..2]).join(hex).join("data");
        let mut bytes = std::fs::read(&data).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&data, bytes).unwrap();
        let fresh = runner(dir.path(), "fresh", &trusted);
        let o = run_json(&fresh, &format!("oci://{reference}"));
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(
            text(&o).contains("do not match their digest"),
            "{}",
            text(&o)
        );
        assert!(!fresh.join(".agentfile").exists(), "nothing ran");
    }
}

/// A base package for agentrc FROM: it may read the workspace and fetch
/// from one host.
const BASE: &str = "# syntax=agentrc.agentfile/v0.1\nAGENT base\nTOOL utcp:file_read\nTOOL utcp:web_fetch\nMOUNT /workspace ro\nURL https://api.example.com\nAUDIT all\n";

#[test]
fn an_agentrc_child_may_narrow_its_base_and_never_widen_it() {
    let Some(reg) = registry::registry() else {
        return;
    };
    let dir = Dir::new("package-from");
    let base = dir.path().join("base");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(base.join("Agentfile"), BASE).unwrap();
    let o = agentfile(
        dir.path(),
        &[
            "push",
            "base",
            &format!("{}/agents/base:1", reg.host()),
            "--plain-http",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let pinned = stdout(&o);
    let run = runner(dir.path(), "run", "");
    let child = |body: &str| {
        std::fs::write(
            run.join("Agentfile"),
            format!(
                "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM {pinned}\n{body}AUDIT all\n"
            ),
        )
        .unwrap();
        agentfile(&run, &["validate", "Agentfile"], &[])
    };
    let o = child("TOOL utcp:file_read\nURL https://api.other.com\n");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("URL") && text(&o).contains("api.other.com"),
        "{}",
        text(&o)
    );
    let o = child("TOOL utcp:file_read\nTOOL utcp:file_write\n");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("TOOL"), "{}", text(&o));
    // Narrowed to reading: it runs, and reads.
    let o = child("TOOL utcp:file_read\nMOUNT /workspace ro\n");
    assert!(o.status.success(), "{}", text(&o));
    let o = run_json(&run, "Agentfile");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        support::result_of(&o)["outputs"]
            .to_string()
            .contains("Friday"),
        "{}",
        text(&o)
    );
}

/// A WORKFLOW.md fired by the event `x`, whose one step runs a command its
/// own policy allows.
fn event_workflow(dir: &Path, id: &str) -> PathBuf {
    let d = dir.join(id);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("WORKFLOW.md"),
        format!(
            "---\nname: {id}\nid: {id}\ndescription: A packaged workflow.\nversion: 1.0.0\ninputs: {{ type: object }}\noutputs: {{ type: object }}\ntriggers:\n  - kind: event\n    name: x\nsteps:\n  - id: wait\n    kind: tool\n    tool: bash\n    inputs: {{ command: \"sleep 0\" }}\n---\n# {id}\n"
        ),
    )
    .unwrap();
    std::fs::write(d.join("policy.toml"), "[bash]\nallowlist = [\"sleep *\"]\n").unwrap();
    d
}

#[test]
fn the_daemon_and_mcp_serve_packages_by_digest_and_refuse_an_unsigned_one() {
    let Some(reg) = registry::registry() else {
        return;
    };
    let dir = Dir::new("package-serve");
    let host = reg.host();
    event_workflow(dir.path(), "signedwf");
    event_workflow(dir.path(), "unsignedwf");
    let o = agentfile(dir.path(), &["keygen", "team"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let push = |folder: &str, repo: &str| {
        let o = agentfile(
            dir.path(),
            &["push", folder, &format!("{host}/{repo}:1"), "--plain-http"],
            &[],
        );
        assert!(o.status.success(), "{}", text(&o));
        stdout(&o)
    };
    // The config blob says the workflow's version.
    let o = agentfile(dir.path(), &["pack", "signedwf", "--format", "json"], &[]);
    let packed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(packed["version"], "1.0.0", "{packed}");
    let signed = push("signedwf", "flows/signed");
    let unsigned = push("unsignedwf", "flows/unsigned");
    let o = agentfile(
        dir.path(),
        &["sign", &signed, "--key", "team.key", "--plain-http"],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));

    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("agent.toml"),
        format!(
            "[agent]\nworkspace = \".\"\n\n[packages]\nplain_http = true\ncache = \"cache\"\nrequire_signature = true\ntrusted_keys = [\"{}\"]\nserve = [\"{signed}\", \"oci://{unsigned}\"]\n",
            dir.path().join("team.pub").display()
        ),
    )
    .unwrap();
    let o = agentfile(&ws, &["triggers", "list", "--format", "json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let listed = text(&o);
    assert!(listed.contains("signedwf#0"), "{listed}");
    assert!(!listed.contains("unsignedwf#0"), "{listed}");
    assert!(
        listed.contains("is not signed"),
        "the refused package is named: {listed}"
    );
    let o = agentfile(&ws, &["triggers", "fire", "signedwf#0"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let session = stdout(&o).rsplit(' ').next().unwrap_or_default().to_owned();
    let o = agentfile(&ws, &["sessions", "list", "--format", "json"], &[]);
    let sessions: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    let id = sessions
        .as_array()
        .and_then(|a| a.first())
        .map(|s| s["id"].as_str().unwrap_or_default().to_owned())
        .unwrap_or(session);
    let started = support::events(&ws, &id)[0]["data"].clone();
    assert_eq!(
        started["package"]["digest"],
        digest_of_pinned(&signed),
        "{started}"
    );

    // mcp offers the signed package as a tool, and not the unsigned one.
    let mcp = support::stdio_reply(
        &ws,
        "mcp",
        &[
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string(),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
        ],
    );
    let tools = mcp["result"]["tools"].to_string();
    assert!(tools.contains("run_signedwf"), "{tools}");
    assert!(!tools.contains("run_unsignedwf"), "{tools}");
}

/// `GET /ui/api/sessions/ID` of an `agentfile ui` on `ws`.
fn ui_snapshot(ws: &Path, id: &str) -> Value {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(support::bin())
        .args(["ui", "--listen", "127.0.0.1:0", "--workspace"])
        .arg(ws)
        .current_dir(ws)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = None;
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(u) = line.strip_prefix("agentfile ui: serving ") {
            url = Some(u.trim().split("/ui/").next().unwrap().to_owned());
            break;
        }
    }
    let base = url.expect("the web view said where it listens");
    let snap = crate::support::blocking_http()
        .get(format!("{base}/ui/api/sessions/{id}"))
        .send()
        .and_then(|r| r.json::<Value>())
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    snap
}
