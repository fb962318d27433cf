//! A run killed (SIGKILL) mid-round and resumed in a new process is exported as an attempt
//! whose span links to its first attempt's, in the trace kept on the run's record; the span
//! ids the export sends are those `keel runs show --trace` computes from the events.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keel_test_support::otlp::OtlpReceiver;
use keel_test_support::{MockLlm, MockResponse, WorkspaceBuilder};
use serde_json::Value;

use crate::common::keel_in;

#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_run_links_to_its_first_attempt_and_the_waterfall_shows_both() {
    let receiver = OtlpReceiver::start();
    let mock = MockLlm::start().await;
    // The first round hangs until the process is killed; after that, rounds answer.
    let hang = Arc::new(AtomicBool::new(true));
    let hanging = hang.clone();
    mock.respond_with(move |_| match hanging.load(Ordering::SeqCst) {
        true => MockResponse::text(["never seen"]).delay(Duration::from_secs(600)),
        false => MockResponse::text(["Back again."]),
    });
    let ws = WorkspaceBuilder::new()
        .runtime(&format!(
            "{{ defaultAgent: a, observability: {{ otlp: {{ endpoint: \"{}\", exportInterval: 100ms }} }} }}",
            receiver.http_endpoint()
        ))
        .openai_model_at("m", &mock.base_url())
        .agent("a", "{ model: m }")
        .build();
    let keel = keel_in(&ws);
    let mut child = keel
        .command(["run", "Say something."])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut waited = 0;
    while mock.request_count() == 0 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its round"
        );
        waited += 1;
        assert!(waited < 6_000, "no model round");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = tokio::task::block_in_place(|| child.wait());
    hang.store(false, Ordering::SeqCst);

    let id = keel.newest_run_id();
    let resumed = keel.run(["runs", "resume", &id]);
    assert!(resumed.success(), "{}\n{}", resumed.stdout, resumed.stderr);

    let record: Value =
        serde_json::from_str(&keel.run(["runs", "show", &id, "--json"]).stdout).unwrap();
    let trace_id = record["trace"]["traceId"].as_str().unwrap().to_owned();
    let spans = tokio::task::spawn_blocking(move || {
        receiver.wait_for_spans("the resumed attempt", Duration::from_secs(60), |spans| {
            spans.iter().any(|s| s["name"] == "invoke_agent a")
        })
    })
    .await
    .unwrap();
    let attempt = spans
        .iter()
        .find(|s| s["name"] == "invoke_agent a")
        .unwrap();
    assert_eq!(attempt["traceId"], trace_id.as_str());
    let link = &attempt["links"][0];
    assert_eq!(link["traceId"], trace_id.as_str(), "{attempt}");
    assert_eq!(link["attributes"]["keel.link.type"], "resumed_from");

    // The computed trace has both attempts: the first (cut off, an error) is the link's target,
    // the second is the exported span.
    let view: Value =
        serde_json::from_str(&keel.run(["runs", "show", &id, "--trace", "--json"]).stdout).unwrap();
    let roots: Vec<&Value> = view["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "invoke_agent a")
        .collect();
    assert_eq!(roots.len(), 2, "{view:#}");
    assert_eq!(roots[0]["spanId"], link["spanId"]);
    assert_eq!(roots[0]["status"]["code"], "error");
    assert_eq!(roots[1]["spanId"], attempt["spanId"]);
    // The exported round is the one the computed trace has under the second attempt.
    let chat = spans
        .iter()
        .find(|s| s["parentSpanId"] == attempt["spanId"])
        .unwrap();
    assert!(
        view["spans"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["spanId"] == chat["spanId"])
    );

    let text = keel.run(["runs", "show", &id, "--trace"]);
    assert!(text.success(), "{}", text.stderr);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines[0], format!("trace {trace_id}"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("invoke_agent a"))
            .count(),
        2,
        "{}",
        text.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  chat ") && l.contains(" ms") && l.contains("tokens")),
        "{}",
        text.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("error: the process running the run stopped")),
        "{}",
        text.stdout
    );
}
