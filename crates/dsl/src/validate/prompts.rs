//! Loading prompts: inline text, FROM files and skills, read relative to the
//! Agentfile and held to its folder.

use super::definitions::Defs;
use super::*;

/// Each agent's and each goal's prompt, by index (`None`: it could not be read).
pub(super) struct Prompts {
    pub(super) agents: Vec<Option<Prompt>>,
    pub(super) goals: Vec<Option<Prompt>>,
}

impl Validator<'_, '_> {
    /// Read every prompt, and report empty ones; an agent's REQUIRES profile
    /// is checked here too.
    pub(super) fn load_prompts(&mut self, defs: &Defs<'_>) -> Prompts {
        let agent_prompts: Vec<Option<Prompt>> = defs
            .agents
            .iter()
            .map(|(_, a)| self.load_prompt(&a.source, PromptUse::Agent))
            .collect();
        let goal_prompts: Vec<Option<Prompt>> = defs
            .goals
            .iter()
            .map(|(_, g, _)| self.load_prompt(&g.source, PromptUse::Goal))
            .collect();
        for (n, (_, g, _)) in defs.goals.iter().enumerate() {
            if let Some(p) = &goal_prompts[n]
                && p.text.trim().is_empty()
            {
                self.error(
                    "empty-prompt",
                    g.source.span(),
                    format!("goal `{}` has an empty outcome", g.name.name),
                )
                .hint = Some("say what the goal should achieve".into());
            }
        }
        for (n, (_, a)) in defs.agents.iter().enumerate() {
            if let Some(p) = &agent_prompts[n]
                && p.text.trim().is_empty()
            {
                self.error(
                    "empty-prompt",
                    a.source.span(),
                    format!("agent `{}` has an empty prompt", a.name.name),
                )
                .hint = Some("describe the persona the agent should take".into());
            }
            if let Some(req) = &a.requires {
                self.check_profile(req);
            }
        }
        Prompts {
            agents: agent_prompts,
            goals: goal_prompts,
        }
    }

    /// Read a prompt: inline text as is, or a file/skill relative to the Agentfile.
    pub(super) fn load_prompt(&mut self, src: &Source, usage: PromptUse) -> Option<Prompt> {
        match src {
            Source::Inline(t) => Some(Prompt {
                text: t.value.clone(),
                source: plan::PromptSource::Inline,
                at: Some((
                    t.content.file,
                    t.content.start as usize,
                    t.content.end as usize,
                )),
                card: None,
            }),
            Source::From { path, span } => self.load_from(path, *span, usage),
        }
    }

    pub(super) fn load_from(
        &mut self,
        written: &str,
        span: Span,
        usage: PromptUse,
    ) -> Option<Prompt> {
        if written.trim().is_empty() {
            self.error("syntax", span, "empty path after FROM");
            return None;
        }
        let resolved = self.dir.join(expand_home(written));
        self.check_escape(written, &resolved, span);
        if usage == PromptUse::Agent
            && agentfile_agent_card::is_agent_file(&resolved)
            && resolved.is_file()
        {
            let card = agentfile_agent_card::load_path(
                self.map,
                self.opts.scripts,
                &resolved,
                written,
                Some(span),
                &mut self.diags,
            )?;
            return Some(Prompt {
                text: agentfile_agent_card::literal(&card.persona()),
                source: plan::PromptSource::File {
                    path: written.to_owned(),
                },
                at: None,
                card: Some(Box::new(card)),
            });
        }
        if resolved.is_dir() {
            if usage == PromptUse::Goal {
                self.error(
                    "missing-file",
                    span,
                    format!("`{written}` is a folder; a goal's FROM names a file"),
                )
                .hint = Some("point at a .md or .txt file inside it".into());
                return None;
            }
            return self.load_skill(written, &resolved, span);
        }
        if resolved.exists() {
            return self.read_prompt_file(
                written,
                &resolved,
                span,
                plan::PromptSource::File {
                    path: written.to_owned(),
                },
            );
        }
        // A bare name may be a skill from `skills.paths`.
        if usage == PromptUse::Agent && !written.contains(['/', '\\']) && !written.contains('.') {
            let paths = self
                .opts
                .config
                .map(|c| c.skills.paths.clone())
                .unwrap_or_default();
            for base in paths {
                let dir = expand_home(&base.to_string_lossy());
                let candidate = dir.join(written);
                if candidate.join("SKILL.md").is_file() {
                    return self.load_skill(written, &candidate, span);
                }
            }
        }
        let mut d = Diagnostic::error(
            "missing-file",
            span,
            format!(
                "cannot find `{written}` (looked for {})",
                resolved.display()
            ),
        );
        d.hint = Some(match usage {
            PromptUse::Agent => {
                "FROM paths are relative to the Agentfile; create the file, or name a folder holding SKILL.md".into()
            }
            PromptUse::Goal => "FROM paths are relative to the Agentfile; create the file or fix the path".into(),
        });
        self.similar_file_later(&mut d, &resolved);
        self.diags.push(d);
        None
    }

    pub(super) fn load_skill(&mut self, written: &str, dir: &Path, span: Span) -> Option<Prompt> {
        let skill = dir.join("SKILL.md");
        if !skill.is_file() {
            self.error("missing-file", span, format!("`{written}` is a folder without SKILL.md"))
                .hint = Some("an AGENT FROM a folder loads the folder's SKILL.md; add one, or point at a prompt file".into());
            return None;
        }
        let mut p = self.read_prompt_file(written, &skill, span, plan::PromptSource::Inline)?;
        let (name, description, body_offset) = split_front_matter(&p.text);
        p.text = p.text[body_offset..]
            .trim_start_matches(['\n', '\r'])
            .to_owned();
        if let Some((fid, off, end)) = p.at {
            let full = &self.map.file(fid).text;
            let skipped = full[body_offset..].len()
                - full[body_offset..].trim_start_matches(['\n', '\r']).len();
            p.at = Some((fid, off + body_offset + skipped, end));
        }
        p.source = plan::PromptSource::Skill {
            path: written.to_owned(),
            name,
            description,
        };
        Some(p)
    }

    pub(super) fn read_prompt_file(
        &mut self,
        written: &str,
        path: &Path,
        span: Span,
        source: plan::PromptSource,
    ) -> Option<Prompt> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) => {
                self.error(
                    "unreadable-file",
                    span,
                    format!("cannot read `{written}`: {e}"),
                );
                return None;
            }
        };
        if !meta.is_file() {
            self.error(
                "unreadable-file",
                span,
                format!("`{written}` is not a regular file"),
            )
            .hint = Some("FROM must name a prompt file (.md or .txt)".into());
            return None;
        }
        if meta.len() > MAX_PROMPT_BYTES {
            self.error(
                "unreadable-file",
                span,
                format!(
                    "`{written}` is {} bytes; prompt files are limited to {MAX_PROMPT_BYTES} bytes",
                    meta.len()
                ),
            );
            return None;
        }
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "md" | "txt" | "markdown")
            && path.file_name().is_some_and(|n| n != "SKILL.md")
        {
            self.warning(
                "prompt-extension",
                span,
                format!("`{written}` is not a .md or .txt file; it is read as plain text"),
            );
        }
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                self.error(
                    "unreadable-file",
                    span,
                    format!("cannot read `{written}`: {e}"),
                );
                return None;
            }
        };
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let prefix = &e.as_bytes()[..at];
                let line = prefix.iter().filter(|&&b| b == b'\n').count() + 1;
                self.error(
                    "not-utf8",
                    span,
                    format!(
                        "`{written}` is not UTF-8 text (invalid byte at line {line}, byte {at})"
                    ),
                )
                .hint = Some("save the file as UTF-8".into());
                return None;
            }
        };
        let text = text
            .strip_prefix('\u{feff}')
            .map(str::to_owned)
            .unwrap_or(text);
        let display = self.dir.join(written);
        let len = text.len();
        let fid = self.map.add(display, text.clone());
        Some(Prompt {
            text,
            source,
            at: Some((fid, 0, len)),
            card: None,
        })
    }

    /// Warn when a FROM path leaves the workflow's folder: the workflow is then no
    /// longer self-contained, and a shared workflow could read files it should not.
    pub(super) fn check_escape(&mut self, written: &str, resolved: &Path, span: Span) {
        let escapes_lexically = Path::new(written).is_absolute()
            || written.starts_with('~')
            || normalize(Path::new(written)).starts_with("..");
        let dir = if self.dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.dir
        };
        let escapes_by_link = match (resolved.canonicalize(), dir.canonicalize()) {
            (Ok(r), Ok(d)) => !r.starts_with(&d),
            _ => false,
        };
        if escapes_lexically || escapes_by_link {
            self.warning(
                "path-escapes-workflow",
                span,
                format!("`{written}` is outside the workflow's folder"),
            )
            .hint = Some(
                "copy the file into the workflow folder so the workflow is self-contained".into(),
            );
        }
    }

    /// Have `d` suggest a file next to `missing` with a similar name, as the
    /// user would write it. Each folder is listed once (the first 1000 names).
    pub(super) fn similar_file_later(&mut self, d: &mut Diagnostic, missing: &Path) {
        let (Some(parent), Some(want)) = (
            missing.parent(),
            missing.file_name().and_then(|n| n.to_str()),
        ) else {
            return;
        };
        let listed = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let names = self
            .dir_listings
            .entry(listed.to_path_buf())
            .or_insert_with(|| {
                let names: Vec<String> = std::fs::read_dir(listed)
                    .map(|entries| {
                        entries
                            .filter_map(|e| e.ok()?.file_name().into_string().ok())
                            .take(1000)
                            .collect()
                    })
                    .unwrap_or_default();
                names.into()
            })
            .clone();
        if names.is_empty() {
            return;
        }
        let rel = parent.strip_prefix(&self.dir).unwrap_or(parent);
        let prefix = if rel.as_os_str().is_empty() {
            String::new()
        } else {
            format!("{}/", rel.to_string_lossy())
        };
        d.suggest_later(want, &names, prefix.trim_start_matches("./"));
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PromptUse {
    Agent,
    Goal,
}

/// YAML-ish front matter (`---` … `---`) of a SKILL.md: its `name`, its
/// `description`, and where the body starts. Only these two keys matter here.
pub(super) fn split_front_matter(text: &str) -> (Option<String>, Option<String>, usize) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (None, None, 0);
    };
    let header_start = text.len() - rest.len();
    let mut offset = header_start;
    let mut name = None;
    let mut description = None;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        let l = line.trim_end();
        if l == "---" {
            return (name, description, offset);
        }
        let unquote = |v: &str| v.trim().trim_matches(['"', '\'']).to_owned();
        if let Some(v) = l.strip_prefix("name:") {
            name = Some(unquote(v));
        } else if let Some(v) = l.strip_prefix("description:") {
            description = Some(unquote(v));
        }
    }
    // No closing `---`: treat the whole file as the body.
    (None, None, 0)
}

pub(super) fn expand_home(p: &str) -> PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    PathBuf::from(p)
}

/// Resolve `.` and `..` lexically (no file system access). Leading `..` that
/// climb above the start are kept, so callers can see the path leaves its base.
pub(super) fn normalize(p: &Path) -> PathBuf {
    let mut parts: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                _ => parts.push(c),
            },
            other => parts.push(other),
        }
    }
    parts.iter().collect()
}
