//! The gateway's verdict on one call, and the only transitions open to whoever holds it.

use keel_types::{GuardDecision, Issue, Repair, ToolCall};
use serde_json::{Value, json};

use super::issues::quote;
use crate::repair;

/// The gateway's verdict on one call.
///
/// The fields are private so that the invariant "a tool only ever sees arguments that passed
/// its schema" holds by construction: only [`Gateway::guard`](super::Gateway::guard) makes a verdict, and the two
/// transitions open to a caller can only take a call *away* from running ([`Guarded::refuse`])
/// or hand it arguments the gateway itself re-checked ([`Guarded::adopt_recheck`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    call_id: String,
    /// The tool name as the model sent it.
    requested: String,
    /// The tool that runs: `requested`, or the inventory tool its name was repaired to.
    tool: String,
    decision: GuardDecision,
    /// Parsed, valid (possibly repaired) arguments; present unless blocked.
    arguments: Option<Value>,
    /// Why the call is blocked. After repairs, these are the issues that remain (paths and
    /// values refer to the repaired arguments).
    issues: Vec<Issue>,
    /// What was changed to make the call valid (decision `repaired`); on a blocked call, the
    /// repairs that were tried before the remaining issues blocked it.
    repairs: Vec<Repair>,
    /// Why a call the checks accepted was refused afterwards (policy, a hook, a human); the
    /// model receives it instead of the issues.
    refusal: Option<String>,
}

impl Guarded {
    /// A verdict on `call` (only the gateway makes them).
    pub(super) fn new(
        call: &ToolCall,
        tool: String,
        decision: GuardDecision,
        arguments: Option<Value>,
        issues: Vec<Issue>,
        repairs: Vec<Repair>,
    ) -> Self {
        Self {
            call_id: call.id.clone(),
            requested: call.name.clone(),
            tool,
            decision,
            arguments,
            issues,
            repairs,
            refusal: None,
        }
    }

    /// The verdict on a delegation to a remote agent (`RemoteAgent`): no tool runs and no
    /// schema applies (the remote agent takes text), so only governance — policy, hooks, a
    /// human — decides it, as it decides a tool call with side effects.
    pub fn delegation(call_id: &str, agent: &str, arguments: Value) -> Self {
        Self {
            call_id: call_id.to_owned(),
            requested: agent.to_owned(),
            tool: agent.to_owned(),
            decision: GuardDecision::Accepted,
            arguments: Some(arguments),
            issues: Vec::new(),
            repairs: Vec::new(),
            refusal: None,
        }
    }

    /// The id of the call.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The tool name as the caller sent it.
    pub fn requested(&self) -> &str {
        &self.requested
    }

    /// The tool that runs: the requested name, or the inventory tool it was repaired to.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Accepted, repaired or blocked.
    pub fn decision(&self) -> GuardDecision {
        self.decision
    }

    /// The valid (possibly repaired) arguments; `None` once the call is blocked.
    pub fn arguments(&self) -> Option<&Value> {
        self.arguments.as_ref()
    }

    /// What blocks the call (empty when it is allowed, or refused for another reason).
    pub fn issues(&self) -> &[Issue] {
        &self.issues
    }

    /// What the gateway changed to make the call valid.
    pub fn repairs(&self) -> &[Repair] {
        &self.repairs
    }

    /// Why a call the checks accepted was refused afterwards, if it was.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// Whether the call may run.
    pub fn is_allowed(&self) -> bool {
        self.decision != GuardDecision::Blocked
    }

    /// Refuses the call for `reason` (policy, a hook, a human): it is blocked from now on, its
    /// arguments are dropped, and the model receives `reason` as the tool's result.
    pub fn refuse(&mut self, reason: impl Into<String>) {
        self.decision = GuardDecision::Blocked;
        self.arguments = None;
        self.refusal = Some(reason.into());
    }

    /// Takes the gateway's verdict on this call checked again with new arguments (a hook
    /// rewrote them): the call goes on with the re-checked arguments, keeping its own
    /// decision and repairs, or is refused with the re-check's issues. A verdict on another
    /// call, or on another tool, refuses this one.
    pub fn adopt_recheck(&mut self, recheck: Guarded) {
        if !self.is_allowed() {
            return;
        }
        if recheck.call_id != self.call_id || recheck.tool != self.tool {
            self.refuse(format!(
                "tool call refused: the re-checked call ({} {}) is not this call ({} {})",
                recheck.call_id, recheck.tool, self.call_id, self.tool
            ));
            return;
        }
        match recheck
            .arguments
            .filter(|_| recheck.decision != GuardDecision::Blocked)
        {
            Some(arguments) => self.arguments = Some(arguments),
            None => {
                let message = blocked_message(&recheck.requested, &recheck.issues);
                self.refuse(message);
            }
        }
    }

    /// The tool result the model receives for a blocked call: the refusal, or the issues so
    /// it can correct itself.
    pub fn blocked_message(&self) -> String {
        match &self.refusal {
            Some(refusal) => refusal.clone(),
            None => blocked_message(&self.requested, &self.issues),
        }
    }

    /// For a repaired call, a short text telling the model what the gateway changed (to be
    /// appended to the tool result), e.g. `the gateway repaired this call: /days "3" → 3
    /// (coerce_number); tool name "Get_Weather" → "get_weather"`.
    pub fn repair_note(&self) -> Option<String> {
        (self.decision == GuardDecision::Repaired && !self.repairs.is_empty())
            .then(|| repair::note(&self.repairs))
    }
}

/// The tool result a model receives for a blocked call of `tool` (also rebuilt from a run's
/// log when it is resumed): a headline saying what kind of problem blocked it
/// ([`super::headline`]), the issues and a hint.
pub fn blocked_message(tool: &str, issues: &[Issue]) -> String {
    json!({
        "error": super::headline::headline(issues),
        "tool": quote(tool),
        "issues": issues,
        "hint": super::headline::hint(issues),
    })
    .to_string()
}
