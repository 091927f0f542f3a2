//! Commands of an agent file: their argument names and the `$1…$9` /
//! `$ARGUMENTS` substitution a host's slash command performs.

use agentfile_plan::agent::AgentCommand;

/// Why a command cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingArgument {
    /// 1-based position.
    pub position: usize,
    /// Its `argument-hint` name, when it has one.
    pub name: Option<String>,
}

/// The highest `$N` the body refers to (0 when none).
pub fn max_positional(body: &str) -> usize {
    let b = body.as_bytes();
    let mut max = 0;
    for (i, _) in body.match_indices('$') {
        if let Some(d) = b.get(i + 1).filter(|d| (b'1'..=b'9').contains(d)) {
            max = max.max((d - b'0') as usize);
        }
    }
    max
}

/// Whether the body uses `$ARGUMENTS`.
pub fn uses_all(body: &str) -> bool {
    body.contains("$ARGUMENTS")
}

/// The names a host asks for, one per positional argument: the
/// `argument-hint` names, then `arg<N>` for positions the body uses beyond
/// them; a body that reads only `$ARGUMENTS` takes one `arguments` text.
pub fn argument_names(c: &AgentCommand) -> Vec<String> {
    let mut names = c.arguments.clone();
    let used = max_positional(&c.body);
    for n in names.len() + 1..=used {
        names.push(format!("arg{n}"));
    }
    if names.is_empty() && uses_all(&c.body) {
        names.push("arguments".into());
    }
    names
}

/// Whether position `n` (1-based) must be given: the body reads it.
pub fn required(c: &AgentCommand, n: usize) -> bool {
    n <= max_positional(&c.body)
}

/// The body with `$1…$9` and `$ARGUMENTS` filled from `args` (positional;
/// an empty string counts as missing for `$N`).
pub fn expand(c: &AgentCommand, args: &[String]) -> Result<String, MissingArgument> {
    let body = &c.body;
    let mut out = String::with_capacity(body.len() + 64);
    let mut rest = body.as_str();
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            let given: Vec<&str> = args
                .iter()
                .map(String::as_str)
                .filter(|a| !a.is_empty())
                .collect();
            out.push_str(&given.join(" "));
            rest = tail;
            continue;
        }
        match after.as_bytes().first() {
            Some(d @ b'1'..=b'9') => {
                let n = (d - b'0') as usize;
                match args.get(n - 1).filter(|a| !a.trim().is_empty()) {
                    Some(v) => out.push_str(v),
                    None => {
                        return Err(MissingArgument {
                            position: n,
                            name: c.arguments.get(n - 1).cloned(),
                        });
                    }
                }
                rest = &after[1..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// `argument-hint` as written: a list of names, or one string of
/// `[name] [other]` (or space-separated) names.
pub fn hint_names(hint: &serde_json::Value) -> Option<Vec<String>> {
    let clean = |s: &str| {
        s.trim()
            .trim_matches(['[', ']', '<', '>'])
            .trim()
            .to_owned()
    };
    match hint {
        serde_json::Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(clean).filter(|s| !s.is_empty()))
            .collect(),
        serde_json::Value::String(s) => {
            let names: Vec<String> = if s.contains('[') {
                s.split(']').map(clean).filter(|n| !n.is_empty()).collect()
            } else {
                s.split_whitespace()
                    .map(clean)
                    .filter(|n| !n.is_empty())
                    .collect()
            };
            Some(names)
        }
        serde_json::Value::Null => Some(Vec::new()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(body: &str, args: &[&str]) -> AgentCommand {
        AgentCommand {
            name: "c".into(),
            description: "d".into(),
            arguments: args.iter().map(|s| s.to_string()).collect(),
            body: body.into(),
            source: "inline".into(),
        }
    }

    #[test]
    fn substitutes_positions_and_all() {
        let c = cmd("Test $1 with $2 ($ARGUMENTS) costs $5$", &["target", "fw"]);
        let out = expand(&c, &["a.rs".into(), "jest".into()]);
        assert_eq!(
            out,
            Err(MissingArgument {
                position: 5,
                name: None
            })
        );
        let c = cmd("Test $1 with $2 ($ARGUMENTS), $ and $x", &["target", "fw"]);
        assert_eq!(
            expand(&c, &["a.rs".into(), "jest".into()]).unwrap(),
            "Test a.rs with jest (a.rs jest), $ and $x"
        );
        assert_eq!(
            expand(&c, &["a.rs".into()]),
            Err(MissingArgument {
                position: 2,
                name: Some("fw".into())
            })
        );
        assert_eq!(max_positional(&c.body), 2);
        assert!(required(&c, 2) && !required(&c, 3));
    }

    #[test]
    fn hints_in_both_shapes() {
        let h = |v: serde_json::Value| hint_names(&v).unwrap();
        assert_eq!(
            h(serde_json::json!("[target-name] [framework]")),
            ["target-name", "framework"]
        );
        assert_eq!(h(serde_json::json!(["root-path"])), ["root-path"]);
        assert_eq!(h(serde_json::json!("a b")), ["a", "b"]);
        assert_eq!(hint_names(&serde_json::json!(3)), None);
        assert_eq!(argument_names(&cmd("x $3", &["a"])), ["a", "arg2", "arg3"]);
        assert_eq!(argument_names(&cmd("all: $ARGUMENTS", &[])), ["arguments"]);
    }
}
