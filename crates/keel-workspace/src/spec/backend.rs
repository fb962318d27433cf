//! An agent's `backend`: what runs its loop — Keel's own (`native`), or a program of the
//! team's (`process`: a LangGraph, DeepAgents or OpenAI Agents SDK agent, or anything else)
//! whose model calls and tool calls come back through Keel (`docs/adapters.md`).

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
            Self::Native => None,
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

/// What a resumed process-backed run does when its program diverges from its log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDivergence {
    #[default]
    Fail,
    Continue,
}
