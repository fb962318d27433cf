//! Repairs the gateway tries before it blocks a call (`docs/tool-gateway.md#repair`).
//!
//! Each repair is small, deterministic and recorded as a [`Repair`] so the run log and the
//! model can see exactly what changed:
//!
//! - [`name`] maps a misspelled tool name onto a tool of the caller's inventory (case first,
//!   then a unique close match) — never onto a tool outside it;
//! - [`schema`] walks the arguments alongside the tool's JSON Schema and fixes values that
//!   violate their declared type or enum (coercions, enum case, a lone value for an array,
//!   JSON text for an object), drops undeclared properties and optional ones sent as a
//!   `null` their schema does not allow, and fills required ones that declare a default;
//! - [`model`] builds the request for an optional repair model and reads its answer;
//! - [`numbers`] finds integers beyond 64 bits in JSON text, which no repair decodes (they
//!   would be rounded) and the gateway blocks.
//!
//! Nothing here decides whether a call runs: the gateway re-validates the repaired arguments
//! with the tool's compiled schema and blocks what is still wrong. [`note`] renders the
//! repairs as the short text the model receives with the tool result.

use keel_types::{Repair, RepairKind};
use serde_json::Value;

pub mod model;
pub mod name;
pub mod numbers;
pub mod schema;

pub use name::repair_tool_name;
pub use schema::{decode_arguments, repair_arguments};

/// Longest rendering of a value inside a repair note.
const MAX_NOTE_VALUE_CHARS: usize = 60;

/// The text a model receives after a repaired call ran, e.g. `the gateway repaired this call:
/// /days "3" → 3 (coerce_number); tool name "Get_Weather" → "get_weather"`.
pub fn note(repairs: &[Repair]) -> String {
    let parts: Vec<String> = repairs.iter().map(describe).collect();
    format!("the gateway repaired this call: {}", parts.join("; "))
}

fn describe(repair: &Repair) -> String {
    let place = match repair.path.as_str() {
        "" => "arguments",
        path => path,
    };
    let kind = repair.kind;
    match kind {
        RepairKind::ToolName => {
            format!("tool name {} → {}", short(&repair.from), short(&repair.to))
        }
        RepairKind::DropUnknown | RepairKind::DropNull => {
            format!("{place} {} → removed ({kind})", short(&repair.from))
        }
        RepairKind::FillDefault => format!("{place} missing → {} ({kind})", short(&repair.to)),
        RepairKind::DecodeJsonString => format!("{place} decoded from a JSON string ({kind})"),
        RepairKind::RepairModel => format!("{place} → {} ({kind})", short(&repair.to)),
        RepairKind::CoerceNumber
        | RepairKind::CoerceBoolean
        | RepairKind::CoerceString
        | RepairKind::EnumCase
        | RepairKind::WrapArray
        | RepairKind::ToolCheck => format!(
            "{place} {} → {} ({kind})",
            short(&repair.from),
            short(&repair.to)
        ),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= MAX_NOTE_VALUE_CHARS {
        return text;
    }
    let mut out: String = text.chars().take(MAX_NOTE_VALUE_CHARS).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn repair(path: &str, kind: RepairKind, from: Value, to: Value) -> Repair {
        Repair {
            path: path.into(),
            kind,
            from,
            to,
        }
    }

    #[test]
    fn note_lists_every_repair_in_order() {
        let text = note(&[
            repair("/days", RepairKind::CoerceNumber, json!("3"), json!(3)),
            repair(
                "",
                RepairKind::ToolName,
                json!("Get_Weather"),
                json!("get_weather"),
            ),
            repair("/x", RepairKind::DropUnknown, json!(true), Value::Null),
            repair("/unit", RepairKind::FillDefault, Value::Null, json!("c")),
        ]);
        assert_eq!(
            text,
            "the gateway repaired this call: /days \"3\" → 3 (coerce_number); \
             tool name \"Get_Weather\" → \"get_weather\"; /x true → removed (drop_unknown); \
             /unit missing → \"c\" (fill_default)"
        );
    }

    #[test]
    fn long_values_are_shortened_in_the_note() {
        let text = note(&[repair(
            "",
            RepairKind::RepairModel,
            json!({}),
            json!({ "text": "x".repeat(200) }),
        )]);
        assert!(text.ends_with("… (repair_model)"), "{text}");
        assert!(text.chars().count() < 140, "{text}");
    }
}
