//! Which workflow format a file is written in.
//!
//! Two unrelated formats are both called "Agentfile": our workflow DSL (GOAL, RUN,
//! LOOP, …) and agentrc's agent declaration (FROM, CMD, TOOL, MOUNT, …). Both use
//! `AGENT`. We tell them apart by the directives that start their lines (outside
//! `"""` strings and comments), so an agentrc file gets one clear message instead
//! of a page of nonsense syntax errors. `--dialect` overrides the guess.

use std::path::Path;

pub use crate::registry::Dialect;

/// A directive that decided the guess: the word and its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub word: String,
    pub line: u32,
    /// Byte offset of the word in the file.
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    /// One format, and the line that shows it (none for a file name match or an
    /// empty file).
    Format(Dialect, Option<Evidence>),
    /// Directives of both Agentfile dialects appear.
    Ambiguous { dsl: Evidence, agentrc: Evidence },
}

const DSL_ONLY: &[&str] = &["NAME", "INPUT", "GOAL", "RUN", "LOOP", "CONVERGE"];
const AGENTRC_ONLY: &[&str] = &[
    "FROM",
    "CMD",
    "TOOL",
    "MOUNT",
    "CRED",
    "URL",
    "POLICY",
    "AUDIT",
    "SOP",
    "IDENTITY",
    "CAPABILITY",
    "COPY",
    "ADD",
    "LABEL",
    "HEALTHCHECK",
    "WORKDIR",
    "EXPOSE",
    "ENTRYPOINT",
];

/// Guess a file's format from its name and text.
pub fn detect(path: &Path, text: &str) -> Detected {
    if let Some(d) = crate::registry::by_name(path) {
        return Detected::Format(d, None);
    }
    let mut dsl: Option<Evidence> = None;
    let mut rc: Option<Evidence> = None;
    let mut in_triple = false;
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let line_offset = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        if line.matches("\"\"\"").count() % 2 == 1 {
            let was = in_triple;
            in_triple = !in_triple;
            if was {
                continue;
            }
        } else if in_triple {
            continue;
        }
        if trimmed.starts_with("# syntax=agentrc") {
            let ev = Evidence {
                word: "# syntax=agentrc".into(),
                line: n as u32 + 1,
                offset: line_offset + (line.len() - trimmed.len()),
            };
            return Detected::Format(Dialect::Agentrc, Some(ev));
        }
        let word = trimmed
            .split(|c: char| c.is_whitespace())
            .next()
            .unwrap_or("");
        let ev = || Evidence {
            word: word.to_owned(),
            line: n as u32 + 1,
            offset: line_offset + (line.len() - trimmed.len()),
        };
        // Dockerfile-shaped agentrc files have RUN too; the DSL's takes USING.
        let dsl_word = DSL_ONLY.contains(&word) && (word != "RUN" || line.contains(" USING "));
        if dsl.is_none() && dsl_word {
            dsl = Some(ev());
        } else if rc.is_none() && AGENTRC_ONLY.contains(&word) {
            rc = Some(ev());
        }
    }
    match (dsl, rc) {
        (Some(dsl), Some(agentrc)) => Detected::Ambiguous { dsl, agentrc },
        (None, Some(ev)) => Detected::Format(Dialect::Agentrc, Some(ev)),
        (ev, None) => Detected::Format(Dialect::Agentfile, ev),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_dialects_apart() {
        let p = Path::new("Agentfile");
        assert!(matches!(
            detect(p, "NAME x\nGOAL a \"b\"\nRUN r USING a\n"),
            Detected::Format(Dialect::Agentfile, Some(_))
        ));
        assert!(matches!(
            detect(p, "AGENT hello\nCMD python agent.py\n"),
            Detected::Format(Dialect::Agentrc, Some(Evidence { line: 2, .. }))
        ));
        assert!(matches!(
            detect(p, "NAME x\nCMD y\n"),
            Detected::Ambiguous { .. }
        ));
        // A FROM inside a triple-quoted prompt is prose, not a directive.
        assert!(matches!(
            detect(
                p,
                "NAME x\nGOAL a \"\"\"\nFROM here\n\"\"\"\nRUN r USING a\n"
            ),
            Detected::Format(Dialect::Agentfile, _)
        ));
    }
}
