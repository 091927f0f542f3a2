//! The bounds a server connection keeps, so that no sequence of small requests
//! can make it run out of memory (both `serve` and `mcp`).
//!
//! - requests (and batch items) in flight, and the bytes of their lines: past
//!   either, a request is answered at once with [`code::LIMIT`] and not run;
//! - the size of one reply line (a batch's whole reply): serialising stops at
//!   the limit and the reply becomes a [`code::LIMIT`] error to the same id;
//! - the workflow source one analysis (validate, inspect, run, list) may read,
//!   and the source being analysed at once on a connection, because analysing
//!   a file takes several times its size in memory.
//!
//! `ping` is exempt from the request bounds: it holds nothing, and it is how a
//! client learns that a busy server is still there.
//!
//! What it is not: a run budget (turns, tokens, time; see `executor::budget`)
//! or the concurrency of runs (`--max-runs`, in the engine).

use std::io::Write;

use tokio::io::AsyncBufReadExt;

use serde::Serialize;
use serde_json::{Value, json};

use agentfile_wire::rpc::{RpcError, code};

/// The longest request line read (a longer one is answered without being kept).
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// Default of `--max-requests`.
pub const DEFAULT_MAX_REQUESTS: usize = 1024;
/// Default of `--max-reply-bytes`.
pub const DEFAULT_MAX_REPLY: usize = 16 * 1024 * 1024;
/// Default of `--max-source-bytes`.
pub const DEFAULT_MAX_SOURCE: usize = 8 * 1024 * 1024;
/// `subscriptions/listen` streams one principal may hold open over HTTP when
/// `[mcp] max_streams` is not set ([`agentfile_config::McpSection::MAX_STREAMS`]).
/// A client needs one (it carries every list change it asked for); 64 leaves
/// room for many windows of one editor while 10,000 idle ones cannot pile up.
pub const MAX_STREAMS: usize = agentfile_config::McpSection::MAX_STREAMS;

/// A connection's bounds (see the module doc). Zero in a field means its default.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Requests and batch items being handled at once (`--max-requests`).
    pub max_requests: usize,
    /// Bytes of one reply line (`--max-reply-bytes`).
    pub max_reply: usize,
    /// Bytes of workflow source one file may have to be analysed over the wire
    /// (`--max-source-bytes`).
    pub max_source: usize,
}

impl Limits {
    pub fn max_requests(&self) -> usize {
        or_default(self.max_requests, DEFAULT_MAX_REQUESTS)
    }

    pub fn max_reply(&self) -> usize {
        or_default(self.max_reply, DEFAULT_MAX_REPLY)
    }

    pub fn max_source(&self) -> usize {
        or_default(self.max_source, DEFAULT_MAX_SOURCE)
    }

    /// Bytes of request lines held by the requests in flight: four full lines.
    pub fn max_request_bytes(&self) -> usize {
        4 * MAX_LINE
    }

    /// Bytes of source analysed at once on a connection: two of the largest
    /// files, so a big validation runs beside small ones but not beside many.
    pub fn analysis_budget(&self) -> usize {
        2 * self.max_source()
    }
}

fn or_default(v: usize, d: usize) -> usize {
    if v == 0 { d } else { v }
}

/// A [`code::LIMIT`] error: `limit` names the bound (also in `data.limit`),
/// `max` is its value, and the message says what to do.
pub fn limit_error(limit: &'static str, max: usize, message: impl Into<String>) -> RpcError {
    RpcError::new(code::LIMIT, message).with_data(json!({"limit": limit, "max": max}))
}

pub fn too_many_requests(max: usize) -> RpcError {
    limit_error(
        "requests_in_flight",
        max,
        format!(
            "too many requests in flight on this connection (at most {max}); wait for some replies, then send it again"
        ),
    )
}

/// Past `max` (`[mcp] max_streams`, default [`MAX_STREAMS`]) open
/// `subscriptions/listen` streams of one principal.
pub fn too_many_streams(max: usize) -> RpcError {
    limit_error(
        "listen_streams_per_principal",
        max,
        format!(
            "too many subscriptions/listen streams open for this client (at most {max} per \
             token, or for all loopback clients together when no token is set); close one \
             (end its response) before opening another: one stream carries every change it \
             asked for"
        ),
    )
}

pub fn too_many_request_bytes(max: usize) -> RpcError {
    limit_error(
        "request_bytes_in_flight",
        max,
        format!(
            "the requests in flight on this connection hold more than {} MiB; wait for some replies, then send it again",
            max / (1024 * 1024)
        ),
    )
}

pub fn reply_too_large(max: usize) -> RpcError {
    limit_error(
        "reply_size",
        max,
        format!(
            "the reply would be larger than {} bytes (--max-reply-bytes); ask for less (fewer paths, a smaller `limit` on `event`, fewer items in a batch)",
            max
        ),
    )
}

pub fn source_too_large(what: &str, size: u64, max: usize) -> RpcError {
    limit_error(
        "source_size",
        max,
        format!(
            "{what} is {size} bytes, over the {max} bytes a server analyses (--max-source-bytes); check it with `agentfile validate` on the command line, or split it"
        ),
    )
}

/// `value` as one line (with its newline), or `None` when it would be longer
/// than `max` bytes. Serialising stops at the limit, so an oversized reply is
/// never held whole.
pub fn encode_capped(value: &impl Serialize, max: usize) -> Option<Vec<u8>> {
    let mut w = Capped {
        buf: Vec::new(),
        max,
    };
    serde_json::to_writer(&mut w, value).ok()?;
    w.buf.push(b'\n');
    Some(w.buf)
}

struct Capped {
    buf: Vec<u8>,
    max: usize,
}

impl Write for Capped {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + b.len() > self.max {
            return Err(std::io::Error::other("over the reply limit"));
        }
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The message of a caught panic, for an internal-error reply.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// How much of an overlong line is kept to find its id.
pub const ID_PREFIX: usize = 4096;

/// The id of a message from the start of its line, when it can be found
/// cheaply (an `"id"` member before any nested value); else `null`, as JSON-RPC
/// says for a request whose id cannot be read.
pub fn recover_id(line: &[u8]) -> Value {
    let head = &line[..line.len().min(ID_PREFIX)];
    let mut de = serde_json::Deserializer::from_slice(head).into_iter::<Value>();
    // A whole line parses fully: take its id when it is a single request.
    if let Some(Ok(Value::Object(o))) = de.next() {
        return match o.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => Value::Null,
        };
    }
    scan_id(head).unwrap_or(Value::Null)
}

/// `"id": <string or number>` among the top-level members at the start of an
/// object, read up to the first member whose value is not a scalar.
fn scan_id(head: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(head)
        .unwrap_or_else(|e| std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or(""));
    let mut rest = text.trim_start().strip_prefix('{')?;
    loop {
        rest = rest.trim_start();
        let mut keys = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let key = keys.next()?.ok()?;
        rest = rest[keys.byte_offset()..].trim_start().strip_prefix(':')?;
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let value = values.next()?.ok()?;
        rest = &rest[values.byte_offset()..];
        if key == "id" {
            return matches!(value, Value::String(_) | Value::Number(_)).then_some(value);
        }
        if matches!(value, Value::Object(_) | Value::Array(_)) {
            // Nested values may be long: not worth reading on.
            return None;
        }
        rest = rest.trim_start().strip_prefix(',')?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_stops_at_the_cap() {
        let v = json!({"a": "x".repeat(100)});
        assert!(encode_capped(&v, 50).is_none());
        let line = encode_capped(&v, 1000).unwrap();
        assert_eq!(line.last(), Some(&b'\n'));
        let e = reply_too_large(50);
        assert_eq!(
            recover_id(br#"{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":"#),
            json!(7)
        );
        assert_eq!(recover_id(br#"{"id":"a b","method":"x"}"#), json!("a b"));
        assert_eq!(
            recover_id(br#"{"method":"x","params":{"id":3,"#),
            Value::Null
        );
        assert_eq!(recover_id(br#"[{"id":1"#), Value::Null);
        assert_eq!(recover_id(b"xxxx"), Value::Null);
        assert_eq!(e.code, code::LIMIT);
        assert_eq!(e.data.unwrap()["limit"], "reply_size");
    }
}

/// What [`read_line`] read.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text,
    TooLong,
    Eof,
}

/// Read one line into `buf` (without its newline), refusing lines over
/// [`MAX_LINE`] (the rest is consumed and skipped; the start is kept
/// so the request id can still be answered) without holding them in memory.
pub async fn read_line(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    buf: &mut Vec<u8>,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if too_long {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Text
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > MAX_LINE {
                // Keep the start: the id is looked for there to answer it.
                too_long = true;
                buf.truncate(ID_PREFIX);
                buf.shrink_to(ID_PREFIX);
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        reader.consume(take);
        if done {
            if too_long {
                return Ok(Line::TooLong);
            }
            while matches!(buf.last(), Some(b'\n' | b'\r')) {
                buf.pop();
            }
            return Ok(Line::Text);
        }
    }
}

#[cfg(test)]
mod read_line_tests {
    use super::*;
    use tokio::io::BufReader;

    #[tokio::test]
    async fn long_lines_are_refused_without_being_kept() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{\"a\":1}\r\n");
        let mut r = BufReader::new(&input[..]);
        let mut buf = Vec::new();
        assert!(matches!(
            read_line(&mut r, &mut buf).await.unwrap(),
            Line::TooLong
        ));
        buf.clear();
        assert!(matches!(
            read_line(&mut r, &mut buf).await.unwrap(),
            Line::Text
        ));
        assert_eq!(buf, b"{\"a\":1}");
        buf.clear();
        assert!(matches!(
            read_line(&mut r, &mut buf).await.unwrap(),
            Line::Eof
        ));
    }
}
