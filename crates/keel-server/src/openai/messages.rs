//! From the client's chat messages to a Keel request: the last message (a user message) is
//! the run's input, the ones before it its history — system/developer, user, assistant (with
//! tool calls) and tool messages, content as a string or text parts.

use keel::{Message, ToolCall};

use super::wire::{ChatMessage, Content};
use crate::ApiError;

/// Maps the client's messages: the last must be a user message (the run's input); the ones
/// before it become the run's history (unless a session supplies the history).
pub(super) fn map_messages(
    messages: &[ChatMessage],
    with_session: bool,
) -> Result<(String, Vec<Message>), ApiError> {
    let Some((last, earlier)) = messages.split_last() else {
        return Err(bad_message("`messages` must be a non-empty array".into()));
    };
    let last_index = earlier.len();
    if last.role != "user" {
        return Err(bad_message(format!(
            "the last message (messages[{last_index}]) must have role `user`, not `{}`: Keel runs the workspace's tools itself and takes no tool results from clients",
            last.role
        )));
    }
    let input = match &last.content {
        Some(content) => content_text(content, last_index)?,
        None => String::new(),
    };
    if input.trim().is_empty() {
        return Err(bad_message(format!(
            "messages[{last_index}] (the user message) has no text"
        )));
    }
    if with_session {
        return Ok((input, Vec::new()));
    }
    let mut history = Vec::with_capacity(earlier.len());
    for (index, message) in earlier.iter().enumerate() {
        let text = match &message.content {
            Some(content) => content_text(content, index)?,
            None => String::new(),
        };
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
        let mapped = history_message(index, &message.role, text, calls, call_id, "tool_call_id")
            .map_err(bad_message)?;
        history.push(mapped);
    }
    Ok((input, history))
}

/// One earlier message of a client's conversation, by its role: `system`/`developer`, `user`,
/// `assistant` (with its tool calls), `tool` (the result of call `call_id`; `call_field` is
/// that field's name in the client's protocol, for the error). `index` names it in errors.
pub(crate) fn history_message(
    index: usize,
    role: &str,
    text: String,
    calls: Vec<ToolCall>,
    call_id: Option<&str>,
    call_field: &str,
) -> Result<Message, String> {
    Ok(match role {
        "system" | "developer" => Message::system(text),
        "user" => Message::user(text),
        "assistant" => Message::assistant(text, calls),
        "tool" => {
            let Some(call_id) = call_id else {
                return Err(format!(
                    "messages[{index}] has role `tool` but no `{call_field}`"
                ));
            };
            Message::tool_result(call_id.to_owned(), text)
        }
        other => {
            return Err(format!(
                "messages[{index}] has unsupported role `{other}` (system, developer, user, assistant, tool)"
            ));
        }
    })
}

/// The text of a message's content; `index` names the message in errors.
fn content_text(content: &Content, index: usize) -> Result<String, ApiError> {
    match content {
        Content::Text(text) => Ok(text.clone()),
        Content::Parts(parts) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (i, part) in parts.iter().enumerate() {
                match (part.kind.as_str(), &part.text) {
                    ("text", Some(text)) => texts.push(text.as_str()),
                    ("text", None) => {
                        return Err(bad_message(format!(
                            "messages[{index}].content[{i}] is a text part without `text`"
                        )));
                    }
                    (kind, _) => {
                        return Err(bad_message(format!(
                            "messages[{index}].content[{i}] is a `{kind}` part; only `text` parts are supported"
                        )));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
    }
}

fn bad_message(message: String) -> ApiError {
    ApiError::BadRequest {
        message,
        param: Some("messages"),
    }
}
