//! The final answer of an agent that declares `output: {schema}`: read as JSON and checked;
//! an answer that does not match is rejected (`runtime.output.rejected`) and the model asked
//! again with the issues while the retry budget lasts; after that the run fails with them.

use keel_types::{ErrorCode, EventPayload, FinishReason, Message};
use serde_json::Value;

use super::{AgentRun, End};

/// What became of a final answer.
pub(super) enum Structured {
    /// The value (none when the agent declares no schema).
    Valid(Option<Value>),
    /// The model was asked again.
    Reask,
    /// The budget is spent (or the store failed).
    End(End),
}

impl AgentRun {
    pub(super) fn structured(&mut self, text: &str) -> Structured {
        let Some(output) = &self.agent.output else {
            return Structured::Valid(None);
        };
        let issues = match crate::output::check(&output.schema, text) {
            Ok(value) => return Structured::Valid(Some(value)),
            Err(issues) => issues,
        };
        let max_retries = output.max_retries;
        self.output_rejections += 1;
        if let Err(error) = self.emitter.emit(EventPayload::OutputRejected {
            attempt: self.output_rejections,
            max_retries,
            issues: issues.clone(),
        }) {
            return Structured::End(End::store(error));
        }
        if self.output_rejections > max_retries {
            let summary = issues
                .iter()
                .map(|i| match i.path.is_empty() {
                    true => i.message.clone(),
                    false => format!("{}: {}", i.path, i.message),
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Structured::End(End::failed(
                ErrorCode::OutputInvalid,
                format!(
                    "the final answer does not match the agent's output schema after {} \
                     attempt(s): {summary}",
                    self.output_rejections
                ),
                FinishReason::InvalidOutput,
            ));
        }
        self.messages
            .push(Message::assistant(text.to_owned(), Vec::new()));
        self.messages
            .push(Message::user(crate::output::reask(&issues)));
        Structured::Reask
    }
}
