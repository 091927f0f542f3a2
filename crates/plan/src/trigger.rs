//! Trigger and routine declarations: what starts a workflow without anyone
//! typing a command (CONTRACT §15), whatever format declared it.
//!
//! A front end hands each `triggers:` entry, routine body or schedule
//! trigger to the decoders here as the YAML value it read; they return the
//! declaration and the [`Problem`]s found, each at a pointer relative to the
//! value, which the front end turns into a span in its own file. The checks
//! are those the daemon makes at registration: a cron expression and a time
//! zone the scheduler accepts ([`agentfile_triggers::Schedule::parse`]),
//! policy values its types accept, a known kind. What needs the host — the
//! webhook listener ([`webhooks_enabled`]), a routine registry — is checked
//! where the config is known.

use std::str::FromStr;

use agentfile_triggers::{CatchUp, Overlap, Quota, Schedule, ScheduleError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The time zone of a schedule that names none.
pub const DEFAULT_TIMEZONE: &str = "UTC";

/// The variable holding a webhook's HMAC secret when the trigger names none.
pub const DEFAULT_SECRET_ENV: &str = "AGENTFILE_WEBHOOK_SECRET";

/// The trigger kinds, as a message lists them.
pub const KINDS: &str = "schedule, webhook, event or manual";

/// What a webhook trigger needs from the host, as an error says it.
pub const WEBHOOKS_NEEDED: &str = "webhook triggers need the daemon's webhook listener: set `[daemon] webhooks = \"127.0.0.1:8787\"` in agent.toml";

/// What a routine `ref:` needs, as an error says it.
pub const ROUTINE_REF_NEEDED: &str =
    "routine `ref:` needs a routine registry, which agentfile cannot reach";

/// Per-trigger policy fields, shared by every kind but `manual`.
const POLICY_FIELDS: &[&str] = &[
    "catch_up",
    "overlap",
    "max_runs_per_day",
    "max_cost_usd_per_day",
];

/// One declared trigger: a `triggers:` entry, a routine, or a workflow.yaml
/// schedule. Its id is `<workflow-id>#<index>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TriggerDecl {
    /// Its position among the workflow's triggers (a WORKFLOW.md's
    /// `triggers:` first, then its `routines:`).
    pub index: u32,
    /// `<workflow-id>#<index>`, as `triggers list` and `fire` name it.
    pub id: String,
    pub kind: TriggerKind,
    /// `kind: schedule`: when it fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleDecl>,
    /// `kind: webhook`: where deliveries are posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookDecl>,
    /// `kind: event`: the event that fires it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<EventDecl>,
    /// `kind: manual`: the label a UI shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Catch-up, overlap and quota, where written (else the `[daemon]`
    /// defaults apply).
    #[serde(default, skip_serializing_if = "TriggerPolicy::is_empty")]
    pub policy: TriggerPolicy,
    /// The routine (AIP-41) it came from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routine: Option<RoutineDecl>,
    /// Where it is declared, for the daemon's messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<SourceAt>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    Schedule,
    Webhook,
    Event,
    Manual,
}

impl TriggerKind {
    pub fn name(self) -> &'static str {
        match self {
            TriggerKind::Schedule => "schedule",
            TriggerKind::Webhook => "webhook",
            TriggerKind::Event => "event",
            TriggerKind::Manual => "manual",
        }
    }

    fn parse(s: &str) -> Option<TriggerKind> {
        Some(match s {
            "schedule" => TriggerKind::Schedule,
            "webhook" => TriggerKind::Webhook,
            "event" => TriggerKind::Event,
            "manual" => TriggerKind::Manual,
            _ => return None,
        })
    }
}

/// A cron expression (already checked by [`Schedule::parse`]) in an IANA
/// time zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ScheduleDecl {
    pub cron: String,
    /// `UTC` when none is written.
    pub timezone: String,
}

impl ScheduleDecl {
    /// The schedule the daemon fires on; it parsed at validation, so an
    /// error here means the scheduler changed since.
    pub fn parse(&self) -> Result<Schedule, ScheduleError> {
        Schedule::parse(&self.cron, &self.timezone)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookDecl {
    /// `/…`: deliveries go to `POST /hooks<path>`.
    pub path: String,
    /// The environment variable holding the HMAC secret
    /// ([`DEFAULT_SECRET_ENV`] when none is written).
    pub secret_env: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EventDecl {
    pub name: String,
}

/// A trigger's own policy, each value checked by the `agentfile_triggers`
/// type that reads it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TriggerPolicy {
    /// `none`, `latest` or `all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
    /// `skip`, `queue` or `allow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs_per_day: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd_per_day: Option<f64>,
}

impl TriggerPolicy {
    pub fn is_empty(&self) -> bool {
        *self == TriggerPolicy::default()
    }

    /// `catch_up`, when written.
    pub fn catch_up(&self) -> Option<CatchUp> {
        self.catch_up.as_deref().and_then(|s| s.parse().ok())
    }

    /// `overlap`, when written.
    pub fn overlap(&self) -> Option<Overlap> {
        self.overlap.as_deref().and_then(|s| s.parse().ok())
    }

    /// The daily limits written here (unwritten ones are `None`).
    pub fn quota(&self) -> Quota {
        Quota {
            max_runs_per_day: self.max_runs_per_day,
            max_cost_usd_per_day: self.max_cost_usd_per_day,
        }
    }
}

/// The AIP-41 routine a schedule came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RoutineDecl {
    pub source: RoutineSource,
    /// Who the runs it starts act as (`bot://…`), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// What it fires, as written (`{workflow: {ref: "./"}}`): the workflow
    /// that declares it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RoutineSource {
    /// `routines: [{inline: {…}}]`.
    Inline,
    /// `routines: [{file: ./.routines/<id>/ROUTINE.md}]`: the file read,
    /// relative to the workflow's folder as written.
    File { path: String },
}

/// A place in a file, counted as an editor counts (1-based).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SourceAt {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

/// A problem with a declaration, at `pointer` below the value checked (`""`
/// for the value itself); `at_key` points at the field's key rather than
/// its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub pointer: String,
    pub at_key: bool,
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

impl Problem {
    fn new(pointer: impl Into<String>, code: &'static str, message: impl Into<String>) -> Problem {
        Problem {
            pointer: pointer.into(),
            at_key: false,
            code,
            message: message.into(),
            hint: None,
        }
    }

    fn hint(mut self, h: impl Into<String>) -> Problem {
        self.hint = Some(h.into());
        self
    }

    fn at_key(mut self) -> Problem {
        self.at_key = true;
        self
    }
}

/// A trigger with its index and id filled in later by
/// [`number`].
fn blank(kind: TriggerKind) -> TriggerDecl {
    TriggerDecl {
        index: 0,
        id: String::new(),
        kind,
        schedule: None,
        webhook: None,
        event: None,
        label: None,
        policy: TriggerPolicy::default(),
        routine: None,
        at: None,
    }
}

/// Gives each trigger its position and its id `<workflow>#<index>`.
pub fn number(workflow: &str, triggers: &mut [TriggerDecl]) {
    for (i, t) in triggers.iter_mut().enumerate() {
        t.index = i as u32;
        t.id = format!("{workflow}#{i}");
    }
}

/// One AIP-15 `triggers:` entry.
pub fn decode_trigger(v: &Value, problems: &mut Vec<Problem>) -> Option<TriggerDecl> {
    let Some(obj) = v.as_object() else {
        problems.push(
            Problem::new("", "schema", "a trigger is a mapping with a `kind`")
                .hint("write `- kind: schedule` with its `cron`, or webhook, event or manual"),
        );
        return None;
    };
    let kind = match obj.get("kind") {
        None => {
            problems.push(
                Problem::new("", "schema", "this trigger has no `kind`")
                    .hint(format!("add `kind:` — {KINDS}")),
            );
            return None;
        }
        Some(Value::String(k)) => match TriggerKind::parse(k) {
            Some(kind) => kind,
            None => {
                let near = crate::diag::suggest(k, ["schedule", "webhook", "event", "manual"]);
                problems.push(
                    Problem::new("/kind", "unknown-trigger", format!("`{k}` is not a trigger kind; a trigger is {KINDS}"))
                        .hint(match near {
                            Some(n) => format!("did you mean `{n}`?"),
                            None => "a recurring time is `kind: schedule` with `cron:`; a POST is `webhook`; an `agentfile emit` is `event`".to_owned(),
                        }),
                );
                return None;
            }
        },
        Some(_) => {
            problems.push(Problem::new(
                "/kind",
                "unknown-trigger",
                format!("a trigger's `kind` is text: {KINDS}"),
            ));
            return None;
        }
    };
    let own: &[&str] = match kind {
        TriggerKind::Schedule => &["kind", "cron", "timezone"],
        TriggerKind::Webhook => &["kind", "path", "secret_env"],
        TriggerKind::Event => &["kind", "name"],
        TriggerKind::Manual => &["kind", "label"],
    };
    let policy_ok = kind != TriggerKind::Manual;
    for key in obj.keys() {
        let known =
            own.contains(&key.as_str()) || (policy_ok && POLICY_FIELDS.contains(&key.as_str()));
        if !known {
            let mut fields: Vec<&str> = own.to_vec();
            if policy_ok {
                fields.extend(POLICY_FIELDS);
            }
            problems.push(
                Problem::new(
                    format!("/{}", escape(key)),
                    "schema",
                    format!(
                        "`{key}` is not a field of {} `{}` trigger",
                        if kind == TriggerKind::Event {
                            "an"
                        } else {
                            "a"
                        },
                        kind.name()
                    ),
                )
                .at_key()
                .hint(format!("its fields are {}", fields.join(", "))),
            );
        }
    }
    let mut t = blank(kind);
    let before = problems.len();
    match kind {
        TriggerKind::Schedule => {
            let cron = text(v, "cron", "", true, problems);
            let tz = text(v, "timezone", "", false, problems);
            if let Some(cron) = cron {
                t.schedule = schedule(cron, tz, "", problems);
            }
        }
        TriggerKind::Webhook => {
            if let Some(path) = text(v, "path", "", true, problems) {
                if !path.starts_with('/') {
                    problems.push(
                        Problem::new(
                            "/path",
                            "schema",
                            format!("webhook path `{path}` must start with `/`"),
                        )
                        .hint(format!(
                            "write `path: /{path}`: deliveries are posted to `/hooks/{path}`"
                        )),
                    );
                }
                let secret_env = text(v, "secret_env", "", false, problems)
                    .unwrap_or(DEFAULT_SECRET_ENV)
                    .to_owned();
                t.webhook = Some(WebhookDecl {
                    path: path.to_owned(),
                    secret_env,
                });
            }
        }
        TriggerKind::Event => {
            if let Some(name) = text(v, "name", "", true, problems) {
                t.event = Some(EventDecl {
                    name: name.to_owned(),
                });
            }
        }
        TriggerKind::Manual => {
            t.label = text(v, "label", "", false, problems).map(str::to_owned);
        }
    }
    t.policy = policy(v, "", problems);
    (problems.len() == before).then_some(t)
}

/// One AIP-41 `routines:` entry, when it is not a file: `inline: {…}` is
/// decoded, `ref:` refused. A `file:` entry gives its path back in `Err`
/// for the front end to read and hand to [`decode_routine`].
pub fn decode_routine_entry<'v>(
    v: &'v Value,
    problems: &mut Vec<Problem>,
) -> Result<Option<TriggerDecl>, &'v str> {
    let forms = "a routine is `inline: {schedule, target, identity}`, `file: ./.routines/<id>/ROUTINE.md` or `ref: <published routine>`";
    let Some(obj) = v.as_object() else {
        problems.push(Problem::new(
            "",
            "routine",
            format!("{forms}; this is not a mapping"),
        ));
        return Ok(None);
    };
    let present: Vec<&str> = ["inline", "file", "ref"]
        .into_iter()
        .filter(|k| obj.contains_key(*k))
        .collect();
    let mut unknown = false;
    for key in obj.keys() {
        if !["inline", "file", "ref"].contains(&key.as_str()) {
            unknown = true;
            problems.push(
                Problem::new(
                    format!("/{}", escape(key)),
                    "routine",
                    format!("`{key}` is not a field of a routine entry"),
                )
                .at_key()
                .hint(forms),
            );
        }
    }
    match present.as_slice() {
        ["inline"] => Ok(decode_routine(
            &v["inline"],
            "/inline",
            RoutineSource::Inline,
            problems,
        )),
        ["file"] => match v["file"].as_str() {
            Some(p) if !p.trim().is_empty() => Err(p),
            _ => {
                problems.push(Problem::new(
                    "/file",
                    "routine",
                    "a routine `file:` is the path of a ROUTINE.md, relative to the workflow",
                ));
                Ok(None)
            }
        },
        ["ref"] => {
            problems.push(
                Problem::new("/ref", "routine-ref", ROUTINE_REF_NEEDED).hint(
                    "copy the routine into `.routines/<id>/ROUTINE.md` and name it with `file:`, or write it `inline:`",
                ),
            );
            Ok(None)
        }
        [] => {
            if !unknown {
                problems.push(Problem::new(
                    "",
                    "routine",
                    format!("{forms}; this entry has none of them"),
                ));
            }
            Ok(None)
        }
        _ => {
            problems.push(Problem::new(
                "",
                "routine",
                format!("{forms}; this entry has {}", present.join(" and ")),
            ));
            Ok(None)
        }
    }
}

/// A routine's body — an `inline:` value or a ROUTINE.md front matter (at
/// `base`): `schedule: {kind: cron, cron, timezone}`, `target`, `identity`
/// and the policy fields. Other fields (AIP-41's `id`, `name`, `retry`, …)
/// are the routine's own and not read here.
pub fn decode_routine(
    v: &Value,
    base: &str,
    source: RoutineSource,
    problems: &mut Vec<Problem>,
) -> Option<TriggerDecl> {
    if !v.is_object() {
        problems.push(
            Problem::new(base, "routine", "a routine is a mapping: schedule, target, identity")
                .hint("write `schedule: { kind: cron, cron: \"0 9 * * MON\", timezone: \"Europe/Paris\" }`"),
        );
        return None;
    }
    let before = problems.len();
    let at = format!("{base}/schedule");
    let sched = match v.get("schedule") {
        None => {
            problems.push(
                Problem::new(base, "routine", "this routine has no `schedule`")
                    .hint("add `schedule: { kind: cron, cron: \"0 9 * * *\", timezone: UTC }`"),
            );
            None
        }
        Some(s) if !s.is_object() => {
            problems.push(Problem::new(
                &at,
                "routine",
                "a routine's `schedule` is a mapping: `{ kind: cron, cron: …, timezone: … }`",
            ));
            None
        }
        Some(s) => {
            match s.get("kind") {
                None => {}
                Some(Value::String(k)) if k == "cron" => {}
                Some(k) => {
                    let k = k.as_str().map_or_else(|| k.to_string(), str::to_owned);
                    problems.push(
                        Problem::new(
                            format!("{at}/kind"),
                            "routine",
                            format!("schedule kind `{k}` is not supported; a routine's schedule is `kind: cron`"),
                        ),
                    );
                }
            }
            for key in s.as_object().into_iter().flat_map(|o| o.keys()) {
                if !["kind", "cron", "timezone"].contains(&key.as_str()) {
                    problems.push(
                        Problem::new(
                            format!("{at}/{}", escape(key)),
                            "schema",
                            format!("`{key}` is not a field of a routine's schedule"),
                        )
                        .at_key()
                        .hint("its fields are kind, cron, timezone"),
                    );
                }
            }
            let cron = text(s, "cron", &at, true, problems);
            let tz = text(s, "timezone", &at, false, problems);
            cron.and_then(|c| schedule(c, tz, &at, problems))
        }
    };
    let identity = text(v, "identity", base, false, problems).map(str::to_owned);
    let policy = policy(v, base, problems);
    let mut t = blank(TriggerKind::Schedule);
    t.schedule = sched;
    t.policy = policy;
    t.routine = Some(RoutineDecl {
        source,
        identity,
        target: v.get("target").cloned(),
    });
    (problems.len() == before).then_some(t)
}

/// A workflow.yaml `trigger:` of `type: schedule`: `cron` and `timezone`
/// beside `type`, and the policy fields. `None` without problems when it
/// names no `cron` (the workflow runs only when asked, as before).
pub fn decode_yaml_schedule(v: &Value, problems: &mut Vec<Problem>) -> Option<TriggerDecl> {
    v.get("cron")?;
    let before = problems.len();
    let cron = text(v, "cron", "", true, problems);
    let tz = text(v, "timezone", "", false, problems);
    let mut t = blank(TriggerKind::Schedule);
    t.schedule = cron.and_then(|c| schedule(c, tz, "", problems));
    t.policy = policy(v, "", problems);
    (problems.len() == before).then_some(t)
}

/// The fields a workflow.yaml schedule trigger may hold beside `type` and
/// `input_var`.
pub const YAML_SCHEDULE_FIELDS: &[&str] = &[
    "cron",
    "timezone",
    "catch_up",
    "overlap",
    "max_runs_per_day",
    "max_cost_usd_per_day",
];

/// Whether the config turns the daemon's webhook listener on
/// (`[daemon] webhooks = "ADDR"`).
pub fn webhooks_enabled(config: &agentfile_config::Config) -> bool {
    config
        .other
        .get("daemon")
        .and_then(|d| d.get("webhooks"))
        .and_then(Value::as_str)
        .is_some_and(|a| !a.trim().is_empty())
}

/// The problem a webhook trigger has under `config` (at the trigger's
/// `kind`), if any.
pub fn webhook_problem(config: &agentfile_config::Config) -> Option<Problem> {
    (!webhooks_enabled(config)).then(|| {
        Problem::new("/kind", "webhooks-disabled", WEBHOOKS_NEEDED).hint(
            "webhooks are off unless the host turns the listener on; deliveries then go to `POST /hooks/<path>`",
        )
    })
}

/// A cron expression and time zone the scheduler accepts, else the
/// scheduler's own message at the field at fault.
fn schedule(
    cron: &str,
    tz: Option<&str>,
    base: &str,
    problems: &mut Vec<Problem>,
) -> Option<ScheduleDecl> {
    let timezone = tz.unwrap_or(DEFAULT_TIMEZONE);
    match Schedule::parse(cron, timezone) {
        Ok(_) => Some(ScheduleDecl {
            cron: cron.to_owned(),
            timezone: timezone.trim().to_owned(),
        }),
        Err(ScheduleError::Cron(e @ agentfile_triggers::CronError::NeverFires { .. })) => {
            problems.push(
                Problem::new(format!("{base}/cron"), "bad-schedule", e.to_string()).hint(
                    "a trigger that can never fire would sit listed as active and do nothing",
                ),
            );
            None
        }
        Err(e @ ScheduleError::Cron(_)) => {
            problems.push(
                Problem::new(format!("{base}/cron"), "bad-schedule", e.to_string()).hint(
                    "five fields (minute hour day-of-month month day-of-week), six with seconds first, or a macro such as @daily",
                ),
            );
            None
        }
        Err(e @ ScheduleError::TimeZone { .. }) => {
            problems.push(Problem::new(
                format!("{base}/timezone"),
                "bad-schedule",
                e.to_string(),
            ));
            None
        }
    }
}

/// The policy fields of `v` (at `base`), each checked.
fn policy(v: &Value, base: &str, problems: &mut Vec<Problem>) -> TriggerPolicy {
    let mut p = TriggerPolicy::default();
    if let Some(s) = text(v, "catch_up", base, false, problems) {
        match CatchUp::from_str(s) {
            Ok(_) => p.catch_up = Some(s.to_owned()),
            Err(e) => problems.push(Problem::new(
                format!("{base}/catch_up"),
                "trigger-policy",
                e.to_string(),
            )),
        }
    }
    if let Some(s) = text(v, "overlap", base, false, problems) {
        match Overlap::from_str(s) {
            Ok(_) => p.overlap = Some(s.to_owned()),
            Err(e) => problems.push(Problem::new(
                format!("{base}/overlap"),
                "trigger-policy",
                e.to_string(),
            )),
        }
    }
    if let Some(n) = v.get("max_runs_per_day") {
        match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => p.max_runs_per_day = Some(n),
            None => problems.push(Problem::new(
                format!("{base}/max_runs_per_day"),
                "trigger-policy",
                format!(
                    "max_runs_per_day = {n} is not allowed; use a whole number of runs, 0 or more"
                ),
            )),
        }
    }
    if let Some(n) = v.get("max_cost_usd_per_day") {
        match n.as_f64().filter(|c| c.is_finite() && *c >= 0.0) {
            Some(c) => p.max_cost_usd_per_day = Some(c),
            None => problems.push(Problem::new(
                format!("{base}/max_cost_usd_per_day"),
                "trigger-policy",
                format!("max_cost_usd_per_day = {n} is not allowed; use a number of US dollars, 0 or more"),
            )),
        }
    }
    p
}

/// `v[key]` as text: a problem when it is there but not text, or missing
/// and `required`.
fn text<'v>(
    v: &'v Value,
    key: &str,
    base: &str,
    required: bool,
    problems: &mut Vec<Problem>,
) -> Option<&'v str> {
    match v.get(key) {
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            problems.push(Problem::new(
                format!("{base}/{key}"),
                "schema",
                format!("`{key}` must be text, not {}", type_name(other)),
            ));
            None
        }
        None if required => {
            problems.push(
                Problem::new(base, "schema", format!("`{key}` is missing"))
                    .hint(format!("add `{key}:`")),
            );
            None
        }
        None => None,
    }
}

/// What a YAML value is, in a message.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A key as a JSON pointer segment.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trigger(v: Value) -> (Option<TriggerDecl>, Vec<Problem>) {
        let mut p = Vec::new();
        (decode_trigger(&v, &mut p), p)
    }

    #[test]
    fn each_kind_decodes_with_its_defaults() {
        let (t, p) = trigger(json!({"kind": "schedule", "cron": "0 9 * * MON"}));
        assert!(p.is_empty(), "{p:?}");
        let s = t.unwrap().schedule.unwrap();
        assert_eq!(
            (s.cron.as_str(), s.timezone.as_str()),
            ("0 9 * * MON", "UTC")
        );
        assert!(s.parse().is_ok());

        let (t, p) = trigger(json!({"kind": "webhook", "path": "/pricing"}));
        assert!(p.is_empty(), "{p:?}");
        let w = t.unwrap().webhook.unwrap();
        assert_eq!(w.secret_env, DEFAULT_SECRET_ENV);

        let (t, _) = trigger(json!({"kind": "event", "name": "stripe.invoice"}));
        assert_eq!(t.unwrap().event.unwrap().name, "stripe.invoice");

        let (t, _) = trigger(json!({"kind": "manual", "label": "Now"}));
        let t = t.unwrap();
        assert_eq!(
            (t.kind, t.label.as_deref()),
            (TriggerKind::Manual, Some("Now"))
        );
    }

    #[test]
    fn policy_fields_are_checked_by_the_scheduler_types() {
        let (t, p) = trigger(
            json!({"kind": "schedule", "cron": "@daily", "catch_up": "all",
            "overlap": "queue", "max_runs_per_day": 3, "max_cost_usd_per_day": 1.5}),
        );
        assert!(p.is_empty(), "{p:?}");
        let pol = t.unwrap().policy;
        assert_eq!(pol.catch_up(), Some(CatchUp::All { bound: 100 }));
        assert_eq!(pol.overlap(), Some(Overlap::Queue));
        assert_eq!(pol.quota().max_runs_per_day, Some(3));

        let (t, p) = trigger(
            json!({"kind": "schedule", "cron": "@daily", "overlap": "sometimes",
            "max_runs_per_day": -1}),
        );
        assert!(t.is_none());
        let at: Vec<_> = p.iter().map(|p| (p.pointer.as_str(), p.code)).collect();
        assert_eq!(
            at,
            [
                ("/overlap", "trigger-policy"),
                ("/max_runs_per_day", "trigger-policy")
            ]
        );
        assert!(
            p[0].message.contains("\"skip\", \"queue\" or \"allow\""),
            "{}",
            p[0].message
        );
    }

    #[test]
    fn a_bad_cron_or_zone_is_reported_at_its_field_with_the_scheduler_message() {
        let (_, p) = trigger(json!({"kind": "schedule", "cron": "61 * * * *"}));
        assert_eq!(
            (p[0].pointer.as_str(), p[0].code),
            ("/cron", "bad-schedule")
        );
        assert!(
            p[0].message.contains("out of range 0-59"),
            "{}",
            p[0].message
        );
        let (_, p) =
            trigger(json!({"kind": "schedule", "cron": "0 9 * * *", "timezone": "Mars/Olympus"}));
        assert_eq!(
            (p[0].pointer.as_str(), p[0].code),
            ("/timezone", "bad-schedule")
        );
        assert!(p[0].message.contains("Mars/Olympus"), "{}", p[0].message);
    }

    #[test]
    fn an_unknown_kind_names_the_kinds_allowed() {
        let (_, p) = trigger(json!({"kind": "cron"}));
        assert_eq!(p[0].code, "unknown-trigger");
        assert!(p[0].message.contains(KINDS), "{}", p[0].message);
        let (_, p) = trigger(json!({"kind": "schedul", "cron": "@daily"}));
        assert_eq!(p[0].hint.as_deref(), Some("did you mean `schedule`?"));
    }

    #[test]
    fn unknown_fields_and_missing_ones_are_schema_errors() {
        let (_, p) = trigger(json!({"kind": "manual", "overlap": "skip"}));
        assert_eq!(
            (p[0].pointer.as_str(), p[0].code, p[0].at_key),
            ("/overlap", "schema", true)
        );
        let (_, p) = trigger(json!({"kind": "webhook", "path": "hook"}));
        assert_eq!(p[0].pointer, "/path");
        let (_, p) = trigger(json!({"kind": "event"}));
        assert_eq!(p[0].message, "`name` is missing");
    }

    #[test]
    fn routines_inline_decode_and_ref_is_refused_naming_the_registry() {
        let mut p = Vec::new();
        let v = json!({"inline": {"schedule": {"kind": "cron", "cron": "0 9 * * MON",
            "timezone": "Europe/Paris"}, "target": {"workflow": {"ref": "./"}},
            "identity": "bot://acme"}});
        let t = decode_routine_entry(&v, &mut p).unwrap().unwrap();
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(t.schedule.unwrap().timezone, "Europe/Paris");
        let r = t.routine.unwrap();
        assert_eq!(r.source, RoutineSource::Inline);
        assert_eq!(r.identity.as_deref(), Some("bot://acme"));

        let v = json!({"file": "./.routines/x/ROUTINE.md"});
        assert_eq!(
            decode_routine_entry(&v, &mut p),
            Err("./.routines/x/ROUTINE.md")
        );

        let v = json!({"ref": "@agentik/routines-standard/daily"});
        assert_eq!(decode_routine_entry(&v, &mut p), Ok(None));
        assert_eq!((p[0].pointer.as_str(), p[0].code), ("/ref", "routine-ref"));
        assert!(p[0].message.contains("routine registry"));

        let mut p = Vec::new();
        let v = json!({"inline": {"schedule": {"kind": "interval", "cron": "bad"}}});
        assert_eq!(decode_routine_entry(&v, &mut p), Ok(None));
        let at: Vec<_> = p.iter().map(|p| (p.pointer.as_str(), p.code)).collect();
        assert_eq!(
            at,
            [
                ("/inline/schedule/kind", "routine"),
                ("/inline/schedule/cron", "bad-schedule")
            ]
        );
    }

    #[test]
    fn ids_follow_positions() {
        let mut ts = vec![blank(TriggerKind::Manual), blank(TriggerKind::Event)];
        number("nightly", &mut ts);
        assert_eq!(ts[1].id, "nightly#1");
        assert_eq!(ts[1].index, 1);
    }

    #[test]
    fn webhooks_follow_the_daemon_section() {
        let mut c = agentfile_config::Config::default();
        assert!(webhook_problem(&c).is_some());
        c.other
            .insert("daemon".into(), json!({"webhooks": "127.0.0.1:8787"}));
        assert!(webhooks_enabled(&c));
        assert!(webhook_problem(&c).is_none());
    }
}
