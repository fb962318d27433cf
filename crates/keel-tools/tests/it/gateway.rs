//! The gateway's guard → repair → block pipeline against fake tools and a fake repair model.
//!
//! `corpus` is the snapshot of what the gateway does with 100 malformed (and a few valid) calls,
//! `bounds` that a blocked call's message and record stay small,
//! `props` the property that a tool only ever runs with schema-valid arguments,
//! `repair_model` the optional model repair. The fakes below record what each tool received.

mod bounds;
mod corpus;
mod props;
mod repair_model;
mod specs;
mod transitions;

use std::collections::VecDeque;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use keel_tools::gateway::{Gateway, Guarded};
use keel_types::{
    Issue, ModelError, ModelEvent, ModelProvider, ModelRequest, ModelStopReason, ModelStream,
    Repair, RepairKind, Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use keel_workspace::GatewayMode;
use serde_json::{Value, json};

/// A tool that records the arguments of every call it runs.
pub(crate) struct Recorder {
    spec: ToolSpec,
    /// Blocks `..` and absolute paths in its `path` argument, like a file tool.
    contains_paths: bool,
    pub calls: Arc<Mutex<Vec<Value>>>,
}

impl Recorder {
    pub(crate) fn new(name: &str, parameters: Value) -> Self {
        Self {
            spec: ToolSpec {
                name: name.into(),
                description: format!("fake {name}"),
                parameters,
            },
            contains_paths: false,
            calls: Arc::default(),
        }
    }

    /// The same tool with a semantic check that rejects paths leaving the workspace.
    pub(crate) fn with_path_check(mut self) -> Self {
        self.contains_paths = true;
        self
    }
}

#[async_trait]
impl Tool for Recorder {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// A tool's own repair: a path tool drops a leading `./` (a model habit), recorded.
    fn repair(&self, _ctx: &ToolContext, args: &mut Value) -> Vec<Repair> {
        let Some(slot) = args.get_mut("path").filter(|_| self.contains_paths) else {
            return Vec::new();
        };
        let Some(short) = slot.as_str().and_then(|p| p.strip_prefix("./")) else {
            return Vec::new();
        };
        let to = Value::String(short.to_owned());
        let from = std::mem::replace(slot, to.clone());
        vec![Repair {
            path: "/path".into(),
            kind: RepairKind::ToolCheck,
            from,
            to,
        }]
    }

    fn check(&self, _ctx: &ToolContext, args: &Value) -> Vec<Issue> {
        let Some(path) = args.get("path").and_then(Value::as_str) else {
            return Vec::new();
        };
        let escapes = path.starts_with('/') || path.split(['/', '\\']).any(|part| part == "..");
        if !self.contains_paths || !escapes {
            return Vec::new();
        }
        vec![Issue {
            path: "/path".into(),
            expected: "a relative path inside the workspace".into(),
            found: path.into(),
            message: format!("path `{path}` leaves the workspace"),
        }]
    }

    async fn call(&self, _: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        self.calls.lock().unwrap().push(args.clone());
        Ok(ToolOutput::json(&args))
    }
}

/// `get_weather`: strings, an integer with bounds, an enum with a default, a boolean.
pub(crate) fn weather_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": { "type": "string", "minLength": 1 },
            "days": { "type": "integer", "minimum": 1, "maximum": 14 },
            "unit": { "enum": ["celsius", "fahrenheit"], "default": "celsius" },
            "include_hourly": { "type": "boolean" }
        },
        "required": ["city"],
        "additionalProperties": false
    })
}

/// `search_docs`: an array of strings, a required integer with a default, a nested object.
pub(crate) fn search_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": { "type": "string" },
            "tags": { "type": "array", "items": { "type": "string" }, "maxItems": 5 },
            "limit": { "type": "integer", "minimum": 1, "default": 10 },
            "sort": { "type": "string", "enum": ["relevance", "date"], "default": "relevance" },
            "filters": {
                "type": "object",
                "properties": {
                    "lang": { "type": "string", "enum": ["en", "fr", "de"] },
                    "min_score": { "type": "number", "minimum": 0, "maximum": 1 }
                },
                "additionalProperties": false
            }
        },
        "required": ["query", "limit"],
        "additionalProperties": false
    })
}

/// `create_event`: an array of objects, a `$ref` into `$defs`, a type list.
pub(crate) fn event_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "title": { "type": "string" },
            "when": { "$ref": "#/$defs/slot" },
            "attendees": { "type": "array", "items": { "$ref": "#/$defs/attendee" } },
            "priority": { "type": ["integer", "null"], "minimum": 0 }
        },
        "required": ["title", "when"],
        "additionalProperties": false,
        "$defs": {
            "slot": {
                "type": "object",
                "properties": {
                    "start": { "type": "string" },
                    "duration_minutes": { "type": "integer", "minimum": 1 }
                },
                "required": ["start"],
                "additionalProperties": false
            },
            "attendee": {
                "type": "object",
                "properties": {
                    "email": { "type": "string" },
                    "optional": { "type": "boolean" }
                },
                "required": ["email"],
                "additionalProperties": false
            }
        }
    })
}

/// `read_notes`: a path a semantic check keeps inside the workspace.
pub(crate) fn notes_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": { "type": "string" },
            "max_lines": { "type": "integer", "minimum": 1 }
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

/// `set_flag` / `get_flag`: booleans and numbers.
pub(crate) fn flag_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": { "type": "string" },
            "enabled": { "type": "boolean" },
            "weight": { "type": "number" }
        },
        "required": ["name"],
        "additionalProperties": false
    })
}

/// The fake tools, keyed by name. `delete_everything` is registered but in no inventory.
pub(crate) fn tools() -> Vec<Arc<Recorder>> {
    vec![
        Arc::new(Recorder::new("get_weather", weather_schema())),
        Arc::new(Recorder::new("search_docs", search_schema())),
        Arc::new(Recorder::new("create_event", event_schema())),
        Arc::new(Recorder::new("read_notes", notes_schema()).with_path_check()),
        Arc::new(Recorder::new("set_flag", flag_schema())),
        Arc::new(Recorder::new("get_flag", flag_schema())),
        Arc::new(Recorder::new(
            "delete_everything",
            json!({ "type": "object" }),
        )),
    ]
}

/// The agent's tools: every fake but `delete_everything`.
pub(crate) fn inventory() -> Vec<String> {
    [
        "get_weather",
        "search_docs",
        "create_event",
        "read_notes",
        "set_flag",
        "get_flag",
    ]
    .map(String::from)
    .to_vec()
}

/// A gateway over `tools`.
pub(crate) fn gateway_of(tools: &[Arc<Recorder>]) -> Gateway {
    Gateway::new(tools.iter().map(|t| t.clone() as Arc<dyn Tool>)).unwrap()
}

/// A tool call with raw argument text.
pub(crate) fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// Guards `call` in `mode` against the standard inventory.
pub(crate) async fn guard(gateway: &Gateway, call: &ToolCall, mode: GatewayMode) -> Guarded {
    gateway
        .guard(
            &crate::ctx(Path::new(".")),
            &inventory(),
            call,
            &move |_| mode,
        )
        .await
}

/// One scripted answer of the fake repair model.
#[derive(Clone)]
pub(crate) enum Answer {
    Text(String),
    Fail(ModelError),
    /// Never answers within any reasonable timeout.
    Hang,
}

/// An in-process model that answers from a script and records what it was asked.
#[derive(Default)]
pub(crate) struct FakeModel {
    answers: Mutex<VecDeque<Answer>>,
    pub requests: Mutex<Vec<ModelRequest>>,
}

impl FakeModel {
    pub(crate) fn answering(answers: impl IntoIterator<Item = Answer>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into_iter().collect()),
            requests: Mutex::default(),
        })
    }

    pub(crate) fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

#[async_trait]
impl ModelProvider for FakeModel {
    fn provider_name(&self) -> &str {
        "fake"
    }

    fn model_name(&self) -> &str {
        "fake-repair"
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        self.requests.lock().unwrap().push(request);
        let answer = self.answers.lock().unwrap().pop_front();
        match answer {
            Some(Answer::Text(text)) => {
                // Split the text so the gateway has to assemble deltas.
                let mid = text
                    .char_indices()
                    .nth(text.chars().count() / 2)
                    .map_or(0, |(i, _)| i);
                let events = vec![
                    Ok(ModelEvent::TextDelta {
                        text: text[..mid].to_owned(),
                    }),
                    Ok(ModelEvent::TextDelta {
                        text: text[mid..].to_owned(),
                    }),
                    Ok(ModelEvent::Stop {
                        reason: ModelStopReason::Stop,
                    }),
                ];
                Ok(Box::pin(Events(events.into())))
            }
            Some(Answer::Fail(error)) => Err(error),
            Some(Answer::Hang) => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Err(ModelError::Timeout("hung".into()))
            }
            None => Err(ModelError::Server {
                status: 500,
                message: "no scripted answer".into(),
            }),
        }
    }
}

/// A ready-made stream of model events.
struct Events(VecDeque<Result<ModelEvent, ModelError>>);

impl futures_core::Stream for Events {
    type Item = Result<ModelEvent, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.0.pop_front())
    }
}
