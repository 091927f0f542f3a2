//! The Markdown body of an agent file, as far as the format reads it: ATX
//! headings outside fenced code blocks, the sections under them, the first
//! paragraph after the title and the first image under `# Avatar`.

/// One heading and what lies under it (up to the next heading of the same
/// or a higher level). Offsets are bytes into the whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub level: u8,
    pub title: String,
    /// The heading line.
    pub heading: (usize, usize),
    /// The text under it, up to the next heading of level ≤ `level`.
    pub content: (usize, usize),
}

/// The headings of `text[start..]`, in order.
pub fn sections(text: &str, start: usize) -> Vec<Section> {
    let mut heads: Vec<(u8, String, usize, usize)> = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    let mut pos = start;
    for line in text[start..].split_inclusive('\n') {
        let at = pos;
        pos += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = body.len() - body.trim_start_matches(' ').len();
        let trimmed = &body[indent..];
        if indent <= 3 {
            let ch = trimmed.chars().next();
            if let Some(c @ ('`' | '~')) = ch {
                let run = trimmed.len() - trimmed.trim_start_matches(c).len();
                if run >= 3 {
                    match fence {
                        None => fence = Some((c, run)),
                        Some((fc, fr))
                            if fc == c && run >= fr && trimmed[run..].trim().is_empty() =>
                        {
                            fence = None
                        }
                        Some(_) => {}
                    }
                    continue;
                }
            }
        }
        if fence.is_some() || indent > 3 {
            continue;
        }
        let hashes = trimmed.len() - trimmed.trim_start_matches('#').len();
        if !(1..=6).contains(&hashes) {
            continue;
        }
        let rest = &trimmed[hashes..];
        if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            continue;
        }
        let title = rest.trim().trim_end_matches('#').trim().to_owned();
        heads.push((hashes as u8, title, at, at + body.len()));
    }
    let mut out = Vec::with_capacity(heads.len());
    for (i, (level, title, hs, he)) in heads.iter().enumerate() {
        let content_start = (*he + 1).min(text.len());
        let content_end = heads[i + 1..]
            .iter()
            .find(|h| h.0 <= *level)
            .map_or(text.len(), |h| h.2);
        out.push(Section {
            level: *level,
            title: title.clone(),
            heading: (*hs, *he),
            content: (content_start, content_end.max(content_start)),
        });
    }
    out
}

/// The first paragraph of `text[start..end]`, before any heading: its byte
/// range, trimmed.
pub fn first_paragraph(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let mut pos = start;
    let mut para: Option<(usize, usize)> = None;
    for line in text[start..end].split_inclusive('\n') {
        let at = pos;
        pos += line.len();
        let t = line.trim();
        if t.is_empty() {
            if para.is_some() {
                break;
            }
            continue;
        }
        if t.starts_with('#') || t.starts_with("```") || t.starts_with("~~~") {
            break;
        }
        let line_end = at + line.trim_end().len();
        match &mut para {
            None => para = Some((at + (line.len() - line.trim_start().len()), line_end)),
            Some(p) => p.1 = line_end,
        }
    }
    para
}

/// The URL of the first Markdown image (`![alt](url)`) in `text`.
pub fn first_image(text: &str) -> Option<String> {
    let i = text.find("![")?;
    let rest = &text[i + 2..];
    let close = rest.find("](")?;
    let rest = &rest[close + 2..];
    let end = rest.find(')')?;
    let url = rest[..end]
        .split_whitespace()
        .next()?
        .trim_matches(['<', '>']);
    (!url.is_empty()).then(|| url.to_owned())
}

/// The code of a `## Tools` section: the first fenced block's text when it
/// has one, else the whole section. Returns the code and its byte offset.
pub fn code_block(text: &str, start: usize, end: usize) -> (usize, usize) {
    let mut pos = start;
    let mut open: Option<(char, usize, usize)> = None;
    for line in text[start..end].split_inclusive('\n') {
        let at = pos;
        pos += line.len();
        let t = line.trim();
        let c = match t.chars().next() {
            Some(c @ ('`' | '~')) => c,
            _ => continue,
        };
        let run = t.len() - t.trim_start_matches(c).len();
        if run < 3 {
            continue;
        }
        match open {
            None => open = Some((c, run, pos)),
            Some((oc, or, from)) if oc == c && run >= or && t[run..].trim().is_empty() => {
                return (from, at);
            }
            Some(_) => {}
        }
    }
    match open {
        // An unclosed fence runs to the end of the section.
        Some((_, _, from)) => (from, end),
        None => (start, end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_outside_fences_only() {
        let t = "# Title\n\nFirst para\nstill.\n\nSecond.\n\n## System\nBe good.\n```\n## not a heading\n```\n### Sub\nx\n## Rules\n- a\n";
        let s = sections(t, 0);
        let titles: Vec<_> = s.iter().map(|s| (s.level, s.title.as_str())).collect();
        assert_eq!(
            titles,
            [(1, "Title"), (2, "System"), (3, "Sub"), (2, "Rules")]
        );
        let sys = &s[1];
        assert!(t[sys.content.0..sys.content.1].contains("### Sub"));
        assert!(!t[sys.content.0..sys.content.1].contains("- a"));
        let (a, b) = first_paragraph(t, s[0].content.0, s[0].content.1).unwrap();
        assert_eq!(&t[a..b], "First para\nstill.");
    }

    #[test]
    fn images_and_code() {
        assert_eq!(
            first_image("x ![me](img/a.png \"t\") y").as_deref(),
            Some("img/a.png")
        );
        assert_eq!(first_image("no image"), None);
        let t = "intro\n```js\nreturn {};\n```\nafter\n";
        let (a, b) = code_block(t, 0, t.len());
        assert_eq!(&t[a..b], "return {};\n");
        let (a, b) = code_block("return 1;\n", 0, 10);
        assert_eq!((a, b), (0, 10));
    }
}
