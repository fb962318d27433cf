//! The Messages API request body. System messages become the top-level `system`; a turn's
//! tool calls are `tool_use` blocks of the assistant's message; tool results are
//! `tool_result` blocks of the next user message; consecutive messages of one role are one
//! message of several blocks, as the API requires.

use keel_types::{Message, ModelError, ModelParams, Role, ToolSpec};
use serde_json::{Map, Value, json};

use super::DEFAULT_MAX_TOKENS;

/// The body of `POST /v1/messages`.
pub(super) fn request_body(
    model: &str,
    messages: &[Message],
    tools: &[ToolSpec],
    params: &ModelParams,
    stream: bool,
) -> Result<Vec<u8>, ModelError> {
    let refuse = |what: &str| ModelError::BadRequest {
        status: 0,
        message: format!("`{what}` is not supported by the Anthropic Messages API"),
    };
    if params.seed.is_some() {
        return Err(refuse("seed"));
    }
    if params.presence_penalty.is_some() {
        return Err(refuse("presence_penalty"));
    }
    if params.frequency_penalty.is_some() {
        return Err(refuse("frequency_penalty"));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(params.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.is_empty())
        .map(|m| m.content.as_str())
        .collect();
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(turns(messages)));
    if !tools.is_empty() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(temperature) = params.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(top_p) = params.top_p {
        body.insert("top_p".into(), json!(top_p));
    }
    if !params.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(params.stop));
    }
    body.insert("stream".into(), json!(stream));
    serde_json::to_vec(&Value::Object(body)).map_err(|e| ModelError::BadRequest {
        status: 0,
        message: format!("cannot encode the request: {e}"),
    })
}

/// The conversation as alternating user and assistant messages of content blocks.
fn turns(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => ("user", text_block(&message.content).into_iter().collect()),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id.as_deref().unwrap_or_default(),
                    "content": message.content,
                })],
            ),
            Role::Assistant => {
                let mut blocks: Vec<Value> = text_block(&message.content).into_iter().collect();
                for call in &message.tool_calls {
                    // The model's own arguments, as an object (what it sent was one, or the
                    // gateway refused the call before it ran).
                    let input = serde_json::from_str::<Value>(&call.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// A text block, when there is text (the API refuses empty ones).
fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::ToolCall;

    #[test]
    fn a_conversation_with_tool_rounds_is_written_as_the_api_wants_it() {
        let messages = vec![
            Message::system("Be brief."),
            Message::user("Add 2 and 3, and 4 and 5."),
            Message::assistant(
                "Adding.",
                vec![
                    ToolCall {
                        id: "toolu_1".into(),
                        name: "add".into(),
                        arguments: r#"{"a":2,"b":3}"#.into(),
                    },
                    ToolCall {
                        id: "toolu_2".into(),
                        name: "add".into(),
                        arguments: r#"{"a":4,"b":5}"#.into(),
                    },
                ],
            ),
            Message::tool_result("toolu_1", "5"),
            Message::tool_result("toolu_2", "9"),
        ];
        let tools = vec![ToolSpec {
            name: "add".into(),
            description: "Adds.".into(),
            parameters: json!({"type": "object"}),
        }];
        let params = ModelParams {
            temperature: Some(0.5),
            stop: vec!["END".into()],
            ..ModelParams::default()
        };
        let body: Value = serde_json::from_slice(
            &request_body("claude", &messages, &tools, &params, true).unwrap(),
        )
        .unwrap();
        assert_eq!(
            body,
            json!({
                "model": "claude",
                "max_tokens": 4096,
                "system": "Be brief.",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Add 2 and 3, and 4 and 5."}]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Adding."},
                        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
                        {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {"a": 4, "b": 5}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "5"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "9"},
                    ]},
                ],
                "tools": [{"name": "add", "description": "Adds.", "input_schema": {"type": "object"}}],
                "temperature": 0.5,
                "stop_sequences": ["END"],
                "stream": true,
            })
        );
        let seeded = ModelParams {
            seed: Some(1),
            ..ModelParams::default()
        };
        let refused = request_body("claude", &messages, &tools, &seeded, true).unwrap_err();
        assert!(refused.to_string().contains("`seed`"), "{refused}");
    }
}
