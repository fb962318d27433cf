//! The governance vocabulary (`docs/tool-gateway.md#policy` and `#hooks`): run-level
//! [`PermissionMode`]s, the [`PolicyDecision`] a rule (or a hook) gives a tool call, and the
//! [`HookEvent`]s hooks run at.
//!
//! The workspace reads them from YAML, the policy engine and the hook runner decide with them,
//! events record them and the surfaces parse them from flags and request bodies — all through
//! these types, so each is written one way everywhere (`as_str`, `FromStr`, serde).

use serde::{Deserialize, Serialize};

use crate::wire_name::wire_names;

wire_names! {
    /// What a failing hook (error exit, timeout, bad output) does.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    pub enum HookOnError: "hook onError" {
        /// Fail the run.
        FailRun = "fail-run",
        /// Ignore the hook.
        Skip = "skip",
        /// Deny the tool call (tool events).
        Deny = "deny",
        /// Record a warning and go on.
        #[default]
        Warn = "warn",
    }
}

wire_names! {
    /// Run-level permission modes.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    pub enum PermissionMode: "permission mode" {
        /// Rules decide; unresolved calls of side-effecting tools ask.
        #[default]
        Default = "default",
        /// File edits inside the workspace are approved automatically.
        AcceptEdits = "acceptEdits",
        /// What would ask is denied.
        DontAsk = "dontAsk",
        /// No side-effecting tool runs.
        Plan = "plan",
    }
}

wire_names! {
    /// A policy decision.
    // Declared in order of strictness (allow < ask < deny), which `Ord` follows. Not in the
    // doc comment: that becomes the workspace schema's description.
    #[derive(
        Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
    )]
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    pub enum PolicyDecision: "policy decision" {
        Allow = "allow",
        Ask = "ask",
        Deny = "deny",
    }
}

wire_names! {
    /// When a hook runs. Aliases: `UserPromptSubmit`, `PreAbilityCall`, `PostAbilityCall`, `Stop`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
    pub enum HookEvent: "hook event" {
        PromptSubmit = "PromptSubmit" | "UserPromptSubmit",
        PreToolUse = "PreToolUse" | "PreAbilityCall",
        PostToolUse = "PostToolUse" | "PostAbilityCall",
        SessionStop = "SessionStop" | "Stop",
        RunStart = "RunStart",
        RunEnd = "RunEnd",
        SessionEnd = "SessionEnd",
    }
}

impl HookEvent {
    /// The event's name in a hook's input (`hook_event_name`): Claude Code's name where Claude
    /// Code has the event (`UserPromptSubmit`, `Stop`, `PreToolUse`, `PostToolUse`,
    /// `SessionEnd`), so hook scripts written for it work unchanged; Keel's own name otherwise
    /// (`RunStart`, `RunEnd`).
    pub fn hook_input_name(self) -> &'static str {
        match self {
            Self::PromptSubmit => "UserPromptSubmit",
            Self::SessionStop => "Stop",
            other => other.as_str(),
        }
    }
}

/// The tool result a call refused by governance gives the model (and every surface that shows
/// the call's result): `{"error": "tool call {what}", "reason"}`, e.g. `what` = `denied by the
/// human reviewer`.
pub fn refusal_text(what: &str, reason: Option<&str>) -> String {
    serde_json::json!({
        "error": format!("tool call {what}"),
        "reason": reason,
    })
    .to_string()
}

/// What a refused call was refused by, as [`refusal_text`] words it: a human's denial.
pub const DENIED_BY_HUMAN: &str = "denied by the human reviewer";

/// [`refusal_text`]'s words for a call a policy rule denied (`source` names the rule).
pub fn denied_by_policy(source: &str) -> String {
    format!("denied by policy ({source})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_written_in_camel_case() {
        let names: Vec<String> = PermissionMode::ALL.iter().map(|m| m.to_string()).collect();
        assert_eq!(names, ["default", "acceptEdits", "dontAsk", "plan"]);
        assert_eq!(
            serde_json::to_string(&PermissionMode::DontAsk).unwrap(),
            "\"dontAsk\""
        );
        assert_eq!("plan".parse(), Ok(PermissionMode::Plan));
    }

    #[test]
    fn an_unknown_mode_names_the_accepted_ones() {
        let error = "yolo".parse::<PermissionMode>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown permission mode `yolo` (one of: default, acceptEdits, dontAsk, plan)"
        );
    }

    #[test]
    fn decisions_order_by_strictness() {
        assert!(PolicyDecision::Allow < PolicyDecision::Ask);
        assert!(PolicyDecision::Ask < PolicyDecision::Deny);
        assert_eq!(PolicyDecision::Deny.as_str(), "deny");
    }

    #[test]
    fn hook_event_aliases_parse_as_serde_reads_them() {
        for (alias, event) in [
            ("UserPromptSubmit", HookEvent::PromptSubmit),
            ("PreAbilityCall", HookEvent::PreToolUse),
            ("PostAbilityCall", HookEvent::PostToolUse),
            ("Stop", HookEvent::SessionStop),
        ] {
            assert_eq!(alias.parse(), Ok(event));
            let read: HookEvent = serde_json::from_value(serde_json::json!(alias)).unwrap();
            assert_eq!(read, event);
            assert_ne!(event.as_str(), alias, "written by its Keel name");
        }
    }

    #[test]
    fn hook_inputs_name_events_as_claude_code_does() {
        let names: Vec<&str> = HookEvent::ALL.iter().map(|e| e.hook_input_name()).collect();
        assert_eq!(
            names,
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUse",
                "Stop",
                "RunStart",
                "RunEnd",
                "SessionEnd"
            ]
        );
    }
}
