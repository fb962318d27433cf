//! The Runtime document's `observability`: what runs put on OpenTelemetry spans and where
//! spans and metrics are exported (`docs/observability.md`). Only the settings live here; the
//! runtime reads the `OTEL_*` environment variables for what the section leaves out (the
//! section wins) and does the exporting.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;

/// Tracing and metrics of runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ObservabilitySpec {
    /// Put message contents and tool arguments on spans (redacted like events); off: they are
    /// left out.
    pub capture_content: bool,
    /// Export over OTLP; left out: no export, unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
    pub otlp: Option<OtlpSpec>,
}

/// Where and how spans (and metrics) are exported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OtlpSpec {
    /// The collector's base URL, e.g. `http://127.0.0.1:4318`; `http/protobuf` appends
    /// `/v1/traces` and `/v1/metrics`. Default: `OTEL_EXPORTER_OTLP_ENDPOINT`, else
    /// OpenTelemetry's default for the protocol.
    pub endpoint: Option<String>,
    /// `http/protobuf` (default) or `grpc`.
    pub protocol: OtlpProtocol,
    /// Headers sent with every export, e.g. `authorization: Bearer ${OTLP_TOKEN}`.
    pub headers: BTreeMap<String, String>,
    /// How long one export may take.
    pub timeout: Duration,
    /// The fraction of root traces kept (0 to 1); a run with an incoming parent follows the
    /// parent's sampling decision.
    #[schemars(range(min = 0, max = 1))]
    pub sampling: f64,
    /// Resource attributes added to Keel's own, e.g. `deployment.environment: prod`.
    pub resource: BTreeMap<String, String>,
    /// `service.name`; default: `OTEL_SERVICE_NAME`, else `keel`.
    pub service_name: Option<String>,
    /// Spans held for export; beyond it spans are dropped (and counted).
    #[schemars(range(min = 1))]
    pub queue_size: usize,
    /// Spans per export request (at most `queueSize`).
    #[schemars(range(min = 1))]
    pub batch_size: usize,
    /// The longest a span waits between ending and its export.
    pub export_interval: Duration,
    /// Also export the GenAI client metrics (token usage, operation duration).
    pub metrics: bool,
}

impl OtlpSpec {
    /// Default for [`Self::queue_size`].
    pub const DEFAULT_QUEUE_SIZE: usize = 2048;
    /// Default for [`Self::batch_size`].
    pub const DEFAULT_BATCH_SIZE: usize = 512;
}

impl Default for OtlpSpec {
    fn default() -> Self {
        Self {
            endpoint: None,
            protocol: OtlpProtocol::default(),
            headers: BTreeMap::new(),
            timeout: Duration::from_secs(10),
            sampling: 1.0,
            resource: BTreeMap::new(),
            service_name: None,
            queue_size: Self::DEFAULT_QUEUE_SIZE,
            batch_size: Self::DEFAULT_BATCH_SIZE,
            export_interval: Duration::from_secs(1),
            metrics: true,
        }
    }
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OtlpProtocol {
    /// Protobuf over HTTP POST (the collector's port 4318).
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// gRPC (the collector's port 4317).
    #[serde(rename = "grpc")]
    Grpc,
}
