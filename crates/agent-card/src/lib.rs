//! Agent definition files (`*.agent.md`, CONTRACT §11): one loader for every
//! format that names a persona (Agentfile `AGENT x FROM a.agent.md`,
//! workflow.yaml `agent:`, WORKFLOW.md `agent` steps' `inputs.agent`) and for
//! `validate`/`inspect`/`run` of the file itself.
//!
//! A file is optional YAML metadata (keys case-insensitive, the seed's
//! defaults) and a Markdown body whose headings may also give metadata
//! (`# Title`, the paragraph after it, `# Avatar`, `## System`, `## Rules`);
//! the same field given both ways with different values is an error naming
//! both places. `## Tools` is JavaScript, checked here by describing it
//! through the [`Describe`] the caller passes (the registry of formats passes
//! the script engine's, which evaluates the code in its sandbox with no host
//! functions), so a tool's name and scheme are known before a run. Commands
//! (inline, files, folders) are read here too; remote ones are left for a host
//! with network access.
//!
//! What this crate promises: every problem is a located diagnostic, one call
//! reports all of them, files are read only when regular and under 1 MiB, and
//! nothing here runs a tool, a process or a network request.

pub mod body;
pub mod commands;
pub mod template;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use agentfile_plan::agent::{
    ABILITIES, Abilities, AgentCard, AgentCommand, AgentScript, AgentStatus, ScriptTool,
};
use agentfile_plan::diag::{Diagnostic, FileId, SourceMap, Span};
use agentfile_syntax::yaml;

/// The file name suffix of agent files.
pub const SUFFIX: &str = ".agent.md";

/// Agent and command files larger than this are refused.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Command files read from one folder, at most.
pub const MAX_FOLDER_COMMANDS: usize = 200;

/// What describes the JavaScript of a `## Tools` section: evaluates the code
/// (calling no tool) and returns the tools it defines, in order. The card
/// reader runs no code itself; the registry of formats passes the script
/// engine's through every front end that reads agent files.
pub trait Describe: std::fmt::Debug {
    fn describe(&self, code: &str) -> Result<Vec<ScriptTool>, Undescribed>;
}

/// Why a `## Tools` section's code defines no tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undescribed {
    /// What is wrong, in words (without the position).
    pub message: String,
    /// The 1-based line in the code, when the error has one: the diagnostic
    /// points there rather than at the section's first line.
    pub line: Option<u32>,
    pub column: Option<u32>,
}

/// No script engine: every `## Tools` section is an error saying so. The
/// default of a front end's options, for callers that read no agent files'
/// tools (every real caller passes the registry's engine).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoScripts;

impl Describe for NoScripts {
    fn describe(&self, _code: &str) -> Result<Vec<ScriptTool>, Undescribed> {
        Err(Undescribed {
            message:
                "JavaScript tools cannot be described here: this reader was given no script engine"
                    .to_owned(),
            line: None,
            column: None,
        })
    }
}

/// Whether `path` names an agent file.
pub fn is_agent_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.len() > SUFFIX.len() && n.to_ascii_lowercase().ends_with(SUFFIX))
}

/// The agent's name: the file name without `.agent.md`.
pub fn agent_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name[..name.len().saturating_sub(SUFFIX.len())].to_owned()
}

/// Metadata keys this format defines (lowercase).
const KNOWN: &[&str] = &[
    "version",
    "icon",
    "title",
    "description",
    "status",
    "templateengine",
    "input",
    "recommended",
    "required",
    "commands",
    "abilities",
    "avatar",
    "system",
    "rules",
];

/// Keys other agent file formats use (VS Code custom agents, Claude Code
/// subagents): accepted, not enforced.
const FOREIGN: &[&str] = &[
    "name",
    "model",
    "tools",
    "handoffs",
    "target",
    "argument-hint",
    "infer",
    "mcp-servers",
    "color",
    "tags",
];

/// Read the agent file at `path` (named `written` by the workflow, at
/// `span`), add it to `sources` and load it. Problems go to `diags`.
pub fn load_path(
    sources: &mut SourceMap,
    scripts: &dyn Describe,
    path: &Path,
    written: &str,
    span: Option<Span>,
    diags: &mut Vec<Diagnostic>,
) -> Option<AgentCard> {
    let text = match read_bounded(path) {
        Ok(t) => t,
        Err((code, msg)) => {
            let msg = format!("cannot load agent file `{written}`: {msg}");
            diags.push(match span {
                Some(s) => Diagnostic::error(code, s, msg),
                None => Diagnostic::file_error(code, path, msg),
            });
            return None;
        }
    };
    let file = sources.add(path.to_owned(), text);
    load(sources, scripts, file, written, diags)
}

/// Read a text file of at most [`MAX_FILE_BYTES`]: its text, or a code and
/// message.
fn read_bounded(path: &Path) -> Result<String, (&'static str, String)> {
    let meta = std::fs::metadata(path).map_err(|e| ("missing-file", e.to_string()))?;
    if !meta.is_file() {
        return Err(("unreadable-file", "not a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err((
            "unreadable-file",
            format!(
                "it is {} bytes; agent files are limited to {MAX_FILE_BYTES} bytes",
                meta.len()
            ),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| ("unreadable-file", e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        (
            "not-utf8",
            format!(
                "it is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    Ok(text
        .strip_prefix('\u{feff}')
        .map(str::to_owned)
        .unwrap_or(text))
}

/// Load the agent file already in `sources` as `file`.
pub fn load(
    sources: &mut SourceMap,
    scripts: &dyn Describe,
    file: FileId,
    written: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<AgentCard> {
    let text = sources.file(file).text.clone();
    let path = sources.file(file).path.clone();
    let mut l = Loader {
        sources,
        scripts,
        file,
        text: &text,
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        diags: Vec::new(),
        doc: yaml::Doc::default(),
        keys: HashMap::new(),
    };
    let card = l.run(written);
    let failed = l.diags.iter().any(Diagnostic::is_error);
    diags.append(&mut l.diags);
    if failed { None } else { card }
}

struct Loader<'a> {
    sources: &'a mut SourceMap,
    scripts: &'a dyn Describe,
    file: FileId,
    text: &'a str,
    dir: PathBuf,
    diags: Vec<Diagnostic>,
    doc: yaml::Doc,
    /// Lowercase metadata key → the key as written.
    keys: HashMap<String, String>,
}

/// Values with their JSON pointers.
type Located = Vec<(Value, String)>;

/// The headings of an agent file that act as metadata, and the spans they
/// take out of the free text.
#[derive(Default)]
struct Headings {
    title: Option<FromHeading>,
    description: Option<FromHeading>,
    avatar: Option<FromHeading>,
    system: Option<FromHeading>,
    rules: Option<FromHeading>,
    /// The `## Tools` section's content.
    tools: Option<(usize, usize)>,
    skip: Vec<(usize, usize)>,
}

/// A value given by a heading, and where.
struct FromHeading {
    value: String,
    span: Span,
    what: String,
}

impl Loader<'_> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start, end)
    }

    fn error(&mut self, code: &'static str, span: Span, msg: impl Into<String>) -> &mut Diagnostic {
        self.diags.push(Diagnostic::error(code, span, msg));
        self.diags.last_mut().expect("just pushed")
    }

    fn warning(
        &mut self,
        code: &'static str,
        span: Span,
        msg: impl Into<String>,
    ) -> &mut Diagnostic {
        self.diags.push(Diagnostic::warning(code, span, msg));
        self.diags.last_mut().expect("just pushed")
    }

    /// The span of the metadata value at `pointer` (its key's when `key`).
    fn at(&self, pointer: &str, key: bool) -> Span {
        let a = self.doc.at(pointer);
        match a.key.filter(|_| key) {
            Some((s, e)) => self.span(s, e),
            None => self.span(a.start, a.end),
        }
    }

    /// The metadata value of `key` (any case) and its pointer.
    fn field(&self, key: &str) -> Option<(Value, String)> {
        let written = self.keys.get(key)?;
        let v = self.doc.value.get(written)?.clone();
        Some((v, format!("/{}", yaml::segment(written))))
    }

    /// A metadata field that must be text (numbers and booleans are read as
    /// written: `version: 1.0`).
    fn text_field(&mut self, key: &str) -> Option<(String, Span)> {
        let (v, ptr) = self.field(key)?;
        let span = self.at(&ptr, false);
        match v {
            Value::String(s) => Some((s, span)),
            Value::Number(n) => Some((n.to_string(), span)),
            Value::Bool(b) => Some((b.to_string(), span)),
            Value::Null => None,
            _ => {
                let written = self.keys[key].clone();
                self.error(
                    "agent-metadata",
                    span,
                    format!("`{written}` must be text, not {}", kind(&v)),
                );
                None
            }
        }
    }

    fn run(&mut self, written: &str) -> Option<AgentCard> {
        let body_start = self.front_matter()?;
        let sections = body::sections(self.text, body_start);

        let Headings {
            title: title_h,
            description: desc_h,
            avatar: avatar_h,
            system: system_h,
            rules: rules_h,
            tools: tools_h,
            skip,
        } = self.headings(&sections);

        let title = self.resolve("title", title_h);
        let description = self.resolve("description", desc_h);
        let avatar = self.resolve("avatar", avatar_h);
        let system = self.resolve("system", system_h);
        let rules = self.resolve("rules", rules_h);

        let version = self
            .text_field("version")
            .map_or_else(|| "0.1.0".to_owned(), |(v, _)| v.trim().to_owned());
        let icon = self
            .text_field("icon")
            .map_or_else(|| "🤖".to_owned(), |(v, _)| v.trim().to_owned());
        let status = self.status();
        let engine = self.engine();
        let input = self.field("input").map(|(v, _)| v).filter(|v| !v.is_null());
        let recommended = self.recommended();
        let (required_env, startup) = self.required();
        let abilities = self.abilities();
        let commands = self.commands(written);

        let free = free_text(self.text, body_start, &skip);
        let title = title.unwrap_or_else(|| agent_name(Path::new(written)));
        let description = description.unwrap_or_default();
        let system_src = system
            .or_else(|| (!free.is_empty()).then(|| free.clone()))
            .or_else(|| (!description.trim().is_empty()).then(|| description.clone()))
            .unwrap_or_else(|| title.clone());
        let ctx = serde_json::json!({ "ctx": {
            "input": input.clone().unwrap_or(Value::Null),
            "title": title,
            "description": description,
            "version": version,
            "icon": icon,
        }});
        let system = self.render(engine, &system_src, &ctx, "the system message");
        let rules = rules
            .map(|r| self.render(engine, &r, &ctx, "the rules"))
            .unwrap_or_default();

        let script = tools_h.and_then(|(a, b)| self.script(a, b));
        if let Some((name, span)) = &startup {
            self.check_startup(name, *span, script.as_ref(), tools_h.is_some());
        }
        let startup = startup.map(|(name, _)| {
            script
                .as_ref()
                .and_then(|s| s.tools.iter().find(|t| t.name.eq_ignore_ascii_case(&name)))
                .map_or(name, |t| t.name.clone())
        });

        Some(AgentCard {
            file: written.to_owned(),
            title,
            description,
            version,
            icon,
            avatar,
            status,
            system: system.trim().to_owned(),
            rules: rules.trim().to_owned(),
            recommended,
            input,
            required_env,
            startup,
            abilities,
            commands,
            script,
        })
    }

    /// The headings that act as metadata: `# Title` and its first paragraph,
    /// `# Avatar`, `## System`, `## Rules` and `## Tools` (a second of these
    /// is reported).
    fn headings(&mut self, sections: &[body::Section]) -> Headings {
        let mut h = Headings::default();
        let mut seen: HashMap<String, Span> = HashMap::new();
        for s in sections {
            let name = s.title.to_ascii_lowercase();
            let hspan = self.span(s.heading.0, s.heading.1);
            match (s.level, name.as_str()) {
                (1, "avatar") => {
                    h.skip.push((s.heading.0, s.content.1));
                    if h.avatar.is_none()
                        && let Some(url) = body::first_image(&self.text[s.content.0..s.content.1])
                    {
                        h.avatar = Some(FromHeading {
                            value: url,
                            span: hspan,
                            what: "the first image under `# Avatar`".into(),
                        });
                    }
                }
                (1, _) if h.title.is_none() => {
                    h.skip.push(s.heading);
                    h.title = Some(FromHeading {
                        value: s.title.clone(),
                        span: hspan,
                        what: format!("the heading `# {}`", s.title),
                    });
                    if let Some((a, b)) = body::first_paragraph(self.text, s.content.0, s.content.1)
                    {
                        h.skip.push((a, b));
                        h.description = Some(FromHeading {
                            value: self.text[a..b].to_owned(),
                            span: self.span(a, b),
                            what: format!("the first paragraph after `# {}`", s.title),
                        });
                    }
                }
                (2, "system" | "rules" | "tools") => {
                    h.skip.push((s.heading.0, s.content.1));
                    if let Some(first) = seen.get(&name).copied() {
                        self.error(
                            "duplicate-section",
                            hspan,
                            format!("a second `## {}` section", s.title),
                        )
                        .note(first, "the first one is here")
                        .hint = Some("merge the two sections into one".into());
                        continue;
                    }
                    seen.insert(name.clone(), hspan);
                    let content = self.text[s.content.0..s.content.1].trim().to_owned();
                    let from = FromHeading {
                        value: content,
                        span: hspan,
                        what: format!("the `## {}` section", s.title),
                    };
                    match name.as_str() {
                        "system" => h.system = Some(from),
                        "rules" => h.rules = Some(from),
                        _ => h.tools = Some(s.content),
                    }
                }
                _ => {}
            }
        }
        h
    }

    /// `required.startup` must name a tool of `## Tools` (when the section
    /// was read, or is missing).
    fn check_startup(
        &mut self,
        name: &str,
        span: Span,
        script: Option<&agentfile_plan::agent::AgentScript>,
        has_tools: bool,
    ) {
        let known: Vec<String> = script
            .map(|s| s.tools.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default();
        let found = known.iter().find(|k| k.eq_ignore_ascii_case(name)).cloned();
        if found.is_none() && (script.is_some() || !has_tools) {
            let msg = if !has_tools {
                format!("`required.startup` names `{name}`, but the file has no `## Tools` section")
            } else {
                format!("`required.startup` names `{name}`, which `## Tools` does not define")
            };
            let d = self.error("unknown-startup", span, msg);
            d.hint = Some(if known.is_empty() {
                "define it under `## Tools` as `{ name: { fn, scheme } }`".into()
            } else {
                format!("the tools are: {}", known.join(", "))
            });
            if let Some(s) = agentfile_plan::diag::suggest(name, known.iter().map(String::as_str)) {
                d.hint = Some(format!("did you mean `{s}`?"));
            }
        }
    }

    /// Parse the front matter, if the file has one; returns where the body
    /// starts (`None`: the metadata is unreadable, reported).
    fn front_matter(&mut self) -> Option<usize> {
        let text = self.text;
        let first_end = text.find('\n').map_or(text.len(), |i| i);
        if text[..first_end].trim_end() != "---" {
            return Some(0);
        }
        let mut pos = (first_end + 1).min(text.len());
        let yaml_start = pos;
        while pos < text.len() {
            let end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
            let line = text[pos..end].trim_end();
            if line == "---" || line == "..." {
                let fixed = fix_argument_hints(&text[yaml_start..pos]);
                let doc = match yaml::parse(&fixed, yaml_start) {
                    Ok(d) => d,
                    Err(e) => {
                        let d = self.error(e.code, self.span(e.start, e.end), e.message);
                        d.hint = e.hint;
                        return None;
                    }
                };
                self.doc = doc;
                match &*self.doc.value {
                    Value::Object(map) => {
                        let mut firsts: HashMap<String, String> = HashMap::new();
                        let mut dups = Vec::new();
                        for k in map.keys() {
                            let low = k.to_ascii_lowercase();
                            match firsts.get(&low) {
                                Some(first) => dups.push((first.clone(), k.clone())),
                                None => {
                                    firsts.insert(low, k.clone());
                                }
                            }
                        }
                        for (first, again) in dups {
                            let span = self.at(&format!("/{}", yaml::segment(&again)), true);
                            let note = self.at(&format!("/{}", yaml::segment(&first)), true);
                            self.error(
                                "duplicate-key",
                                span,
                                format!("`{again}` repeats `{first}`: metadata keys are case-insensitive"),
                            )
                            .note(note, "first given here");
                        }
                        self.keys = firsts;
                        self.unknown_keys();
                    }
                    Value::Null => {}
                    other => {
                        let what = kind(other);
                        self.error(
                            "agent-metadata",
                            self.span(yaml_start, pos),
                            format!("the metadata must be a YAML mapping of fields, not {what}"),
                        )
                        .hint = Some("write `key: value` lines such as `title: Reviewer`".into());
                        return None;
                    }
                }
                return Some((end + 1).min(text.len()));
            }
            pos = end + 1;
        }
        self.error(
            "unclosed-front-matter",
            self.span(0, first_end),
            "the metadata never closes: no `---` line after the opening one",
        )
        .hint = Some("end the YAML metadata with a line holding only `---`".into());
        None
    }

    fn unknown_keys(&mut self) {
        let mut keys: Vec<(String, String)> = self
            .keys
            .iter()
            .map(|(l, k)| (l.clone(), k.clone()))
            .collect();
        keys.sort();
        for (low, written) in keys {
            if KNOWN.contains(&low.as_str()) || FOREIGN.contains(&low.as_str()) {
                continue;
            }
            let span = self.at(&format!("/{}", yaml::segment(&written)), true);
            let d = self.warning(
                "unknown-field",
                span,
                format!("`{written}` is not an agent file field; it is ignored"),
            );
            d.hint = Some(match agentfile_plan::diag::suggest(&low, KNOWN.iter().copied()) {
                Some("templateengine") => "did you mean `templateEngine`?".to_owned(),
                Some(s) => format!("did you mean `{s}`?"),
                None => "the fields are: version, icon, title, description, status, templateEngine, input, recommended, required, commands, abilities".to_owned(),
            });
        }
    }

    /// A field given by metadata and/or a heading: the value, or an error when
    /// both give it differently.
    fn resolve(&mut self, key: &str, heading: Option<FromHeading>) -> Option<String> {
        let meta = self.text_field(key);
        match (meta, heading) {
            (Some((m, mspan)), Some(h)) => {
                if !same(&m, &h.value) {
                    let written = self.keys[key].clone();
                    self.error(
                        "metadata-conflict",
                        h.span,
                        format!(
                            "`{key}` is given twice with different values: `{written}: {}` in the metadata and {}",
                            clip(&m),
                            h.what
                        ),
                    )
                    .note(mspan, format!("the metadata's `{written}` is here"))
                    .hint = Some(format!(
                        "keep one of them: remove `{written}` from the metadata, or make the two agree"
                    ));
                }
                Some(m)
            }
            (Some((m, _)), None) => Some(m),
            (None, Some(h)) => Some(h.value),
            (None, None) => None,
        }
    }

    fn status(&mut self) -> AgentStatus {
        let Some((v, span)) = self.text_field("status") else {
            return AgentStatus::Active;
        };
        let status = match v.trim().to_ascii_lowercase().as_str() {
            "active" | "" => AgentStatus::Active,
            "deprecated" => AgentStatus::Deprecated,
            "disabled" => AgentStatus::Disabled,
            other => {
                let d = self.error(
                    "agent-status",
                    span,
                    format!("`status: {other}` is not a status; it is one of active, deprecated, disabled"),
                );
                if let Some(s) =
                    agentfile_plan::diag::suggest(other, ["active", "deprecated", "disabled"])
                {
                    d.hint = Some(format!("did you mean `{s}`?"));
                }
                return AgentStatus::Active;
            }
        };
        match status {
            AgentStatus::Disabled => {
                self.error(
                    "agent-disabled",
                    span,
                    "this agent is disabled (`status: disabled`): it does not run",
                )
                .hint = Some("set `status: active` to use it again".into());
            }
            AgentStatus::Deprecated => {
                self.warning("agent-deprecated", span, "this agent is deprecated")
                    .hint = Some("it still runs; its author means to retire it".into());
            }
            AgentStatus::Active => {}
        }
        status
    }

    /// `templateEngine`: `true` for Handlebars (the default), `false` for none.
    fn engine(&mut self) -> bool {
        let Some((v, span)) = self.text_field("templateengine") else {
            return self.field("templateengine").is_none();
        };
        match v.trim().to_ascii_lowercase().as_str() {
            "hbs" | "handlebars" => true,
            "" => false,
            other => {
                self.error(
                    "template-engine",
                    span,
                    format!("`templateEngine: {other}` is not supported; the engines are `hbs` (Handlebars) and `\"\"` (none)"),
                )
                .hint = Some("write `templateEngine: hbs`, or `templateEngine: \"\"` to send the text as written".into());
                false
            }
        }
    }

    /// Render `src` with Handlebars when the engine is on, within the
    /// bounds of [`template`].
    fn render(&mut self, on: bool, src: &str, ctx: &Value, what: &str) -> String {
        if !on || !src.contains("{{") {
            return src.to_owned();
        }
        let at = self.locate(src);
        let f = match template::render(src, ctx) {
            Ok(s) => return s,
            Err(f) => f,
        };
        let span = match f.at {
            Some((l, c)) if at.end > at.start => {
                let base = at.start as usize;
                let mut off = base;
                for _ in 1..l {
                    match self.text[off..].find('\n') {
                        Some(i) => off += i + 1,
                        None => break,
                    }
                }
                let mut s = (off + c.saturating_sub(1)).min(self.text.len());
                while !self.text.is_char_boundary(s) {
                    s -= 1;
                }
                self.span(s, s)
            }
            _ => at,
        };
        let message = match f.kind {
            template::FailureKind::Invalid => {
                format!("{what} is not a valid Handlebars template: {}", f.message)
            }
            template::FailureKind::Limit => format!("{what} {}", f.message),
        };
        self.error("template", span, message).hint = Some(f.hint.unwrap_or_else(|| {
            "templates read `{{ctx.input}}`, `{{ctx.title}}`…; set `templateEngine: \"\"` to send the text as written".into()
        }));
        src.to_owned()
    }

    /// Where `snippet` is in the file (its first occurrence), for messages
    /// about derived text.
    fn locate(&self, snippet: &str) -> Span {
        let probe = snippet.trim();
        let probe = &probe[..probe.len().min(probe.find('\n').unwrap_or(probe.len()))];
        match self.text.find(probe) {
            Some(i) if !probe.is_empty() => self.span(i, i + probe.len()),
            _ => self.span(0, 0),
        }
    }

    fn recommended(&mut self) -> Option<Value> {
        let (v, ptr) = self.field("recommended")?;
        match &v {
            Value::Null => None,
            Value::Object(map) => {
                for (k, item) in map {
                    let p = format!("{ptr}/{}", yaml::segment(k));
                    let low = k.to_ascii_lowercase();
                    if low != "models" && low != "capabilities" {
                        let span = self.at(&p, true);
                        self.warning(
                            "unknown-field",
                            span,
                            format!("`recommended.{k}` is not a field; recommended holds `models` and `capabilities`"),
                        );
                    } else if !is_text_list(item) {
                        let span = self.at(&p, false);
                        self.error(
                            "agent-metadata",
                            span,
                            format!("`recommended.{k}` must be a list of names"),
                        );
                    }
                }
                Some(v)
            }
            other => {
                let span = self.at(&ptr, false);
                self.error(
                    "agent-metadata",
                    span,
                    format!(
                        "`recommended` must be a mapping with `models` and `capabilities`, not {}",
                        kind(other)
                    ),
                );
                None
            }
        }
    }

    /// `required.env` and `required.startup` (with its span).
    fn required(&mut self) -> (Vec<String>, Option<(String, Span)>) {
        let Some((v, ptr)) = self.field("required") else {
            return (Vec::new(), None);
        };
        let map = match v {
            Value::Null => return (Vec::new(), None),
            Value::Object(m) => m,
            other => {
                let span = self.at(&ptr, false);
                self.error(
                    "agent-metadata",
                    span,
                    format!(
                        "`required` must be a mapping with `env` and `startup`, not {}",
                        kind(&other)
                    ),
                );
                return (Vec::new(), None);
            }
        };
        let mut env = Vec::new();
        let mut startup = None;
        for (k, item) in &map {
            let p = format!("{ptr}/{}", yaml::segment(k));
            match k.to_ascii_lowercase().as_str() {
                "env" => {
                    let list: Vec<(String, String)> = match item {
                        Value::String(s) => vec![(s.clone(), p.clone())],
                        Value::Array(items) => items
                            .iter()
                            .enumerate()
                            .map(|(i, v)| {
                                (
                                    v.as_str().map(str::to_owned).unwrap_or_default(),
                                    format!("{p}/{i}"),
                                )
                            })
                            .collect(),
                        Value::Null => Vec::new(),
                        other => {
                            let span = self.at(&p, false);
                            self.error(
                                "agent-metadata",
                                span,
                                format!(
                                    "`required.env` must be a list of variable names, not {}",
                                    kind(other)
                                ),
                            );
                            Vec::new()
                        }
                    };
                    for (name, at) in list {
                        if is_env_name(&name) {
                            env.push(name);
                        } else {
                            let span = self.at(&at, false);
                            self.error(
                                "agent-metadata",
                                span,
                                format!("`{name}` is not an environment variable name"),
                            )
                            .hint = Some("names are letters, digits and `_`, not starting with a digit (`GITHUB_TOKEN`)".into());
                        }
                    }
                }
                "startup" => match item {
                    Value::String(s) if !s.trim().is_empty() => {
                        startup = Some((s.trim().to_owned(), self.at(&p, false)));
                    }
                    Value::Null => {}
                    other => {
                        let span = self.at(&p, false);
                        self.error(
                            "agent-metadata",
                            span,
                            format!(
                                "`required.startup` must name one tool of `## Tools`, not {}",
                                kind(other)
                            ),
                        );
                    }
                },
                _ => {
                    let span = self.at(&p, true);
                    self.warning(
                        "unknown-field",
                        span,
                        format!(
                            "`required.{k}` is not a field; required holds `env` and `startup`"
                        ),
                    );
                }
            }
        }
        (env, startup)
    }

    fn abilities(&mut self) -> Option<Abilities> {
        let (v, ptr) = self.field("abilities")?;
        let (allow, deny): (Located, Located) = match &v {
            Value::Null => return None,
            // A plain list is what is allowed.
            Value::Array(items) => (
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| (x.clone(), format!("{ptr}/{i}")))
                    .collect(),
                Vec::new(),
            ),
            Value::Object(map) => {
                let mut allow = Vec::new();
                let mut deny = Vec::new();
                for (k, item) in map {
                    let p = format!("{ptr}/{}", yaml::segment(k));
                    let target = match k.to_ascii_lowercase().as_str() {
                        "allow" => &mut allow,
                        "deny" => &mut deny,
                        _ => {
                            let span = self.at(&p, true);
                            self.error(
                                "agent-metadata",
                                span,
                                format!("`abilities.{k}` is not a field; abilities has `allow` and `deny` lists"),
                            );
                            continue;
                        }
                    };
                    match item {
                        Value::Array(items) => target.extend(
                            items
                                .iter()
                                .enumerate()
                                .map(|(i, x)| (x.clone(), format!("{p}/{i}"))),
                        ),
                        Value::String(_) => target.push((item.clone(), p.clone())),
                        Value::Null => {}
                        other => {
                            let span = self.at(&p, false);
                            self.error(
                                "agent-metadata",
                                span,
                                format!(
                                    "`abilities.{k}` must be a list of abilities, not {}",
                                    kind(other)
                                ),
                            );
                        }
                    }
                }
                (allow, deny)
            }
            other => {
                let span = self.at(&ptr, false);
                self.error(
                    "agent-metadata",
                    span,
                    format!(
                        "`abilities` must be `{{allow: [...], deny: [...]}}` or a list, not {}",
                        kind(other)
                    ),
                );
                return None;
            }
        };
        let allow = self.ability_list(allow);
        let deny = self.ability_list(deny);
        for (name, span) in &deny {
            if let Some((_, first)) = allow.iter().find(|(a, _)| a == name) {
                self.error(
                    "ability-overlap",
                    *span,
                    format!("ability `{name}` is both allowed and denied"),
                )
                .note(*first, "allowed here")
                .hint = Some("an ability belongs in one list: deny always wins, so the allow entry has no effect".into());
            }
        }
        Some(Abilities {
            allow: allow.into_iter().map(|(a, _)| a).collect(),
            deny: deny.into_iter().map(|(a, _)| a).collect(),
        })
    }

    /// Check and normalise a list of abilities.
    fn ability_list(&mut self, items: Vec<(Value, String)>) -> Vec<(String, Span)> {
        let mut out = Vec::new();
        for (v, p) in items {
            let span = self.at(&p, false);
            let Some(raw) = v.as_str() else {
                self.error(
                    "unknown-ability",
                    span,
                    format!(
                        "an ability is a name such as `fs` or `sh:git`, not {}",
                        kind(&v)
                    ),
                );
                continue;
            };
            let name = raw.trim().to_ascii_lowercase();
            let ok = match name.split_once(':') {
                Some(("sh", cmd)) => {
                    !cmd.is_empty()
                        && !cmd.contains(|c: char| c.is_whitespace() || "/;|&$`<>()".contains(c))
                }
                Some(_) => false,
                None => ABILITIES.contains(&name.as_str()),
            };
            if !ok {
                let d = self.error(
                    "unknown-ability",
                    span,
                    format!(
                        "`{raw}` is not an ability; the abilities are {}, and `sh:<command>`",
                        ABILITIES.join(", ")
                    ),
                );
                if let Some(s) = agentfile_plan::diag::suggest(&name, ABILITIES.iter().copied()) {
                    d.hint = Some(format!("did you mean `{s}`?"));
                } else if name.contains(':') {
                    d.hint =
                        Some("only `sh` takes a scope: `sh:git` allows the `git` command".into());
                }
                continue;
            }
            if out.iter().any(|(a, _)| *a == name) {
                continue;
            }
            out.push((name, span));
        }
        out
    }

    fn commands(&mut self, written: &str) -> Vec<AgentCommand> {
        let Some((v, ptr)) = self.field("commands") else {
            return Vec::new();
        };
        let items = match v {
            Value::Null => return Vec::new(),
            Value::Array(items) => items,
            other => {
                let span = self.at(&ptr, false);
                self.error(
                    "command",
                    span,
                    format!(
                        "`commands` must be a list (paths, URLs or inline commands), not {}",
                        kind(&other)
                    ),
                );
                return Vec::new();
            }
        };
        let mut out: Vec<(AgentCommand, Span)> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = format!("{ptr}/{i}");
            let span = self.at(&p, false);
            match item {
                Value::String(s) if s.starts_with("http://") || s.starts_with("https://") => {
                    self.warning(
                        "remote-command",
                        span,
                        format!("commands at `{s}` are not loaded: remote commands are not fetched by `validate`, `inspect` or the servers"),
                    )
                    .hint = Some("download the command files into the repository and list their folder instead".into());
                }
                Value::String(s) => {
                    for c in self.command_files(s, span, written) {
                        out.push((c, span));
                    }
                }
                Value::Object(_) => {
                    if let Some(c) = self.inline_command(item, &p) {
                        out.push((c, span));
                    }
                }
                other => {
                    self.error(
                        "command",
                        span,
                        format!(
                            "a command is a path, a URL or `{{name, description, body}}`, not {}",
                            kind(other)
                        ),
                    );
                }
            }
        }
        let mut seen: HashMap<String, Span> = HashMap::new();
        let mut kept = Vec::new();
        for (c, span) in out {
            let low = c.name.to_ascii_lowercase();
            if let Some(first) = seen.get(&low) {
                self.error(
                    "command",
                    span,
                    format!("a second command named `{}`", c.name),
                )
                .note(*first, "the first one")
                .hint =
                    Some("command names must be unique (case-insensitively); rename one".into());
                continue;
            }
            seen.insert(low, span);
            kept.push(c);
        }
        kept
    }

    fn inline_command(&mut self, item: &Value, p: &str) -> Option<AgentCommand> {
        let span = self.at(p, false);
        let get = |k: &str| -> Option<(&String, &Value)> {
            item.as_object()?
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(k))
        };
        let mut missing = Vec::new();
        let mut text = |this: &mut Self, k: &str| -> Option<String> {
            match get(k) {
                Some((_, Value::String(s))) if !s.trim().is_empty() => Some(s.clone()),
                Some((key, v)) => {
                    let at = this.at(&format!("{p}/{}", yaml::segment(key)), false);
                    let what = if v.is_string() {
                        "empty".to_owned()
                    } else {
                        kind(v)
                    };
                    this.error(
                        "command",
                        at,
                        format!("the command's `{k}` must be non-empty text; it is {what}"),
                    );
                    None
                }
                None => {
                    missing.push(k.to_owned());
                    None
                }
            }
        };
        let name = text(self, "name");
        let description = text(self, "description");
        let body = text(self, "body");
        if !missing.is_empty() {
            let who = name
                .as_deref()
                .map_or("an inline command".to_owned(), |n| format!("command `{n}`"));
            self.error(
                "command",
                span,
                format!("{who} has no `{}`", missing.join("`, `")),
            )
            .hint = Some("an inline command needs `name`, `description` and `body` (`argument-hint` is optional)".into());
        }
        let arguments = match get("argument-hint") {
            None => Vec::new(),
            Some((key, v)) => match commands::hint_names(v) {
                Some(names) => names,
                None => {
                    let at = self.at(&format!("{p}/{}", yaml::segment(key)), false);
                    self.error(
                        "command",
                        at,
                        "`argument-hint` is a string (`[target] [framework]`) or a list of names",
                    );
                    Vec::new()
                }
            },
        };
        if let Some(obj) = item.as_object() {
            for key in obj.keys() {
                let low = key.to_ascii_lowercase();
                if !["name", "description", "body", "argument-hint"].contains(&low.as_str()) {
                    let at = self.at(&format!("{p}/{}", yaml::segment(key)), true);
                    self.warning(
                        "unknown-field",
                        at,
                        format!("`{key}` is not a command field; it is ignored"),
                    );
                }
            }
        }
        let name = name?;
        let at = self.at(&format!("{p}/name"), false);
        if !self.command_name_ok(&name, at) {
            return None;
        }
        Some(AgentCommand {
            name: name.trim().to_owned(),
            description: description?.trim().to_owned(),
            arguments,
            body: body?,
            source: "inline".into(),
        })
    }

    fn command_name_ok(&mut self, name: &str, span: Span) -> bool {
        let ok = !name.trim().is_empty()
            && name
                .trim()
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            self.error(
                "command",
                span,
                format!("`{name}` is not a command name: use letters, digits, `-` and `_` (it becomes the prompt `<agent>.{name}`)"),
            );
        }
        ok
    }

    /// A local command file, or every `*.md` in a local folder.
    fn command_files(&mut self, written: &str, span: Span, agent: &str) -> Vec<AgentCommand> {
        let path = self.dir.join(written);
        if escapes(&self.dir, &path) {
            self.error(
                "command",
                span,
                format!("`{written}` lies outside the agent file's folder"),
            )
            .hint = Some("keep commands beside the agent file (`./commands`)".into());
            return Vec::new();
        }
        if path.is_dir() {
            let mut files: Vec<PathBuf> = match std::fs::read_dir(&path) {
                Ok(rd) => rd
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| {
                        p.is_file() && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("md"))
                    })
                    .collect(),
                Err(e) => {
                    self.error(
                        "command",
                        span,
                        format!("cannot read the command folder `{written}`: {e}"),
                    );
                    return Vec::new();
                }
            };
            files.sort();
            if files.len() > MAX_FOLDER_COMMANDS {
                self.warning(
                    "command",
                    span,
                    format!("`{written}` holds {} command files; the first {MAX_FOLDER_COMMANDS} are read", files.len()),
                );
                files.truncate(MAX_FOLDER_COMMANDS);
            }
            if files.is_empty() {
                self.warning(
                    "command",
                    span,
                    format!("the command folder `{written}` holds no `.md` files"),
                );
            }
            let base = written.trim_end_matches('/');
            return files
                .iter()
                .filter_map(|f| {
                    let name = f.file_name()?.to_string_lossy().into_owned();
                    self.command_file(f, &format!("{base}/{name}"), span, agent)
                })
                .collect();
        }
        if !path.exists() {
            self.error(
                "command",
                span,
                format!(
                    "cannot find the command file or folder `{written}` (looked for {})",
                    path.display()
                ),
            )
            .hint = Some("paths are relative to the agent file".into());
            return Vec::new();
        }
        self.command_file(&path, written, span, agent)
            .into_iter()
            .collect()
    }

    /// One command file: optional front matter (`description`,
    /// `argument-hint`), then the body; named after the file.
    fn command_file(
        &mut self,
        path: &Path,
        written: &str,
        span: Span,
        _agent: &str,
    ) -> Option<AgentCommand> {
        let text = match read_bounded(path) {
            Ok(t) => t,
            Err((_, msg)) => {
                self.error(
                    "command",
                    span,
                    format!("cannot read command file `{written}`: {msg}"),
                );
                return None;
            }
        };
        let stem = path
            .file_name()?
            .to_string_lossy()
            .trim_end_matches(".md")
            .trim_end_matches(".MD")
            .to_owned();
        if !self.command_name_ok(&stem, span) {
            return None;
        }
        let (meta, body) = split_command_file(&text);
        let body = body.trim().to_owned();
        if body.is_empty() {
            let fid = self.sources.add(path.to_owned(), text.clone());
            self.error(
                "command",
                Span::new(
                    fid,
                    0,
                    text.len().min(text.find('\n').unwrap_or(text.len())),
                ),
                format!("command `{stem}` (`{written}`) has no body: nothing to send"),
            )
            .hint = Some("write the command's text after its front matter".into());
            return None;
        }
        let description = meta
            .get("description")
            .and_then(Value::as_str)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| clip(body.lines().next().unwrap_or("")));
        let arguments = meta
            .get("argument-hint")
            .and_then(commands::hint_names)
            .unwrap_or_default();
        Some(AgentCommand {
            name: stem,
            description,
            arguments,
            body,
            source: written.to_owned(),
        })
    }

    /// Check the `## Tools` JavaScript by describing its tools.
    fn script(&mut self, start: usize, end: usize) -> Option<AgentScript> {
        let (a, b) = body::code_block(self.text, start, end);
        let code = self.text[a..b].to_owned();
        let line0 = self.sources.file(self.file).line(a as u32);
        let section = self.span(start, end.min(start + 1));
        if code.trim().is_empty() {
            self.error("js-tools", section, "the `## Tools` section holds no code")
                .hint =
                Some("write a function body that returns `{ name: { fn, scheme } }`".into());
            return None;
        }
        match self.scripts.describe(&code) {
            Ok(tools) => Some(AgentScript {
                code,
                line: line0,
                tools,
            }),
            Err(e) => {
                let span = match e.line {
                    Some(l) => {
                        let file = self.sources.file(self.file);
                        let line = line0 + l - 1;
                        let text = file.line_text(line).to_owned();
                        let start = line_start(self.text, a, l);
                        let col = e.column.unwrap_or(1).saturating_sub(1) as usize;
                        let s = (start + col.min(text.len())).min(self.text.len());
                        self.span(s, (s + 1).min(start + text.len()).max(s))
                    }
                    None => self.span(a, a + code.find('\n').unwrap_or(code.len())),
                };
                let e = e.message;
                self.error("js-tools", span, format!("the `## Tools` code does not define tools: {e}"))
                    .hint = Some("the section is a function body that returns `{ name: { fn, scheme: { name, description, parameters } } }`".into());
                None
            }
        }
    }
}

/// Whether `path` (after symlinks) lies outside `dir`.
fn escapes(dir: &Path, path: &Path) -> bool {
    let base = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    match path.canonicalize() {
        Ok(p) => !p.starts_with(&base),
        // Not there: judged by its words (reported as missing later).
        Err(_) => path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir)),
    }
}

/// The byte offset where line `n` (1-based) of the code at `from` starts.
fn line_start(text: &str, from: usize, n: u32) -> usize {
    let mut pos = from;
    for _ in 1..n {
        match text[pos..].find('\n') {
            Some(i) => pos += i + 1,
            None => break,
        }
    }
    pos
}

/// A command file's front matter (as a JSON object) and its body.
fn split_command_file(text: &str) -> (serde_json::Map<String, Value>, &str) {
    let empty = serde_json::Map::new();
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (empty, text);
    };
    let Some(close) = rest.find("\n---") else {
        return (empty, text);
    };
    let yaml_text = &rest[..close + 1];
    let after = &rest[close + 4..];
    let body = after.split_once('\n').map_or("", |(_, b)| b);
    let meta = match yaml::parse(&fix_argument_hints(yaml_text), 0) {
        Ok(doc) => match &*doc.value {
            Value::Object(m) => m
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                .collect(),
            _ => empty,
        },
        Err(_) => empty,
    };
    (meta, body)
}

/// `argument-hint: [a] [b]`, as the seed and Cursor/Claude command files
/// write it, is not YAML; it is rewritten, byte for byte in place (so every
/// position stays right), to the flow list `[a,  b]`.
fn fix_argument_hints(yaml: &str) -> std::borrow::Cow<'_, str> {
    if !yaml.contains("argument-hint") {
        return std::borrow::Cow::Borrowed(yaml);
    }
    let mut out = String::with_capacity(yaml.len());
    for line in yaml.split_inclusive('\n') {
        let Some(i) = line.find("argument-hint:") else {
            out.push_str(line);
            continue;
        };
        let (head, value) = line.split_at(i + "argument-hint:".len());
        let v = value.trim();
        let groups = v.matches('[').count();
        let simple = v.starts_with('[')
            && v.ends_with(']')
            && groups > 1
            && groups == v.matches(']').count()
            && !v.contains(['"', '\'', '{', '#']);
        if !simple {
            out.push_str(line);
            continue;
        }
        out.push_str(head);
        // `]` then blanks then `[` between two items: `,` … ` `.
        let bytes: Vec<char> = value.chars().collect();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if c == ']' {
                let mut j = i + 1;
                while j < bytes.len() && (bytes[j] == ' ' || bytes[j] == '\t') {
                    j += 1;
                }
                if j < bytes.len() && bytes[j] == '[' {
                    out.push(',');
                    out.extend(&bytes[i + 1..j]);
                    out.push(' ');
                    i = j + 1;
                    continue;
                }
            }
            out.push(c);
            i += 1;
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The body text outside the sections that act as metadata.
fn free_text(text: &str, start: usize, skip: &[(usize, usize)]) -> String {
    let mut skip: Vec<(usize, usize)> = skip.to_vec();
    skip.sort();
    let mut out = String::new();
    let mut pos = start;
    for (a, b) in skip {
        if a > pos {
            out.push_str(&text[pos..a]);
        }
        pos = pos.max(b);
    }
    if pos < text.len() {
        out.push_str(&text[pos..]);
    }
    out.trim().to_owned()
}

/// Equal ignoring case and surrounding whitespace.
fn same(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

fn clip(s: &str) -> String {
    let line = s.trim().lines().next().unwrap_or("");
    if line.chars().count() > 60 {
        format!("{}…", line.chars().take(60).collect::<String>())
    } else {
        line.to_owned()
    }
}

fn kind(v: &Value) -> String {
    match v {
        Value::Null => "empty".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(_) => "a number".into(),
        Value::String(_) => "text".into(),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}

fn is_text_list(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().all(Value::is_string),
        Value::String(_) | Value::Null => true,
        _ => false,
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Text sent as written: `$` is not a variable in an agent file.
pub fn literal(s: &str) -> String {
    s.replace('$', "$$")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketed_argument_hints_become_lists_in_place() {
        let src = "a: 1\nargument-hint: [target-name] [framework]\nb: 2\n";
        let fixed = fix_argument_hints(src);
        assert_eq!(fixed.len(), src.len());
        let doc = yaml::parse(&fixed, 0).unwrap();
        assert_eq!(
            doc.value["argument-hint"],
            serde_json::json!(["target-name", "framework"])
        );
        assert_eq!(doc.value["b"], 2);
        let three = "argument-hint:  [a]  [b c] [d]\n";
        let doc = yaml::parse(&fix_argument_hints(three), 0).unwrap();
        assert_eq!(
            doc.value["argument-hint"],
            serde_json::json!(["a", "b c", "d"])
        );
        let one = "argument-hint: [message]\n";
        assert_eq!(fix_argument_hints(one), one);
    }
    /// A card reader given no script engine says so at the `## Tools` code,
    /// and what the engine reports is located at its line.
    #[test]
    fn tools_are_described_by_the_engine_passed_in() {
        #[derive(Debug)]
        struct OneTool;
        impl Describe for OneTool {
            fn describe(&self, code: &str) -> Result<Vec<ScriptTool>, Undescribed> {
                if code.contains("broken") {
                    return Err(Undescribed {
                        message: "unexpected token".to_owned(),
                        line: Some(2),
                        column: Some(3),
                    });
                }
                Ok(vec![ScriptTool {
                    name: "shout".to_owned(),
                    description: String::new(),
                    parameters: serde_json::json!({"type": "object"}),
                }])
            }
        }
        let with_tools =
            |code: &str| format!("# Loud\n\nShouts.\n\n## Tools\n\n```js\n{code}\n```\n");
        let read = |text: String, scripts: &dyn Describe| {
            let mut sources = SourceMap::default();
            let file = sources.add(PathBuf::from("loud.agent.md"), text);
            let mut diags = Vec::new();
            let card = load(&mut sources, scripts, file, "loud.agent.md", &mut diags);
            let shown: Vec<String> = diags
                .iter()
                .map(|d| {
                    let span = d.span.expect("located");
                    let (line, _) = sources.file(span.file).line_col(span.start);
                    format!("{line}: {}", d.message)
                })
                .collect();
            (card, shown)
        };
        let (card, diags) = read(with_tools("return { shout: {} };"), &OneTool);
        assert_eq!(diags, Vec::<String>::new());
        let tools = card.unwrap().script.unwrap().tools;
        assert_eq!(tools[0].name, "shout");
        let (card, diags) = read(with_tools("return {\n  broken"), &OneTool);
        assert!(card.is_none());
        assert_eq!(
            diags,
            ["9: the `## Tools` code does not define tools: unexpected token"]
        );
        let (card, diags) = read(with_tools("return {};"), &NoScripts);
        assert!(card.is_none());
        assert_eq!(
            diags,
            [
                "8: the `## Tools` code does not define tools: JavaScript tools cannot be described here: this reader was given no script engine"
            ]
        );
    }
}
