//! The formats agentfile reads, in one table: which file names each one has,
//! where `list` finds them, and which file stands for a folder named as the
//! workflow. `detect`, `list`, `validate`/`run` of a folder and the servers all
//! ask here, so a file name means one thing everywhere.

use std::path::{Path, PathBuf};

use crate::Options;
use crate::scripts::ScriptEngine;
use agentfile_plan::Plan;
use agentfile_plan::diag::{Diagnostic, FileId, SourceMap};

/// A workflow format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// The Agentfile workflow DSL (the primary format).
    Agentfile,
    /// agentrc's Agentfile (CONTRACT §12), run as one agent.
    Agentrc,
    /// An Agentfile-spec workflow (`workflows/<name>/workflow.yaml`).
    WorkflowYaml,
    /// An AIP-15 `WORKFLOW.md` workflow.
    WorkflowMd,
    /// An agent definition file (`*.agent.md`), run as one agent.
    AgentMd,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Agentfile => "agentfile",
            Dialect::Agentrc => "agentrc",
            Dialect::WorkflowYaml => "workflow-yaml",
            Dialect::WorkflowMd => "workflow-md",
            Dialect::AgentMd => "agent-md",
        }
    }
}

/// What a front end returns for a file: its diagnostics, and the plan when
/// there are no errors.
pub type Analyzed = (Vec<Diagnostic>, Option<Plan>);

/// One format: its names, and the front end that reads it.
pub struct Format {
    pub dialect: Dialect,
    /// What users call it.
    pub title: &'static str,
    /// File names that are this format whatever they hold (an `Agentfile` is
    /// the DSL or agentrc, told apart by content, so it is not listed here).
    pub names: &'static [&'static str],
    /// The folder a discovered file sits in, one level up (`workflows/<name>/
    /// workflow.yaml`); `None`: anywhere.
    pub home: Option<&'static str>,
    /// Read a file of this format (already in the source map): every
    /// problem found, and the plan when there is no error.
    pub analyze: fn(&mut SourceMap, FileId, &Options<'_>) -> Analyzed,
}

pub const FORMATS: &[Format] = &[
    Format {
        dialect: Dialect::Agentfile,
        analyze: analyze_dsl,
        title: "an Agentfile",
        names: &[],
        home: None,
    },
    Format {
        dialect: Dialect::Agentrc,
        analyze: analyze_agentrc,
        title: "an agentrc Agentfile",
        names: &[],
        home: None,
    },
    Format {
        dialect: Dialect::WorkflowYaml,
        analyze: analyze_workflow_yaml,
        title: "an Agentfile spec workflow (workflow.yaml)",
        names: &["workflow.yaml", "workflow.yml"],
        home: Some("workflows"),
    },
    Format {
        dialect: Dialect::WorkflowMd,
        analyze: analyze_workflow_md,
        title: "an AIP-15 WORKFLOW.md",
        names: &["WORKFLOW.md"],
        home: Some(".workflows"),
    },
    Format {
        dialect: Dialect::AgentMd,
        analyze: analyze_agent_md,
        title: "an agent definition file (.agent.md)",
        names: &[],
        home: None,
    },
];

/// The row of `dialect`.
pub fn format(dialect: Dialect) -> &'static Format {
    FORMATS
        .iter()
        .find(|f| f.dialect == dialect)
        .expect("every dialect has a row")
}

fn analyze_dsl(sources: &mut SourceMap, file: FileId, opts: &Options<'_>) -> Analyzed {
    let (tree, mut diagnostics) = agentfile_dsl::parse(file, &sources.file(file).text);
    let options = agentfile_dsl::Options {
        config: opts.config,
        scripts: &ScriptEngine,
    };
    let (more, plan) = agentfile_dsl::validate(sources, file, &tree, options);
    diagnostics.extend(more);
    (diagnostics, plan)
}

fn analyze_agentrc(sources: &mut SourceMap, file: FileId, opts: &Options<'_>) -> Analyzed {
    let bases = opts.packages.map(|packages| crate::base::Resolver {
        packages,
        options: opts,
    });
    let options = agentfile_agentrc::Options {
        core_only: opts.read.core_only,
        extensions: &opts.read.extensions,
        bases: bases.as_ref().map(|b| b as &dyn agentfile_agentrc::Bases),
    };
    agentfile_agentrc::analyze(sources, file, options)
}

fn analyze_workflow_yaml(sources: &mut SourceMap, file: FileId, opts: &Options<'_>) -> Analyzed {
    let options = agentfile_workflow_yaml::Options {
        config: opts.config,
        lenient: opts.read.lenient,
        scripts: &ScriptEngine,
    };
    agentfile_workflow_yaml::analyze(sources, file, options)
}

fn analyze_workflow_md(sources: &mut SourceMap, file: FileId, opts: &Options<'_>) -> Analyzed {
    let options = agentfile_workflow_md::Options {
        config: opts.config,
        scripts: &ScriptEngine,
    };
    agentfile_workflow_md::analyze(sources, file, options)
}

fn analyze_agent_md(sources: &mut SourceMap, file: FileId, _: &Options<'_>) -> Analyzed {
    agentfile_agent_md::analyze(sources, file, &ScriptEngine)
}

/// The files a folder given as the workflow may hold, in the order tried.
pub const FOLDER_FILES: &[&str] = &["Agentfile", "WORKFLOW.md", "workflow.yaml", "workflow.yml"];

/// The format a file's name alone decides, if any.
pub fn by_name(path: &Path) -> Option<Dialect> {
    if agentfile_agent_card::is_agent_file(path) {
        return Some(Dialect::AgentMd);
    }
    let name = path.file_name()?.to_str()?;
    FORMATS
        .iter()
        .find(|f| f.names.contains(&name))
        .map(|f| f.dialect)
}

/// How the format is called in messages.
pub fn title(d: Dialect) -> &'static str {
    FORMATS
        .iter()
        .find(|f| f.dialect == d)
        .map_or("a workflow", |f| f.title)
}

/// The workflow file a folder stands for.
pub fn file_in(dir: &Path) -> Option<PathBuf> {
    FOLDER_FILES
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// Whether `list` shows this file: an `Agentfile` or `*.agent` anywhere, or a
/// format's named file in its home (`workflows/<name>/workflow.yaml`,
/// `.workflows/<id>/WORKFLOW.md`).
pub fn is_workflow_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name == "Agentfile" || (name.ends_with(".agent") && name.len() > ".agent".len()) {
        return true;
    }
    let home = path
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|n| n.to_str());
    FORMATS
        .iter()
        .any(|f| f.names.contains(&name) && (f.home.is_none() || f.home == home))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_table_decides() {
        assert_eq!(
            by_name(Path::new("x/workflow.yml")),
            Some(Dialect::WorkflowYaml)
        );
        assert_eq!(by_name(Path::new("WORKFLOW.md")), Some(Dialect::WorkflowMd));
        assert_eq!(by_name(Path::new("Agentfile")), None);
        assert!(is_workflow_file(Path::new("r/workflows/a/workflow.yml")));
        assert!(is_workflow_file(Path::new("r/.workflows/a/WORKFLOW.md")));
        assert!(!is_workflow_file(Path::new("r/docs/a/WORKFLOW.md")));
        assert!(is_workflow_file(Path::new("r/x/hello.agent")));
    }
}
