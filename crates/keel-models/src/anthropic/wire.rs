//! The Messages API request body. System messages become the top-level `system`; a turn's
//! tool calls are `tool_use` blocks of the assistant's message; tool results are
//! `tool_result` blocks of the next user message; consecutive messages of one role are one
//! message of several blocks, as the API requires. An assistant message's thinking blocks go
//! first, exactly as the model wrote them; a failed call's result has `is_error`. With
//! caching on, the last tool definition and the last system block carry `cache_control`
//! breakpoints, so the stable prefix (tools, instructions, skills, memory) is cached.

use keel_types::{Message, ModelError, ModelParams, Role, Thinking, ToolSpec};
use serde_json::{Map, Value, json};

use super::DEFAULT_MAX_TOKENS;

/// What a Model document adds to every request.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Options {
    /// Extended thinking's token budget.
    pub thinking: Option<u32>,
    /// `cache: auto`: breakpoints on the stable prefix.
    pub cache: bool,
}

/// The body of `POST /v1/messages`.
pub(super) fn request_body(
    model: &str,
    messages: &[Message],
    tools: &[ToolSpec],
    params: &ModelParams,
    options: Options,
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
    // The answer's tokens come after the reasoning's: room for both when none is set.
    let max_tokens = params
        .max_tokens
        .unwrap_or(DEFAULT_MAX_TOKENS + options.thinking.unwrap_or(0));
    body.insert("max_tokens".into(), json!(max_tokens));
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.is_empty())
        .map(|m| m.content.as_str())
        .collect();
    if options.cache && !system.is_empty() {
        let mut blocks: Vec<Value> = system
            .iter()
            .map(|text| json!({"type": "text", "text": text}))
            .collect();
        if let Some(last) = blocks.last_mut() {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
        body.insert("system".into(), Value::Array(blocks));
    } else if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(turns(messages)));
    if !tools.is_empty() {
        let mut tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        if let (true, Some(last)) = (options.cache, tools.last_mut()) {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(budget) = options.thinking {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
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
            Role::Tool => {
                let mut result = json!({
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id.as_deref().unwrap_or_default(),
                    "content": message.content,
                });
                if message.is_error {
                    result["is_error"] = json!(true);
                }
                ("user", vec![result])
            }
            Role::Assistant => {
                let mut blocks: Vec<Value> = message.thinking.iter().map(thinking_block).collect();
                blocks.extend(text_block(&message.content));
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

/// A thinking block as the model wrote it.
fn thinking_block(thinking: &Thinking) -> Value {
    match thinking {
        Thinking::Thinking {
            thinking,
            signature,
        } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
        Thinking::RedactedThinking { data } => json!({"type": "redacted_thinking", "data": data}),
    }
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
            &request_body(
                "claude",
                &messages,
                &tools,
                &params,
                Options::default(),
                true,
            )
            .unwrap(),
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
        let refused = request_body(
            "claude",
            &messages,
            &tools,
            &seeded,
            Options::default(),
            true,
        )
        .unwrap_err();
        assert!(refused.to_string().contains("`seed`"), "{refused}");
    }

    #[test]
    fn thinking_goes_back_first_and_unchanged_errors_are_flagged_and_the_prefix_is_cached() {
        let thinking = vec![
            Thinking::Thinking {
                thinking: "Let me add.\n".into(),
                signature: "c2ln+/=".into(),
            },
            Thinking::RedactedThinking {
                data: "EmwKAhgB".into(),
            },
        ];
        let messages = vec![
            Message::system("Be brief."),
            Message::system("Skill: adding."),
            Message::user("Add 2 and 3."),
            Message::assistant(
                "",
                vec![ToolCall {
                    id: "toolu_1".into(),
                    name: "add".into(),
                    arguments: r#"{"a":2}"#.into(),
                }],
            )
            .with_thinking(thinking),
            Message::tool_error("toolu_1", "b is required"),
        ];
        let tools = vec![
            ToolSpec {
                name: "add".into(),
                description: "Adds.".into(),
                parameters: json!({"type": "object"}),
            },
            ToolSpec {
                name: "sub".into(),
                description: "Subtracts.".into(),
                parameters: json!({"type": "object"}),
            },
        ];
        let options = Options {
            thinking: Some(2048),
            cache: true,
        };
        let body: Value = serde_json::from_slice(
            &request_body(
                "claude",
                &messages,
                &tools,
                &ModelParams::default(),
                options,
                false,
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(body["max_tokens"], json!(4096 + 2048));
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert_eq!(
            body["system"],
            json!([
                {"type": "text", "text": "Be brief."},
                {"type": "text", "text": "Skill: adding.", "cache_control": {"type": "ephemeral"}},
            ])
        );
        assert_eq!(body["tools"][0].get("cache_control"), None);
        assert_eq!(
            body["tools"][1]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "thinking", "thinking": "Let me add.\n", "signature": "c2ln+/="},
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2}},
            ])
        );
        assert_eq!(
            body["messages"][2]["content"],
            json!([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "b is required", "is_error": true}])
        );
    }
}
