//! Workflows and trees of runs (`docs/workflows.md`): the workspace's `Workflow` documents,
//! running one, and the tree of runs a request started (subagents, workflow nodes).

use keel_runtime::subagents::RunTree;
use keel_types::{RequestId, WORKFLOW_PREFIX};
use keel_workspace::WorkflowSpec;

use crate::{Error, RequestOptions, RunHandle, Runtime};

impl Runtime {
    /// The workspace's workflows by name.
    pub fn workflows(&self) -> std::collections::BTreeMap<String, WorkflowSpec> {
        self.workspace().workflows.clone()
    }

    /// Starts a run of workflow `name` with `input` (text, or JSON when the workflow's
    /// input schema asks for it). The same as [`Runtime::request`] with agent
    /// `workflow/<name>`.
    pub async fn run_workflow(
        &self,
        name: &str,
        input: impl Into<String>,
        owner: Option<String>,
    ) -> Result<RunHandle, Error> {
        self.request(RequestOptions {
            input: input.into(),
            agent: Some(format!("{WORKFLOW_PREFIX}{name}")),
            owner,
            ..RequestOptions::default()
        })
        .await
    }

    /// Run `id` and every run it started, recursively; `None` when there is no such run.
    pub async fn run_tree(&self, id: &RequestId) -> Result<Option<RunTree>, Error> {
        Ok(keel_runtime::subagents::run_tree(self.kernel.store().as_ref(), id).await?)
    }

    /// The spans of run `id` and of every run it started (`docs/observability.md`), computed
    /// from their stored events — no collector needed; the same spans the OTLP export sends.
    /// Ordered by start; a run still going has open spans (no end). `None`: no such run.
    pub async fn trace(
        &self,
        id: &RequestId,
    ) -> Result<Option<Vec<keel_runtime::trace::Span>>, Error> {
        let Some(tree) = self.run_tree(id).await? else {
            return Ok(None);
        };
        let capture = self.workspace().runtime.observability.capture_content;
        let store = self.kernel.store();
        let mut spans = Vec::new();
        let mut pending = vec![tree];
        while let Some(node) = pending.pop() {
            let events = store.events(&node.run.request_id, 0).await?;
            spans.extend(keel_runtime::trace::spans_of(&node.run, &events, capture));
            pending.extend(node.children);
        }
        spans.sort_by_key(|span| span.start_unix_nanos);
        Ok(Some(spans))
    }
}
