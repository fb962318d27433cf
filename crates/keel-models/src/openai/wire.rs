//! The Chat Completions wire format: the request body (serialised straight from the
//! runtime's borrowed [`Message`]s and [`ToolSpec`]s, without intermediate copies) and the
//! response shapes (streamed chunks borrow from the received bytes where they can).

use std::borrow::Cow;

use keel_types::{Message, ModelParams, Role, ToolCall, ToolSpec, Usage};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// `POST /chat/completions` body.
pub(crate) struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
    pub params: ModelParams,
    pub stream: bool,
}

impl Serialize for ChatRequest<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("model", self.model)?;
        map.serialize_entry("messages", &Seq(self.messages, WireMessage))?;
        if !self.tools.is_empty() {
            map.serialize_entry("tools", &Seq(self.tools, WireTool))?;
        }
        map.serialize_entry("stream", &self.stream)?;
        if self.stream {
            map.serialize_entry("stream_options", &IncludeUsage)?;
        }
        if let Some(temperature) = self.params.temperature {
            map.serialize_entry("temperature", &temperature)?;
        }
        let params = &self.params;
        if let Some(max_tokens) = params.max_tokens {
            map.serialize_entry("max_tokens", &max_tokens)?;
        }
        if let Some(top_p) = params.top_p {
            map.serialize_entry("top_p", &top_p)?;
        }
        if !params.stop.is_empty() {
            map.serialize_entry("stop", &params.stop)?;
        }
        if let Some(seed) = params.seed {
            map.serialize_entry("seed", &seed)?;
        }
        if let Some(penalty) = params.presence_penalty {
            map.serialize_entry("presence_penalty", &penalty)?;
        }
        if let Some(penalty) = params.frequency_penalty {
            map.serialize_entry("frequency_penalty", &penalty)?;
        }
        map.end()
    }
}

/// A slice serialised element by element through a wrapper constructor.
struct Seq<'a, T, W>(&'a [T], fn(&'a T) -> W);

impl<'a, T, W: Serialize> Serialize for Seq<'a, T, W> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&(self.1)(item))?;
        }
        seq.end()
    }
}

struct IncludeUsage;

impl Serialize for IncludeUsage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("include_usage", &true)?;
        map.end()
    }
}

/// A message in the Chat Completions shape.
struct WireMessage<'a>(&'a Message);

impl Serialize for WireMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut map = s.serialize_map(None)?;
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        map.serialize_entry("role", role)?;
        if m.role == Role::Assistant && m.content.is_empty() && !m.tool_calls.is_empty() {
            map.serialize_entry("content", &())?;
        } else {
            map.serialize_entry("content", &m.content)?;
        }
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            map.serialize_entry("tool_calls", &Seq(&m.tool_calls, WireToolCall))?;
        }
        if m.role == Role::Tool
            && let Some(id) = &m.tool_call_id
        {
            map.serialize_entry("tool_call_id", id)?;
        }
        map.end()
    }
}

/// `{id, type: function, function: {name, arguments}}`.
struct WireToolCall<'a>(&'a ToolCall);

impl Serialize for WireToolCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("id", &self.0.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry(
            "function",
            &NameArgs {
                name: &self.0.name,
                arguments: &self.0.arguments,
            },
        )?;
        map.end()
    }
}

#[derive(Serialize)]
struct NameArgs<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// `{type: function, function: {name, description, parameters}}`.
struct WireTool<'a>(&'a ToolSpec);

impl Serialize for WireTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            description: &'a str,
            parameters: &'a Value,
        }
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry(
            "function",
            &Function {
                name: &self.0.name,
                description: &self.0.description,
                parameters: &self.0.parameters,
            },
        )?;
        map.end()
    }
}

/// One `chat.completion.chunk`.
#[derive(Deserialize)]
pub(crate) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub choices: Vec<ChunkChoice<'a>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Some servers report a failure inside the stream.
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Deserialize)]
pub(crate) struct ChunkChoice<'a> {
    #[serde(default)]
    pub index: u32,
    #[serde(default, borrow)]
    pub delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(crate) struct Delta<'a> {
    #[serde(default, borrow)]
    pub content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
pub(crate) struct ToolCallDelta<'a> {
    #[serde(default)]
    pub index: Option<usize>,
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct FunctionDelta<'a> {
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub arguments: Option<Cow<'a, str>>,
}

/// Token counts as OpenAI reports them.
#[derive(Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// `usage.completion_tokens_details`: how much of the answer was reasoning.
#[derive(Deserialize, Default)]
pub(crate) struct CompletionTokensDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

/// `usage.prompt_tokens_details`: how much of the prompt came from the cache.
#[derive(Deserialize, Default)]
pub(crate) struct PromptTokensDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u
                .total_tokens
                .unwrap_or(u.prompt_tokens + u.completion_tokens),
            cache_read_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            ..Usage::default()
        }
    }
}

/// A whole (non-streamed) `chat.completion`.
#[derive(Deserialize)]
pub(crate) struct Completion {
    #[serde(default)]
    pub choices: Vec<CompletionChoice>,
    /// Some servers answer `200` with an error object.
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

#[derive(Deserialize)]
pub(crate) struct CompletionChoice {
    pub message: CompletionMessage,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct CompletionMessage {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<CompletionToolCall>>,
}

#[derive(Deserialize)]
pub(crate) struct CompletionToolCall {
    #[serde(default)]
    pub id: Option<String>,
    pub function: CompletionFunction,
}

#[derive(Deserialize)]
pub(crate) struct CompletionFunction {
    pub name: String,
    /// A JSON string per the API; some compatible servers send an object.
    #[serde(default)]
    pub arguments: Option<Value>,
}

#[cfg(test)]
mod tests {
    use keel_types::{Message, ModelParams, ToolCall, ToolSpec};
    use serde_json::json;

    use super::ChatRequest;

    #[test]
    fn request_body_uses_the_chat_completions_shape() {
        let messages = vec![
            Message::system("be brief"),
            Message::user("weather?"),
            Message::assistant(
                "",
                vec![ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments: r#"{"city":"Paris"}"#.into(),
                }],
            ),
            Message::tool_result("call_1", "sunny"),
        ];
        let tools = vec![ToolSpec {
            name: "get_weather".into(),
            description: "Weather.".into(),
            parameters: json!({"type": "object"}),
        }];
        let body = ChatRequest {
            model: "gpt-x",
            messages: &messages,
            tools: &tools,
            params: ModelParams {
                temperature: Some(0.5),
                max_tokens: Some(10),
                ..ModelParams::default()
            },
            stream: true,
        };
        let value = serde_json::to_value(&body).unwrap();
        assert_eq!(
            value,
            json!({
                "model": "gpt-x",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "weather?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
                    ]},
                    {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
                ],
                "tools": [{"type": "function", "function": {
                    "name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}
                }}],
                "stream": true,
                "stream_options": {"include_usage": true},
                "temperature": 0.5,
                "max_tokens": 10
            })
        );
    }
}
