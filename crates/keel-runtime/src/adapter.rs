//! Backend adapters: agents whose loop is not Keel's (`backend: {kind: process}`), run inside
//! Keel's boundary. The adapter starts the agent's program and serves it; the program's model
//! rounds and tool calls come back here, through [`RunCalls`], and the run makes them exactly
//! as its native loop would — each model round recorded with its usage, under the run's
//! retries and budgets; each tool call through the gateway, policy, hooks and approvals,
//! recorded — so the log, the console and every surface see a process-backed run like a
//! native one. The adapter only translates (`docs/adapters.md`): it never routes by keywords,
//! hard-codes tools or parses free text into tool calls.
//!
//! The native loop is the other implementation of the same boundary: `agent_loop/` drives
//! its own rounds; `agent_loop/backend.rs` answers a program's.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use keel_types::{
    Message, ModelParams, ModelStopReason, RequestId, SessionId, ToolCall, ToolSpec, Usage,
};
use keel_workspace::ProcessBackend;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Runs the program of a process-backed agent for one run.
#[async_trait]
pub trait Adapter: Send + Sync + 'static {
    /// Runs `run`'s program to its end: its final answer, or why it failed. Dropping the
    /// future stops the program (the run was cancelled, interrupted or timed out).
    async fn run(&self, run: AdapterRun) -> Result<AdapterAnswer, AdapterFailure>;
}

/// What a program is given for one run.
pub struct AdapterRun {
    pub request_id: RequestId,
    pub session_id: Option<SessionId>,
    /// The agent's name.
    pub agent: String,
    /// The agent's `backend`.
    pub backend: ProcessBackend,
    /// The workspace's folder.
    pub workspace_root: PathBuf,
    /// This request's input.
    pub input: String,
    /// The conversation before it (the session's turns, then the request's own history).
    pub history: Vec<Message>,
    /// The agent's instructions.
    pub instructions: String,
    /// The whole prompt Keel's own loop would send first: instructions, skills, recalled
    /// memory, history, hook context, the input.
    pub messages: Vec<Message>,
    /// The tools the agent may call, as the model sees them.
    pub tools: Vec<ToolSpec>,
    /// The run's model (`Model` document name) and the provider's model name.
    pub model: String,
    /// How the program's model rounds and tool calls reach the run.
    pub calls: RunCalls,
    /// Whether this run was resumed after an interruption (its log holds earlier rounds and
    /// calls, which are answered from it first).
    pub resumed: bool,
}

/// A program's final answer.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterAnswer {
    pub output: String,
    /// A structured value, when the program gave one.
    pub value: Option<Value>,
}

/// Why a program did not answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdapterFailure {
    /// It could not be started (no such program, a bad `cwd`).
    #[error("the agent's program could not start: {0}")]
    Start(String),
    /// It broke the protocol, exited without an answer, or reported a failure.
    #[error("{0}")]
    Program(String),
    /// The run it served ended it (a budget, a divergence, the store): the run says why.
    #[error("the run ended the program")]
    Ended,
}

/// A model round a program asks for, in Keel's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelAsk {
    /// The program's conversation, sent as it is.
    pub messages: Vec<Message>,
    /// The tools it offers the model.
    pub tools: Vec<ToolSpec>,
    /// Its sampling parameters, over the Model document's.
    pub params: ModelParams,
}

/// A model's answer to a program's round.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub stop: ModelStopReason,
    pub usage: Usage,
    /// The provider's model name.
    pub model: String,
}

/// A tool call's result for a program: its output, and whether it is an error (refused by
/// the gateway, policy, a hook or a person, or failed).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    pub output: String,
    pub is_error: bool,
}

/// Why a program's request was not answered; the run ends with it, so the program only has
/// to give up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct AskRefused {
    pub message: String,
}

/// Progress a program reports (stdout's `progress`, `event` and `plan` lines).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// `progress`, `event` or `plan`.
    pub kind: String,
    /// The line's payload, as the program wrote it.
    pub data: Value,
}

pub(crate) enum Ask {
    Model(ModelAsk, oneshot::Sender<Result<ModelReply, AskRefused>>),
    Tool(
        String,
        Value,
        oneshot::Sender<Result<ToolReply, AskRefused>>,
    ),
    Progress(Progress),
    Log(String),
}

/// The run's side of a program: its model rounds and tool calls, made one at a time in the
/// order they come. Cheap to clone.
#[derive(Clone)]
pub struct RunCalls {
    tx: mpsc::Sender<Ask>,
    /// Cancelled when the run has ended: every call answers at once then.
    ended: CancellationToken,
}

impl RunCalls {
    pub(crate) fn new(tx: mpsc::Sender<Ask>, ended: CancellationToken) -> Self {
        Self { tx, ended }
    }

    /// One model round of the run, recorded (`runtime.model.*`).
    pub async fn model(&self, ask: ModelAsk) -> Result<ModelReply, AskRefused> {
        let (reply, answer) = oneshot::channel();
        self.ask(Ask::Model(ask, reply), answer).await
    }

    /// One governed tool call of the run, recorded (`runtime.tool.guard`, policy, hooks,
    /// approval, `agent.tool.*`).
    pub async fn tool(&self, name: &str, arguments: Value) -> Result<ToolReply, AskRefused> {
        let (reply, answer) = oneshot::channel();
        self.ask(Ask::Tool(name.to_owned(), arguments, reply), answer)
            .await
    }

    /// Records progress the program reported (`runtime.adapter.progress`).
    pub async fn progress(&self, progress: Progress) {
        let _ = self.tx.send(Ask::Progress(progress)).await;
    }

    /// A line the program wrote that is not part of the protocol: kept, bounded, with the
    /// run (`runtime.adapter.log`).
    pub async fn log(&self, line: String) {
        let _ = self.tx.send(Ask::Log(line)).await;
    }

    /// Resolves when the run has ended.
    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }

    async fn ask<T>(
        &self,
        ask: Ask,
        answer: oneshot::Receiver<Result<T, AskRefused>>,
    ) -> Result<T, AskRefused> {
        let over = || AskRefused {
            message: "the run has ended".into(),
        };
        if self.tx.send(ask).await.is_err() {
            return Err(over());
        }
        tokio::select! {
            answer = answer => answer.unwrap_or_else(|_| Err(over())),
            _ = self.ended.cancelled() => Err(over()),
        }
    }
}

/// The adapters a runtime has, by backend kind.
#[derive(Clone, Default)]
pub struct Adapters {
    /// `backend: {kind: process}`.
    pub process: Option<Arc<dyn Adapter>>,
    /// `backend: {kind: a2a}` (`RemoteAgent` documents).
    pub remote: Option<Arc<dyn RemoteAgents>>,
}

/// One run of a remote agent, as the runtime asks for it: a new task with the run's input,
/// or (a resumed run) the task its log names, re-attached to.
#[derive(Debug, Clone)]
pub struct RemoteTask {
    pub request_id: RequestId,
    pub agent: String,
    pub backend: keel_workspace::RemoteBackend,
    pub input: String,
    /// The remote task to re-attach to instead of sending the input again.
    pub attach: Option<String>,
    /// Set when the runtime shuts down: the run is interrupted, to be resumed, so the remote
    /// task is left running (the resumed run re-attaches to it) rather than cancelled.
    pub interrupted: CancellationToken,
}

/// What a remote agent reports while its task runs.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteUpdate {
    /// The remote task's id and context (first, before anything else).
    Task { id: String, context_id: String },
    /// The task's state changed (`TASK_STATE_WORKING`, …), with its status message's text.
    Status {
        state: String,
        message: Option<String>,
    },
    /// More text of the answer artifact.
    Text(String),
}

/// How a remote task ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteEnd {
    /// Completed: its answer (the artifacts' text, else the status message's) and the first
    /// data part, if any.
    Completed {
        output: String,
        value: Option<Value>,
    },
    /// Failed or rejected, with why.
    Failed(String),
    /// Cancelled on the remote side.
    Cancelled(String),
    /// It asks for input or authentication Keel cannot give.
    InputRequired(String),
}

/// An A2A client: runs a remote agent's task to its end, reporting on `updates`. Dropping
/// the future cancels the remote task (the client sends `CancelTask`), unless the run was
/// interrupted (`RemoteTask::interrupted`).
#[async_trait]
pub trait RemoteAgents: Send + Sync {
    async fn run(
        &self,
        task: RemoteTask,
        updates: mpsc::Sender<RemoteUpdate>,
    ) -> Result<RemoteEnd, String>;
}

/// The model of an agent that has none (a remote agent: its task answers, not a model): any
/// round asked of it fails saying so. Named by the remote agent's URL.
pub(crate) struct NoModel(pub String);

#[async_trait]
impl keel_types::ModelProvider for NoModel {
    fn provider_name(&self) -> &str {
        "a2a"
    }

    fn model_name(&self) -> &str {
        &self.0
    }

    async fn stream(
        &self,
        _: keel_types::ModelRequest,
    ) -> Result<keel_types::ModelStream, keel_types::ModelError> {
        Err(keel_types::ModelError::BadRequest {
            status: 400,
            message: format!(
                "the remote agent at {} has no model of Keel's to ask",
                self.0
            ),
        })
    }
}
