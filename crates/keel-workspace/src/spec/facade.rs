//! An agent's `facade`: which model parameters a client of the OpenAI-compatible facade
//! (`/v1/chat/completions`) may set for the agent's runs, and the bounds they are clamped to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A request parameter of the facade, by its workspace name (its Chat Completions name in
/// [`FacadeParam::wire_names`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FacadeParam {
    Temperature,
    /// `max_tokens` and `max_completion_tokens`.
    MaxTokens,
    TopP,
    Stop,
    Seed,
    PresencePenalty,
    FrequencyPenalty,
    /// `response_format`: a JSON object or a JSON Schema the answer must match.
    ResponseFormat,
}

impl FacadeParam {
    /// Every parameter, the default of `facade.allow`.
    pub const ALL: [FacadeParam; 8] = [
        Self::Temperature,
        Self::MaxTokens,
        Self::TopP,
        Self::Stop,
        Self::Seed,
        Self::PresencePenalty,
        Self::FrequencyPenalty,
        Self::ResponseFormat,
    ];

    /// Its name in the workspace (`facade.allow`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Temperature => "temperature",
            Self::MaxTokens => "maxTokens",
            Self::TopP => "topP",
            Self::Stop => "stop",
            Self::Seed => "seed",
            Self::PresencePenalty => "presencePenalty",
            Self::FrequencyPenalty => "frequencyPenalty",
            Self::ResponseFormat => "responseFormat",
        }
    }

    /// The Chat Completions fields that set it.
    pub fn wire_names(self) -> &'static [&'static str] {
        match self {
            Self::Temperature => &["temperature"],
            Self::MaxTokens => &["max_tokens", "max_completion_tokens"],
            Self::TopP => &["top_p"],
            Self::Stop => &["stop"],
            Self::Seed => &["seed"],
            Self::PresencePenalty => &["presence_penalty"],
            Self::FrequencyPenalty => &["frequency_penalty"],
            Self::ResponseFormat => &["response_format"],
        }
    }
}

/// `facade:` of an agent. A parameter the agent does not `allow` is refused (400, naming it);
/// a value outside a `clamp` bound is clamped to it, and the clamped value is what the run
/// records and the model receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FacadeSpec {
    /// The parameters a client may set (default: all of them).
    pub allow: Vec<FacadeParam>,
    /// Bounds a client's values are clamped to.
    pub clamp: FacadeClamp,
}

impl Default for FacadeSpec {
    fn default() -> Self {
        Self {
            allow: FacadeParam::ALL.to_vec(),
            clamp: FacadeClamp::default(),
        }
    }
}

impl FacadeSpec {
    /// Whether a client may set `param`.
    pub fn allows(&self, param: FacadeParam) -> bool {
        self.allow.contains(&param)
    }
}

/// `facade.clamp`: each bound is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FacadeClamp {
    /// The most output tokens a client may ask for (`max_tokens`, `max_completion_tokens`).
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    pub temperature: Option<Bounds>,
    pub top_p: Option<Bounds>,
    pub presence_penalty: Option<Bounds>,
    pub frequency_penalty: Option<Bounds>,
}

/// `{min, max}`, either optional (`min` must not exceed `max`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Bounds {
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Bounds {
    /// `value` within the bounds.
    pub fn clamp(&self, value: f64) -> f64 {
        let value = self.max.map_or(value, |max| value.min(max));
        self.min.map_or(value, |min| value.max(min))
    }
}
