//! Approvals asked by a turn's child runs — a subagent the agent delegated to with `task`, its
//! own subagents — whose events do not reach the turn's run handle. An observer of every
//! stored event ([`keel::EventObserver`]) hands each turn the approval events of the runs
//! under its run (by the approval's root run), so the editor is asked about them as about the
//! turn's own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use keel::{Event, EventObserver, EventPayload, RequestId};
use tokio::sync::mpsc;

/// The turns watching for their child runs' approvals.
#[derive(Default)]
pub(super) struct ChildApprovals {
    /// A turn's run → where its children's approval events go.
    turns: Mutex<HashMap<RequestId, mpsc::UnboundedSender<Event>>>,
    /// A child run that asked → the turn's run it is under (to route its decision).
    roots: Mutex<HashMap<RequestId, RequestId>>,
}

impl ChildApprovals {
    /// Watches the child runs of run `root` until the returned watch is dropped.
    pub(super) fn watch(self: &Arc<Self>, root: &RequestId) -> Watch {
        let (tx, events) = mpsc::unbounded_channel();
        self.turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(root.clone(), tx);
        Watch {
            events,
            root: root.clone(),
            owner: self.clone(),
        }
    }

    fn forward(&self, root: &RequestId, event: &Event) {
        let turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(turn) = turns.get(root) {
            let _ = turn.send(event.clone());
        }
    }
}

impl EventObserver for ChildApprovals {
    fn observe(&self, event: &Event) {
        match &event.payload {
            EventPayload::ApprovalRequested { approval } => {
                // A run's own approvals reach its turn through the run's handle.
                let Some(root) = &approval.root_request_id else {
                    return;
                };
                self.roots
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(event.request_id.clone(), root.clone());
                self.forward(root, event);
            }
            EventPayload::ApprovalResolved { .. } => {
                let root = self
                    .roots
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&event.request_id)
                    .cloned();
                if let Some(root) = root {
                    self.forward(&root, event);
                }
            }
            _ => {}
        }
    }
}

/// One turn's watch: its children's approval events arrive on `events`.
pub(super) struct Watch {
    pub events: mpsc::UnboundedReceiver<Event>,
    root: RequestId,
    owner: Arc<ChildApprovals>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.owner
            .turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.root);
        self.owner
            .roots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, root| *root != self.root);
    }
}
