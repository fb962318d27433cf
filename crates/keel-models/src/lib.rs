//! Model providers: implementations of [`keel_types::ModelProvider`] that turn a
//! [`keel_types::ModelRequest`] into the normalised [`keel_types::ModelEvent`] stream.
//!
//! - [`openai`] — Chat Completions over HTTP with SSE streaming (OpenAI and compatible
//!   servers). Failures are classified into [`keel_types::ModelError`]; retrying is the
//!   runtime's job, never the provider's.
//! - [`anthropic`] — the Messages API, streamed or whole, with thinking and prompt caching.
//! - [`scripted`] — a deterministic model driven by a script file, for offline runs and tests.
//! - `provider: replay` — a recorded run's model answers
//!   ([`keel_types::cassette::CassetteProvider`]), for tests of a workspace without a model.
//!
//! Start at [`provider_for`], which builds the provider a workspace's `Model` document
//! describes. This crate knows nothing of agents, tools or runs.

pub mod anthropic;
pub mod openai;
pub mod scripted;
mod sse;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_types::cassette::{Cassette, CassetteProvider};
use keel_types::{ModelParams, ModelProvider};
use keel_workspace::{ModelSpec, ProviderKind, Workspace};

pub use openai::{OpenAiConfig, OpenAiEmbedder, OpenAiProvider};
pub use scripted::ScriptedProvider;

/// Why a provider could not be built from its configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The workspace has no `Model` document with that name.
    #[error("no model named `{0}` in the workspace")]
    UnknownModel(String),
    /// A field the provider needs is missing from the `Model` document.
    #[error("model `{model}`: the {provider} provider needs `spec.{field}`")]
    MissingField {
        model: String,
        provider: &'static str,
        field: &'static str,
    },
    /// `apiKeyEnv` names a variable that is not set (or empty).
    #[error("model `{model}`: the API key variable `{var}` (apiKeyEnv) is not set")]
    MissingApiKey { model: String, var: String },
    /// The provider kind is known but not implemented yet.
    #[error("model `{model}`: provider `{provider}` is not supported yet")]
    Unsupported { model: String, provider: String },
    /// `baseUrl` is not an http(s) URL.
    #[error("invalid base URL `{url}`: {reason}")]
    InvalidBaseUrl { url: String, reason: String },
    /// The API key holds characters that cannot go in an HTTP header.
    #[error("the API key contains characters that cannot be sent in an HTTP header")]
    InvalidApiKey,
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(String),
    /// The script file could not be read.
    #[error("cannot read the script {}: {message}", path.display())]
    ScriptRead { path: PathBuf, message: String },
    /// The cassette file could not be read, or is not a cassette.
    #[error("cannot read the cassette {}: {message}", path.display())]
    CassetteRead { path: PathBuf, message: String },
    /// The script could not be parsed or has problems (all are listed).
    #[error("invalid script {origin}: {message}")]
    InvalidScript { origin: String, message: String },
}

/// Builds the provider of the workspace's `Model` document `model_name`.
pub fn provider_for(
    workspace: &Workspace,
    model_name: &str,
) -> Result<Arc<dyn ModelProvider>, ProviderError> {
    let spec = workspace
        .models
        .get(model_name)
        .ok_or_else(|| ProviderError::UnknownModel(model_name.to_owned()))?;
    let idle = idle_connections(workspace);
    build_provider(model_name, spec, &workspace.root, &workspace.env, idle)
}

/// How many idle connections a workspace's model client keeps to its endpoint: as many as
/// runs may be in flight, each waiting for one model call before making the next; more could
/// never all be used at once. (reqwest's pool, left unbounded, grows past that: a call that
/// finds no idle connection opens one while another run's is on its way back.)
fn idle_connections(workspace: &Workspace) -> usize {
    usize::try_from(workspace.runtime.limits.max_concurrent_runs).unwrap_or(usize::MAX)
}

/// The endpoint settings of an `openai` model document.
fn openai_config(
    model_name: &str,
    spec: &ModelSpec,
    env: &BTreeMap<String, String>,
    max_idle_connections: usize,
) -> Result<OpenAiConfig, ProviderError> {
    let model = spec.model.clone().ok_or(ProviderError::MissingField {
        model: model_name.to_owned(),
        provider: match spec.provider {
            ProviderKind::Anthropic => "anthropic",
            _ => "openai",
        },
        field: "model",
    })?;
    let api_key = match &spec.api_key_env {
        None => None,
        Some(var) => Some(
            env.get(var)
                .filter(|key| !key.is_empty())
                .cloned()
                .ok_or_else(|| ProviderError::MissingApiKey {
                    model: model_name.to_owned(),
                    var: var.clone(),
                })?,
        ),
    };
    let config = OpenAiConfig {
        base_url: spec
            .base_url
            .clone()
            .unwrap_or_else(|| openai::DEFAULT_BASE_URL.to_owned()),
        model,
        api_key,
        params: ModelParams {
            temperature: spec.params.temperature,
            max_tokens: spec.params.max_tokens,
            ..ModelParams::default()
        },
        timeout: spec
            .timeout
            .map_or(openai::DEFAULT_TIMEOUT, |t| t.0)
            .max(Duration::from_millis(1)),
        allow_stream: spec.stream,
        max_idle_connections,
    };
    Ok(config)
}

/// The embeddings client of `Model` document `model_name` (provider `openai`; its server
/// must serve `/embeddings`).
pub fn embedder_for(
    workspace: &Workspace,
    model_name: &str,
) -> Result<Arc<dyn keel_types::Embedder>, ProviderError> {
    let spec = workspace
        .models
        .get(model_name)
        .ok_or_else(|| ProviderError::UnknownModel(model_name.to_owned()))?;
    if spec.provider != ProviderKind::Openai {
        return Err(ProviderError::MissingField {
            model: model_name.to_owned(),
            provider: "openai",
            field: "provider",
        });
    }
    let config = openai_config(
        model_name,
        spec,
        &workspace.env,
        idle_connections(workspace),
    )?;
    Ok(Arc::new(openai::OpenAiEmbedder::new(config)?))
}

/// Reads a cassette file (`keel runs export ID --cassette FILE`).
pub fn read_cassette(path: &Path) -> Result<Cassette, ProviderError> {
    let read_error = |message: String| ProviderError::CassetteRead {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| read_error(e.to_string()))?;
    let cassette: Cassette = serde_json::from_str(&text).map_err(|e| {
        read_error(format!(
            "not a cassette (line {}, column {}): {e}",
            e.line(),
            e.column()
        ))
    })?;
    if cassette.format != keel_types::cassette::FORMAT {
        return Err(read_error(format!(
            "format `{}` is not `{}`, the one this version reads",
            cassette.format,
            keel_types::cassette::FORMAT
        )));
    }
    Ok(cassette)
}

/// Builds a provider from one `Model` spec: `root` resolves a script path, `env` holds the
/// variable named by `apiKeyEnv`; its pool keeps any number of idle connections.
/// [`provider_for`] is this with a workspace's values, its pool bounded by the workspace's
/// `limits.maxConcurrentRuns`.
pub fn provider_from_spec(
    model_name: &str,
    spec: &ModelSpec,
    root: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Arc<dyn ModelProvider>, ProviderError> {
    build_provider(model_name, spec, root, env, usize::MAX)
}

fn build_provider(
    model_name: &str,
    spec: &ModelSpec,
    root: &Path,
    env: &BTreeMap<String, String>,
    max_idle_connections: usize,
) -> Result<Arc<dyn ModelProvider>, ProviderError> {
    match spec.provider {
        ProviderKind::Openai => {
            let config = openai_config(model_name, spec, env, max_idle_connections)?;
            Ok(Arc::new(OpenAiProvider::new(config)?))
        }
        ProviderKind::Scripted => {
            let script = spec.script.as_ref().ok_or(ProviderError::MissingField {
                model: model_name.to_owned(),
                provider: "scripted",
                field: "script",
            })?;
            let name = spec.model.as_deref().unwrap_or(model_name);
            Ok(Arc::new(ScriptedProvider::from_file(
                &root.join(script),
                name,
            )?))
        }
        ProviderKind::Anthropic => {
            let config = openai_config(model_name, spec, env, max_idle_connections)?;
            Ok(Arc::new(anthropic::AnthropicProvider::new(
                anthropic::AnthropicConfig {
                    base_url: spec
                        .base_url
                        .clone()
                        .unwrap_or_else(|| anthropic::DEFAULT_BASE_URL.to_owned()),
                    model: config.model,
                    api_key: config.api_key,
                    params: config.params,
                    timeout: config.timeout,
                    allow_stream: config.allow_stream,
                    max_idle_connections,
                    thinking_budget: spec.params.thinking.map(|t| t.budget_tokens),
                    cache: spec.cache == keel_workspace::CacheMode::Auto,
                },
            )?))
        }
        ProviderKind::Replay => {
            let file = spec.cassette.as_ref().ok_or(ProviderError::MissingField {
                model: model_name.to_owned(),
                provider: "replay",
                field: "cassette",
            })?;
            let cassette = read_cassette(&root.join(file))?;
            Ok(Arc::new(CassetteProvider::new(cassette, spec.matching)))
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub(crate) fn truncate(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &text[..end]))
}
