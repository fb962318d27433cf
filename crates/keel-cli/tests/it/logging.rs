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
