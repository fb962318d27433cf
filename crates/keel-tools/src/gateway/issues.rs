//! Issues as the model and the run log see them: built from a validator's errors, and
//! bounded.
//!
//! Everything an issue quotes from the call — the value found, the validator's message that
//! embeds it, a path, a tool's own wording — is cut to [`MAX_QUOTED_CHARS`]: a longer text is
//! shown as its first 64 characters, its size and its SHA-256, so a 256 KiB bad string costs
//! the model and the guard event a few hundred bytes and can still be matched to the text the
//! model sent.

use std::borrow::Cow;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use keel_types::{Issue, Repair};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::repair::numbers::Oversized;

/// Longest text an issue or a blocked call's record quotes whole.
pub(super) const MAX_QUOTED_CHARS: usize = 256;

/// How many leading characters of a longer text are quoted.
const QUOTED_PREFIX_CHARS: usize = 64;

/// `text` as is when it is at most 256 characters, otherwise its first 64
/// characters, its size and its SHA-256: `"abc…" (262144 bytes, sha256 0f3a…)`.
pub fn quote(text: &str) -> Cow<'_, str> {
    if text.len() <= MAX_QUOTED_CHARS || text.chars().count() <= MAX_QUOTED_CHARS {
        return Cow::Borrowed(text);
    }
    let prefix: String = text.chars().take(QUOTED_PREFIX_CHARS).collect();
    let digest = Sha256::digest(text.as_bytes());
    let hex = keel_types::to_hex(&digest);
    Cow::Owned(format!("{prefix}… ({} bytes, sha256 {hex})", text.len()))
}

/// `issue` with every field quoted within bounds.
pub(super) fn bounded_issue(issue: Issue) -> Issue {
    let bound = |text: String| match quote(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(short) => short,
    };
    Issue {
        path: bound(issue.path),
        expected: bound(issue.expected),
        found: bound(issue.found),
        message: bound(issue.message),
    }
}

/// `repair` with its values replaced by a quote of their JSON text when that is too long.
pub(super) fn bounded_repair(repair: Repair) -> Repair {
    let bound = |value: Value| {
        let text = value.to_string();
        match quote(&text) {
            Cow::Borrowed(_) => value,
            Cow::Owned(short) => Value::String(short),
        }
    };
    Repair {
        path: quote(&repair.path).into_owned(),
        kind: repair.kind,
        from: bound(repair.from),
        to: bound(repair.to),
    }
}

pub(super) fn issue_from(error: &jsonschema::ValidationError<'_>) -> Issue {
    let found = error.instance();
    let expected = match error.kind() {
        ValidationErrorKind::Type { kind } => match kind {
            TypeKind::Single(t) => t.to_string(),
            TypeKind::Multiple(set) => set
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(" or "),
        },
        ValidationErrorKind::Required { property } => {
            format!("required property {property}")
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("no properties besides the declared ones (unexpected: {unexpected:?})")
        }
        ValidationErrorKind::Enum { options } => format!("one of {options}"),
        ValidationErrorKind::Constant { expected_value } => format!("exactly {expected_value}"),
        ValidationErrorKind::Minimum { limit } => format!("a number >= {limit}"),
        ValidationErrorKind::Maximum { limit } => format!("a number <= {limit}"),
        ValidationErrorKind::ExclusiveMinimum { limit } => format!("a number > {limit}"),
        ValidationErrorKind::ExclusiveMaximum { limit } => format!("a number < {limit}"),
        ValidationErrorKind::MinLength { limit } => format!("at least {limit} characters"),
        ValidationErrorKind::MaxLength { limit } => format!("at most {limit} characters"),
        ValidationErrorKind::MinItems { limit } => format!("at least {limit} items"),
        ValidationErrorKind::MaxItems { limit } => format!("at most {limit} items"),
        ValidationErrorKind::Pattern { pattern } => format!("a string matching /{pattern}/"),
        ValidationErrorKind::Format { format } => format!("a string in `{format}` format"),
        other => format!("a value satisfying `{}`", other.keyword()),
    };
    let rendered = found.to_string();
    let quoted = quote(&rendered);
    // The validator's message embeds the whole value: quote it there the same way.
    let message = match quoted {
        Cow::Borrowed(_) => error.to_string(),
        Cow::Owned(ref short) => error.to_string().replace(&rendered, short),
    };
    let found = match error.kind() {
        ValidationErrorKind::Required { .. } => "nothing".into(),
        ValidationErrorKind::Type { .. } => format!("{} {quoted}", json_type(found)),
        _ => quoted.into_owned(),
    };
    Issue {
        path: error.instance_path().as_str().to_owned(),
        expected,
        found,
        message,
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The issue of an integer literal that does not fit 64 bits.
pub(super) fn oversized_issue(oversized: &Oversized) -> Issue {
    let literal = quote(&oversized.literal);
    Issue {
        path: oversized.pointer.clone(),
        expected: "an integer that fits 64 bits (-9223372036854775808 to 18446744073709551615)"
            .to_owned(),
        found: literal.clone().into_owned(),
        message: format!(
            "the integer {literal} does not fit 64 bits and would be rounded, so the call is \
             blocked rather than changed; send a smaller number (or a string, if the tool \
             takes one)"
        ),
    }
}

/// Why `schema` is not a usable JSON Schema, if it is not.
pub fn schema_problem(schema: &Value) -> Option<String> {
    jsonschema::validator_for(schema)
        .err()
        .map(|error| error.to_string())
}

/// What is wrong with `value` under JSON Schema `schema` (none when it is valid), bounded
/// like the gateway's own issues: for outputs that must match a schema (an agent's
/// `output.schema`, a workflow node's).
pub fn schema_issues(schema: &Value, value: &Value) -> Vec<Issue> {
    match jsonschema::validator_for(schema) {
        Ok(validator) => validator
            .iter_errors(value)
            .map(|e| bounded_issue(issue_from(&e)))
            .collect(),
        Err(error) => vec![Issue {
            path: String::new(),
            expected: "a usable JSON Schema".into(),
            found: "an invalid schema".into(),
            message: error.to_string(),
        }],
    }
}
