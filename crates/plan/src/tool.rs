//! What tools are called: the built-in tools by name, with the description
//! and argument schema each is offered to the model with, and the name an MCP
//! server's tool is offered under.
//!
//! One table for every layer: a front end resolves a step's tool against it
//! (and suggests a name when one does not resolve), the policy has a section
//! per built-in tool, the toolbox offers them. It is data and pure
//! functions only; what a tool does when called lives in the tools crate
//! (re-exported there as `policy::Tool`, `builtin::definition` and
//! `mcp::exposed_name`).

use std::fmt;

use serde_json::{Value, json};

/// A built-in tool (each has a section in the policy file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    Read,
    Write,
    Edit,
    Glob,
    Grep,
    Ls,
    Bash,
    WebFetch,
    WebSearch,
    MemoryRead,
    MemoryWrite,
}

impl Tool {
    /// Every built-in tool, in the order they are offered to the model.
    pub const ALL: [Tool; 11] = [
        Tool::Read,
        Tool::Write,
        Tool::Edit,
        Tool::Glob,
        Tool::Grep,
        Tool::Ls,
        Tool::Bash,
        Tool::WebFetch,
        Tool::WebSearch,
        Tool::MemoryRead,
        Tool::MemoryWrite,
    ];

    /// The tool's name, as the model calls it and as its policy section is named.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Read => "read",
            Tool::Write => "write",
            Tool::Edit => "edit",
            Tool::Glob => "glob",
            Tool::Grep => "grep",
            Tool::Ls => "ls",
            Tool::Bash => "bash",
            Tool::WebFetch => "web_fetch",
            Tool::WebSearch => "web_search",
            Tool::MemoryRead => "memory_read",
            Tool::MemoryWrite => "memory_write",
        }
    }

    /// The built-in tool called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Tools whose argument is a path matched against `allow`/`deny`.
    pub fn is_path_tool(self) -> bool {
        matches!(
            self,
            Tool::Read | Tool::Write | Tool::Edit | Tool::Glob | Tool::Grep | Tool::Ls
        )
    }

    /// The tools that reach the web.
    pub fn is_web(self) -> bool {
        matches!(self, Tool::WebFetch | Tool::WebSearch)
    }

    /// What the model is told the tool does.
    pub fn description(self) -> &'static str {
        match self {
            Tool::Read => {
                "Read a text file. Paths are relative to the workspace. Long files are cut at a size cap; use offset/limit (in lines) to read further."
            }
            Tool::Write => {
                "Create or overwrite a file with the given content, creating parent directories as needed."
            }
            Tool::Edit => {
                "Replace exact text in a file. `old` must occur exactly once (include surrounding lines to make it unique) unless replace_all is true."
            }
            Tool::Glob => {
                "Find files by name pattern: `*` matches within one path segment, `**` any number of segments (e.g. `src/**/*.rs`). Honours .gitignore unless respect_gitignore is false."
            }
            Tool::Grep => {
                "Search file contents with a regular expression (Rust regex syntax) in a file or a directory tree. Prints path:line:text, with context lines when asked."
            }
            Tool::Ls => "List a directory: names, with `/` after directories and sizes of files.",
            Tool::Bash => {
                "Run a bash command in the workspace and return its exit code, stdout and stderr. Only commands the policy allows run; each command of a line (after ;, &&, |, inside $(...)) is checked. Runs with a timeout and without secrets in its environment."
            }
            Tool::WebFetch => {
                "Fetch a web page over http(s) and return it as readable text (HTML reduced to text)."
            }
            Tool::WebSearch => "Search the web and return titles, URLs and snippets.",
            Tool::MemoryRead => {
                "Read a value this agent stored earlier (it persists across runs). Without a value for the key, the stored keys are listed."
            }
            Tool::MemoryWrite => {
                "Store a value under a key for this agent; it persists across runs and replaces any earlier value."
            }
        }
    }

    /// The JSON Schema of the tool's arguments object.
    pub fn parameters(self) -> Value {
        match self {
            Tool::Read => json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to read."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to return."}
                },
                "required": ["path"]
            }),
            Tool::Write => json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write."},
                    "content": {"type": "string", "description": "The whole new content."}
                },
                "required": ["path", "content"]
            }),
            Tool::Edit => json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to edit."},
                    "old": {"type": "string", "description": "Exact text to find, whitespace included."},
                    "new": {"type": "string", "description": "Text to put in its place."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one."}
                },
                "required": ["path", "old", "new"]
            }),
            Tool::Glob => json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern, relative to path."},
                    "path": {"type": "string", "description": "Directory to search (default: the workspace)."},
                    "respect_gitignore": {"type": "boolean", "description": "Skip files ignored by .gitignore (default true)."}
                },
                "required": ["pattern"]
            }),
            Tool::Grep => json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {"type": "string", "description": "File or directory (default: the workspace)."},
                    "glob": {"type": "string", "description": "Only search files whose path matches this glob (e.g. `*.rs`)."},
                    "case_insensitive": {"type": "boolean"},
                    "fixed_strings": {"type": "boolean", "description": "Treat pattern as literal text."},
                    "context": {"type": "integer", "minimum": 0, "maximum": 10, "description": "Lines of context before and after each match."},
                    "respect_gitignore": {"type": "boolean", "description": "Skip files ignored by .gitignore (default true)."}
                },
                "required": ["pattern"]
            }),
            Tool::Ls => json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory (default: the workspace)."}
                }
            }),
            Tool::Bash => json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line."},
                    "timeout": {"type": "integer", "minimum": 1, "description": "Seconds before the command is killed (capped by the runtime)."}
                },
                "required": ["command"]
            }),
            Tool::WebFetch => json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "Absolute http or https URL."}
                },
                "required": ["url"]
            }),
            Tool::WebSearch => json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 20}
                },
                "required": ["query"]
            }),
            Tool::MemoryRead => json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string"}
                },
                "required": ["key"]
            }),
            Tool::MemoryWrite => json!({
                "type": "object",
                "properties": {
                    "key": {"type": "string"},
                    "value": {"type": "string"}
                },
                "required": ["key", "value"]
            }),
        }
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name an MCP server's tool is offered under: `mcp_<server>_<tool>`,
/// with every character outside `[A-Za-z0-9_-]` made `_`, and at most 64
/// characters (a longer one keeps a prefix and a hash of the whole name).
pub fn exposed_name(server: &str, tool: &str) -> String {
    let raw = format!("mcp_{server}_{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= 64 {
        return clean;
    }
    // Keep it recognisable and unique: a prefix plus a hash of the whole name.
    let hash = fnv1a(raw.as_bytes());
    format!("{}_{hash:08x}", &clean[..55])
}

fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in Tool::ALL {
            assert_eq!(Tool::from_name(t.name()), Some(t));
            assert_eq!(t.parameters()["type"], "object", "{t}");
            assert!(!t.description().is_empty(), "{t}");
        }
        assert_eq!(Tool::from_name("agent"), None);
    }

    #[test]
    fn names_are_sanitised_and_bounded() {
        assert_eq!(exposed_name("fs", "read_file"), "mcp_fs_read_file");
        assert_eq!(
            exposed_name("my server", "do.it/now"),
            "mcp_my_server_do_it_now"
        );
        let long = exposed_name("s", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert_ne!(long, exposed_name("s", &"x".repeat(101)));
        assert!(
            long.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
    }
}
