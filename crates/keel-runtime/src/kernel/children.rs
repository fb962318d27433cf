//! Child runs: the kernel's side of delegation (`task`) and of workflow nodes that run an
//! agent — a run linked to its parent and root, within the depth limit, under its
//! ancestors' policies as narrowing layers; picking up the child an interrupted parent had
//! started; and the tree of a run's children.

use std::sync::Weak;

use async_trait::async_trait;
use keel_types::{RunFilter, RunLinks, RunRecord, RunStatus};
use keel_workspace::PolicySpec;

use super::{Inner, Kernel, Origin, RequestOptions};
use crate::RuntimeError;
use crate::rebuild::opening;
use crate::subagents::{Child, ChildRequest, Delegate, layers_of};

/// The kernel as the agent loop's [`Delegate`], without keeping it alive.
pub(super) struct KernelRef(pub(super) Weak<Inner>);

#[async_trait]
impl Delegate for KernelRef {
    async fn delegate(&self, child: ChildRequest) -> Result<Child, RuntimeError> {
        let inner = self.0.upgrade().ok_or(RuntimeError::ShuttingDown)?;
        Kernel {
            inner,
            pinned: None,
        }
        .start_child(child)
        .await
    }
}

impl Kernel {
    /// Starts the child run for a parent's call, or picks up the one it had started.
    pub(crate) async fn start_child(&self, child: ChildRequest) -> Result<Child, RuntimeError> {
        let earlier = match child.resumed {
            true => {
                self.earlier_child(&child.parent.request_id, &child.call)
                    .await?
            }
            false => None,
        };
        if let Some(earlier) = earlier {
            return match earlier.status {
                RunStatus::Interrupted => Ok(Child::Live(self.resume(&earlier.request_id).await?)),
                status if status.is_terminal() => Ok(Child::Ended(Box::new(earlier))),
                status => Err(RuntimeError::Conflict(format!(
                    "the child run {} for this call is still {} in another process",
                    earlier.request_id,
                    status.as_str()
                ))),
            };
        }
        self.accepting()?;
        let max = self.workspace().runtime.limits.max_depth;
        if child.depth > max {
            return Err(RuntimeError::InvalidInput(format!(
                "cannot start `{}`: runs may nest only {max} deep (limits.maxDepth)",
                child.agent
            )));
        }
        let parent = &child.parent;
        let links = RunLinks {
            parent_id: Some(parent.request_id.clone()),
            root_id: Some(
                parent
                    .links
                    .root_id
                    .clone()
                    .unwrap_or_else(|| parent.request_id.clone()),
            ),
            parent_call: Some(child.call.clone()),
            ..RunLinks::default()
        };
        let options = RequestOptions {
            input: child.prompt,
            agent: Some(child.agent),
            owner: parent.owner.clone(),
            metadata: child.metadata,
            trace: Some(crate::trace::child_trace(parent, &child.call)),
            ..RequestOptions::default()
        };
        let origin = Origin {
            links,
            narrowing: child.narrowing,
            depth: child.depth,
            ..Origin::default()
        };
        Ok(Child::Live(self.start_run(options, origin).await?))
    }

    /// The child run `parent` started for `call`, if it started one.
    pub(super) async fn earlier_child(
        &self,
        parent: &keel_types::RequestId,
        call: &str,
    ) -> Result<Option<RunRecord>, RuntimeError> {
        Ok(self
            .store()
            .list_runs(&RunFilter {
                parent: Some(parent.clone()),
                ..RunFilter::default()
            })
            .await?
            .into_iter()
            .find(|run| run.links.parent_call.as_deref() == Some(call)))
    }

    /// A run's depth and the narrowing layers its ancestors impose, from their records and
    /// opening events (for a resumed child).
    pub(super) async fn lineage(
        &self,
        record: &RunRecord,
    ) -> Result<(u32, Vec<PolicySpec>), RuntimeError> {
        let store = self.store();
        let mut depth = 0;
        let mut layers = Vec::new();
        let mut next = record.links.parent_id.clone();
        while let Some(id) = next {
            depth += 1;
            let Some(parent) = store.get_run(&id).await? else {
                break;
            };
            if parent.workflow().is_none() {
                let (_, mode, _) = opening(&store.events(&id, 0).await?);
                layers.extend(layers_of(&self.workspace(), &parent.agent, mode));
            }
            next = parent.links.parent_id.clone();
        }
        Ok((depth, layers))
    }
}
