//! The port of a store shared by several processes (replicas of `keel serve` on one
//! PostgreSQL database): leases with fencing tokens, a queue of requests any replica may
//! claim, and signals between replicas. A store that is not shared has none of it
//! ([`crate::RunLog::cluster`] is `None`).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::RequestId;
use crate::ports::StoreError;
use crate::run::RunRecord;

/// This process's lease: while it holds one, the runs it owns are its own to write.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// A name for the process (`host:pid`, or `KEEL_REPLICA`).
    pub replica: String,
    /// The fencing token: every write of an owned run is checked against it.
    pub token: i64,
    /// When the lease runs out unless renewed (RFC 3339, the database's clock).
    pub expires_at: String,
}

/// What the cluster looks like from the store.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// This process's lease, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Runs this process owns that are active (running or waiting for approval).
    pub owned_runs: u64,
    /// Live leases (replicas) in the cluster, this one included.
    pub replicas: u64,
    /// Queued requests no replica has claimed yet.
    pub queue_depth: u64,
    /// Runs this process took over from processes whose lease expired, since it started.
    pub taken_over: u64,
}

/// A note from one replica to the others, delivered to every listener (this process's too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// A request was queued: a replica with room should claim it.
    Queued,
    /// Cancel this run wherever it executes.
    Cancel(RequestId),
    /// Events of this run were stored (up to `seq`): live streams should read them.
    Appended(RequestId, u64),
    /// An approval was decided: a run waiting on it should look.
    Decided(String),
}

/// Receives [`Signal`]s; called from the listener's task, so it must be quick.
pub trait SignalSink: Send + Sync {
    fn signal(&self, signal: &Signal);
}

/// A claimed queued request: its run record (now running, owned by this process) and the
/// request as it was queued.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub run: RunRecord,
    pub request: Value,
}

/// Leases, the queue and signals of a shared store.
#[async_trait]
pub trait Cluster: Send + Sync {
    /// This process's lease, registered on first use.
    async fn lease(&self) -> Result<Lease, StoreError>;
    /// Renews the lease. [`StoreError::Fenced`] when it was lost (expired, or taken over): the
    /// process may no longer write its runs, and the next call to [`Cluster::lease`]
    /// registers a new one.
    async fn heartbeat(&self) -> Result<Lease, StoreError>;
    /// Gives the lease up (a clean exit); runs still owned are taken over by others.
    async fn release(&self) -> Result<(), StoreError>;
    /// Records a queued run (status `queued`, no owner) with the request to start it from.
    async fn enqueue(&self, run: &RunRecord, request: &Value) -> Result<(), StoreError>;
    /// Claims up to `limit` queued requests, oldest first, skipping those another process is
    /// claiming; they become `running` and owned by this process.
    async fn claim_queued(&self, limit: usize) -> Result<Vec<Claimed>, StoreError>;
    /// Cancels a run still queued (it never started); `false` when it is not queued.
    async fn cancel_queued(&self, id: &RequestId) -> Result<bool, StoreError>;
    /// Sends a signal to every listening process.
    async fn publish(&self, signal: &Signal) -> Result<(), StoreError>;
    /// Starts delivering signals to `sink` (a background task that reconnects).
    fn listen(&self, sink: Arc<dyn SignalSink>);
    /// The lease, owned runs, replicas and queue depth.
    async fn status(&self) -> Result<ClusterStatus, StoreError>;
}
