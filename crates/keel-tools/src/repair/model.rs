//! The optional repair model: what the gateway asks it and how its answer is read.
//!
//! When deterministic repairs leave issues, the gateway asks a model once for corrected
//! arguments ([`request`]): a system message explaining the task, then the tool name, its JSON
//! Schema, the arguments and the remaining issues; no tools, not streamed. [`answer_text`]
//! collects the reply and [`parse_answer`] reads a JSON object from it, tolerating Markdown
//! fences and prose around it. The gateway re-validates whatever comes back; the model can
//! never make a call run with invalid arguments.

use keel_types::{
    Issue, Message, ModelError, ModelEvent, ModelParams, ModelProvider, ModelRequest,
};
use serde_json::Value;

/// What the repair model is told about its job.
pub const SYSTEM_PROMPT: &str = "You repair tool calls for an agent runtime. A model called a \
tool with arguments that do not match the tool's JSON Schema. Reply with the corrected \
arguments: exactly one JSON object, valid against the schema, and nothing else. Fix only what \
the listed issues name and keep every other value as it is. Do not invent values the \
arguments do not imply; if a required value is unknown, leave it out.";

/// The request asking the repair model to fix `arguments` of `tool`.
pub fn request(tool: &str, schema: &Value, arguments: &Value, issues: &[Issue]) -> ModelRequest {
    let issues: Vec<String> = issues
        .iter()
        .map(|i| {
            let path = if i.path.is_empty() { "(root)" } else { &i.path };
            format!("- {path}: expected {}, found {}", i.expected, i.found)
        })
        .collect();
    let user = format!(
        "Tool: {tool}\n\nJSON Schema of the arguments:\n{schema}\n\nArguments:\n{arguments}\n\n\
         Issues:\n{}\n\nReply with the corrected arguments as one JSON object.",
        issues.join("\n")
    );
    ModelRequest {
        messages: vec![Message::system(SYSTEM_PROMPT), Message::user(user)],
        tools: std::sync::Arc::from([]),
        params: ModelParams {
            temperature: Some(0.0),
            ..ModelParams::default()
        },
        stream: false,
        sections: Vec::new(),
        traceparent: None,
    }
}

/// Sends `request` and gathers the answer's text.
pub async fn answer_text(
    model: &dyn ModelProvider,
    request: ModelRequest,
) -> Result<String, ModelError> {
    let mut stream = model.stream(request).await?;
    let mut text = String::new();
    while let Some(event) =
        std::future::poll_fn(|cx| futures_core::Stream::poll_next(stream.as_mut(), cx)).await
    {
        match event? {
            ModelEvent::TextDelta { text: delta } => text.push_str(&delta),
            ModelEvent::Stop { .. } => break,
            _ => {}
        }
    }
    Ok(text)
}

/// The JSON object in a model's answer: the whole text, the inside of a ```` ```json ```` fence,
/// or the span from the first `{` to the last `}`.
pub fn parse_answer(text: &str) -> Option<Value> {
    let candidates = [Some(text.trim()), fenced(text), braced(text)];
    candidates.into_iter().flatten().find_map(|candidate| {
        serde_json::from_str::<Value>(candidate)
            .ok()
            .filter(Value::is_object)
    })
}

fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    // Skip the info string (`json`) up to the end of the fence line.
    let body = &after[after.find('\n')? + 1..];
    let end = body.find("```").unwrap_or(body.len());
    Some(body[..end].trim())
}

fn braced(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    (end > start).then(|| &text[start..=end])
}

#[cfg(test)]
mod tests {
    use keel_types::Role;
    use serde_json::json;

    use super::*;

    #[test]
    fn answers_are_read_plain_fenced_or_embedded() {
        assert_eq!(parse_answer(r#" {"a": 1} "#), Some(json!({ "a": 1 })));
        assert_eq!(
            parse_answer("```json\n{\"a\": 1}\n```"),
            Some(json!({ "a": 1 }))
        );
        assert_eq!(
            parse_answer("Here you go:\n```\n{\"a\": [1]}\n```\nDone."),
            Some(json!({ "a": [1] }))
        );
        assert_eq!(
            parse_answer("The fix is {\"a\": 2}."),
            Some(json!({ "a": 2 }))
        );
    }

    #[test]
    fn non_objects_are_not_answers() {
        assert_eq!(parse_answer("[1, 2]"), None);
        assert_eq!(parse_answer("I cannot fix this."), None);
        assert_eq!(parse_answer("```json\n\"x\"\n```"), None);
        assert_eq!(parse_answer("} {"), None);
    }

    #[test]
    fn request_names_tool_schema_arguments_and_issues() {
        let request = request(
            "get_weather",
            &json!({ "type": "object" }),
            &json!({ "days": "many" }),
            &[Issue {
                path: "/days".into(),
                expected: "integer".into(),
                found: "string \"many\"".into(),
                message: "m".into(),
            }],
        );
        assert!(!request.stream);
        assert!(request.tools.is_empty());
        assert_eq!(request.messages[0].role, Role::System);
        let user = &request.messages[1].content;
        assert!(user.contains("Tool: get_weather"), "{user}");
        assert!(user.contains(r#"{"type":"object"}"#), "{user}");
        assert!(user.contains(r#"{"days":"many"}"#), "{user}");
        assert!(
            user.contains(r#"- /days: expected integer, found string "many""#),
            "{user}"
        );
    }
}
