//! The policy engine (`docs/tool-gateway.md#policy`): decides whether a tool call is allowed,
//! needs a human (`ask`) or is refused, from the workspace's `Policy` documents, the tool's own
//! `policy:`, the run's permission mode and any narrowing layers (a subagent's or a session's
//! extra policies). Pure: no I/O, no clock, no state; the same query always gets the same
//! verdict, with the rule that decided it.
//!
//! Start at [`PolicyEngine::decide`]. The order of evaluation is:
//!
//! 1. **Rules**: every rule of every `Policy` that applies to the agent (empty `agents`: all),
//!    in declaration order (policies by name, rules as written), then the tool's own
//!    `policy:`. A rule matches when its `tool` glob matches the tool name and each of its
//!    `args` globs matches the top-level argument of that name. The strictest matching rule
//!    wins (deny > ask > allow); on a tie, the first one.
//! 2. **Default** when no rule matches: read-only tools are allowed, others ask.
//! 3. **Permission mode** (the run's, else the strictest `mode` of the applying policies):
//!    `plan` denies every tool that is not read-only; `dontAsk` turns ask into deny;
//!    `acceptEdits` turns an ask for `write_file`/`edit_file` into allow (their path
//!    containment is enforced by the tools' own checks).
//! 4. **Narrowing layers**: each layer's strictest matching rule, and its `plan`/`dontAsk`
//!    mode, can only make the decision stricter — never wider. A layer with no matching rule
//!    leaves the decision as it is; a layer's `acceptEdits` is ignored.

use keel_types::{PermissionMode, PolicyDecision};
use keel_workspace::{BuiltinTool, PolicyRule, PolicySpec, Workspace};
use serde::Serialize;
use serde_json::Value;

/// Built-in tools whose `ask` the `acceptEdits` mode turns into `allow`.
const EDIT_TOOLS: &[&str] = &["write_file", "edit_file"];

/// Whether `tool` is a built-in that never changes anything ([`BuiltinTool::read_only`]):
/// allowed by default, and allowed in `plan` mode. Declared tools are never read-only.
pub fn is_read_only_builtin(tool: &str) -> bool {
    BuiltinTool::from_name(tool).is_some_and(BuiltinTool::read_only)
}

/// One tool call to decide on.
#[derive(Debug, Clone, Copy)]
pub struct PolicyQuery<'a> {
    /// The calling agent.
    pub agent: &'a str,
    /// The tool's name (after inventory repair).
    pub tool: &'a str,
    /// The call's arguments (after validation and repair).
    pub args: &'a Value,
    /// Whether the tool only reads (see [`is_read_only_builtin`]).
    pub read_only: bool,
    /// The run's permission mode, when the run sets one; `None` takes the strictest `mode`
    /// of the policies that apply to the agent (or `default`).
    pub mode: Option<PermissionMode>,
}

/// What the engine decided, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyVerdict {
    pub decision: PolicyDecision,
    /// What decided: `Policy/default rules[2]`, `Tool/deploy policy`,
    /// `narrowing[0] rules[1]`, `permission mode plan`, `default (read-only tool)` or
    /// `default`.
    pub source: String,
    /// The deciding rule's `reason`, or why the permission mode decided.
    pub reason: Option<String>,
}

/// The compiled policies of a workspace.
#[derive(Debug, Clone, Default)]
pub struct PolicyEngine {
    /// `Policy` documents in declaration order (by name).
    policies: Vec<(String, PolicySpec)>,
    /// Each declared tool's own `policy:`.
    tools: Vec<(String, PolicyDecision)>,
}

impl PolicyEngine {
    /// The engine for `workspace`'s `Policy` documents and tools' `policy:` fields.
    pub fn from_workspace(workspace: &Workspace) -> Self {
        Self {
            policies: workspace
                .policies
                .iter()
                .map(|(name, spec)| (name.clone(), spec.clone()))
                .collect(),
            tools: workspace
                .tools
                .iter()
                .filter_map(|(name, tool)| Some((name.clone(), tool.policy?)))
                .collect(),
        }
    }

    /// An engine from parts: `Policy` documents by name (evaluated in the order given) and
    /// tools' own `policy:` decisions. For programs that build policies in code.
    pub fn new(
        policies: impl IntoIterator<Item = (String, PolicySpec)>,
        tool_policies: impl IntoIterator<Item = (String, PolicyDecision)>,
    ) -> Self {
        Self {
            policies: policies.into_iter().collect(),
            tools: tool_policies.into_iter().collect(),
        }
    }

    /// The permission mode calls of `agent` are decided under: the run's `mode` when it sets
    /// one, else the strictest `mode` of the policies that apply to the agent.
    pub fn mode(&self, agent: &str, mode: Option<PermissionMode>) -> PermissionMode {
        mode.unwrap_or_else(|| {
            let applying: Vec<&(String, PolicySpec)> = self
                .policies
                .iter()
                .filter(|(_, spec)| applies_to(spec, agent))
                .collect();
            strictest_mode(&applying)
        })
    }

    /// Decides on one call. `narrowing` layers (a subagent's or a session's policies) can
    /// only make the verdict stricter.
    pub fn decide(&self, query: &PolicyQuery<'_>, narrowing: &[&PolicySpec]) -> PolicyVerdict {
        let applying: Vec<&(String, PolicySpec)> = self
            .policies
            .iter()
            .filter(|(_, spec)| applies_to(spec, query.agent))
            .collect();

        let mut candidates = Vec::new();
        for (name, spec) in &applying {
            candidates.extend(matching_rules(spec, query, &format!("Policy/{name}")));
        }
        if let Some((_, decision)) = self.tools.iter().find(|(name, _)| name == query.tool) {
            candidates.push(PolicyVerdict {
                decision: *decision,
                source: format!("Tool/{} policy", query.tool),
                reason: None,
            });
        }
        let mut verdict = strictest(candidates).unwrap_or_else(|| default_verdict(query));

        let mode = query.mode.unwrap_or_else(|| strictest_mode(&applying));
        verdict = apply_mode(verdict, mode, query, true);

        for (i, layer) in narrowing.iter().enumerate() {
            if !applies_to(layer, query.agent) {
                continue;
            }
            if let Some(layered) =
                strictest(matching_rules(layer, query, &format!("narrowing[{i}]")))
                && layered.decision > verdict.decision
            {
                verdict = layered;
            }
            if let Some(layer_mode) = layer.mode {
                verdict = apply_mode(verdict, layer_mode, query, false);
            }
        }
        // An `ask` a layer added is still subject to the run's `dontAsk`.
        apply_mode(verdict, mode, query, false)
    }
}

/// Whether `spec` applies to `agent` (an empty `agents` list: every agent).
fn applies_to(spec: &PolicySpec, agent: &str) -> bool {
    spec.agents.is_empty() || spec.agents.iter().any(|a| a == agent)
}

/// The verdicts of the rules of `spec` that match the call, named `<prefix> rules[i]`.
fn matching_rules(spec: &PolicySpec, query: &PolicyQuery<'_>, prefix: &str) -> Vec<PolicyVerdict> {
    spec.rules
        .iter()
        .enumerate()
        .filter(|(_, rule)| rule_matches(rule, query.tool, query.args))
        .map(|(i, rule)| PolicyVerdict {
            decision: rule.decision,
            source: format!("{prefix} rules[{i}]"),
            reason: rule.reason.clone(),
        })
        .collect()
}

/// Whether `rule` matches a call of `tool` with `args`.
pub fn rule_matches(rule: &PolicyRule, tool: &str, args: &Value) -> bool {
    glob_match(&rule.tool, tool)
        && rule
            .args
            .iter()
            .all(|(name, pattern)| match args.get(name) {
                None => false,
                Some(Value::String(text)) => glob_match(pattern, text),
                Some(other) => glob_match(pattern, &other.to_string()),
            })
}

/// The strictest verdict; the first on a tie.
fn strictest(verdicts: Vec<PolicyVerdict>) -> Option<PolicyVerdict> {
    verdicts.into_iter().reduce(|best, next| {
        if next.decision > best.decision {
            next
        } else {
            best
        }
    })
}

fn default_verdict(query: &PolicyQuery<'_>) -> PolicyVerdict {
    if query.read_only {
        PolicyVerdict {
            decision: PolicyDecision::Allow,
            source: "default (read-only tool)".into(),
            reason: None,
        }
    } else {
        PolicyVerdict {
            decision: PolicyDecision::Ask,
            source: "default".into(),
            reason: None,
        }
    }
}

/// Applies a permission mode. `widen` says whether `acceptEdits` may turn ask into allow
/// (only for the base verdict, never after narrowing).
fn apply_mode(
    verdict: PolicyVerdict,
    mode: PermissionMode,
    query: &PolicyQuery<'_>,
    widen: bool,
) -> PolicyVerdict {
    match (mode, verdict.decision) {
        (PermissionMode::Plan, PolicyDecision::Allow | PolicyDecision::Ask) if !query.read_only => {
            PolicyVerdict {
                decision: PolicyDecision::Deny,
                source: "permission mode plan".into(),
                reason: Some("plan mode runs no tool that changes anything".into()),
            }
        }
        (PermissionMode::DontAsk, PolicyDecision::Ask) => PolicyVerdict {
            decision: PolicyDecision::Deny,
            source: "permission mode dontAsk".into(),
            reason: verdict.reason.or_else(|| {
                Some(format!(
                    "would ask ({}), and dontAsk mode never asks",
                    verdict.source
                ))
            }),
        },
        (PermissionMode::AcceptEdits, PolicyDecision::Ask)
            if widen && EDIT_TOOLS.contains(&query.tool) =>
        {
            PolicyVerdict {
                decision: PolicyDecision::Allow,
                source: "permission mode acceptEdits".into(),
                reason: None,
            }
        }
        _ => verdict,
    }
}

/// plan > dontAsk > default > acceptEdits.
fn strictest_mode(applying: &[&(String, PolicySpec)]) -> PermissionMode {
    applying
        .iter()
        .filter_map(|(_, spec)| spec.mode)
        .max_by_key(|mode| mode_strictness(*mode))
        .unwrap_or_default()
}

fn mode_strictness(mode: PermissionMode) -> u8 {
    match mode {
        PermissionMode::AcceptEdits => 0,
        PermissionMode::Default => 1,
        PermissionMode::DontAsk => 2,
        PermissionMode::Plan => 3,
    }
}

/// Glob match over the whole `text`: `*` is any run of characters (including none), `?` one
/// character, everything else literal (no separators, no classes, no escapes).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // The last `*` seen and the text position it currently covers up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_text_with_star_and_question_mark() {
        for (pattern, text, expected) in [
            ("shell", "shell", true),
            ("shell", "shells", false),
            ("*", "", true),
            ("*", "anything at all", true),
            ("git status*", "git status --short", true),
            ("git status*", "git statu", false),
            ("rm *", "rm -rf /", true),
            ("rm *", "echo rm x", false),
            ("*rm *", "sudo rm -rf /", true),
            ("mcp__*", "mcp__github__search", true),
            ("mcp__*__search", "mcp__github__search", true),
            ("mcp__*__search", "mcp__github__list", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*.rs", "src/a/b.rs", true),
            ("[x]", "[x]", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("é?", "éü", true),
        ] {
            assert_eq!(glob_match(pattern, text), expected, "{pattern} vs {text}");
        }
    }
}
