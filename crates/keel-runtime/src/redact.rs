//! Redaction: secret values from the environment never reach the log or a subscriber. It runs
//! first in the emission pipeline, on every string an event carries.

use std::collections::BTreeMap;

use keel_types::{AdapterEvent, EventPayload};
use serde_json::Value;

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Shortest value treated as a secret; shorter ones would redact ordinary words.
const MIN_SECRET_LEN: usize = 8;

/// Replaces known secret values in event payloads.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Collects the values of environment variables whose names look secret (`*KEY*`,
    /// `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*CREDENTIAL*`).
    pub fn from_env(env: &BTreeMap<String, String>) -> Self {
        let mut secrets: Vec<String> = env
            .iter()
            .filter(|(name, value)| {
                keel_workspace::looks_secret(name) && value.len() >= MIN_SECRET_LEN
            })
            .map(|(_, value)| value.clone())
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// Redacts every string of the payload in place.
    pub fn redact(&self, payload: &mut EventPayload) {
        if self.secrets.is_empty() {
            return;
        }
        let s = |text: &mut String| self.redact_str(text);
        match payload {
            EventPayload::RequestStarted { input, history, .. } => {
                s(input);
                for message in history {
                    s(&mut message.content);
                    for call in &mut message.tool_calls {
                        s(&mut call.arguments);
                    }
                }
            }
            EventPayload::RequestInterrupted { reason, .. } => s(reason),
            EventPayload::RequestCompleted { output, .. } => s(output),
            EventPayload::RequestFailed { error, .. } => s(&mut error.message),
            EventPayload::RequestCancelled { reason, .. } => s(reason),
            EventPayload::ModelRetry { error, .. } => s(&mut error.message),
            EventPayload::ModelCompleted {
                content,
                tool_calls,
                ..
            } => {
                s(content);
                for call in tool_calls {
                    s(&mut call.arguments);
                }
            }
            EventPayload::ToolGuard {
                arguments,
                issues,
                repairs,
                repaired_arguments,
                ..
            } => {
                s(arguments);
                for issue in issues {
                    s(&mut issue.found);
                    s(&mut issue.message);
                }
                for repair in repairs {
                    self.redact_value(&mut repair.from);
                    self.redact_value(&mut repair.to);
                }
                if let Some(value) = repaired_arguments {
                    self.redact_value(value);
                }
            }
            EventPayload::Adapter { event } => match event {
                AdapterEvent::OutputDelta { text, .. } => s(text),
                AdapterEvent::ToolStart { arguments, .. } => self.redact_value(arguments),
                AdapterEvent::ToolResult { output, .. } => s(output),
            },
            EventPayload::Narration { text, .. } => s(text),
            EventPayload::DirectStarted { arguments, .. } => self.redact_value(arguments),
            EventPayload::DirectCompleted { output, .. } => s(output),
            EventPayload::ContractFailed { .. }
            | EventPayload::ModelStarted { .. }
            | EventPayload::RequestResumed { .. }
            | EventPayload::RequestForked { .. }
            | EventPayload::ArtifactCreated { .. }
            | EventPayload::ApprovalResolved { .. }
            | EventPayload::PolicyDecided { .. } => {}
            EventPayload::ApprovalRequested { approval } => {
                self.redact_value(&mut approval.arguments)
            }
            EventPayload::HookCompleted { outcome, .. } => s(outcome),
            EventPayload::HookFailed { error, .. } => s(error),
        }
    }

    fn redact_value(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.redact_str(text),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.redact_value(v)),
            _ => {}
        }
    }

    fn redact_str(&self, text: &mut String) {
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), REDACTED);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_replaced_everywhere() {
        let env = BTreeMap::from([
            ("OPENAI_API_KEY".to_owned(), "sk-test-1234567890".to_owned()),
            ("HOME".to_owned(), "/home/someone-long".to_owned()),
        ]);
        let redactor = Redactor::from_env(&env);
        let mut payload = EventPayload::RequestStarted {
            input: "my key is sk-test-1234567890, home /home/someone-long".into(),
            history: vec![keel_types::Message::user("earlier: sk-test-1234567890")],
            mode: None,
        };
        redactor.redact(&mut payload);
        assert_eq!(
            payload,
            EventPayload::RequestStarted {
                input: "my key is [REDACTED], home /home/someone-long".into(),
                history: vec![keel_types::Message::user("earlier: [REDACTED]")],
                mode: None,
            }
        );
    }
}
