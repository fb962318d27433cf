//! How the server answers, in one place: a run's outcome, a record, and each kind of
//! [`BackendError`] as MCP puts them on the wire.
//!
//! | what                                   | MCP answer                                         |
//! |----------------------------------------|----------------------------------------------------|
//! | a run that completed                   | result: its output as text; `structuredContent` `{requestId, status, output}` |
//! | a run that failed, was denied, blocked or cancelled | result with `isError: true`: the reason as text; `structuredContent` `{requestId, status, error}` |
//! | a record or a list (tasks, runs, events, approvals) | result: `structuredContent` and the same JSON as text |
//! | [`BackendError::Failed`]               | result with `isError: true` and the message        |
//! | [`BackendError::InvalidParams`], an unknown tool, arguments that do not parse | JSON-RPC error `-32602` (invalid params) |
//! | [`BackendError::Internal`]             | JSON-RPC error `-32603` (internal error)           |

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::{Value, json};

use super::backend::{BackendError, RunOutcome};

/// A run's end as a tool result.
pub(crate) fn outcome(run: RunOutcome) -> CallToolResult {
    let request_id = run.request_id.as_str().to_owned();
    let status = run.status.as_str();
    match run.error {
        None if run.status == keel_types::RunStatus::Completed => {
            let output = run.output.unwrap_or_default();
            let mut result = CallToolResult::success(vec![ContentBlock::text(output.clone())]);
            result.structured_content = Some(json!({
                "requestId": request_id,
                "status": status,
                "output": output,
            }));
            result
        }
        error => {
            let reason = error.as_ref().map_or_else(
                || format!("the run ended {status}"),
                |e| reason_text(&e.message),
            );
            let mut result = CallToolResult::error(vec![ContentBlock::text(reason)]);
            result.structured_content = Some(json!({
                "requestId": request_id,
                "status": status,
                "error": error,
            }));
            result
        }
    }
}

/// A refused call's message as a person reads it: Keel records a refusal as
/// `{"error": "tool call denied by policy (…)", "reason": "…"}`; that becomes
/// `tool call denied by policy (…): …`; a blocked call's `{"error": …, "issues": [{message}…]}`
/// becomes `tool call blocked: …: <each issue's message>`. Any other message stays as it is.
fn reason_text(message: &str) -> String {
    let Ok(Value::Object(refusal)) = serde_json::from_str::<Value>(message) else {
        return message.to_owned();
    };
    let mut text = match (refusal.get("error"), refusal.get("reason")) {
        (Some(Value::String(what)), Some(Value::String(why))) => format!("{what}: {why}"),
        (Some(Value::String(what)), _) => what.clone(),
        _ => return message.to_owned(),
    };
    // A blocked call says what blocked it in its issues: each one's message goes with it.
    if let Some(Value::Array(issues)) = refusal.get("issues") {
        let messages: Vec<&str> = issues
            .iter()
            .filter_map(|issue| issue.get("message").and_then(Value::as_str))
            .filter(|m| !m.is_empty())
            .collect();
        if !messages.is_empty() {
            text.push_str(": ");
            text.push_str(&messages.join("; "));
        }
    }
    text
}

/// A record or a page of them as a tool result: `structuredContent` and the same JSON as
/// text.
pub(crate) fn record(value: &impl Serialize) -> Result<CallToolResult, ErrorData> {
    let value = serde_json::to_value(value)
        .map_err(|e| ErrorData::internal_error(format!("cannot encode the answer: {e}"), None))?;
    Ok(CallToolResult::structured(value))
}

/// A backend's refusal: a tool error the caller reads, or a JSON-RPC error.
pub(crate) fn refused(error: BackendError) -> Result<CallToolResult, ErrorData> {
    match error {
        BackendError::Failed(message) => {
            Ok(CallToolResult::error(vec![ContentBlock::text(message)]))
        }
        BackendError::InvalidParams(message) => Err(ErrorData::invalid_params(message, None)),
        BackendError::Internal(message) => Err(ErrorData::internal_error(message, None)),
    }
}

/// Arguments that do not fit a tool's schema.
pub(crate) fn invalid_arguments(tool: &str, error: impl std::fmt::Display) -> ErrorData {
    ErrorData::invalid_params(format!("invalid arguments for `{tool}`: {error}"), None)
}

/// A name the server does not list.
pub(crate) fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown tool `{name}`"), None)
}

#[cfg(test)]
mod tests {
    use keel_types::{ErrorCode, ErrorInfo, RequestId, RunStatus};

    use super::*;

    fn run(status: RunStatus, output: Option<&str>, error: Option<ErrorInfo>) -> RunOutcome {
        RunOutcome {
            request_id: RequestId::from("run_1".to_owned()),
            status,
            output: output.map(str::to_owned),
            error,
        }
    }

    #[test]
    fn a_completed_run_answers_its_output_and_its_request_id() {
        let result = outcome(run(RunStatus::Completed, Some("hello"), None));
        assert_eq!(result.is_error, Some(false));
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some("hello")
        );
        assert_eq!(
            result.structured_content,
            Some(json!({"requestId": "run_1", "status": "completed", "output": "hello"}))
        );
    }

    #[test]
    fn a_refused_call_answers_is_error_with_the_reason() {
        let refusal =
            json!({"error": "tool call denied by policy (policy/p)", "reason": "no shell"});
        let error = ErrorInfo::new(ErrorCode::ToolBlocked, refusal.to_string());
        let result = outcome(run(RunStatus::Failed, None, Some(error)));
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some("tool call denied by policy (policy/p): no shell")
        );
        let structured = result.structured_content.unwrap();
        assert_eq!(structured["error"]["code"], "tool_blocked");
        assert_eq!(structured["requestId"], "run_1");
    }

    #[test]
    fn a_blocked_calls_text_says_what_blocked_it() {
        let blocked = json!({
            "error": "tool call blocked: a path is outside the workspace",
            "tool": "read_file",
            "issues": [{"path": "/path", "expected": "a path inside the workspace",
                        "found": "../x", "message": "`../x` escapes the workspace"}],
        });
        let error = ErrorInfo::new(ErrorCode::ToolBlocked, blocked.to_string());
        let result = outcome(run(RunStatus::Failed, None, Some(error)));
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some(
                "tool call blocked: a path is outside the workspace: `../x` escapes the workspace"
            )
        );
    }

    #[test]
    fn a_plain_message_stays_as_it_is() {
        assert_eq!(reason_text("model unavailable"), "model unavailable");
        assert_eq!(reason_text("[1, 2]"), "[1, 2]");
    }
}
