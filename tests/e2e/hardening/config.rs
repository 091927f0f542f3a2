//! Issue 30 items 18 (power-loss durability in the config) and 19 (the
//! documentation says what is supported).

use std::time::Duration;

use crate::hardening::limited;
use crate::support::{repo, text, tmp};

const DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn item_18_session_durability_is_a_config_key() {
    let dir = tmp("hardening", "durability");
    std::fs::write(dir.join("agent.toml"), "[session]\ndurability = \"full\"\n").unwrap();
    let o = limited::run(&dir, &["sessions", "list"], &[], b"", DEADLINE);
    assert!(o.status.success(), "{}", text(&o));
    assert!(dir.join(".agentfile/sessions.db").exists(), "{}", text(&o));

    // A wrong value names the key, the file and the values it takes.
    std::fs::write(
        dir.join("agent.toml"),
        "[session]\ndurability = \"fsync\"\n",
    )
    .unwrap();
    let o = limited::run(&dir, &["sessions", "list"], &[], b"", DEADLINE);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = text(&o);
    assert!(
        err.contains("agent.toml") && err.contains("durability"),
        "{err}"
    );
    assert!(err.contains("normal") && err.contains("full"), "{err}");

    // The environment variable, for deployments without a config file.
    std::fs::remove_file(dir.join("agent.toml")).unwrap();
    let o = limited::run(
        &dir,
        &["sessions", "list"],
        &[("AGENTFILE_SESSION_DURABILITY", "full")],
        b"",
        DEADLINE,
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = limited::run(
        &dir,
        &["sessions", "list"],
        &[("AGENTFILE_SESSION_DURABILITY", "always")],
        b"",
        DEADLINE,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("AGENTFILE_SESSION_DURABILITY"),
        "{}",
        text(&o)
    );
}

/// Every format the product runs is documented as supported: no "not
/// supported yet" for a format, and the README's status names no format as
/// next.
#[test]
fn item_19_docs_call_supported_formats_supported() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        !readme.contains("Next: agentrc"),
        "README status still says agentrc is next"
    );
    for line in readme.lines() {
        assert!(
            !(line.contains("agentrc") && line.contains("not yet supported")),
            "README: {line}"
        );
    }
    // Every Rust source, wherever the layout puts it.
    let mut files = Vec::new();
    let mut todo = vec![repo().join("src"), repo().join("crates")];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 50, "found only {} Rust files", files.len());
    for file in files {
        let src = std::fs::read_to_string(&file).unwrap();
        for phrase in ["not supported yet", "not yet supported"] {
            for line in src.lines().filter(|l| l.trim_start().starts_with("//")) {
                assert!(
                    !line.contains(phrase),
                    "{}: still says `{phrase}`: {line}",
                    file.display()
                );
            }
        }
    }

    // `list` of a folder with one workflow of every format names none of them
    // as unsupported.
    let dir = tmp("hardening", "docs-list");
    std::fs::write(
        dir.join("flow.agent"),
        "NAME flow\nGOAL g \"say hi\"\nRUN g\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join(".workflows/notes")).unwrap();
    std::fs::write(
        dir.join(".workflows/notes/WORKFLOW.md"),
        "---\nname: notes\ndescription: d\nsteps:\n  - id: s\n    prompt: hi\n---\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("rc")).unwrap();
    std::fs::write(
        dir.join("rc/Agentfile"),
        "# syntax=agentrc.agentfile/v0.1\nFROM python:3.11-slim\nIDENTITY name=notes version=1.0\nCAPABILITY text\nCMD python ./agent.py\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("helper.agent.md"),
        "---\nname: helper\ndescription: helps\n---\nYou help.\n",
    )
    .unwrap();
    let o = limited::run(&dir, &["list", "."], &[], b"", DEADLINE);
    let listing = text(&o);
    assert!(!listing.contains("not supported"), "{listing}");
    for name in ["flow.agent", "WORKFLOW.md", "rc/Agentfile"] {
        assert!(listing.contains(name), "`{name}` not listed:\n{listing}");
    }
}
