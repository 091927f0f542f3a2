//! `$variable` templates: the one place that decides what `$name` means in text.
//!
//! The DSL's validator uses it to check references and the executor to
//! interpolate, so the two can never disagree. Rules (CONTRACT §2):
//!
//! - `$$` is a literal `$`; a `$` not followed by a name is a literal `$` (`$5`).
//! - A name is letters, digits and `_`, starting with a letter or `_`; the longest
//!   such run wins, so `$topic_x` is never `$topic` followed by `_x`.
//! - Names may contain `-` (identifiers do), but prose does too: in
//!   `$topic-specific` the hyphenated name is used only if it is defined, else the
//!   longest defined prefix ending before a `-`, else the whole hyphenated name
//!   (which is then reported as undefined).
//! - A name is at most [`MAX_NAME_LEN`] bytes: the validator refuses longer
//!   definitions, so longer candidates are never looked up. That keeps a
//!   megabyte of `$a-a-a-…` linear instead of hashing every prefix of it.

use rustc_hash::FxHashSet as HashSet;

/// The longest name an input, goal or output field may have, in bytes.
pub const MAX_NAME_LEN: usize = 256;

/// One piece of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    Literal(&'a str),
    /// A reference; `start..end` is the byte range of `$name` in the scanned text.
    Var {
        name: &'a str,
        start: usize,
        end: usize,
    },
}

/// Split `text` into literals and variable references. `defined` decides between
/// a hyphenated name and its prefixes (see the module doc).
pub fn pieces<'a>(text: &'a str, defined: impl Fn(&str) -> bool) -> Vec<Piece<'a>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut lit_start = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&b'$') {
            // `$$`: keep one `$` as literal text.
            if lit_start < i + 1 {
                out.push(Piece::Literal(&text[lit_start..i + 1]));
            }
            i += 2;
            lit_start = i;
            continue;
        }
        let Some(end) = name_end(b, i + 1, &defined, text) else {
            i += 1;
            continue;
        };
        if lit_start < i {
            out.push(Piece::Literal(&text[lit_start..i]));
        }
        out.push(Piece::Var {
            name: &text[i + 1..end],
            start: i,
            end,
        });
        i = end;
        lit_start = end;
    }
    if lit_start < b.len() {
        out.push(Piece::Literal(&text[lit_start..]));
    }
    out
}

/// The end of the name starting at `from`, or `None` when no name starts there.
fn name_end(b: &[u8], from: usize, defined: &impl Fn(&str) -> bool, text: &str) -> Option<usize> {
    match b.get(from) {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return None,
    }
    let word = |mut j: usize| {
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
            j += 1;
        }
        j
    };
    let first = word(from);
    let continues = |j: usize| {
        j + 1 < b.len() && b[j] == b'-' && (b[j + 1].is_ascii_alphanumeric() || b[j + 1] == b'_')
    };
    if !continues(first) {
        return Some(first);
    }
    // Candidate ends: after the first word, and after each `-word` that follows.
    let mut ends = vec![first];
    let mut j = first;
    while j + 1 < b.len() && b[j] == b'-' && (b[j + 1].is_ascii_alphanumeric() || b[j + 1] == b'_')
    {
        j = word(j + 1);
        ends.push(j);
    }
    let longest = *ends.last().unwrap_or(&first);
    ends.iter()
        .rev()
        .filter(|&&e| e - from <= MAX_NAME_LEN)
        .find(|&&e| defined(&text[from..e]))
        .copied()
        .or(Some(longest))
}

/// The names a template refers to, in order of first appearance, without repeats.
pub fn references(text: &str, defined: impl Fn(&str) -> bool) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::default();
    for p in pieces(text, defined) {
        if let Piece::Var { name, .. } = p
            && seen.insert(name)
        {
            out.push(name);
        }
    }
    out
}

/// Replace every reference with its value; `$$` becomes `$`. References `lookup`
/// does not know are left as written.
pub fn render(text: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    for p in pieces(text, |n| lookup(n).is_some()) {
        match p {
            Piece::Literal(s) => out.push_str(s),
            Piece::Var { name, start, end } => match lookup(name) {
                Some(v) => out.push_str(&v),
                None => out.push_str(&text[start..end]),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &str, defined: &[&str]) -> Vec<String> {
        references(t, |n| defined.contains(&n))
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn longest_name_wins() {
        assert_eq!(
            names("$topic_x and $topic", &["topic"]),
            ["topic_x", "topic"]
        );
    }

    #[test]
    fn dollars() {
        assert_eq!(names("costs $5, $$x, $", &[]), Vec::<String>::new());
        let r = render("$$x $a $5 $b", |n| (n == "a").then(|| "A".to_owned()));
        assert_eq!(r, "$x A $5 $b");
    }

    #[test]
    fn hyphens_prefer_defined_names() {
        assert_eq!(names("$topic-specific", &["topic"]), ["topic"]);
        assert_eq!(
            names("$code-review", &["code-review", "code"]),
            ["code-review"]
        );
        assert_eq!(names("$x-y-z", &["x-y"]), ["x-y"]);
        assert_eq!(names("$nope-at-all", &[]), ["nope-at-all"]);
        assert_eq!(names("$end- x", &[]), ["end"]);
    }

    #[test]
    fn positions() {
        let p = pieces("a $bc d", |_| true);
        assert_eq!(
            p[1],
            Piece::Var {
                name: "bc",
                start: 2,
                end: 5
            }
        );
    }
}
