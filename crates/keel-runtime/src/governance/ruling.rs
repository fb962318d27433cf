//! The governance ruling on one call the gateway accepted: from what policy decided and what
//! the `PreToolUse` hooks answered, whether the call is refused, stops the run, waits for a
//! human or proceeds — and with which rewrite. One pure function
//! ([`Governance::rule`](super::Governance::rule)) for a run's calls, a task's create and a
//! task's run; each caller keeps only how it records the ruling and how it asks a human
//! (`agent_loop/tools.rs`, `kernel/tasks.rs`).
//!
//! The order is fixed: a policy `deny` refuses at once (no hook runs); then the hooks'
//! failures and answers, strictest first — a failure with `onError: fail-run`, a failure with
//! `onError: deny`, a stop, a block, a hook's `deny` —; a hook's `ask` asks a human, a hook's
//! `allow` settles a policy `ask`; otherwise policy's `ask` stands. A rewrite travels with an
//! ask or a proceed: the caller passes the rewritten arguments through the gateway again
//! before anything else.

use keel_tools::hooks::PermissionDecision;
use keel_tools::policy::PolicyVerdict;
use keel_types::PolicyDecision;
use serde_json::{Map, Value};

use super::{Governance, HookRound};

/// What the `PreToolUse` hooks said about a call, as the ruling takes it.
pub(crate) enum HookAnswer<'a> {
    /// Not asked yet: the ruling on policy alone ([`Ruling::AskHooks`] unless policy denied).
    NotAsked,
    /// The hooks' round for this call.
    Round(&'a HookRound),
    /// A task's run that does not ask its hooks again (no `doubleCheckOnRun`): the hooks'
    /// decision at the task's create stands, with the reason kept on the task.
    AtCreate {
        decision: Option<PermissionDecision>,
        reason: Option<&'a str>,
    },
}

/// Why a call is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A policy rule or the permission mode denied it (`source` names what decided).
    Policy { source: String },
    /// A hook failed and its `onError` is `deny`.
    HookFailed,
    /// A hook blocked it.
    Blocked,
    /// A hook answered `deny`.
    HookDenied,
}

impl Refusal {
    /// What the model (or the caller) is told was done to the call: "tool call {what}".
    pub(crate) fn what(&self) -> String {
        match self {
            Self::Policy { source } => keel_types::governance::denied_by_policy(source),
            Self::HookFailed => "denied because a hook failed".to_owned(),
            Self::Blocked => "blocked by a hook".to_owned(),
            Self::HookDenied => "denied by a hook".to_owned(),
        }
    }
}

/// The ruling on one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ruling {
    /// Policy allows or asks and the hooks have not been asked: run them, then rule again.
    AskHooks,
    /// The call is refused.
    Refuse {
        refusal: Refusal,
        reason: Option<String>,
    },
    /// A hook stopped the run (or failed with `onError: fail-run`): the call is refused and
    /// the run ends after this round; a task is refused.
    Stop { reason: String },
    /// A human decides: `asked_by` is what asked (a policy's source, or `hook`).
    Ask {
        asked_by: String,
        reason: Option<String>,
        rewrite: Option<Map<String, Value>>,
    },
    /// The call runs.
    Proceed { rewrite: Option<Map<String, Value>> },
}

impl Governance {
    /// Rules on a call: see the module's documentation for the order. Pure: it records and
    /// asks nothing.
    pub(crate) fn rule(policy: &PolicyVerdict, hooks: HookAnswer<'_>) -> Ruling {
        if policy.decision == PolicyDecision::Deny {
            return Ruling::Refuse {
                refusal: Refusal::Policy {
                    source: policy.source.clone(),
                },
                reason: policy.reason.clone(),
            };
        }
        let policy_ask = (policy.decision == PolicyDecision::Ask)
            .then(|| (policy.source.clone(), policy.reason.clone()));
        let (decision, decision_reason, rewrite) = match hooks {
            HookAnswer::NotAsked => return Ruling::AskHooks,
            HookAnswer::AtCreate { decision, reason } => {
                (decision, reason.map(str::to_owned), None)
            }
            HookAnswer::Round(round) => {
                if let Some(reason) = &round.fail {
                    return Ruling::Stop {
                        reason: reason.clone(),
                    };
                }
                if let Some(reason) = &round.denied {
                    return refuse(Refusal::HookFailed, Some(reason.clone()));
                }
                let hooks = &round.combined;
                if let Some(reason) = &hooks.stop {
                    return Ruling::Stop {
                        reason: reason.clone(),
                    };
                }
                if let Some(reason) = &hooks.block {
                    return refuse(Refusal::Blocked, Some(reason.clone()));
                }
                if hooks.decision == Some(PermissionDecision::Deny) {
                    return refuse(Refusal::HookDenied, hooks.decision_reason.clone());
                }
                (
                    hooks.decision,
                    hooks.decision_reason.clone(),
                    hooks.updated_input.clone(),
                )
            }
        };
        let ask = match decision {
            // A hook's ask names the hook; without a reason of its own, policy's (if it asked too)
            // says why.
            Some(PermissionDecision::Ask) => Some((
                "hook".to_owned(),
                decision_reason.or_else(|| policy_ask.and_then(|(_, reason)| reason)),
            )),
            // A hook's allow settles a policy `ask`, as in Claude Code.
            Some(PermissionDecision::Allow) => None,
            _ => policy_ask,
        };
        match ask {
            Some((asked_by, reason)) => Ruling::Ask {
                asked_by,
                reason,
                rewrite,
            },
            None => Ruling::Proceed { rewrite },
        }
    }
}

fn refuse(refusal: Refusal, reason: Option<String>) -> Ruling {
    Ruling::Refuse { refusal, reason }
}

#[cfg(test)]
mod tests;
