//! The gateway's evaluation (`keel eval gateway`, `docs/evals.md#evaluating-the-tool-gateway`): malformed tool
//! calls run through [`Gateway::guard`] — never executed — and scored against what the
//! gateway's contract (`docs/tool-gateway.md`) says must become of each.
//!
//! The built-in dataset ([`Dataset::builtin`], `crates/keel-tools/evals/gateway.yaml`) is a
//! list of *mutation kinds* applied to each tool's own JSON Schema (`generate`): a valid call
//! synthesised from the schema (`synth`) is broken one way at a time — a number sent as text,
//! a missing required property, truncated JSON, a misspelled tool name… — and each case
//! carries its expected outcome ([`Expect`]): accepted as sent, repaired to exactly the valid
//! call, or blocked. Literal cases of the built-in tools and a user's own cases (JSON lines,
//! [`read_cases`]) extend it. [`evaluate`] guards every case as the agents that list the tool
//! would send it, and `score` turns the verdicts into a [`GatewayReport`]: repair precision
//! and recall, block rate, false blocks and the calls the guard let through wrongly, overall
//! and per kind.
//!
//! Start reading at [`evaluate`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use keel_types::{ToolCall, ToolContext};
use keel_workspace::GatewayMode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::gateway::Gateway;

mod cases;
mod dataset;
mod generate;
mod score;
mod synth;

pub use cases::{parse_cases, read_cases};
pub use dataset::{Dataset, KindRule, ModeExpect, Mutation, Parameters};
pub use score::{
    CaseOutcome, GatewayReport, KindScores, Observed, Scores, Skipped, ToolEvaluated, Verdict,
};

/// What must become of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// Accepted with the arguments exactly as sent.
    Pass,
    /// Repaired: to exactly [`GatewayCase::repaired`] when it is given, of
    /// [`GatewayCase::repaired_tool`] (default: the tool sent).
    Repair,
    /// Blocked.
    Block,
}

impl Expect {
    /// `pass`, `repair` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Repair => "repair",
            Self::Block => "block",
        }
    }
}

/// One call of the evaluation and what must become of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayCase {
    /// Unique within a dataset, e.g. `read_file/number_as_string/offset`.
    pub name: String,
    /// The mutation kind ([`Mutation`]), or the kind a literal case names (`user` by default).
    pub kind: String,
    /// The tool name as the model sends it.
    pub tool: String,
    /// The argument text as the model sends it (possibly not JSON).
    pub arguments: String,
    pub expect: Expect,
    /// For [`Expect::Repair`]: the exact arguments the repair must give (`None`: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repaired: Option<Value>,
    /// For [`Expect::Repair`]: the tool that must run (`None`: the tool sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repaired_tool: Option<String>,
    /// The agent whose call it is (`None`: an evaluated agent that lists the tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Where it comes from: `generated`, `evals/gateway.yaml#3`, `cases.jsonl:12`.
    pub origin: String,
}

impl GatewayCase {
    /// The tool that must run if the call is allowed.
    pub fn expected_tool(&self) -> &str {
        self.repaired_tool.as_deref().unwrap_or(&self.tool)
    }
}

/// Why the evaluation could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GatewayEvalError {
    /// A case file could not be read.
    #[error("cannot read gateway cases from {}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    /// A line of a case file is not a valid case.
    #[error("{}:{line}: {message}", path.display())]
    Case {
        path: PathBuf,
        /// 1-based.
        line: usize,
        message: String,
    },
    /// The built-in dataset (`evals/gateway.yaml`) is invalid (a build of Keel with a broken
    /// dataset; its unit tests catch it).
    #[error("the built-in gateway dataset is invalid: {0}")]
    Dataset(String),
}

/// One caller of the gateway: an agent, its inventory as it lists it (names and globs) and the
/// gateway mode of each of its tools.
pub struct Caller<'a> {
    pub agent: &'a str,
    pub inventory: &'a [String],
    pub mode_of: &'a (dyn Fn(&str) -> GatewayMode + Sync),
}

impl std::fmt::Debug for Caller<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("agent", &self.agent)
            .field("inventory", &self.inventory)
            .finish_non_exhaustive()
    }
}

/// Evaluates the gateway: the built-in dataset for every tool the callers list (each tool
/// once, as the first caller listing it sends it), its literal cases, then `extra` cases,
/// each guarded with `ctx` (its `agent` set to the caller's). No tool is executed; a gateway
/// with a repair model asks it as a run would.
pub async fn evaluate(
    gateway: &Gateway,
    ctx: &ToolContext,
    callers: &[Caller<'_>],
    extra: &[GatewayCase],
) -> Result<GatewayReport, GatewayEvalError> {
    let dataset = Dataset::builtin()?;
    let plan = plan(gateway, &dataset, callers, extra);
    let mut outcomes = Vec::with_capacity(plan.cases.len());
    for (seq, (index, case)) in plan.cases.into_iter().enumerate() {
        let caller = &callers[index];
        let ctx = ToolContext {
            agent: caller.agent.to_owned(),
            ..ctx.clone()
        };
        let call = ToolCall {
            id: format!("eval_{seq}"),
            name: case.tool.clone(),
            arguments: case.arguments.clone(),
        };
        let guarded = gateway
            .guard(&ctx, caller.inventory, &call, caller.mode_of)
            .await;
        let mode = (caller.mode_of)(case.expected_tool());
        outcomes.push(CaseOutcome::judge(case, caller.agent, mode, &guarded));
    }
    let agents = callers.iter().map(|c| c.agent.to_owned()).collect();
    Ok(score::report(agents, plan.tools, plan.skipped, outcomes))
}

/// The cases to guard, each with the index of its caller, and what was evaluated or left out.
struct Plan {
    cases: Vec<(usize, GatewayCase)>,
    tools: Vec<ToolEvaluated>,
    skipped: Vec<Skipped>,
}

fn plan(
    gateway: &Gateway,
    dataset: &Dataset,
    callers: &[Caller<'_>],
    extra: &[GatewayCase],
) -> Plan {
    let registered = gateway.catalog().names_with_prefix("");
    let mut plan = Plan {
        cases: Vec::new(),
        tools: Vec::new(),
        skipped: Vec::new(),
    };
    let mut covered = BTreeSet::new();
    let mut inventories = Vec::with_capacity(callers.len());
    for (index, caller) in callers.iter().enumerate() {
        let (names, missing): (Vec<String>, Vec<String>) = gateway
            .inventory(caller.inventory)
            .into_iter()
            .partition(|name| gateway.contains(name));
        for name in missing.into_iter().filter(|n| covered.insert(n.clone())) {
            plan.skipped.push(Skipped::tool(
                &name,
                caller.agent,
                "not registered: a tool of an MCP server that is down, or one this runtime lacks",
            ));
        }
        let inventory = generate::Inventory {
            names: &names,
            registered: &registered,
        };
        for name in &names {
            if !covered.insert(name.clone()) {
                continue;
            }
            let Some(tool) = gateway.tool(name) else {
                continue;
            };
            let mode = (caller.mode_of)(name);
            match generate::cases_for_tool(dataset, tool.spec(), mode, &inventory) {
                Ok(cases) => {
                    let literal = dataset.literal_cases(name, mode);
                    plan.tools.push(ToolEvaluated {
                        tool: name.clone(),
                        agent: caller.agent.to_owned(),
                        mode,
                        cases: cases.len() + literal.len(),
                    });
                    plan.cases
                        .extend(cases.into_iter().chain(literal).map(|c| (index, c)));
                }
                Err(reason) => plan
                    .skipped
                    .push(Skipped::tool(name, caller.agent, &reason)),
            }
        }
        let unlisted = generate::cases_for_agent(dataset, &inventory, caller.mode_of);
        plan.cases.extend(unlisted.into_iter().map(|c| (index, c)));
        inventories.push(names);
    }
    for case in extra {
        match caller_of(case, callers, &inventories) {
            Ok(index) => plan.cases.push((index, case.clone())),
            Err(reason) => plan.skipped.push(Skipped::case(case, reason)),
        }
    }
    plan
}

/// The caller a user's case is sent by: the one it names, else the first that lists the tool
/// it must run, else the first.
fn caller_of(
    case: &GatewayCase,
    callers: &[Caller<'_>],
    inventories: &[Vec<String>],
) -> Result<usize, String> {
    if let Some(agent) = &case.agent {
        return callers
            .iter()
            .position(|c| c.agent == agent)
            .ok_or_else(|| format!("agent `{agent}` is not among the evaluated agents"));
    }
    let tool = case.expected_tool();
    let listing = inventories
        .iter()
        .position(|names| names.iter().any(|n| n == tool));
    match (listing, callers.is_empty()) {
        (Some(index), _) => Ok(index),
        (None, false) => Ok(0),
        (None, true) => Err("no agent is evaluated".into()),
    }
}

/// Reads every case file, in order.
pub fn read_case_files(paths: &[impl AsRef<Path>]) -> Result<Vec<GatewayCase>, GatewayEvalError> {
    let mut all = Vec::new();
    for path in paths {
        all.extend(read_cases(path.as_ref())?);
    }
    Ok(all)
}

#[cfg(test)]
mod tests;
