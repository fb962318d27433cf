//! `keel policy check <tool> --args <json> [--agent A] [--mode M]`: what the policy engine
//! (keel-tools' policy engine) decides for one call, and which rule decided it, without running
//! anything — by the runtime's own decision path (`Runtime::check_policy`), so an MCP tool's
//! `readOnlyHint` counts as it does in a run.

use std::path::Path;
use std::process::ExitCode;

use keel::{Runtime, Workspace};
use keel_types::{PermissionMode, PolicyDecision};
use serde_json::Value;

use crate::error::{CliError, EXIT_FAILED};
use crate::out;

/// Exit code when the decision is `ask`.
pub(crate) const EXIT_ASK: u8 = 3;

/// Prints the decision for a call of `tool` with `args` (JSON) by `agent` (default: the
/// workspace's default agent) under `mode` (default: the policies' own mode), and exits with
/// 0 (allow), 1 (deny) or 3 (ask); a usage error exits 2.
pub(crate) async fn check(
    root: &Path,
    tool: &str,
    args: &str,
    agent: Option<&str>,
    mode: Option<&str>,
) -> Result<ExitCode, CliError> {
    let workspace = Workspace::load(root)?;
    let args: Value = match serde_json::from_str(args) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            return Err(CliError::usage(
                "--args must be a JSON object, e.g. '{\"command\": \"git status\"}'",
            ));
        }
        Err(e) => return Err(CliError::usage(format!("--args is not valid JSON: {e}"))),
    };
    let mode = mode.map(str::parse::<PermissionMode>).transpose()?;
    // Without an agent and no default agent, only policies for every agent apply.
    let agent = agent
        .or_else(|| workspace.default_agent())
        .unwrap_or("")
        .to_owned();
    if !agent.is_empty() && !workspace.agents.contains_key(&agent) {
        let known: Vec<&str> = workspace.agents.keys().map(String::as_str).collect();
        return Err(CliError::usage(format!(
            "agent `{agent}` is not defined; defined agents: {}",
            known.join(", ")
        )));
    }
    let runtime = Runtime::builder()
        .loaded_workspace(workspace)
        .build()
        .map_err(CliError::usage)?;
    let agent = (!agent.is_empty()).then_some(agent.as_str());
    let verdict = runtime.tools().check_policy(agent, tool, &args, mode).await;
    runtime.stop_mcp().await;
    let verdict = verdict.map_err(CliError::failed)?;
    let decision = match verdict.decision {
        PolicyDecision::Allow => "allow",
        PolicyDecision::Ask => "ask",
        PolicyDecision::Deny => "deny",
    };
    out::line(&format!("decision: {decision}"));
    out::line(&format!("rule: {}", verdict.source));
    if let Some(reason) = &verdict.reason {
        out::line(&format!("reason: {reason}"));
    }
    Ok(ExitCode::from(match verdict.decision {
        PolicyDecision::Allow => 0,
        PolicyDecision::Deny => EXIT_FAILED,
        PolicyDecision::Ask => EXIT_ASK,
    }))
}
