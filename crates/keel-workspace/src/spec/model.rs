//! `kind: Model`: an LLM endpoint — its provider and how to reach it, its sampling defaults,
//! and the models a round falls back to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use keel_types::cassette::CassetteMatch;

use super::Duration;
use super::money::PricingSpec;

/// `kind: Model` — an LLM endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelSpec {
    pub provider: ProviderKind,
    /// `openai`: the API base URL, e.g. `https://api.openai.com/v1`.
    #[serde(default)]
    pub base_url: Option<String>,
    /// `openai`: the model name sent to the endpoint.
    #[serde(default)]
    pub model: Option<String>,
    /// `openai`: the environment variable holding the API key (none: no key is sent).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// `scripted`: the script file, relative to the workspace root.
    #[serde(default)]
    pub script: Option<String>,
    /// `replay`: the cassette file (`keel runs export ID --cassette FILE`), relative to the
    /// workspace root.
    #[serde(default)]
    pub cassette: Option<String>,
    /// `replay`: which recorded answer a round gets — the next one in order (default), or
    /// only the one whose request matches (`request`; a changed request fails with a diff).
    #[serde(default, rename = "match")]
    pub matching: CassetteMatch,
    /// `anthropic`: prompt caching. `auto` marks the stable prefix (tool definitions, then
    /// the instructions, skills and memory) with `cache_control` breakpoints; `off` (default)
    /// marks nothing.
    #[serde(default)]
    pub cache: CacheMode,
    /// Stream answers (default) or ask for them whole.
    #[serde(default = "default_true")]
    pub stream: bool,
    /// Per-attempt timeout: connecting, and the gap between two chunks.
    #[serde(default)]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub params: ModelParamsSpec,
    /// Models a round goes to, in order, when this one's retries are spent on a retryable
    /// failure (overloaded, rate limited, unreachable): `[name, …]`, or `{models: [name, …],
    /// sticky: false}` to try this model again in the run's next round (by default the run's
    /// remaining rounds stay on the model that answered).
    #[serde(default)]
    pub fallbacks: Option<FallbacksSpec>,
    /// Rate limits shared by every run of the process: a round that would exceed them waits
    /// (`runtime.model.queued`) instead of failing.
    #[serde(default)]
    pub limits: Option<ModelLimitsSpec>,
    /// The model's context window, in tokens (prompt and answer together).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub context_window: Option<u64>,
    /// The most tokens one answer may have.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_output_tokens: Option<u32>,
    /// What the model costs, per million tokens: each round's cost is recorded from it. No
    /// price is built in.
    #[serde(default)]
    pub pricing: Option<PricingSpec>,
    /// How a prompt's size is counted between the provider's own counts: `auto` (default)
    /// uses OpenAI's encoding for an `openai` model of a known family (gpt-4o, gpt-4.1,
    /// gpt-5, o1, o3, o4: `o200k_base`; gpt-4, gpt-3.5: `cl100k_base`) when it declares a
    /// `contextWindow`, and the character heuristic otherwise.
    #[serde(default)]
    pub tokenizer: TokenizerSpec,
}

/// How a model's prompts are counted in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenizerSpec {
    /// The model's encoding when it is known and the window is managed, else the heuristic.
    #[default]
    Auto,
    /// OpenAI's `o200k_base` (gpt-4o, gpt-4.1, gpt-5, o-series).
    O200kBase,
    /// OpenAI's `cl100k_base` (gpt-4, gpt-3.5).
    Cl100kBase,
    /// 4 bytes of UTF-8 a token, 4 tokens of framing per message.
    Heuristic,
}

impl ModelSpec {
    /// The tokenizer this model's prompts are counted with: never `auto`.
    pub fn tokenizer(&self) -> TokenizerSpec {
        if self.tokenizer != TokenizerSpec::Auto {
            return self.tokenizer;
        }
        if self.provider != ProviderKind::Openai || self.context_window.is_none() {
            return TokenizerSpec::Heuristic;
        }
        // The name after any routing prefix (`openai/gpt-4o`).
        let name = self.model.as_deref().unwrap_or_default();
        let name = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
        let o200k = [
            "gpt-4o",
            "gpt-4.1",
            "gpt-4.5",
            "gpt-5",
            "chatgpt-4o",
            "o1",
            "o3",
            "o4",
        ];
        if o200k.iter().any(|family| name.starts_with(family)) {
            TokenizerSpec::O200kBase
        } else if ["gpt-4", "gpt-3.5"].iter().any(|f| name.starts_with(f)) {
            TokenizerSpec::Cl100kBase
        } else {
            TokenizerSpec::Heuristic
        }
    }
}

/// A model's rate limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelLimitsSpec {
    /// Requests (model attempts) per window.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub requests: Option<u32>,
    /// Tokens (prompt and completion, as the provider reports them) per window.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub tokens: Option<u64>,
    /// The window (default 1m).
    #[serde(default = "one_minute")]
    pub per: Duration,
    /// Requests in flight at once.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_concurrent: Option<u32>,
}

fn one_minute() -> Duration {
    Duration(std::time::Duration::from_secs(60))
}

/// A model's fallbacks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum FallbacksSpec {
    /// The models, in order; the run stays on the one that answered.
    Models(Vec<String>),
    /// The models, and whether the run stays on the one that answered.
    Detailed {
        models: Vec<String>,
        #[serde(default = "default_true")]
        sticky: bool,
    },
}

impl FallbacksSpec {
    /// The fallback models, in order.
    pub fn models(&self) -> &[String] {
        match self {
            Self::Models(models) | Self::Detailed { models, .. } => models,
        }
    }

    /// Whether a run stays on the model that answered.
    pub fn sticky(&self) -> bool {
        match self {
            Self::Models(_) => true,
            Self::Detailed { sticky, .. } => *sticky,
        }
    }
}

fn default_true() -> bool {
    true
}

/// Prompt caching (`anthropic`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// No `cache_control` breakpoints.
    #[default]
    Off,
    /// Breakpoints on the stable prefix: the tool definitions and the system prompt.
    Auto,
}

/// Which wire protocol a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI Chat Completions and compatible servers (Ollama, vLLM, llama.cpp, LM Studio).
    Openai,
    /// Anthropic's Messages API (`POST {baseUrl}/v1/messages`).
    Anthropic,
    /// A deterministic script, for offline runs and tests.
    Scripted,
    /// A recorded run's model answers (a cassette), for tests of a workspace without a model.
    Replay,
}

/// Sampling parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModelParamsSpec {
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// `anthropic`: extended thinking, with a budget of reasoning tokens (at least 1024, and
    /// less than `maxTokens`).
    pub thinking: Option<ThinkingSpec>,
}

/// Extended thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThinkingSpec {
    /// The most tokens the model may reason with before it answers.
    pub budget_tokens: u32,
}
