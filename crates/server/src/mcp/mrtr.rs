//! Input-required results (MRTR, 2026-07-28) for blocking run calls: a
//! client that declared elicitation but not the tasks extension gets, when
//! its run reaches an approval, an `input_required` result with the approval
//! form and a `requestState` naming the session and the approval; it retries
//! the call with `inputResponses` and the same state, which approves and
//! waits on (again from the store, so any server on the store can answer).
//!
//! A run that suspends is asked the same way: the form asks for the event
//! (one the suspend step waits for) and its payload as JSON text; the retry
//! delivers the signal and waits on.
//!
//! The state is `SESSION.SEQ.MAC` for an approval (its event's seq) and
//! `SESSION.sSEQ.MAC` for a suspend (the session's last seq then), the MAC
//! an HMAC-SHA256 over the caller's principal, the session and the middle
//! part. The key comes from the variable `[mcp] state_key_env` names
//! ([`configure`]), so every replica given it (and this process after a
//! restart) opens what another sealed; keys named by `[mcp]
//! state_key_previous_env` still open states sealed before a rotation.
//! Without the setting the key is made when the process starts. A tampered
//! state, one made for another principal, or one sealed with a key this
//! process does not hold is `-32602`.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, ClientCapabilities, ErrorData, InputRequests, InputRequiredResult,
    InputResponses, ProtocolVersion,
};
use rmcp::service::RequestContext;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::McpServer;
use super::principal::Principal;
use agentfile_session::SessionStatus;
use agentfile_wire::rpc::{ApproveParams, CancelParams, SignalParams};

/// How often a waiting call reads the store.
const POLL: Duration = Duration::from_millis(200);

/// Whether a blocking call from `ctx` gets input-required results: a
/// 2026-07-28 client that declared elicitation (and not tasks: those get a
/// task instead).
pub fn wanted(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
        && ctx
            .client_capabilities()
            .is_some_and(|c: ClientCapabilities| c.elicitation.is_some())
}

/// The keys states are sealed and opened with: the current one seals and
/// opens, the previous ones only open.
#[derive(Clone)]
pub struct StateKeys {
    current: [u8; 32],
    previous: Vec<[u8; 32]>,
}

impl std::fmt::Debug for StateKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys themselves.
        write!(f, "StateKeys {{ previous: {} }}", self.previous.len())
    }
}

/// The fewest bits a configured key must carry, estimated from its length
/// and characters as tokens are ([`crate::auth::token_bits`]; a text of
/// fewer than eight distinct characters counts as none): 32 random bytes as
/// hex (64 characters) or base64 (44) pass.
pub const MIN_KEY_BITS: f64 = 256.0;

/// A configured key that cannot be used. Names the setting and the
/// variable, never the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateKeyError {
    #[error(
        "`[mcp] {setting} = {var:?}`: {var} is not set (or empty); set it to the key every \
         replica shares, e.g. `export {var}=$(openssl rand -hex 32)`, or remove the setting \
         to seal multi-round-trip states with a key of this process only"
    )]
    Unset { setting: &'static str, var: String },
    #[error(
        "`[mcp] {setting} = {var:?}`: the key in {var} is too easy to guess (about {bits} \
         bits, estimated from its length and characters; at least {min} are needed); make \
         it 32 random bytes, e.g. `openssl rand -hex 32` or `openssl rand -base64 32`",
        min = MIN_KEY_BITS
    )]
    Weak {
        setting: &'static str,
        var: String,
        bits: u32,
    },
}

impl StateKeys {
    /// A key of this process only (four session ids: 384 bits from the
    /// kernel's generator, mixed).
    fn random() -> StateKeys {
        let mut h = Sha256::new();
        for _ in 0..4 {
            h.update(agentfile_session::new_session_id().as_bytes());
        }
        h.update(std::process::id().to_le_bytes());
        StateKeys {
            current: h.finalize().into(),
            previous: Vec::new(),
        }
    }

    /// The keys `[mcp]` names, read with `lookup` (the environment);
    /// `None` without `state_key_env`.
    pub fn from_section(
        section: &agentfile_config::McpSection,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<StateKeys>, StateKeyError> {
        let Some(var) = &section.state_key_env else {
            return Ok(None);
        };
        let read = |setting: &'static str, var: &str| {
            let value = lookup(var).filter(|v| !v.trim().is_empty());
            let Some(value) = value else {
                return Err(StateKeyError::Unset {
                    setting,
                    var: var.to_owned(),
                });
            };
            let value = value.trim();
            let bits = key_bits(value);
            if bits + 1e-9 < MIN_KEY_BITS {
                return Err(StateKeyError::Weak {
                    setting,
                    var: var.to_owned(),
                    bits: bits as u32,
                });
            }
            Ok(derive(value))
        };
        let current = read("state_key_env", var)?;
        let previous = section
            .state_key_previous_env
            .iter()
            .map(|v| read("state_key_previous_env", v))
            .collect::<Result<_, _>>()?;
        Ok(Some(StateKeys { current, previous }))
    }
}

/// A key's estimated strength: as a token's, except that a text of fewer
/// than eight distinct characters (`aaaa…`, `0101…`) counts as none.
fn key_bits(text: &str) -> f64 {
    let mut distinct: Vec<char> = text.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 8 {
        return 0.0;
    }
    crate::auth::token_bits(text)
}

/// The MAC key a configured key's text stands for (the same text gives the
/// same key in every process).
fn derive(text: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"agentfile mcp requestState key v1\n")
        .chain_update(text.as_bytes())
        .finalize()
        .into()
}

fn slot() -> &'static RwLock<Option<Arc<StateKeys>>> {
    static KEYS: RwLock<Option<Arc<StateKeys>>> = RwLock::new(None);
    &KEYS
}

fn keys() -> Arc<StateKeys> {
    if let Some(k) = slot().read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return k.clone();
    }
    let mut w = slot().write().unwrap_or_else(|p| p.into_inner());
    w.get_or_insert_with(|| Arc::new(StateKeys::random()))
        .clone()
}

/// Seal and open states with the keys `[mcp] state_key_env` (and
/// `state_key_previous_env`) name, read from the environment; without the
/// setting, nothing changes (a key of this process). `true` when a
/// configured key is in use. Called when a server starts, before it answers.
pub fn configure(section: &agentfile_config::McpSection) -> Result<bool, StateKeyError> {
    match StateKeys::from_section(section, |v| std::env::var(v).ok())? {
        Some(k) => {
            use_keys(k);
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Seal and open states with `keys` from now on.
pub fn use_keys(keys: StateKeys) {
    *slot().write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(keys));
}

fn hmac(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    k[..32].copy_from_slice(key);
    let (mut ipad, mut opad) = ([0x36u8; 64], [0x5cu8; 64]);
    for i in 0..64 {
        ipad[i] ^= k[i];
        opad[i] ^= k[i];
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize()
        .into()
}

/// What a state asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// The approval whose `approval_required` event has this seq.
    Approval(u64),
    /// A signal to the session suspended with this last seq.
    Signal(u64),
}

impl Asked {
    fn tag(self) -> String {
        match self {
            Asked::Approval(seq) => seq.to_string(),
            Asked::Signal(seq) => format!("s{seq}"),
        }
    }

    fn seq(self) -> u64 {
        match self {
            Asked::Approval(seq) | Asked::Signal(seq) => seq,
        }
    }
}

fn mac_with(key: &[u8; 32], principal: &Principal, id: &str, tag: &str) -> String {
    hmac(key, format!("{principal}\n{id}\n{tag}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The MAC a new state gets: the current key's.
fn mac(principal: &Principal, id: &str, tag: &str) -> String {
    mac_with(&keys().current, principal, id, tag)
}

/// Whether `m` is the MAC of the current key or of a previous one (each
/// compared in constant time).
fn mac_ok(principal: &Principal, id: &str, tag: &str, m: &str) -> bool {
    mac_ok_in(&keys(), principal, id, tag, m)
}

fn mac_ok_in(keys: &StateKeys, principal: &Principal, id: &str, tag: &str, m: &str) -> bool {
    std::iter::once(&keys.current)
        .chain(&keys.previous)
        .fold(false, |ok, key| {
            let want = mac_with(key, principal, id, tag);
            let same = want.len() == m.len()
                && want
                    .bytes()
                    .zip(m.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0;
            ok | same
        })
}

/// The state naming approval `seq` of session `id`, for `principal`.
pub fn seal(principal: &Principal, id: &str, asked: Asked) -> String {
    let tag = asked.tag();
    format!("{id}.{tag}.{}", mac(principal, id, &tag))
}

/// The session and seq a state names, if it is ours and for `principal`.
pub fn open(principal: &Principal, state: &str) -> Result<(String, Asked), ErrorData> {
    let bad = || ErrorData::invalid_params("invalid requestState", None);
    let mut parts = state.split('.');
    let (Some(id), Some(tag), Some(m), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let asked = match tag.strip_prefix('s') {
        Some(seq) => Asked::Signal(seq.parse().map_err(|_| bad())?),
        None => Asked::Approval(tag.parse().map_err(|_| bad())?),
    };
    if asked.tag() != tag {
        return Err(bad());
    }
    if !mac_ok(principal, id, tag, m) {
        return Err(bad());
    }
    Ok((id.to_owned(), asked))
}

/// `data` sealed for `principal`: the `requestState` of an embedder's own
/// multi-round tool ([`super::ExtraTools`]), opened by [`open_state`]. The
/// data is readable by the client (hex), not forgeable: a state altered, or
/// sealed for another principal or with a key this process does not hold
/// (see [`configure`]), does not open.
pub fn seal_state(principal: &Principal, data: &str) -> String {
    let hex: String = data.bytes().map(|b| format!("{b:02x}")).collect();
    format!("x{hex}.{}", mac(principal, "\u{0}extra", &hex))
}

/// The data of a state [`seal_state`] made for `principal`, or `-32602`.
pub fn open_state(principal: &Principal, state: &str) -> Result<String, ErrorData> {
    let bad =
        || ErrorData::invalid_params("invalid requestState (altered, or not this server's)", None);
    let (hex, m) = state
        .strip_prefix('x')
        .and_then(|s| s.split_once('.'))
        .ok_or_else(bad)?;
    if !mac_ok(principal, "\u{0}extra", hex, m) || hex.len() % 2 != 0 {
        return Err(bad());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| bad())?;
    String::from_utf8(bytes).map_err(|_| bad())
}

/// The input-required result for approval `seq` of session `id`.
pub fn ask(principal: &Principal, id: &str, seq: u64) -> Result<CallToolResponse, ErrorData> {
    let mut reqs = InputRequests::new();
    reqs.insert(format!("approval-{seq}"), super::tasks::approval_form(id)?);
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(reqs),
        Some(seal(principal, id, Asked::Approval(seq))),
    )))
}

/// The input-required result for session `id`, suspended at `seq` waiting
/// for one of `events`.
pub fn ask_signal(
    principal: &Principal,
    id: &str,
    seq: u64,
    events: &[String],
) -> Result<CallToolResponse, ErrorData> {
    let mut reqs = InputRequests::new();
    reqs.insert(
        format!("signal-{seq}"),
        super::tasks::signal_form(id, events)?,
    );
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(reqs),
        Some(seal(principal, id, Asked::Signal(seq))),
    )))
}

/// The input-required result for suspended session `id`, read from the
/// store; `None` when it is not suspended.
pub async fn suspended(
    server: &McpServer,
    principal: &Principal,
    id: &str,
) -> Option<CallToolResponse> {
    let store = server.gateway.store().ok()?;
    let i = id.to_owned();
    let meta = tokio::task::spawn_blocking(move || store.get(&i))
        .await
        .ok()?
        .ok()?;
    if meta.status != SessionStatus::Suspended {
        return None;
    }
    let events = server.gateway.stored_result(id).ok()??.waiting_for;
    ask_signal(principal, id, meta.last_seq, &events).ok()
}

/// The seq of the session's pending approval, read from the store (the run
/// may record it a moment after it said so).
pub async fn pending(server: &McpServer, id: &str) -> Option<u64> {
    let store = server.gateway.store().ok()?;
    for _ in 0..50 {
        let (s, i) = (store.clone(), id.to_owned());
        if let Ok(Ok(Some(seq))) = tokio::task::spawn_blocking(move || s.pending_approval(&i)).await
        {
            return Some(seq);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// A retried call: answer the approval its state names, then wait for the
/// run as a blocking call does.
pub async fn retry(
    server: &McpServer,
    state: &str,
    responses: Option<&InputResponses>,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let principal = Principal::of(ctx);
    let (id, asked) = open(&principal, state)?;
    if let Asked::Signal(seq) = asked {
        return retry_signal(server, &principal, &id, seq, responses, ctx).await;
    }
    let seq = asked.seq();
    let key = format!("approval-{seq}");
    let answer = responses.and_then(|r| r.get(&key));
    let accepted = answer.and_then(|a| a.get("action")).and_then(Value::as_str) == Some("accept");
    let decision = answer
        .and_then(|a| a.get("content"))
        .and_then(|c| c.get("approve"))
        .and_then(Value::as_bool);
    let (true, Some(approve)) = (accepted, decision) else {
        // No usable answer: ask again.
        return ask(&principal, &id, seq);
    };
    let note = answer
        .and_then(|a| a.get("content"))
        .and_then(|c| c.get("note"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .or_else(|| Some("answered in the MCP client".to_owned()));
    if server.gateway.store().ok().is_some() && pending(server, &id).await == Some(seq) {
        let hooks = crate::gateway::RunHooks {
            sinks: Vec::new(),
            approver: None,
            owner: None,
        };
        server
            .gateway
            .approve(
                ApproveParams {
                    session_id: id.clone(),
                    approve,
                    note,
                },
                hooks,
            )
            .await
            .map_err(|e| ErrorData::invalid_params(e.message, None))?;
    }
    wait(server, &principal, &id, seq, ctx).await
}

/// A retried call that answers a suspend: deliver the signal (once: only
/// while the session still waits where it was asked), then wait on.
async fn retry_signal(
    server: &McpServer,
    principal: &Principal,
    id: &str,
    seq: u64,
    responses: Option<&InputResponses>,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let key = format!("signal-{seq}");
    let answer = responses.and_then(|r| r.get(&key));
    let accepted = answer.and_then(|a| a.get("action")).and_then(Value::as_str) == Some("accept");
    let content = answer.and_then(|a| a.get("content"));
    let event = content.and_then(|c| c.get("event")).and_then(Value::as_str);
    let (true, Some(event)) = (accepted, event) else {
        return match suspended(server, principal, id).await {
            Some(ask) => Ok(ask),
            None => wait(server, principal, id, seq, ctx).await,
        };
    };
    let payload = match content.and_then(|c| c.get("payload")) {
        Some(Value::String(s)) if !s.trim().is_empty() => serde_json::from_str(s).map_err(|e| {
            ErrorData::invalid_params(format!("`{key}`: the payload is not JSON: {e}"), None)
        })?,
        Some(Value::String(_)) | None => Value::Null,
        Some(other) => other.clone(),
    };
    let store = server
        .gateway
        .store()
        .map_err(|e| ErrorData::internal_error(e.message, None))?;
    let i = id.to_owned();
    let meta = tokio::task::spawn_blocking(move || store.get(&i))
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let mut after = meta.last_seq;
    if meta.status == SessionStatus::Suspended && meta.last_seq == seq {
        let hooks = crate::gateway::RunHooks {
            sinks: Vec::new(),
            approver: None,
            owner: None,
        };
        server
            .gateway
            .signal(
                SignalParams {
                    session_id: id.to_owned(),
                    event: event.to_owned(),
                    payload,
                },
                hooks,
            )
            .await
            .map_err(|e| ErrorData::invalid_params(e.message, None))?;
        // The signal's own events are recorded by now: a suspend after them
        // is a new one.
        let store = server
            .gateway
            .store()
            .map_err(|e| ErrorData::internal_error(e.message, None))?;
        let i = id.to_owned();
        if let Ok(Ok(m)) = tokio::task::spawn_blocking(move || store.get(&i)).await {
            after = m.last_seq;
        }
    }
    wait(server, principal, id, after, ctx).await
}

/// Wait for the run in the store: its result when it ends, another
/// input-required result at its next approval or suspend (after seq
/// `answered`).
async fn wait(
    server: &McpServer,
    principal: &Principal,
    id: &str,
    answered: u64,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let gateway = &server.gateway;
    let store = gateway
        .store()
        .map_err(|e| ErrorData::internal_error(e.message, None))?;
    loop {
        let (s, i) = (store.clone(), id.to_owned());
        let read = tokio::task::spawn_blocking(move || {
            let meta = s.get(&i)?;
            let pending = s.pending_approval(&i)?;
            Ok::<_, agentfile_session::StoreError>((meta.status, pending, meta.last_seq))
        })
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        match read {
            (SessionStatus::WaitingApproval, Some(seq), _) if seq > answered => {
                return ask(principal, id, seq);
            }
            (SessionStatus::Suspended, _, last) if last > answered => {
                let r = gateway
                    .stored_result(id)
                    .map_err(|e| ErrorData::internal_error(e.message, None))?;
                if let Some(r) = r {
                    return ask_signal(principal, id, last, &r.waiting_for);
                }
            }
            (s, _, _) if s.is_terminal() => {
                if let Some(r) = gateway
                    .stored_result(id)
                    .map_err(|e| ErrorData::internal_error(e.message, None))?
                {
                    return Ok(super::results::run_result(&r).into());
                }
            }
            _ => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = ctx.ct.cancelled() => {
                let _ = gateway.cancel(CancelParams { session_id: id.to_owned() }).await;
                return Err(ErrorData::internal_error("cancelled", None));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_open_only_unchanged_and_for_their_principal() {
        let me = Principal::local();
        let s = seal(&me, "20260101-000000-abc", Asked::Approval(7));
        assert_eq!(
            open(&me, &s).unwrap(),
            ("20260101-000000-abc".into(), Asked::Approval(7))
        );
        let sig = seal(&me, "20260101-000000-abc", Asked::Signal(7));
        assert_eq!(
            open(&me, &sig).unwrap(),
            ("20260101-000000-abc".into(), Asked::Signal(7))
        );
        assert!(open(&me, &sig.replacen(".s7.", ".7.", 1)).is_err());
        assert!(open(&me, &s.replacen(".7.", ".s7.", 1)).is_err());
        assert!(open(&me, &s.replacen(".7.", ".07.", 1)).is_err());
        assert!(open(&Principal::loopback(), &s).is_err());
        let tampered = s.replace(".7.", ".8.");
        assert!(open(&me, &tampered).is_err());
        assert!(open(&me, "x").is_err());
        assert!(open(&me, &format!("{s}.")).is_err());
    }

    fn keys_of(
        vars: &[(&str, &str)],
        current: Option<&str>,
        previous: &[&str],
    ) -> Result<Option<StateKeys>, StateKeyError> {
        let section = agentfile_config::McpSection {
            state_key_env: current.map(str::to_owned),
            state_key_previous_env: previous.iter().map(|p| (*p).to_owned()).collect(),
            ..Default::default()
        };
        StateKeys::from_section(&section, |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    const HEX: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const B64: &str = "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=";

    #[test]
    fn configured_keys_are_read_checked_and_never_shown() {
        assert!(keys_of(&[], None, &[]).unwrap().is_none());
        for good in [HEX, B64, &HEX.to_uppercase()] {
            let k = keys_of(&[("K", good)], Some("K"), &[]).unwrap();
            assert!(k.is_some(), "{good}");
            assert!(!format!("{k:?}").contains(&good[..8]));
        }
        let unset = keys_of(&[], Some("K"), &[]).unwrap_err();
        assert!(unset.to_string().contains("K is not set"), "{unset}");
        let blank = keys_of(&[("K", "  ")], Some("K"), &[]).unwrap_err();
        assert!(matches!(blank, StateKeyError::Unset { .. }), "{blank}");
        for weak in [
            "secret",
            &HEX[..32],
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ] {
            let e = keys_of(&[("K", weak)], Some("K"), &[]).unwrap_err();
            assert!(matches!(e, StateKeyError::Weak { .. }), "{weak}: {e}");
            assert!(!e.to_string().contains(weak), "{e}");
        }
        // A previous key is checked as the current one is.
        let e = keys_of(&[("K", HEX), ("OLD", "short")], Some("K"), &["OLD"]).unwrap_err();
        assert!(e.to_string().contains("state_key_previous_env"), "{e}");
    }

    #[test]
    fn a_rotated_key_still_opens_what_the_previous_one_sealed() {
        let me = Principal::local();
        let old = keys_of(&[("K", B64)], Some("K"), &[]).unwrap().unwrap();
        let again = keys_of(&[("K", B64)], Some("K"), &[]).unwrap().unwrap();
        let rotated = keys_of(&[("K", HEX), ("OLD", B64)], Some("K"), &["OLD"])
            .unwrap()
            .unwrap();
        let other = keys_of(&[("K", HEX)], Some("K"), &[]).unwrap().unwrap();
        let m = mac_with(&old.current, &me, "s1", "7");
        // The same key text is the same key in another process.
        assert!(mac_ok_in(&again, &me, "s1", "7", &m));
        assert!(mac_ok_in(&rotated, &me, "s1", "7", &m));
        assert!(!mac_ok_in(&other, &me, "s1", "7", &m));
        assert!(!mac_ok_in(&StateKeys::random(), &me, "s1", "7", &m));
        assert!(!mac_ok_in(&rotated, &me, "s1", "8", &m));
        // New states are sealed with the current key.
        let new = mac_with(&rotated.current, &me, "s1", "7");
        assert!(mac_ok_in(&other, &me, "s1", "7", &new));
        assert!(!mac_ok_in(&old, &me, "s1", "7", &new));
    }

    #[test]
    fn an_embedders_state_opens_unchanged_and_never_as_a_runs() {
        let me = Principal::local();
        let s = seal_state(&me, "round 2: Alice");
        assert_eq!(open_state(&me, &s).unwrap(), "round 2: Alice");
        assert!(open_state(&Principal::loopback(), &s).is_err());
        assert!(open(&me, &s).is_err());
        let mut tampered = s.clone().into_bytes();
        tampered[2] = if tampered[2] == b'0' { b'1' } else { b'0' };
        assert!(open_state(&me, &String::from_utf8(tampered).unwrap()).is_err());
        let run = seal(&me, "20260101-000000-abc", Asked::Approval(7));
        assert!(open_state(&me, &run).is_err());
        assert!(open_state(&me, "x.").is_err());
    }
}
