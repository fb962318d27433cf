//! Several processes on one shared store (`RunLog::cluster`): queued requests any replica
//! may claim, and the replica loop — take over the runs of processes whose lease expired
//! (resumed from their logs), claim queued requests while there is room, and act on the
//! signals other replicas send (cancel a run executing here, wake waiting approvals).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use keel_types::{
    Claimed, Cluster, ErrorCode, ErrorInfo, FinishReason, Message, ModelParams, PermissionMode,
    RequestId, RunRecord, RunStatus, Signal, SignalSink,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Kernel, Origin, RequestOptions};
use crate::RuntimeError;
use crate::handle::RunHandle;
use crate::history::validate_history;

/// How often the replica loop looks for expired leases and queued work when nothing wakes it.
const SWEEP: Duration = Duration::from_secs(1);

/// What a queued run needs besides its record (input, agent, session, owner).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueuedRequest {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<PermissionMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    metadata: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "ModelParams::is_empty")]
    params: ModelParams,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output_schema: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    override_session_owner: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
}

/// The running replica loop; dropping it stops the loop (not the runs).
#[derive(Debug)]
pub struct Replica {
    stop: CancellationToken,
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Forwards signals: to the loop (queued work), to the kernel (cancel, approvals) and to an
/// outside sink (e.g. a server's live streams).
struct Relay {
    kernel: Kernel,
    queued: mpsc::UnboundedSender<()>,
    outside: Option<Arc<dyn SignalSink>>,
}

impl SignalSink for Relay {
    fn signal(&self, signal: &Signal) {
        match signal {
            Signal::Queued => {
                let _ = self.queued.send(());
            }
            Signal::Cancel(id) => {
                if self.kernel.cancel(id) {
                    tracing::info!(request_id = %id, "Run cancelled by another replica.");
                }
            }
            Signal::Decided(_) => self.kernel.inner.decisions.notify_waiters(),
            Signal::Appended(..) => {}
        }
        if let Some(outside) = &self.outside {
            outside.signal(signal);
        }
    }
}

impl Kernel {
    /// The shared store's cluster port, when the store is shared.
    pub fn cluster(&self) -> Option<Arc<dyn Cluster>> {
        self.inner.store.cluster()
    }

    /// Wakes the runs of this process waiting on an approval: one was just decided.
    pub fn approval_decided(&self) {
        self.inner.decisions.notify_waiters();
    }

    /// Queues a request in the shared store instead of running it here: any replica with
    /// room claims it. Checked as [`Kernel::request`] checks (agent or workflow, history,
    /// session id) before anything is stored. Returns the queued run's record.
    ///
    /// Errors: [`RuntimeError::InvalidInput`] when the store is not shared.
    pub async fn enqueue(&self, options: RequestOptions) -> Result<RunRecord, RuntimeError> {
        self.accepting()?;
        let Some(cluster) = self.cluster() else {
            return Err(RuntimeError::InvalidInput(
                "this store is not shared: start the run instead of queueing it".into(),
            ));
        };
        validate_history(&options.history).map_err(RuntimeError::InvalidInput)?;
        if let Some(session) = &options.session_id {
            keel_types::SessionId::parse(&session.to_string())
                .map_err(|error| RuntimeError::InvalidInput(error.to_string()))?;
        }
        let agent = self.agent_name(options.agent.as_deref())?;
        match agent.strip_prefix(keel_types::WORKFLOW_PREFIX) {
            Some(workflow) => self.check_workflow_request(workflow, &options)?,
            None => {
                let mut spec = self.agent(&agent)?;
                if let Some(model) = &options.model {
                    spec.model = model.clone();
                }
                self.provider(&agent, &spec)?;
            }
        }
        if let Some(session) = &options.session_id {
            self.claim_session(session, &agent, &options).await?;
        }
        let mut record = RunRecord::new(
            RequestId::generate(),
            options.session_id.clone(),
            agent,
            options.input.clone(),
        );
        record.status = RunStatus::Queued;
        record.owner = options.owner.clone();
        record.trace = Some(self.trace_for(options.trace.clone()));
        let request = QueuedRequest {
            history: options.history,
            mode: options.mode,
            timeout_ms: options.timeout.map(|t| t.as_millis() as u64),
            metadata: options.metadata,
            params: options.params,
            output_schema: options.output_schema,
            override_session_owner: options.override_session_owner,
            model: options.model,
        };
        let request = serde_json::to_value(&request)
            .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
        cluster.enqueue(&record, &request).await?;
        Ok(record)
    }

    /// Starts a queued run this process claimed. A request that cannot start any more (its
    /// agent was removed since, say) ends its run `failed` with the reason.
    async fn start_claimed(&self, claimed: Claimed) -> Result<RunHandle, RuntimeError> {
        let Claimed { run, request } = claimed;
        let queued: QueuedRequest = serde_json::from_value(request).unwrap_or_default();
        let options = RequestOptions {
            input: run.input.clone(),
            agent: Some(run.agent.clone()),
            session_id: run.session_id.clone(),
            mode: queued.mode,
            history: queued.history,
            timeout: queued.timeout_ms.map(Duration::from_millis),
            owner: run.owner.clone(),
            metadata: queued.metadata,
            params: queued.params,
            output_schema: queued.output_schema,
            override_session_owner: queued.override_session_owner,
            trace: run.trace.clone(),
            model: queued.model,
            // A queued request is not its caller's any more: the file tools use the disk.
            files: None,
        };
        let origin = Origin {
            links: run.links.clone(),
            claimed: Some(run.clone()),
            ..Origin::default()
        };
        match self.start_run(options, origin).await {
            Ok(handle) => Ok(handle),
            Err(error) => {
                let mut failed = run;
                failed.status = RunStatus::Failed;
                failed.finish_reason = Some(FinishReason::Internal);
                failed.error = Some(ErrorInfo::new(ErrorCode::InvalidInput, error.to_string()));
                failed.ended_at = Some(keel_types::now_rfc3339());
                self.store().update_run(&failed).await?;
                Err(error)
            }
        }
    }

    /// Makes this process a replica of the shared store: it takes over the runs of processes
    /// whose lease expired, claims queued requests while it has room
    /// (`limits.maxConcurrentRuns`), cancels runs here that another replica was asked to
    /// cancel, and passes every signal on to `outside` too. `None` when the store is not
    /// shared. Stops when the returned [`Replica`] is dropped or the kernel shuts down.
    pub fn serve_replica(&self, outside: Option<Arc<dyn SignalSink>>) -> Option<Replica> {
        let cluster = self.cluster()?;
        let (queued, wake) = mpsc::unbounded_channel();
        cluster.listen(Arc::new(Relay {
            kernel: self.clone(),
            queued,
            outside,
        }));
        let stop = CancellationToken::new();
        tokio::spawn(replica_loop(self.clone(), cluster, wake, stop.clone()));
        Some(Replica { stop })
    }

    /// Refuses to resume run `id` while a launch of it is still ending in this process (one
    /// that ran under a store lease this process lost, whose run it then took back itself),
    /// and stops that launch: its writes are refused, and two launches must not continue one
    /// log. The replica loop tries again at its next sweep.
    pub(super) fn not_ending_here(&self, id: &RequestId) -> Result<(), RuntimeError> {
        match self.tracker().runs.get(id) {
            Some(active) => {
                active.interrupt.cancel();
                Err(RuntimeError::Conflict(format!(
                    "run `{id}` is still ending in this process; it can be resumed once it has"
                )))
            }
            None => Ok(()),
        }
    }

    /// Resolves when a run of this kernel ends (or starts): there may be room again.
    async fn run_ended(&self) {
        let mut live = self.inner.live.subscribe();
        let _ = live.changed().await;
    }

    /// Room for more top-level runs here: free run slots (`kernel/slots.rs`).
    fn room(&self) -> usize {
        self.inner.slots.room()
    }
}

async fn replica_loop(
    kernel: Kernel,
    cluster: Arc<dyn Cluster>,
    mut wake: mpsc::UnboundedReceiver<()>,
    stop: CancellationToken,
) {
    loop {
        if kernel.accepting().is_err() {
            return;
        }
        match kernel.store().recover().await {
            Ok(taken) => {
                for id in taken {
                    match kernel.resume(&id).await {
                        Ok(handle) => finish_in_background(handle),
                        Err(error @ RuntimeError::Conflict(_)) => {
                            tracing::debug!(request_id = %id, %error, "A run taken over waits for its earlier launch here to end.")
                        }
                        Err(error) => {
                            tracing::warn!(request_id = %id, %error, "Cannot resume a run taken over.")
                        }
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "Cannot look for runs to take over."),
        }
        loop {
            let room = kernel.room();
            if room == 0 || kernel.accepting().is_err() {
                break;
            }
            let claimed = match cluster.claim_queued(room.min(16)).await {
                Ok(claimed) => claimed,
                Err(error) => {
                    tracing::warn!(%error, "Cannot claim queued requests.");
                    break;
                }
            };
            let got = claimed.len();
            for claim in claimed {
                let id = claim.run.request_id.clone();
                match kernel.start_claimed(claim).await {
                    Ok(handle) => finish_in_background(handle),
                    Err(error) => {
                        tracing::warn!(request_id = %id, %error, "A queued request could not start.")
                    }
                }
            }
            if got < room.min(16) {
                break;
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = wake.recv() => {
                // Several signals at once need one look.
                while wake.try_recv().is_ok() {}
            }
            _ = kernel.run_ended() => {}
            _ = tokio::time::sleep(SWEEP) => {}
        }
    }
}

/// Lets a run this replica started go on by itself.
fn finish_in_background(mut handle: RunHandle) {
    tokio::spawn(async move {
        while handle.next_event().await.is_some() {}
        if let Err(error) = handle.wait().await {
            tracing::warn!(%error, "A run ended abnormally.");
        }
    });
}
