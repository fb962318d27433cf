//! Conversation messages and the normalised model wire: what the runtime sends a model
//! provider and the append-only deltas a provider streams back.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A tool call as the model asked for it. `arguments` is the raw JSON text the model produced;
/// it is parsed and validated by the tool gateway, never trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    /// An assistant message, possibly asking for tool calls.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            tool_calls,
            tool_call_id: None,
        }
    }

    /// The result of a tool call, answering the call with id `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }

    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// Sampling parameters passed through to the provider (OpenAI Chat Completions' meaning);
/// unset fields are not sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Sequences that end the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
}

impl ModelParams {
    /// Nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// These parameters over `defaults`, field by field (a set field wins).
    pub fn over(&self, defaults: &ModelParams) -> ModelParams {
        ModelParams {
            temperature: self.temperature.or(defaults.temperature),
            max_tokens: self.max_tokens.or(defaults.max_tokens),
            top_p: self.top_p.or(defaults.top_p),
            stop: match self.stop.is_empty() {
                true => defaults.stop.clone(),
                false => self.stop.clone(),
            },
            seed: self.seed.or(defaults.seed),
            presence_penalty: self.presence_penalty.or(defaults.presence_penalty),
            frequency_penalty: self.frequency_penalty.or(defaults.frequency_penalty),
        }
    }
}

/// One model round as the runtime asks for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    pub messages: Vec<Message>,
    /// The tools the model may call. Shared: the gateway hands every round of an agent the
    /// same list (until the tools change), so a round does not copy their schemas.
    #[serde(with = "shared_list")]
    pub tools: Arc<[ToolSpec]>,
    pub params: ModelParams,
    /// Stream the answer as deltas (`true`) or ask for it whole (`false`). Providers yield
    /// the same [`ModelEvent`]s either way.
    pub stream: bool,
}

/// Token usage of one model round or a whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl Usage {
    /// Adds another round's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// Why the model stopped producing its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelStopReason {
    /// A final answer (OpenAI `stop`).
    Stop,
    /// The model asks for tool calls.
    ToolCalls,
    /// The output token limit was reached.
    Length,
    /// The provider filtered the output.
    ContentFilter,
    /// The stream ended without a stated reason.
    Unknown,
}

/// A normalised, append-only delta of a model's answer. Providers translate their wire format
/// into this sequence; the runtime assembles it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelEvent {
    /// More answer text.
    TextDelta { text: String },
    /// A tool call begins at position `index` of the answer.
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// More argument text for the tool call at `index`.
    ToolCallArgsDelta { index: usize, delta: String },
    /// Token usage of the round.
    Usage { usage: Usage },
    /// The answer is complete.
    Stop { reason: ModelStopReason },
}

/// (De)serializes an `Arc<[T]>` as a plain list.
mod shared_list {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer, T: Serialize>(
        list: &Arc<[T]>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        list.as_ref().serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        deserializer: D,
    ) -> Result<Arc<[T]>, D::Error> {
        Vec::<T>::deserialize(deserializer).map(Arc::from)
    }
}
