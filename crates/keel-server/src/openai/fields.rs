//! The whole Chat Completions request checked the way the OpenAI API checks it, before the
//! facade reads it: [`FIELDS`] lists every top-level field the API has, with its JSON type and
//! what Keel does with it — honoured, accepted without effect (and why), accepted with one
//! value only, or refused (and why). Nothing a client sends is silently dropped: a field of
//! the wrong type is a 400 `invalid_type` naming it, a field Keel cannot honour a 400
//! `unsupported_parameter`, an unsupported value a 400 `unsupported_value`, a field the API
//! does not have a 400 `unknown_parameter`. `null` means absent, as in the OpenAI API.
//!
//! Messages are checked the same way (`messages[2].content[0].text`); what their roles and
//! contents mean is `messages.rs`'s business.

use schemars::SchemaGenerator;
use serde_json::{Map, Value, json};

use super::kind_of;
use super::wire::{ChatMessage, StreamOptions};
use crate::ApiError;

/// A JSON type a field may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    String,
    Number,
    Integer,
    Bool,
    Array,
    Object,
}

impl Kind {
    fn admits(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Number => value.is_number(),
            // As JSON Schema: a number with no fraction (`1.0` too).
            Self::Integer => value.as_f64().is_some_and(|n| n.fract() == 0.0),
            Self::Bool => value.is_boolean(),
            Self::Array => value.is_array(),
            Self::Object => value.is_object(),
        }
    }

    /// The JSON Schema type name.
    pub(crate) fn schema_type(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::Bool => "boolean",
            Self::Array => "array",
            Self::Object => "object",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Number => "a number",
            Self::Integer => "an integer",
            Self::Bool => "a boolean",
            Self::Array => "an array",
            Self::Object => "an object",
        }
    }
}

/// What Keel does with a field a client sends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Treatment {
    /// Read and honoured.
    Honoured,
    /// Accepted and without effect, for the reason given.
    NoEffect(&'static str),
    /// Accepted with this one value (JSON text); any other is `unsupported_value`.
    OnlyValue(&'static str, &'static str),
    /// Refused when sent: Keel cannot honour it, for the reason given.
    Refused(&'static str),
}

/// One top-level field of a request (Chat Completions here; the Messages API's in
/// `crate::anthropic`).
pub(crate) struct Field {
    pub name: &'static str,
    pub kinds: &'static [Kind],
    pub treatment: Treatment,
}

const MODEL_SETTINGS: &str = "is not supported: Keel passes temperature, max_tokens, top_p, stop, seed and the \
     penalties to the model, not this; send the request without it";
const NOT_OFFERED: &str = "is not supported by Keel's facade";
const WORKSPACE_TOOLS: &str = "the agent's tools come from the workspace inventory";
const RECORDED: &str = "metadata: Keel records every run anyway";

/// Every field of the OpenAI Chat Completions request, in the API reference's order.
const FIELDS: &[Field] = &[
    field("model", &[Kind::String], Treatment::Honoured),
    field("messages", &[Kind::Array], Treatment::Honoured),
    field("stream", &[Kind::Bool], Treatment::Honoured),
    field("stream_options", &[Kind::Object], Treatment::Honoured),
    field(
        "n",
        &[Kind::Integer],
        Treatment::OnlyValue("1", "Keel answers one choice per request"),
    ),
    field("temperature", &[Kind::Number], Treatment::Honoured),
    field("top_p", &[Kind::Number], Treatment::Honoured),
    field("max_tokens", &[Kind::Integer], Treatment::Honoured),
    field(
        "max_completion_tokens",
        &[Kind::Integer],
        Treatment::Honoured,
    ),
    field("stop", &[Kind::String, Kind::Array], Treatment::Honoured),
    field("seed", &[Kind::Integer], Treatment::Honoured),
    field("presence_penalty", &[Kind::Number], Treatment::Honoured),
    field("frequency_penalty", &[Kind::Number], Treatment::Honoured),
    field(
        "logit_bias",
        &[Kind::Object],
        Treatment::Refused(MODEL_SETTINGS),
    ),
    field(
        "reasoning_effort",
        &[Kind::String],
        Treatment::Refused(MODEL_SETTINGS),
    ),
    field(
        "verbosity",
        &[Kind::String],
        Treatment::Refused(MODEL_SETTINGS),
    ),
    field(
        "logprobs",
        &[Kind::Bool],
        Treatment::OnlyValue("false", "Keel does not return log probabilities"),
    ),
    field(
        "top_logprobs",
        &[Kind::Integer],
        Treatment::Refused(NOT_OFFERED),
    ),
    field("response_format", &[Kind::Object], Treatment::Honoured),
    field(
        "modalities",
        &[Kind::Array],
        Treatment::Refused(NOT_OFFERED),
    ),
    field("audio", &[Kind::Object], Treatment::Refused(NOT_OFFERED)),
    field(
        "prediction",
        &[Kind::Object],
        Treatment::Refused(NOT_OFFERED),
    ),
    field(
        "web_search_options",
        &[Kind::Object],
        Treatment::Refused(NOT_OFFERED),
    ),
    field(
        "service_tier",
        &[Kind::String],
        Treatment::Refused(NOT_OFFERED),
    ),
    field(
        "tools",
        &[Kind::Array],
        Treatment::NoEffect(WORKSPACE_TOOLS),
    ),
    field(
        "tool_choice",
        &[Kind::String, Kind::Object],
        Treatment::NoEffect(WORKSPACE_TOOLS),
    ),
    field(
        "parallel_tool_calls",
        &[Kind::Bool],
        Treatment::NoEffect(WORKSPACE_TOOLS),
    ),
    field(
        "functions",
        &[Kind::Array],
        Treatment::NoEffect(WORKSPACE_TOOLS),
    ),
    field(
        "function_call",
        &[Kind::String, Kind::Object],
        Treatment::NoEffect(WORKSPACE_TOOLS),
    ),
    field("user", &[Kind::String], Treatment::Honoured),
    field(
        "safety_identifier",
        &[Kind::String],
        Treatment::NoEffect(RECORDED),
    ),
    field(
        "prompt_cache_key",
        &[Kind::String],
        Treatment::NoEffect(RECORDED),
    ),
    field("metadata", &[Kind::Object], Treatment::Honoured),
    field("store", &[Kind::Bool], Treatment::NoEffect(RECORDED)),
];

pub(crate) const fn field(
    name: &'static str,
    kinds: &'static [Kind],
    treatment: Treatment,
) -> Field {
    Field {
        name,
        kinds,
        treatment,
    }
}

/// The fields a request must have.
const REQUIRED: [&str; 2] = ["model", "messages"];

/// The JSON Schema of a Chat Completions request as [`check`] accepts it, built from
/// [`FIELDS`] so the OpenAPI document and the server cannot disagree: every field Keel takes,
/// with its JSON types (or its one value) and `null` as absent; refused fields are left out,
/// and so is anything else (`additionalProperties: false`). `messages` and `stream_options`
/// keep their detailed schemas.
pub(crate) fn request_schema(generator: &mut SchemaGenerator) -> schemars::Schema {
    let mut properties = Map::new();
    for field in FIELDS {
        let schema = match (field.name, field.treatment) {
            (_, Treatment::Refused(_)) => continue,
            ("messages", _) => {
                let mut messages = generator.subschema_for::<Vec<ChatMessage>>().to_value();
                if let Value::Object(map) = &mut messages {
                    map.insert("minItems".into(), json!(1));
                }
                messages
            }
            ("stream_options", _) => json!({
                "anyOf": [generator.subschema_for::<StreamOptions>().to_value(), {"type": "null"}]
            }),
            ("metadata", _) => json!({
                "type": ["object", "null"],
                "description": "The run's metadata (string values; `user` is `metadata.user`): recorded, and memory namespaces are rendered from it",
                "additionalProperties": {"type": "string"},
            }),
            (name, _) if super::params::field_schema(name).is_some() => {
                super::params::field_schema(name).unwrap_or_default()
            }
            (_, Treatment::OnlyValue(only, _)) => {
                json!({ "enum": [serde_json::from_str::<Value>(only).unwrap_or(Value::Null), null] })
            }
            _ => {
                let mut types: Vec<&str> = field.kinds.iter().map(|k| k.schema_type()).collect();
                // `null` is absent, which a required field may not be.
                if !REQUIRED.contains(&field.name) {
                    types.push("null");
                }
                json!({ "type": types })
            }
        };
        properties.insert(field.name.to_owned(), schema);
    }
    let schema = json!({
        "type": "object",
        "description": "A Chat Completions request. The sampling parameters and `response_format` apply to the run's model rounds, within the agent's `facade` (`allow`, `clamp`); fields Keel cannot honour are refused with a 400 and so are not listed; `n` must be 1.",
        "required": REQUIRED,
        "properties": properties,
        "not": super::params::exclusions(),
        "additionalProperties": false,
    });
    schemars::Schema::try_from(schema).unwrap_or_default()
}

/// Checks a Chat Completions body as a whole and drops its `null` fields (absent, as in the
/// OpenAI API), so the typed parse that follows sees only what was sent.
pub(super) fn check(body: &mut Value) -> Result<(), ApiError> {
    let got = kind_of(body);
    let Some(fields) = body.as_object_mut() else {
        return Err(ApiError::BadRequest {
            message: format!("the request body must be a JSON object, not {got}"),
            param: None,
        });
    };
    check_table(fields, FIELDS, &REQUIRED, "Chat")?;
    if let Some(options) = fields.get_mut("stream_options") {
        let options = object(options, "stream_options")?;
        options.retain(|_, value| !value.is_null());
        if let Some(value) = options.get("include_usage") {
            expect("stream_options.include_usage", value, &[Kind::Bool])?;
        }
    }
    if let Some(Value::Object(metadata)) = fields.get("metadata") {
        for (key, value) in metadata {
            expect(&format!("metadata.{key}"), value, &[Kind::String])?;
        }
    }
    if let Some(Value::Array(messages)) = fields.get_mut("messages") {
        for (index, message) in messages.iter_mut().enumerate() {
            check_message(message, index)?;
        }
    }
    Ok(())
}

/// Drops a body's `null` fields (absent) and checks the rest against `table`: each field known,
/// of its type, and honoured, accepted or refused as the table says; then that the `required`
/// fields are there. `api` names the API in the log.
pub(crate) fn check_table(
    fields: &mut Map<String, Value>,
    table: &[Field],
    required: &[&str],
    api: &str,
) -> Result<(), ApiError> {
    fields.retain(|_, value| !value.is_null());
    for (name, value) in fields.iter() {
        let Some(field) = table.iter().find(|f| f.name == name) else {
            return Err(ApiError::UnknownParameter(name.clone()));
        };
        expect(name, value, field.kinds)?;
        match field.treatment {
            Treatment::Honoured => {}
            Treatment::NoEffect(reason) => {
                tracing::debug!(field = %name, reason, api, "Facade request field accepted without effect.");
            }
            Treatment::OnlyValue(only, why) => {
                if serde_json::from_str::<Value>(only).ok().as_ref() != Some(value) {
                    return Err(ApiError::UnsupportedValue {
                        param: name.clone(),
                        message: format!("`{name}` must be {only}, not {value}: {why}"),
                    });
                }
            }
            Treatment::Refused(reason) => {
                return Err(ApiError::UnsupportedParameter {
                    param: name.clone(),
                    reason: reason.to_owned(),
                });
            }
        }
    }
    for required in required {
        if !fields.contains_key(*required) {
            return Err(ApiError::MissingParameter((*required).to_owned()));
        }
    }
    Ok(())
}

/// Checks the types of one message's fields (`role` is required).
fn check_message(message: &mut Value, index: usize) -> Result<(), ApiError> {
    let at = format!("messages[{index}]");
    let fields = object(message, &at)?;
    fields.retain(|_, value| !value.is_null());
    let typed: [(&str, &[Kind]); 4] = [
        ("role", &[Kind::String]),
        ("content", &[Kind::String, Kind::Array]),
        ("name", &[Kind::String]),
        ("tool_call_id", &[Kind::String]),
    ];
    for (name, kinds) in typed {
        if let Some(value) = fields.get(name) {
            expect(&format!("{at}.{name}"), value, kinds)?;
        }
    }
    if !fields.contains_key("role") {
        return Err(ApiError::MissingParameter(format!("{at}.role")));
    }
    if let Some(Value::Array(parts)) = fields.get_mut("content") {
        for (i, part) in parts.iter_mut().enumerate() {
            let at = format!("{at}.content[{i}]");
            let part = object(part, &at)?;
            part.retain(|_, value| !value.is_null());
            match part.get("type") {
                Some(kind) => expect(&format!("{at}.type"), kind, &[Kind::String])?,
                None => return Err(ApiError::MissingParameter(format!("{at}.type"))),
            }
            if let Some(text) = part.get("text") {
                expect(&format!("{at}.text"), text, &[Kind::String])?;
            }
        }
    }
    if let Some(calls) = fields.get_mut("tool_calls") {
        let Value::Array(calls) = calls else {
            return Err(invalid_type(
                &format!("{at}.tool_calls"),
                &[Kind::Array],
                calls,
            ));
        };
        for (i, call) in calls.iter_mut().enumerate() {
            check_tool_call(call, &format!("{at}.tool_calls[{i}]"))?;
        }
    }
    Ok(())
}

/// Checks one tool call of an assistant message: `id`, `function.name` and
/// `function.arguments` are strings.
fn check_tool_call(call: &mut Value, at: &str) -> Result<(), ApiError> {
    let call = object(call, at)?;
    call.retain(|_, value| !value.is_null());
    for name in ["id", "type"] {
        if let Some(value) = call.get(name) {
            expect(&format!("{at}.{name}"), value, &[Kind::String])?;
        }
    }
    let Some(function) = call.get_mut("function") else {
        return Err(ApiError::MissingParameter(format!("{at}.function")));
    };
    let function = object(function, &format!("{at}.function"))?;
    for name in ["name", "arguments"] {
        if let Some(value) = function.get(name) {
            expect(&format!("{at}.function.{name}"), value, &[Kind::String])?;
        }
    }
    Ok(())
}

/// `value` as an object, or `invalid_type` naming `at`.
pub(crate) fn object<'a>(
    value: &'a mut Value,
    at: &str,
) -> Result<&'a mut Map<String, Value>, ApiError> {
    let got = kind_of(value);
    value.as_object_mut().ok_or_else(|| ApiError::InvalidType {
        param: at.to_owned(),
        expected: Kind::Object.name(),
        got,
    })
}

/// `value` is one of `kinds`, or `invalid_type` naming `param`.
pub(crate) fn expect(param: &str, value: &Value, kinds: &[Kind]) -> Result<(), ApiError> {
    if kinds.iter().any(|kind| kind.admits(value)) {
        Ok(())
    } else {
        Err(invalid_type(param, kinds, value))
    }
}

fn invalid_type(param: &str, kinds: &[Kind], value: &Value) -> ApiError {
    ApiError::InvalidType {
        param: param.to_owned(),
        expected: match kinds {
            [Kind::String, Kind::Array] => "a string or an array",
            [Kind::String, Kind::Object] => "a string or an object",
            [kind, ..] => kind.name(),
            [] => "nothing",
        },
        got: kind_of(value),
    }
}

#[cfg(test)]
mod tests {
    use super::{FIELDS, Treatment};

    /// The README's table of facade fields lists every field with what Keel does with it.
    #[test]
    fn the_readme_documents_every_field() {
        let readme = include_str!("../../README.md");
        for field in FIELDS {
            let row = readme
                .lines()
                .find(|line| line.starts_with(&format!("| `{}` |", field.name)))
                .unwrap_or_else(|| panic!("README: no row for `{}`", field.name));
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
