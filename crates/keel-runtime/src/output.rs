//! Structured output (`output: {schema}` on an agent): what the prompt asks for, how a final
//! answer is read as JSON, and what the model is told when it does not match. Shared by the
//! agent loop and by rebuilding a run's conversation from its log (a re-ask is not stored as
//! a message: it is derived from `runtime.output.rejected` the same way both times).

use keel_types::Issue;
use serde_json::Value;

/// The instruction appended to the agent's instructions.
pub fn instruction(schema: &Value) -> String {
    format!(
        "Your final answer must be a single JSON value, with no other text, that is valid \
         against this JSON Schema:\n{schema}"
    )
}

/// The answer as JSON: the whole text, or the inside of one fenced code block.
pub fn parse(text: &str) -> Result<Value, Issue> {
    let trimmed = text.trim();
    let inner = trimmed
        .strip_prefix("```")
        .map(|rest| rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric()))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(trimmed);
    serde_json::from_str(inner.trim()).map_err(|error| Issue {
        path: String::new(),
        expected: "a JSON value".into(),
        found: keel_tools::gateway::quote(trimmed).into_owned(),
        message: format!("the answer is not JSON: {error}"),
    })
}

/// What the model is told after an answer that did not match.
pub fn reask(issues: &[Issue]) -> String {
    let mut text = String::from("Your answer does not match the required JSON Schema. Issues:\n");
    for issue in issues {
        let at = match issue.path.is_empty() {
            true => "the answer".to_owned(),
            false => format!("`{}`", issue.path),
        };
        text.push_str(&format!("- {at}: {}\n", issue.message));
    }
    text.push_str("Answer again with only the corrected JSON value.");
    text
}

/// The answer's value, or what is wrong with it.
pub fn check(schema: &Value, text: &str) -> Result<Value, Vec<Issue>> {
    let value = parse(text).map_err(|issue| vec![issue])?;
    let issues = keel_tools::gateway::schema_issues(schema, &value);
    match issues.is_empty() {
        true => Ok(value),
        false => Err(issues),
    }
}

/// Where `value` first fails `schema`, as ` at `/path`: message` (empty path: `: message`);
/// `None` when it is valid.
pub fn mismatch(schema: &Value, value: &Value) -> Option<String> {
    let issues = keel_tools::gateway::schema_issues(schema, value);
    let first = issues.first()?;
    Some(match first.path.is_empty() {
        true => format!(": {}", first.message),
        false => format!(" at `{}`: {}", first.path, first.message),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_fenced_or_bare_answer_is_read_and_checked() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        assert_eq!(
            check(&schema, "```json\n{\"n\": 2}\n```").unwrap(),
            json!({"n": 2})
        );
        assert_eq!(check(&schema, " {\"n\": 3} ").unwrap(), json!({"n": 3}));
        let issues = check(&schema, "{\"n\": \"two\"}").unwrap_err();
        assert_eq!(issues[0].path, "/n");
        assert!(reask(&issues).contains("`/n`"));
        let not_json = check(&schema, "n is two").unwrap_err();
        assert!(not_json[0].message.starts_with("the answer is not JSON"));
    }
}
