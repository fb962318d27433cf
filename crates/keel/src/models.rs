//! `keel models check`: one tiny request to each model of the workspace — whether it is
//! reachable and accepts the credentials, how long it takes, and whether streaming and tool
//! calls work — before a run finds out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use keel_types::{Message, ModelEvent, ModelParams, ModelRequest, ToolSpec};

use crate::Runtime;

/// What checking one model found.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCheck {
    /// The `Model` document.
    pub model: String,
    pub provider: String,
    /// It answered a streamed request with a tool offered.
    pub ok: bool,
    /// Until the answer was complete, when it answered.
    pub latency_ms: Option<u64>,
    /// It answered as a stream of deltas (SSE), when it answered.
    pub streamed: Option<bool>,
    /// It called the offered tool when asked to (a model may answer in text instead).
    pub called_tool: Option<bool>,
    /// Why it failed: the provider could not be built, or the request failed (classified:
    /// unreachable, timed out, rejected credentials, …).
    pub error: Option<String>,
}

/// The longest a model gets to answer the check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

impl Runtime {
    /// Sends one tiny streamed request to each model of the workspace, with one tool it is
    /// asked to call, and reports what happened, by model name.
    pub async fn check_models(&self) -> Vec<ModelCheck> {
        let workspace = self.workspace();
        let mut names: Vec<&String> = workspace.models.keys().collect();
        names.sort();
        let mut checks = Vec::with_capacity(names.len());
        for name in names {
            let provider = workspace.models[name].provider;
            let provider_name = serde_json::to_value(provider)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let mut check = ModelCheck {
                model: name.clone(),
                provider: provider_name,
                ok: false,
                latency_ms: None,
                streamed: None,
                called_tool: None,
                error: None,
            };
            match keel_models::provider_for(&workspace, name) {
                Err(error) => check.error = Some(error.to_string()),
                Ok(provider) => ask(provider, &mut check).await,
            }
            checks.push(check);
        }
        checks
    }
}

/// One streamed round asking the model to call `ping`.
async fn ask(provider: Arc<dyn keel_types::ModelProvider>, check: &mut ModelCheck) {
    let request = ModelRequest {
        messages: vec![
            Message::system("You are checked by Keel: call the `ping` tool once."),
            Message::user("Call the ping tool."),
        ],
        tools: Arc::from([ToolSpec {
            name: "ping".into(),
            description: "Answers pong.".into(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
        }]),
        params: ModelParams {
            max_tokens: Some(32),
            ..ModelParams::default()
        },
        stream: true,
        sections: Vec::new(),
        traceparent: None,
    };
    let started = Instant::now();
    let round = async {
        let mut stream = provider.stream(request).await?;
        let (mut events, mut called) = (0, false);
        while let Some(event) = stream.next().await {
            events += 1;
            called |= matches!(event?, ModelEvent::ToolCallStart { .. });
        }
        Ok::<_, keel_types::ModelError>((events, called))
    };
    match tokio::time::timeout(CHECK_TIMEOUT, round).await {
        Err(_) => check.error = Some(format!("no complete answer within {CHECK_TIMEOUT:?}")),
        Ok(Err(error)) => check.error = Some(error.to_string()),
        Ok(Ok((events, called))) => {
            check.ok = true;
            check.latency_ms =
                Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
            // A whole answer comes as one text delta or one call, a usage and a stop.
            check.streamed = Some(events > 3);
            check.called_tool = Some(called);
        }
    }
}
