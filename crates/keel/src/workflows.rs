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
}
