//! The model parameters of a Chat Completions request — `temperature`, `max_tokens` /
//! `max_completion_tokens`, `top_p`, `stop`, `seed`, `presence_penalty`, `frequency_penalty`
//! — and `response_format`: read from the checked body within the OpenAI API's ranges, then
//! held to the agent's `facade` (a parameter it does not `allow` is refused naming it; a value
//! outside a `clamp` bound is clamped, and the clamped value is what the run records and the
//! model receives). `response_format` `json_object` or `json_schema` becomes the run's
//! structured output, checked as an agent's `output.schema` is.

use keel_types::ModelParams;
use keel_workspace::{FacadeParam, FacadeSpec};
use serde_json::{Map, Value, json};

use crate::ApiError;

/// The stop sequences a request may send at most (as the OpenAI API).
const MAX_STOP: usize = 4;

/// What a request asked for, before the agent's `facade` applies.
#[derive(Debug, Default)]
pub(crate) struct Requested {
    params: ModelParams,
    output_schema: Option<Value>,
    /// The parameters set, each with the field the client used.
    set: Vec<(FacadeParam, &'static str)>,
}

/// What a run gets: the parameters and the structured output.
#[derive(Debug, Default)]
pub(crate) struct Granted {
    pub params: ModelParams,
    pub output_schema: Option<Value>,
}

impl Requested {
    /// Parameters another facade read (the Messages API's), each with the field that set it.
    pub(crate) fn new(
        params: ModelParams,
        output_schema: Option<Value>,
        set: Vec<(FacadeParam, &'static str)>,
    ) -> Self {
        Self {
            params,
            output_schema,
            set,
        }
    }

    /// Reads the parameters of a body `fields::check` accepted (types are checked there).
    pub(super) fn read(body: &Map<String, Value>) -> Result<Self, ApiError> {
        let mut requested = Self::default();
        let number = |name: &'static str, min: f64, max: f64| -> Result<Option<f64>, ApiError> {
            let Some(value) = body.get(name).and_then(Value::as_f64) else {
                return Ok(None);
            };
            if !(min..=max).contains(&value) {
                return Err(out_of_range(
                    name,
                    &format!("between {min} and {max}"),
                    value,
                ));
            }
            Ok(Some(value))
        };
        if let Some(value) = number("temperature", 0.0, 2.0)? {
            requested.params.temperature = Some(value);
            requested
                .set
                .push((FacadeParam::Temperature, "temperature"));
        }
        if let Some(value) = number("top_p", 0.0, 1.0)? {
            requested.params.top_p = Some(value);
            requested.set.push((FacadeParam::TopP, "top_p"));
        }
        if let Some(value) = number("presence_penalty", -2.0, 2.0)? {
            requested.params.presence_penalty = Some(value);
            requested
                .set
                .push((FacadeParam::PresencePenalty, "presence_penalty"));
        }
        if let Some(value) = number("frequency_penalty", -2.0, 2.0)? {
            requested.params.frequency_penalty = Some(value);
            requested
                .set
                .push((FacadeParam::FrequencyPenalty, "frequency_penalty"));
        }
        requested.read_max_tokens(body)?;
        if let Some(seed) = body.get("seed") {
            let Some(seed) = integer(seed).and_then(|n| i64::try_from(n).ok()) else {
                return Err(ApiError::UnsupportedValue {
                    param: "seed".into(),
                    message: format!("`seed` must be a 64-bit integer, not {seed}"),
                });
            };
            requested.params.seed = Some(seed);
            requested.set.push((FacadeParam::Seed, "seed"));
        }
        if let Some(stop) = body.get("stop") {
            requested.params.stop = stop_sequences(stop)?;
            requested.set.push((FacadeParam::Stop, "stop"));
        }
        if let Some(format) = body.get("response_format") {
            requested.output_schema = output_schema(format)?;
            requested
                .set
                .push((FacadeParam::ResponseFormat, "response_format"));
        }
        Ok(requested)
    }

    /// `max_tokens` or `max_completion_tokens` (not both: they name one limit).
    fn read_max_tokens(&mut self, body: &Map<String, Value>) -> Result<(), ApiError> {
        let mut chosen: Option<(u32, &'static str)> = None;
        for name in ["max_tokens", "max_completion_tokens"] {
            let Some(value) = body.get(name) else {
                continue;
            };
            let tokens = integer(value)
                .filter(|n| *n >= 1)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| ApiError::UnsupportedValue {
                    param: name.into(),
                    message: format!(
                        "`{name}` must be an integer from 1 to {}, not {value}",
                        u32::MAX
                    ),
                })?;
            if let Some((_, first_name)) = chosen {
                return Err(ApiError::UnsupportedValue {
                    param: name.into(),
                    message: format!(
                        "`{first_name}` and `{name}` name the same limit; send one of them"
                    ),
                });
            }
            chosen = Some((tokens, name));
        }
        if let Some((tokens, name)) = chosen {
            self.params.max_tokens = Some(tokens);
            self.set.push((FacadeParam::MaxTokens, name));
        }
        Ok(())
    }

    /// The first parameter set, if any (for a model that takes none).
    pub(crate) fn first(&self) -> Option<&'static str> {
        self.set.first().map(|(_, name)| *name)
    }

    /// The request's parameters under agent `agent`'s `facade`: refused when it does not
    /// allow one, clamped to its bounds.
    pub(crate) fn grant(self, agent: &str, facade: &FacadeSpec) -> Result<Granted, ApiError> {
        if let Some((param, name)) = self.set.iter().find(|(p, _)| !facade.allows(*p)) {
            return Err(ApiError::UnsupportedParameter {
                param: (*name).into(),
                reason: format!(
                    "is not allowed for agent `{agent}`: its `facade.allow` does not list `{}`; \
                     send the request without it",
                    param.name()
                ),
            });
        }
        let mut params = self.params;
        let clamp = &facade.clamp;
        let bounded = |value: Option<f64>, bounds: Option<keel_workspace::Bounds>| {
            value.map(|v| bounds.map_or(v, |b| b.clamp(v)))
        };
        params.temperature = bounded(params.temperature, clamp.temperature);
        params.top_p = bounded(params.top_p, clamp.top_p);
        params.presence_penalty = bounded(params.presence_penalty, clamp.presence_penalty);
        params.frequency_penalty = bounded(params.frequency_penalty, clamp.frequency_penalty);
        if let Some(max) = clamp.max_tokens {
            params.max_tokens = params.max_tokens.map(|n| n.min(max));
        }
        Ok(Granted {
            params,
            output_schema: self.output_schema,
        })
    }
}

/// An integral JSON number (`7` or `7.0`), if it is one within ±2^64.
fn integer(value: &Value) -> Option<i128> {
    if let Some(n) = value.as_i64() {
        return Some(i128::from(n));
    }
    if let Some(n) = value.as_u64() {
        return Some(i128::from(n));
    }
    let n = value
        .as_f64()
        .filter(|n| n.fract() == 0.0 && n.abs() < 1.8e19)?;
    // In range and integral: the conversion is exact.
    Some(n as i128)
}

fn out_of_range(name: &str, range: &str, value: f64) -> ApiError {
    ApiError::UnsupportedValue {
        param: name.into(),
        message: format!("`{name}` must be {range}, not {value}"),
    }
}

/// `stop`: one string or up to [`MAX_STOP`] of them.
fn stop_sequences(stop: &Value) -> Result<Vec<String>, ApiError> {
    let list = match stop {
        Value::String(one) => return Ok(vec![one.clone()]),
        Value::Array(list) => list,
        _ => return Ok(Vec::new()),
    };
    if list.len() > MAX_STOP {
        return Err(ApiError::UnsupportedValue {
            param: "stop".into(),
            message: format!(
                "`stop` may hold at most {MAX_STOP} sequences, not {}",
                list.len()
            ),
        });
    }
    list.iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(text) => Ok(text.clone()),
            other => Err(ApiError::InvalidType {
                param: format!("stop[{i}]"),
                expected: "a string",
                got: super::kind_of(other),
            }),
        })
        .collect()
}

/// The structured output `response_format` asks for: none for `text`, any JSON object for
/// `json_object`, the given schema for `json_schema`.
fn output_schema(format: &Value) -> Result<Option<Value>, ApiError> {
    let format = object(format, "response_format")?;
    known_fields(format, "response_format", &["type", "json_schema"])?;
    let kind = match format.get("type").filter(|v| !v.is_null()) {
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => return Err(invalid_string("response_format.type", other)),
        None => return Err(ApiError::MissingParameter("response_format.type".into())),
    };
    if kind != "json_schema" && format.get("json_schema").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::UnsupportedValue {
            param: "response_format.json_schema".into(),
            message: format!(
                "`response_format.json_schema` goes with type json_schema, not `{kind}`"
            ),
        });
    }
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some(json!({"type": "object"}))),
        "json_schema" => {
            let Some(spec) = format.get("json_schema").filter(|v| !v.is_null()) else {
                return Err(ApiError::MissingParameter(
                    "response_format.json_schema".into(),
                ));
            };
            let at = "response_format.json_schema";
            let spec = object(spec, at)?;
            known_fields(spec, at, &["name", "description", "schema", "strict"])?;
            let spec_field = |key: &str| spec.get(key).filter(|v| !v.is_null());
            match spec_field("name") {
                Some(Value::String(_)) => {}
                Some(other) => return Err(invalid_string(&format!("{at}.name"), other)),
                None => return Err(ApiError::MissingParameter(format!("{at}.name"))),
            }
            if let Some(strict) = spec_field("strict").filter(|s| !s.is_boolean()) {
                return Err(ApiError::InvalidType {
                    param: format!("{at}.strict"),
                    expected: "a boolean",
                    got: super::kind_of(strict),
                });
            }
            match spec_field("schema") {
                Some(schema @ Value::Object(_)) => Ok(Some(schema.clone())),
                // No schema: any JSON value.
                None => Ok(Some(json!({}))),
                Some(other) => Err(ApiError::InvalidType {
                    param: format!("{at}.schema"),
                    expected: "an object",
                    got: super::kind_of(other),
                }),
            }
        }
        other => Err(ApiError::UnsupportedValue {
            param: "response_format.type".into(),
            message: format!(
                "`response_format.type` must be text, json_object or json_schema, not `{other}`"
            ),
        }),
    }
}

fn object<'a>(value: &'a Value, at: &str) -> Result<&'a Map<String, Value>, ApiError> {
    value.as_object().ok_or_else(|| ApiError::InvalidType {
        param: at.to_owned(),
        expected: "an object",
        got: super::kind_of(value),
    })
}

fn invalid_string(at: &str, value: &Value) -> ApiError {
    ApiError::InvalidType {
        param: at.to_owned(),
        expected: "a string",
        got: super::kind_of(value),
    }
}

/// A field `at` does not have is `unknown_parameter` (`null` is absent).
fn known_fields(fields: &Map<String, Value>, at: &str, known: &[&str]) -> Result<(), ApiError> {
    match fields
        .iter()
        .find(|(name, value)| !value.is_null() && !known.contains(&name.as_str()))
    {
        Some((name, _)) => Err(ApiError::UnknownParameter(format!("{at}.{name}"))),
        None => Ok(()),
    }
}

/// What no request may hold: both token limits.
pub(crate) fn exclusions() -> Value {
    json!({
        "required": ["max_tokens", "max_completion_tokens"],
        "properties": {
            "max_tokens": {"type": "integer"},
            "max_completion_tokens": {"type": "integer"}
        }
    })
}

/// The JSON Schema of a parameter field as [`Requested::read`] accepts it (`null`: absent),
/// for the OpenAPI document; `None` for other fields.
pub(crate) fn field_schema(name: &str) -> Option<Value> {
    let number =
        |min: f64, max: f64| json!({"type": ["number", "null"], "minimum": min, "maximum": max});
    Some(match name {
        "temperature" => number(0.0, 2.0),
        "top_p" => number(0.0, 1.0),
        "presence_penalty" | "frequency_penalty" => number(-2.0, 2.0),
        "max_tokens" | "max_completion_tokens" => {
            json!({"type": ["integer", "null"], "minimum": 1, "maximum": u32::MAX})
        }
        "seed" => json!({"type": ["integer", "null"], "minimum": i64::MIN, "maximum": i64::MAX}),
        "stop" => json!({"anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}, "maxItems": MAX_STOP},
            {"type": "null"}
        ]}),
        "response_format" => json!({"anyOf": [
            {
                "type": "object",
                "properties": {"type": {"enum": ["text", "json_object"]}},
                "required": ["type"],
                "additionalProperties": false
            },
            {
                "type": "object",
                "properties": {
                    "type": {"const": "json_schema"},
                    "json_schema": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "description": {"type": ["string", "null"]},
                            "schema": {"type": ["object", "null"]},
                            "strict": {"type": ["boolean", "null"]}
                        },
                        "required": ["name"],
                        "additionalProperties": false
                    }
                },
                "required": ["type", "json_schema"],
                "additionalProperties": false
            },
            {"type": "null"}
        ]}),
        _ => return None,
    })
}
