//! OpenTelemetry export (`docs/observability.md`): each run's spans, computed from its events
//! as they are stored ([`keel_runtime::trace`]), and the GenAI client metrics, sent over OTLP
//! to the collector the workspace's `observability.otlp` (or `OTEL_EXPORTER_OTLP_*`) names.
//!
//! Nothing here may slow a run: the observer hands finished spans to a bounded queue
//! (`queueSize`) without waiting; a thread of its own batches them (`batchSize`,
//! `exportInterval`) and exports them with the `opentelemetry-otlp` exporter, one export at a
//! time, each within `timeout`. A full queue drops spans; a failed export loses its batch;
//! both are counted ([`TelemetryStats`], `/metrics`).

mod convert;
mod export;
mod metrics;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_runtime::trace::{Span, TraceBuilder};
use keel_types::{Event, EventObserver, RequestId, RunRecord};
use keel_workspace::{ObservabilitySpec, OtlpProtocol};

use crate::Error;

/// Where and how spans and metrics are exported: the workspace's `observability.otlp` over
/// OpenTelemetry's environment variables.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OtlpConfig {
    /// The collector's base URL (`http://host:4318`), or `None` to let the exporter read
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` / `…_TRACES_ENDPOINT` (or use its default).
    pub(crate) endpoint: Option<String>,
    pub(crate) protocol: OtlpProtocol,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) service_name: Option<String>,
    pub(crate) resource: Vec<(String, String)>,
    pub(crate) queue_size: usize,
    pub(crate) batch_size: usize,
    pub(crate) export_interval: Duration,
    pub(crate) metrics: bool,
    pub(crate) capture_content: bool,
}

impl OtlpConfig {
    /// The export the workspace asks for; `None` when neither the workspace nor the
    /// environment (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
    /// names a collector.
    pub(crate) fn resolve(spec: &ObservabilitySpec) -> Option<Self> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let capture_content = spec.capture_content;
        match &spec.otlp {
            Some(otlp) => Some(Self {
                endpoint: otlp.endpoint.clone(),
                protocol: otlp.protocol,
                headers: otlp.headers.clone().into_iter().collect(),
                timeout: Some(otlp.timeout.0),
                service_name: otlp.service_name.clone(),
                resource: otlp.resource.clone().into_iter().collect(),
                queue_size: otlp.queue_size,
                batch_size: otlp.batch_size,
                export_interval: otlp.export_interval.0,
                metrics: otlp.metrics,
                capture_content,
            }),
            None => {
                env("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))?;
                let protocol = match env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                    .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
                    .as_deref()
                {
                    Some("grpc") => OtlpProtocol::Grpc,
                    _ => OtlpProtocol::HttpProtobuf,
                };
                Some(Self {
                    endpoint: None,
                    protocol,
                    headers: Vec::new(),
                    timeout: None,
                    service_name: None,
                    resource: Vec::new(),
                    queue_size: keel_workspace::OtlpSpec::DEFAULT_QUEUE_SIZE,
                    batch_size: keel_workspace::OtlpSpec::DEFAULT_BATCH_SIZE,
                    export_interval: Duration::from_secs(1),
                    metrics: true,
                    capture_content,
                })
            }
        }
    }
}

/// How many locks the runs' span builders are spread over.
const SHARDS: usize = 16;

/// The exporters of this process, for [`flush_all`].
static EXPORTERS: Mutex<Vec<std::sync::Weak<Telemetry>>> = Mutex::new(Vec::new());

/// Exports what every exporter of this process has queued (spans and metrics), waiting at
/// most `deadline` in all: for a program about to exit while runtimes (or tasks holding
/// them) are still alive — `keel` calls it before it exits. Blocks the calling thread.
pub fn flush_all(deadline: Duration) {
    let live: Vec<Arc<Telemetry>> = EXPORTERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    flush_each(&live, deadline);
}

/// Asks each exporter to export its spans and metrics now, and waits (blocking) until they
/// did or `deadline` passed.
fn flush_each(exporters: &[Arc<Telemetry>], deadline: Duration) {
    let until = std::time::Instant::now() + deadline;
    let left = || until.saturating_duration_since(std::time::Instant::now());
    let waits: Vec<_> = exporters.iter().map(|t| t.queue.flush()).collect();
    for metrics in exporters.iter().filter_map(|t| t.metrics.as_ref()) {
        metrics.flush(left());
    }
    for wait in waits {
        let _ = wait.recv_timeout(left());
    }
}

/// What the exporter did so far (all counts since the runtime started).
#[derive(Debug, Default)]
pub struct TelemetryStats {
    /// Spans the collector accepted.
    pub spans_exported: AtomicU64,
    /// Spans dropped because the queue was full (a slow or dead collector).
    pub spans_dropped_queue_full: AtomicU64,
    /// Spans lost with a failed or timed-out export.
    pub spans_dropped_export_failed: AtomicU64,
    /// Exports that failed or timed out.
    pub exports_failed: AtomicU64,
}

impl TelemetryStats {
    /// Every span dropped, for whatever reason.
    pub fn spans_dropped(&self) -> u64 {
        self.spans_dropped_queue_full.load(Ordering::Relaxed)
            + self.spans_dropped_export_failed.load(Ordering::Relaxed)
    }
}

/// The exporter of a runtime: an [`EventObserver`] turning each run's events into spans.
pub(crate) struct Telemetry {
    capture_content: bool,
    /// The spans of the runs this process writes, by run, in shards (by the run id's last
    /// byte, which is random) so runs on different threads rarely wait for one another.
    runs: [Mutex<HashMap<RequestId, TraceBuilder>>; SHARDS],
    /// Dropped before the queue: its last export runs on the exporter's runtime, which ends
    /// when the queue closes.
    metrics: Option<metrics::GenAiMetrics>,
    queue: Arc<export::Queue>,
    stats: Arc<TelemetryStats>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Starts the exporter's thread and its OTLP exporters.
    pub(crate) fn start(config: &OtlpConfig) -> Result<Arc<Self>, Error> {
        let stats = Arc::new(TelemetryStats::default());
        let (queue, metrics) = export::start(config, stats.clone())?;
        let telemetry = Arc::new(Self {
            capture_content: config.capture_content,
            runs: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            queue,
            stats,
            metrics,
        });
        let mut live = EXPORTERS.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|weak| weak.strong_count() > 0);
        live.push(Arc::downgrade(&telemetry));
        Ok(telemetry)
    }

    /// What the exporter did so far.
    pub(crate) fn stats(&self) -> &TelemetryStats {
        &self.stats
    }

    /// Exports what is queued, waiting at most `deadline` (at shutdown: `keel run` ends with
    /// its spans sent).
    pub(crate) async fn flush(self: &Arc<Self>, deadline: Duration) {
        let exporters = [Arc::clone(self)];
        let _ = tokio::task::spawn_blocking(move || flush_each(&exporters, deadline)).await;
    }

    fn runs(&self, run: &RequestId) -> std::sync::MutexGuard<'_, HashMap<RequestId, TraceBuilder>> {
        let shard = run
            .0
            .as_bytes()
            .last()
            .map_or(0, |b| usize::from(*b) % SHARDS);
        self.runs[shard]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn send(&self, spans: Vec<Span>) {
        for span in spans {
            if let Some(metrics) = &self.metrics {
                metrics.record(&span);
            }
            if !span.sampled {
                continue;
            }
            if !self.queue.push(span) {
                self.stats
                    .spans_dropped_queue_full
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The last spans reach the collector when the runtime goes away (a `keel run` ending, a
/// program that never calls `shutdown`): waited for briefly, so a dead collector does not hold
/// the exit.
impl Drop for Telemetry {
    fn drop(&mut self) {
        // The metrics first: their last export runs on the exporter's runtime, which ends
        // once the queue is closed.
        drop(self.metrics.take());
        let wait = self.queue.close();
        let _ = wait.recv_timeout(Duration::from_secs(2));
    }
}

impl EventObserver for Telemetry {
    fn observe(&self, event: &Event) {
        let finished = {
            let mut runs = self.runs(&event.request_id);
            let Some(builder) = runs.get_mut(&event.request_id) else {
                return;
            };
            builder.push(event);
            builder.take_finished()
        };
        if !finished.is_empty() {
            self.send(finished);
        }
    }

    fn opened(&self, run: &RunRecord, last_seq: u64) {
        let builder = TraceBuilder::new(run, last_seq, self.capture_content);
        self.runs(&run.request_id)
            .insert(run.request_id.clone(), builder);
    }

    fn closed(&self, run: &RequestId) {
        let builder = self.runs(run).remove(run);
        // A run whose writer stopped before its end: what it finished was sent; its open
        // spans never end in this process.
        if let Some(mut builder) = builder {
            let finished = builder.take_finished();
            self.send(finished);
        }
    }
}
