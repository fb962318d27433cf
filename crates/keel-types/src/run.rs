//! The run record: the durable product object describing one request's execution.

use serde::{Deserialize, Serialize};

use crate::message::Usage;
use crate::wire_name::wire_names;
use crate::{RequestId, SessionId};

wire_names! {
    /// Lifecycle status of a run.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum RunStatus: "run status" {
        Queued = "queued",
        Running = "running",
        WaitingApproval = "waiting_approval",
        Completed = "completed",
        Failed = "failed",
        Cancelled = "cancelled",
        /// The process died while the run was active; it can be resumed from its log.
        Interrupted = "interrupted",
    }
}

impl RunStatus {
    /// Whether the run has ended and will not change again (short of a resume).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Cancelled | Self::Interrupted
        )
    }
}

wire_names! {
    /// Why a run ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum FinishReason: "finish reason" {
        /// The model gave a final answer and the execution contract holds.
        Completed = "completed",
        /// The step budget (`maxSteps`) ran out before a final answer.
        MaxSteps = "max_steps",
        /// The wall-clock budget (`runTimeout`) ran out.
        Timeout = "timeout",
        /// The token budget (`maxTokens`) was used up before a final answer.
        TokenBudget = "token_budget",
        /// The money budget (`maxCost`) was spent before a final answer.
        BudgetExceeded = "budget_exceeded",
        /// The prompt no longer fit the model's context window, even compacted.
        ContextOverflow = "context_overflow",
        /// Someone cancelled the request.
        Cancelled = "cancelled",
        /// The model could not be used (after retries, or a fatal error).
        ModelError = "model_error",
        /// The final answer does not satisfy the execution contract.
        ContractViolation = "contract_violation",
        /// The model stopped because of its output token limit.
        Length = "length",
        /// The model refused to answer, or its provider filtered the answer.
        ContentFilter = "content_filter",
        /// An internal failure (store, configuration).
        Internal = "internal",
        /// A hook stopped the run (`continue: false`, a blocked prompt, or `onError: fail-run`).
        Stopped = "stopped",
        /// The runtime shut down while the run was active; it can be resumed.
        Interrupted = "interrupted",
        /// The final answer did not match the agent's `output.schema` within its retries.
        InvalidOutput = "invalid_output",
        /// A workflow node failed, or an approval node was denied.
        NodeFailed = "node_failed",
        /// A direct tool call (a task, `keel tools call`) was blocked by the gateway: unknown
        /// or unavailable tool, arguments that do not fit, a path outside the workspace.
        ToolBlocked = "tool_blocked",
        /// A direct tool call was refused by governance: policy, a hook or a human.
        ToolDenied = "tool_denied",
        /// A direct tool call ran and failed.
        ToolFailed = "tool_failed",
    }
}

/// A stable, machine-readable error code. The one table mapping codes to exit codes and HTTP
/// statuses lives with each surface; the codes themselves are the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    ModelAuth,
    ModelBadRequest,
    ModelContextLength,
    ModelMalformedStream,
    ModelUnavailable,
    MaxSteps,
    Timeout,
    /// The run used up its token budget (`maxTokens`).
    TokenBudget,
    /// The run spent its money budget (`limits.maxCost`).
    BudgetExceeded,
    Cancelled,
    ContractFailed,
    InvalidInput,
    /// A tool called directly failed.
    ToolFailed,
    /// A tool called directly was blocked by the gateway.
    ToolBlocked,
    /// A hook stopped the run.
    HookStopped,
    /// The runtime shut down before the run ended (it is `interrupted` and can be resumed).
    Shutdown,
    /// The final answer did not match the agent's `output.schema` within its retry budget.
    OutputInvalid,
    /// A workflow node failed (after its retries) or a workflow could not go on.
    WorkflowFailed,
    /// A human denied a workflow's approval node.
    Denied,
    /// A process-backed agent's program failed: it could not start, broke the protocol,
    /// crashed, or exited without an answer (`docs/adapters.md`).
    ProgramFailed,
    /// A remote agent (`RemoteAgent`, over A2A) failed its task, could not be reached, broke
    /// the protocol, or asked for input Keel cannot give.
    RemoteAgentFailed,
    Store,
    Internal,
}

/// A typed error as recorded on a run and in events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorInfo {
    pub code: ErrorCode,
    pub message: String,
}

impl ErrorInfo {
    /// An error with the given code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// How a workflow is named where an agent could be: a workflow run's `agent` and the `/v1`
/// model `workflow/<name>`.
pub const WORKFLOW_PREFIX: &str = "workflow/";

/// The execution record of one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub request_id: RequestId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    pub agent: String,
    pub status: RunStatus,
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The structured output: the answer as JSON, valid against the agent's `output.schema`
    /// (or a workflow's output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub steps: u32,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Number of events recorded for the run.
    #[serde(default)]
    pub event_count: u64,
    /// How this run relates to others (parent, retry, replay, fork).
    #[serde(default, skip_serializing_if = "RunLinks::is_empty")]
    pub links: RunLinks,
    /// The principal that created the run (e.g. the name of the server's API key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The trace the run belongs to (`docs/observability.md`): its first attempt's trace id,
    /// the span it runs under and whether the trace is sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::RunTrace>,
}

impl RunRecord {
    /// The workflow this run executes, when it is a workflow run (its `agent` is
    /// `workflow/<name>`; a tool node's call runs as `workflow/<name>/<node>`, which is not).
    pub fn workflow(&self) -> Option<&str> {
        self.agent
            .strip_prefix(WORKFLOW_PREFIX)
            .filter(|name| !name.contains('/'))
    }

    /// A new `running` run started now.
    pub fn new(
        request_id: RequestId,
        session_id: Option<SessionId>,
        agent: impl Into<String>,
        input: impl Into<String>,
    ) -> Self {
        Self {
            request_id,
            session_id,
            agent: agent.into(),
            status: RunStatus::Running,
            input: input.into(),
            output: None,
            value: None,
            error: None,
            finish_reason: None,
            usage: Usage::default(),
            steps: 0,
            started_at: crate::now_rfc3339(),
            ended_at: None,
            event_count: 0,
            links: RunLinks::default(),
            owner: None,
            trace: None,
        }
    }
}

/// Links between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunLinks {
    /// The run that started this one: the agent that delegated to it (`task`) or the
    /// workflow whose node it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<RequestId>,
    /// The first run of the tree this one belongs to (set with `parent_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_id: Option<RequestId>,
    /// The parent's tool call (`task`) or workflow node this run answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_call: Option<String>,
    /// The run this one retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<RequestId>,
    /// The run this one replays (model answers taken from its log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<RequestId>,
    /// The run this one was forked from, and the last `seq` taken from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<RequestId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_seq: Option<u64>,
    /// How many times the run was resumed after an interruption.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resumed: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RunLinks {
    /// Whether no link is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// A session: a conversation boundary spanning requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    pub session_id: SessionId,
    /// The agent of the session's first request.
    pub agent: String,
    pub created_at: String,
    pub updated_at: String,
    /// Requests run in the session.
    #[serde(default)]
    pub run_count: u64,
    /// Messages in the persisted transcript.
    #[serde(default)]
    pub message_count: u64,
    /// Who the session belongs to, recorded when it was created; `None` for a session from
    /// before owners were recorded (anyone may continue it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<SessionOwner>,
    /// The session's compacted history (`keel sessions compact`), if it was compacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SessionSummary>,
}

/// A summary of a session's transcript up to a message: runs of the session send it in
/// place of those messages (the transcript keeps them all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub text: String,
    /// The last transcript message (`seq`) it stands for.
    pub through_seq: u64,
    /// When it was written (RFC 3339).
    pub at: String,
}

/// The principal a session belongs to: the API key that created it (`None` for the local
/// CLI, the SDK or a server without keys) and the `metadata.user` of its first request
/// (NFKC-normalised). Only the same principal may continue the session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionOwner {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// One message of a session's transcript, with the request that added it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessage {
    /// Position in the transcript, dense from 1.
    pub seq: u64,
    pub request_id: RequestId,
    pub message: crate::Message,
}

/// A position in the list of runs (newest first: `started_at` descending, then `request_id`
/// descending). A list with [`crate::RunFilter::before`] set returns the runs strictly after
/// it in that order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunCursor {
    pub started_at: String,
    pub request_id: RequestId,
}

impl RunCursor {
    /// The cursor just at `run`: a list from it continues with the run after it.
    pub fn of(run: &RunRecord) -> Self {
        Self {
            started_at: run.started_at.clone(),
            request_id: run.request_id.clone(),
        }
    }

    /// An opaque, URL-safe token (lowercase hex).
    pub fn encode(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let raw = format!("{}\n{}", self.started_at, self.request_id);
        let mut out = String::with_capacity(raw.len() * 2);
        for byte in raw.bytes() {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        out
    }

    /// Reads a token made by [`Self::encode`].
    pub fn decode(token: &str) -> Result<Self, String> {
        let invalid = |why: &str| format!("invalid cursor `{}`: {why}", shorten(token));
        if token.is_empty() || !token.len().is_multiple_of(2) {
            return Err(invalid("not a cursor returned by a run list"));
        }
        let digits = token.as_bytes();
        let mut bytes = Vec::with_capacity(digits.len() / 2);
        for pair in digits.chunks(2) {
            match (hex_value(pair[0]), hex_value(pair[1])) {
                (Some(high), Some(low)) => bytes.push((high << 4) | low),
                _ => return Err(invalid("not a cursor returned by a run list")),
            }
        }
        let text = String::from_utf8(bytes).map_err(|_| invalid("not UTF-8 inside"))?;
        let Some((started_at, request_id)) = text.split_once('\n') else {
            return Err(invalid("not a cursor returned by a run list"));
        };
        if started_at.is_empty() || request_id.is_empty() || request_id.contains('\n') {
            return Err(invalid("not a cursor returned by a run list"));
        }
        Ok(Self {
            started_at: started_at.to_owned(),
            request_id: RequestId(request_id.to_owned()),
        })
    }
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// The start of a long token, for error messages.
fn shorten(token: &str) -> String {
    match token.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &token[..at]),
        None => token.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_survives_encoding_and_garbage_is_refused() {
        let cursor = RunCursor {
            started_at: "2026-11-22T12:00:00.120Z".into(),
            request_id: RequestId::from("run_abc"),
        };
        let token = cursor.encode();
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
        assert_eq!(RunCursor::decode(&token).unwrap(), cursor);
        assert_eq!(RunCursor::decode(&token.to_uppercase()).unwrap(), cursor);
        for garbage in ["", "abc", "zz", "6869", "0a61", "61 0a62"] {
            let error = RunCursor::decode(garbage).unwrap_err();
            assert!(error.contains("invalid cursor"), "{garbage}: {error}");
        }
    }
}
