//! The SDK surface: a model provider and a tool written in Rust, injected through the builder.

use std::sync::Arc;

use async_trait::async_trait;
use keel::{
    BoxStream, Message, ModelError, ModelEvent, ModelRequest, ModelStopReason, ModelStream, Role,
    Usage,
};
use keel::{ModelProvider, RunStatus, Runtime};

use crate::common::{self, RecordingTool};

/// A provider that asks for the weather once, then answers with the tool's result.
struct WeatherModel;

#[async_trait]
impl ModelProvider for WeatherModel {
    fn provider_name(&self) -> &str {
        "test"
    }

    fn model_name(&self) -> &str {
        "weather-model"
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let last: &Message = request.messages.last().expect("messages");
        let events = match last.role {
            Role::Tool => vec![
                ModelEvent::TextDelta {
                    text: format!("Tool said {}", last.content),
                },
                ModelEvent::Stop {
                    reason: ModelStopReason::Stop,
                },
            ],
            _ => vec![
                ModelEvent::ToolCallStart {
                    index: 0,
                    id: "c1".into(),
                    name: "get_weather".into(),
                },
                ModelEvent::ToolCallArgsDelta {
                    index: 0,
                    delta: r#"{"city":"Oslo"}"#.into(),
                },
                ModelEvent::Usage {
                    usage: Usage {
                        prompt_tokens: 3,
                        completion_tokens: 2,
                        total_tokens: 5,
                        ..Usage::default()
                    },
                },
                ModelEvent::Stop {
                    reason: ModelStopReason::ToolCalls,
                },
            ],
        };
        let stream: BoxStream<'static, _> = Box::pin(futures_lite_iter(events));
        Ok(stream)
    }
}

fn futures_lite_iter(
    events: Vec<ModelEvent>,
) -> impl futures_core::Stream<Item = Result<ModelEvent, ModelError>> + Send {
    futures_util::stream::iter(events.into_iter().map(Ok))
}

#[tokio::test]
async fn injected_provider_and_tool_replace_the_workspace_ones() {
    // The workspace's model points at a port nobody listens on: it must not be used.
    let ws = common::workspace("http://127.0.0.1:9/v1", &["get_weather"], "");
    let tool = RecordingTool::weather();
    let calls = tool.calls.clone();
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .model_provider("mock", Arc::new(WeatherModel))
        .tool(Arc::new(tool))
        .build()
        .unwrap();

    let (response, _) = common::run(&runtime, "Weather in Oslo?").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(calls.lock().unwrap().len(), 1);
    assert!(response.output.unwrap().contains("sunny"));
    assert_eq!(response.usage.total_tokens, 5);
    let runs = runtime.runs().list(&Default::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Completed);
}

#[tokio::test]
async fn the_handle_streams_events_and_the_final_response() {
    use futures_util::StreamExt;

    let ws = common::workspace("http://127.0.0.1:9/v1", &["get_weather"], "");
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .model_provider("mock", Arc::new(WeatherModel))
        .tool(Arc::new(RecordingTool::weather()))
        .build()
        .unwrap();
    let mut handle = runtime
        .request(keel::RequestOptions {
            input: "Weather?".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let types: Vec<&'static str> = handle.events().map(|e| e.type_name()).collect().await;
    let response = handle.wait().await.unwrap();

    assert_eq!(types.first(), Some(&"runtime.request.started"));
    assert!(types.contains(&"runtime.request.completed"));
    assert_eq!(response.status, RunStatus::Completed);
}

/// An in-process `PreToolUse` hook that denies calls for one city.
struct NoOslo;

#[async_trait]
impl keel::hooks::InProcessHook for NoOslo {
    fn name(&self) -> &str {
        "no-oslo"
    }

    fn event(&self) -> keel::HookEvent {
        keel::HookEvent::PreToolUse
    }

    async fn call(
        &self,
        input: &keel::hooks::HookInput,
    ) -> Result<keel::hooks::HookOutcome, keel::hooks::HookError> {
        let city = input.tool_input.as_ref().and_then(|i| i["city"].as_str());
        Ok(match city {
            Some("Oslo") => keel::hooks::HookOutcome {
                decision: Some(keel::hooks::PermissionDecision::Deny),
                decision_reason: Some("Oslo is out of scope".into()),
                ..Default::default()
            },
            _ => keel::hooks::HookOutcome::default(),
        })
    }
}

#[tokio::test]
async fn an_in_process_hook_can_deny_a_call() {
    let ws = common::workspace("http://127.0.0.1:9/v1", &["get_weather"], "");
    let tool = RecordingTool::weather();
    let calls = tool.calls.clone();
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .model_provider("mock", Arc::new(WeatherModel))
        .tool(Arc::new(tool))
        .hook(Arc::new(NoOslo))
        .build()
        .unwrap();

    let (response, _) = common::run(&runtime, "Weather in Oslo?").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
    assert!(
        response
            .output
            .as_deref()
            .unwrap()
            .contains("Oslo is out of scope")
    );
    let events = common::stored(&runtime, &response).await;
    assert!(
        events
            .iter()
            .any(|e| e.type_name() == "runtime.hook.completed")
    );
}

/// Answers with text in two reads: `Hel` and `lo, ` arrive together, `world.` one poll later.
struct TwoReads;

/// Model events, with `None` standing for a read that is not there yet (one `Pending`).
struct Reads(std::collections::VecDeque<Option<ModelEvent>>);

impl futures_core::Stream for Reads {
    type Item = Result<ModelEvent, ModelError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        match self.0.pop_front() {
            Some(None) => {
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
            Some(Some(event)) => std::task::Poll::Ready(Some(Ok(event))),
            None => std::task::Poll::Ready(None),
        }
    }
}

#[async_trait]
impl ModelProvider for TwoReads {
    fn provider_name(&self) -> &str {
        "test"
    }

    fn model_name(&self) -> &str {
        "two-reads"
    }

    async fn stream(&self, _request: ModelRequest) -> Result<ModelStream, ModelError> {
        let text = |t: &str| Some(ModelEvent::TextDelta { text: t.into() });
        Ok(Box::pin(Reads(
            [
                text("Hel"),
                text("lo, "),
                None,
                text("world."),
                Some(ModelEvent::Stop {
                    reason: ModelStopReason::Stop,
                }),
            ]
            .into(),
        )))
    }
}

#[tokio::test]
async fn text_deltas_that_arrive_together_are_one_event() {
    let ws = common::workspace("http://127.0.0.1:9/v1", &[], "");
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .model_provider("mock", Arc::new(TwoReads))
        .build()
        .unwrap();

    let (response, live) = common::run(&runtime, "Greet").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(response.output.as_deref(), Some("Hello, world."));
    let deltas = |events: &[keel::Event]| -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match &e.payload {
                keel::EventPayload::Adapter {
                    event: keel::AdapterEvent::OutputDelta { text, .. },
                } => Some(text.clone()),
                _ => None,
            })
            .collect()
    };
    let stored = common::stored(&runtime, &response).await;
    assert_eq!(deltas(&stored), ["Hello, ", "world."]);
    assert_eq!(deltas(&live), ["Hello, ", "world."]);
}
