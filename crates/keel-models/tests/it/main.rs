//! Integration tests of keel-models: the `openai` provider against the mock LLM server over
//! real HTTP on 127.0.0.1, the `scripted` provider, and building providers from specs.
// Marks the whole binary as test code, so clippy.toml's allow-*-in-tests cover its helpers too.
#![cfg(test)]

mod anthropic;
mod openai_errors;
mod openai_request;
mod openai_stream;
mod scripted;
mod spec;

use std::time::Duration;

use futures_util::StreamExt;
use keel_models::{OpenAiConfig, OpenAiProvider};
use keel_test_support::MockLlm;
use keel_types::{
    Message, ModelError, ModelEvent, ModelParams, ModelProvider, ModelRequest, ModelStopReason,
    ToolSpec, Usage,
};
use serde_json::json;

pub const API_KEY: &str = "sk-test-secret-key";

/// A provider aimed at the mock, with a key and a short timeout.
pub fn provider(mock: &MockLlm) -> OpenAiProvider {
    provider_with(mock, |_| {})
}

pub fn provider_with(mock: &MockLlm, tweak: impl FnOnce(&mut OpenAiConfig)) -> OpenAiProvider {
    let mut config = OpenAiConfig::new("gpt-test");
    config.base_url = mock.base_url();
    config.api_key = Some(API_KEY.into());
    config.timeout = Duration::from_secs(5);
    tweak(&mut config);
    OpenAiProvider::new(config).unwrap()
}

/// A request with a system prompt, one user message and one tool.
pub fn request(stream: bool) -> ModelRequest {
    ModelRequest {
        messages: vec![
            Message::system("You are terse."),
            Message::user("What is the weather in Paris?"),
        ],
        tools: std::sync::Arc::from([ToolSpec {
            name: "get_weather".into(),
            description: "Current weather for a city.".into(),
            parameters: json!({
                "type": "object",
                "properties": { "city": { "type": "string" } },
                "required": ["city"]
            }),
        }]),
        params: ModelParams::default(),
        stream,
        sections: Vec::new(),
        traceparent: None,
    }
}

/// Runs one round and collects every item of the stream.
pub async fn run(
    provider: &dyn ModelProvider,
    request: ModelRequest,
) -> Result<Vec<Result<ModelEvent, ModelError>>, ModelError> {
    let stream = provider.stream(request).await?;
    Ok(stream.collect().await)
}

/// Runs one round that must succeed, returning its events.
pub async fn events(provider: &dyn ModelProvider, request: ModelRequest) -> Vec<ModelEvent> {
    run(provider, request)
        .await
        .expect("the round should start")
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("the stream should not fail")
}

/// An answer assembled from its deltas.
#[derive(Debug, Default, PartialEq)]
pub struct Answer {
    pub text: String,
    /// (id, name, arguments) in index order.
    pub calls: Vec<(String, String, String)>,
    pub usage: Option<Usage>,
    pub stop: Option<ModelStopReason>,
    /// Thinking blocks: (text, signature), or ("", data) for a redacted one.
    pub thinking: Vec<(String, String)>,
}

pub fn assemble(events: &[ModelEvent]) -> Answer {
    let mut answer = Answer::default();
    for event in events {
        assert!(
            answer.stop.is_none(),
            "no event may follow Stop: {events:?}"
        );
        match event {
            ModelEvent::TextDelta { text } => answer.text.push_str(text),
            ModelEvent::ToolCallStart { index, id, name } => {
                assert_eq!(
                    *index,
                    answer.calls.len(),
                    "tool calls start in index order"
                );
                answer.calls.push((id.clone(), name.clone(), String::new()));
            }
            ModelEvent::ToolCallArgsDelta { index, delta } => {
                answer.calls[*index].2.push_str(delta);
            }
            ModelEvent::ThinkingDelta { index, text } => {
                if *index == answer.thinking.len() {
                    answer.thinking.push(Default::default());
                }
                answer.thinking[*index].0.push_str(text);
            }
            ModelEvent::ThinkingSignature { index, signature } => {
                answer.thinking[*index].1.push_str(signature);
            }
            ModelEvent::RedactedThinking { index, data } => {
                assert_eq!(*index, answer.thinking.len(), "blocks come in order");
                answer.thinking.push((String::new(), data.clone()));
            }
            ModelEvent::Usage { usage } => answer.usage = Some(*usage),
            ModelEvent::Stop { reason } => answer.stop = Some(*reason),
        }
    }
    answer
}

/// The error a round fails with, whether before the stream or inside it.
pub async fn failure(provider: &dyn ModelProvider, request: ModelRequest) -> ModelError {
    match run(provider, request).await {
        Err(error) => error,
        Ok(items) => items
            .into_iter()
            .find_map(Result::err)
            .expect("the round should fail"),
    }
}
