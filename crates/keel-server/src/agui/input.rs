//! AG-UI's `RunAgentInput`, read strictly: what Keel honours becomes the run's input,
//! history and metadata; what it cannot honour is refused naming the field.

use std::collections::BTreeMap;

use keel::{ApprovalScope, Message, ToolCall};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::Answer;
use crate::ApiError;

/// The body of `POST /api/agui/{name}`: AG-UI's `RunAgentInput`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RunAgentInput {
    /// The conversation's id; kept as the run's metadata `agui.threadId`.
    pub thread_id: String,
    /// This AG-UI run's id; kept as `agui.runId`, and echoed on `RUN_STARTED`/`RUN_FINISHED`.
    pub run_id: String,
    /// The AG-UI version the client speaks; kept as `agui.protocolVersion`.
    #[serde(default)]
    pub protocol_version: Option<String>,
    /// Kept as `agui.parentRunId`.
    #[serde(default)]
    pub parent_run_id: Option<String>,
    /// Shared state: a workflow's is its run's (sent as `STATE_SNAPSHOT`; what the client
    /// sends back is not read), and an agent has none: it must be empty.
    #[serde(default)]
    pub state: Value,
    /// The conversation: the last message is a user message (the run's input), the ones
    /// before it the run's history. Ignored when `resume` answers interrupts (the run
    /// resumed has its conversation).
    #[serde(default)]
    pub messages: Vec<AguiMessage>,
    /// Client-side tools: not offered (Keel agents use their workspace's tools); must be
    /// empty.
    #[serde(default)]
    #[schemars(length(max = 0))]
    pub tools: Vec<Value>,
    /// Context for the agent: each entry goes before the input as `description: value`.
    #[serde(default)]
    pub context: Vec<ContextEntry>,
    /// Kept, as JSON, as the run's metadata `agui.forwardedProps` (when not empty).
    #[serde(default)]
    pub forwarded_props: Value,
    /// Answers to the interrupts (approvals) the previous run ended with.
    #[serde(default)]
    pub resume: Vec<ResumeEntry>,
}

/// A message of the conversation.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AguiMessage {
    /// `developer`, `system`, `user`, `assistant`, `tool`; `activity` and `reasoning`
    /// messages are the front end's display and are not sent to the model.
    pub role: String,
    /// Text, or content parts (`text` parts only).
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub tool_calls: Vec<AguiToolCall>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct AguiToolCall {
    pub id: String,
    pub function: AguiFunction,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct AguiFunction {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContextEntry {
    pub description: String,
    pub value: String,
}

/// The answer to one interrupt.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ResumeEntry {
    /// The interrupt's id: the approval's.
    pub interrupt_id: String,
    /// `resolved` (decided as `payload` says) or `cancelled` (denied).
    pub status: ResumeStatus,
    /// The decision; a `resolved` answer without one approves once.
    #[serde(default)]
    pub payload: Option<ResumePayload>,
    /// The client's own bookkeeping; not read.
    #[serde(default)]
    #[allow(
        dead_code,
        reason = "accepted so clients may send it; Keel has no use for it"
    )]
    pub metadata: Option<Value>,
}

/// The answer to an approval interrupt (its `responseSchema`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumePayload {
    /// Approve (true, the default) or deny (false) the call.
    #[serde(default)]
    pub approved: Option<bool>,
    /// `session`: calls of the same tool for the rest of the session are approved too.
    #[serde(default)]
    pub scope: Option<ApprovalScope>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ResumeStatus {
    Resolved,
    Cancelled,
}

impl ResumeEntry {
    /// The decision this entry gives.
    pub(super) fn answer(&self) -> Answer {
        let payload = self.payload.as_ref();
        Answer {
            approve: matches!(self.status, ResumeStatus::Resolved)
                && payload.and_then(|p| p.approved).unwrap_or(true),
            scope: payload.and_then(|p| p.scope).unwrap_or_default(),
            reason: payload.and_then(|p| p.reason.clone()),
        }
    }
}

/// What a `RunAgentInput` asks Keel to run.
pub(crate) struct Asked {
    pub thread_id: String,
    pub run_id: String,
    pub input: String,
    pub history: Vec<Message>,
    pub metadata: BTreeMap<String, String>,
}

impl RunAgentInput {
    /// Refuses client-side tools: Keel cannot honour them.
    pub(super) fn check_tools(&self) -> Result<(), ApiError> {
        if let Some(tool) = self.tools.first() {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("?");
            return Err(bad(
                "tools",
                format!(
                    "client-side tools are not offered (`{name}` and {} more): Keel agents call their workspace's tools, governed by its policies; send `tools: []`",
                    self.tools.len() - 1
                ),
            ));
        }
        Ok(())
    }

    /// The run this input asks for; `workflow` says whether `{name}` is a workflow.
    pub(super) fn into_request(self, workflow: bool) -> Result<Asked, ApiError> {
        let state_empty = match &self.state {
            Value::Null => true,
            Value::Object(fields) => fields.is_empty(),
            _ => false,
        };
        if !workflow && !state_empty {
            return Err(bad(
                "state",
                "a Keel agent keeps no shared state with the front end; send `state: {}` (a workflow's state comes as STATE_SNAPSHOT)".into(),
            ));
        }
        let (text, history) = conversation(&self.messages)?;
        let mut input = String::new();
        for entry in &self.context {
            input.push_str(&format!("{}: {}\n", entry.description, entry.value));
        }
        if !input.is_empty() {
            input.push('\n');
        }
        input.push_str(&text);
        let mut metadata = BTreeMap::new();
        metadata.insert("agui.threadId".to_owned(), self.thread_id.clone());
        metadata.insert("agui.runId".to_owned(), self.run_id.clone());
        if let Some(version) = &self.protocol_version {
            metadata.insert("agui.protocolVersion".to_owned(), version.clone());
        }
        if let Some(parent) = &self.parent_run_id {
            metadata.insert("agui.parentRunId".to_owned(), parent.clone());
        }
        let props_empty = match &self.forwarded_props {
            Value::Null => true,
            Value::Object(fields) => fields.is_empty(),
            _ => false,
        };
        if !props_empty {
            metadata.insert(
                "agui.forwardedProps".to_owned(),
                self.forwarded_props.to_string(),
            );
        }
        Ok(Asked {
            thread_id: self.thread_id,
            run_id: self.run_id,
            input,
            history,
            metadata,
        })
    }
}

/// The input (the last message, a user message's text) and the history before it.
fn conversation(messages: &[AguiMessage]) -> Result<(String, Vec<Message>), ApiError> {
    let spoken: Vec<(usize, &AguiMessage)> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| !matches!(m.role.as_str(), "activity" | "reasoning"))
        .collect();
    let Some(((last_index, last), earlier)) = spoken.split_last() else {
        return Err(bad(
            "messages",
            "`messages` must end with a user message (the run's input)".into(),
        ));
    };
    if last.role != "user" {
        return Err(bad(
            "messages",
            format!(
                "the last message (messages[{last_index}]) must have role `user`, not `{}`: Keel runs the workspace's tools itself and takes no tool results from clients",
                last.role
            ),
        ));
    }
    let input = text(last, *last_index)?;
    if input.trim().is_empty() {
        return Err(bad(
            "messages",
            format!("messages[{last_index}] (the user message) has no text"),
        ));
    }
    let mut history = Vec::with_capacity(earlier.len());
    for (index, message) in earlier {
        let content = text(message, *index)?;
        let calls = message
            .tool_calls
            .iter()
            .map(|call| ToolCall {
                id: call.id.clone(),
                name: call.function.name.clone(),
                arguments: call.function.arguments.clone(),
            })
            .collect();
        let call_id = message.tool_call_id.as_deref();
        let mapped = crate::openai::messages::history_message(
            *index,
            &message.role,
            content,
            calls,
            call_id,
            "toolCallId",
        )
        .map_err(|message| bad("messages", message))?;
        history.push(mapped);
    }
    Ok((input, history))
}

/// A message's text: a string, or its `text` parts joined by newlines.
fn text(message: &AguiMessage, index: usize) -> Result<String, ApiError> {
    match &message.content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (i, part) in parts.iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(text))) => texts.push(text.as_str()),
                    (Some("text"), _) => {
                        return Err(bad(
                            "messages",
                            format!("messages[{index}].content[{i}] is a text part without `text`"),
                        ));
                    }
                    (kind, _) => {
                        return Err(bad(
                            "messages",
                            format!(
                                "messages[{index}].content[{i}] is a `{}` part; only `text` parts are supported",
                                kind.unwrap_or("?")
                            ),
                        ));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err(bad(
            "messages",
            format!("messages[{index}].content must be text or an array of content parts"),
        )),
    }
}

fn bad(param: &'static str, message: String) -> ApiError {
    ApiError::BadRequest {
        message,
        param: Some(param),
    }
}
