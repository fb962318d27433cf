//! Embedding Keel: a model provider and a tool written in Rust, injected into the quickstart
//! workspace, with the run's events printed as they happen.
//!
//! ```sh
//! cargo run -p keel --example embedding
//! ```
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use keel::{
    EventPayload, Message, ModelError, ModelEvent, ModelRequest, ModelStopReason, ModelStream,
    Role, ToolSpec, Usage,
};
use keel::{ModelProvider, RequestOptions, Runtime, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};

/// A tiny "model": asks for `list_dir`, then `word_count` on the first markdown file it saw,
/// then answers with what the tool said.
struct PlannerModel;

#[async_trait]
impl ModelProvider for PlannerModel {
    fn provider_name(&self) -> &str {
        "example"
    }

    fn model_name(&self) -> &str {
        "planner"
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let tool_results: Vec<&Message> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .collect();
        let events = match tool_results.as_slice() {
            [] => call("list_dir", json!({ "path": "notes" })),
            [listing] => {
                let file = listing
                    .content
                    .lines()
                    .find(|l| l.ends_with(".md"))
                    .unwrap_or("ideas.md");
                call("word_count", json!({ "path": format!("notes/{file}") }))
            }
            [.., last] => vec![
                ModelEvent::TextDelta {
                    text: format!("word_count says: {}", last.content),
                },
                ModelEvent::Stop {
                    reason: ModelStopReason::Stop,
                },
            ],
        };
        Ok(Box::pin(futures_util::stream::iter(
            events.into_iter().map(Ok),
        )))
    }
}

fn call(name: &str, arguments: Value) -> Vec<ModelEvent> {
    vec![
        ModelEvent::ToolCallStart {
            index: 0,
            id: format!("call_{name}"),
            name: name.into(),
        },
        ModelEvent::ToolCallArgsDelta {
            index: 0,
            delta: arguments.to_string(),
        },
        ModelEvent::Usage {
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                ..Usage::default()
            },
        },
        ModelEvent::Stop {
            reason: ModelStopReason::ToolCalls,
        },
    ]
}

/// `word_count` in Rust, replacing the workspace's Python command tool of the same name.
struct WordCount {
    spec: ToolSpec,
}

#[async_trait]
impl Tool for WordCount {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        // The gateway validated `args` against the schema: `path` is a string.
        let path = args["path"].as_str().unwrap_or_default();
        if path.contains("..") {
            return Err(ToolError::PathEscape(path.into()));
        }
        let text = tokio::fs::read_to_string(ctx.workspace_root.join(path))
            .await
            .map_err(|e| ToolError::Io(format!("cannot read {path}: {e}")))?;
        Ok(ToolOutput::json(
            &json!({ "path": path, "words": text.split_whitespace().count() }),
        ))
    }
}

#[tokio::main]
async fn main() -> Result<(), keel::Error> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart");
    let word_count = WordCount {
        spec: ToolSpec {
            name: "word_count".into(),
            description: "Count the words of a workspace file.".into(),
            parameters: json!({
                "type": "object",
                "properties": { "path": { "type": "string" } },
                "required": ["path"],
                "additionalProperties": false
            }),
        },
    };
    let runtime = Runtime::builder()
        .workspace(&workspace)
        .model_provider("offline", Arc::new(PlannerModel))
        .tool(Arc::new(word_count))
        .build()?;

    let mut run = runtime
        .request(RequestOptions {
            input: "How long are my notes?".into(),
            ..Default::default()
        })
        .await?;
    while let Some(event) = run.next_event().await {
        match &event.payload {
            EventPayload::Narration { text, .. } => println!("  » {text}"),
            _ => println!("{:>3} {}", event.seq, event.type_name()),
        }
    }
    let response = run.wait().await?;
    println!(
        "\n{:?}: {}",
        response.status,
        response.output.unwrap_or_default()
    );
    Ok(())
}
