//! The script file format (see the [module docs](super) and the crate README): serde types,
//! validation, and the `{{input}}` / `{{last_tool_result}}` templates.

use serde::Deserialize;
use serde_json::Value;

use keel_types::ModelStopReason;
use keel_workspace::Duration;

/// A whole script: conversations tried in order against the latest user input.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Script {
    pub conversations: Vec<Conversation>,
}

/// One scripted conversation: the replies of the model rounds of a turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conversation {
    /// A label for error messages.
    #[serde(default)]
    pub name: Option<String>,
    /// A regex searched in the latest user message; absent matches anything.
    #[serde(default, rename = "match")]
    pub pattern: Option<String>,
    /// Step N answers the round that has N assistant messages after the latest user message.
    pub steps: Vec<Step>,
}

/// The reply of one model round.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    /// Answer text (templated).
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls asked for, in order.
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
    /// A failure of this round (every attempt, or the first `times` attempts).
    #[serde(default)]
    pub error: Option<ScriptError>,
    /// Wait before answering (or failing).
    #[serde(default)]
    pub delay: Option<Duration>,
    /// When streaming, send text and arguments in pieces of this many characters.
    #[serde(default)]
    pub chunk_size: Option<usize>,
    /// When streaming, wait this long between two deltas.
    #[serde(default)]
    pub chunk_delay: Option<Duration>,
    /// Override the finish reason (default: `tool_calls` when there are calls, else `stop`).
    #[serde(default)]
    pub finish_reason: Option<ModelStopReason>,
    /// Override the reported token counts (default: characters / 4).
    #[serde(default)]
    pub usage: Option<ScriptUsage>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptToolCall {
    pub name: String,
    /// An object (sent as JSON text), or a raw string sent as is (to script malformed
    /// arguments). Strings inside are templated.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Override the call id (default `call_<step>_<index>`).
    #[serde(default)]
    pub id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Token counts to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A scripted failure.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptError {
    pub kind: ScriptErrorKind,
    /// Message of the error (default: `scripted <kind> error`).
    #[serde(default)]
    pub message: Option<String>,
    /// HTTP status for `server` (500), `auth` (401) and `bad_request` (400).
    #[serde(default)]
    pub status: Option<u16>,
    /// `rate_limited`: the wait the "server" asks for.
    #[serde(default)]
    pub retry_after: Option<Duration>,
    /// Fail only the first `times` attempts of this round, then answer with the step's text
    /// and tool calls. Absent: fail every attempt.
    #[serde(default)]
    pub times: Option<u32>,
    /// Fail after the first delta instead of before the answer starts.
    #[serde(default)]
    pub mid_stream: bool,
}

/// One kind per [`keel_types::ModelError`] variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptErrorKind {
    RateLimited,
    Server,
    Auth,
    BadRequest,
    ContextLength,
    Malformed,
    Timeout,
    Connect,
}

impl ScriptErrorKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::RateLimited => "rate_limited",
            Self::Server => "server",
            Self::Auth => "auth",
            Self::BadRequest => "bad_request",
            Self::ContextLength => "context_length",
            Self::Malformed => "malformed",
            Self::Timeout => "timeout",
            Self::Connect => "connect",
        }
    }
}

/// Values the templates can refer to.
pub(crate) struct TemplateVars<'a> {
    pub input: &'a str,
    pub last_tool_result: &'a str,
}

/// The placeholders a template may use.
const PLACEHOLDERS: &[&str] = &["input", "last_tool_result"];

/// Replaces `{{input}}` and `{{last_tool_result}}` (spaces inside the braces allowed).
pub(crate) fn render(template: &str, vars: &TemplateVars<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else { break };
        out.push_str(&rest[..open]);
        match after[..close].trim() {
            "input" => out.push_str(vars.input),
            "last_tool_result" => out.push_str(vars.last_tool_result),
            _ => out.push_str(&rest[open..open + 2 + close + 2]),
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// Placeholders in `template` that are not known.
fn unknown_placeholders(template: &str) -> Vec<String> {
    let mut unknown = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else { break };
        let name = after[..close].trim();
        if !PLACEHOLDERS.contains(&name) {
            unknown.push(name.to_owned());
        }
        rest = &after[close + 2..];
    }
    unknown
}

/// Every string inside a JSON value, for template checks.
fn strings_in(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings_in(v, out)),
        _ => {}
    }
}

impl Script {
    /// Every problem of the script that serde cannot see, as `conversation N step M: …` lines.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.conversations.is_empty() {
            problems.push("the script has no conversations".into());
        }
        for (c, conversation) in self.conversations.iter().enumerate() {
            let at = format!("conversation {}", c + 1);
            if conversation.steps.is_empty() {
                problems.push(format!("{at}: it has no steps"));
            }
            for (s, step) in conversation.steps.iter().enumerate() {
                step.check(&format!("{at} step {}", s + 1), &mut problems);
            }
        }
        problems
    }
}

impl Step {
    fn check(&self, at: &str, problems: &mut Vec<String>) {
        if self.text.is_none() && self.tool_calls.is_empty() && self.error.is_none() {
            problems.push(format!("{at}: a step needs `text`, `toolCalls` or `error`"));
        }
        if self.chunk_size == Some(0) {
            problems.push(format!("{at}: `chunkSize` must be at least 1"));
        }
        let mut templates: Vec<String> = self.text.iter().cloned().collect();
        for call in &self.tool_calls {
            if call.name.is_empty() {
                problems.push(format!("{at}: a tool call needs a `name`"));
            }
            if !matches!(call.arguments, Value::Object(_) | Value::String(_)) {
                problems.push(format!(
                    "{at}: the arguments of `{}` must be an object or a string",
                    call.name
                ));
            }
            strings_in(&call.arguments, &mut templates);
        }
        for name in templates.iter().flat_map(|t| unknown_placeholders(t)) {
            problems.push(format!(
                "{at}: unknown placeholder `{{{{{name}}}}}` (known: {{{{input}}}}, {{{{last_tool_result}}}})"
            ));
        }
        if let Some(error) = &self.error
            && let Some(status) = error.status
        {
            let valid = match error.kind {
                ScriptErrorKind::Server => (500..=599).contains(&status),
                ScriptErrorKind::Auth => status == 401 || status == 403,
                ScriptErrorKind::BadRequest => (400..=499).contains(&status),
                _ => false,
            };
            if !valid {
                problems.push(format!(
                    "{at}: status {status} does not fit an error of kind `{}`",
                    error.kind.as_str()
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_replaced_and_unknown_ones_kept() {
        let vars = TemplateVars {
            input: "hi",
            last_tool_result: "42",
        };
        assert_eq!(
            render("a {{input}} b {{ last_tool_result }} {{other}} {{", &vars),
            "a hi b 42 {{other}} {{"
        );
    }

    #[test]
    fn unknown_placeholders_are_found() {
        assert_eq!(unknown_placeholders("{{input}} {{ nope }}"), ["nope"]);
    }
}
