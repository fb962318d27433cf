//! The Messages API request checked the way the Anthropic API checks it, before the facade
//! reads it: [`FIELDS`] lists every top-level field with its JSON type and what Keel does with
//! it (the same rules as the Chat Completions table: nothing a client sends is silently
//! dropped). Messages and their content blocks are checked too (`messages[1].content[0].text`),
//! and read into the run's input and history: the last message, a user turn of text, is the
//! input; the ones before it (with `system` first) are the history, tool use, tool results and
//! thinking blocks included.

use keel::{Message, Thinking, ToolCall};
use keel_workspace::FacadeParam;
use serde_json::{Map, Value};

use crate::ApiError;
use crate::openai::fields::{Field, Kind, Treatment, check_table, expect, field, object};
use crate::openai::kind_of;

const MODEL_SETTINGS: &str = "is not supported: Keel passes max_tokens, temperature, top_p and \
     stop_sequences to the agent's model, not this; send the request without it";
const THINKING: &str = "is set by the agent's Model (`params.thinking`), not per request; send the \
     request without it";
const NOT_OFFERED: &str = "is not supported by Keel's facade";
const WORKSPACE_TOOLS: &str = "the agent's tools come from the workspace inventory";
const CACHING: &str = "the agent's Model decides prompt caching (`cache: auto`)";
const ATTRIBUTION: &str = "Keel records the run's owner from its API key and serves one workspace";

/// Every field of the Messages API request (the API reference's, with the sampling fields
/// older versions of the API and SDKs send), in alphabetical order after the required ones.
pub(super) const FIELDS: &[Field] = &[
    field("model", &[Kind::String], Treatment::Honoured),
    field("messages", &[Kind::Array], Treatment::Honoured),
    field("max_tokens", &[Kind::Integer], Treatment::Honoured),
    field(
        "cache_control",
        &[Kind::Object],
        Treatment::NoEffect(CACHING),
    ),
    field(
        "container",
        &[Kind::String, Kind::Object],
        Treatment::Refused(NOT_OFFERED),
    ),
    field(
        "context_management",
        &[Kind::Object],
        Treatment::Refused(NOT_OFFERED),
    ),
    field(
        "diagnostics",
        &[Kind::Object],
        Treatment::Refused(NOT_OFFERED),
    ),
    field(
        "inference_geo",
        &[Kind::String],
        Treatment::Refused(NOT_OFFERED),
    ),
    field(
        "mcp_servers",
        &[Kind::Array],
        Treatment::Refused(NOT_OFFERED),
    ),
    field("metadata", &[Kind::Object], Treatment::Honoured),
    field("output_config", &[Kind::Object], Treatment::Honoured),
    field(
        "service_tier",
        &[Kind::String],
        Treatment::Refused(NOT_OFFERED),
    ),
    field(
        "speed",
        &[Kind::String],
        Treatment::OnlyValue("\"standard\"", "Keel's models answer at their one speed"),
    ),
    field("stop_sequences", &[Kind::Array], Treatment::Honoured),
    field("stream", &[Kind::Bool], Treatment::Honoured),
    field("system", &[Kind::String, Kind::Array], Treatment::Honoured),
    field("temperature", &[Kind::Number], Treatment::Honoured),
    field("thinking", &[Kind::Object], Treatment::Refused(THINKING)),
    field(
        "tool_choice",
        &[Kind::Object],
        Treatment::NoEffect(WORKSPACE_TOOLS),
    ),
    field(
        "tools",
        &[Kind::Array],
        Treatment::NoEffect(WORKSPACE_TOOLS),
    ),
    field(
        "top_k",
        &[Kind::Integer],
        Treatment::Refused(MODEL_SETTINGS),
    ),
    field("top_p", &[Kind::Number], Treatment::Honoured),
    field(
        "user_profile_id",
        &[Kind::String],
        Treatment::NoEffect(ATTRIBUTION),
    ),
    field(
        "workspace_id",
        &[Kind::String],
        Treatment::NoEffect(ATTRIBUTION),
    ),
];

/// The fields a request must have.
pub(super) const REQUIRED: [&str; 3] = ["model", "messages", "max_tokens"];

/// What a checked request asks for.
#[derive(Debug, Default)]
pub(super) struct Asked {
    pub model: String,
    pub stream: bool,
    pub input: String,
    pub history: Vec<Message>,
    pub params: keel::ModelParams,
    /// The parameters set, each with its field.
    pub set: Vec<(FacadeParam, &'static str)>,
    /// `metadata.user_id`.
    pub user: Option<String>,
    /// `output_config.format`'s JSON Schema: the run's structured output.
    pub output_schema: Option<Value>,
}

/// Checks a Messages API body and reads it; with a session, only the last message is read
/// (the session's transcript is the history). `agent` says whether an agent of that name
/// exists: an unknown one is a 404 once the fields' types are checked, before the messages.
pub(super) fn read(
    mut body: Value,
    with_session: bool,
    agent: impl Fn(&str) -> bool,
) -> Result<Asked, ApiError> {
    let got = kind_of(&body);
    let Some(fields) = body.as_object_mut() else {
        return Err(ApiError::BadRequest {
            message: format!("the request body must be a JSON object, not {got}"),
            param: None,
        });
    };
    check_table(fields, FIELDS, &REQUIRED, "Messages")?;
    let mut asked = Asked {
        model: fields["model"].as_str().unwrap_or_default().to_owned(),
        stream: fields.get("stream").and_then(Value::as_bool) == Some(true),
        ..Asked::default()
    };
    if !agent(&asked.model) {
        return Err(ApiError::ModelNotFound(asked.model));
    }
    read_params(fields, &mut asked)?;
    if let Some(metadata) = fields.get_mut("metadata") {
        let metadata = object(metadata, "metadata")?;
        metadata.retain(|_, v| !v.is_null());
        for (key, value) in metadata.iter() {
            match key.as_str() {
                "user_id" => {
                    expect("metadata.user_id", value, &[Kind::String])?;
                    asked.user = value.as_str().map(str::to_owned);
                }
                other => return Err(ApiError::UnknownParameter(format!("metadata.{other}"))),
            }
        }
    }
    if let Some(config) = fields.get_mut("output_config") {
        asked.output_schema = output_format(config)?;
        if asked.output_schema.is_some() {
            asked
                .set
                .push((FacadeParam::ResponseFormat, "output_config.format"));
        }
    }
    let mut history = match fields.get("system") {
        Some(system) => vec![Message::system(system_text(system)?)],
        None => Vec::new(),
    };
    let messages = fields["messages"].as_array().cloned().unwrap_or_default();
    let Some((last, earlier)) = messages.split_last() else {
        return Err(bad("`messages` must be a non-empty array".into()));
    };
    for (index, message) in earlier.iter().enumerate() {
        history.extend(turn(message, index)?);
    }
    let at = earlier.len();
    let last = turn(last, at)?;
    let input = match last.as_slice() {
        [message] if message.role == keel::Role::User => message.content.clone(),
        _ => {
            return Err(bad(format!(
                "the last message (messages[{at}]) must be a user turn of text: Keel runs the \
                 workspace's tools itself and takes no tool results from clients"
            )));
        }
    };
    if input.trim().is_empty() {
        return Err(bad(format!("messages[{at}] (the user turn) has no text")));
    }
    asked.input = input;
    if !with_session {
        asked.history = history;
    }
    Ok(asked)
}

/// `max_tokens`, `temperature`, `top_p` and `stop_sequences`, within the API's ranges.
fn read_params(fields: &Map<String, Value>, asked: &mut Asked) -> Result<(), ApiError> {
    let max_tokens = fields["max_tokens"]
        .as_f64()
        .filter(|n| *n >= 1.0 && *n <= f64::from(u32::MAX))
        .ok_or_else(|| ApiError::UnsupportedValue {
            param: "max_tokens".into(),
            message: format!(
                "`max_tokens` must be an integer from 1 to {}, not {}",
                u32::MAX,
                fields["max_tokens"]
            ),
        })?;
    // In range and integral (checked): the conversion is exact.
    asked.params.max_tokens = Some(max_tokens as u32);
    asked.set.push((FacadeParam::MaxTokens, "max_tokens"));
    for (name, param) in [
        ("temperature", FacadeParam::Temperature),
        ("top_p", FacadeParam::TopP),
    ] {
        let Some(value) = fields.get(name).and_then(Value::as_f64) else {
            continue;
        };
        if !(0.0..=1.0).contains(&value) {
            return Err(ApiError::UnsupportedValue {
                param: name.into(),
                message: format!("`{name}` must be between 0 and 1, not {value}"),
            });
        }
        match param {
            FacadeParam::Temperature => asked.params.temperature = Some(value),
            _ => asked.params.top_p = Some(value),
        }
        asked.set.push((param, name));
    }
    if let Some(Value::Array(stop)) = fields.get("stop_sequences") {
        for (i, sequence) in stop.iter().enumerate() {
            expect(&format!("stop_sequences[{i}]"), sequence, &[Kind::String])?;
            asked
                .params
                .stop
                .push(sequence.as_str().unwrap_or_default().to_owned());
        }
        asked.set.push((FacadeParam::Stop, "stop_sequences"));
    }
    Ok(())
}

/// `output_config`: `format` (`{type: json_schema, schema}`) is the run's structured output;
/// `effort` is the agent's model's business.
fn output_format(config: &mut Value) -> Result<Option<Value>, ApiError> {
    let config = object(config, "output_config")?;
    config.retain(|_, v| !v.is_null());
    for key in config.keys() {
        match key.as_str() {
            "format" => {}
            "effort" => {
                return Err(ApiError::UnsupportedParameter {
                    param: "output_config.effort".into(),
                    reason: "is not supported: the agent's Model decides how its model works; \
                             send the request without it"
                        .into(),
                });
            }
            other => return Err(ApiError::UnknownParameter(format!("output_config.{other}"))),
        }
    }
    let Some(format) = config.get_mut("format") else {
        return Ok(None);
    };
    let format = object(format, "output_config.format")?;
    format.retain(|_, v| !v.is_null());
    match format.get("type") {
        Some(Value::String(kind)) if kind == "json_schema" => {}
        Some(other) => {
            return Err(ApiError::UnsupportedValue {
                param: "output_config.format.type".into(),
                message: format!(
                    "`output_config.format.type` must be \"json_schema\", not {other}"
                ),
            });
        }
        None => {
            return Err(ApiError::MissingParameter(
                "output_config.format.type".into(),
            ));
        }
    }
    for key in format.keys() {
        if !["type", "schema"].contains(&key.as_str()) {
            return Err(ApiError::UnknownParameter(format!(
                "output_config.format.{key}"
            )));
        }
    }
    match format.get("schema") {
        Some(schema) => {
            expect("output_config.format.schema", schema, &[Kind::Object])?;
            Ok(Some(schema.clone()))
        }
        None => Err(ApiError::MissingParameter(
            "output_config.format.schema".into(),
        )),
    }
}

/// `system`: a string, or text blocks (their `cache_control` is the agent's model's business:
/// `cache: auto`).
fn system_text(system: &Value) -> Result<String, ApiError> {
    match system {
        Value::String(text) => Ok(text.clone()),
        Value::Array(blocks) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (i, block) in blocks.iter().enumerate() {
                let at = format!("system[{i}]");
                match block_type(block, &at)? {
                    "text" => texts.push(text_field(block, &at, "text")?),
                    other => {
                        return Err(bad(format!(
                            "{at} is a `{other}` block; the system prompt takes `text` blocks"
                        )));
                    }
                }
            }
            Ok(texts.join("\n\n"))
        }
        _ => Ok(String::new()),
    }
}

/// One message as Keel messages: a user turn's text (and its tool results), or an assistant
/// turn's thinking, text and tool use.
fn turn(message: &Value, index: usize) -> Result<Vec<Message>, ApiError> {
    let at = format!("messages[{index}]");
    let got = kind_of(message);
    let message = message.as_object().ok_or_else(|| ApiError::InvalidType {
        param: at.clone(),
        expected: "an object",
        got,
    })?;
    for key in message.keys() {
        if !["role", "content"].contains(&key.as_str()) {
            return Err(ApiError::UnknownParameter(format!("{at}.{key}")));
        }
    }
    let role = match message.get("role") {
        Some(role) => {
            expect(&format!("{at}.role"), role, &[Kind::String])?;
            role.as_str().unwrap_or_default()
        }
        None => return Err(ApiError::MissingParameter(format!("{at}.role"))),
    };
    if !matches!(role, "user" | "assistant") {
        return Err(bad(format!(
            "{at} has role `{role}`; the Messages API has `user` and `assistant` (the system \
             prompt is the top-level `system`)"
        )));
    }
    let content = message
        .get("content")
        .ok_or_else(|| ApiError::MissingParameter(format!("{at}.content")))?;
    expect(
        &format!("{at}.content"),
        content,
        &[Kind::String, Kind::Array],
    )?;
    let blocks = match content {
        Value::String(text) => {
            return Ok(vec![match role {
                "user" => Message::user(text.clone()),
                _ => Message::assistant(text.clone(), Vec::new()),
            }]);
        }
        Value::Array(blocks) => blocks,
        _ => return Ok(Vec::new()),
    };
    let mut texts: Vec<String> = Vec::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut thinking: Vec<Thinking> = Vec::new();
    let mut results: Vec<Message> = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let at = format!("{at}.content[{i}]");
        match (role, block_type(block, &at)?) {
            (_, "text") => texts.push(text_field(block, &at, "text")?),
            ("assistant", "tool_use") => {
                let input = block.get("input").cloned().unwrap_or(Value::Null);
                expect(&format!("{at}.input"), &input, &[Kind::Object])?;
                calls.push(ToolCall {
                    id: text_field(block, &at, "id")?,
                    name: text_field(block, &at, "name")?,
                    arguments: input.to_string(),
                });
            }
            ("assistant", "thinking") => thinking.push(Thinking::Thinking {
                thinking: text_field(block, &at, "thinking")?,
                signature: text_field(block, &at, "signature")?,
            }),
            ("assistant", "redacted_thinking") => thinking.push(Thinking::RedactedThinking {
                data: text_field(block, &at, "data")?,
            }),
            ("user", "tool_result") => {
                let id = text_field(block, &at, "tool_use_id")?;
                let output = match block.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Array(parts)) => {
                        let mut texts = Vec::with_capacity(parts.len());
                        for (j, part) in parts.iter().enumerate() {
                            let at = format!("{at}.content[{j}]");
                            match block_type(part, &at)? {
                                "text" => texts.push(text_field(part, &at, "text")?),
                                other => return Err(unsupported_block(&at, other)),
                            }
                        }
                        texts.join("\n")
                    }
                    Some(other) => {
                        return Err(ApiError::InvalidType {
                            param: format!("{at}.content"),
                            expected: "a string or an array",
                            got: kind_of(other),
                        });
                    }
                };
                let is_error = match block.get("is_error") {
                    None | Some(Value::Null) => false,
                    Some(flag) => {
                        expect(&format!("{at}.is_error"), flag, &[Kind::Bool])?;
                        flag.as_bool() == Some(true)
                    }
                };
                results.push(match is_error {
                    true => Message::tool_error(id, output),
                    false => Message::tool_result(id, output),
                });
            }
            (_, other) => return Err(unsupported_block(&at, other)),
        }
    }
    let text = texts.join("\n");
    Ok(match role {
        "assistant" => vec![Message::assistant(text, calls).with_thinking(thinking)],
        _ => {
            if !text.is_empty() {
                results.push(Message::user(text));
            }
            results
        }
    })
}

/// A block's `type`, required and a string.
fn block_type<'a>(block: &'a Value, at: &str) -> Result<&'a str, ApiError> {
    let got = kind_of(block);
    let block = block.as_object().ok_or_else(|| ApiError::InvalidType {
        param: at.to_owned(),
        expected: "an object",
        got,
    })?;
    match block.get("type") {
        Some(Value::String(kind)) => Ok(kind),
        Some(other) => Err(ApiError::InvalidType {
            param: format!("{at}.type"),
            expected: "a string",
            got: kind_of(other),
        }),
        None => Err(ApiError::MissingParameter(format!("{at}.type"))),
    }
}

/// A block's string field `name`, required.
fn text_field(block: &Value, at: &str, name: &str) -> Result<String, ApiError> {
    match block.get(name) {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(other) => Err(ApiError::InvalidType {
            param: format!("{at}.{name}"),
            expected: "a string",
            got: kind_of(other),
        }),
        None => Err(ApiError::MissingParameter(format!("{at}.{name}"))),
    }
}

fn unsupported_block(at: &str, kind: &str) -> ApiError {
    bad(format!(
        "{at} is a `{kind}` block, which Keel's runs do not carry (text, tool_use, tool_result, \
         thinking and redacted_thinking are read)"
    ))
}

fn bad(message: String) -> ApiError {
    ApiError::BadRequest {
        message,
        param: Some("messages"),
    }
}

#[cfg(test)]
mod tests {
    use super::{FIELDS, Treatment};

    /// The README's table of the Messages facade's fields lists every field with what Keel
    /// does with it.
    #[test]
    fn the_readme_documents_every_field() {
        let readme = include_str!("../../README.md");
        let table = readme
            .split("<!-- messages-fields -->")
            .nth(1)
            .expect("README: the Messages API field table, after `<!-- messages-fields -->`");
        for field in FIELDS {
            let row = table
                .lines()
                .find(|line| line.starts_with(&format!("| `{}` |", field.name)))
                .unwrap_or_else(|| panic!("README: no Messages row for `{}`", field.name));
            let word = match field.treatment {
                Treatment::Honoured => "honoured",
                Treatment::NoEffect(_) => "no effect",
                Treatment::OnlyValue(..) => "only",
                Treatment::Refused(_) => "refused",
            };
            assert!(row.contains(word), "README row for `{}`: {row}", field.name);
        }
    }
}
