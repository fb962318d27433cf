//! Session history for the prompt: the persisted transcript trimmed to a token budget.
//!
//! Trimming drops the oldest *units* first, where a unit is a user message, an assistant
//! answer, or an assistant message asking for tools together with all of its tool results —
//! so a tool call is never separated from its result.

use keel_types::{Message, Role};

/// Rough tokens of a message: four characters a token, plus a little per message.
pub fn estimate_tokens(message: &Message) -> u64 {
    let chars = message.content.len()
        + message
            .tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum::<usize>();
    (chars as u64).div_ceil(4) + 4
}

/// The newest part of `transcript` that fits in `budget_tokens`, cut at unit boundaries.
pub fn trim_history(transcript: Vec<Message>, budget_tokens: u64) -> Vec<Message> {
    let units = units(transcript);
    let mut total: u64 = units.iter().map(|u| u.1).sum();
    let mut skip = 0;
    while total > budget_tokens && skip < units.len() {
        total -= units[skip].1;
        skip += 1;
    }
    units.into_iter().skip(skip).flat_map(|u| u.0).collect()
}

/// Splits a transcript into units with their token estimates.
fn units(transcript: Vec<Message>) -> Vec<(Vec<Message>, u64)> {
    let mut units: Vec<(Vec<Message>, u64)> = Vec::new();
    for message in transcript {
        let tokens = estimate_tokens(&message);
        let joins_previous = message.role == Role::Tool
            && units.last().is_some_and(|(unit, _)| {
                unit.first()
                    .is_some_and(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
            });
        match units.last_mut() {
            Some((unit, sum)) if joins_previous => {
                unit.push(message);
                *sum += tokens;
            }
            _ => units.push((vec![message], tokens)),
        }
    }
    units
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use keel_types::ToolCall;

    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    fn transcript() -> Vec<Message> {
        vec![
            Message::user("a".repeat(400)),
            Message::assistant("", vec![call("1"), call("2")]),
            Message::tool_result("1", "x".repeat(400)),
            Message::tool_result("2", "y".repeat(40)),
            Message::assistant("first answer", vec![]),
            Message::user("second question"),
            Message::assistant("second answer", vec![]),
        ]
    }

    #[test]
    fn everything_fits_in_a_large_budget() {
        assert_eq!(trim_history(transcript(), 10_000), transcript());
    }

    #[test]
    fn trimming_never_separates_a_tool_call_from_its_results() {
        for budget in 0..400 {
            let kept = trim_history(transcript(), budget);
            let total: u64 = kept.iter().map(estimate_tokens).sum();
            assert!(total <= budget, "budget {budget}: {total}");
            for (i, message) in kept.iter().enumerate() {
                if message.role == Role::Tool {
                    let owner = kept[..i]
                        .iter()
                        .rev()
                        .find(|m| m.role != Role::Tool)
                        .expect("a tool result follows its call");
                    let id = message.tool_call_id.as_deref().unwrap_or_default();
                    assert!(
                        owner.tool_calls.iter().any(|c| c.id == id),
                        "budget {budget}"
                    );
                }
                if !message.tool_calls.is_empty() {
                    let results = kept[i + 1..]
                        .iter()
                        .take_while(|m| m.role == Role::Tool)
                        .count();
                    assert_eq!(results, message.tool_calls.len(), "budget {budget}");
                }
            }
        }
    }

    #[test]
    fn the_oldest_units_go_first() {
        let kept = trim_history(transcript(), 40);
        assert_eq!(
            kept.first().map(|m| m.content.as_str()),
            Some("first answer")
        );
        assert_eq!(kept.len(), 3);
    }
}
