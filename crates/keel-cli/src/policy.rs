//! `keel policy check <tool> --args <json> [--agent A] [--mode M]`: what the policy engine
//! (`keel::policy`) decides for one call, and which rule decided it, without running
//! anything.

use std::path::Path;

use keel::policy::{PolicyEngine, PolicyQuery, is_read_only_builtin};
use keel::types::{PermissionMode, PolicyDecision};
use serde_json::Value;

use crate::{EXIT_FAILED, EXIT_USAGE, out};

/// Exit code when the decision is `ask`.
pub const EXIT_ASK: u8 = 3;

/// Prints the decision for a call of `tool` with `args` (JSON) by `agent` (default: the
/// workspace's default agent) under `mode` (default: the policies' own mode), and exits with
/// 0 (allow), 1 (deny), 3 (ask) or 2 (usage error).
pub async fn check(
    root: &Path,
    tool: &str,
    args: &str,
    agent: Option<&str>,
    mode: Option<&str>,
) -> u8 {
    let workspace = match crate::config::load(root) {
        Ok(workspace) => workspace,
        Err(code) => return code,
    };
    let args: Value = match serde_json::from_str(args) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            out::error("--args must be a JSON object, e.g. '{\"command\": \"git status\"}'");
            return EXIT_USAGE;
        }
        Err(e) => {
            out::error(&format!("--args is not valid JSON: {e}"));
            return EXIT_USAGE;
        }
    };
    let mode = match mode.map(str::parse::<PermissionMode>).transpose() {
        Ok(mode) => mode,
        Err(error) => {
            out::error(&error.to_string());
            return EXIT_USAGE;
        }
    };
    // Without an agent and no default agent, only policies for every agent apply.
    let agent = agent.or_else(|| workspace.default_agent()).unwrap_or("");
    if !agent.is_empty() && !workspace.agents.contains_key(agent) {
        let known: Vec<&str> = workspace.agents.keys().map(String::as_str).collect();
        out::error(&format!(
            "agent `{agent}` is not defined; defined agents: {}",
            known.join(", ")
        ));
        return EXIT_USAGE;
    }
    let engine = PolicyEngine::from_workspace(&workspace);
    let verdict = engine.decide(
        &PolicyQuery {
            agent,
            tool,
            args: &args,
            read_only: is_read_only_builtin(tool),
            mode,
        },
        &[],
    );
    out::line(&format!("decision: {}", verdict.decision));
    out::line(&format!("rule: {}", verdict.source));
    if let Some(reason) = &verdict.reason {
        out::line(&format!("reason: {reason}"));
    }
    match verdict.decision {
        PolicyDecision::Allow => 0,
        PolicyDecision::Deny => EXIT_FAILED,
        PolicyDecision::Ask => EXIT_ASK,
    }
}
