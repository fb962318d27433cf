//! The exporter's thread: a one-worker Tokio runtime that batches spans and sends them with
//! `opentelemetry-otlp`, and on which the metrics exporter's requests run.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanExporter as _;

use super::{OtlpConfig, TelemetryStats, convert, metrics};
use crate::Error;
use keel_runtime::trace::Span;
use keel_workspace::OtlpProtocol;

/// The spans waiting for export, shared by the observer and the exporter's thread. A span
/// is pushed under a short lock without waking anyone; the thread wakes every
/// `exportInterval`, or when a batch is full, a flush is asked or the exporter closes — so a
/// run does not pay a thread wake-up per span.
pub(super) struct Queue {
    spans: std::sync::Mutex<Vec<Span>>,
    capacity: usize,
    batch_size: usize,
    /// Who waits for the next export to be done (a flush, the exporter going away).
    flushes: std::sync::Mutex<Vec<std::sync::mpsc::SyncSender<()>>>,
    closed: std::sync::atomic::AtomicBool,
    wake: tokio::sync::Notify,
}

impl Queue {
    /// Queues `span`; `false` when the queue is full (the span is dropped).
    pub(super) fn push(&self, span: Span) -> bool {
        let len = {
            let mut spans = lock(&self.spans);
            if spans.len() >= self.capacity {
                return false;
            }
            spans.push(span);
            spans.len()
        };
        if len == self.batch_size {
            self.wake.notify_one();
        }
        true
    }

    /// Asks for what is queued to be exported now; the answer comes when it was.
    pub(super) fn flush(&self) -> std::sync::mpsc::Receiver<()> {
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        lock(&self.flushes).push(done);
        self.wake.notify_one();
        wait
    }

    /// The exporter goes away: export what is queued, then stop.
    pub(super) fn close(&self) -> std::sync::mpsc::Receiver<()> {
        self.closed.store(true, Ordering::Release);
        self.flush()
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts the thread; returns the queue to it, and the metrics instruments when metrics are
/// exported.
pub(super) fn start(
    config: &OtlpConfig,
    stats: Arc<TelemetryStats>,
) -> Result<(Arc<Queue>, Option<metrics::GenAiMetrics>), Error> {
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        Error::InvalidInput(format!("cannot start the OTLP exporter ({what}): {e}"))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("keel-otlp")
        .enable_all()
        .build()
        .map_err(|e| failed("its thread", &e))?;
    let resource = resource(config);
    let queue = Arc::new(Queue {
        spans: std::sync::Mutex::new(Vec::new()),
        capacity: config.queue_size.max(1),
        batch_size: config.batch_size.max(1),
        flushes: std::sync::Mutex::new(Vec::new()),
        closed: std::sync::atomic::AtomicBool::new(false),
        wake: tokio::sync::Notify::new(),
    });
    let pending = queue.clone();
    let batching = Batching {
        batch_size: config.batch_size.max(1),
        interval: config.export_interval,
        timeout: config.timeout.unwrap_or(Duration::from_secs(10)),
    };
    // The exporters are built on the exporter's own thread, inside its runtime (gRPC's channel
    // needs one, and the builder may be called from within another runtime).
    let (ready, built) = std::sync::mpsc::channel();
    let config = config.clone();
    std::thread::Builder::new()
        .name("keel-otlp-export".into())
        .spawn(move || {
            let exporters = runtime.block_on(async {
                let mut spans = span_exporter(&config).map_err(|e| ("spans", e.to_string()))?;
                spans.set_resource(&resource);
                let meters = match config.metrics {
                    true => Some(metric_exporter(&config).map_err(|e| ("metrics", e.to_string()))?),
                    false => None,
                };
                Ok::<_, (&str, String)>((spans, meters))
            });
            let (spans, meters) = match exporters {
                Ok(exporters) => exporters,
                Err(error) => {
                    let _ = ready.send(Err(error));
                    return;
                }
            };
            let metrics = meters.map(|exporter| {
                metrics::GenAiMetrics::new(
                    exporter,
                    runtime.handle().clone(),
                    resource.clone(),
                    config.export_interval,
                    config.timeout.unwrap_or(Duration::from_secs(10)),
                )
            });
            let _ = ready.send(Ok(metrics));
            runtime.block_on(export_loop(pending, spans, stats, batching));
        })
        .map_err(|e| failed("its thread", &e))?;
    match built.recv() {
        Ok(Ok(metrics)) => Ok((queue, metrics)),
        Ok(Err((what, error))) => Err(failed(what, &error)),
        Err(e) => Err(failed("its thread", &e)),
    }
}

fn resource(config: &OtlpConfig) -> Resource {
    // The SDK's builder reads `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`.
    let mut builder = Resource::builder();
    let from_env = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.is_empty());
    match &config.service_name {
        Some(name) => builder = builder.with_service_name(name.clone()),
        None if !from_env => builder = builder.with_service_name("keel"),
        None => {}
    }
    builder
        .with_attributes(
            config
                .resource
                .iter()
                .map(|(k, v)| opentelemetry::KeyValue::new(k.clone(), v.clone())),
        )
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build()
}

fn headers(config: &OtlpConfig) -> std::collections::HashMap<String, String> {
    config.headers.iter().cloned().collect()
}

/// `base` with `path` appended (`http://c:4318` + `/v1/traces`).
fn signal_url(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

fn span_exporter(
    config: &OtlpConfig,
) -> Result<opentelemetry_otlp::SpanExporter, opentelemetry_otlp::ExporterBuildError> {
    let builder = opentelemetry_otlp::SpanExporter::builder();
    match config.protocol {
        OtlpProtocol::HttpProtobuf => over_http(builder.with_http(), config, "/v1/traces").build(),
        OtlpProtocol::Grpc => over_grpc(builder.with_tonic(), config).build(),
    }
}

pub(super) fn metric_exporter(
    config: &OtlpConfig,
) -> Result<opentelemetry_otlp::MetricExporter, opentelemetry_otlp::ExporterBuildError> {
    let builder = opentelemetry_otlp::MetricExporter::builder();
    match config.protocol {
        OtlpProtocol::HttpProtobuf => over_http(builder.with_http(), config, "/v1/metrics").build(),
        OtlpProtocol::Grpc => over_grpc(builder.with_tonic(), config).build(),
    }
}

/// An OTLP/HTTP exporter's settings: Keel's client, the headers, the signal's URL under the
/// endpoint, the timeout (what is left unset, the exporter reads from `OTEL_*`).
fn over_http<B: WithExportConfig + WithHttpConfig>(
    builder: B,
    config: &OtlpConfig,
    path: &str,
) -> B {
    let mut builder = builder
        .with_http_client(ReqwestClient::new(config))
        .with_headers(headers(config));
    if let Some(base) = &config.endpoint {
        builder = builder.with_endpoint(signal_url(base, path));
    }
    match config.timeout {
        Some(timeout) => builder.with_timeout(timeout),
        None => builder,
    }
}

/// An OTLP/gRPC exporter's settings: the headers as metadata, the endpoint, the timeout.
fn over_grpc<B: WithExportConfig + WithTonicConfig>(builder: B, config: &OtlpConfig) -> B {
    let mut builder = builder.with_metadata(metadata(config));
    if let Some(base) = &config.endpoint {
        builder = builder.with_endpoint(base.clone());
    }
    match config.timeout {
        Some(timeout) => builder.with_timeout(timeout),
        None => builder,
    }
}

/// The headers as gRPC metadata (names are checked by the workspace's validation; one that
/// still does not fit is left out).
fn metadata(config: &OtlpConfig) -> opentelemetry_otlp::tonic_types::metadata::MetadataMap {
    let mut headers = http::HeaderMap::new();
    for (name, value) in &config.headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            headers.insert(name, value);
        }
    }
    opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers)
}

struct Batching {
    batch_size: usize,
    interval: Duration,
    timeout: Duration,
}

async fn export_loop(
    queue: Arc<Queue>,
    exporter: opentelemetry_otlp::SpanExporter,
    stats: Arc<TelemetryStats>,
    batching: Batching,
) {
    loop {
        tokio::select! {
            () = queue.wake.notified() => {}
            () = tokio::time::sleep(batching.interval) => {}
        }
        // Everything queued goes, a batch at a time; then whoever asked hears it was sent.
        let waiting = std::mem::take(&mut *lock(&queue.flushes));
        loop {
            let mut batch: Vec<Span> = {
                let mut spans = lock(&queue.spans);
                let take = spans.len().min(batching.batch_size);
                spans.drain(..take).collect()
            };
            if batch.is_empty() {
                break;
            }
            send(&exporter, &mut batch, &stats, batching.timeout).await;
        }
        for done in waiting {
            let _ = done.send(());
        }
        if queue.closed.load(Ordering::Acquire) {
            break;
        }
    }
}

async fn send(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: &mut Vec<Span>,
    stats: &TelemetryStats,
    timeout: Duration,
) {
    if batch.is_empty() {
        return;
    }
    let count = batch.len() as u64;
    let data = batch.drain(..).map(convert::span_data).collect();
    // The exporter has a timeout of its own; this one also bounds connecting.
    let sent =
        tokio::time::timeout(timeout + Duration::from_millis(500), exporter.export(data)).await;
    match sent {
        Ok(Ok(())) => {
            stats.spans_exported.fetch_add(count, Ordering::Relaxed);
        }
        Ok(Err(error)) => {
            tracing::debug!(%error, spans = count, "An OTLP export failed; its spans are dropped.");
            lost(stats, count);
        }
        Err(_) => {
            tracing::debug!(
                spans = count,
                "An OTLP export timed out; its spans are dropped."
            );
            lost(stats, count);
        }
    }
}

fn lost(stats: &TelemetryStats, count: u64) {
    stats.exports_failed.fetch_add(1, Ordering::Relaxed);
    stats
        .spans_dropped_export_failed
        .fetch_add(count, Ordering::Relaxed);
}

/// The OTLP/HTTP exporter's client: Keel's reqwest (the exporter's own would bring another
/// copy of reqwest).
#[derive(Debug)]
struct ReqwestClient(reqwest::Client);

impl ReqwestClient {
    fn new(config: &OtlpConfig) -> Self {
        // reqwest is built without a TLS crypto provider; ring is Keel's (as for models).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder().tcp_nodelay(true);
        if let Some(timeout) = config.timeout {
            builder = builder.timeout(timeout);
        }
        Self(builder.build().unwrap_or_default())
    }
}

#[async_trait::async_trait]
impl HttpClient for ReqwestClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let response = self
            .0
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .inspect_err(|e| {
                tracing::debug!(error = %keel_types::error_chain(e), "The OTLP request failed.");
            })?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await?;
        let mut answer = Response::new(body);
        *answer.status_mut() = status;
        *answer.headers_mut() = headers;
        Ok(answer)
    }
}
