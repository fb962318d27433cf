//! The run record: the durable product object describing one request's execution.

use serde::{Deserialize, Serialize};

use crate::message::Usage;
use crate::{RequestId, SessionId};

/// Lifecycle status of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    WaitingApproval,
    Completed,
    Failed,
    Cancelled,
    /// The process died while the run was active; it can be resumed from its log.
    Interrupted,
}

impl RunStatus {
    /// Whether the run has ended and will not change again (short of a resume).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Cancelled | Self::Interrupted
        )
    }

    /// The wire name, e.g. `waiting_approval`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::WaitingApproval => "waiting_approval",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model gave a final answer and the execution contract holds.
    Completed,
    /// The step budget (`maxSteps`) ran out before a final answer.
    MaxSteps,
    /// The wall-clock budget (`runTimeout`) ran out.
    Timeout,
    /// Someone cancelled the request.
    Cancelled,
    /// The model could not be used (after retries, or a fatal error).
    ModelError,
    /// The final answer does not satisfy the execution contract.
    ContractViolation,
    /// The model stopped because of its output token limit.
    Length,
    /// An internal failure (store, configuration).
    Internal,
    /// A hook stopped the run (`continue: false`, a blocked prompt, or `onError: fail-run`).
    Stopped,
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
    Cancelled,
    ContractFailed,
    InvalidInput,
    /// A tool called directly failed.
    ToolFailed,
    /// A tool called directly was blocked by the gateway.
    ToolBlocked,
    /// A hook stopped the run.
    HookStopped,
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
}

impl RunRecord {
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
            error: None,
            finish_reason: None,
            usage: Usage::default(),
            steps: 0,
            started_at: crate::now_rfc3339(),
            ended_at: None,
            event_count: 0,
            links: RunLinks::default(),
        }
    }
}

/// Links between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunLinks {
    /// The run that started this one as a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<RequestId>,
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
