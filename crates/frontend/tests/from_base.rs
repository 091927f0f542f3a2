//! agentrc `FROM REF` through an injected [`Packages`] (CONTRACT §20): the
//! base's TOOL/URL/MOUNT/CRED/SOP are inherited where the file writes none and
//! are a ceiling where it writes some; the base's Cedar policies keep applying
//! beside the file's at the gate; cycles and depth are bounded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentfile_frontend::{Analysis, Options, Packages, ResolvedBase, analyze};
use agentfile_plan::declared::Declaration;
use agentfile_tools::Policy;
use agentfile_tools::policy::declared::DeclarationGuard;
use agentfile_tools::policy::{Request, Tool};

/// A folder of its own under the system's temporary folder, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let d = std::env::temp_dir().join(format!(
            "agentfile-from-base-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// Write `text` as `<sub>/Agentfile`; returns its path.
    fn agentfile(&self, sub: &str, text: &str) -> PathBuf {
        let dir = self.0.join(sub);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("Agentfile");
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// References to folders holding a base Agentfile, and a digest for each.
#[derive(Default)]
struct Fake(BTreeMap<String, PathBuf>);

impl Fake {
    fn with(mut self, reference: &str, folder: &Path) -> Fake {
        self.0.insert(reference.to_owned(), folder.to_owned());
        self
    }
}

impl Packages for Fake {
    fn resolve(
        &self,
        reference: &str,
    ) -> Result<Option<ResolvedBase>, Box<dyn std::error::Error + Send + Sync>> {
        let folder = self
            .0
            .get(reference)
            .ok_or_else(|| format!("no package `{reference}` on this machine"))?;
        Ok(Some(ResolvedBase {
            workflow: folder.clone(),
            digest: digest_of(folder),
        }))
    }
}

const BASE: &str = r#"# syntax=agentrc.agentfile/v0.1
AGENT base-agent
TOOL utcp:file_read
TOOL utcp:web_fetch
MOUNT /workspace ro
MOUNT /workspace/out rw
URL https://api.example.com
URL https://x.example.org
CRED gh https://api.example.com bearer env:GH_TOKEN
AUDIT all
SOP You are the base agent.
POLICY
  permit(principal == AgentRC::Agent::"base-agent", action == AgentRC::Action::"tool.invoke", resource);
  @id("no-secrets")
  forbid(principal, action == AgentRC::Action::"filesystem.read", resource)
    when { context.path like "/workspace/secret*" };
END
"#;

/// The digest [`Fake`] gives a package: one per folder, as the same content
/// has the same digest whatever the reference.
fn digest_of(folder: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    folder.hash(&mut h);
    format!("sha256:{:0>64x}", h.finish())
}

fn analyse(path: &Path, packages: &dyn Packages) -> Analysis {
    analyze(
        path,
        Options {
            packages: Some(packages),
            ..Options::default()
        },
    )
}

fn declaration(a: &Analysis) -> &Declaration {
    let plan = a.plan.as_ref().unwrap_or_else(|| {
        panic!(
            "no plan: {:?}",
            a.diagnostics
                .iter()
                .map(|d| (d.code, &d.message))
                .collect::<Vec<_>>()
        )
    });
    plan.declared.as_deref().expect("an agentrc plan")
}

/// `(line, message)` of each diagnostic with `code`.
fn errors(a: &Analysis, code: &str) -> Vec<(u32, String)> {
    a.diagnostics
        .iter()
        .filter(|d| d.code == code)
        .map(|d| {
            let s = d.span.expect("a place");
            (
                a.sources.file(s.file).line_col(s.start).0,
                d.message.clone(),
            )
        })
        .collect()
}

fn with_base() -> (Dir, Fake) {
    let dir = Dir::new("base");
    dir.agentfile("base", BASE);
    let fake = Fake::default().with("registry.example/base:1.0", &dir.0.join("base"));
    (dir, fake)
}

#[test]
fn a_child_that_declares_nothing_inherits_the_base() {
    let (dir, fake) = with_base();
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/base:1.0\nAUDIT all\n",
    );
    let a = analyse(&child, &fake);
    let d = declaration(&a);
    let g = &d.grants;
    let tools: Vec<&str> = g.tools.iter().map(|t| t.declared.as_str()).collect();
    assert_eq!(tools, ["utcp:file_read", "utcp:web_fetch"]);
    assert!(
        g.tools.iter().all(|t| t.line == 3),
        "inherited at FROM's line"
    );
    let mounts: Vec<(&str, bool)> = g
        .mounts
        .iter()
        .map(|m| (m.path.as_str(), m.write))
        .collect();
    assert_eq!(mounts, [("/workspace", false), ("/workspace/out", true)]);
    assert_eq!(g.hosts, ["api.example.com", "x.example.org"]);
    assert_eq!(g.credentials.len(), 1);
    assert_eq!(g.credentials[0].name, "gh");
    assert_eq!(g.sop.as_deref(), Some("You are the base agent."));
    assert_eq!(g.cedar, None, "no policy of its own: the base's apply");
    let base = d.base.as_deref().expect("the base is recorded");
    assert_eq!(base.reference, "registry.example/base:1.0");
    let digest = digest_of(&dir.0.join("base"));
    assert_eq!(base.digest, digest);
    assert_eq!(base.agent, "base-agent");
    assert!(base.grants.cedar.is_some());
    // The SOP is the agent's system prompt.
    let plan = a.plan.as_ref().unwrap();
    assert_eq!(plan.agents[0].prompt, "You are the base agent.");
    let text = agentfile_agentrc::summary(d);
    assert!(
        text.contains(&format!(
            "  base:      registry.example/base:1.0@{digest} (agent base-agent)\n"
        )),
        "{text}"
    );
    // inspect --format json shows the base.
    let json = serde_json::to_value(d).unwrap();
    assert_eq!(json["base"]["reference"], "registry.example/base:1.0");
    assert_eq!(json["base"]["digest"], digest.as_str());
}

#[test]
fn a_child_widening_a_boundary_is_an_error_at_the_directive() {
    let (dir, fake) = with_base();
    let shown = format!(
        "registry.example/base:1.0@{}",
        digest_of(&dir.0.join("base"))
    );
    let cases: &[(&str, &str)] = &[
        (
            "URL https://api.other.com",
            "URL api.other.com widens the base `…`: it allows only api.example.com, x.example.org",
        ),
        (
            "TOOL utcp:shell",
            "TOOL utcp:shell widens the base `…`: its tools are utcp:file_read, utcp:web_fetch",
        ),
        (
            "MOUNT /etc ro",
            "MOUNT /etc ro widens the base `…`: its mounts are /workspace ro, /workspace/out rw",
        ),
        (
            "MOUNT /workspace/src rw",
            "MOUNT /workspace/src rw widens the base `…`: it mounts `/workspace/src` read-only (/workspace ro, /workspace/out rw)",
        ),
        (
            "CRED gh https://api.example.com bearer env:OTHER",
            "CRED gh env:OTHER widens the base `…`: its credentials are gh env:GH_TOKEN",
        ),
        (
            "CRED gh https://evil.example bearer env:GH_TOKEN",
            "CRED gh env:GH_TOKEN widens the base `…`: its credentials are gh env:GH_TOKEN",
        ),
    ];
    for (line, want) in cases {
        // The widening directive on line 5, after one that narrows.
        let (first, _) = line.split_once(' ').unwrap();
        let narrowing = match first {
            "URL" => "URL https://api.example.com",
            "TOOL" => "TOOL utcp:file_read",
            "MOUNT" => "MOUNT /workspace/out rw",
            _ => "AUDIT all",
        };
        let text = format!(
            "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/base:1.0\n{narrowing}\n{line}\nAUDIT all\n"
        );
        let child = dir.agentfile("child", &text);
        let a = analyse(&child, &fake);
        assert!(a.plan.is_none(), "{line}: a widening is an error");
        let want = want.replace('…', &shown);
        assert_eq!(
            errors(&a, "agentrc-from-widens"),
            [(5, want)],
            "{line}: {:?}",
            a.diagnostics
        );
    }
}

#[test]
fn a_dockerfile_shaped_child_is_held_to_the_base_too() {
    let (dir, fake) = with_base();
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nFROM registry.example/base:1.0\nIDENTITY name=child\n\
         COPY ./t /mnt/tools/file_write\nPOLICY network dns:api.other.com:443\n",
    );
    let a = analyse(&child, &fake);
    let got = errors(&a, "agentrc-from-widens");
    assert_eq!(got.len(), 2, "{:?}", a.diagnostics);
    assert_eq!(got[0].0, 4);
    assert!(
        got[0].1.starts_with("COPY utcp:file_write widens the base"),
        "{}",
        got[0].1
    );
    assert_eq!(got[1].0, 5);
    assert!(
        got[1]
            .1
            .starts_with("POLICY network api.other.com widens the base"),
        "{}",
        got[1].1
    );
    // Narrowed, it inherits the base's mounts instead of the whole workspace.
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nFROM registry.example/base:1.0\nIDENTITY name=child\n\
         COPY ./t /mnt/tools/file_read\nPOLICY network dns:api.example.com:443\n",
    );
    let a = analyse(&child, &fake);
    let g = &declaration(&a).grants;
    assert_eq!(g.tools.len(), 1);
    assert_eq!(g.hosts, ["api.example.com"]);
    let mounts: Vec<(&str, bool)> = g
        .mounts
        .iter()
        .map(|m| (m.path.as_str(), m.write))
        .collect();
    assert_eq!(mounts, [("/workspace", false), ("/workspace/out", true)]);
}

#[test]
fn a_narrowing_child_keeps_its_narrowed_grants() {
    let (dir, fake) = with_base();
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/base:1.0\n\
         TOOL utcp:read\nMOUNT /workspace/out/reports rw\nMOUNT /workspace/src ro\n\
         URL https://api.example.com/v2\nCRED gh https://api.example.com bearer env:GH_TOKEN\n\
         SOP You are the child.\nAUDIT all\n\
         POLICY\n  permit(principal, action, resource);\nEND\n",
    );
    let a = analyse(&child, &fake);
    let d = declaration(&a);
    let g = &d.grants;
    let tools: Vec<&str> = g.tools.iter().map(|t| t.declared.as_str()).collect();
    assert_eq!(tools, ["utcp:read"]);
    let mounts: Vec<(&str, bool)> = g
        .mounts
        .iter()
        .map(|m| (m.path.as_str(), m.write))
        .collect();
    assert_eq!(
        mounts,
        [("/workspace/out/reports", true), ("/workspace/src", false)]
    );
    assert_eq!(g.hosts, ["api.example.com"]);
    assert_eq!(g.credentials[0].source, "env:GH_TOKEN");
    assert_eq!(g.sop.as_deref(), Some("You are the child."));
    assert_eq!(g.cedar.as_ref().map(Vec::len), Some(1));
    assert!(d.base.is_some());
}

/// A workspace with `notes.txt`, `secret.txt` and `out/`, and a gate for a
/// declaration under a policy that lets every file tool work there.
fn gate(ws: &Path, decl: &Declaration) -> agentfile_tools::Gate {
    std::fs::write(ws.join("notes.txt"), "notes").unwrap();
    std::fs::write(ws.join("secret.txt"), "secret").unwrap();
    std::fs::create_dir_all(ws.join("out")).unwrap();
    let mut policy = Policy::parse(
        "[read]\nallow = [\"$WORKSPACE/**\"]\n[write]\nallow = [\"$WORKSPACE/**\"]\n",
        Path::new("policy.toml"),
    )
    .unwrap();
    let guard = DeclarationGuard::new(decl, ws, None).unwrap();
    policy.guard_for_run(Arc::new(guard));
    policy.bind(ws, None).unwrap()
}

#[test]
fn the_base_policies_hold_at_the_gate_beside_the_childs() {
    let (dir, fake) = with_base();
    // The child permits everything; the base forbids reading secret*.
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/base:1.0\nAUDIT all\n\
         TOOL utcp:file_read\nMOUNT /workspace ro\n\
         POLICY\n  permit(principal, action, resource);\nEND\n",
    );
    let a = analyse(&child, &fake);
    let ws = Dir::new("ws");
    let g = gate(&ws.0, declaration(&a));
    let read = |path: &str| {
        g.check(&Request::Path {
            tool: Tool::Read,
            path,
        })
    };
    assert!(read("notes.txt").is_ok());
    let denied = read("secret.txt").unwrap_err();
    assert!(denied.rule.contains("no-secrets"), "{denied:?}");
    assert!(
        denied
            .rule
            .starts_with("base registry.example/base:1.0@sha256:"),
        "{denied:?}"
    );
    // Not declared by the child (though the base has it): refused.
    assert!(g.offers(Tool::Read));
    assert!(!g.offers(Tool::WebFetch));

    // A child with no policy of its own lives under the base's.
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/base:1.0\nAUDIT all\n",
    );
    let a = analyse(&child, &fake);
    let g = gate(&ws.0, declaration(&a));
    let read = |path: &str| {
        g.check(&Request::Path {
            tool: Tool::Read,
            path,
        })
    };
    assert!(read("notes.txt").is_ok());
    assert!(read("secret.txt").is_err());
    // Writes: the base mounts out/ rw, and nothing else.
    let write = |path: &str| {
        g.check(&Request::Path {
            tool: Tool::Write,
            path,
        })
    };
    assert!(write("out/report.md").is_err(), "no write tool declared");

    // The child's own policies hold too: it forbids what the base permits.
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/base:1.0\nAUDIT all\n\
         POLICY\n  permit(principal, action, resource);\n  @id(\"no-notes\")\n  forbid(principal, action == AgentRC::Action::\"filesystem.read\", resource) when { context.path like \"/workspace/notes*\" };\nEND\n",
    );
    let a = analyse(&child, &fake);
    let g = gate(&ws.0, declaration(&a));
    let read = |path: &str| {
        g.check(&Request::Path {
            tool: Tool::Read,
            path,
        })
    };
    let denied = read("notes.txt").unwrap_err();
    assert!(denied.rule.contains("no-notes"), "{denied:?}");
    assert!(read("secret.txt").is_err());
}

#[test]
fn bases_of_bases_hold_all_the_way_down() {
    let (dir, fake) = with_base();
    let mid = dir.agentfile(
        "mid",
        "# syntax=agentrc.agentfile/v0.1\nAGENT mid\nFROM registry.example/base:1.0\nAUDIT all\nURL https://api.example.com\n",
    );
    let fake = fake.with("registry.example/mid:1.0", mid.parent().unwrap());
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/mid:1.0\nAUDIT all\nURL https://x.example.org\n",
    );
    let a = analyse(&child, &fake);
    let got = errors(&a, "agentrc-from-widens");
    assert_eq!(got.len(), 1, "{:?}", a.diagnostics);
    assert_eq!(got[0].0, 5);
    assert!(
        got[0].1.contains("it allows only api.example.com"),
        "{}",
        got[0].1
    );

    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/mid:1.0\nAUDIT all\n",
    );
    let a = analyse(&child, &fake);
    let d = declaration(&a);
    assert_eq!(d.grants.hosts, ["api.example.com"]);
    let mid = d.base.as_deref().unwrap();
    assert_eq!(mid.reference, "registry.example/mid:1.0");
    assert_eq!(
        mid.base.as_deref().unwrap().reference,
        "registry.example/base:1.0"
    );
    let ws = Dir::new("ws");
    let g = gate(&ws.0, d);
    let read = |path: &str| {
        g.check(&Request::Path {
            tool: Tool::Read,
            path,
        })
    };
    assert!(read("notes.txt").is_ok());
    assert!(
        read("secret.txt").is_err(),
        "the base's forbid, two levels down"
    );
}

#[test]
fn a_cycle_of_bases_is_an_error_at_from() {
    let dir = Dir::new("cycle");
    let a_file = dir.agentfile(
        "a",
        "# syntax=agentrc.agentfile/v0.1\nAGENT a\nFROM reg/b:1\nAUDIT all\n",
    );
    let b_file = dir.agentfile(
        "b",
        "# syntax=agentrc.agentfile/v0.1\nAGENT b\nAUDIT all\nFROM reg/a:1\n",
    );
    let fake = Fake::default()
        .with("reg/a:1", a_file.parent().unwrap())
        .with("reg/b:1", b_file.parent().unwrap());
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nAUDIT all\n\nFROM reg/a:1\n",
    );
    let a = analyse(&child, &fake);
    let got = errors(&a, "agentrc-from-unresolved");
    assert_eq!(got.len(), 1, "{:?}", a.diagnostics);
    assert_eq!(got[0].0, 5);
    assert!(
        got[0].1.starts_with("cannot use the base `reg/a:1`"),
        "{}",
        got[0].1
    );
    assert!(
        got[0]
            .1
            .contains("the bases form a cycle: reg/a:1 → reg/b:1 → reg/a:1"),
        "{}",
        got[0].1
    );
    // A base naming itself, by another reference to the same package: the
    // digest tells.
    let selfie = dir.agentfile(
        "selfie",
        "# syntax=agentrc.agentfile/v0.1\nAGENT selfie\nFROM reg/selfie@sha256:1\nAUDIT all\n",
    );
    let fake = Fake::default()
        .with("reg/selfie:1", selfie.parent().unwrap())
        .with("reg/selfie@sha256:1", selfie.parent().unwrap());
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM reg/selfie:1\nAUDIT all\n",
    );
    let a = analyse(&child, &fake);
    let got = errors(&a, "agentrc-from-unresolved");
    assert_eq!(got.len(), 1, "{:?}", a.diagnostics);
    assert!(
        got[0]
            .1
            .contains("the bases form a cycle: reg/selfie:1 → reg/selfie@sha256:1"),
        "{}",
        got[0].1
    );
}

#[test]
fn bases_nest_at_most_eight_deep() {
    let dir = Dir::new("deep");
    let mut fake = Fake::default();
    for i in 0..10 {
        let from = if i == 0 {
            String::new()
        } else {
            format!("FROM reg/l{}:1\n", i - 1)
        };
        let f = dir.agentfile(
            &format!("l{i}"),
            &format!("# syntax=agentrc.agentfile/v0.1\nAGENT l{i}\n{from}AUDIT all\nURL https://api.example.com\n"),
        );
        fake = fake.with(&format!("reg/l{i}:1"), f.parent().unwrap());
    }
    // l7 is eight bases deep (l7 … l0): fine. l8 is nine.
    let ok = dir.agentfile(
        "ok",
        "# syntax=agentrc.agentfile/v0.1\nAGENT ok\nFROM reg/l7:1\nAUDIT all\n",
    );
    let a = analyse(&ok, &fake);
    assert!(a.plan.is_some(), "{:?}", a.diagnostics);
    let deep = dir.agentfile(
        "deep",
        "# syntax=agentrc.agentfile/v0.1\nAGENT deep\nFROM reg/l8:1\nAUDIT all\n",
    );
    let a = analyse(&deep, &fake);
    let got = errors(&a, "agentrc-from-unresolved");
    assert_eq!(got.len(), 1, "{:?}", a.diagnostics);
    assert!(
        got[0].1.contains("the bases nest deeper than 8"),
        "{}",
        got[0].1
    );
}

#[test]
fn a_base_that_cannot_be_found_or_used_is_an_error_at_from() {
    let (dir, fake) = with_base();
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nAUDIT all\nFROM oci://registry.example/none:2\n",
    );
    let a = analyse(&child, &fake);
    assert_eq!(
        errors(&a, "agentrc-from-unresolved"),
        [(
            4,
            "cannot use the base `registry.example/none:2`: no package `registry.example/none:2` on this machine"
                .to_owned()
        )]
    );
    // An invalid base: its first error is named.
    let bad = dir.agentfile(
        "bad",
        "# syntax=agentrc.agentfile/v0.1\nAGENT bad\nMOUNT /workspace sideways\n",
    );
    let fake = fake.with("reg/bad:1", bad.parent().unwrap());
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM reg/bad:1\nAUDIT all\n",
    );
    let a = analyse(&child, &fake);
    let got = errors(&a, "agentrc-from-unresolved");
    assert_eq!(got.len(), 1);
    assert!(
        got[0]
            .1
            .contains("its Agentfile is invalid (1 error); the first: ")
            && got[0]
                .1
                .contains("Agentfile:3:18: `sideways` is not a valid mount mode"),
        "{}",
        got[0].1
    );
    // A second FROM is refused when bases are looked up.
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/base:1.0\nFROM registry.example/base:1.0\nAUDIT all\n",
    );
    let a = analyse(&child, &fake);
    assert_eq!(
        errors(&a, "agentrc-duplicate").len(),
        1,
        "{:?}",
        a.diagnostics
    );
}

#[test]
fn a_from_that_names_no_package_is_only_checked() {
    // A container image (what a resolver answers `None` for) has no
    // boundaries to inherit.
    struct Images;
    impl Packages for Images {
        fn resolve(
            &self,
            _: &str,
        ) -> Result<Option<ResolvedBase>, Box<dyn std::error::Error + Send + Sync>> {
            Ok(None)
        }
    }
    let (dir, _) = with_base();
    let child = dir.agentfile(
        "child",
        "# syntax=agentrc.agentfile/v0.1\nAGENT child\nFROM registry.example/base:1.0\nAUDIT all\nURL https://api.other.com\n",
    );
    let a = analyze(
        &child,
        Options {
            packages: Some(&Images),
            ..Options::default()
        },
    );
    let d = declaration(&a);
    assert_eq!(d.base, None);
    assert_eq!(d.grants.hosts, ["api.other.com"]);
    assert!(d.grants.tools.is_empty());
    assert_eq!(d.grants.cedar, Some(Vec::new()));
    assert!(serde_json::to_value(d).unwrap().get("base").is_none());
}
