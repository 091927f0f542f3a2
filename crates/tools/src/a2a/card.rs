//! What a remote agent's card says, as the tool needs it: where to send
//! messages and in which protocol generation, and what the model is told
//! (the description and the arguments' schema).
//!
//! Cards are read generically. An input schema is taken from wherever the
//! agent put it: a field of the skill whose name says schema
//! (`inputSchema`, `input_schema`, `parameters`), an extension's params
//! keyed by the skill's id, or a JSON object in the skill's description
//! (a fenced block or inline) that looks like a schema. None found: a free
//! object.

use serde_json::{Map, Value, json};
use url::Url;

use agentfile_wire::a2a::{AgentCard, AgentSkill, CARD_PATH, JSONRPC_BINDING};

/// Which generation of the JSON-RPC binding an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// 1.0: `SendMessage`, `GetTask`, `CancelTask`, `SendStreamingMessage`.
    V1,
    /// 0.3: `message/send`, `tasks/get`, `tasks/cancel`.
    V03,
}

impl Generation {
    /// The `A2A-Version` header's value.
    pub fn header(self) -> &'static str {
        match self {
            Generation::V1 => agentfile_wire::a2a::PROTOCOL_VERSION,
            Generation::V03 => agentfile_wire::a2a::v0_3::PROTOCOL_VERSION,
        }
    }
}

/// Where the card of the agent at `url` is: the URL itself when it names a
/// `.json` file, else `/.well-known/agent-card.json` below it (as the SDK's
/// resolver joins them).
pub fn card_url(url: &Url) -> Url {
    if url.path().ends_with(".json") {
        return url.clone();
    }
    let mut u = url.clone();
    let path = format!("{}{CARD_PATH}", url.path().trim_end_matches('/'));
    u.set_path(&path);
    u.set_query(None);
    u.set_fragment(None);
    u
}

/// The JSON-RPC endpoint the card names, and its generation: a 1.0
/// interface first, then a later one, then 0.3, then one without a
/// version (taken as 1.0); else a 0.3 card's `url`; else `configured`
/// itself when it is not the card's URL.
pub fn endpoint(card: &AgentCard, configured: &Url) -> Option<(Url, Generation)> {
    let major_minor = |v: &str| -> Option<(u32, u32)> {
        let mut it = v.trim().split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    let jsonrpc: Vec<_> = card
        .supported_interfaces
        .iter()
        .filter(|i| i.protocol_binding.eq_ignore_ascii_case(JSONRPC_BINDING))
        .filter_map(|i| {
            let url = configured.join(&i.url).ok()?;
            Some((url, major_minor(&i.protocol_version)))
        })
        .collect();
    let pick = |want: &dyn Fn(Option<(u32, u32)>) -> bool| {
        jsonrpc.iter().find(|(_, v)| want(*v)).map(|(u, v)| {
            let generation = match v {
                Some((0, _)) => Generation::V03,
                _ => Generation::V1,
            };
            (u.clone(), generation)
        })
    };
    let found = pick(&|v| v == Some((1, 0)))
        .or_else(|| pick(&|v| v.is_some_and(|v| v > (1, 0))))
        .or_else(|| pick(&|v| v.is_some_and(|v| v >= (0, 3))))
        .or_else(|| pick(&|v| v.is_none()));
    if found.is_some() {
        return found;
    }
    if let Some(u) = &card.url
        && card
            .preferred_transport
            .as_deref()
            .is_none_or(|t| t.eq_ignore_ascii_case(JSONRPC_BINDING))
        && let Ok(url) = configured.join(u)
    {
        let v = card.protocol_version.as_deref().unwrap_or("0.3.0");
        let generation = match major_minor(v) {
            Some((0, _)) | None => Generation::V03,
            Some(_) => Generation::V1,
        };
        return Some((url, generation));
    }
    (!configured.path().ends_with(".json")).then(|| (configured.clone(), Generation::V1))
}

/// The skill a call names: the configured one, else the card's only one.
pub fn chosen_skill<'c>(card: &'c AgentCard, configured: Option<&str>) -> Option<&'c AgentSkill> {
    match configured {
        Some(id) => card.skills.iter().find(|s| s.id == id),
        None if card.skills.len() == 1 => card.skills.first(),
        None => None,
    }
}

/// What the model reads about the tool.
pub fn description(card: &AgentCard, configured: Option<&str>, url: &Url) -> String {
    let agent = if card.name.trim().is_empty() {
        format!("the remote A2A agent at {url}")
    } else {
        format!("the remote A2A agent \"{}\" ({url})", card.name.trim())
    };
    let mut out = format!("Ask {agent}.");
    if !card.description.trim().is_empty() {
        out.push(' ');
        out.push_str(card.description.trim());
    }
    match chosen_skill(card, configured) {
        Some(s) => {
            out.push_str("\n\n");
            out.push_str(&skill_line(s));
            out.push_str("\nThe arguments are the skill's inputs.");
        }
        None if card.skills.len() > 1 => {
            out.push_str("\n\nSkills:");
            for s in &card.skills {
                out.push_str("\n- ");
                out.push_str(&skill_line(s));
            }
            out.push_str(
                "\nName the skill's id in the argument `skill`; the other arguments are its inputs.",
            );
        }
        None => {}
    }
    agentfile_config::text::truncate(&out, 4000)
}

fn skill_line(s: &AgentSkill) -> String {
    let mut line = format!("Skill `{}`", s.id);
    if !s.name.trim().is_empty() && s.name != s.id {
        line.push_str(&format!(" ({})", s.name.trim()));
    }
    if !s.description.trim().is_empty() {
        line.push_str(": ");
        line.push_str(s.description.trim());
    }
    if !s.examples.is_empty() {
        line.push_str(" Examples: ");
        line.push_str(&s.examples.join("; "));
    }
    line
}

/// The arguments' schema: the chosen skill's input schema, else a free
/// object (with `skill` named when the card has several to choose from).
pub fn parameters(card: &AgentCard, configured: Option<&str>) -> Value {
    if let Some(skill) = chosen_skill(card, configured)
        && let Some(mut schema) = input_schema(card, skill)
    {
        if schema.get("type").is_none() {
            schema.insert("type".to_owned(), json!("object"));
        }
        return Value::Object(schema);
    }
    if configured.is_none() && card.skills.len() > 1 {
        let ids: Vec<&str> = card.skills.iter().map(|s| s.id.as_str()).collect();
        return json!({
            "type": "object",
            "properties": {"skill": {"type": "string", "enum": ids, "description": "the skill to ask"}},
            "required": ["skill"],
            "additionalProperties": true
        });
    }
    free_object()
}

pub fn free_object() -> Value {
    json!({"type": "object", "additionalProperties": true})
}

/// A skill's input schema, wherever the card carries one.
pub fn input_schema(card: &AgentCard, skill: &AgentSkill) -> Option<Map<String, Value>> {
    schema_field(&skill.extra)
        .or_else(|| {
            skill
                .extra
                .get("metadata")
                .and_then(Value::as_object)
                .and_then(schema_field)
        })
        .or_else(|| {
            card.capabilities
                .extensions
                .iter()
                .filter_map(|e| e.params.as_ref())
                .find_map(|p| keyed_by(p, &skill.id, 0))
        })
        .or_else(|| in_text(&skill.description))
}

fn looks_like_schema(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("object")
        || v.get("properties").is_some_and(Value::is_object)
}

/// A field whose name says it is the input schema.
fn schema_field(fields: &Map<String, Value>) -> Option<Map<String, Value>> {
    fields.iter().find_map(|(k, v)| {
        let key: String = k
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        let named = matches!(
            key.as_str(),
            "inputschema" | "inputsschema" | "parameters" | "schema" | "argsschema"
        );
        (named && looks_like_schema(v))
            .then(|| v.as_object().cloned())
            .flatten()
    })
}

/// Under an extension's params: an object at the key `id` (a schema, or
/// an object with a schema field), searched a few levels deep.
fn keyed_by(v: &Value, id: &str, depth: usize) -> Option<Map<String, Value>> {
    let obj = v.as_object()?;
    if let Some(found) = obj.get(id) {
        if looks_like_schema(found) {
            return found.as_object().cloned();
        }
        if let Some(f) = found.as_object().and_then(schema_field) {
            return Some(f);
        }
    }
    if depth >= 3 {
        return None;
    }
    obj.values()
        .find_map(|child| keyed_by(child, id, depth + 1))
}

/// The first JSON object in `text` that looks like a schema.
fn in_text(text: &str) -> Option<Map<String, Value>> {
    text.match_indices('{').take(32).find_map(|(i, _)| {
        let mut it = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        match it.next() {
            Some(Ok(v)) if looks_like_schema(&v) => v.as_object().cloned(),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(v: Value) -> AgentCard {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_card_lies_below_the_base_or_is_the_url() {
        let u = |s: &str| card_url(&Url::parse(s).unwrap()).to_string();
        assert_eq!(
            u("http://h:1/a2a/"),
            "http://h:1/a2a/.well-known/agent-card.json"
        );
        assert_eq!(u("http://h:1"), "http://h:1/.well-known/agent-card.json");
        assert_eq!(u("http://h/x/card.json"), "http://h/x/card.json");
    }

    #[test]
    fn a_one_point_zero_interface_wins() {
        let base = Url::parse("http://h/").unwrap();
        let c = card(json!({"supportedInterfaces": [
            {"url": "http://h/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://h/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0.0"}]}));
        assert_eq!(
            endpoint(&c, &base),
            Some((Url::parse("http://h/rpc").unwrap(), Generation::V1))
        );
        let old = card(json!({"url": "http://h/a2a", "protocolVersion": "0.3.0"}));
        assert_eq!(
            endpoint(&old, &base),
            Some((Url::parse("http://h/a2a").unwrap(), Generation::V03))
        );
        let card_only = Url::parse("http://h/card.json").unwrap();
        assert_eq!(endpoint(&card(json!({})), &card_only), None);
    }

    #[test]
    fn a_schema_is_found_wherever_the_card_put_it() {
        let field = card(json!({"skills": [{"id": "s", "inputSchema":
            {"type": "object", "properties": {"q": {"type": "string"}}}}]}));
        assert!(parameters(&field, None)["properties"]["q"].is_object());
        let ext = card(json!({"capabilities": {"extensions": [{"uri": "x",
            "params": {"schemas": {"s": {"properties": {"n": {}}}}}}]},
            "skills": [{"id": "s"}]}));
        let p = parameters(&ext, Some("s"));
        assert!(p["properties"]["n"].is_object() && p["type"] == "object");
        let text = card(json!({"skills": [{"id": "s", "description":
            "Sums.\n\nInputs:\n```json\n{\"type\": \"object\", \"properties\": {\"a\": {}}}\n```"}]}));
        assert!(parameters(&text, None)["properties"]["a"].is_object());
        let none = card(json!({"skills": [{"id": "s", "description": "no {schema} here"}]}));
        assert_eq!(parameters(&none, None), free_object());
    }

    #[test]
    fn several_skills_are_listed_and_one_is_named() {
        let c = card(json!({"name": "Desk", "skills": [
            {"id": "a", "name": "A", "description": "does a"}, {"id": "b"}]}));
        let url = Url::parse("http://h/").unwrap();
        let d = description(&c, None, &url);
        assert!(
            d.contains("\"Desk\"") && d.contains("Skill `a` (A): does a") && d.contains("`skill`")
        );
        assert_eq!(parameters(&c, None)["required"], json!(["skill"]));
        let one = description(&c, Some("b"), &url);
        assert!(one.contains("Skill `b`") && !one.contains("Skill `a`"));
    }
}
