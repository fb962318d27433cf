//! Shared set-up: a temp workspace whose model points at a [`MockLlm`], and helpers to run a
//! request and read its stored events.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use keel::{Event, RequestOptions, RunResponse, Runtime, Tool, ToolContext, ToolError, ToolOutput};
use keel::{EventPayload, ToolSpec};
use keel_test_support::{OPENAI_MOCK_MODEL, TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

/// Model `mock` (`openai` at `base_url`) and agent `assistant` with `tools`, with
/// `extra_agent_spec` appended to the agent's spec (YAML lines indented by two), and a README.
/// No `Runtime` document: [`builder`] adds the usual one, a test may add its own.
pub(crate) fn agent_and_model(
    base_url: &str,
    tools: &[&str],
    extra_agent_spec: &str,
) -> WorkspaceBuilder {
    WorkspaceBuilder::new()
        .model(
            "mock",
            &format!(
                "{{ provider: openai, baseUrl: \"{base_url}\", model: {OPENAI_MOCK_MODEL}, timeout: 5s }}"
            ),
        )
        .agent(
            "assistant",
            &format!(
                "  model: mock\n  instructions: You are a test agent.\n  tools: [{}]\n{extra_agent_spec}",
                tools.join(", ")
            ),
        )
        .file("README.md", "# Test workspace\nHello from the README.\n")
}

/// [`agent_and_model`] with a runtime whose default agent is `assistant` and whose model
/// retries are fast.
pub(crate) fn builder(base_url: &str, tools: &[&str], extra_agent_spec: &str) -> WorkspaceBuilder {
    agent_and_model(base_url, tools, extra_agent_spec).runtime(FAST_RUNTIME)
}

/// The workspace [`builder`] lays out.
pub(crate) fn workspace(base_url: &str, tools: &[&str], extra_agent_spec: &str) -> TempWorkspace {
    builder(base_url, tools, extra_agent_spec).build()
}

/// The runtime spec of [`builder`]: default agent `assistant`, fast model retries.
const FAST_RUNTIME: &str = "{ defaultAgent: assistant, retry: { model: { maxAttempts: 3, initialBackoff: 10ms, maxBackoff: 40ms } } }";

/// Runs one request to its end, returning the response and every live event.
pub(crate) async fn run(runtime: &Runtime, input: &str) -> (RunResponse, Vec<Event>) {
    let mut handle = runtime
        .request(RequestOptions {
            input: input.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut live = Vec::new();
    while let Some(event) = handle.next_event().await {
        live.push(event);
    }
    (handle.wait().await.unwrap(), live)
}

/// The stored events of a run, read back through the SDK.
pub(crate) async fn stored(runtime: &Runtime, response: &RunResponse) -> Vec<Event> {
    runtime
        .runs()
        .events(&response.request_id, 0)
        .await
        .unwrap()
}

/// Type names of events, in order.
pub(crate) fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::type_name).collect()
}

/// Asserts the stored log is dense from 1, starts with `runtime.request.started`, and ends with
/// exactly one terminal event.
pub(crate) fn assert_well_formed(events: &[Event]) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(
            event.seq,
            i as u64 + 1,
            "seq must be dense: {:?}",
            types(events)
        );
    }
    assert_eq!(
        events.first().map(Event::type_name),
        Some("runtime.request.started")
    );
    let terminal = events.iter().filter(|e| e.payload.is_terminal()).count();
    assert_eq!(
        terminal,
        1,
        "exactly one terminal event: {:?}",
        types(events)
    );
    assert!(events.last().unwrap().payload.is_terminal());
}

/// A Rust tool that records the arguments it is called with.
pub(crate) struct RecordingTool {
    spec: ToolSpec,
    pub calls: Arc<Mutex<Vec<Value>>>,
}

impl RecordingTool {
    /// `get_weather(city: string, required; unit: "c"|"f")`, no other properties.
    pub(crate) fn weather() -> Self {
        Self {
            spec: ToolSpec {
                name: "get_weather".into(),
                description: "Current weather for a city.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "city": { "type": "string" },
                        "unit": { "enum": ["c", "f"] }
                    },
                    "required": ["city"],
                    "additionalProperties": false
                }),
            },
            calls: Arc::default(),
        }
    }
}

#[async_trait]
impl Tool for RecordingTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        self.calls.lock().unwrap().push(args.clone());
        Ok(ToolOutput::json(
            &json!({ "city": args["city"], "sky": "sunny", "celsius": 21 }),
        ))
    }
}

/// The error code of a failed run's terminal event.
pub(crate) fn failure_code(events: &[Event]) -> Option<keel::ErrorCode> {
    events.iter().find_map(|e| match &e.payload {
        EventPayload::RequestFailed { error, .. } => Some(error.code),
        _ => None,
    })
}

/// Waits (up to 60 s, checking every 20 ms) until an approval is pending; returns the newest.
pub(crate) async fn wait_for_pending(runtime: &Runtime) -> keel::ApprovalRecord {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let pending = runtime
            .approvals()
            .list(Some(keel::ApprovalStatus::Pending))
            .await
            .unwrap();
        if let Some(approval) = pending.into_iter().next() {
            return approval;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no approval was requested"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The messages of a recorded model request as `role: content` lines.
pub(crate) fn transcript(messages: &[serde_json::Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap_or_default(),
                m["content"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The first pending approval, once there is one.
pub(crate) async fn pending_approval(runtime: &Runtime) -> keel::ApprovalRecord {
    loop {
        let pending = runtime
            .approvals()
            .list(Some(keel::ApprovalStatus::Pending))
            .await
            .unwrap();
        if let Some(approval) = pending.into_iter().next() {
            return approval;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
