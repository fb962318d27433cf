//! What one run is launched with.

use std::sync::Arc;
use std::time::Duration;

use keel_types::{
    Message, ModelParams, ModelProvider, PermissionMode, RunRecord, SeenFiles, TextFiles,
    ToolContext,
};
use keel_workspace::{AgentSpec, Workspace};

use super::{DirectCall, Start};
use crate::rebuild::Rebuilt;
use crate::skills::SkillPrompt;

/// What one run is launched with: the recorded run and everything that shapes its loop.
pub(crate) struct Launch {
    pub record: RunRecord,
    pub agent: AgentSpec,
    pub provider: Arc<dyn ModelProvider>,
    pub start: Start,
    /// The session's trimmed history, sent before the request's own.
    pub history: Vec<Message>,
    /// The history the request supplied, sent after the session's (and recorded in the
    /// run's opening event).
    pub request_history: Vec<Message>,
    /// The request's own time budget; the smaller of it and `runTimeout` applies.
    pub timeout: Option<Duration>,
    /// The state rebuilt from a log (resume, fork); the run continues after its last event.
    pub rebuilt: Option<Rebuilt>,
    /// A direct tool call instead of model rounds.
    pub direct: Option<DirectCall>,
    /// The run's permission mode, if the request set one.
    pub mode: Option<PermissionMode>,
    /// What skills add to the prompt (catalogue, bodies) and the events that say so.
    pub skills: SkillPrompt,
    /// What memory recall adds to the prompt, and the event that says so.
    pub memory: crate::memory::MemoryPrompt,
    /// The request's metadata.
    pub metadata: std::collections::BTreeMap<String, String>,
    /// Model parameters the request set, over the Model document's in every round.
    pub params: ModelParams,
    /// The structured output the request asked for (the agent declares none).
    pub output_schema: Option<serde_json::Value>,
    /// Policies that may only narrow this run's decisions: its ancestors' effective
    /// policies (a subagent has no more permission than its parent).
    pub narrowing: Vec<keel_workspace::PolicySpec>,
    /// How deep in a tree of runs this one is (the request's own run: 0).
    pub depth: u32,
    /// Where the file tools read and write instead of the disk (the request's
    /// `RequestOptions::files`).
    pub files: Option<Arc<dyn TextFiles>>,
}

impl Launch {
    /// A launch with no history, budget, rebuilt state, direct call or mode.
    pub(crate) fn new(
        record: RunRecord,
        agent: AgentSpec,
        provider: Arc<dyn ModelProvider>,
        start: Start,
    ) -> Self {
        Self {
            record,
            agent,
            provider,
            start,
            history: Vec::new(),
            request_history: Vec::new(),
            timeout: None,
            rebuilt: None,
            direct: None,
            mode: None,
            skills: SkillPrompt::default(),
            memory: crate::memory::MemoryPrompt::default(),
            metadata: std::collections::BTreeMap::new(),
            params: ModelParams::default(),
            output_schema: None,
            narrowing: Vec::new(),
            depth: 0,
            files: None,
        }
    }
}

/// What the tool calls of a run start from: the workspace, the run, the request's metadata
/// and view of the files. `model_run`: a model makes the calls, so a file must be read before
/// it is edited; an operator's direct call need not (docs/tool-gateway.md#read-before-edit).
pub(crate) fn tool_context(
    workspace: &Workspace,
    record: &RunRecord,
    model_run: bool,
    metadata: std::collections::BTreeMap<String, String>,
    files: Option<Arc<dyn TextFiles>>,
) -> ToolContext {
    ToolContext {
        workspace_root: workspace.root.clone(),
        request_id: record.request_id.clone(),
        session_id: record.session_id.clone(),
        agent: record.agent.clone(),
        max_output_bytes: usize::try_from(workspace.runtime.limits.max_tool_output_bytes)
            .unwrap_or(usize::MAX),
        seen_files: model_run.then(SeenFiles::default),
        progress: None,
        metadata: Arc::new(metadata),
        call_id: None,
        call_seq: None,
        traceparent: None,
        files,
    }
}
