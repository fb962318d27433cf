//! An agent's `backend`: what runs its loop — Keel's own (`native`), or a program of the
//! team's (`process`: a LangGraph, DeepAgents or OpenAI Agents SDK agent, or anything else)
//! whose model calls and tool calls come back through Keel (`docs/adapters.md`), or another
//! vendor's agent reached over A2A (`a2a`, what a `RemoteAgent` document declares).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Duration;

/// What runs an agent's loop.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "lowercase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum BackendSpec {
    /// Keel's own agent loop.
    #[default]
    Native,
    /// A program started for each run, speaking the process adapter protocol: its input on
    /// stdin, a model endpoint (OpenAI Chat Completions) and a tools endpoint (MCP) on
    /// loopback, its progress and answer as JSON lines on stdout.
    Process {
        /// argv; the first element is the program (a relative path with a `/` resolves from
        /// `cwd`, a bare name from `PATH`).
        #[schemars(length(min = 1))]
        command: Vec<String>,
        /// The folder it runs in, relative to the workspace (default: the workspace).
        #[serde(default)]
        cwd: Option<String>,
        /// Variables set for it.
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// Variables of Keel's environment passed on by name (besides `PATH`, `HOME`,
        /// `LANG`, `TZ` and `TMPDIR`, always passed); nothing else of Keel's environment is.
        #[serde(default)]
        env_allow: Vec<String>,
        /// How long one run of it may take (default: the agent's `runTimeout`).
        #[serde(default)]
        timeout: Option<Duration>,
        /// Settings of the program's own, passed through untouched (stdin's `config`).
        #[serde(default)]
        config: Value,
        /// When a resumed run's program asks for something other than what its log holds:
        /// `fail` (the default) ends the run saying where; `continue` goes on live from there.
        #[serde(default)]
        on_divergence: OnDivergence,
    },
    /// A remote agent reached over A2A 1.0 (JSON-RPC): each run is a task of the remote
    /// agent, its updates mirrored as the run's events. Declared by a `RemoteAgent` document.
    A2a {
        /// The agent's JSON-RPC endpoint (its card's interface URL), `http://` or `https://`.
        url: String,
        /// Request headers, e.g. `Authorization: Bearer ${REMOTE_KEY}` (values may use `${VAR}`).
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// How long one task may take (default: the agent's `runTimeout`).
        #[serde(default)]
        timeout: Option<Duration>,
    },
}

/// An `a2a` backend, as the runtime takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteBackend {
    pub url: String,
    pub headers: BTreeMap<String, String>,
    pub timeout: Option<Duration>,
}

/// `kind: RemoteAgent` — an agent of another system, reached over A2A. It is an agent like
/// any other to the workspace: a subagent (`task`), a workflow's agent node, a model of the
/// facades; each run of it is one task of the remote agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RemoteAgentSpec {
    /// The protocol: `a2a` (A2A 1.0, JSON-RPC binding), the only one.
    #[serde(default)]
    pub protocol: RemoteProtocol,
    /// The agent's JSON-RPC endpoint (its Agent Card's interface URL).
    #[schemars(regex(pattern = r"^https?://"))]
    pub url: String,
    /// Request headers, e.g. `Authorization: Bearer ${REMOTE_KEY}` (values may use `${VAR}`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// What the agent does, for the agents that delegate to it (the `task` tool's description).
    #[serde(default)]
    pub description: String,
    /// How long one task may take (default: the runtime's `runTimeout`).
    #[serde(default)]
    pub timeout: Option<Duration>,
}

/// The protocol of a `RemoteAgent`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RemoteProtocol {
    #[default]
    A2a,
}

impl RemoteAgentSpec {
    /// The agent it declares: no model, no tools, the `a2a` backend.
    pub fn to_agent(&self) -> Result<super::AgentSpec, serde_json::Error> {
        serde_json::from_value(serde_json::json!({
            "model": "",
            "instructions": self.description,
            "backend": {
                "kind": "a2a",
                "url": self.url,
                "headers": self.headers,
                "timeout": self.timeout,
            },
        }))
    }
}

/// A `process` backend, as the runtime takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessBackend {
    pub command: Vec<String>,
    pub cwd: Option<String>,
    pub env: BTreeMap<String, String>,
    pub env_allow: Vec<String>,
    pub timeout: Option<Duration>,
    pub config: Value,
    pub on_divergence: OnDivergence,
}

impl BackendSpec {
    /// The `process` backend, if it is one.
    pub fn process(&self) -> Option<ProcessBackend> {
        match self {
            Self::Native | Self::A2a { .. } => None,
            Self::Process {
                command,
                cwd,
                env,
                env_allow,
                timeout,
                config,
                on_divergence,
            } => Some(ProcessBackend {
                command: command.clone(),
                cwd: cwd.clone(),
                env: env.clone(),
                env_allow: env_allow.clone(),
                timeout: *timeout,
                config: config.clone(),
                on_divergence: *on_divergence,
            }),
        }
    }
}

impl BackendSpec {
    /// The `a2a` backend, if it is one.
    pub fn remote(&self) -> Option<RemoteBackend> {
        match self {
            Self::A2a {
                url,
                headers,
                timeout,
            } => Some(RemoteBackend {
                url: url.clone(),
                headers: headers.clone(),
                timeout: *timeout,
            }),
            _ => None,
        }
    }
}

/// What a resumed process-backed run does when its program diverges from its log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDivergence {
    #[default]
    Fail,
    Continue,
}
