//! What hooks answer: one hook's [`HookOutcome`] parsed from the Claude Code hook protocol
//! ([`parse_output`]), and the [`Combined`] answer of every hook of one event ([`combine`]).
//!
//! A hook's stdout (or http body) is empty — no opinion — or a JSON object:
//!
//! ```json
//! { "continue": true, "stopReason": "…", "decision": "block", "reason": "…",
//!   "hookSpecificOutput": { "hookEventName": "PreToolUse",
//!     "permissionDecision": "allow|deny|ask", "permissionDecisionReason": "…",
//!     "updatedInput": { … }, "additionalContext": "…" } }
//! ```
//!
//! The older top-level `decision: "approve"` is read as `permissionDecision: "allow"`. Fields
//! Keel does not act on (`suppressOutput`, `systemMessage`, …) are accepted and ignored.

use keel_types::HookEvent;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::HookError;

/// Longest stdout excerpt kept in an [`HookError::InvalidOutput`].
const EXCERPT_CHARS: usize = 200;

/// A hook's answer to a tool call's permission question (`permissionDecision`): the same
/// `allow | ask | deny` a policy rule gives, ordered by strictness, so hook and policy
/// decisions combine without translation.
pub use keel_types::PolicyDecision as PermissionDecision;

/// What one hook said. The default (every field empty) is "no opinion".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookOutcome {
    /// `hookSpecificOutput.permissionDecision` (or the older `decision: "approve"`).
    pub decision: Option<PermissionDecision>,
    /// `hookSpecificOutput.permissionDecisionReason`.
    pub decision_reason: Option<String>,
    /// `hookSpecificOutput.updatedInput`: a new tool input (a JSON object).
    pub updated_input: Option<Map<String, Value>>,
    /// `hookSpecificOutput.additionalContext`: text for the model.
    pub additional_context: Option<String>,
    /// Block the prompt or call, with the reason (`decision: "block"` + `reason`, or exit
    /// code 2 + stderr); empty when the hook gave none.
    pub block: Option<String>,
    /// Stop the run, with the reason (`continue: false` + `stopReason`); empty when the hook
    /// gave none.
    pub stop: Option<String>,
}

impl HookOutcome {
    /// Whether the hook expressed no opinion at all.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// A block with `reason`.
    pub fn blocked(reason: impl Into<String>) -> Self {
        Self {
            block: Some(reason.into()),
            ..Self::default()
        }
    }

    /// The outcome without anything AI-facing (context, input rewrites, permission
    /// decisions, blocks): what a non-blocking event may act on. Only `stop` survives.
    pub fn without_ai_facing(self) -> Self {
        Self {
            stop: self.stop,
            ..Self::default()
        }
    }
}

/// The raw protocol object.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawOutput {
    #[serde(rename = "continue", default)]
    continue_: Option<bool>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    decision: Option<RawDecision>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    hook_specific_output: Option<RawSpecific>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawDecision {
    Approve,
    Block,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSpecific {
    #[serde(default)]
    permission_decision: Option<PermissionDecision>,
    #[serde(default)]
    permission_decision_reason: Option<String>,
    #[serde(default)]
    updated_input: Option<Map<String, Value>>,
    #[serde(default)]
    additional_context: Option<String>,
}

/// Parses what a hook wrote on stdout (or returned as its http body): blank is no opinion,
/// anything else must be a protocol JSON object.
pub fn parse_output(text: &str) -> Result<HookOutcome, HookError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(HookOutcome::default());
    }
    let invalid = |message: String| HookError::InvalidOutput {
        message,
        excerpt: excerpt(trimmed),
    };
    let value: Value = serde_json::from_str(trimmed)
        .map_err(|e| invalid(format!("the output is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(invalid("the output is JSON but not an object".to_owned()));
    }
    let raw: RawOutput = serde_json::from_value(value)
        .map_err(|e| invalid(format!("the output is not a hook answer: {e}")))?;
    Ok(outcome_of(raw))
}

fn outcome_of(raw: RawOutput) -> HookOutcome {
    let mut outcome = HookOutcome::default();
    match raw.decision {
        Some(RawDecision::Approve) => {
            outcome.decision = Some(PermissionDecision::Allow);
            outcome.decision_reason = raw.reason;
        }
        Some(RawDecision::Block) => outcome.block = Some(raw.reason.unwrap_or_default()),
        None => {}
    }
    if raw.continue_ == Some(false) {
        outcome.stop = Some(raw.stop_reason.unwrap_or_default());
    }
    if let Some(specific) = raw.hook_specific_output {
        if specific.permission_decision.is_some() {
            outcome.decision = specific.permission_decision;
            outcome.decision_reason = specific.permission_decision_reason;
        }
        outcome.updated_input = specific.updated_input;
        outcome.additional_context = specific.additional_context;
    }
    outcome
}

/// The first characters of `text`, marked when cut.
pub(crate) fn excerpt(text: &str) -> String {
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(EXCERPT_CHARS).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// The answer of every hook of one event, in declaration order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Combined {
    /// The strictest decision: deny beats ask beats allow.
    pub decision: Option<PermissionDecision>,
    /// The reason of the first hook that gave the winning decision.
    pub decision_reason: Option<String>,
    /// Every hook's `updatedInput`, later ones applied key by key over earlier ones.
    pub updated_input: Option<Map<String, Value>>,
    /// Every hook's `additionalContext`, in order, one per line.
    pub additional_context: Option<String>,
    /// The first block's reason.
    pub block: Option<String>,
    /// The first stop's reason.
    pub stop: Option<String>,
}

/// Folds the outcomes of one event's hooks, in declaration order: deny beats ask beats allow
/// (the reason comes from the first hook with the winning decision); the first block and the
/// first stop win; a later `updatedInput` is applied key by key over the earlier ones; the
/// `additionalContext` texts are joined with newlines.
pub fn combine(outcomes: impl IntoIterator<Item = HookOutcome>) -> Combined {
    let mut combined = Combined::default();
    for outcome in outcomes {
        if let Some(decision) = outcome.decision
            && combined.decision.is_none_or(|current| decision > current)
        {
            combined.decision = Some(decision);
            combined.decision_reason = outcome.decision_reason;
        }
        if let Some(input) = outcome.updated_input {
            combined
                .updated_input
                .get_or_insert_with(Map::new)
                .extend(input);
        }
        if let Some(context) = outcome.additional_context {
            match &mut combined.additional_context {
                Some(all) => {
                    all.push('\n');
                    all.push_str(&context);
                }
                None => combined.additional_context = Some(context),
            }
        }
        if combined.block.is_none() {
            combined.block = outcome.block;
        }
        if combined.stop.is_none() {
            combined.stop = outcome.stop;
        }
    }
    combined
}

/// Whether hooks of `event` may change the current turn (`PromptSubmit`, `PreToolUse`,
/// `RunStart`). `PostToolUse`, `SessionStop`, `RunEnd` and `SessionEnd` are for logs, caches
/// and metrics.
pub fn is_blocking(event: HookEvent) -> bool {
    match event {
        HookEvent::PromptSubmit | HookEvent::PreToolUse | HookEvent::RunStart => true,
        HookEvent::PostToolUse
        | HookEvent::SessionStop
        | HookEvent::RunEnd
        | HookEvent::SessionEnd => false,
    }
}

impl Combined {
    /// The combined answer without anything AI-facing — `additionalContext`, `updatedInput`,
    /// permission decisions and blocks (whose reason would reach the model) — which a non-blocking
    /// event must ignore (`docs/tool-gateway.md#hooks`). A stop (`continue: false`) is kept: it
    /// halts the run, it tells the model nothing.
    pub fn without_ai_facing(self) -> Self {
        Self {
            stop: self.stop,
            ..Self::default()
        }
    }

    /// The combined answer as `event` may act on it: unchanged for blocking events, without
    /// anything AI-facing ([`Combined::without_ai_facing`]) for the others.
    pub fn for_event(self, event: HookEvent) -> Self {
        if is_blocking(event) {
            self
        } else {
            self.without_ai_facing()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_output_is_no_opinion() {
        assert!(parse_output("  \n").unwrap().is_empty());
        assert!(parse_output("{}").unwrap().is_empty());
    }

    #[test]
    fn older_approve_and_block_are_read() {
        let approve = parse_output(r#"{"decision":"approve","reason":"ok"}"#).unwrap();
        assert_eq!(approve.decision, Some(PermissionDecision::Allow));
        let block = parse_output(r#"{"decision":"block"}"#).unwrap();
        assert_eq!(block.block.as_deref(), Some(""));
    }

    #[test]
    fn wrong_shapes_are_invalid_output() {
        for text in [
            "not json",
            "[1]",
            r#"{"decision":"maybe"}"#,
            r#"{"hookSpecificOutput":{"permissionDecision":"perhaps"}}"#,
            r#"{"hookSpecificOutput":{"updatedInput":"x"}}"#,
        ] {
            assert!(
                matches!(parse_output(text), Err(HookError::InvalidOutput { .. })),
                "{text}"
            );
        }
    }
}
