//! Record and replay model exchanges ("cassettes").
//!
//! A cassette is a JSON-lines file; each line is one model call of a run:
//! `{"provider": …, "request": ChatRequest, "response": ChatResponse}` or, for a
//! call that failed, `{"provider": …, "request": …, "error": "…"}`. It holds the
//! provider-neutral request and answer — never HTTP headers, so never an API key —
//! which makes a cassette recorded against one provider replayable with no
//! network and no key at all.
//!
//! [`Recorder`] wraps any provider and appends a line per finished call.
//! [`ReplayProvider`] answers from a cassette: each request must equal a recorded
//! one (the `model` field aside, so a cassette survives a model rename). Requests
//! are matched in order; when several agents run concurrently and their calls
//! interleave differently than when recorded, the first unused *equal* request is
//! taken, so replay stays deterministic without depending on scheduling. A request
//! the cassette does not hold is an error that says where it differs from the
//! next recorded one.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::Provider;
use crate::error::{LlmError, truncate};
use crate::http::deltas_of;
use crate::types::{ChatRequest, ChatResponse, StreamEvent};

/// One line of a cassette.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CassetteEntry {
    /// The provider that answered when recording.
    pub provider: String,
    pub request: ChatRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ChatResponse>,
    /// The error message, for a call that failed when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A provider that writes every exchange of the provider it wraps to a cassette.
pub struct Recorder {
    inner: Arc<dyn Provider>,
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

/// A cassette being written: several [`Recorder`]s (one per provider a run
/// uses) can share it, so one run writes one cassette in call order.
#[derive(Clone)]
pub struct Cassette {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

impl Cassette {
    /// Create (or truncate) the cassette file.
    pub fn create(path: &Path) -> Result<Cassette, LlmError> {
        let file = File::create(path).map_err(|e| LlmError::Cassette {
            path: path.to_owned(),
            message: format!("cannot create: {e}"),
        })?;
        Ok(Cassette {
            path: path.to_owned(),
            file: Arc::new(Mutex::new(file)),
        })
    }

    /// A provider that records `inner`'s exchanges into this cassette.
    pub fn record(&self, inner: Arc<dyn Provider>) -> Recorder {
        Recorder {
            inner,
            path: self.path.clone(),
            file: self.file.clone(),
        }
    }
}

impl Recorder {
    /// Record `inner` into a new (truncated) cassette at `path`.
    pub fn create(inner: Arc<dyn Provider>, path: &Path) -> Result<Self, LlmError> {
        Ok(Cassette::create(path)?.record(inner))
    }

    fn write(
        &self,
        request: &ChatRequest,
        outcome: &Result<ChatResponse, LlmError>,
    ) -> Result<(), LlmError> {
        let entry = CassetteEntry {
            provider: self.inner.name().to_owned(),
            request: request.clone(),
            response: outcome.as_ref().ok().cloned(),
            error: outcome.as_ref().err().map(ToString::to_string),
        };
        let fail = |message: String| LlmError::Cassette {
            path: self.path.clone(),
            message,
        };
        let mut line = serde_json::to_string(&entry).map_err(|e| fail(e.to_string()))?;
        line.push('\n');
        // A poisoned lock only means another call panicked mid-write; the file
        // handle itself is still usable.
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // One write per line, flushed, so a crashed run leaves every finished call.
        // Blocking I/O on purpose: one short line per model call is negligible next
        // to the call itself, and keeps lines whole without an async writer task.
        file.write_all(line.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| fail(format!("cannot write: {e}")))
    }

    fn record(
        &self,
        request: &ChatRequest,
        outcome: Result<ChatResponse, LlmError>,
    ) -> Result<ChatResponse, LlmError> {
        // A cancelled call is not an exchange the workflow depends on.
        if !matches!(outcome, Err(LlmError::Cancelled)) {
            self.write(request, &outcome)?;
        }
        outcome
    }
}

impl Provider for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn endpoint(&self) -> Option<String> {
        self.inner.endpoint()
    }

    fn chat(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        async move {
            let outcome = self.inner.chat(request.clone(), cancel).await;
            self.record(&request, outcome)
        }
        .boxed()
    }

    fn stream(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, LlmError>> {
        let inner = self.inner.stream(request.clone(), cancel);
        inner
            .map(move |item| match item {
                Ok(StreamEvent::Done(response)) => {
                    self.record(&request, Ok(response)).map(StreamEvent::Done)
                }
                Err(e) => self.record(&request, Err(e)).map(StreamEvent::Done),
                other => other,
            })
            .boxed()
    }
}

/// A provider that answers from a cassette.
pub struct ReplayProvider {
    path: PathBuf,
    entries: Vec<CassetteEntry>,
    state: Mutex<ReplayState>,
    model: String,
}

#[derive(Default)]
struct ReplayState {
    used: Vec<bool>,
    calls: usize,
}

impl ReplayProvider {
    /// Load the cassette at `path`. A malformed line is an error naming the line.
    pub fn open(path: &Path) -> Result<Self, LlmError> {
        let fail = |message: String| LlmError::Cassette {
            path: path.to_owned(),
            message,
        };
        let file = File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
        let mut entries = Vec::new();
        for (n, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| fail(format!("cannot read: {e}")))?;
            if line.trim().is_empty() {
                continue;
            }
            let entry: CassetteEntry = serde_json::from_str(&line)
                .map_err(|e| fail(format!("line {}: not a cassette entry: {e}", n + 1)))?;
            entries.push(entry);
        }
        Ok(Self::from_entries(path, entries))
    }

    /// A replay provider over entries already in memory; `path` is only for messages.
    pub fn from_entries(path: &Path, entries: Vec<CassetteEntry>) -> Self {
        let model = entries
            .iter()
            .find_map(|e| e.response.as_ref().map(|r| r.model.clone()))
            .unwrap_or_else(|| "replay".to_owned());
        ReplayProvider {
            path: path.to_owned(),
            state: Mutex::new(ReplayState {
                used: vec![false; entries.len()],
                calls: 0,
            }),
            entries,
            model,
        }
    }

    /// How many recorded exchanges have not been asked for yet.
    pub fn remaining(&self) -> usize {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.used.iter().filter(|u| !**u).count()
    }

    fn answer(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        if cancel.is_cancelled() {
            return Err(LlmError::Cancelled);
        }
        let wanted = comparable(request);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.calls += 1;
        let call = state.calls;
        let found = (0..self.entries.len())
            .find(|&i| !state.used[i] && comparable(&self.entries[i].request) == wanted);
        let Some(i) = found else {
            let cassette = self.path.display();
            let next = (0..self.entries.len()).find(|&i| !state.used[i]);
            let message = match next {
                None => format!(
                    "the workflow made model request #{call}, but cassette {cassette} holds only {} exchanges, all used; record it again with --record",
                    self.entries.len()
                ),
                Some(i) => {
                    let (at, recorded, got) =
                        first_difference(&comparable(&self.entries[i].request), &wanted, "")
                            .unwrap_or_default();
                    format!(
                        "model request #{call} is not in cassette {cassette}: it differs from the next recorded request (line {}) at `{at}`: recorded {recorded}, got {got}; record it again with --record",
                        i + 1
                    )
                }
            };
            return Err(LlmError::Replay { message });
        };
        state.used[i] = true;
        let entry = &self.entries[i];
        match (&entry.response, &entry.error) {
            (Some(r), _) => Ok(r.clone()),
            (None, Some(e)) => Err(LlmError::Replay {
                message: format!("model request #{call} failed when it was recorded: {e}"),
            }),
            (None, None) => Err(LlmError::Cassette {
                path: self.path.clone(),
                message: format!("line {} has neither `response` nor `error`", i + 1),
            }),
        }
    }
}

impl Provider for ReplayProvider {
    fn name(&self) -> &str {
        "replay"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn endpoint(&self) -> Option<String> {
        Some(format!("cassette {}", self.path.display()))
    }

    fn chat(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        let answer = self.answer(&request, &cancel);
        async move { answer }.boxed()
    }

    fn stream(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, LlmError>> {
        let items: Vec<Result<StreamEvent, LlmError>> = match self.answer(&request, &cancel) {
            Ok(response) => deltas_of(&response.content)
                .into_iter()
                .map(Ok)
                .chain(std::iter::once(Ok(StreamEvent::Done(response))))
                .collect(),
            Err(e) => vec![Err(e)],
        };
        futures::stream::iter(items).boxed()
    }
}

/// The request as compared: everything but the model name.
/// A digest of each part of a request a replay compares (`system`,
/// `messages`, `tools`, `max_tokens`, `temperature`; the model aside, as a
/// cassette's match does): 16 hex digits of FNV-1a over the part's JSON.
/// Small enough to record with every `llm_request` event, stable across
/// builds, and enough to say which part of a request changed.
pub fn request_digests(request: &ChatRequest) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    if let Value::Object(parts) = comparable(request) {
        for (k, v) in parts {
            let bytes = serde_json::to_vec(&v).unwrap_or_default();
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in bytes {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            out.insert(k, format!("{h:016x}"));
        }
    }
    out
}

fn comparable(request: &ChatRequest) -> Value {
    let mut v = serde_json::to_value(request).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.remove("model");
    }
    v
}

/// Where two JSON values first differ: (path, recorded, got), short enough to read.
fn first_difference(recorded: &Value, got: &Value, path: &str) -> Option<(String, String, String)> {
    let show = |v: Option<&Value>| {
        v.map_or_else(|| "nothing".to_owned(), |v| truncate(&v.to_string(), 120))
    };
    match (recorded, got) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => first_difference(x, y, &p),
                    (x, y) => Some((p, show(x), show(y))),
                }
            })
        }
        (Value::Array(a), Value::Array(b)) => (0..a.len().max(b.len())).find_map(|i| {
            let p = format!("{path}[{i}]");
            match (a.get(i), b.get(i)) {
                (Some(x), Some(y)) => first_difference(x, y, &p),
                (x, y) => Some((p, show(x), show(y))),
            }
        }),
        (a, b) if a == b => None,
        (a, b) => Some((path.to_owned(), show(Some(a)), show(Some(b)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_are_located() {
        let a = json!({"messages": [{"content": [{"text": "hi"}]}], "system": "s"});
        let b = json!({"messages": [{"content": [{"text": "ho"}]}], "system": "s"});
        assert_eq!(
            first_difference(&a, &b, ""),
            Some((
                "messages[0].content[0].text".into(),
                "\"hi\"".into(),
                "\"ho\"".into()
            ))
        );
        let c = json!({"messages": []});
        assert_eq!(
            first_difference(&json!({"messages": [1]}), &c, "")
                .unwrap()
                .0,
            "messages[0]"
        );
        assert_eq!(first_difference(&a, &a, ""), None);
    }
}
