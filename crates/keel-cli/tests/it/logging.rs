//! `KEEL_LOG_FORMAT`: `json` writes the binary's log as one JSON object per stderr line; an
//! unknown format is reported, and the log stays text.

use serde_json::Value;

use crate::common::{keel_in, quickstart};

#[test]
fn logging_json_format_writes_one_json_object_per_stderr_line() {
    let ws = quickstart();
    let keel = keel_in(&ws)
        .env("KEEL_LOG", "debug")
        .env("KEEL_LOG_FORMAT", "json");

    // A first `runs list` creates the store, which logs its migration.
    let output = keel.run(["runs", "list"]);

    assert!(output.success(), "{}", output.stderr);
    let lines: Vec<Value> = output
        .stderr
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(!lines.is_empty(), "no JSON log line: {}", output.stderr);
    for line in &lines {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(line[key].is_string(), "{key} missing: {line}");
        }
        assert!(line.get("spans").is_none(), "{line}");
    }
    assert!(
        lines.iter().any(|line| line["level"] == "INFO"),
        "{}",
        output.stderr
    );
}

#[test]
fn logging_unknown_format_is_reported_and_the_log_stays_text() {
    let ws = quickstart();
    let keel = keel_in(&ws)
        .env("KEEL_LOG", "info")
        .env("KEEL_LOG_FORMAT", "xml");

    let output = keel.run(["runs", "list"]);

    assert!(output.success(), "{}", output.stderr);
    let mut lines = output.stderr.lines();
    assert_eq!(
        lines.next(),
        Some(
            "error: KEEL_LOG_FORMAT is \"xml\", which is not a log format (accepted: text, \
             json); logging as text"
        ),
        "{}",
        output.stderr
    );
    let log: Vec<&str> = lines.collect();
    assert!(log.iter().any(|line| line.contains(" INFO ")), "{log:?}");
    assert!(!log.iter().any(|line| line.starts_with('{')), "{log:?}");
}

/// A line logged while a run works carries that run's ids: here the retry of a model round the
/// mock refused once (429), written inside the run's `keel.run` span.
#[tokio::test(flavor = "multi_thread")]
async fn logging_json_lines_inside_a_run_carry_its_trace_and_span_ids() {
    let mock = keel_test_support::MockLlm::start().await;
    mock.push(keel_test_support::MockResponse::error(
        429,
        r#"{"error": {"message": "slow down", "type": "rate_limit"}}"#,
    ))
    .push(keel_test_support::MockResponse::text(["Fine."]));
    let ws = keel_test_support::WorkspaceBuilder::new()
        .runtime("{ defaultAgent: a, retry: { model: { maxAttempts: 2, initialBackoff: 1ms, maxBackoff: 2ms } } }")
        .openai_model_at("m", &mock.base_url())
        .agent("a", "{ model: m }")
        .build();
    let keel = keel_in(&ws)
        .env("KEEL_LOG", "debug")
        .env("KEEL_LOG_FORMAT", "json");
    let output = tokio::task::block_in_place(|| keel.run(["run", "hello"]));
    assert!(output.success(), "{}", output.stderr);

    let id = keel.newest_run_id();
    let record: Value =
        serde_json::from_str(&keel.run(["runs", "show", &id, "--json"]).stdout).unwrap();
    let retry = output
        .stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["message"] == "Retrying model round.")
        .unwrap_or_else(|| panic!("no retry line: {}", output.stderr));
    assert_eq!(retry["request_id"], id.as_str());
    assert_eq!(retry["trace_id"], record["trace"]["traceId"]);
    // The span of the run's attempt: the root of `keel runs show --trace`.
    let view: Value =
        serde_json::from_str(&keel.run(["runs", "show", &id, "--trace", "--json"]).stdout).unwrap();
    let root = view["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "invoke_agent a")
        .unwrap();
    assert_eq!(retry["span_id"], root["spanId"]);
}
