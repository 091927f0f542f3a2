//! Docs that cannot rot: every ` ```console ` block in the README and the
//! book (`docs/src/**/*.md`) is run against the built binary, in order, and
//! its output checked.
//!
//! The block's form is a terminal transcript:
//!
//! - `$ COMMAND` runs `COMMAND` with bash; a command ending in `\` goes on to
//!   the next line, and one with a here-document (`<<'EOF'`) takes the lines up
//!   to the terminator.
//! - The lines after a command, up to the next `$ `, are what it prints
//!   (standard output and standard error together, as on a terminal). Each
//!   must appear, in that order; lines the page leaves out are allowed. `[..]`
//!   in a line stands for any text, and a line `...` says output was left out.
//! - A command must exit with 0, unless it ends with the comment
//!   `# exits N`.
//!
//! Each page runs in a scratch folder of its own with a copy of `examples/`,
//! so the pages' commands can write; `cd` carries over from one command to
//! the next, as in one shell. `agentfile` is the binary under test. No key is
//! set and nothing leaves the machine: a command naming a real provider
//! (`--provider openai`) reaches the loopback fake model through
//! `AGENTFILE_BASE_URL`. Other fenced blocks (` ```sh `, ` ```toml `) are
//! shown, not run: they need a key, another program (an editor) or a server
//! left running.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use agentfile::llm::fake::FakeReply;

use crate::support::{copy_dir, fake, repo, tmp};

/// One `$ ` command of a page, with what it must print and its exit status.
#[derive(Debug)]
struct Step {
    line: usize,
    command: String,
    expected: Vec<String>,
    exit: i32,
}

/// The console blocks of a Markdown page, as steps in page order.
fn steps(text: &str) -> Vec<Step> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    let mut in_console = false;
    let mut in_other = false;
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim_start();
        if !in_console && !in_other {
            if trimmed.starts_with("```console") {
                in_console = true;
            } else if trimmed.starts_with("```") {
                in_other = true;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            in_console = false;
            in_other = false;
            continue;
        }
        if in_other {
            continue;
        }
        if let Some(first) = line.strip_prefix("$ ") {
            let mut command = first.to_owned();
            // A line continued with `\`.
            while command.ends_with('\\') {
                match lines.next() {
                    Some((_, next)) => {
                        command.push('\n');
                        command.push_str(next);
                    }
                    None => break,
                }
            }
            // A here-document: its body, up to the terminator.
            if let Some(term) = heredoc_terminator(&command) {
                for (_, next) in lines.by_ref() {
                    command.push('\n');
                    command.push_str(next);
                    if next.trim() == term {
                        break;
                    }
                }
            }
            let first = command.lines().next().unwrap_or("");
            let last = command.lines().last().unwrap_or("");
            let exit = [first, last]
                .into_iter()
                .find_map(|l| l.rsplit_once("# exits "))
                .and_then(|(_, n)| n.trim().parse().ok())
                .unwrap_or(0);
            out.push(Step {
                line: i + 1,
                command,
                expected: Vec::new(),
                exit,
            });
        } else if let Some(step) = out.last_mut()
            && !line.trim().is_empty()
            && line.trim() != "..."
        {
            step.expected.push(line.trim_end().to_owned());
        }
    }
    out
}

/// `EOF` for a command holding `<<'EOF'`, `<<"EOF"` or `<<EOF`.
fn heredoc_terminator(command: &str) -> Option<String> {
    let (_, rest) = command.split_once("<<")?;
    let rest = rest.trim_start_matches('-').trim_start();
    let word: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// Whether `actual` matches `pattern`, where `[..]` is any text.
fn line_matches(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let mut rest = actual;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

/// The first expected line not found, in order, in `output`.
fn first_missing<'a>(expected: &'a [String], output: &str) -> Option<&'a str> {
    let mut actual = output.lines().map(str::trim_end);
    'lines: for want in expected {
        for got in actual.by_ref() {
            if line_matches(want, got) {
                continue 'lines;
            }
        }
        return Some(want);
    }
    None
}

/// The Markdown pages whose console blocks run: the README and the book.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![repo().join("README.md")];
    walk(&repo().join("docs/src"), &mut out);
    out.sort();
    out
}

/// Run every step of one page; the failures, as messages.
fn run_page(page: &Path, base_url: &str) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let steps = steps(&text);
    if steps.is_empty() {
        return Vec::new();
    }
    let name = page
        .strip_prefix(repo())
        .unwrap_or(page)
        .display()
        .to_string();
    let dir = tmp("docs", &name.replace(['/', '.'], "-"));
    copy_dir(
        &repo().join("examples"),
        &dir.join("examples"),
        &[".agentfile", "REPORT.md", "target"],
    );
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let bin_dir = Path::new(crate::support::bin()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let pwd_file = dir.join(".pwd");
    std::fs::write(&pwd_file, dir.join("").display().to_string()).unwrap();
    let mut failures = Vec::new();
    for step in steps {
        let cwd = std::fs::read_to_string(&pwd_file)
            .unwrap()
            .trim_end()
            .to_owned();
        let script = format!(
            "cd {cwd:?} || exit 99\n{{\n{}\n}} 2>&1\nrc=$?\npwd > {pwd:?}\nexit $rc\n",
            step.command,
            pwd = pwd_file.display().to_string(),
        );
        let mut c = Command::new("bash");
        c.arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .env("PATH", &path)
            .env("HOME", dir.join("home"))
            .env("NO_COLOR", "1")
            .env("AGENTFILE_BASE_URL", base_url)
            .env("TERM", "dumb");
        for var in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GEMINI_API_KEY",
            "OPENROUTER_API_KEY",
            "RUST_LOG",
            "AGENTFILE_PROVIDER",
            "AGENTFILE_MODEL",
            "AGENTFILE_SCRIPT",
            "AGENTFILE_CONFIG",
        ] {
            c.env_remove(var);
        }
        let out = c.output().unwrap();
        let output = String::from_utf8_lossy(&out.stdout).into_owned();
        let code = out.status.code().unwrap_or(-1);
        let place = format!("{name}:{}: `{}`", step.line, first_line(&step.command));
        if code != step.exit {
            failures.push(format!(
                "{place} exited {code}, the page says {} (end the command with `# exits {code}` if that is meant); it printed:\n{output}",
                step.exit
            ));
            continue;
        }
        if let Some(missing) = first_missing(&step.expected, &output) {
            failures.push(format!(
                "{place}: the page shows\n    {missing}\nwhich the output lacks (or has out of order); it printed:\n{output}"
            ));
        }
    }
    failures
}

fn first_line(command: &str) -> &str {
    command.lines().next().unwrap_or("")
}

/// Every console block of the README and the book runs, and prints what the
/// page shows.
#[test]
fn every_console_block_in_the_docs_runs_as_shown() {
    // A real provider named in a page answers from here: structured output
    // for any field a page asks for would be guesswork, so one plain answer.
    let model = fake(vec![FakeReply::text(
        "{\"answer\": \"Lava is melted rock that comes up through the ground.\"}",
    )]);
    model.push((0..64).map(|_| {
        FakeReply::text("{\"answer\": \"Lava is melted rock that comes up through the ground.\"}")
    }));
    let base_url = model.base_url();
    let pages = pages();
    let mut ran = 0;
    let mut failures = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        if !steps(&text).is_empty() {
            ran += 1;
        }
        failures.extend(run_page(page, &base_url));
    }
    assert!(ran >= 1, "no console blocks found in {pages:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The transcript reader and the matcher, on their own.
#[test]
fn console_blocks_are_read_as_transcripts() {
    let page = "intro\n\n```sh\n$ not run\n```\n\n```console\n$ cat > f <<'EOF'\na\n$ b\nEOF\n$ echo one \\\n  two   # exits 3\none [..]\n...\n```\n";
    let s = steps(page);
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!(s[0].command, "cat > f <<'EOF'\na\n$ b\nEOF");
    assert!(s[0].expected.is_empty());
    assert_eq!(s[1].command, "echo one \\\n  two   # exits 3");
    assert_eq!(s[1].exit, 3);
    assert_eq!(s[1].expected, vec!["one [..]"]);
    assert!(line_matches(
        "run x (session [..], fake)",
        "run x (session 42, fake)"
    ));
    assert!(!line_matches(
        "run x (session [..], fake)",
        "run y (session 42, fake)"
    ));
    assert!(line_matches("[..]hello[..]", "a hello b"));
    let expected = vec!["b".to_owned(), "d".to_owned()];
    assert_eq!(first_missing(&expected, "a\nb\nc\nd\n"), None);
    assert_eq!(first_missing(&expected, "d\nb\n"), Some("d"));
}

/// The book builds: every page under `docs/src` is in `SUMMARY.md` and every
/// chapter it names exists, every relative link of the README and the book
/// reaches a file, and no page still sends the reader to a README section
/// that moved into the book.
#[test]
fn the_book_is_whole_and_its_links_resolve() {
    let src = repo().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let chapters: Vec<String> = links(&summary)
        .into_iter()
        .filter(|l| !l.is_empty())
        .collect();
    let mut problems = Vec::new();
    for c in &chapters {
        if !src.join(c).is_file() {
            problems.push(format!("SUMMARY.md names {c}, which does not exist"));
        }
    }
    for page in pages() {
        let rel = page
            .strip_prefix(&src)
            .map(|p| p.display().to_string())
            .ok();
        if let Some(rel) = &rel
            && rel != "SUMMARY.md"
            && !chapters.contains(rel)
        {
            problems.push(format!("docs/src/{rel} is not in SUMMARY.md"));
        }
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(repo()).unwrap().display().to_string();
        for link in links(&text) {
            let target = link.split('#').next().unwrap_or("");
            if target.is_empty() {
                continue;
            }
            if !page.parent().unwrap().join(target).exists() {
                problems.push(format!("{name}: the link `{link}` leads nowhere"));
            }
        }
        if rel.is_some() {
            for (i, line) in text.lines().enumerate() {
                if line.contains("in the README") || line.contains("the README's \"") {
                    problems.push(format!(
                        "{name}:{}: points into the README, whose reference moved into this book: {line}",
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The relative targets of a page's Markdown links (`[text](target)`),
/// outside code: web addresses and `mailto:` are left out.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        // Inline code spans hold no links.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].trim();
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push(target.to_owned());
            }
            rest = &after[end..];
        }
    }
    out
}
