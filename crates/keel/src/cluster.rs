//! Several replicas on one shared store (PostgreSQL): queueing requests for any replica,
//! serving as a replica, cancelling a run wherever it executes, and the cluster's state.

use std::sync::Arc;

use keel_types::{ClusterStatus, RequestId, RunRecord, RunStatus, Signal, SignalSink};

use crate::{Error, Replica, RequestOptions, Runtime};

impl Runtime {
    /// Whether the store is shared by several processes (leases, a queue, signals).
    pub fn is_shared(&self) -> bool {
        self.kernel.cluster().is_some()
    }

    /// Queues a request in the shared store; a replica with room (this one too, while it
    /// [serves](Self::serve_replica)) claims and runs it. Returns the queued run's record.
    ///
    /// Errors: [`crate::RuntimeError::InvalidInput`] when the store is not shared, or when
    /// the request would not start (unknown agent, bad history…).
    pub async fn enqueue(&self, options: RequestOptions) -> Result<RunRecord, Error> {
        // Any replica may claim it, this one too: its skills stay current.
        self.skills.watch();
        Ok(self.kernel.enqueue(options).await?)
    }

    /// Makes this runtime a replica of its shared store: it takes over the runs of replicas
    /// whose lease expired, claims queued requests while it has room, and cancels runs here
    /// that were cancelled elsewhere. Every signal of the store also goes to `outside` (e.g.
    /// a server waking its live streams). `None` when the store is not shared. Needs a Tokio
    /// runtime; stops when the [`Replica`] is dropped.
    pub fn serve_replica(&self, outside: Option<Arc<dyn SignalSink>>) -> Option<Replica> {
        // A replica runs what it claims and takes over: its skills stay current too.
        let replica = self.kernel.serve_replica(outside)?;
        self.skills.watch();
        Some(replica)
    }

    /// This process's lease, the replicas, the queue depth and the runs taken over; `None`
    /// when the store is not shared.
    pub async fn cluster_status(&self) -> Result<Option<ClusterStatus>, Error> {
        match self.kernel.cluster() {
            Some(cluster) => Ok(Some(cluster.status().await?)),
            None => Ok(None),
        }
    }

    /// Gives up this process's lease (after [`Self::shutdown`]): the runs it left
    /// interrupted are taken over by the other replicas at once.
    pub async fn release_lease(&self) -> Result<(), Error> {
        if let Some(cluster) = self.kernel.cluster() {
            cluster.release().await?;
        }
        Ok(())
    }

    /// Cancels a run wherever it is: here, still queued, or executing on another replica of
    /// a shared store (which is told to). Returns whether there was a live run to cancel.
    pub async fn cancel(&self, id: &RequestId) -> Result<bool, Error> {
        if self.kernel.cancel(id) {
            return Ok(true);
        }
        let Some(cluster) = self.kernel.cluster() else {
            return Ok(false);
        };
        if cluster.cancel_queued(id).await? {
            return Ok(true);
        }
        match self.runs.get(id).await? {
            Some(run) if matches!(run.status, RunStatus::Running | RunStatus::WaitingApproval) => {
                cluster.publish(&Signal::Cancel(id.clone())).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
