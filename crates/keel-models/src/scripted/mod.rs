//! The `scripted` provider: a deterministic model driven by a script file, for offline demos
//! and workspace tests.
//!
//! ```yaml
//! conversations:               # tried in order; the first whose `match` is found wins
//!   - name: weather            # optional, for error messages
//!     match: "(?i)weather"     # regex searched in the latest user message; omit = any input
//!     steps:                   # step N answers the round with N assistant messages after
//!                              # the latest user message (0 = first round of the turn)
//!       - toolCalls:
//!           - name: get_weather
//!             arguments: { city: Paris }   # an object, or a raw string (malformed on purpose)
//!       - text: "It is sunny. Tool said: {{last_tool_result}}"
//!   - steps:                   # fallback
//!       - text: "Hello! You said: {{input}}"
//!         delay: 50ms          # wait before answering
//!         chunkSize: 8         # when streaming, deltas of 8 characters
//!         chunkDelay: 10ms     # and a pause between deltas
//!       - error: { kind: server, status: 503, times: 2 }  # first 2 attempts fail, then…
//!         text: "recovered"                             # …the step answers normally
//! ```
//!
//! The reply is a pure function of the request's messages, so one provider serves any number
//! of concurrent runs. The only state is an attempt counter for `error.times`, keyed by a
//! fingerprint of the request (a retry re-sends the same messages); it is cleared when the
//! round finally succeeds. Two runs sending identical messages at the same moment share it.
//!
//! Tool call ids are `call_<step>_<index>` (step 1-based, index 0-based). Usage is reported as
//! characters / 4, rounded up. Start reading at [`ScriptedProvider`].

mod format;

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream;
use keel_types::{
    Message, ModelError, ModelEvent, ModelProvider, ModelRequest, ModelStopReason, ModelStream,
    Role, Usage,
};
use regex::Regex;
use serde_json::Value;

pub use format::{
    Conversation, Script, ScriptError, ScriptErrorKind, ScriptToolCall, ScriptUsage, Step,
};
use format::{TemplateVars, render};

use crate::ProviderError;

/// Attempt counters kept at most; beyond that they are reset (only `times` is affected).
const MAX_COUNTERS: usize = 10_000;

/// A deterministic model answering from a [`Script`].
#[derive(Debug)]
pub struct ScriptedProvider {
    model: String,
    conversations: Vec<Compiled>,
    attempts: Mutex<HashMap<u64, u32>>,
}

#[derive(Debug)]
struct Compiled {
    pattern: Option<Regex>,
    steps: Vec<Step>,
}

impl ScriptedProvider {
    /// Reads and checks a script file (`.yaml`, `.yml` or `.json`).
    pub fn from_file(path: &Path, model: impl Into<String>) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|e| ProviderError::ScriptRead {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| ProviderError::InvalidScript {
            origin: path.display().to_string(),
            message,
        };
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let script: Script = match extension {
            "json" => serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?,
            "yaml" | "yml" => {
                let value = keel_workspace::parse_yaml_value(&text, path)
                    .map_err(|d| invalid(d.to_string()))?;
                serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?
            }
            _ => {
                return Err(invalid(
                    "unknown script format: use a .yaml, .yml or .json file".into(),
                ));
            }
        };
        Self::compile(script, model.into()).map_err(invalid)
    }

    /// Checks a script built in code or parsed elsewhere.
    pub fn new(script: Script, model: impl Into<String>) -> Result<Self, ProviderError> {
        Self::compile(script, model.into()).map_err(|message| ProviderError::InvalidScript {
            origin: "(inline script)".into(),
            message,
        })
    }

    fn compile(script: Script, model: String) -> Result<Self, String> {
        let mut problems = script.problems();
        let mut conversations = Vec::with_capacity(script.conversations.len());
        for (index, conversation) in script.conversations.into_iter().enumerate() {
            let pattern = match conversation.pattern.as_deref().map(Regex::new) {
                None => None,
                Some(Ok(regex)) => Some(regex),
                Some(Err(e)) => {
                    problems.push(format!(
                        "conversation {}: invalid `match` regex: {e}",
                        index + 1
                    ));
                    None
                }
            };
            conversations.push(Compiled {
                pattern,
                steps: conversation.steps,
            });
        }
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        Ok(Self {
            model,
            conversations,
            attempts: Mutex::new(HashMap::new()),
        })
    }

    /// Which conversation and step answer these messages.
    fn select(&self, messages: &[Message]) -> Result<(usize, usize), ModelError> {
        let last_user = messages.iter().rposition(|m| m.role == Role::User);
        let input = last_user.map_or("", |i| messages[i].content.as_str());
        let after_user = last_user.map_or(messages, |i| &messages[i + 1..]);
        let step = after_user
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let conversation = self
            .conversations
            .iter()
            .position(|c| c.pattern.as_ref().is_none_or(|p| p.is_match(input)))
            .ok_or_else(|| ModelError::BadRequest {
                status: 400,
                message: format!(
                    "no conversation of the script matches the input `{}`",
                    crate::truncate(input, 80)
                ),
            })?;
        let steps = self.conversations[conversation].steps.len();
        if step >= steps {
            return Err(ModelError::BadRequest {
                status: 400,
                message: format!(
                    "script has no step {} for conversation {} (it has {steps})",
                    step + 1,
                    conversation + 1
                ),
            });
        }
        Ok((conversation, step))
    }

    /// Counts this attempt; true while the step's first `times` attempts are not used up.
    fn should_fail(&self, error: &ScriptError, fingerprint: u64) -> bool {
        let Some(times) = error.times else {
            return true;
        };
        let mut attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        if attempts.len() >= MAX_COUNTERS {
            attempts.clear();
        }
        let count = attempts.entry(fingerprint).or_insert(0);
        *count += 1;
        if *count <= times {
            true
        } else {
            attempts.remove(&fingerprint);
            false
        }
    }
}

#[async_trait]
impl ModelProvider for ScriptedProvider {
    fn provider_name(&self) -> &str {
        "scripted"
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let (conversation, step_index) = self.select(&request.messages)?;
        let step = &self.conversations[conversation].steps[step_index];
        if let Some(delay) = step.delay {
            tokio::time::sleep(delay.0).await;
        }
        let failure = match &step.error {
            Some(error) if self.should_fail(error, fingerprint(&request.messages, step_index)) => {
                Some(error)
            }
            _ => None,
        };
        if let Some(error) = failure
            && !error.mid_stream
        {
            return Err(model_error(error));
        }
        let mut items: Vec<Result<ModelEvent, ModelError>> = answer(step, step_index, &request)
            .into_iter()
            .map(Ok)
            .collect();
        if let Some(error) = failure {
            items.truncate(1);
            items.push(Err(model_error(error)));
        }
        let pause = match step.chunk_delay {
            Some(delay) if request.stream => delay.0,
            _ => Duration::ZERO,
        };
        if pause.is_zero() {
            // Each chunk is its own delta, as from a network stream.
            return Ok(keel_types::ports::one_read_at_a_time(items));
        }
        Ok(Box::pin(stream::unfold(
            (items.into_iter(), true),
            move |(mut items, first)| async move {
                let item = items.next()?;
                if !first {
                    tokio::time::sleep(pause).await;
                }
                Some((item, (items, false)))
            },
        )))
    }
}

/// The events of a successful answer.
fn answer(step: &Step, step_index: usize, request: &ModelRequest) -> Vec<ModelEvent> {
    let messages = &request.messages;
    let vars = TemplateVars {
        input: messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map_or("", |m| m.content.as_str()),
        last_tool_result: messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Tool)
            .map_or("", |m| m.content.as_str()),
    };
    let chunk_size = step.chunk_size.filter(|_| request.stream);
    let mut events = Vec::new();
    let mut completion_chars = 0;

    if let Some(template) = &step.text {
        let text = render(template, &vars);
        completion_chars += text.chars().count();
        for piece in pieces(&text, chunk_size) {
            events.push(ModelEvent::TextDelta { text: piece });
        }
    }
    for (index, call) in step.tool_calls.iter().enumerate() {
        let id = call
            .id
            .clone()
            .unwrap_or_else(|| format!("call_{}_{index}", step_index + 1));
        events.push(ModelEvent::ToolCallStart {
            index,
            id,
            name: call.name.clone(),
        });
        let arguments = match &call.arguments {
            Value::String(raw) => render(raw, &vars),
            other => render_strings(other, &vars).to_string(),
        };
        completion_chars += arguments.chars().count();
        for delta in pieces(&arguments, chunk_size) {
            events.push(ModelEvent::ToolCallArgsDelta { index, delta });
        }
    }

    let usage = match step.usage {
        Some(u) => Usage::new(u.prompt_tokens, u.completion_tokens),
        None => {
            let prompt_chars: usize = messages
                .iter()
                .map(|m| {
                    m.content.chars().count()
                        + m.tool_calls
                            .iter()
                            .map(|c| c.name.len() + c.arguments.chars().count())
                            .sum::<usize>()
                })
                .sum();
            let prompt_tokens = prompt_chars.div_ceil(4) as u64;
            let completion_tokens = completion_chars.div_ceil(4) as u64;
            Usage::new(prompt_tokens, completion_tokens)
        }
    };
    events.push(ModelEvent::Usage { usage });
    let reason = step.finish_reason.unwrap_or(if step.tool_calls.is_empty() {
        ModelStopReason::Stop
    } else {
        ModelStopReason::ToolCalls
    });
    events.push(ModelEvent::Stop { reason });
    events
}

/// `text` split into pieces of `size` characters (one piece when `None`; none when empty).
fn pieces(text: &str, size: Option<usize>) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let Some(size) = size.filter(|s| *s > 0) else {
        return vec![text.to_owned()];
    };
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// A copy of `value` with its strings templated.
fn render_strings(value: &Value, vars: &TemplateVars<'_>) -> Value {
    match value {
        Value::String(s) => Value::String(render(s, vars)),
        Value::Array(items) => items.iter().map(|v| render_strings(v, vars)).collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), render_strings(v, vars)))
            .collect(),
        other => other.clone(),
    }
}

/// Identifies one model round of one conversation: the same messages at the same step.
fn fingerprint(messages: &[Message], step: usize) -> u64 {
    let mut hasher = DefaultHasher::new();
    step.hash(&mut hasher);
    for m in messages {
        (m.role as u8).hash(&mut hasher);
        m.content.hash(&mut hasher);
        m.tool_call_id.hash(&mut hasher);
        for call in &m.tool_calls {
            call.id.hash(&mut hasher);
            call.name.hash(&mut hasher);
            call.arguments.hash(&mut hasher);
        }
    }
    hasher.finish()
}

fn model_error(error: &ScriptError) -> ModelError {
    let message = error
        .message
        .clone()
        .unwrap_or_else(|| format!("scripted {} error", error.kind.as_str()));
    match error.kind {
        ScriptErrorKind::RateLimited => ModelError::RateLimited {
            retry_after: error.retry_after.map(|d| d.0),
            message,
        },
        ScriptErrorKind::Server => ModelError::Server {
            status: error.status.unwrap_or(500),
            message,
        },
        ScriptErrorKind::Auth => ModelError::Auth {
            status: error.status.unwrap_or(401),
            message,
        },
        ScriptErrorKind::BadRequest => ModelError::BadRequest {
            status: error.status.unwrap_or(400),
            message,
        },
        ScriptErrorKind::ContextLength => ModelError::ContextLength(message),
        ScriptErrorKind::Malformed => ModelError::MalformedStream(message),
        ScriptErrorKind::Timeout => ModelError::Timeout(message),
        ScriptErrorKind::Connect => ModelError::Connect(message),
    }
}
