//! Redaction (`docs/events.md#redaction`): what a run must not write into its log is taken out
//! of every event first in the emission pipeline, before it is stored, so neither the log nor
//! a subscriber ever holds it. In order:
//!
//! 1. File contents a tool call writes (`write_file`'s `content`, `edit_file`'s `new_string`;
//!    for any tool that is not Keel's own — MCP tools — the arguments named in
//!    [`EXTERNAL_CONTENT`]) and the values of `shell`'s `env` become
//!    `{"size": <bytes>, "sha256": "<hex>"}` wherever the call's arguments appear: the model's
//!    answer, the gateway's verdict, the tool's start, an approval, a direct call, a session
//!    transcript. The tool itself receives the real arguments; only the record is digested.
//! 2. Secret values from the environment (variables named like a secret) and every match of
//!    the workspace's `redaction.patterns` become `[REDACTED]`, in every string the event
//!    carries.
//!
//! The same redaction applies to every record stored besides events (run records, session
//! transcripts, approvals, tasks): [`RedactingStore`](crate::redacting_store::RedactingStore).
//!
//! A digested call cannot be made again from the log: a resumed run whose pending call wrote
//! a file gets it blocked (the model is told, and may call again), and a replay reports it as
//! diverging.

use std::collections::BTreeMap;

use keel_types::{AdapterEvent, EventPayload, Issue, Message, Repair, ToolCall};
use keel_workspace::{BuiltinTool, Workspace};
use regex::Regex;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Shortest value treated as a secret; shorter ones would redact ordinary words.
const MIN_SECRET_LEN: usize = 8;

/// Keel's tools whose arguments carry file contents (or secrets), and which top-level
/// arguments those are.
const FILE_CONTENT: &[(BuiltinTool, Written)] = &[
    (BuiltinTool::WriteFile, Written::whole(&["content"])),
    (BuiltinTool::EditFile, Written::whole(&["new_string"])),
    // Each environment value is digested; the variable names stay readable.
    (
        BuiltinTool::Shell,
        Written {
            keys: &["env"],
            per_value: true,
        },
    ),
];

/// The top-level arguments of a tool that is not Keel's own (an MCP server's) recorded by
/// digest: the names file-writing tools give the contents they write (server-filesystem's
/// `write_file` `content`, `edit_file` `edits`). Whether the tool says it is read-only is not
/// known where events are redacted, so the rule is by name for every such tool.
pub const EXTERNAL_CONTENT: &[&str] = &[
    "content",
    "contents",
    "new_string",
    "newText",
    "new_text",
    "file_text",
    "edits",
];

/// Which top-level arguments of a call are recorded by digest.
#[derive(Debug, Clone, Copy)]
struct Written {
    keys: &'static [&'static str],
    /// Each value of the (object) argument is digested, not the argument whole.
    per_value: bool,
}

impl Written {
    const fn whole(keys: &'static [&'static str]) -> Self {
        Self {
            keys,
            per_value: false,
        }
    }
}

/// Takes secrets and written file contents out of event payloads.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
    patterns: Vec<Regex>,
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
        Self {
            secrets,
            patterns: Vec::new(),
        }
    }

    /// The redactor of a workspace: its environment's secrets and its `redaction.patterns`.
    pub fn for_workspace(workspace: &Workspace) -> Self {
        let mut redactor = Self::from_env(&workspace.env);
        for pattern in &workspace.runtime.redaction.patterns {
            // Loading compiled every pattern already; a failure here cannot happen.
            match Regex::new(pattern) {
                Ok(regex) => redactor.patterns.push(regex),
                Err(error) => {
                    tracing::error!(%pattern, %error, "Redaction pattern does not compile.");
                }
            }
        }
        redactor
    }

    /// Adds patterns whose matches are redacted.
    pub fn with_patterns(mut self, patterns: impl IntoIterator<Item = Regex>) -> Self {
        self.patterns.extend(patterns);
        self
    }

    /// Digests written file contents and redacts every string of the payload, in place.
    pub fn redact(&self, payload: &mut EventPayload) {
        digest_file_contents(payload);
        if self.secrets.is_empty() && self.patterns.is_empty() {
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
            EventPayload::RequestCompleted { output, value, .. } => {
                s(output);
                if let Some(value) = value {
                    self.redact_value(value);
                }
            }
            EventPayload::RequestFailed { error, .. } => s(&mut error.message),
            EventPayload::RequestCancelled { reason, .. } => s(reason),
            EventPayload::ModelRetry { error, .. } => s(&mut error.message),
            EventPayload::ModelFallback { reason, .. } => s(&mut reason.message),
            EventPayload::ModelQueued { .. } | EventPayload::ToolSandbox { .. } => {}
            EventPayload::ContextCompacted { summary, .. } => {
                if let Some(summary) = summary {
                    s(summary);
                }
            }
            EventPayload::ModelCompleted {
                content,
                tool_calls,
                thinking,
                ..
            } => {
                s(content);
                for call in tool_calls {
                    s(&mut call.arguments);
                }
                for block in thinking {
                    if let keel_types::Thinking::Thinking { thinking, .. } = block {
                        s(thinking);
                    }
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
                AdapterEvent::ToolProgress { message, .. } => {
                    if let Some(message) = message {
                        s(message);
                    }
                }
                AdapterEvent::ToolResult { output, error, .. } => {
                    s(output);
                    if let Some(error) = error {
                        s(error);
                    }
                }
                AdapterEvent::Handoff { .. } => {}
                AdapterEvent::Progress { data, .. } => self.redact_value(data),
                AdapterEvent::Log { line, .. } => s(line),
            },
            EventPayload::OutputRejected { issues, .. } => {
                for issue in issues {
                    s(&mut issue.found);
                    s(&mut issue.message);
                }
            }
            EventPayload::WorkflowStarted(started) => self.redact_value(&mut started.input),
            EventPayload::WorkflowCompleted(completed) => self.redact_value(&mut completed.output),
            EventPayload::WorkflowFailed(failed) => s(&mut failed.error),
            EventPayload::NodeStarted(started) => self.redact_value(&mut started.input),
            EventPayload::NodeCompleted(completed) => self.redact_value(&mut completed.output),
            EventPayload::NodeFailed(failed) => s(&mut failed.error),
            EventPayload::NodeSkipped(_) => {}
            EventPayload::PhaseStarted(phase)
            | EventPayload::PhaseBlocked(phase)
            | EventPayload::PhaseCompleted(phase)
            | EventPayload::PhaseVerified(phase) => {
                if let Some(reason) = &mut phase.reason {
                    s(reason);
                }
            }
            EventPayload::Narration { text, .. } => s(text),
            EventPayload::DirectStarted { arguments, .. } => self.redact_value(arguments),
            EventPayload::DirectCompleted { output, .. } => s(output),
            EventPayload::ContractFailed { .. }
            | EventPayload::PromptAssembled { .. }
            | EventPayload::ModelStarted { .. }
            | EventPayload::RequestResumed { .. }
            | EventPayload::RequestForked { .. }
            | EventPayload::ArtifactCreated { .. }
            | EventPayload::SkillOffered { .. }
            | EventPayload::SkillInjected { .. }
            | EventPayload::SkillCandidateCreated { .. } => {}
            EventPayload::ApprovalResolved { reason, .. }
            | EventPayload::PolicyDecided { reason, .. } => {
                if let Some(reason) = reason {
                    s(reason);
                }
            }
            EventPayload::ApprovalRequested { approval } => {
                self.redact_value(&mut approval.arguments)
            }
            EventPayload::HookCompleted { outcome, .. } => s(outcome),
            EventPayload::HookFailed { error, .. } => s(error),
            EventPayload::McpLifecycle { detail, .. }
            | EventPayload::MemoryLifecycle { detail, .. } => {
                if let Some(detail) = detail {
                    s(detail);
                }
            }
            // Memory texts are redacted before they are stored; this keeps the log safe even
            // for a record stored elsewhere.
            EventPayload::MemoryRecallCompleted { context, .. } => s(context),
            EventPayload::MemoryCandidateSubmitted { text, reason, .. } => {
                s(text);
                if let Some(reason) = reason {
                    s(reason);
                }
            }
            EventPayload::MemoryApprovalRequested { text, .. } => s(text),
            EventPayload::MemoryMaintenanceFailed { error, .. } => s(error),
            EventPayload::MemoryMaintenanceStarted { .. }
            | EventPayload::MemoryMaintenanceCompleted { .. }
            | EventPayload::WorkspaceReloaded { .. } => {}
        }
    }

    /// Takes secrets out of a text that is about to be kept (a memory record's text).
    pub fn redact_text(&self, text: &str) -> String {
        let mut text = text.to_owned();
        self.redact_str(&mut text);
        text
    }

    pub(crate) fn redact_value(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.redact_str(text),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.redact_value(v)),
            _ => {}
        }
    }

    pub(crate) fn redact_str(&self, text: &mut String) {
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), REDACTED);
            }
        }
        for pattern in &self.patterns {
            if pattern.is_match(text) {
                *text = pattern.replace_all(text, REDACTED).into_owned();
            }
        }
    }
}

/// Replaces the file contents of every file-writing call the payload records by their digest.
fn digest_file_contents(payload: &mut EventPayload) {
    match payload {
        EventPayload::RequestStarted { history, .. } => {
            history.iter_mut().for_each(digest_message);
        }
        EventPayload::ModelCompleted { tool_calls, .. } => {
            tool_calls.iter_mut().for_each(digest_call);
        }
        EventPayload::ToolGuard {
            tool,
            resolved_tool,
            arguments,
            issues,
            repairs,
            repaired_arguments,
            ..
        } => {
            let Some(key) =
                content_key(resolved_tool.as_deref().unwrap_or(tool)).or_else(|| content_key(tool))
            else {
                return;
            };
            digest_text(key, arguments);
            if let Some(value) = repaired_arguments {
                digest_arguments(key, value);
            }
            repairs.iter_mut().for_each(|r| digest_repair(key, r));
            issues
                .iter_mut()
                // An unknown tool's issue quotes its name, not its arguments.
                .filter(|i| i.found != *tool)
                .for_each(|i| digest_issue(key, i));
        }
        EventPayload::Adapter {
            event: AdapterEvent::ToolStart {
                tool, arguments, ..
            },
        }
        | EventPayload::DirectStarted {
            tool, arguments, ..
        } => {
            if let Some(key) = content_key(tool) {
                digest_arguments(key, arguments);
            }
        }
        EventPayload::ApprovalRequested { approval } => digest_approval(approval),
        _ => {}
    }
}

/// An approval's arguments as its event records them: with written contents digested.
fn digest_approval(approval: &mut keel_types::ApprovalRecord) {
    if let Some(key) = content_key(&approval.tool) {
        digest_arguments(key, &mut approval.arguments);
    }
}

/// The arguments of `tool` recorded by digest, if any.
fn content_key(tool: &str) -> Option<Written> {
    match BuiltinTool::from_name(tool) {
        Some(builtin) => FILE_CONTENT
            .iter()
            .find(|(b, _)| *b == builtin)
            .map(|(_, written)| *written),
        None => Some(Written::whole(EXTERNAL_CONTENT)),
    }
}

/// A call's arguments as a record may hold them: with written file contents digested.
pub(crate) fn recorded_arguments(call: &ToolCall) -> String {
    let mut call = call.clone();
    digest_call(&mut call);
    call.arguments
}

pub(crate) fn digest_message(message: &mut Message) {
    message.tool_calls.iter_mut().for_each(digest_call);
}

fn digest_call(call: &mut ToolCall) {
    if let Some(key) = content_key(&call.name) {
        digest_text(key, &mut call.arguments);
    }
}

/// Arguments as the model wrote them (JSON text). Text that is not a JSON object is digested
/// whole: it may hold the contents anywhere.
fn digest_text(key: Written, arguments: &mut String) {
    match serde_json::from_str::<Value>(arguments) {
        Ok(mut value @ Value::Object(_)) => {
            if digest_arguments(key, &mut value) {
                *arguments = value.to_string();
            }
        }
        _ if arguments.is_empty() => {}
        _ => *arguments = digest(arguments.as_bytes()).to_string(),
    }
}

/// Replaces the written arguments of an argument object by their digest; says whether
/// anything changed.
fn digest_arguments(key: Written, arguments: &mut Value) -> bool {
    let Some(map) = arguments.as_object_mut() else {
        return false;
    };
    let mut changed = false;
    for name in key.keys {
        let Some(value) = map.get_mut(*name) else {
            continue;
        };
        changed |= match value {
            Value::Object(values) if key.per_value => values
                .values_mut()
                .fold(false, |changed, v| digest_in_place(v) | changed),
            value => digest_in_place(value),
        };
    }
    changed
}

/// A string becomes the digest of its bytes, any other value (but a digest) the digest of
/// its JSON text.
fn digest_in_place(value: &mut Value) -> bool {
    let replacement = match &*value {
        Value::String(text) => digest(text.as_bytes()),
        other if is_digest(other) => return false,
        other => digest(other.to_string().as_bytes()),
    };
    *value = replacement;
    true
}

/// A repair at the contents (or at the whole arguments) carries them in `from` and `to`.
fn digest_repair(key: Written, repair: &mut Repair) {
    if concerns(key, &repair.path) {
        digest_in_place(&mut repair.from);
        digest_in_place(&mut repair.to);
    }
}

/// An issue at the contents (or at the whole arguments) may quote them in `found`.
fn digest_issue(key: Written, issue: &mut Issue) {
    if concerns(key, &issue.path) && !issue.found.is_empty() {
        issue.found = digest(issue.found.as_bytes()).to_string();
    }
}

/// Whether a JSON pointer into the arguments is the whole object or inside a written one.
fn concerns(key: Written, pointer: &str) -> bool {
    let first = pointer.trim_start_matches('/').split('/').next();
    pointer.is_empty() || first.is_some_and(|first| key.keys.contains(&first))
}

fn is_digest(value: &Value) -> bool {
    value.as_object().is_some_and(|map: &Map<String, Value>| {
        map.len() == 2 && map.contains_key("size") && map.contains_key("sha256")
    })
}

/// `{"size": <bytes>, "sha256": "<hex>"}` of some contents.
pub fn digest(bytes: &[u8]) -> Value {
    let hash = Sha256::digest(bytes);
    let hex = keel_types::to_hex(&hash);
    json!({ "size": bytes.len(), "sha256": hex })
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
            metadata: Default::default(),
            params: Default::default(),
            output_schema: None,
            session_owner_overridden: None,
        };
        redactor.redact(&mut payload);
        assert_eq!(
            payload,
            EventPayload::RequestStarted {
                input: "my key is [REDACTED], home /home/someone-long".into(),
                history: vec![keel_types::Message::user("earlier: [REDACTED]")],
                mode: None,
                metadata: Default::default(),
                params: Default::default(),
                output_schema: None,
                session_owner_overridden: None,
            }
        );
    }

    #[test]
    fn pattern_matches_are_replaced() {
        let pattern = Regex::new("tok_[a-z0-9]{6,}").unwrap();
        let redactor = Redactor::default().with_patterns([pattern]);
        let mut payload = EventPayload::RequestCompleted {
            value: None,
            output: "use tok_abc123def or tok_zzzzzz9, not tok_ab".into(),
            finish_reason: keel_types::FinishReason::Completed,
            usage: keel_types::Usage::default(),
            steps: 1,
            duration_ms: 1,
        };
        redactor.redact(&mut payload);
        let EventPayload::RequestCompleted { output, .. } = payload else {
            unreachable!()
        };
        assert_eq!(output, "use [REDACTED] or [REDACTED], not tok_ab");
    }

    #[test]
    fn written_contents_become_size_and_sha256_in_the_model_answer() {
        let call = |name: &str, arguments: &str| ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: arguments.into(),
        };
        let mut payload = EventPayload::ModelCompleted {
            step: 1,
            stop_reason: keel_types::ModelStopReason::ToolCalls,
            usage: keel_types::Usage::default(),
            latency_ms: 1,
            content: String::new(),
            tool_calls: vec![
                call("write_file", r#"{"path":"a.txt","content":"abc"}"#),
                call(
                    "edit_file",
                    r#"{"path":"a.txt","old_string":"a","new_string":"b"}"#,
                ),
                call("write_file", r#"{"path":"a.txt","content":"unclosed"#),
                call("read_file", r#"{"path":"a.txt"}"#),
            ],
            thinking: Vec::new(),
        };
        Redactor::default().redact(&mut payload);
        let EventPayload::ModelCompleted { tool_calls, .. } = payload else {
            unreachable!()
        };
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let args: Vec<Value> = tool_calls
            .iter()
            .map(|c| serde_json::from_str(&c.arguments).unwrap())
            .collect();
        assert_eq!(
            args[0],
            json!({"path": "a.txt", "content": {"size": 3, "sha256": abc}})
        );
        assert_eq!(args[1]["old_string"], "a");
        assert_eq!(args[1]["new_string"]["size"], 1);
        assert_eq!(
            args[2]["size"], 35,
            "unparsable arguments are digested whole"
        );
        assert_eq!(tool_calls[3].arguments, r#"{"path":"a.txt"}"#);
    }
}
