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

/// A block of a model's reasoning before its answer (Anthropic's extended thinking). It is
/// never the answer: it is recorded, and sent back unchanged, byte for byte, in the rounds
/// that follow (the provider checks the signature); providers that do not take it leave it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Thinking {
    /// Reasoning in words, with the provider's signature of it.
    Thinking { thinking: String, signature: String },
    /// Reasoning the provider encrypted: opaque data to send back.
    RedactedThinking { data: String },
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
    /// An assistant message's reasoning blocks, in the order the model wrote them (before
    /// its text and tool calls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<Thinking>,
    /// A tool result that reports the call's failure (Anthropic's `is_error`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
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
            tool_calls,
            ..Self::plain(Role::Assistant, content)
        }
    }

    /// This message with the reasoning that preceded it.
    pub fn with_thinking(mut self, thinking: Vec<Thinking>) -> Self {
        self.thinking = thinking;
        self
    }

    /// The result of a tool call, answering the call with id `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::plain(Role::Tool, content)
        }
    }

    /// A tool call's failure (or refusal), answering the call with id `call_id`.
    pub fn tool_error(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::tool_result(call_id, content)
        }
    }

    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            thinking: Vec::new(),
            is_error: false,
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

/// One section of a model round's prompt, described by size and hash, never by its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSection {
    /// `instructions`, `skills`, `memory`, `history`, `hook_context`, `input`, `rounds`
    /// (earlier answers and tool results of this run) or `tools` (the tool definitions),
    /// in the order they are sent.
    pub name: String,
    /// How many messages it holds (for `tools`: how many tools).
    pub messages: u32,
    /// Size of its messages (or tool definitions) as JSON, in bytes.
    pub bytes: u64,
    /// SHA-256 (hex) of its messages (or tool definitions) as JSON.
    pub sha256: String,
    /// Its estimated size in tokens (4 bytes a token, 4 more per message; absent in
    /// logs written before sizes were estimated).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tokens: u64,
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
    /// What the request is made of, section by section (sizes and hashes), as
    /// `runtime.prompt.assembled` records it. Providers may ignore it; a cassette
    /// (`provider: replay`, `match: request`) compares it with the recorded request's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<PromptSection>,
    /// The W3C `traceparent` naming the round's span (`docs/observability.md`); an HTTP
    /// provider sends it as a header. Not part of what a cassette compares.
    #[serde(skip)]
    pub traceparent: Option<String>,
}

/// Token usage of one model round or a whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// All input tokens, including those read from or written to the provider's cache.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Of `prompt_tokens`, those read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of `prompt_tokens`, those written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Of `completion_tokens`, those the model spent reasoning (as the provider reports
    /// them: OpenAI's `completion_tokens_details.reasoning_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// What these tokens cost at the model's declared `pricing` (none without one). A run's
    /// total is in the currency of its first priced round; rounds priced in another currency
    /// keep their cost on their own `runtime.model.completed` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::cost::Cost>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// `prompt` input and `completion` output tokens, nothing cached.
    pub fn new(prompt: u64, completion: u64) -> Self {
        Self {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            ..Self::default()
        }
    }

    /// Adds another round's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.total_tokens += other.total_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cost = match (self.cost, other.cost) {
            (Some(mine), Some(theirs)) if mine.currency == theirs.currency => {
                Some(crate::cost::Cost {
                    amount: mine.amount.plus(theirs.amount),
                    currency: mine.currency,
                })
            }
            (None, theirs) => theirs,
            (mine, _) => mine,
        };
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
    /// The provider filtered the output, or the model refused to answer.
    ContentFilter,
    /// The provider paused a long turn (Anthropic `pause_turn`): sending the answer back as
    /// it is continues it.
    Paused,
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
    /// More reasoning text of the thinking block at `index` (counted among the answer's
    /// thinking blocks, from 0).
    ThinkingDelta { index: usize, text: String },
    /// More of the signature of thinking block `index`.
    ThinkingSignature { index: usize, signature: String },
    /// A redacted thinking block at `index`, whole.
    RedactedThinking { index: usize, data: String },
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
