//! The ruling as a table: every combination of policy's decision × what the hooks can answer
//! (each failure mode, stop, block, decision, with and without a reason) × a rewrite, plus a
//! task's run that keeps its hooks' decision at create, and the ruling before the hooks ran.
//! The snapshot is the reviewed contract of "policy → hooks → a human".

use keel_tools::hooks::{Combined, PermissionDecision};
use keel_tools::policy::PolicyVerdict;
use keel_types::PolicyDecision;
use serde_json::{Map, Value};

use super::{HookAnswer, Ruling};
use crate::governance::{Governance, HookRound};

fn verdict(decision: PolicyDecision) -> PolicyVerdict {
    PolicyVerdict {
        decision,
        source: "Policy/p rules[0]".to_owned(),
        reason: Some(format!("policy says {}", decision.as_str())),
    }
}

fn rewrite() -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("path".to_owned(), Value::String("safe.txt".to_owned()));
    map
}

fn describe(ruling: &Ruling) -> String {
    let rewritten = |rewrite: &Option<Map<String, Value>>| match rewrite {
        Some(_) => " + rewrite (guarded again)",
        None => "",
    };
    match ruling {
        Ruling::AskHooks => "ask the hooks".to_owned(),
        Ruling::Refuse { refusal, reason } => {
            format!("refuse: tool call {} ({})", refusal.what(), show(reason))
        }
        Ruling::Stop { reason } => format!("stop the run ({reason})"),
        Ruling::Ask {
            asked_by,
            reason,
            rewrite,
        } => format!(
            "ask a human, asked by {asked_by} ({}){}",
            show(reason),
            rewritten(rewrite)
        ),
        Ruling::Proceed { rewrite } => format!("proceed{}", rewritten(rewrite)),
    }
}

fn show(reason: &Option<String>) -> &str {
    reason.as_deref().unwrap_or("no reason")
}

const POLICIES: [PolicyDecision; 3] = [
    PolicyDecision::Allow,
    PolicyDecision::Ask,
    PolicyDecision::Deny,
];

const DECISIONS: [Option<PermissionDecision>; 4] = [
    None,
    Some(PermissionDecision::Allow),
    Some(PermissionDecision::Ask),
    Some(PermissionDecision::Deny),
];

fn decision_name(decision: Option<PermissionDecision>) -> &'static str {
    decision.map_or("none", |d| d.as_str())
}

#[test]
fn the_ruling_table() {
    let mut rows = Vec::new();
    for policy in POLICIES {
        let verdict = verdict(policy);
        let at = |hooks: &str, ruling: Ruling| {
            format!(
                "policy {:<5} | {hooks:<70} | {}",
                policy.as_str(),
                describe(&ruling)
            )
        };
        rows.push(at(
            "hooks not asked yet",
            Governance::rule(&verdict, HookAnswer::NotAsked),
        ));
        for decision in DECISIONS {
            // A task's create refuses a hook's deny, so its run never keeps one.
            if decision == Some(PermissionDecision::Deny) {
                continue;
            }
            for reason in [Some("kept on the task"), None] {
                let hooks = format!(
                    "task run, decision at create {} (reason: {})",
                    decision_name(decision),
                    reason.unwrap_or("none")
                );
                let ruling = Governance::rule(&verdict, HookAnswer::AtCreate { decision, reason });
                rows.push(at(&hooks, ruling));
            }
        }
        for fail in [false, true] {
            for denied in [false, true] {
                for stop in [false, true] {
                    for block in [false, true] {
                        for decision in DECISIONS {
                            for reason in [false, true] {
                                for rewritten in [false, true] {
                                    let round = HookRound {
                                        combined: Combined {
                                            decision,
                                            decision_reason: reason
                                                .then(|| "the hook's reason".to_owned()),
                                            updated_input: rewritten.then(rewrite),
                                            additional_context: None,
                                            block: block.then(|| "blocked".to_owned()),
                                            stop: stop.then(|| "stopped".to_owned()),
                                        },
                                        denied: denied.then(|| "hook crashed".to_owned()),
                                        fail: fail.then(|| "hook crashed hard".to_owned()),
                                    };
                                    let mut said = Vec::new();
                                    if fail {
                                        said.push("failed (fail-run)".to_owned());
                                    }
                                    if denied {
                                        said.push("failed (deny)".to_owned());
                                    }
                                    if stop {
                                        said.push("stop".to_owned());
                                    }
                                    if block {
                                        said.push("block".to_owned());
                                    }
                                    said.push(format!(
                                        "{}{}",
                                        decision_name(decision),
                                        if reason { " with reason" } else { "" }
                                    ));
                                    if rewritten {
                                        said.push("rewrite".to_owned());
                                    }
                                    let ruling =
                                        Governance::rule(&verdict, HookAnswer::Round(&round));
                                    rows.push(at(&said.join(", "), ruling));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // 3 policies × (1 before hooks + 6 task runs + 2⁴ failure/stop/block × 4 decisions × 2
    // reasons × 2 rewrites).
    assert_eq!(rows.len(), 3 * (1 + 6 + 16 * 4 * 2 * 2));
    insta::assert_snapshot!(rows.join("\n"));
}

#[test]
fn a_policy_deny_never_reaches_the_hooks_and_an_allow_settles_an_ask() {
    let deny = verdict(PolicyDecision::Deny);
    assert!(matches!(
        Governance::rule(&deny, HookAnswer::NotAsked),
        Ruling::Refuse { .. }
    ));
    let ask = verdict(PolicyDecision::Ask);
    assert_eq!(
        Governance::rule(&ask, HookAnswer::NotAsked),
        Ruling::AskHooks
    );
    let allowed = HookRound {
        combined: Combined {
            decision: Some(PermissionDecision::Allow),
            ..Combined::default()
        },
        denied: None,
        fail: None,
    };
    assert_eq!(
        Governance::rule(&ask, HookAnswer::Round(&allowed)),
        Ruling::Proceed { rewrite: None }
    );
}
