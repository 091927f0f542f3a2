//! Runs as A2A tasks, read from the session store: the task id is the
//! session id, so a task outlives the request, the connection and the
//! server. A message naming a skill starts a run through the gateway (the
//! run service, as every door); a task's state is its session's status
//! (an interrupted one is resumed here, as MCP tasks are: it reads
//! `working`); its outputs are an artifact; an approval or a suspend is
//! `input-required`, answered by a message on the same task.
//!
//! A task belongs to the principal that started it: the store records it as
//! the session's owner and task owner ([`crate::access`]), and to every
//! other principal it reads as unknown, exactly as an id that does not
//! exist. What the A2A door keeps besides (the skill, the client's
//! `contextId`) rides in the run's stored settings, which the engine ignores.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::A2a;
use super::card::Skill;
use super::reply::{Fault, Version};
use crate::access::{Action, Principal, Rule};
use crate::gateway::RunHooks;
use agentfile_session::{SessionMeta, SessionStatus, SessionStore, StoreError};
use agentfile_wire::a2a::{
    Artifact, Message, Part, Role, SendMessageRequest, Task, TaskState, TaskStatus, v0_3,
};
use agentfile_wire::events::RunResult;
use agentfile_wire::rpc::{
    ApproveParams, CancelParams, EventParams, RunParams, SignalParams, code,
};

/// The run settings' key naming the skill that started a task.
const SKILL_KEY: &str = "a2a_skill";
/// The run settings' key holding the client's `contextId`.
const CONTEXT_KEY: &str = "a2a_context";
/// Sessions [`list`] looks through, newest first.
const LIST_SCAN: usize = 1_000;

/// A task's session, and what the A2A door kept with it.
#[derive(Clone, Debug)]
pub struct Owned {
    pub meta: SessionMeta,
    pub skill: Option<String>,
    pub context: Option<String>,
}

impl Owned {
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// The task's `contextId`: the client's, else the task id.
    pub fn context(&self) -> String {
        self.context.clone().unwrap_or_else(|| self.meta.id.clone())
    }
}

/// What a client's message says, in either generation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Incoming {
    /// `taskId`: an answer to the task's question (an approval, a signal).
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    /// `metadata.skill` (of the message, else of the request).
    pub skill: Option<String>,
    /// The first data part.
    pub data: Option<Value>,
    /// The text parts, joined by newlines.
    pub text: Option<String>,
    /// Answer with the task at once (1.0 `returnImmediately`, 0.3
    /// `blocking: false`).
    pub at_once: bool,
}

impl Incoming {
    /// Read `params` of `SendMessage` / `message/send` (and the streaming
    /// ones), a 0.3 request as its 1.0 twin.
    pub fn read(version: Version, params: &Value) -> Result<Incoming, Fault> {
        let Some(message) = params.get("message").filter(|m| m.is_object()) else {
            return Err(Fault::invalid_params(
                "the request has no `message` object: send {\"message\": {\"role\": \"ROLE_USER\", \
                 \"parts\": [{\"data\": {…inputs…}}], \"metadata\": {\"skill\": \"<skill id>\"}, \
                 \"messageId\": \"…\"}}",
            ));
        };
        if !message.get("parts").is_some_and(Value::is_array) {
            return Err(Fault::invalid_params("the message has no `parts` list"));
        }
        let read = match version {
            Version::V1 => serde_json::from_value::<SendMessageRequest>(params.clone()),
            Version::V03 => serde_json::from_value::<v0_3::MessageSendParams>(params.clone())
                .map(|p| p.current()),
        };
        let req =
            read.map_err(|e| Fault::invalid_params(format!("the message does not read: {e}")))?;
        let mut data = None;
        let mut texts = Vec::new();
        for p in &req.message.parts {
            if let Some(d) = &p.data {
                data.get_or_insert_with(|| d.clone());
            } else if let Some(t) = &p.text {
                texts.push(t.clone());
            }
        }
        let text_of = |m: &Option<Map<String, Value>>| {
            m.as_ref()
                .and_then(|m| m.get("skill"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let given = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        Ok(Incoming {
            task_id: given(&req.message.task_id),
            context_id: given(&req.message.context_id),
            skill: text_of(&req.message.metadata).or_else(|| text_of(&req.metadata)),
            data,
            text: (!texts.is_empty()).then(|| texts.join("\n")),
            at_once: req
                .configuration
                .and_then(|c| c.return_immediately)
                .unwrap_or(false),
        })
    }
}

/// A data part of JSON (its media type said).
pub fn json_part(data: Value) -> Part {
    Part {
        media_type: Some("application/json".into()),
        ..Part::data(data)
    }
}

/// A message from the agent on task `task_id`.
pub fn agent_message(id: String, task_id: &str, context_id: String, parts: Vec<Part>) -> Message {
    Message {
        message_id: id,
        task_id: Some(task_id.to_owned()),
        context_id: Some(context_id),
        role: Role::Agent,
        parts,
        ..Message::default()
    }
}

/// What the door tells a client of task `o` besides the protocol's fields.
fn metadata(o: &Owned) -> Map<String, Value> {
    Map::from_iter([
        ("session_id".to_owned(), json!(o.meta.id)),
        ("workflow".to_owned(), json!(o.meta.workflow)),
        ("skill".to_owned(), json!(o.skill)),
    ])
}

fn internal(e: impl std::fmt::Display) -> Fault {
    Fault::internal(e.to_string())
}

/// Session `id` with its A2A settings, if it is a task of `who`'s.
fn load(store: &dyn SessionStore, id: &str, who: &Principal) -> Result<Option<Owned>, StoreError> {
    // A task: a session started as one (MCP's or A2A's); a plain run, owned
    // or not, is no task.
    if store.task_owner(id)?.is_none() {
        return Ok(None);
    }
    // A task is only ever its owner's (never the operator's, never shared).
    let Some(owner) = crate::access::owner_of(store, id)? else {
        return Ok(None);
    };
    if !Rule::OWNED.allows(who, Some(&owner), Action::Steer) {
        return Ok(None);
    }
    let meta = store.get(id)?;
    let settings = store.run_settings(id)?.unwrap_or(Value::Null);
    let text = |k: &str| settings.get(k).and_then(Value::as_str).map(str::to_owned);
    Ok(Some(Owned {
        meta,
        skill: text(SKILL_KEY),
        context: text(CONTEXT_KEY),
    }))
}

/// Task `id` if it is `who`'s; an unknown id and another principal's read
/// the same.
pub async fn owned(a2a: &A2a, who: &Principal, id: &str) -> Result<Owned, Fault> {
    if !agentfile_session::is_valid_id(id) {
        return Err(Fault::task_not_found(id));
    }
    let store = a2a.gateway.store().map_err(|e| internal(e.message))?;
    let (id2, who) = (id.to_owned(), who.clone());
    let found = tokio::task::spawn_blocking(move || load(&*store, &id2, &who))
        .await
        .map_err(internal)?;
    match found {
        Ok(Some(o)) => Ok(o),
        Ok(None) | Err(StoreError::NotFound(_) | StoreError::InvalidId(_)) => {
            Err(Fault::task_not_found(id))
        }
        Err(e) => Err(internal(e)),
    }
}

/// The skill a message names (or the only one), rescanning once for a
/// name the last scan did not know.
async fn pick(a2a: &A2a, asked: Option<&str>) -> Result<Skill, Fault> {
    let mut skills = a2a.catalog.skills().await;
    let Some(asked) = asked else {
        return match skills.as_slice() {
            [only] => Ok(only.clone()),
            _ => Err(Fault::invalid_params(format!(
                "name the skill in the message's metadata.skill: one of {}",
                names(&skills)
            ))),
        };
    };
    if !skills.iter().any(|s| s.id == asked) {
        skills = a2a.catalog.rescan().await;
    }
    skills
        .iter()
        .find(|s| s.id == asked)
        .cloned()
        .ok_or_else(|| {
            Fault::invalid_params(format!(
                "unknown skill `{asked}`: this agent's skills are {} (the agent card lists them)",
                names(&skills)
            ))
            .with("skill", asked)
        })
}

fn names(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return "none (the workspace has no valid workflow)".into();
    }
    skills
        .iter()
        .map(|s| format!("`{}`", s.id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The run's inputs: the data part's object, or a text part for a skill of
/// one input.
fn inputs(skill: &Skill, msg: &Incoming) -> Result<BTreeMap<String, Value>, Fault> {
    let schema = Value::Object(skill.schema.clone()).to_string();
    match (&msg.data, &msg.text) {
        (Some(Value::Object(o)), _) => Ok(o.clone().into_iter().collect()),
        (Some(_), _) => Err(Fault::invalid_params(format!(
            "the data part must be an object of skill `{}`'s inputs, as its JSON Schema says: {schema}",
            skill.id
        ))
        .with("schema", schema)),
        (None, Some(text)) => match skill.only_input() {
            Some(name) => Ok(BTreeMap::from([(name.to_owned(), Value::String(text.clone()))])),
            None if skill.schema.get("properties").is_none_or(|p| p.as_object().is_some_and(Map::is_empty)) => {
                Ok(BTreeMap::new())
            }
            None => Err(Fault::invalid_params(format!(
                "skill `{}` takes several inputs: send them as a data part, an object as its JSON Schema says: {schema}",
                skill.id
            ))
            .with("schema", schema)),
        },
        (None, None) => Ok(BTreeMap::new()),
    }
}

/// Start the run a message asks for, as a task of `who`'s.
pub async fn start(a2a: &A2a, who: &Principal, msg: &Incoming) -> Result<Owned, Fault> {
    let skill = pick(a2a, msg.skill.as_deref()).await?;
    let p = RunParams {
        path: skill.path.clone(),
        inputs: inputs(&skill, msg)?,
        wait: Some(false),
        ..RunParams::default()
    };
    let gateway = &a2a.gateway;
    gateway
        .check_run_paths(&p)
        .map_err(|e| Fault::invalid_params(e.message))?;
    let hooks = RunHooks {
        // The session is its principal's from the moment it is recorded.
        owner: Some(who.clone()),
        ..RunHooks::default()
    };
    let live = gateway.submit(p, hooks).await.map_err(|e| {
        if e.code == code::RUN_REJECTED {
            let schema = Value::Object(skill.schema.clone()).to_string();
            Fault::invalid_params(format!(
                "skill `{}` cannot run with these inputs: {} (its inputs' JSON Schema: {schema})",
                skill.id, e.message
            ))
            .with("schema", schema)
            .with("skill", skill.id.clone())
        } else {
            Fault::internal(e.message)
        }
    })?;
    let id = live.session_id().to_owned();
    let store = gateway.store().map_err(|e| internal(e.message))?;
    let (id2, who2, context) = (id.clone(), who.clone(), msg.context_id.clone());
    let recorded = tokio::task::spawn_blocking(move || {
        store.set_task_owner(&id2, who2.as_str())?;
        // Kept with the run's settings: a resume elsewhere keeps them.
        let mut settings = match store.run_settings(&id2)? {
            Some(Value::Object(o)) => o,
            _ => Map::new(),
        };
        settings.insert(SKILL_KEY.into(), Value::String(skill.id));
        if let Some(c) = context {
            settings.insert(CONTEXT_KEY.into(), Value::String(c));
        }
        store.set_run_settings(&id2, &Value::Object(settings))?;
        load(&*store, &id2, &who2)
    })
    .await
    .map_err(internal)?;
    match recorded {
        Ok(Some(o)) => Ok(o),
        Ok(None) => Err(Fault::internal("the task was recorded under another owner")),
        Err(e) => {
            let _ = gateway.cancel(CancelParams { session_id: id }).await;
            Err(Fault::internal(format!("cannot record the task: {e}")))
        }
    }
}

/// What a task waits for, as the status message's parts.
fn question(id: &str, waiting: &Waiting) -> Vec<Part> {
    match waiting {
        Waiting::Approval(seq) => vec![
            Part::text(format!(
                "The run of task {id} waits for approval of its supervised goal. Answer with a \
                 message on this task (taskId {id}) holding a data part {{\"approve\": true}} to go \
                 ahead or {{\"approve\": false}} to reject, with an optional \"note\"."
            )),
            json_part(json!({
                "input": "approval",
                "seq": seq,
                "schema": {
                    "type": "object",
                    "properties": {
                        "approve": {"type": "boolean", "description": "Go ahead (false: reject; the workflow decides what a rejection does)"},
                        "note": {"type": "string", "description": "Recorded with the decision"}
                    },
                    "required": ["approve"]
                }
            })),
        ],
        Waiting::Signal(events) => vec![
            Part::text(format!(
                "The run of task {id} is suspended, waiting for {}. Answer with a message on this \
                 task (taskId {id}) holding a data part {{\"event\": \"<one of them>\", \"payload\": …}}.",
                events.join(", ")
            )),
            json_part(json!({
                "input": "signal",
                "events": events,
                "schema": {
                    "type": "object",
                    "properties": {
                        "event": {"type": "string", "enum": events},
                        "payload": {"description": "The event's payload (any JSON)"}
                    },
                    "required": ["event"]
                }
            })),
        ],
    }
}

enum Waiting {
    Approval(u64),
    Signal(Vec<String>),
}

/// A finished run's outputs: a data part of them all, and a text part for
/// each text output.
pub fn outputs(r: &RunResult) -> Artifact {
    let all: Map<String, Value> = r.outputs.clone().into_iter().collect();
    let mut parts = vec![json_part(Value::Object(all))];
    for (name, v) in &r.outputs {
        if let Value::String(text) = v {
            parts.push(Part {
                metadata: Some(Map::from_iter([("output".to_owned(), json!(name))])),
                ..Part::text(text.clone())
            });
        }
    }
    Artifact {
        artifact_id: "outputs".into(),
        name: Some("outputs".into()),
        description: Some("The workflow's outputs".into()),
        parts,
        ..Artifact::default()
    }
}

/// Task `o` as it stands; `resume`: run an interrupted one on here (unless
/// someone holds it).
pub async fn task_of(a2a: &Arc<A2a>, o: &Owned, resume: bool) -> Result<Task, Fault> {
    let gateway = &a2a.gateway;
    let meta = &o.meta;
    let id = meta.id.as_str();
    let mut artifacts = Vec::new();
    let (state, parts) = match meta.status {
        SessionStatus::Queued | SessionStatus::Running => (TaskState::Working, None),
        SessionStatus::Interrupted => {
            if resume {
                gateway.resume_task(id).await;
            }
            (TaskState::Working, None)
        }
        // Answered here, its `approval_resolved` not stored yet: going on.
        SessionStatus::WaitingApproval if gateway.approval_answered(id) => {
            (TaskState::Working, None)
        }
        SessionStatus::WaitingApproval => {
            let store = gateway.store().map_err(|e| internal(e.message))?;
            let id2 = id.to_owned();
            let seq = tokio::task::spawn_blocking(move || store.pending_approval(&id2))
                .await
                .map_err(internal)?
                .map_err(internal)?;
            match seq {
                Some(seq) => (
                    TaskState::InputRequired,
                    Some(question(id, &Waiting::Approval(seq))),
                ),
                // Decided, the run not yet going again.
                None => (TaskState::Working, None),
            }
        }
        SessionStatus::Suspended => {
            let result = gateway.stored_result(id).map_err(|e| internal(e.message))?;
            let events = result.map(|r| r.waiting_for).unwrap_or_default();
            (
                TaskState::InputRequired,
                Some(question(id, &Waiting::Signal(events))),
            )
        }
        SessionStatus::Cancelled => (
            TaskState::Canceled,
            Some(vec![Part::text("The run was cancelled.")]),
        ),
        SessionStatus::Completed | SessionStatus::Failed => {
            match gateway.stored_result(id).map_err(|e| internal(e.message))? {
                Some(r) if meta.status == SessionStatus::Completed => {
                    artifacts.push(outputs(&r));
                    (TaskState::Completed, None)
                }
                Some(r) => {
                    if !r.outputs.is_empty() {
                        artifacts.push(outputs(&r));
                    }
                    let why = r.error.clone().unwrap_or_else(|| "the run failed".into());
                    (TaskState::Failed, Some(vec![Part::text(why)]))
                }
                None => (TaskState::Working, None),
            }
        }
    };
    let context = o.context();
    Ok(Task {
        id: id.to_owned(),
        context_id: context.clone(),
        status: TaskStatus {
            state,
            message: parts
                .map(|parts| agent_message(format!("{id}-{}", meta.last_seq), id, context, parts)),
            timestamp: Some(meta.updated_at.clone()),
        },
        artifacts,
        metadata: Some(metadata(o)),
        ..Task::default()
    })
}

/// A task just started or answered: working, whatever the store says yet.
pub fn working(o: &Owned) -> Task {
    Task {
        id: o.id().to_owned(),
        context_id: o.context(),
        status: TaskStatus {
            state: TaskState::Working,
            message: None,
            timestamp: Some(agentfile_wire::events::rfc3339(std::time::SystemTime::now())),
        },
        metadata: Some(metadata(o)),
        ..Task::default()
    }
}

/// A message on task `o`: the answer to its approval or its suspend.
pub async fn answer(a2a: &Arc<A2a>, o: &Owned, msg: &Incoming) -> Result<(), Fault> {
    let gateway = &a2a.gateway;
    let id = o.id().to_owned();
    let data = msg.data.clone().unwrap_or(Value::Null);
    match o.meta.status {
        SessionStatus::WaitingApproval if !gateway.approval_answered(&id) => {
            let approve = match (data.get("approve"), msg.text.as_deref().map(str::trim)) {
                (Some(Value::Bool(b)), _) => *b,
                (Some(Value::String(s)), _) => yes_or_no(s).ok_or_else(|| no_decision(&id))?,
                (None, Some(s)) => yes_or_no(s).ok_or_else(|| no_decision(&id))?,
                _ => return Err(no_decision(&id)),
            };
            let note = data
                .get("note")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .or_else(|| Some("answered by an A2A client".to_owned()));
            gateway
                .approve(
                    ApproveParams {
                        session_id: id,
                        approve,
                        note,
                    },
                    RunHooks::default(),
                )
                .await
                .map_err(|e| Fault::invalid_params(e.message))?;
        }
        SessionStatus::Suspended => {
            let Some(event) = data.get("event").and_then(Value::as_str) else {
                return Err(Fault::invalid_params(format!(
                    "task `{id}` is suspended: answer with a data part {{\"event\": \"<name>\", \"payload\": …}}"
                )));
            };
            gateway
                .signal(
                    SignalParams {
                        session_id: id.clone(),
                        event: event.to_owned(),
                        payload: data.get("payload").cloned().unwrap_or(Value::Null),
                    },
                    RunHooks::default(),
                )
                .await
                .map_err(|e| Fault::invalid_params(e.message))?;
        }
        SessionStatus::Completed | SessionStatus::Failed | SessionStatus::Cancelled => {
            return Err(Fault::unsupported(format!(
                "task `{id}` has ended ({}); send a message without taskId to start a new one",
                o.meta.status.as_str()
            )));
        }
        _ => {
            return Err(Fault::unsupported(format!(
                "task `{id}` is working and asks for nothing; follow it with GetTask or SubscribeToTask"
            )));
        }
    }
    Ok(())
}

/// A decision in words.
fn yes_or_no(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "approve" | "approved" => Some(true),
        "false" | "no" | "n" | "reject" | "rejected" => Some(false),
        _ => None,
    }
}

fn no_decision(id: &str) -> Fault {
    Fault::invalid_params(format!(
        "task `{id}` waits for approval: answer with a data part {{\"approve\": true|false, \"note\": \"…\"}}"
    ))
}

/// Cancel task `id`: once the store says it ended (or after a few
/// seconds), the task as it stands.
pub async fn cancel(a2a: &Arc<A2a>, who: &Principal, id: &str) -> Result<Task, Fault> {
    let o = owned(a2a, who, id).await?;
    let now = task_of(a2a, &o, false).await?;
    if now.status.state.is_terminal() {
        return Err(Fault::not_cancelable(id, o.meta.status.as_str()));
    }
    let gateway = &a2a.gateway;
    gateway
        .cancel(CancelParams {
            session_id: id.to_owned(),
        })
        .await
        .map_err(|e| Fault::invalid_params(e.message))?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut after = o.meta.last_seq;
    while tokio::time::Instant::now() < deadline {
        let page = gateway
            .events(EventParams {
                session_id: id.to_owned(),
                after_seq: after,
                wait_ms: 250,
                limit: Some(100),
            })
            .await
            .map_err(|e| internal(e.message))?;
        after = page.last_seq.max(after);
        if matches!(
            page.status,
            SessionStatus::Cancelled | SessionStatus::Completed | SessionStatus::Failed
        ) {
            break;
        }
    }
    let o = owned(a2a, who, id).await?;
    task_of(a2a, &o, false).await
}

/// `who`'s tasks, newest first, at most `limit`.
pub async fn list(a2a: &Arc<A2a>, who: &Principal, limit: usize) -> Result<Vec<Task>, Fault> {
    let store = a2a.gateway.store().map_err(|e| internal(e.message))?;
    let who2 = who.clone();
    let found = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for m in store.list(None, LIST_SCAN)? {
            if out.len() >= limit {
                break;
            }
            if store.principal(&m.id)?.as_deref() != Some(who2.as_str()) {
                continue;
            }
            if let Some(o) = load(&*store, &m.id, &who2)? {
                out.push(o);
            }
        }
        Ok::<_, StoreError>(out)
    })
    .await
    .map_err(internal)?
    .map_err(internal)?;
    let mut tasks = Vec::with_capacity(found.len());
    for o in &found {
        tasks.push(task_of(a2a, o, false).await?);
    }
    Ok(tasks)
}

/// Session `id` again, for one who already owns it (after a wait).
pub async fn reload(a2a: &A2a, o: &Owned) -> Result<Owned, Fault> {
    let store = a2a.gateway.store().map_err(|e| internal(e.message))?;
    let id = o.id().to_owned();
    let meta = tokio::task::spawn_blocking(move || store.get(&id))
        .await
        .map_err(internal)?
        .map_err(internal)?;
    Ok(Owned { meta, ..o.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_generations_of_a_message_read_alike() {
        let v1 = json!({"message": {"messageId": "m", "role": "ROLE_USER", "taskId": "t",
            "parts": [{"text": "go"}, {"data": {"topic": "tides"}}], "metadata": {"skill": "hello"}},
            "configuration": {"returnImmediately": true}});
        let v03 = json!({"message": {"kind": "message", "messageId": "m", "role": "user", "taskId": "t",
            "parts": [{"kind": "text", "text": "go"}, {"kind": "data", "data": {"topic": "tides"}}],
            "metadata": {"skill": "hello"}}, "configuration": {"blocking": false}});
        let a = Incoming::read(Version::V1, &v1).unwrap();
        assert_eq!(a, Incoming::read(Version::V03, &v03).unwrap());
        assert_eq!(a.skill.as_deref(), Some("hello"));
        assert_eq!(a.task_id.as_deref(), Some("t"));
        assert_eq!(a.data, Some(json!({"topic": "tides"})));
        assert_eq!(a.text.as_deref(), Some("go"));
        assert!(a.at_once);
        assert!(Incoming::read(Version::V1, &json!({})).is_err());
        let skill_on_request = json!({"message": {"parts": [{"text": "go"}]},
            "metadata": {"skill": "hello"}});
        let b = Incoming::read(Version::V1, &skill_on_request).unwrap();
        assert_eq!(b.skill.as_deref(), Some("hello"));
        assert!(!b.at_once);
    }
}
