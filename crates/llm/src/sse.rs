//! A small incremental parser for Server-Sent Events (the `text/event-stream`
//! format all three providers stream in).
//!
//! Bytes go in as they arrive, in chunks that may split a line or even a UTF-8
//! character anywhere; complete events come out. It implements the parts of the
//! WHATWG event-stream format the providers use: `event:` and `data:` fields
//! (multi-line data joined with `\n`), `:` comments (keep-alives, ignored), and
//! `\n` or `\r\n` line ends. `id:` and `retry:` are ignored since we never
//! reconnect mid-stream: a cut stream is retried as a whole call.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, empty when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Why the stream could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// A line was not UTF-8.
    NotUtf8,
    /// A single line grew past the limit without ending (a server sending junk).
    LineTooLong(usize),
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::NotUtf8 => f.write_str("the event stream is not valid UTF-8"),
            SseError::LineTooLong(n) => {
                write!(f, "an event-stream line is longer than {n} bytes")
            }
        }
    }
}

/// Incremental parser state.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
}

/// Longest line accepted; a whole tool-call argument object can sit on one line.
const MAX_LINE: usize = 16 * 1024 * 1024;

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed a chunk; push every event it completes onto `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        for &b in chunk {
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                let line = String::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
                self.line_done(&line, out);
            } else {
                if self.line.len() >= MAX_LINE {
                    return Err(SseError::LineTooLong(MAX_LINE));
                }
                self.line.push(b);
            }
        }
        Ok(())
    }

    /// The stream ended: dispatch an event that was not followed by a blank line
    /// (some servers close right after the last `data:` line).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
            self.line_done(&line, out);
        }
        self.dispatch(out);
        Ok(())
    }

    fn line_done(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        if self.has_data {
            out.push(SseEvent {
                event,
                data: std::mem::take(&mut self.data),
            });
        }
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in input.chunks(piece) {
            p.feed(c, &mut out).unwrap();
        }
        p.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn events_survive_any_chunking() {
        let input = "event: a\ndata: {\"x\":\"é\"}\n\n: keep-alive\n\ndata: one\r\ndata: two\r\n\r\ndata:[DONE]\n\n";
        let expected = vec![
            SseEvent {
                event: "a".into(),
                data: "{\"x\":\"é\"}".into(),
            },
            SseEvent {
                event: String::new(),
                data: "one\ntwo".into(),
            },
            SseEvent {
                event: String::new(),
                data: "[DONE]".into(),
            },
        ];
        for piece in 1..input.len() {
            assert_eq!(
                parse_in_pieces(input.as_bytes(), piece),
                expected,
                "{piece}"
            );
        }
    }

    #[test]
    fn trailing_event_without_blank_line_is_dispatched() {
        assert_eq!(
            parse_in_pieces(b"data: last", 3),
            vec![SseEvent {
                event: String::new(),
                data: "last".into()
            }]
        );
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        assert_eq!(
            p.feed(b"data: \xff\xfe\n\n", &mut out),
            Err(SseError::NotUtf8)
        );
    }
}
