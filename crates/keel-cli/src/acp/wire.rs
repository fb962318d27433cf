//! The Agent Client Protocol's messages as `keel acp` reads and writes them (ACP v1, the
//! schema of `@agentclientprotocol/sdk`): the params of the methods it answers, and the
//! `session/update` payloads, tool calls and permission requests it sends. Inbound types
//! accept fields they do not know (`_meta`, newer additions); outbound ones write only what
//! Keel has.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version this agent speaks.
pub(super) const PROTOCOL_VERSION: u16 = 1;

/// `initialize`'s params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InitializeParams {
    /// The latest version the client speaks (only checked to be a version number).
    #[serde(rename = "protocolVersion")]
    pub _protocol_version: u16,
    #[serde(default)]
    pub client_capabilities: ClientCapabilities,
    #[serde(default)]
    pub client_info: Option<Implementation>,
}

/// What the client offers (only its file system is used).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ClientCapabilities {
    #[serde(default)]
    pub fs: FsCapabilities,
}

/// `clientCapabilities.fs`.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FsCapabilities {
    #[serde(default)]
    pub read_text_file: bool,
    #[serde(default)]
    pub write_text_file: bool,
}

/// A peer's name (`clientInfo`).
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Implementation {
    pub name: String,
}

/// `session/new`'s params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NewSessionParams {
    pub cwd: String,
    /// MCP servers the client would have the agent use; the workspace's own are used instead.
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
}

/// `session/load`'s params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LoadSessionParams {
    pub session_id: String,
    pub cwd: String,
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
}

/// `session/prompt`'s params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptParams {
    pub session_id: String,
    pub prompt: Vec<ContentBlock>,
}

/// `session/cancel`'s params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CancelParams {
    pub session_id: String,
}

/// `$/cancel_request`'s params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CancelRequestParams {
    pub request_id: Value,
}

/// A content block of a prompt.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ContentBlock {
    Text { text: String },
    ResourceLink { uri: String, name: String },
    Resource { resource: EmbeddedResource },
    Image {},
    Audio {},
}

/// The resource of a `resource` block: text, or a blob Keel does not read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct EmbeddedResource {
    pub uri: String,
    #[serde(default)]
    pub text: Option<String>,
}

/// `session/request_permission`'s answer.
#[derive(Debug, Deserialize)]
pub(super) struct PermissionResponse {
    pub outcome: PermissionOutcome,
}

/// What the user chose.
#[derive(Debug, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(super) enum PermissionOutcome {
    Selected {
        #[serde(rename = "optionId")]
        option_id: String,
    },
    Cancelled,
}

/// `fs/read_text_file`'s answer.
#[derive(Debug, Deserialize)]
pub(super) struct ReadTextFileResponse {
    pub content: String,
}

/// One `session/update` payload.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub(super) enum SessionUpdate {
    UserMessageChunk { content: TextBlock },
    AgentMessageChunk { content: TextBlock },
    ToolCall(ToolCall),
    ToolCallUpdate(ToolCallUpdate),
    Plan { entries: Vec<PlanEntry> },
}

impl SessionUpdate {
    /// A chunk of the agent's answer.
    pub(super) fn agent_text(text: impl Into<String>) -> Self {
        Self::AgentMessageChunk {
            content: TextBlock::new(text),
        }
    }

    /// A chunk of the user's message (a replayed session).
    pub(super) fn user_text(text: impl Into<String>) -> Self {
        Self::UserMessageChunk {
            content: TextBlock::new(text),
        }
    }
}

/// A text content block (`{"type": "text", "text": …}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct TextBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    pub text: String,
}

impl TextBlock {
    pub(super) fn new(text: impl Into<String>) -> Self {
        Self {
            kind: "text",
            text: text.into(),
        }
    }
}

/// A tool call's content: text (`{"type": "content", "content": {"type": "text", …}}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct ToolCallContent {
    #[serde(rename = "type")]
    kind: &'static str,
    pub content: TextBlock,
}

impl ToolCallContent {
    pub(super) fn text(text: impl Into<String>) -> Self {
        Self {
            kind: "content",
            content: TextBlock::new(text),
        }
    }
}

/// How far a tool call got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ToolCallStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// What kind of tool a call is (for the editor's icons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ToolKind {
    Read,
    Edit,
    Search,
    Execute,
    Think,
    Fetch,
    Other,
}

/// A file a tool call touches (absolute).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct ToolCallLocation {
    pub path: String,
}

/// A tool call, announced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolCall {
    pub tool_call_id: String,
    pub title: String,
    pub kind: ToolKind,
    pub status: ToolCallStatus,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolCallContent>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<ToolCallLocation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
}

/// A change to an announced tool call: only what changed.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolCallUpdate {
    pub tool_call_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<ToolCallLocation>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
}

/// An entry of a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct PlanEntry {
    pub content: String,
    /// `high`, `medium` or `low`.
    pub priority: &'static str,
    /// `pending`, `in_progress` or `completed`.
    pub status: &'static str,
}

/// An option of a permission request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PermissionOption {
    pub option_id: &'static str,
    pub name: &'static str,
    pub kind: &'static str,
}

/// The options Keel offers for an approval, and what each decides: allow once, allow the
/// tool for the rest of the session, deny. (Keel has no "deny for the session".)
pub(super) const PERMISSION_OPTIONS: [PermissionOption; 3] = [
    PermissionOption {
        option_id: "allow_once",
        name: "Allow",
        kind: "allow_once",
    },
    PermissionOption {
        option_id: "allow_always",
        name: "Allow for this session",
        kind: "allow_always",
    },
    PermissionOption {
        option_id: "reject_once",
        name: "Deny",
        kind: "reject_once",
    },
];
