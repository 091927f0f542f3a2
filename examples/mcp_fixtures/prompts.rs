//! The conformance suite's test prompts: `test_simple_prompt`,
//! `test_prompt_with_arguments`, `test_prompt_with_embedded_resource`,
//! `test_prompt_with_image`, and `test_input_required_result_prompt` (asks
//! for context through an input-required result first, SEP-2322).

use rmcp::model::{
    ErrorData, GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequiredResult,
    Prompt,
};
use serde_json::{Value, json};

use super::PNG;

pub fn prompts() -> Vec<Prompt> {
    let arg = |name: &str, what: &str| json!({"name": name, "description": what, "required": true});
    [
        json!({"name": "test_simple_prompt", "description": "A prompt with no arguments"}),
        json!({"name": "test_prompt_with_arguments", "description": "A prompt with two arguments",
            "arguments": [arg("arg1", "First test argument"), arg("arg2", "Second test argument")]}),
        json!({"name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource",
            "arguments": [arg("resourceUri", "URI of the resource to embed")]}),
        json!({"name": "test_prompt_with_image", "description": "A prompt with an image"}),
        json!({"name": "test_input_required_result_prompt", "description": "Asks for context first"}),
    ]
    .into_iter()
    .map(|p| serde_json::from_value(p).expect("a valid prompt"))
    .collect()
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn messages(m: Vec<Value>) -> Result<GetPromptResponse, ErrorData> {
    serde_json::from_value::<GetPromptResult>(json!({"messages": m}))
        .map(Into::into)
        .map_err(|e| ErrorData::internal_error(format!("the fixture's prompt: {e}"), None))
}

pub fn get(request: &GetPromptRequestParams) -> Option<Result<GetPromptResponse, ErrorData>> {
    let arg = |name: &str| {
        request
            .arguments
            .as_ref()
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(match request.name.as_str() {
        "test_simple_prompt" => messages(vec![user(text("This is a simple prompt for testing."))]),
        "test_prompt_with_arguments" => messages(vec![user(text(&format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arg("arg1"),
            arg("arg2")
        )))]),
        "test_prompt_with_embedded_resource" => messages(vec![
            user(json!({"type": "resource", "resource": {
                "uri": arg("resourceUri"), "mimeType": "text/plain",
                "text": "Embedded resource content for testing."}})),
            user(text("Please process the embedded resource above.")),
        ]),
        "test_prompt_with_image" => messages(vec![
            user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
            user(text("Please analyze the image above.")),
        ]),
        "test_input_required_result_prompt" => {
            let context = request
                .input_responses
                .as_ref()
                .and_then(|a| a.get("user_context"))
                .filter(|a| a["action"] == "accept")
                .and_then(|a| a["content"]["context"].as_str())
                .map(str::to_owned);
            match context {
                Some(c) => messages(vec![user(text(&format!("Use this context: {c}")))]),
                None => serde_json::from_value(json!({"user_context": {
                    "method": "elicitation/create",
                    "params": {"message": "What context should the prompt use?",
                        "requestedSchema": {"type": "object",
                            "properties": {"context": {"type": "string"}}, "required": ["context"]}}
                }}))
                .map(|asked| {
                    GetPromptResponse::InputRequired(InputRequiredResult::from_input_requests(
                        asked,
                    ))
                })
                .map_err(|e| {
                    ErrorData::internal_error(format!("the fixture's question: {e}"), None)
                }),
            }
        }
        _ => return None,
    })
}
