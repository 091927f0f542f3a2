//! The `otlp` exporter: OpenTelemetry traces and logs over OTLP/HTTP (protobuf).
//!
//! [`SpanTree`] turns the event stream into spans, using the events' own
//! timestamps:
//!
//! ```text
//! run {workflow}
//! └── step {name}
//!     └── goal {name}
//!         └── invoke_agent {agent}        (one per agent, concurrent ones side by side; `synthesis`)
//!             ├── chat {model}            (llm_request → llm_response)
//!             └── execute_tool {tool}     (tool_call → tool_result)
//! ```
//!
//! Model and tool spans follow the OpenTelemetry GenAI semantic conventions
//! (`gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
//! `gen_ai.response.model`, `gen_ai.usage.*`, `gen_ai.response.finish_reasons`,
//! `gen_ai.tool.*`); message content (`gen_ai.output.messages`, tool arguments
//! and results, the goal's outcome) only with `telemetry.capture_content`. A
//! span left open when its parent ends (a model call that failed, a run that
//! was cancelled) is ended with it, with an error status. Warnings, errors,
//! loop iterations, approvals and policy denials are span events.
//!
//! Every event is also one log record whose body is the seed's telemetry
//! message ([`super::message`]), linked to the span it belongs to.
//!
//! Export is the SDK's batch processors (their own threads, bounded queues that
//! drop when full) with opentelemetry-otlp's blocking reqwest client — the async
//! client panics under the batch processors inside tokio. The `OTEL_*`
//! variables the SDK knows (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `…_HEADERS`, `…_TIMEOUT`,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*`,
//! `OTEL_BLRP_*`, `OTEL_TRACES_SAMPLER`) apply; `telemetry.endpoint`, when set,
//! wins over the endpoint variables, as programmatic configuration does in
//! every OpenTelemetry SDK.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Array, Context, InstrumentationScope, Key, KeyValue, StringValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::logs::{LogBatch, LogExporter, SdkLogger, SdkLoggerProvider};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter};

use agentfile_wire::events::{Event, EventBody, Usage};

use super::message::{Converter, Level as LogLevel};
use super::{Exporter, RunInfo, Settings, Shared, StartError, event_time, truncate};

/// Captured content longer than this is cut (attributes are not for megabytes).
const MAX_CONTENT: usize = 32 * 1024;

pub(crate) struct OtlpExporter {
    tree: SpanTree,
    traces: SdkTracerProvider,
    logs: SdkLoggerProvider,
    logger: SdkLogger,
    convert: Converter,
    shared: Arc<Shared>,
}

/// `base` + `/v1/{signal}`, unless `base` already names a signal's path.
fn signal_url(base: &str, signal: &str) -> String {
    let mut b = base.trim_end_matches('/');
    for known in ["/v1/traces", "/v1/logs"] {
        if let Some(stripped) = b.strip_suffix(known) {
            b = stripped;
        }
    }
    format!("{b}/v1/{signal}")
}

fn resource() -> Resource {
    let from_env = Resource::builder().build();
    let named = from_env
        .get(&Key::from_static_str("service.name"))
        .is_some_and(|v| !v.as_str().starts_with("unknown_service"));
    let mut b = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if !named {
        b = b.with_service_name("agentfile");
    }
    b.build()
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("agentfile")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

impl OtlpExporter {
    pub(crate) fn new(
        settings: &Settings,
        info: &RunInfo,
        shared: Arc<Shared>,
    ) -> Result<OtlpExporter, StartError> {
        let headers: HashMap<String, String> = settings.headers.iter().cloned().collect();
        agentfile_llm::install_tls();
        let mut spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_headers(headers.clone());
        let mut logs = opentelemetry_otlp::LogExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_headers(headers);
        if let Some(base) = &settings.endpoint {
            spans = spans.with_endpoint(signal_url(base, "traces"));
            logs = logs.with_endpoint(signal_url(base, "logs"));
        }
        let spans = spans.build().map_err(|source| StartError::Otlp {
            signal: "span",
            source,
        })?;
        let logs = logs.build().map_err(|source| StartError::Otlp {
            signal: "log",
            source,
        })?;
        let resource = resource();
        let traces = SdkTracerProvider::builder()
            .with_resource(resource.clone())
            .with_batch_exporter(Counted {
                inner: spans,
                shared: shared.clone(),
            })
            .build();
        let logs = SdkLoggerProvider::builder()
            .with_resource(resource)
            .with_batch_exporter(Counted {
                inner: logs,
                shared: shared.clone(),
            })
            .build();
        let logger = logs.logger_with_scope(scope());
        Ok(OtlpExporter {
            tree: SpanTree::new(
                traces.tracer_with_scope(scope()),
                info.clone(),
                settings.capture_content,
            ),
            traces,
            logs,
            logger,
            convert: Converter::new(info, settings.capture_content),
            shared,
        })
    }

    fn log(&self, event: &Event, span: Option<&SpanContext>) {
        let message = self.convert.message(event);
        let mut record = self.logger.create_log_record();
        record.set_event_name(event_name(event.kind()));
        record.set_timestamp(event_time(event));
        record.set_observed_timestamp(SystemTime::now());
        let (number, text) = match super::message::level(&event.body) {
            LogLevel::Debug => (Severity::Debug, "DEBUG"),
            LogLevel::Info => (Severity::Info, "INFO"),
            LogLevel::Warn => (Severity::Warn, "WARN"),
            LogLevel::Error => (Severity::Error, "ERROR"),
        };
        record.set_severity_number(number);
        record.set_severity_text(text);
        record.add_attribute("session.id", event.session_id.clone());
        record.add_attribute("agentfile.seq", event.seq as i64);
        if let Some(s) = &event.step {
            record.add_attribute("agentfile.step", s.clone());
        }
        if let Some(g) = &event.goal {
            record.add_attribute("agentfile.goal", g.clone());
        }
        if let Some(a) = &event.agent {
            record.add_attribute("gen_ai.agent.name", a.clone());
        }
        if let Some(span) = span.filter(|s| s.is_valid()) {
            record.set_trace_context(span.trace_id(), span.span_id(), Some(span.trace_flags()));
        }
        match serde_json::to_value(&message) {
            Ok(v) => record.set_body(any_value(v)),
            Err(e) => record.set_body(AnyValue::from(e.to_string())),
        }
        self.logger.emit(record);
        self.shared.produced.fetch_add(1, Ordering::Relaxed);
    }
}

impl Exporter for OtlpExporter {
    fn export(&mut self, event: &Event) {
        let before = self.tree.ended;
        let span = self.tree.event(event);
        self.shared
            .produced
            .fetch_add(self.tree.ended - before, Ordering::Relaxed);
        self.log(event, span.as_ref());
    }

    fn finish(&mut self, deadline: Instant) {
        let before = self.tree.ended;
        self.tree
            .close_all(SystemTime::now(), Some("the run's telemetry ended first"));
        self.shared
            .produced
            .fetch_add(self.tree.ended - before, Ordering::Relaxed);
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(50));
        // Both processors flush at once; each gives up at the deadline.
        std::thread::scope(|s| {
            s.spawn(|| {
                if let Err(e) = self.logs.shutdown_with_timeout(left) {
                    tracing::debug!(error = %e, "telemetry: log export did not finish");
                }
            });
            if let Err(e) = self.traces.shutdown_with_timeout(left) {
                tracing::debug!(error = %e, "telemetry: span export did not finish");
            }
        });
    }
}

/// An exporter that counts what the destination accepted and remembers why
/// it refused the rest.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    shared: Arc<Shared>,
}

impl<E> Counted<E> {
    fn count(&self, n: usize, result: &OTelSdkResult) {
        match result {
            Ok(()) => {
                self.shared.delivered.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) => self.shared.failed(e.to_string()),
        }
    }
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
        self.count(n, &result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: LogExporter> LogExporter for Counted<E> {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        let n = batch.iter().count();
        let result = self.inner.export(batch).await;
        self.count(n, &result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// `agentfile.<type>` as a static string, for log records' event name.
fn event_name(kind: &str) -> &'static str {
    macro_rules! names {
        ($($k:literal),*) => {
            match kind {
                $($k => concat!("agentfile.", $k),)*
                _ => "agentfile.event",
            }
        };
    }
    names!(
        "run_started",
        "step_started",
        "goal_started",
        "agent_started",
        "llm_request",
        "llm_response",
        "tool_call",
        "tool_result",
        "policy_denied",
        "approval_required",
        "approval_resolved",
        "loop_iteration",
        "goal_complete",
        "step_complete",
        "warning",
        "error",
        "run_complete",
        "run_failed",
        "run_cancelled"
    )
}

/// JSON to an OpenTelemetry log value (nulls are left out of maps).
fn any_value(v: serde_json::Value) -> AnyValue {
    use serde_json::Value as J;
    match v {
        J::Null => AnyValue::from(""),
        J::Bool(b) => AnyValue::from(b),
        J::Number(n) => match n.as_i64() {
            Some(i) => AnyValue::from(i),
            None => AnyValue::from(n.as_f64().unwrap_or_default()),
        },
        J::String(s) => AnyValue::from(s),
        J::Array(items) => AnyValue::ListAny(Box::new(items.into_iter().map(any_value).collect())),
        J::Object(map) => AnyValue::Map(Box::new(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (Key::from(k), any_value(v)))
                .collect(),
        )),
    }
}

/// `gen_ai.provider.name` for one of our provider names.
fn provider_name(ours: &str) -> String {
    match ours {
        "gemini" => "gcp.gemini".to_owned(),
        other => other.to_owned(),
    }
}

/// Which span an event belongs to, by nesting level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Nest {
    Run,
    Step,
    /// A step-graph node below the top level (a parallel branch, a map
    /// item's tool step…); keyed by its path in `id`.
    Node,
    Goal,
    Agent,
    Call,
    Tool,
}

/// An open span's place: its level and the scope fields that level uses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Place {
    nest: Nest,
    step: Option<String>,
    goal: Option<String>,
    agent: Option<String>,
    /// A tool call's id.
    id: Option<String>,
}

impl Place {
    /// The place at `nest` of a scope: the fields deeper than `nest` dropped.
    fn scoped(
        nest: Nest,
        step: &Option<String>,
        goal: &Option<String>,
        agent: &Option<String>,
    ) -> Place {
        let keep = |level: Nest, v: &Option<String>| if nest >= level { v.clone() } else { None };
        Place {
            nest,
            step: keep(Nest::Step, step),
            goal: keep(Nest::Goal, goal),
            agent: keep(Nest::Agent, agent),
            id: None,
        }
    }

    fn at(nest: Nest, e: &Event) -> Place {
        Place::scoped(nest, &e.step, &e.goal, &e.agent)
    }

    fn tool(e: &Event, id: &str) -> Place {
        Place {
            id: Some(id.to_owned()),
            ..Place::at(Nest::Tool, e)
        }
    }

    /// This place's enclosing place at `nest`.
    fn with(&self, nest: Nest) -> Place {
        Place::scoped(nest, &self.step, &self.goal, &self.agent)
    }

    /// The places that could hold this one's parent, innermost first.
    fn ancestors(&self) -> Vec<Place> {
        let mut out = Vec::new();
        if self.nest > Nest::Agent && self.agent.is_some() {
            out.push(self.with(Nest::Agent));
        }
        if self.nest > Nest::Goal && self.goal.is_some() {
            out.push(self.with(Nest::Goal));
        }
        if self.nest > Nest::Step && self.step.is_some() {
            out.push(self.with(Nest::Step));
        }
        if self.nest > Nest::Run {
            out.push(self.with(Nest::Run));
        }
        out
    }

    /// `other` is nested inside this place.
    fn contains(&self, other: &Place) -> bool {
        other.nest > self.nest
            && match self.nest {
                Nest::Run => true,
                Nest::Step => other.step == self.step,
                Nest::Goal => other.step == self.step && other.goal == self.goal,
                Nest::Agent => {
                    other.step == self.step && other.goal == self.goal && other.agent == self.agent
                }
                Nest::Node | Nest::Call | Nest::Tool => false,
            }
    }
}

struct Open {
    span: opentelemetry_sdk::trace::Span,
    /// When something inside it last ended (agents end with their last call,
    /// not when the slowest of their siblings does).
    last: SystemTime,
    /// A tool call the policy refused.
    denied: bool,
}

/// Events to spans, for one run.
pub(crate) struct SpanTree {
    tracer: SdkTracer,
    info: RunInfo,
    capture: bool,
    open: BTreeMap<Place, Open>,
    /// The node path of the event being taken: spans it starts nest under
    /// the innermost open node span on that path.
    node: Option<String>,
    /// Spans ended so far.
    pub(crate) ended: u64,
}

impl SpanTree {
    pub(crate) fn new(tracer: SdkTracer, info: RunInfo, capture: bool) -> SpanTree {
        SpanTree {
            tracer,
            info,
            capture,
            open: BTreeMap::new(),
            node: None,
            ended: 0,
        }
    }

    fn node_place(e: &Event, path: &str) -> Place {
        Place {
            id: Some(path.to_owned()),
            ..Place::at(Nest::Node, e)
        }
    }

    /// The innermost open node span on the current event's path.
    fn open_node(&self) -> Option<&Open> {
        let path = self.node.as_deref()?;
        let mut candidates: Vec<&str> = vec![path];
        candidates.extend(path.match_indices('/').map(|(i, _)| &path[..i]));
        candidates.sort_by_key(|c| std::cmp::Reverse(c.len()));
        candidates.into_iter().find_map(|c| {
            self.open
                .iter()
                .find(|(p, _)| p.nest == Nest::Node && p.id.as_deref() == Some(c))
                .map(|(_, o)| o)
        })
    }

    /// Take one event; returns the context of the span it belongs to.
    pub(crate) fn event(&mut self, e: &Event) -> Option<SpanContext> {
        let at = super::event_time(e);
        self.node = e.node.clone();
        match &e.body {
            EventBody::RunStarted { .. } => self.run_started(e, at),
            EventBody::StepStarted { .. } => self.step_started(e, at),
            EventBody::GoalStarted { .. } => self.goal_started(e, at),
            EventBody::AgentStarted { .. } => self.agent_started(e, at),
            EventBody::LlmRequest { .. } => self.llm_request(e, at),
            // Never stored, never sent here (telemetry sinks take stored events).
            EventBody::LlmDelta { .. } => None,
            EventBody::LlmResponse { .. } => self.llm_response(e, at),
            EventBody::ToolCall { .. } => self.tool_call(e, at),
            EventBody::PolicyDenied { .. } => self.policy_denied(e, at),
            EventBody::ToolResult { .. } => self.tool_result(e, at),
            EventBody::GoalComplete { .. } => self.goal_complete(e, at),
            EventBody::StepComplete {
                iterations, stop, ..
            } => {
                let mut attrs = Vec::new();
                if let Some(n) = iterations {
                    attrs.push(KeyValue::new("agentfile.iterations", i64::from(*n)));
                }
                if let Some(s) = stop {
                    attrs.push(KeyValue::new("agentfile.loop.stop", s.as_str()));
                }
                self.end(&Place::at(Nest::Step, e), at, attrs, None)
            }
            EventBody::LoopIteration { limit } => self.mark(
                e,
                "loop_iteration",
                at,
                vec![
                    KeyValue::new("agentfile.iteration", i64::from(e.iteration.unwrap_or(0))),
                    KeyValue::new("agentfile.loop.limit", i64::from(*limit)),
                ],
            ),
            EventBody::ApprovalRequired { reason, .. } => self.mark(
                e,
                "approval_required",
                at,
                vec![KeyValue::new("agentfile.reason", reason.clone())],
            ),
            EventBody::ApprovalResolved { approved, .. } => self.mark(
                e,
                "approval_resolved",
                at,
                vec![KeyValue::new("agentfile.approved", *approved)],
            ),
            EventBody::Warning { message } => self.mark(
                e,
                "warning",
                at,
                vec![KeyValue::new("message", message.clone())],
            ),
            EventBody::Error { message } => self.mark(
                e,
                "error",
                at,
                vec![KeyValue::new("message", message.clone())],
            ),
            EventBody::RunComplete { usage, .. } => self.end_run(at, usage, None),
            EventBody::RunFailed {
                error,
                termination_reason,
                usage,
            } => self.end_run(
                at,
                usage,
                Some((termination_reason.as_str(), error.as_str())),
            ),
            EventBody::RunCancelled { usage } => {
                self.end_run(at, usage, Some(("cancelled", "the run was cancelled")))
            }
            EventBody::RunSuspended { usage, .. } => self.end_run(at, usage, None),
            // Nodes below the top level: one span each.
            EventBody::NodeStarted { .. } => self.node_started(e, at),
            EventBody::NodeComplete { .. } => {
                let path = e.node.clone().unwrap_or_default();
                self.end(&Self::node_place(e, &path), at, Vec::new(), None)
            }
            EventBody::NodeFailed { .. } => self.node_failed(e, at),
            EventBody::Suspended { events, .. } => self.mark(
                e,
                "suspended",
                at,
                vec![KeyValue::new("agentfile.events", events.join(","))],
            ),
            EventBody::Artifact {
                path,
                bytes,
                sha256,
            } => self.mark(
                e,
                "artifact",
                at,
                vec![
                    KeyValue::new("agentfile.artifact.path", path.clone()),
                    KeyValue::new("agentfile.artifact.bytes", *bytes as i64),
                    KeyValue::new("agentfile.artifact.sha256", sha256.clone()),
                ],
            ),
            EventBody::Signal { event, .. } => self.mark(
                e,
                "signal",
                at,
                vec![KeyValue::new("agentfile.event", event.clone())],
            ),
            EventBody::Compensating { nodes, .. } => self.mark(
                e,
                "compensating",
                at,
                vec![KeyValue::new("agentfile.nodes", nodes.join(","))],
            ),
        }
    }

    /// [`EventBody::RunStarted`]: The run's root span opens.
    fn run_started(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::RunStarted {
            workflow,
            provider,
            model,
            inputs,
            resumed_from_seq,
            trigger,
            ..
        } = &e.body
        else {
            return None;
        };
        let mut attrs = vec![
            KeyValue::new("session.id", e.session_id.clone()),
            KeyValue::new("agentfile.workflow", workflow.clone()),
            KeyValue::new("agentfile.agent_id", self.info.agent_id.clone()),
            KeyValue::new("agentfile.provider", provider.clone()),
            KeyValue::new("agentfile.model", model.clone()),
        ];
        if let Some(s) = resumed_from_seq {
            attrs.push(KeyValue::new("agentfile.resumed_from_seq", *s as i64));
        }
        if let Some(t) = trigger {
            attrs.push(KeyValue::new("agentfile.trigger.id", t.id.clone()));
            attrs.push(KeyValue::new("agentfile.trigger.kind", t.kind.clone()));
        }
        if self.capture {
            attrs.push(KeyValue::new(
                "agentfile.inputs",
                serde_json::to_string(inputs).unwrap_or_default(),
            ));
        }
        self.start(
            Place::at(Nest::Run, e),
            format!("run {workflow}"),
            SpanKind::Internal,
            at,
            attrs,
        )
    }

    /// [`EventBody::StepStarted`]: A step's span opens.
    fn step_started(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::StepStarted { kind, goals, limit } = &e.body else {
            return None;
        };
        let mut attrs = vec![
            KeyValue::new("agentfile.step", e.step.clone().unwrap_or_default()),
            KeyValue::new("agentfile.step.kind", kind.clone()),
            strings("agentfile.step.goals", goals),
        ];
        if let Some(l) = limit {
            attrs.push(KeyValue::new("agentfile.loop.limit", i64::from(*l)));
        }
        self.start(
            Place::at(Nest::Step, e),
            format!("step {}", e.step.as_deref().unwrap_or("")),
            SpanKind::Internal,
            at,
            attrs,
        )
    }

    /// [`EventBody::GoalStarted`]: A goal's span opens (one per iteration in a loop).
    fn goal_started(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::GoalStarted { outcome, agents } = &e.body else {
            return None;
        };
        let mut attrs = vec![
            KeyValue::new("agentfile.goal", e.goal.clone().unwrap_or_default()),
            strings("agentfile.goal.agents", agents),
        ];
        if let Some(i) = e.iteration {
            attrs.push(KeyValue::new("agentfile.iteration", i64::from(i)));
        }
        if self.capture {
            attrs.push(KeyValue::new(
                "agentfile.goal.outcome",
                truncate(outcome, MAX_CONTENT),
            ));
        }
        self.start(
            Place::at(Nest::Goal, e),
            format!("goal {}", e.goal.as_deref().unwrap_or("")),
            SpanKind::Internal,
            at,
            attrs,
        )
    }

    /// [`EventBody::AgentStarted`]: An agent's `invoke_agent` span opens.
    fn agent_started(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::AgentStarted { role } = &e.body else {
            return None;
        };
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.agent.name", role.clone()),
            KeyValue::new(
                "gen_ai.provider.name",
                provider_name(self.info.provider_for(e.agent.as_deref())),
            ),
        ];
        if let Some(i) = e.iteration {
            attrs.push(KeyValue::new("agentfile.iteration", i64::from(i)));
        }
        self.start(
            Place::at(Nest::Agent, e),
            format!("invoke_agent {role}"),
            SpanKind::Internal,
            at,
            attrs,
        )
    }

    /// [`EventBody::LlmRequest`]: A model call's `chat` span opens.
    fn llm_request(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::LlmRequest {
            model,
            turn,
            messages,
            tools,
            ..
        } = &e.body
        else {
            return None;
        };
        let provider = provider_name(self.info.provider_for(e.agent.as_deref()));
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", provider.clone()),
            KeyValue::new("gen_ai.system", provider),
            KeyValue::new("gen_ai.request.model", model.clone()),
            KeyValue::new("agentfile.turn", i64::from(*turn)),
            KeyValue::new("agentfile.request.messages", *messages as i64),
            KeyValue::new("agentfile.request.tools", *tools as i64),
        ];
        if let Some(a) = &e.agent {
            attrs.push(KeyValue::new("gen_ai.agent.name", a.clone()));
        }
        self.start(
            Place::at(Nest::Call, e),
            format!("chat {model}"),
            SpanKind::Client,
            at,
            attrs,
        )
    }

    /// [`EventBody::LlmResponse`]: A model call's `chat` span ends with its usage (and opens first if its request was lost).
    fn llm_response(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::LlmResponse {
            model,
            input_tokens,
            output_tokens,
            latency_ms,
            cost_usd,
            stop_reason,
            text,
            tool_calls,
            ..
        } = &e.body
        else {
            return None;
        };
        let place = Place::at(Nest::Call, e);
        let mut attrs = vec![
            KeyValue::new("gen_ai.response.model", model.clone()),
            KeyValue::new("gen_ai.usage.input_tokens", *input_tokens as i64),
            KeyValue::new("gen_ai.usage.output_tokens", *output_tokens as i64),
            strings(
                "gen_ai.response.finish_reasons",
                std::slice::from_ref(stop_reason),
            ),
            KeyValue::new("agentfile.latency_ms", *latency_ms as i64),
        ];
        if let Some(c) = cost_usd {
            attrs.push(KeyValue::new("agentfile.cost_usd", *c));
        }
        if self.capture {
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(serde_json::json!({"type": "text", "content": text}));
            }
            for c in tool_calls {
                parts.push(serde_json::json!({
                    "type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments
                }));
            }
            let messages = serde_json::json!([{
                "role": "assistant", "parts": parts, "finish_reason": stop_reason
            }]);
            attrs.push(KeyValue::new(
                "gen_ai.output.messages",
                truncate(&messages.to_string(), MAX_CONTENT),
            ));
        }
        if !self.open.contains_key(&place) {
            // The request was lost (a dropped event): start where it must have.
            let start = at
                .checked_sub(Duration::from_millis(*latency_ms))
                .unwrap_or(at);
            self.start(
                place.clone(),
                format!("chat {model}"),
                SpanKind::Client,
                start,
                vec![KeyValue::new("gen_ai.operation.name", "chat")],
            );
        }
        self.end(&place, at, attrs, None)
    }

    /// [`EventBody::ToolCall`]: A tool call's `execute_tool` span opens.
    fn tool_call(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::ToolCall {
            id,
            tool,
            arguments,
        } = &e.body
        else {
            return None;
        };
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.clone()),
            KeyValue::new("gen_ai.tool.call.id", id.clone()),
            KeyValue::new("gen_ai.tool.type", "function"),
        ];
        if self.capture {
            attrs.push(KeyValue::new(
                "gen_ai.tool.call.arguments",
                truncate(&arguments.to_string(), MAX_CONTENT),
            ));
        }
        self.start(
            Place::tool(e, id),
            format!("execute_tool {tool}"),
            SpanKind::Internal,
            at,
            attrs,
        )
    }

    /// [`EventBody::PolicyDenied`]: The open tool span is marked as refused by the policy.
    fn policy_denied(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::PolicyDenied {
            id, rule, reason, ..
        } = &e.body
        else {
            return None;
        };
        let place = Place::tool(e, id);
        let open = self.open.get_mut(&place)?;
        open.denied = true;
        open.span
            .set_attribute(KeyValue::new("error.type", "policy_denied"));
        open.span
            .set_attribute(KeyValue::new("agentfile.policy.rule", rule.clone()));
        open.span.add_event_with_timestamp(
            "policy_denied",
            at,
            vec![
                KeyValue::new("agentfile.policy.rule", rule.clone()),
                KeyValue::new("agentfile.policy.reason", reason.clone()),
            ],
        );
        Some(open.span.span_context().clone())
    }

    /// [`EventBody::ToolResult`]: A tool call's span ends, in error if the tool failed.
    fn tool_result(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::ToolResult {
            id,
            content,
            is_error,
            duration_ms,
            ..
        } = &e.body
        else {
            return None;
        };
        let place = Place::tool(e, id);
        let mut attrs = vec![KeyValue::new("agentfile.duration_ms", *duration_ms as i64)];
        if self.capture {
            attrs.push(KeyValue::new(
                "gen_ai.tool.call.result",
                truncate(content, MAX_CONTENT),
            ));
        }
        if !self.open.contains_key(&place) {
            return self.innermost(&place);
        }
        let denied = self.open.get(&place).is_some_and(|o| o.denied);
        if *is_error && !denied {
            attrs.push(KeyValue::new("error.type", "tool_error"));
        }
        let status = is_error.then(|| {
            if denied {
                "denied by policy".to_owned()
            } else {
                "the tool reported an error".to_owned()
            }
        });
        self.end(&place, at, attrs, status.as_deref())
    }

    /// [`EventBody::GoalComplete`]: A goal's span ends, or one agent's (at its last call).
    fn goal_complete(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::GoalComplete {
            tool_calls,
            converged,
            done,
            ..
        } = &e.body
        else {
            return None;
        };
        let mut attrs = vec![KeyValue::new("agentfile.tool_calls", *tool_calls as i64)];
        if let Some(c) = converged {
            attrs.push(KeyValue::new("agentfile.converged", c.as_str()));
        }
        if *done {
            attrs.push(KeyValue::new("agentfile.signal_done", true));
        }
        if e.agent.is_some() {
            // One agent of several is done: its span ends with its last call.
            let place = Place::at(Nest::Agent, e);
            let last = self.open.get(&place).map(|o| o.last).unwrap_or(at);
            self.end(&place, last, attrs, None)
        } else {
            self.end(&Place::at(Nest::Goal, e), at, attrs, None)
        }
    }

    /// [`EventBody::NodeStarted`]: A node below the top level opens its span, under its enclosing node.
    fn node_started(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::NodeStarted { kind } = &e.body else {
            return None;
        };
        let path = e.node.clone().unwrap_or_default();
        // Its parent is the enclosing node, not itself.
        self.node = path.rsplit_once('/').map(|(p, _)| p.to_owned());
        let place = Self::node_place(e, &path);
        self.start(
            place,
            format!("{kind} {path}"),
            SpanKind::Internal,
            at,
            vec![
                KeyValue::new("agentfile.node", path.clone()),
                KeyValue::new("agentfile.node.kind", kind.clone()),
            ],
        )
    }

    /// [`EventBody::NodeFailed`]: A node's failed attempt: an event, or the end of its span on the last one.
    fn node_failed(&mut self, e: &Event, at: SystemTime) -> Option<SpanContext> {
        let EventBody::NodeFailed {
            error,
            attempt,
            retry_in_ms,
        } = &e.body
        else {
            return None;
        };
        let path = e.node.clone().unwrap_or_default();
        let place = Self::node_place(e, &path);
        match retry_in_ms {
            // The last attempt failed: the node's span ends in error.
            None if self.open.contains_key(&place) => {
                self.end(&place, at, Vec::new(), Some(error.as_str()))
            }
            _ => self.mark(
                e,
                "node_failed",
                at,
                vec![
                    KeyValue::new("agentfile.node", path),
                    KeyValue::new("agentfile.attempt", i64::from(*attempt)),
                    KeyValue::new("message", error.clone()),
                ],
            ),
        }
    }

    /// Open a span at `place` under its innermost open ancestor; a span still
    /// open there (a CONVERGE round's agent, a loop's goal) ends first.
    fn start(
        &mut self,
        place: Place,
        name: String,
        kind: SpanKind,
        at: SystemTime,
        attrs: Vec<KeyValue>,
    ) -> Option<SpanContext> {
        if self.open.contains_key(&place) {
            self.end(&place, at, Vec::new(), None);
        }
        let nearest = place
            .ancestors()
            .into_iter()
            .find(|p| self.open.contains_key(p));
        // Inside a goal the goal's spans are nearer than any node; else the
        // node the event belongs to is nearer than its step.
        let parent = match nearest {
            Some(p) if p.nest >= Nest::Goal => self.open.get(&p),
            other => self
                .open_node()
                .or_else(|| other.and_then(|p| self.open.get(&p))),
        }
        .map(|o| Context::new().with_remote_span_context(o.span.span_context().clone()))
        .unwrap_or_default();
        let builder = self
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_start_time(at)
            .with_attributes(attrs);
        let span = self.tracer.build_with_context(builder, &parent);
        let cx = span.span_context().clone();
        self.open.insert(
            place,
            Open {
                span,
                last: at,
                denied: false,
            },
        );
        Some(cx)
    }

    /// End the span at `place` and, first, every span still open inside it.
    /// Those inherit `error`; without one, an agent ending with its goal is
    /// normal, but a model or tool call that never got its result is an error.
    fn end(
        &mut self,
        place: &Place,
        at: SystemTime,
        attrs: Vec<KeyValue>,
        error: Option<&str>,
    ) -> Option<SpanContext> {
        let mut inner: Vec<Place> = self
            .open
            .keys()
            .filter(|p| place.contains(p))
            .cloned()
            .collect();
        inner.sort_by_key(|p| std::cmp::Reverse(p.nest));
        for p in inner {
            let why = match error {
                Some(e) => Some(e),
                None if p.nest >= Nest::Call => Some("ended before its result arrived"),
                None => None,
            };
            self.finish(&p, at, Vec::new(), why);
        }
        self.finish(place, at, attrs, error)
    }

    fn finish(
        &mut self,
        place: &Place,
        at: SystemTime,
        attrs: Vec<KeyValue>,
        error: Option<&str>,
    ) -> Option<SpanContext> {
        let mut open = self.open.remove(place)?;
        open.span.set_attributes(attrs);
        if let Some(why) = error {
            open.span.set_status(Status::error(truncate(why, 1024)));
        }
        let at = at.max(open.last);
        open.span.end_with_timestamp(at);
        self.ended += 1;
        for p in place.ancestors() {
            if let Some(o) = self.open.get_mut(&p) {
                o.last = o.last.max(at);
            }
        }
        Some(open.span.span_context().clone())
    }

    /// A span event on the innermost open span of the event's scope.
    fn mark(
        &mut self,
        e: &Event,
        name: &'static str,
        at: SystemTime,
        attrs: Vec<KeyValue>,
    ) -> Option<SpanContext> {
        let place = Place::at(Nest::Call, e);
        let key = place
            .ancestors()
            .into_iter()
            .find(|p| self.open.contains_key(p))?;
        let open = self.open.get_mut(&key)?;
        open.span.add_event_with_timestamp(name, at, attrs);
        Some(open.span.span_context().clone())
    }

    fn innermost(&self, place: &Place) -> Option<SpanContext> {
        place
            .ancestors()
            .iter()
            .find_map(|p| self.open.get(p))
            .map(|o| o.span.span_context().clone())
    }

    fn end_run(
        &mut self,
        at: SystemTime,
        usage: &Usage,
        failure: Option<(&str, &str)>,
    ) -> Option<SpanContext> {
        let run = Place {
            nest: Nest::Run,
            step: None,
            goal: None,
            agent: None,
            id: None,
        };
        let mut attrs = vec![
            KeyValue::new("agentfile.usage.input_tokens", usage.input_tokens as i64),
            KeyValue::new("agentfile.usage.output_tokens", usage.output_tokens as i64),
            KeyValue::new("agentfile.usage.model_calls", usage.turns as i64),
            KeyValue::new("agentfile.usage.tool_calls", usage.tool_calls as i64),
        ];
        if let Some(c) = usage.cost_usd {
            attrs.push(KeyValue::new("agentfile.usage.cost_usd", c));
        }
        let error = failure.map(|(reason, error)| {
            attrs.push(KeyValue::new("error.type", reason.to_owned()));
            format!("{reason}: {error}")
        });
        if !self.open.contains_key(&run) {
            self.close_all(at, error.as_deref());
            return None;
        }
        self.end(&run, at, attrs, error.as_deref())
    }

    /// End every open span (innermost first).
    pub(crate) fn close_all(&mut self, at: SystemTime, error: Option<&str>) {
        let mut places: Vec<Place> = self.open.keys().cloned().collect();
        places.sort_by_key(|p| std::cmp::Reverse(p.nest));
        for p in places {
            self.finish(&p, at, Vec::new(), error);
        }
    }
}

fn strings(key: &'static str, values: &[String]) -> KeyValue {
    KeyValue::new(
        key,
        Value::Array(Array::String(
            values.iter().cloned().map(StringValue::from).collect(),
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_wire::events::ToolCallInfo;
    use opentelemetry::trace::SpanId;
    use std::sync::Mutex;

    /// Keeps every exported span.
    #[derive(Debug, Clone, Default)]
    struct Keep(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Keep {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    fn tree(capture: bool) -> (SpanTree, Keep, SdkTracerProvider) {
        let keep = Keep::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(keep.clone())
            .build();
        let info = RunInfo {
            session_id: "s1".into(),
            workflow: "wf".into(),
            agent_id: "default".into(),
            provider: "openai".into(),
            ..RunInfo::default()
        };
        let t = SpanTree::new(provider.tracer("test"), info, capture);
        (t, keep, provider)
    }

    struct Feed {
        seq: u64,
    }

    impl Feed {
        fn ev(
            &mut self,
            ms: u64,
            scope: (Option<&str>, Option<&str>, Option<&str>),
            body: EventBody,
        ) -> Event {
            self.seq += 1;
            Event {
                schema_version: 1,
                session_id: "s1".into(),
                seq: self.seq,
                ts: agentfile_wire::events::rfc3339(
                    std::time::UNIX_EPOCH + Duration::from_millis(1_795_341_600_000 + ms),
                ),
                step: scope.0.map(str::to_owned),
                goal: scope.1.map(str::to_owned),
                agent: scope.2.map(str::to_owned),
                iteration: None,
                node: None,
                node_kind: None,
                replayed: false,
                body,
            }
        }
    }

    /// `run_started` of `wf`, then `step_started` of `main` (one goal, `g`).
    fn opening(f: &mut Feed) -> [Event; 2] {
        [
            f.ev(
                0,
                (None, None, None),
                EventBody::RunStarted {
                    workflow: "wf".into(),
                    path: "x".into(),
                    inputs: Default::default(),
                    provider: "openai".into(),
                    model: "gpt-4o".into(),
                    endpoint: None,
                    workspace: "/w".into(),
                    resumed_from_seq: None,
                    fingerprint: None,
                    digests: Default::default(),
                    trigger: None,
                    sandbox: None,
                    forked_from: None,
                    replay_of: None,
                    package: None,
                },
            ),
            f.ev(
                1,
                (Some("main"), None, None),
                EventBody::StepStarted {
                    kind: "run".into(),
                    goals: vec!["g".into()],
                    limit: None,
                },
            ),
        ]
    }

    fn request() -> EventBody {
        EventBody::LlmRequest {
            model: "gpt-4o".into(),
            turn: 1,
            messages: 1,
            tools: 2,
            digests: Default::default(),
        }
    }

    fn response(i: u64, o: u64, calls: Vec<ToolCallInfo>) -> EventBody {
        EventBody::LlmResponse {
            model: "gpt-4o-2024".into(),
            turn: 1,
            input_tokens: i,
            output_tokens: o,
            latency_ms: 5,
            cost_usd: None,
            stop_reason: "stop".into(),
            text: "secret answer".into(),
            tool_calls: calls,
        }
    }

    fn attr<'a>(s: &'a SpanData, key: &str) -> Option<&'a Value> {
        s.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    fn by_name<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span `{name}`"))
    }

    /// Graph nodes below the top level get a span each, under the step (or
    /// the enclosing node), and a tool call in a node nests under it.
    #[test]
    fn graph_nodes_get_their_own_spans() {
        let (mut t, keep, _p) = tree(false);
        let mut f = Feed { seq: 0 };
        let s = Some("main");
        let mut at = |ms: u64, node: &str, body: EventBody| {
            let mut e = f.ev(ms, (s, None, None), body);
            e.node = Some(node.to_owned());
            e
        };
        let mut events = opening(&mut Feed { seq: 0 }).to_vec();
        let call = || EventBody::ToolCall {
            id: "node:main/fan/a".into(),
            tool: "bash".into(),
            arguments: serde_json::json!({"command": "true"}),
        };
        events.extend([
            at(
                2,
                "main/fan",
                EventBody::NodeStarted {
                    kind: "parallel".into(),
                },
            ),
            at(
                3,
                "main/fan/a",
                EventBody::NodeStarted {
                    kind: "tool".into(),
                },
            ),
            at(4, "main/fan/a", call()),
            at(
                5,
                "main/fan/a",
                EventBody::ToolResult {
                    id: "node:main/fan/a".into(),
                    tool: "bash".into(),
                    content: "ok".into(),
                    is_error: false,
                    duration_ms: 1,
                },
            ),
            at(
                6,
                "main/fan/a",
                EventBody::NodeComplete {
                    output: serde_json::json!("ok"),
                    next: None,
                },
            ),
            at(
                7,
                "main/fan",
                EventBody::NodeComplete {
                    output: serde_json::Value::Null,
                    next: None,
                },
            ),
        ]);
        let mut tail = Feed { seq: 100 };
        events.push(tail.ev(
            8,
            (s, None, None),
            EventBody::StepComplete {
                iterations: None,
                stop: None,
                output: None,
                next: None,
            },
        ));
        events.push(tail.ev(
            9,
            (None, None, None),
            EventBody::RunComplete {
                outputs: Default::default(),
                usage: Usage::default(),
            },
        ));
        for e in &events {
            t.event(e);
        }
        assert!(t.open.is_empty());
        let spans = keep.0.lock().unwrap().clone();
        let id = |n: &str| by_name(&spans, n).span_context.span_id();
        let parent = |n: &str| by_name(&spans, n).parent_span_id;
        assert_eq!(parent("parallel main/fan"), id("step main"));
        assert_eq!(parent("tool main/fan/a"), id("parallel main/fan"));
        assert_eq!(parent("execute_tool bash"), id("tool main/fan/a"));
    }

    /// A run the daemon started names its trigger on the run's span.
    #[test]
    fn the_trigger_is_on_the_run_span() {
        let (mut t, keep, _p) = tree(false);
        let mut events = opening(&mut Feed { seq: 0 }).to_vec();
        if let EventBody::RunStarted { trigger, .. } = &mut events[0].body {
            *trigger = Some(Box::new(agentfile_wire::events::RunTrigger {
                id: "nightly#0".into(),
                kind: "schedule".into(),
                fired_at: "2026-07-01T09:00:00.002Z".into(),
                scheduled_for: Some("2026-07-01T09:00:00Z".into()),
                delivery_id: None,
                event_id: None,
            }));
        }
        let mut tail = Feed { seq: 100 };
        events.push(tail.ev(
            8,
            (Some("main"), None, None),
            EventBody::StepComplete {
                iterations: None,
                stop: None,
                output: None,
                next: None,
            },
        ));
        events.push(tail.ev(
            9,
            (None, None, None),
            EventBody::RunComplete {
                outputs: Default::default(),
                usage: Usage::default(),
            },
        ));
        for e in &events {
            t.event(e);
        }
        let spans = keep.0.lock().unwrap().clone();
        let run = by_name(&spans, "run wf");
        assert_eq!(
            attr(run, "agentfile.trigger.id"),
            Some(&Value::from("nightly#0"))
        );
        assert_eq!(
            attr(run, "agentfile.trigger.kind"),
            Some(&Value::from("schedule"))
        );
        // A run nobody's trigger started has neither.
        assert!(attr(by_name(&spans, "step main"), "agentfile.trigger.id").is_none());
    }

    /// Two concurrent agents, interleaved, then a synthesis.
    #[test]
    fn concurrent_agents_get_their_own_spans() {
        let (mut t, keep, _p) = tree(false);
        let mut f = Feed { seq: 0 };
        let (s, g) = (Some("main"), Some("g"));
        let a = (s, g, Some("a"));
        let b = (s, g, Some("b"));
        let mut events = opening(&mut f).to_vec();
        events.extend([
            f.ev(
                2,
                (s, g, None),
                EventBody::GoalStarted {
                    outcome: "do it".into(),
                    agents: vec!["a".into(), "b".into()],
                },
            ),
            f.ev(3, a, EventBody::AgentStarted { role: "a".into() }),
            f.ev(3, a, request()),
            f.ev(4, b, EventBody::AgentStarted { role: "b".into() }),
            f.ev(4, b, request()),
            f.ev(
                10,
                a,
                response(
                    100,
                    7,
                    vec![ToolCallInfo {
                        id: "c1".into(),
                        name: "ls".into(),
                        arguments: serde_json::json!({"path": "."}),
                    }],
                ),
            ),
            f.ev(
                11,
                a,
                EventBody::ToolCall {
                    id: "c1".into(),
                    tool: "ls".into(),
                    arguments: serde_json::json!({"path": "."}),
                },
            ),
            f.ev(12, b, response(200, 9, vec![])),
            f.ev(
                13,
                a,
                EventBody::ToolResult {
                    id: "c1".into(),
                    tool: "ls".into(),
                    content: "a.txt".into(),
                    is_error: true,
                    duration_ms: 2,
                },
            ),
            f.ev(14, a, request()),
            f.ev(20, a, response(120, 3, vec![])),
            f.ev(
                21,
                a,
                EventBody::GoalComplete {
                    output: "A".into(),
                    fields: Default::default(),
                    converged: None,
                    tool_calls: 1,
                    done: false,
                },
            ),
            f.ev(
                21,
                b,
                EventBody::GoalComplete {
                    output: "B".into(),
                    fields: Default::default(),
                    converged: None,
                    tool_calls: 0,
                    done: false,
                },
            ),
            f.ev(
                22,
                (s, g, Some("synthesis")),
                EventBody::AgentStarted {
                    role: "synthesis".into(),
                },
            ),
            f.ev(22, (s, g, Some("synthesis")), request()),
            f.ev(30, (s, g, Some("synthesis")), response(50, 5, vec![])),
            f.ev(
                31,
                (s, g, None),
                EventBody::GoalComplete {
                    output: "S".into(),
                    fields: Default::default(),
                    converged: None,
                    tool_calls: 1,
                    done: false,
                },
            ),
            f.ev(
                32,
                (s, None, None),
                EventBody::StepComplete {
                    iterations: None,
                    stop: None,
                    output: None,
                    next: None,
                },
            ),
            f.ev(
                33,
                (None, None, None),
                EventBody::RunComplete {
                    outputs: Default::default(),
                    usage: Usage::default(),
                },
            ),
        ]);
        for e in &events {
            t.event(e);
        }
        assert!(t.open.is_empty());
        let spans = keep.0.lock().unwrap().clone();
        assert_eq!(spans.len(), 1 + 1 + 1 + 3 + 4 + 1, "{spans:#?}");
        assert_eq!(t.ended, spans.len() as u64);
        let id = |n: &str| by_name(&spans, n).span_context.span_id();
        let parent = |n: &str| by_name(&spans, n).parent_span_id;
        assert_eq!(parent("run wf"), SpanId::INVALID);
        assert_eq!(parent("step main"), id("run wf"));
        assert_eq!(parent("goal g"), id("step main"));
        for agent in ["invoke_agent a", "invoke_agent b", "invoke_agent synthesis"] {
            assert_eq!(parent(agent), id("goal g"), "{agent}");
        }
        assert_eq!(parent("execute_tool ls"), id("invoke_agent a"));
        let chats: Vec<&SpanData> = spans.iter().filter(|s| s.name == "chat gpt-4o").collect();
        assert_eq!(chats.len(), 4);
        let under = |agent: &str| {
            chats
                .iter()
                .filter(|c| c.parent_span_id == id(agent))
                .map(|c| attr(c, "gen_ai.usage.input_tokens").cloned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            under("invoke_agent a"),
            vec![Some(Value::I64(100)), Some(Value::I64(120))]
        );
        assert_eq!(under("invoke_agent b"), vec![Some(Value::I64(200))]);
        for agent in ["invoke_agent a", "invoke_agent b", "invoke_agent synthesis"] {
            assert_eq!(by_name(&spans, agent).status, Status::Unset, "{agent}");
        }
        // b ended with its own call, not when a did.
        let b_span = by_name(&spans, "invoke_agent b");
        assert!(b_span.end_time < by_name(&spans, "invoke_agent a").end_time);
        let tool = by_name(&spans, "execute_tool ls");
        assert!(matches!(tool.status, Status::Error { .. }));
        assert_eq!(attr(tool, "error.type"), Some(&Value::from("tool_error")));
        assert_eq!(
            attr(chats[0], "gen_ai.response.finish_reasons"),
            Some(&Value::Array(Array::String(vec!["stop".into()])))
        );
        // Capture is off: no content anywhere.
        for s in &spans {
            for kv in &s.attributes {
                assert!(!kv.value.to_string().contains("secret answer"), "{kv:?}");
            }
        }
        assert!(attr(chats[0], "gen_ai.output.messages").is_none());
    }

    #[test]
    fn a_failed_run_ends_open_spans_with_errors() {
        let (mut t, keep, _p) = tree(true);
        let mut f = Feed { seq: 0 };
        let s = Some("main");
        let opening = opening(&mut f);
        for e in opening.into_iter().chain([
            f.ev(
                2,
                (s, Some("g"), None),
                EventBody::GoalStarted {
                    outcome: "do".into(),
                    agents: vec![],
                },
            ),
            f.ev(3, (s, Some("g"), None), request()),
            f.ev(
                9,
                (None, None, None),
                EventBody::RunFailed {
                    error: "model call failed: 500".into(),
                    termination_reason: agentfile_wire::events::TerminationReason::Error,
                    usage: Usage::default(),
                },
            ),
        ]) {
            t.event(&e);
        }
        let spans = keep.0.lock().unwrap().clone();
        assert_eq!(spans.len(), 4);
        for s in &spans {
            assert!(matches!(s.status, Status::Error { .. }), "{}", s.name);
        }
        let chat = by_name(&spans, "chat gpt-4o");
        assert_eq!(
            chat.parent_span_id,
            by_name(&spans, "goal g").span_context.span_id()
        );
        assert_eq!(
            attr(by_name(&spans, "goal g"), "agentfile.goal.outcome"),
            Some(&Value::from("do"))
        );
    }

    #[test]
    fn urls_for_each_signal() {
        assert_eq!(
            signal_url("http://c:4318", "traces"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            signal_url("http://c:4318/", "logs"),
            "http://c:4318/v1/logs"
        );
        assert_eq!(
            signal_url("http://c/otlp/v1/traces", "logs"),
            "http://c/otlp/v1/logs"
        );
    }

    #[test]
    fn json_becomes_log_values() {
        let v = any_value(serde_json::json!({"a": 1, "b": [true, 1.5], "n": null}));
        let AnyValue::Map(m) = v else { panic!() };
        assert_eq!(m.len(), 2);
        assert_eq!(m[&Key::from("a")], AnyValue::Int(1));
    }
}
