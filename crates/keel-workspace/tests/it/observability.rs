//! The Runtime's `observability` section: it loads typed with its defaults, and each value
//! that cannot work is an error at its file:line:column naming the field.

use std::time::Duration as StdDuration;

use keel_workspace::{LoadOptions, ObservabilitySpec, OtlpProtocol, OtlpSpec};

use crate::support::{Load, env, located, workspace};

/// A Runtime document whose `spec` is `observability:` followed by `section` (indented by
/// the caller), so the section's lines start at line 5.
fn runtime(section: &str) -> String {
    format!("apiVersion: keel/v1\nkind: Runtime\nspec:\n  observability:\n{section}")
}

#[test]
fn a_full_observability_section_loads_with_its_values() {
    let ws = workspace();
    ws.write(
        "config/runtime.yaml",
        runtime(
            "    captureContent: true
    otlp:
      endpoint: https://collector.example.com:4318
      protocol: grpc
      headers:
        authorization: Bearer ${OTLP_TOKEN}
        x-tenant: acme
      timeout: 3s
      sampling: 0.25
      resource: { deployment.environment: prod, team: agents }
      serviceName: keel-prod
      queueSize: 4096
      batchSize: 256
      exportInterval: 500ms
      metrics: false
",
        ),
    );
    let loaded = ws.load_ok(&env(&[("OTLP_TOKEN", "t0ken")]));

    let observability = &loaded.runtime.observability;
    assert!(observability.capture_content);
    let otlp = observability.otlp.as_ref().expect("otlp is set");
    assert_eq!(
        otlp.endpoint.as_deref(),
        Some("https://collector.example.com:4318")
    );
    assert_eq!(otlp.protocol, OtlpProtocol::Grpc);
    assert_eq!(otlp.headers["authorization"], "Bearer t0ken");
    assert_eq!(otlp.headers["x-tenant"], "acme");
    assert_eq!(otlp.timeout.0, StdDuration::from_secs(3));
    assert_eq!(otlp.sampling, 0.25);
    assert_eq!(otlp.resource["deployment.environment"], "prod");
    assert_eq!(otlp.resource["team"], "agents");
    assert_eq!(otlp.service_name.as_deref(), Some("keel-prod"));
    assert_eq!(otlp.queue_size, 4096);
    assert_eq!(otlp.batch_size, 256);
    assert_eq!(otlp.export_interval.0, StdDuration::from_millis(500));
    assert!(!otlp.metrics);
}

#[test]
fn without_the_section_nothing_is_exported_and_an_empty_otlp_takes_the_defaults() {
    let ws = workspace();
    let loaded = ws.load_ok(&LoadOptions::default());
    assert_eq!(loaded.runtime.observability, ObservabilitySpec::default());
    assert!(!loaded.runtime.observability.capture_content);
    assert_eq!(loaded.runtime.observability.otlp, None);

    ws.write("config/runtime.yaml", runtime("    otlp: {}\n"));
    let loaded = ws.load_ok(&LoadOptions::default());
    let otlp = loaded.runtime.observability.otlp.expect("otlp is set");
    assert_eq!(otlp, OtlpSpec::default());
    assert_eq!(otlp.endpoint, None);
    assert_eq!(otlp.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(otlp.timeout.0, StdDuration::from_secs(10));
    assert_eq!(otlp.sampling, 1.0);
    assert_eq!(otlp.service_name, None);
    assert_eq!((otlp.queue_size, otlp.batch_size), (2048, 512));
    assert_eq!(otlp.export_interval.0, StdDuration::from_secs(1));
    assert!(otlp.metrics);
}

#[test]
fn the_protocol_is_written_as_otel_spells_it() {
    let ws = workspace();
    ws.write(
        "config/runtime.yaml",
        runtime("    otlp: { protocol: http/protobuf }\n"),
    );
    let loaded = ws.load_ok(&LoadOptions::default());
    let otlp = loaded.runtime.observability.otlp.expect("otlp is set");
    assert_eq!(otlp.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(
        serde_json::to_value(OtlpProtocol::Grpc).unwrap(),
        serde_json::json!("grpc")
    );

    ws.write(
        "config/runtime.yaml",
        runtime("    otlp: { protocol: http }\n"),
    );
    let located = located(&ws.diagnostics(&LoadOptions::default()));
    assert_eq!(
        located,
        [
            "config/runtime.yaml:5:23: invalid value `http` for `spec.observability.otlp.protocol` of Runtime `default`"
        ]
    );
}

/// Each value that cannot work, alone in an `otlp:` block starting at line 5 (the key of the
/// value is on line 6), and the one located error it gives.
#[test]
fn each_unusable_otlp_value_is_located_and_names_its_field() {
    let cases = [
        (
            "sampling: 1.5",
            "config/runtime.yaml:6:17: `spec.observability.otlp.sampling` of Runtime `default` must be at most 1, found 1.5",
        ),
        (
            "sampling: -0.1",
            "config/runtime.yaml:6:17: `spec.observability.otlp.sampling` of Runtime `default` must be at least 0, found -0.1",
        ),
        (
            "endpoint: 127.0.0.1:4318",
            "config/runtime.yaml:6:17: `observability.otlp.endpoint` `127.0.0.1:4318` is not an http:// or https:// URL",
        ),
        (
            "endpoint: grpc://collector:4317",
            "config/runtime.yaml:6:17: `observability.otlp.endpoint` `grpc://collector:4317` is not an http:// or https:// URL",
        ),
        (
            "endpoint: http://:4318",
            "config/runtime.yaml:6:17: `observability.otlp.endpoint` `http://:4318` has no host",
        ),
        (
            "queueSize: 0",
            "config/runtime.yaml:6:18: `spec.observability.otlp.queueSize` of Runtime `default` must be at least 1, found 0",
        ),
        (
            "batchSize: 0",
            "config/runtime.yaml:6:18: `spec.observability.otlp.batchSize` of Runtime `default` must be at least 1, found 0",
        ),
        (
            "batchSize: 4096",
            "config/runtime.yaml:6:18: `observability.otlp.batchSize` 4096 is above `queueSize` 2048 (the default)",
        ),
        (
            "queueSize: 100",
            "config/runtime.yaml:6:18: `observability.otlp.batchSize` 512 (the default) is above `queueSize` 100",
        ),
        (
            "headers: { x api key: secret }",
            "config/runtime.yaml:6:18: `observability.otlp.headers` name `x api key` is not a valid HTTP header name",
        ),
        (
            "headers: { \"x:tenant\": acme }",
            "config/runtime.yaml:6:18: `observability.otlp.headers` name `x:tenant` is not a valid HTTP header name",
        ),
    ];
    for (value, expected) in cases {
        let ws = workspace();
        ws.write(
            "config/runtime.yaml",
            runtime(&format!("    otlp:\n      {value}\n")),
        );
        let diagnostics = ws.diagnostics(&LoadOptions::default());
        assert_eq!(located(&diagnostics), [expected], "{value}");
        assert_eq!(diagnostics[0].line, 6, "{value}");
    }
}

/// The messages a user reads, with their hints, when several values are wrong at once.
#[test]
fn unusable_otlp_values_are_reported_together_with_hints() {
    let ws = workspace();
    ws.write(
        "config/runtime.yaml",
        runtime(
            "    captureContent: yes
    otlp:
      endpoint: localhost:4318
      protocol: http/json
      headers:
        Bad Header: x
      sampling: 2
      queueSize: 10
      batchSize: 20
      exportInterval: soon
      serviceNam: keel
",
        ),
    );
    let rendered: Vec<String> = ws
        .diagnostics(&LoadOptions::default())
        .iter()
        .map(ToString::to_string)
        .collect();
    insta::assert_snapshot!(rendered.join("\n"));
}
