//! Small text helpers shared across the workspace: cutting text to a size with an
//! honest note, durations for people, and making untrusted text safe to print
//! on a terminal.
//!
//! What this is not: tool-output capping (see `tools::builtin`), which also
//! has to say how to get the rest.

use std::borrow::Cow;
use std::time::Duration;

/// The longest prefix of `s` of at most `max` bytes that ends on a character
/// boundary.
pub fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut to at most `max` bytes on a character boundary, with a note that
/// counts the bytes left out.
pub fn truncate(s: &str, max: usize) -> String {
    let head = prefix(s, max);
    if head.len() == s.len() {
        return s.to_owned();
    }
    format!("{head}… [{} more bytes]", s.len() - head.len())
}

/// `s` cut to at most `max` characters, ending in `…` when cut: for quoting a
/// piece of input inside a one-line message.
pub fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// A duration as people say it: `250 ms`, `8 s`, `2 min 5 s`, `1 h 3 min`.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let s = d.as_secs();
    if s < 60 {
        let tenths = (ms % 1000) / 100;
        return if tenths == 0 || s >= 10 {
            format!("{s} s")
        } else {
            format!("{s}.{tenths} s")
        };
    }
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    match (h, m, s) {
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, 0, _) => format!("{h} h"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

/// Text from a model or a tool, made safe for a terminal: escape sequences
/// (colours, window titles, OSC 52 clipboard writes, cursor moves) and other
/// control characters are shown as visible `\x1b`-style escapes instead of
/// being acted on. Newlines and tabs stay.
pub fn for_terminal(s: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            // Bidirectional overrides and isolates reorder what follows them.
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if unsafe_char(c) {
            let code = c as u32;
            if code <= 0xff {
                out.push_str(&format!("\\x{code:02x}"));
            } else {
                out.push_str(&format!("\\u{{{code:x}}}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_bytes_on_char_boundaries() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("ééé", 3), "é… [4 more bytes]");
        assert_eq!(prefix("héllo", 2), "h");
    }

    #[test]
    fn durations_for_people() {
        assert_eq!(human_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(human_duration(Duration::from_secs(8)), "8 s");
        assert_eq!(human_duration(Duration::from_secs(125)), "2 min 5 s");
        assert_eq!(human_duration(Duration::from_secs(3780)), "1 h 3 min");
    }

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        let hostile =
            "hi \x1b]0;pwned\x07 \x1b]52;c;ZXZpbA==\x07 \x1b[31mred\x1b[0m \u{202E}txt.exe";
        let safe = for_terminal(hostile);
        assert!(!safe.contains('\x1b') && !safe.contains('\x07'), "{safe}");
        assert!(!safe.contains('\u{202E}'));
        assert!(safe.contains("\\x1b]52;c;ZXZpbA=="), "{safe}");
        assert_eq!(for_terminal("plain\n\ttext"), "plain\n\ttext");
    }
}
