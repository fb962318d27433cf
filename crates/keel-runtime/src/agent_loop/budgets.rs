//! The budgets a run checks before each model round and before an answer's calls are made:
//! tokens (`limits.maxTokens`), money (`limits.maxCost`, at the models' `pricing`) and its
//! session's money (`limits.maxSessionCost`, with what the session's other runs used, read
//! from the store when the run starts); a run that has spent one ends with `token_budget` or
//! `budget_exceeded`.

use keel_types::{ErrorCode, FinishReason};

use super::AgentRun;
use super::end::End;

impl AgentRun {
    /// The run's end when it spent its token or money budget (checked before each round and
    /// before its calls are made).
    pub(super) fn budget_spent(&self) -> Option<End> {
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
    fn session_budget_spent(&self) -> Option<End> {
        let keel_workspace::CostLimit(budget) =
            self.services.workspace.runtime.limits.max_session_cost?;
        let mut used = self.session_used?;
        used.add(&self.usage);
        let spent = used.cost.filter(|c| c.currency == budget.currency)?;
        (spent.amount >= budget.amount).then(|| {
            End::failed(
                ErrorCode::BudgetExceeded,
                format!("the session's runs spent {spent}, its budget is {budget}"),
                FinishReason::BudgetExceeded,
            )
        })
    }

    /// Spent at least `limits.maxCost` (rounds priced in another currency do not count).
    fn cost_budget_spent(&self) -> Option<End> {
        let keel_workspace::CostLimit(budget) =
            self.agent
                .limits
                .max_cost
                .or(self.services.workspace.runtime.limits.max_cost)?;
        let spent = self.usage.cost.filter(|c| c.currency == budget.currency)?;
        (spent.amount >= budget.amount).then(|| {
            End::failed(
                ErrorCode::BudgetExceeded,
                format!("the run spent {spent}, its budget is {budget}"),
                FinishReason::BudgetExceeded,
            )
        })
    }

    fn token_budget_spent(&self) -> Option<End> {
        let budget =
            self.agent
                .limits
                .max_tokens
                .or(self.services.workspace.runtime.limits.max_tokens)?;
        let used = self
            .usage
            .total_tokens
            .max(self.usage.prompt_tokens + self.usage.completion_tokens);
        (used > budget).then(|| {
            End::failed(
                ErrorCode::TokenBudget,
                format!("the agent used {used} tokens, over its budget of {budget}"),
                FinishReason::TokenBudget,
            )
        })
    }
}
