//! The budgets a run checks before each model round and before an answer's calls are made:
//! tokens (`limits.maxTokens`), money (`limits.maxCost`, at the models' `pricing`) and its
//! session's money (`limits.maxSessionCost`, with what the session's other runs used, read
//! from the store when the run starts); a run that has spent one ends with `token_budget` or
//! `budget_exceeded`. With `limits.onBudget: ask`, a run that has spent its own budget asks a
//! human first (an approval of the pseudo-tool `keel.budget`): approved, it goes on with as
//! much again; denied (or unanswered), it ends.

use keel_types::{ErrorCode, FinishReason, StoreError};
use serde_json::json;

use super::AgentRun;
use super::end::End;

/// The tool name a budget approval carries.
const BUDGET_TOOL: &str = "keel.budget";

/// A spent budget: how the run ends, and whether a human may give it more (the run's own
/// budgets; never the session's).
struct Spent {
    end: End,
    message: String,
    askable: bool,
}

impl Spent {
    fn new(code: ErrorCode, reason: FinishReason, message: String, askable: bool) -> Self {
        Self {
            end: End::failed(code, message.clone(), reason),
            message,
            askable,
        }
    }
}

impl AgentRun {
    /// The run's end when it spent its token or money budget (checked before each round and
    /// before its calls are made).
    pub(super) fn budget_spent(&self) -> Option<End> {
        self.spent().map(|spent| spent.end)
    }

    /// [`Self::budget_spent`], asking a human for more first when `limits.onBudget` is `ask`
    /// and the run spent its own budget.
    pub(super) async fn over_budget(&mut self) -> Result<Option<End>, StoreError> {
        let ask = self.services.workspace.runtime.limits.on_budget == keel_workspace::OnBudget::Ask;
        loop {
            let Some(spent) = self.spent() else {
                return Ok(None);
            };
            if !(ask && spent.askable) {
                return Ok(Some(spent.end));
            }
            // One approval per grant, named so a resumed run finds the one it asked.
            let call_id = format!("budget:{}", self.budget_grants + 1);
            let arguments = json!({ "spent": spent.message, "grant": self.budget_grants + 1 });
            let decision = self
                .ask_human(
                    &call_id,
                    BUDGET_TOOL,
                    &arguments,
                    "budget",
                    Some(format!("{}; go on with as much again?", spent.message)),
                )
                .await?;
            if !decision.approved {
                return Ok(Some(spent.end));
            }
            self.budget_grants += 1;
        }
    }

    fn spent(&self) -> Option<Spent> {
        self.token_budget_spent()
            .or_else(|| self.cost_budget_spent())
            .or_else(|| self.session_budget_spent())
    }

    /// Reads what the run's session's other runs used, when the session has a budget.
    pub(super) async fn load_session_spend(&mut self) -> Result<(), keel_types::StoreError> {
        let (Some(session), Some(_)) = (
            &self.record.session_id,
            self.services.workspace.runtime.limits.max_session_cost,
        ) else {
            return Ok(());
        };
        let used = crate::usage::used_in_session(
            self.services.store.as_ref(),
            session,
            &self.record.request_id,
        )
        .await?;
        self.session_used = Some(used);
        Ok(())
    }

    /// The session's runs together spent at least `limits.maxSessionCost`.
    fn session_budget_spent(&self) -> Option<Spent> {
        let keel_workspace::CostLimit(budget) =
            self.services.workspace.runtime.limits.max_session_cost?;
        let mut used = self.session_used?;
        used.add(&self.usage);
        let spent = used.cost.filter(|c| c.currency == budget.currency)?;
        (spent.amount >= budget.amount).then(|| {
            Spent::new(
                ErrorCode::BudgetExceeded,
                FinishReason::BudgetExceeded,
                format!("the session's runs spent {spent}, its budget is {budget}"),
                false,
            )
        })
    }

    /// Spent at least `limits.maxCost` (rounds priced in another currency do not count),
    /// with as much again per grant.
    fn cost_budget_spent(&self) -> Option<Spent> {
        let keel_workspace::CostLimit(mut budget) =
            self.agent
                .limits
                .max_cost
                .or(self.services.workspace.runtime.limits.max_cost)?;
        budget.amount = budget.amount.times(u64::from(self.budget_grants) + 1);
        let spent = self.usage.cost.filter(|c| c.currency == budget.currency)?;
        (spent.amount >= budget.amount).then(|| {
            Spent::new(
                ErrorCode::BudgetExceeded,
                FinishReason::BudgetExceeded,
                format!("the run spent {spent}, its budget is {budget}"),
                true,
            )
        })
    }

    fn token_budget_spent(&self) -> Option<Spent> {
        let budget = self
            .agent
            .limits
            .max_tokens
            .or(self.services.workspace.runtime.limits.max_tokens)?
            .saturating_mul(u64::from(self.budget_grants) + 1);
        let used = self
            .usage
            .total_tokens
            .max(self.usage.prompt_tokens + self.usage.completion_tokens);
        (used > budget).then(|| {
            Spent::new(
                ErrorCode::TokenBudget,
                FinishReason::TokenBudget,
                format!("the agent used {used} tokens, over its budget of {budget}"),
                true,
            )
        })
    }
}
