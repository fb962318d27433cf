//! Session history for the prompt: the persisted transcript trimmed to a token budget.
//!
//! Trimming drops the oldest *units* first, where a unit is a user message, an assistant
//! answer, or an assistant message asking for tools together with all of its tool results —
//! so a tool call is never separated from its result.

use keel_types::{Message, RequestId, Role, SessionMessage, SessionSummary};

/// How a session's summary begins in a run's history.
pub const SESSION_SUMMARY_HEADING: &str =
    "[Summary of this session's earlier turns, written to keep its history short]";

/// A session's transcript as a run's history: without `skip`'s turn, the messages the
/// session's `summary` stands for given way to it (always sent, first), the rest trimmed to
/// `budget_tokens`.
pub fn session_history(
    transcript: Vec<SessionMessage>,
    summary: Option<&SessionSummary>,
    skip: Option<&RequestId>,
    budget_tokens: u64,
) -> Vec<Message> {
    let through = summary.map_or(0, |s| s.through_seq);
    let rest: Vec<Message> = transcript
        .into_iter()
        .filter(|m| m.seq > through && Some(&m.request_id) != skip)
        .map(|m| m.message)
        .collect();
    let mut history: Vec<Message> = summary
        .map(|s| Message::user(format!("{SESSION_SUMMARY_HEADING}\n{}", s.text.trim())))
        .into_iter()
        .collect();
    history.extend(trim_history(rest, budget_tokens));
    history
}

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

/// Checks a conversation a caller supplies with a request against what the model wire
/// accepts: system and user messages have content; an assistant message has content or tool
/// calls (with ids and names, ids unique); a tool message answers, once, a call of the
/// assistant message just before it (only tool messages between); and every call of an
/// assistant message is answered before the next other message. The error names the index.
pub fn validate_history(history: &[Message]) -> Result<(), String> {
    // The calls of the last assistant message still waiting for a result, with its index.
    let mut open: Option<(usize, Vec<&str>)> = None;
    for (index, message) in history.iter().enumerate() {
        let at = |problem: String| format!("history[{index}]: {problem}");
        if message.role != Role::Tool
            && let Some((asked_at, calls)) = open.take()
            && let Some(call) = calls.first()
        {
            return Err(format!(
                "history[{asked_at}]: tool call `{call}` has no tool result before history[{index}]"
            ));
        }
        let role = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        if message.role != Role::Assistant && !message.tool_calls.is_empty() {
            return Err(at(format!("a {role} message cannot carry tool calls")));
        }
        if message.role != Role::Tool && message.tool_call_id.is_some() {
            return Err(at(format!("a {role} message cannot answer a tool call")));
        }
        match message.role {
            Role::System | Role::User if message.content.trim().is_empty() => {
                return Err(at(format!("a {role} message needs content")));
            }
            Role::System | Role::User => {}
            Role::Assistant => {
                if message.content.trim().is_empty() && message.tool_calls.is_empty() {
                    return Err(at("an assistant message needs content or tool calls".into()));
                }
                let mut calls: Vec<&str> = Vec::new();
                for call in &message.tool_calls {
                    if call.id.is_empty() || call.name.is_empty() {
                        return Err(at("every tool call needs an id and a name".into()));
                    }
                    if calls.contains(&call.id.as_str()) {
                        return Err(at(format!("tool call id `{}` is used twice", call.id)));
                    }
                    calls.push(&call.id);
                }
                if !calls.is_empty() {
                    open = Some((index, calls));
                }
            }
            Role::Tool => {
                let Some(id) = message.tool_call_id.as_deref().filter(|id| !id.is_empty()) else {
                    return Err(at(
                        "a tool message needs the id of the call it answers".into()
                    ));
                };
                let answered = match &mut open {
                    Some((_, calls)) => match calls.iter().position(|c| *c == id) {
                        Some(position) => {
                            calls.remove(position);
                            true
                        }
                        None => false,
                    },
                    None => false,
                };
                if !answered {
                    return Err(at(format!(
                        "tool result for `{id}` does not answer an unanswered call of the assistant message before it"
                    )));
                }
            }
        }
    }
    if let Some((asked_at, calls)) = open
        && let Some(call) = calls.first()
    {
        return Err(format!(
            "history[{asked_at}]: tool call `{call}` has no tool result"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn a_well_formed_history_passes_and_each_mistake_names_its_index() {
        let good = transcript();
        assert_eq!(validate_history(&good), Ok(()));
        assert_eq!(validate_history(&[]), Ok(()));
        let cases: Vec<(Vec<Message>, &str)> = vec![
            (
                vec![Message::user("  ")],
                "history[0]: a user message needs content",
            ),
            (
                vec![Message::user("q"), Message::assistant("", vec![])],
                "history[1]: an assistant message needs content",
            ),
            (
                vec![Message::user("q"), Message::tool_result("1", "x")],
                "history[1]: tool result for `1` does not answer",
            ),
            (
                vec![
                    Message::assistant("", vec![call("1"), call("2")]),
                    Message::tool_result("1", "x"),
                    Message::user("next"),
                ],
                "history[0]: tool call `2` has no tool result before history[2]",
            ),
            (
                vec![
                    Message::assistant("", vec![call("1")]),
                    Message::tool_result("1", "x"),
                    Message::tool_result("1", "x"),
                ],
                "history[2]: tool result for `1`",
            ),
            (
                vec![Message::assistant("", vec![call("1")])],
                "history[0]: tool call `1` has no tool result",
            ),
            (
                vec![Message::assistant("", vec![call("1"), call("1")])],
                "history[0]: tool call id `1` is used twice",
            ),
        ];
        for (history, expected) in cases {
            let error = validate_history(&history).unwrap_err();
            assert!(error.starts_with(expected), "{error} (expected {expected})");
        }
    }
}
