//! Telemetry: what this process learns from the events it stores — the Prometheus metrics
//! behind `GET /metrics` (the registry, what each event records, and the text exposition) —
//! and the hand-off that wakes live event streams ([`crate::live`]).
//!
//! [`Telemetry`] is an [`EventObserver`]: give it to the runtime builder
//! (`Runtime::builder().observer(telemetry.observer())`) and pass the same value to
//! [`crate::router_with`], so it sees every stored event of the runs this process executes.
//! Counts that must cover every process sharing the store (runs by status, approvals
//! pending) are read from the store at each scrape (`metrics.rs`) and handed in as
//! [`StoreCounts`].

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use keel::{Event, EventObserver, EventPayload, RequestId, RunStatus, Workspace};
use keel_types::event::AdapterEvent;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

use crate::live::{Followers, Wake};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabels {
    reason: &'static str,
}

/// What the OTLP exporter did, when there is one (`keel::telemetry::TelemetryStats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OtelCounts {
    pub exported: u64,
    pub dropped_queue_full: u64,
    pub dropped_export_failed: u64,
    pub exports_failed: u64,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    agent: String,
    model: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    agent: String,
    model: String,
    kind: &'static str,
}

/// A `Model` document (its limits' waits).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelDocLabels {
    model: String,
}

/// The money a model's rounds cost, by currency.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    agent: String,
    model: String,
    currency: String,
}

/// A fallback from one `Model` document to another.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FallbackLabels {
    from: String,
    to: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    ok: &'static str,
}

/// Latency buckets from 5 ms to about 82 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

struct Metrics {
    registry: Registry,
    runs_finished: Family<StatusLabels, Counter>,
    runs: Family<StatusLabels, Gauge>,
    runs_in_flight: Gauge,
    model_latency: Family<ModelLabels, Histogram>,
    tokens: Family<TokenLabels, Counter>,
    model_queue_wait: Family<ModelDocLabels, Histogram>,
    model_cost: Family<CostLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    model_fallbacks: Family<FallbackLabels, Counter>,
    tool_latency: Family<ToolLabels, Histogram>,
    approvals_requested: Counter,
    approvals_pending: Gauge,
    queue_depth: Gauge,
    lease_takeovers: Gauge,
    tasks_alive: Gauge,
    http_connections: Gauge,
    memory: Option<MemoryGauges>,
    otel_exported: Counter,
    otel_dropped: Family<DropLabels, Counter>,
    otel_exports_failed: Counter,
}

/// What the process's allocator reports, for the memory gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryUse {
    /// Bytes handed out and not yet freed: the live heap.
    pub allocated: u64,
    /// Bytes of the allocator's pages that hold live allocations: the live heap and the free
    /// space between its allocations in those pages (fragmentation).
    pub active: u64,
}

/// Reads the allocator's counts, or `None` when it cannot now.
pub type MemoryProbe = fn() -> Option<MemoryUse>;

/// The memory gauges and where their values come from.
struct MemoryGauges {
    probe: MemoryProbe,
    allocated: Gauge,
    active: Gauge,
}

impl MemoryGauges {
    fn register(registry: &mut Registry, probe: MemoryProbe) -> Self {
        let allocated = registered(
            registry,
            "memory_allocated_bytes",
            "Bytes the allocator has handed out and not had back: the live heap (the allocator's own count)",
            Gauge::default(),
        );
        let active = registered(
            registry,
            "memory_allocator_active_bytes",
            "Bytes of the allocator's pages that hold live allocations: the live heap and the free space fragmentation leaves between them",
            Gauge::default(),
        );
        Self {
            probe,
            allocated,
            active,
        }
    }

    fn update(&self) {
        if let Some(counts) = (self.probe)() {
            self.allocated
                .set(i64::try_from(counts.allocated).unwrap_or(i64::MAX));
            self.active
                .set(i64::try_from(counts.active).unwrap_or(i64::MAX));
        }
    }
}

/// `metric`, registered under `name` with its `help`.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("keel");
        let runs_finished = registered(
            &mut registry,
            "runs_finished",
            "Runs this process finished, by final status",
            Family::<StatusLabels, Counter>::default(),
        );
        let runs = registered(
            &mut registry,
            "runs",
            "Runs in the store, by status",
            Family::<StatusLabels, Gauge>::default(),
        );
        let runs_in_flight = registered(
            &mut registry,
            "http_runs_in_flight",
            "Runs started over HTTP that have not ended (running or waiting for a slot)",
            Gauge::default(),
        );
        let model_latency = registered(
            &mut registry,
            "model_latency_seconds",
            "Time of one model round, from the request to the end of the answer",
            Family::<ModelLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _),
        );
        let tokens = registered(
            &mut registry,
            "model_tokens",
            "Tokens reported by models, by kind (prompt, completion; cache_read and cache_write, within prompt)",
            Family::<TokenLabels, Counter>::default(),
        );
        let model_queue_wait = registered(
            &mut registry,
            "model_queue_wait_seconds",
            "Time a model round waited for its model's rate limits (`Model.limits`), by Model document",
            Family::<ModelDocLabels, Histogram>::new_with_constructor(
                latency_histogram as fn() -> _,
            ),
        );
        let model_cost = registered(
            &mut registry,
            "cost",
            "What model rounds cost at their Model's declared pricing, by currency (the exact amounts are in the events)",
            Family::<CostLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default(),
        );
        let model_fallbacks = registered(
            &mut registry,
            "model_fallbacks",
            "Rounds that went to a fallback model after theirs gave up, by Model documents",
            Family::<FallbackLabels, Counter>::default(),
        );
        let tool_latency = registered(
            &mut registry,
            "tool_latency_seconds",
            "Time of one tool call, by tool and outcome",
            Family::<ToolLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _),
        );
        let approvals_requested = registered(
            &mut registry,
            "approvals_requested",
            "Approvals this process asked for",
            Counter::default(),
        );
        let approvals_pending = registered(
            &mut registry,
            "approvals_pending",
            "Approvals waiting for a decision, in the store",
            Gauge::default(),
        );
        let queue_depth = registered(
            &mut registry,
            "queue_depth",
            "Queued requests no replica has claimed yet (shared store only)",
            Gauge::default(),
        );
        let lease_takeovers = registered(
            &mut registry,
            "lease_takeovers",
            "Runs this replica took over from replicas whose lease expired, since it started (shared store only)",
            Gauge::default(),
        );
        let tasks_alive = registered(
            &mut registry,
            "tasks_alive",
            "Tokio tasks alive in this process: each run, open connection and live stream is one, so at rest about one per open connection",
            Gauge::default(),
        );
        let http_connections = registered(
            &mut registry,
            "http_connections",
            "HTTP connections the server holds open, kept-alive idle ones included (each keeps its buffers)",
            Gauge::default(),
        );
        let otel_exported = registered(
            &mut registry,
            "otel_spans_exported",
            "Spans the OTLP collector accepted (observability.otlp)",
            Counter::default(),
        );
        let otel_dropped = registered(
            &mut registry,
            "otel_spans_dropped",
            "Spans not exported: the export queue was full (a slow or dead collector), or their export failed",
            Family::<DropLabels, Counter>::default(),
        );
        let otel_exports_failed = registered(
            &mut registry,
            "otel_exports_failed",
            "OTLP span exports that failed or timed out",
            Counter::default(),
        );
        Self {
            registry,
            tasks_alive,
            http_connections,
            memory: None,
            otel_exported,
            otel_dropped,
            otel_exports_failed,
            queue_depth,
            lease_takeovers,
            runs_finished,
            runs,
            runs_in_flight,
            model_latency,
            tokens,
            model_queue_wait,
            model_cost,
            model_fallbacks,
            tool_latency,
            approvals_requested,
            approvals_pending,
        }
    }
}

/// Metrics and live-stream wake-ups; cheap to clone (one shared value).
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

struct Inner {
    metrics: Metrics,
    /// Latencies by `model:<name>` and `tool:<name>`, for the console's overview.
    latencies: std::sync::Mutex<BTreeMap<String, Latency>>,
    /// Agent name → model name, for labels.
    models: OnceLock<BTreeMap<String, String>>,
    /// Live event streams waiting for news of a run.
    followers: Followers,
}

impl Inner {
    fn add_latency(&self, key: String, ms: u64) {
        if let Ok(mut latencies) = self.latencies.lock() {
            latencies.entry(key).or_default().add(ms);
        }
    }
}

/// How many of the latest samples a latency's percentiles are read from.
const LATENCY_WINDOW: usize = 512;

/// One model's or tool's latency since this process started: a count and a sum, and the
/// latest [`LATENCY_WINDOW`] samples (a ring) for the percentiles.
#[derive(Default)]
struct Latency {
    count: u64,
    sum_ms: u64,
    recent: Vec<u64>,
}

impl Latency {
    fn add(&mut self, ms: u64) {
        let slot = usize::try_from(self.count).unwrap_or(usize::MAX) % LATENCY_WINDOW;
        if self.recent.len() < LATENCY_WINDOW {
            self.recent.push(ms);
        } else if let Some(old) = self.recent.get_mut(slot) {
            *old = ms;
        }
        self.count += 1;
        self.sum_ms += ms;
    }

    /// `{count, meanMs, p50Ms, p95Ms, p99Ms, window}`: the percentiles of the latest samples
    /// (nearest rank), `window` how many those are.
    fn summary(&self) -> serde_json::Value {
        let mut sorted = self.recent.clone();
        sorted.sort_unstable();
        let rank = |p: usize| {
            let n = sorted.len();
            // The nearest rank: the smallest sample with at least p % at or below it.
            let at = (p * n).div_ceil(100).clamp(1, n.max(1)) - 1;
            sorted.get(at).copied().unwrap_or(0)
        };
        serde_json::json!({
            "count": self.count,
            "meanMs": self.sum_ms / self.count.max(1),
            "p50Ms": rank(50),
            "p95Ms": rank(95),
            "p99Ms": rank(99),
            "window": sorted.len(),
        })
    }
}

impl Telemetry {
    /// Latency of model rounds by model and tool calls by tool, since this process started:
    /// `{models: {name: {count, meanMs, p50Ms, p95Ms, p99Ms, window}}, tools: {…}}` (the
    /// percentiles are those of the latest 512 samples).
    pub(crate) fn latencies(&self) -> serde_json::Value {
        let mut models = serde_json::Map::new();
        let mut tools = serde_json::Map::new();
        if let Ok(latencies) = self.inner.latencies.lock() {
            for (key, latency) in latencies.iter() {
                let entry = latency.summary();
                match key.split_once(':') {
                    Some(("model", name)) => drop(models.insert(name.to_owned(), entry)),
                    Some((_, name)) => drop(tools.insert(name.to_owned(), entry)),
                    None => {}
                }
            }
        }
        serde_json::json!({"models": models, "tools": tools})
    }
}

/// What a scrape reads from the store (and admission) rather than from events.
pub(crate) struct StoreCounts {
    /// Runs in the store, by status.
    pub runs: Vec<(RunStatus, u64)>,
    /// Approvals waiting for a decision.
    pub approvals_pending: usize,
    /// Runs started over HTTP that have not ended.
    pub runs_in_flight: usize,
    /// The cluster's state, on a shared store.
    pub cluster: Option<keel::ClusterStatus>,
    /// The OTLP exporter's counts, when it exports.
    pub otel: Option<OtelCounts>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Fresh telemetry.
    pub fn new() -> Self {
        Self::with_metrics(Metrics::new())
    }

    /// Fresh telemetry that also reports the process's memory as the allocator counts it
    /// (`keel_memory_allocated_bytes`, `keel_memory_allocator_active_bytes`), read from
    /// `probe` at each scrape. The program that chose the allocator provides the probe.
    pub fn with_memory(probe: MemoryProbe) -> Self {
        let mut metrics = Metrics::new();
        metrics.memory = Some(MemoryGauges::register(&mut metrics.registry, probe));
        Self::with_metrics(metrics)
    }

    fn with_metrics(metrics: Metrics) -> Self {
        Self {
            inner: Arc::new(Inner {
                metrics,
                latencies: std::sync::Mutex::new(BTreeMap::new()),
                models: OnceLock::new(),
                followers: Followers::default(),
            }),
        }
    }

    /// The gauge of open HTTP connections, which the accept loop keeps.
    pub(crate) fn connections(&self) -> Gauge {
        self.inner.metrics.http_connections.clone()
    }

    /// The observer to give the runtime builder.
    pub fn observer(&self) -> Arc<dyn EventObserver> {
        Arc::new(self.clone())
    }

    /// Learns the agents' models (for labels); the first workspace given wins.
    pub(crate) fn describe(&self, workspace: &Workspace) {
        let models = workspace
            .agents
            .iter()
            .map(|(name, agent)| (name.clone(), agent.model.clone()))
            .collect();
        let _ = self.inner.models.set(models);
    }

    fn model_of(&self, agent: &str) -> String {
        self.inner
            .models
            .get()
            .and_then(|m| m.get(agent))
            .cloned()
            .unwrap_or_default()
    }

    /// A wake-up for news of run `id`.
    pub(crate) fn subscribe(&self, id: &RequestId) -> Wake {
        self.inner.followers.follow(id)
    }

    /// The metrics in the OpenMetrics text format, with the store's counts set first.
    pub(crate) fn render(&self, store: StoreCounts) -> Result<String, std::fmt::Error> {
        let metrics = &self.inner.metrics;
        metrics.runs.clear();
        for (status, count) in store.runs {
            let status = status.as_str().to_owned();
            metrics
                .runs
                .get_or_create(&StatusLabels { status })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        metrics
            .approvals_pending
            .set(i64::try_from(store.approvals_pending).unwrap_or(i64::MAX));
        metrics
            .runs_in_flight
            .set(i64::try_from(store.runs_in_flight).unwrap_or(i64::MAX));
        if let Some(cluster) = &store.cluster {
            metrics
                .queue_depth
                .set(i64::try_from(cluster.queue_depth).unwrap_or(i64::MAX));
            metrics
                .lease_takeovers
                .set(i64::try_from(cluster.taken_over).unwrap_or(i64::MAX));
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let alive = runtime.metrics().num_alive_tasks();
            metrics
                .tasks_alive
                .set(i64::try_from(alive).unwrap_or(i64::MAX));
        }
        if let Some(memory) = &metrics.memory {
            memory.update();
        }
        if let Some(otel) = store.otel {
            // Counters kept by the exporter: advanced to its counts.
            let advance = |counter: &Counter, to: u64| {
                counter.inc_by(to.saturating_sub(counter.get()));
            };
            advance(&metrics.otel_exported, otel.exported);
            advance(&metrics.otel_exports_failed, otel.exports_failed);
            for (reason, count) in [
                ("queue_full", otel.dropped_queue_full),
                ("export_failed", otel.dropped_export_failed),
            ] {
                advance(
                    &metrics.otel_dropped.get_or_create(&DropLabels { reason }),
                    count,
                );
            }
        }
        let mut text = String::new();
        encode(&mut text, &metrics.registry)?;
        Ok(text)
    }

    fn record(&self, event: &Event) {
        let metrics = &self.inner.metrics;
        match &event.payload {
            EventPayload::ModelCompleted {
                usage, latency_ms, ..
            } => {
                let model = self.model_of(&event.agent_id);
                metrics
                    .model_latency
                    .get_or_create(&ModelLabels {
                        agent: event.agent_id.clone(),
                        model: model.clone(),
                    })
                    .observe(*latency_ms as f64 / 1000.0);
                self.inner
                    .add_latency(format!("model:{model}"), *latency_ms);
                if let Some(cost) = usage.cost {
                    let amount: f64 = cost.amount.to_string().parse().unwrap_or(0.0);
                    metrics
                        .model_cost
                        .get_or_create(&CostLabels {
                            agent: event.agent_id.clone(),
                            model: model.clone(),
                            currency: cost.currency.to_string(),
                        })
                        .inc_by(amount);
                }
                for (kind, count) in [
                    ("prompt", usage.prompt_tokens),
                    ("completion", usage.completion_tokens),
                    ("cache_read", usage.cache_read_tokens),
                    ("cache_write", usage.cache_write_tokens),
                    ("reasoning", usage.reasoning_tokens),
                ] {
                    if count == 0 && matches!(kind, "cache_read" | "cache_write" | "reasoning") {
                        continue;
                    }
                    metrics
                        .tokens
                        .get_or_create(&TokenLabels {
                            agent: event.agent_id.clone(),
                            model: model.clone(),
                            kind,
                        })
                        .inc_by(count);
                }
            }
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolResult {
                        tool,
                        ok,
                        duration_ms,
                        ..
                    },
            } => {
                metrics
                    .tool_latency
                    .get_or_create(&ToolLabels {
                        tool: tool.clone(),
                        ok: if *ok { "true" } else { "false" },
                    })
                    .observe(*duration_ms as f64 / 1000.0);
                self.inner.add_latency(format!("tool:{tool}"), *duration_ms);
            }
            EventPayload::ModelQueued { model, wait_ms, .. } => {
                metrics
                    .model_queue_wait
                    .get_or_create(&ModelDocLabels {
                        model: model.clone(),
                    })
                    .observe(*wait_ms as f64 / 1000.0);
            }
            EventPayload::ModelFallback { from, to, .. } => {
                metrics
                    .model_fallbacks
                    .get_or_create(&FallbackLabels {
                        from: from.clone(),
                        to: to.clone(),
                    })
                    .inc();
            }
            EventPayload::ApprovalRequested { .. } => {
                metrics.approvals_requested.inc();
            }
            payload if payload.is_terminal() => {
                let status = payload.type_name().rsplit('.').next().unwrap_or_default();
                metrics
                    .runs_finished
                    .get_or_create(&StatusLabels {
                        status: status.to_owned(),
                    })
                    .inc();
            }
            _ => {}
        }
    }
}

/// Signals of a shared store: events stored by another replica wake this server's live
/// streams of that run.
impl keel::SignalSink for Telemetry {
    fn signal(&self, signal: &keel::Signal) {
        if let keel::Signal::Appended(id, _) = signal {
            self.inner.followers.wake(id);
        }
    }
}

impl EventObserver for Telemetry {
    fn observe(&self, event: &Event) {
        self.record(event);
        self.inner.followers.wake(&event.request_id);
    }
}

#[cfg(test)]
mod latency_tests {
    use super::{LATENCY_WINDOW, Latency};

    #[test]
    fn percentiles_are_nearest_ranks_of_the_latest_samples() {
        let mut latency = Latency::default();
        for ms in 1..=100 {
            latency.add(ms);
        }
        let summary = latency.summary();
        assert_eq!(summary["p50Ms"], 50);
        assert_eq!(summary["p95Ms"], 95);
        assert_eq!(summary["p99Ms"], 99);
        assert_eq!(summary["meanMs"], 50);
        assert_eq!(summary["window"], 100);
        // Past the window, the oldest samples give way: a slow spell shows in the percentiles
        // while the count and mean still cover everything.
        for _ in 0..LATENCY_WINDOW {
            latency.add(1_000);
        }
        let summary = latency.summary();
        assert_eq!(summary["p50Ms"], 1_000);
        assert_eq!(summary["window"], LATENCY_WINDOW);
        assert_eq!(summary["count"], 100 + LATENCY_WINDOW);
    }

    #[test]
    fn no_samples_read_as_zero() {
        let summary = Latency::default().summary();
        assert_eq!(summary["p99Ms"], 0);
        assert_eq!(summary["count"], 0);
    }
}
