//! The `fake-provider` binary: starts from a script file, prints its base URL,
//! and answers a real provider on loopback.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::support::llm::{Wire, ask, fast, provider_at};
use agentfile::llm::{CancellationToken, collect_stream};

/// Kills the child when the test ends, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn binary_serves_a_script() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let script = dir.join("fake_provider_script.json");
    std::fs::write(
        &script,
        r#"[{"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "hi"}}]}, {"text": "done"}]"#,
    )
    .unwrap();
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_fake-provider"))
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let base = line.trim();
    assert!(base.starts_with("http://127.0.0.1:"), "{base:?}");

    let p = provider_at(Wire::OpenAi, base, fast());
    let r = p
        .chat(ask("Write a.txt."), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(r.tool_calls()[0].name, "write");
    let p = provider_at(Wire::Gemini, base, fast());
    let r = collect_stream(p.stream(ask("And?"), CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(r.text(), "done");
}

#[test]
fn binary_rejects_a_bad_script() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let script = dir.join("fake_provider_bad_script.json");
    std::fs::write(&script, r#"[{"txt": "typo"}]"#).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fake-provider"))
        .arg(&script)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a fake-provider script"), "{err}");
}
