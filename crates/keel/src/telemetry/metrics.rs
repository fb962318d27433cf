//! The GenAI client metrics (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`)
//! of every model round, exported over OTLP beside the Prometheus endpoint.

use std::time::Duration;

use keel_runtime::trace::Span;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use serde_json::Value;

/// The semconv's advised bucket boundaries.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0,
    4.0,
    16.0,
    64.0,
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// The instruments, and the provider that exports them periodically.
pub(super) struct GenAiMetrics {
    provider: SdkMeterProvider,
    tokens: Histogram<u64>,
    duration: Histogram<f64>,
}

impl GenAiMetrics {
    pub(super) fn new(
        exporter: opentelemetry_otlp::MetricExporter,
        runtime: tokio::runtime::Handle,
        resource: Resource,
        interval: Duration,
        timeout: Duration,
    ) -> Self {
        let reader = PeriodicReader::builder(OnRuntime {
            exporter,
            runtime,
            timeout,
        })
        .with_interval(interval.max(Duration::from_millis(100)))
        .build();
        let provider = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader)
            .build();
        let meter = provider.meter_with_scope(super::convert::scope());
        let tokens = meter
            .u64_histogram("gen_ai.client.token.usage")
            .with_unit("{token}")
            .with_description("Number of input and output tokens used.")
            .with_boundaries(TOKEN_BUCKETS.to_vec())
            .build();
        let duration = meter
            .f64_histogram("gen_ai.client.operation.duration")
            .with_unit("s")
            .with_description("GenAI operation duration.")
            .with_boundaries(DURATION_BUCKETS.to_vec())
            .build();
        Self {
            provider,
            tokens,
            duration,
        }
    }

    /// Records a model round's span (other spans are not client operations).
    pub(super) fn record(&self, span: &Span) {
        let attributes = &span.attributes;
        if attributes
            .get("gen_ai.operation.name")
            .and_then(Value::as_str)
            != Some("chat")
        {
            return;
        }
        let text = |key: &str| {
            attributes
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let mut common = vec![KeyValue::new("gen_ai.operation.name", "chat")];
        for key in [
            "gen_ai.provider.name",
            "gen_ai.request.model",
            "gen_ai.response.model",
            "error.type",
        ] {
            if let Some(value) = text(key) {
                common.push(KeyValue::new(key, value));
            }
        }
        if let Some(ms) = span.duration_ms() {
            #[allow(clippy::cast_precision_loss)]
            self.duration.record(ms as f64 / 1000.0, &common);
        }
        for (key, kind) in [
            ("gen_ai.usage.input_tokens", "input"),
            ("gen_ai.usage.output_tokens", "output"),
        ] {
            if let Some(count) = attributes.get(key).and_then(Value::as_u64) {
                let mut with_type = common.clone();
                with_type.push(KeyValue::new("gen_ai.token.type", kind));
                self.tokens.record(count, &with_type);
            }
        }
    }

    /// Exports what was recorded now (blocking; at most `deadline`).
    pub(super) fn flush(&self, deadline: Duration) {
        let provider = self.provider.clone();
        let (done, wait) = std::sync::mpsc::channel();
        let _ = std::thread::Builder::new()
            .name("keel-otlp-flush".into())
            .spawn(move || {
                let _ = provider.force_flush();
                let _ = done.send(());
            });
        let _ = wait.recv_timeout(deadline);
    }
}

impl Drop for GenAiMetrics {
    fn drop(&mut self) {
        // The last export, briefly: a dead collector must not hold the process's exit.
        let _ = self.provider.shutdown_with_timeout(Duration::from_secs(1));
    }
}

/// The OTLP metric exporter, its requests made on the exporter's Tokio runtime (the SDK's
/// periodic reader calls it from a thread of its own).
#[derive(Debug)]
struct OnRuntime {
    exporter: opentelemetry_otlp::MetricExporter,
    runtime: tokio::runtime::Handle,
    /// Each export's bound (a dead collector must not hold the reader, or the shutdown).
    timeout: Duration,
}

impl PushMetricExporter for OnRuntime {
    fn export(
        &self,
        metrics: &ResourceMetrics,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        // The timer is made inside the runtime (its context is entered by `block_on`).
        let export =
            async { tokio::time::timeout(self.timeout, self.exporter.export(metrics)).await };
        let result = match self.runtime.block_on(export) {
            Ok(result) => result,
            Err(_) => Err(opentelemetry_sdk::error::OTelSdkError::Timeout(
                self.timeout,
            )),
        };
        std::future::ready(result)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.exporter.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.exporter.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.exporter.temporality()
    }
}
