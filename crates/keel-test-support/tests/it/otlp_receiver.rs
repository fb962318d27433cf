//! The OTLP receiver decodes what the official protobuf classes encode, over OTLP/HTTP (gzip
//! and plain) and OTLP/gRPC, and misbehaves on request (`--status`, `--stall`).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use keel_test_support::otlp::{OtlpReceiver, span_named};
use keel_test_support::test_clients::otlp_receiver_python;
use serde_json::{Value, json};

/// Sends, with opentelemetry-proto's classes: one trace export over HTTP (gzip) and one over
/// gRPC, each with one span named after its transport, then one metrics export over each.
const SENDER: &str = r#"
import gzip, sys, urllib.request
import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as ms, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m
from opentelemetry.proto.trace.v1 import trace_pb2 as t

def kv(key, **value):
    return KeyValue(key=key, value=AnyValue(**value))

def traces(name):
    span = t.Span(
        trace_id=bytes(range(1, 17)), span_id=bytes(range(17, 25)),
        parent_span_id=bytes(range(25, 33)), name=name, kind=t.Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=1_700_000_000_000_000_001,
        end_time_unix_nano=1_700_000_000_000_000_002, flags=0x101,
        attributes=[
            kv("s", string_value="x"), kv("i", int_value=-7), kv("b", bool_value=True),
            kv("d", double_value=0.5), kv("y", bytes_value=b"\x00\xff"),
            kv("a", array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(string_value="two")])),
            kv("m", kvlist_value=KeyValueList(values=[kv("k", string_value="v")])),
        ],
        events=[t.Span.Event(name="retry", time_unix_nano=5, attributes=[kv("attempt", int_value=2)])],
        links=[t.Span.Link(trace_id=b"\xaa" * 16, span_id=b"\xbb" * 8, attributes=[kv("l", bool_value=False)])],
        status=t.Status(code=t.Status.STATUS_CODE_ERROR, message="boom"),
    )
    return ts.ExportTraceServiceRequest(resource_spans=[t.ResourceSpans(
        resource={"attributes": [kv("service.name", string_value="keel")]},
        scope_spans=[t.ScopeSpans(scope={"name": "keel", "version": "1.2.3"}, spans=[span])],
    )])

def metrics():
    point = dict(attributes=[kv("tool", string_value="read_file")], time_unix_nano=9)
    return ms.ExportMetricsServiceRequest(resource_metrics=[m.ResourceMetrics(
        resource={"attributes": [kv("service.name", string_value="keel")]},
        scope_metrics=[m.ScopeMetrics(scope={"name": "keel"}, metrics=[
            m.Metric(name="keel.tool.duration", unit="s", histogram=m.Histogram(data_points=[
                m.HistogramDataPoint(count=3, sum=1.5, bucket_counts=[1, 2, 0], explicit_bounds=[0.1, 1.0], **point)])),
            m.Metric(name="keel.tool.calls", unit="1", sum=m.Sum(
                is_monotonic=True, aggregation_temporality=m.AGGREGATION_TEMPORALITY_CUMULATIVE,
                data_points=[m.NumberDataPoint(as_int=3, **point)])),
            m.Metric(name="keel.runs.active", gauge=m.Gauge(data_points=[m.NumberDataPoint(as_double=0.25, **point)])),
        ])],
    )])

def post(url, body, **headers):
    headers["Content-Type"] = "application/x-protobuf"
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as response:
        assert response.headers["Content-Type"] == "application/x-protobuf", response.headers
        return response.read()

http, grpc_target = sys.argv[1], sys.argv[2]
answer = post(http + "/v1/traces", gzip.compress(traces("over http").SerializeToString()),
              **{"Content-Encoding": "gzip", "X-Keel-Test": "http"})
ts.ExportTraceServiceResponse.FromString(answer)
post(http + "/v1/metrics", metrics().SerializeToString(), **{"X-Keel-Test": "http"})
with grpc.insecure_channel(grpc_target, options=[("grpc.enable_http_proxy", 0)]) as channel:
    metadata = [("x-keel-test", "grpc")]
    trace_service_pb2_grpc.TraceServiceStub(channel).Export(traces("over grpc"), metadata=metadata, timeout=10)
    metrics_service_pb2_grpc.MetricsServiceStub(channel).Export(metrics(), metadata=metadata, timeout=10)
"#;

const PATIENCE: Duration = Duration::from_secs(10);

/// The span line the receiver prints for the span [`SENDER`] sends, without its headers.
fn expected_span(transport: &str) -> Value {
    json!({
        "signal": "span",
        "transport": transport,
        "resource": {"service.name": "keel"},
        "scope": {"name": "keel", "version": "1.2.3"},
        "traceId": "0102030405060708090a0b0c0d0e0f10",
        "spanId": "1112131415161718",
        "parentSpanId": "191a1b1c1d1e1f20",
        "name": format!("over {transport}"),
        "kind": "SPAN_KIND_CLIENT",
        "startTimeUnixNano": 1_700_000_000_000_000_001_u64,
        "endTimeUnixNano": 1_700_000_000_000_000_002_u64,
        "attributes": {
            "s": "x", "i": -7, "b": true, "d": 0.5, "y": "00ff",
            "a": [1, "two"], "m": {"k": "v"},
        },
        "events": [{"name": "retry", "timeUnixNano": 5, "attributes": {"attempt": 2}}],
        "links": [{
            "traceId": "aa".repeat(16),
            "spanId": "bb".repeat(8),
            "attributes": {"l": false},
        }],
        "status": {"code": "STATUS_CODE_ERROR", "message": "boom"},
        "flags": 257,
    })
}

/// The metric lines the receiver prints for the metrics [`SENDER`] sends, without headers.
fn expected_metrics(transport: &str) -> [Value; 3] {
    let line = |name: &str, unit: &str, kind: &str, fields: Value| {
        let mut line = json!({
            "signal": "metric",
            "transport": transport,
            "resource": {"service.name": "keel"},
            "scope": {"name": "keel", "version": ""},
            "name": name,
            "unit": unit,
            "type": kind,
            "attributes": {"tool": "read_file"},
            "timeUnixNano": 9,
        });
        line.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        line
    };
    [
        line(
            "keel.tool.duration",
            "s",
            "histogram",
            json!({"count": 3, "sum": 1.5, "bucketCounts": [1, 2, 0], "explicitBounds": [0.1, 1.0]}),
        ),
        line(
            "keel.tool.calls",
            "1",
            "sum",
            json!({
                "value": 3,
                "isMonotonic": true,
                "aggregationTemporality": "AGGREGATION_TEMPORALITY_CUMULATIVE",
            }),
        ),
        line("keel.runs.active", "", "gauge", json!({"value": 0.25})),
    ]
}

/// `line` without its `headers`, and those headers.
fn split_headers(line: &Value) -> (Value, Value) {
    let mut line = line.clone();
    let headers = line.as_object_mut().unwrap().remove("headers").unwrap();
    (line, headers)
}

#[test]
fn decodes_spans_and_metrics_over_http_and_grpc() {
    let receiver = OtlpReceiver::start();
    let sent = Command::new(otlp_receiver_python())
        .args(["-c", SENDER, &receiver.http_endpoint()])
        .arg(receiver.grpc_addr().to_string())
        .output()
        .unwrap();
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );

    let spans = receiver.wait_for_spans("a span over each transport", PATIENCE, |s| s.len() >= 2);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    for transport in ["http", "grpc"] {
        let span = span_named(&spans, &format!("over {transport}")).unwrap();
        let (span, headers) = split_headers(span);
        assert_eq!(span, expected_span(transport));
        assert_eq!(headers["x-keel-test"], transport, "{headers}");
    }
    let (_, http_headers) = split_headers(span_named(&spans, "over http").unwrap());
    assert_eq!(http_headers["content-encoding"], "gzip");

    let metrics = receiver.wait_for_metrics("three points over each transport", PATIENCE, |m| {
        m.len() >= 6
    });
    let (decoded, headers): (Vec<Value>, Vec<Value>) = metrics.iter().map(split_headers).unzip();
    let expected: Vec<Value> = [expected_metrics("http"), expected_metrics("grpc")].concat();
    assert_eq!(decoded, expected);
    assert!(
        headers.iter().all(|h| h["x-keel-test"].is_string()),
        "{headers:?}"
    );
}

/// Posts an empty trace export (a valid, empty request) and returns the status line of the
/// answer, or the read's error when none comes within `patience`.
fn post_empty_export(addr: SocketAddr, patience: Duration) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(patience))?;
    stream.write_all(
        b"POST /v1/traces HTTP/1.1\r\nHost: otlp\r\nContent-Type: application/x-protobuf\r\n\
          Content-Length: 0\r\nConnection: close\r\n\r\n",
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer.lines().next().unwrap_or_default().to_owned())
}

#[test]
fn status_flag_refuses_every_export() {
    let healthy = OtlpReceiver::start();
    let refusing = OtlpReceiver::start_with(&["--status", "503"]);
    let ok = post_empty_export(healthy.http_addr(), PATIENCE).unwrap();
    assert_eq!(ok, "HTTP/1.1 200 OK");
    let refused = post_empty_export(refusing.http_addr(), PATIENCE).unwrap();
    assert_eq!(refused, "HTTP/1.1 503 Service Unavailable");
}

#[test]
fn stall_flag_holds_requests_without_answering() {
    let stalled = OtlpReceiver::start_with(&["--stall"]);
    let answer = post_empty_export(stalled.http_addr(), Duration::from_secs(1));
    let error = answer.unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{error}"
    );
}
