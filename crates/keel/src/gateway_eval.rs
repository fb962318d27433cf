//! The gateway's evaluation through a runtime (`keel eval gateway`, `docs/evals.md#evaluating-the-tool-gateway`):
//! the built-in dataset of malformed calls, made from the workspace's own tool schemas, and a
//! user's cases, guarded by this runtime's gateway as its agents' calls are — never executed —
//! and scored: repair precision and recall, block rate, false blocks and the calls let through
//! wrongly ([`Runtime::evaluate_gateway`]). The dataset and the scoring are
//! `keel_tools::gateway_eval`'s.

use keel_tools::gateway_eval::{Caller, evaluate};
pub use keel_tools::gateway_eval::{
    CaseOutcome, Dataset, Expect, GatewayCase, GatewayEvalError, GatewayReport, KindRule,
    KindScores, ModeExpect, Mutation, Observed, Parameters, Scores, Skipped, ToolEvaluated,
    Verdict, parse_cases, read_case_files, read_cases,
};
use keel_types::{RequestId, ToolContext};

use crate::{Error, Runtime};

/// The run id the guard's context carries during an evaluation (no run exists).
const EVAL_REQUEST_ID: &str = "eval_gateway";

impl Runtime {
    /// Evaluates the gateway on the tools of `agent` (default: every agent's tools, each tool
    /// once, with the first agent by name that lists it), in the gateway mode each is
    /// configured with, adding `extra_cases` (read with [`read_cases`]). The workspace's MCP
    /// servers that those agents use are started so their tools can be evaluated (stop them
    /// with [`Runtime::stop_mcp`]); no tool is executed. A gateway with a repair model asks it
    /// as a run would ([`GatewayReport::repair_model`] names it).
    ///
    /// Errors: [`crate::RuntimeError::UnknownAgent`] for an agent the workspace lacks.
    pub async fn evaluate_gateway(
        &self,
        agent: Option<&str>,
        extra_cases: &[GatewayCase],
    ) -> Result<GatewayReport, Error> {
        let workspace = self.workspace();
        let agents: Vec<String> = match agent {
            Some(agent) => vec![agent.to_owned()],
            None => workspace.agents.keys().cloned().collect(),
        };
        let mut inventories = Vec::with_capacity(agents.len());
        for agent in &agents {
            inventories.push(self.tools().listed(Some(agent))?);
        }
        let gateway = self.kernel.gateway();
        for inventory in &inventories {
            gateway.settle(inventory).await;
        }
        let modes: Vec<_> = agents
            .iter()
            .map(|agent| {
                let workspace = &workspace;
                move |tool: &str| workspace.gateway_mode(agent, tool)
            })
            .collect();
        let callers: Vec<Caller<'_>> = agents
            .iter()
            .zip(&inventories)
            .zip(&modes)
            .map(|((agent, inventory), mode_of)| Caller {
                agent,
                inventory,
                mode_of,
            })
            .collect();
        let ctx = ToolContext {
            workspace_root: workspace.root.clone(),
            request_id: RequestId::from(EVAL_REQUEST_ID),
            session_id: None,
            agent: String::new(),
            max_output_bytes: usize::try_from(workspace.runtime.limits.max_tool_output_bytes)
                .unwrap_or(usize::MAX),
            seen_files: None,
            progress: None,
            metadata: Default::default(),
            call_id: None,
            call_seq: None,
            traceparent: None,
            files: None,
        };
        let mut report = evaluate(&gateway, &ctx, &callers, extra_cases)
            .await
            .map_err(|e| crate::eval::invalid(e.to_string()))?;
        report.repair_model = workspace.runtime.gateway.repair_model.clone();
        Ok(report)
    }
}
