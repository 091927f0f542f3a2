//! `agentfile completions SHELL` and `agentfile man`: shell completions,
//! manual pages and the book's command-line reference
//! (docs/src/reference/cli.md), all generated from the parser itself, so they
//! name every command and flag there is and no other.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, EXIT_INVALID, finish, quiet_pipe};

#[derive(clap::Args)]
pub(super) struct CompletionsArgs {
    /// The shell to complete for. Install for bash with `agentfile
    /// completions bash >~/.local/share/bash-completion/completions/agentfile`;
    /// for zsh, into a folder on `$fpath` as `_agentfile`; for fish, as
    /// `~/.config/fish/completions/agentfile.fish`.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(clap::Args)]
pub(super) struct ManArgs {
    /// Write a page per command (agentfile.1, agentfile-run.1,
    /// agentfile-sessions-list.1, …) into this folder instead of printing
    /// agentfile(1) on standard output.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print the command-line reference of the book as one Markdown page
    /// (every command, argument and option) instead of agentfile(1); the
    /// book's docs/src/reference/cli.md is this output.
    #[arg(long, conflicts_with = "dir")]
    markdown: bool,
}

pub(super) fn completions(args: CompletionsArgs) -> ExitCode {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "agentfile", &mut out);
    let mut stdout = std::io::stdout().lock();
    finish(
        stdout
            .write_all(&out)
            .and_then(|()| stdout.flush())
            .map(|()| 0)
            .or_else(|e| quiet_pipe(e.into(), 0)),
    )
}

pub(super) fn man(args: ManArgs) -> ExitCode {
    if args.markdown {
        let page = markdown(&Cli::command());
        let mut stdout = std::io::stdout().lock();
        return finish(
            stdout
                .write_all(page.as_bytes())
                .and_then(|()| stdout.flush())
                .map(|()| 0)
                .or_else(|e| quiet_pipe(e.into(), 0)),
        );
    }
    let mut cmd = Cli::command();
    cmd.build();
    match args.dir {
        None => {
            let mut page = Vec::new();
            if let Err(e) = clap_mangen::Man::new(cmd).render(&mut page) {
                eprintln!("agentfile: error: cannot render the manual page: {e}");
                return ExitCode::from(EXIT_INVALID);
            }
            let mut stdout = std::io::stdout().lock();
            finish(
                stdout
                    .write_all(&page)
                    .and_then(|()| stdout.flush())
                    .map(|()| 0)
                    .or_else(|e| quiet_pipe(e.into(), 0)),
            )
        }
        Some(dir) => {
            let written =
                std::fs::create_dir_all(&dir).and_then(|()| pages(&cmd, "agentfile", &dir));
            match written {
                Ok(n) => {
                    println!("{n} manual pages written to {}", dir.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!(
                        "agentfile: error: cannot write manual pages to {}: {e}",
                        dir.display()
                    );
                    ExitCode::from(EXIT_INVALID)
                }
            }
        }
    }
}

/// A page for `cmd` (named `name`, e.g. `agentfile-sessions-list`) and each of
/// its subcommands but `help`, into `dir`; how many were written.
fn pages(cmd: &clap::Command, name: &str, dir: &std::path::Path) -> std::io::Result<usize> {
    let mut page = Vec::new();
    let named = cmd
        .clone()
        .name(name.to_owned())
        .bin_name(name.replace('-', " "));
    clap_mangen::Man::new(named).render(&mut page)?;
    std::fs::write(dir.join(format!("{name}.1")), page)?;
    let mut n = 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
    {
        n += pages(sub, &format!("{name}-{}", sub.get_name()), dir)?;
    }
    Ok(n)
}

/// The book's command-line reference: every command but `help` and hidden
/// ones, depth first in the order `--help` lists them, each with its
/// description, usage and arguments. The options every command takes (the
/// global ones, `--help`, `--version`) are listed once, under `agentfile`.
/// The same parser gives the same page, byte for byte.
pub(super) fn markdown(cmd: &clap::Command) -> String {
    let mut cmd = cmd.clone();
    cmd.build();
    let mut out = String::from(
        "# Command-line reference\n\n\
         This page is generated from the command-line parser by `agentfile man --markdown`, \
         and a test fails when it is stale, so it names every command and option there is \
         and no other. In a terminal, `agentfile COMMAND --help` prints the same.\n",
    );
    command_section(&cmd, 0, &mut out);
    out
}

/// The section of `cmd` (at `depth` below `agentfile`), then those of its
/// subcommands.
fn command_section(cmd: &clap::Command, depth: usize, out: &mut String) {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_owned();
    out.push('\n');
    // `agentfile` and its commands at ##, their subcommands at ###, deeper
    // ones at ####.
    out.push_str(&"#".repeat((depth + 1).clamp(2, 4)));
    out.push(' ');
    out.push_str(&name);
    out.push_str("\n\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        out.push_str(&sentence(prose(&about.to_string())));
        out.push_str("\n\n");
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim_end().strip_prefix("Usage: ").unwrap_or(&usage);
    out.push_str("```text\n");
    for line in usage.lines() {
        // Further forms are indented under the first, past "Usage: ".
        out.push_str(line.strip_prefix("       ").unwrap_or(line));
        out.push('\n');
    }
    out.push_str("```\n");

    let subcommands = shown_subcommands(cmd);
    if !subcommands.is_empty() {
        out.push_str("\nCommands:\n\n");
        for sub in &subcommands {
            let sub_name = sub.get_bin_name().unwrap_or(sub.get_name());
            out.push_str(&format!(
                "- [`{}`](#{})",
                sub.get_name(),
                sub_name.replace(' ', "-")
            ));
            if let Some(about) = sub.get_about() {
                out.push_str(" — ");
                out.push_str(&prose(&about.to_string()));
            }
            out.push('\n');
        }
    }

    // What every command takes is listed once, at the top; elsewhere it is
    // noise.
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| depth == 0 || !(a.is_global_set() || is_help_or_version(a)))
        .collect();
    let mut positionals: Vec<&clap::Arg> =
        args.iter().copied().filter(|a| a.is_positional()).collect();
    positionals.sort_by_key(|a| a.get_index());
    let mut options: Vec<&clap::Arg> = args
        .iter()
        .copied()
        .filter(|a| !a.is_positional())
        .collect();
    // As `--help` orders them; the sort is stable, so ties keep their order.
    options.sort_by_key(|a| a.get_display_order());
    if !positionals.is_empty() {
        out.push_str("\nArguments:\n\n");
        for a in positionals {
            argument_item(a, out);
        }
    }
    if !options.is_empty() {
        out.push_str(if depth == 0 {
            "\nOptions (every command takes these):\n\n"
        } else {
            "\nOptions:\n\n"
        });
        for a in options {
            argument_item(a, out);
        }
    }
    for sub in subcommands {
        command_section(sub, depth + 1, out);
    }
}

/// The subcommands `--help` lists, in its order (the sort is stable).
fn shown_subcommands(cmd: &clap::Command) -> Vec<&clap::Command> {
    let mut subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
        .collect();
    subs.sort_by_key(|s| s.get_display_order());
    subs
}

fn is_help_or_version(a: &clap::Arg) -> bool {
    matches!(
        a.get_action(),
        clap::ArgAction::Help
            | clap::ArgAction::HelpShort
            | clap::ArgAction::HelpLong
            | clap::ArgAction::Version
    )
}

/// One argument as a list item: its form, its help, then the values it
/// accepts, its default and its environment variable.
fn argument_item(a: &clap::Arg, out: &mut String) {
    let mut form = String::new();
    if let Some(s) = a.get_short().filter(|_| a.get_long().is_some()) {
        form.push_str(&format!("-{s}, "));
    }
    form.push_str(&a.to_string());
    out.push_str(&format!("- `{form}`"));
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| sentence(prose(&h.to_string())));
    let mut notes = Vec::new();
    if a.is_required_set() && !a.is_positional() {
        notes.push("Required.".to_owned());
    }
    if let Some(aliases) = a.get_visible_aliases() {
        let aliases: Vec<String> = aliases.iter().map(|l| format!("`--{l}`")).collect();
        notes.push(format!("Also {}.", aliases.join(", ")));
    }
    let takes_value = a.get_action().takes_values();
    if takes_value && !a.is_hide_possible_values_set() {
        let values: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| match v.get_help() {
                Some(h) => format!("`{}` ({})", v.get_name(), prose(&h.to_string())),
                None => format!("`{}`", v.get_name()),
            })
            .collect();
        if !values.is_empty() {
            notes.push(format!("Possible values: {}.", values.join(", ")));
        }
    }
    if takes_value && !a.is_hide_default_value_set() && !a.get_default_values().is_empty() {
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|v| format!("`{}`", v.to_string_lossy()))
            .collect();
        notes.push(format!("Default: {}.", defaults.join(" ")));
    }
    if let Some(env) = a.get_env().filter(|_| !a.is_hide_env_set()) {
        notes.push(format!("Environment: `{}`.", env.to_string_lossy()));
    }
    let text: Vec<String> = help.into_iter().chain(notes).collect();
    if !text.is_empty() {
        out.push_str(" — ");
        out.push_str(&text.join(" "));
    }
    out.push('\n');
}

/// `text` ending as a sentence does: clap drops the full stop of a
/// one-sentence doc comment, and the notes that follow need it back.
fn sentence(mut text: String) -> String {
    if !text.ends_with(['.', '!', '?', ':']) {
        text.push('.');
    }
    text
}

/// Help text as Markdown prose: its lines joined into one paragraph, and
/// the characters Markdown would take as markup (`<name>` as an HTML tag,
/// `*` as emphasis, `[…]` as a link) escaped outside `code spans`.
fn prose(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(joined.len());
    let mut in_code = false;
    for c in joined.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code && matches!(c, '\\' | '<' | '>' | '*' | '[' | ']' | '|') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// The book's command-line reference (docs/src/reference/cli.md) is what
    /// the parser renders now. When a flag or a help line changes, this fails
    /// until the page is generated again; `UPDATE_SNAPSHOTS=1` (or
    /// `AGENTFILE_BLESS=1`) rewrites it instead.
    #[test]
    fn the_cli_reference_page_is_current() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/cli.md");
        let rendered = super::markdown(&super::Cli::command());
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if rendered == on_disk {
            return;
        }
        if ["UPDATE_SNAPSHOTS", "AGENTFILE_BLESS"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty() && v != "0"))
        {
            std::fs::create_dir_all(path.parent().expect("a parent folder"))
                .and_then(|()| std::fs::write(&path, &rendered))
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            return;
        }
        let first = rendered
            .lines()
            .zip(on_disk.lines().chain(std::iter::repeat("")))
            .position(|(a, b)| a != b)
            .map_or_else(
                || {
                    format!(
                        "the page has {} lines, the file {}",
                        rendered.lines().count(),
                        on_disk.lines().count()
                    )
                },
                |n| {
                    format!(
                        "line {}: the parser gives\n  {}\nthe file has\n  {}",
                        n + 1,
                        rendered.lines().nth(n).unwrap_or(""),
                        on_disk.lines().nth(n).unwrap_or("")
                    )
                },
            );
        panic!(
            "{} is stale ({first}).\nRegenerate it with `UPDATE_SNAPSHOTS=1 cargo test --bin agentfile cli_reference` \
             or `cargo run -q -- man --markdown > docs/src/reference/cli.md`, then read the diff.",
            path.display()
        );
    }
}
