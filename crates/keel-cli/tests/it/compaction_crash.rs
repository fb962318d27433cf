//! A run killed (SIGKILL) in the round after a compaction resumes with the compacted prompt
//! from its log: it completes, and the summary is not asked for again.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use keel_test_support::{MockLlm, MockResponse, MockToolCall, RecordedRequest, WorkspaceBuilder};

use crate::common::keel_in;

const SUMMARIZER: &str = "You compact the working memory";
const SUMMARY_HEADING: &str = "[Summary of the earlier rounds";

fn is_summary_request(request: &RecordedRequest) -> bool {
    request.messages().first().is_some_and(|m| {
        m["content"]
            .as_str()
            .is_some_and(|c| c.starts_with(SUMMARIZER))
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_after_a_compaction_resumes_without_summarizing_again() {
    const CALLS: usize = 14;
    let mock = MockLlm::start().await;
    let rounds = Arc::new(AtomicUsize::new(0));
    let counter = rounds.clone();
    // The first round that carries a summary hangs until the process is killed.
    let hang = Arc::new(AtomicBool::new(true));
    let hanging = hang.clone();
    mock.respond_with(move |request| {
        if is_summary_request(request) {
            return MockResponse::text(["Files were read; the first said KEY-1."]);
        }
        let carries_summary = request.body.to_string().contains(SUMMARY_HEADING);
        if carries_summary && hanging.load(Ordering::SeqCst) {
            return MockResponse::text(["never seen"]).delay(Duration::from_secs(600));
        }
        let n = counter.fetch_add(1, Ordering::SeqCst);
        match n < CALLS {
            true => {
                let args = format!(r#"{{"path":"f{n}.txt"}}"#);
                MockResponse::tool_calls([MockToolCall::new(
                    format!("call_{n}"),
                    "read_file",
                    [args.as_str()],
                )])
            }
            false => MockResponse::text(["All read."]),
        }
    });
    let mut builder = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: reader, limits: { maxSteps: 100 } }")
        .model(
            "small",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: m, contextWindow: 3000 }}",
                mock.base_url()
            ),
        )
        .agent(
            "reader",
            "{ model: small, tools: [read_file], context: { compactAt: 0.5, keepRecent: 2, strategy: [summarize] } }",
        );
    for n in 0..CALLS {
        builder = builder.file(
            &format!("f{n}.txt"),
            format!("File {n}. ") + &"text ".repeat(200),
        );
    }
    let ws = builder.build();
    let keel = keel_in(&ws);
    let mut child = keel
        .command(["run", "Read the files one by one."])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the hanging round: the compaction before it is stored by then.
    let mut waited = 0;
    while !mock
        .requests()
        .iter()
        .any(|r| !is_summary_request(r) && r.body.to_string().contains(SUMMARY_HEADING))
    {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it compacted"
        );
        waited += 1;
        assert!(waited < 6_000, "no round after a compaction");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let _ = tokio::task::block_in_place(|| child.wait());
    hang.store(false, Ordering::SeqCst);
    let summaries_before = mock
        .requests()
        .iter()
        .filter(|r| is_summary_request(r))
        .count();
    assert!(summaries_before >= 1);

    let id = keel.newest_run_id();
    let listed = keel.newest_run();
    assert_eq!(listed["status"], "interrupted", "{listed}");
    let resumed = keel.run(["runs", "resume", &id]);
    assert!(resumed.success(), "{}\n{}", resumed.stdout, resumed.stderr);
    assert!(resumed.stdout.contains("All read."), "{}", resumed.stdout);

    let requests = mock.requests();
    let first_after = requests
        .iter()
        .filter(|r| !is_summary_request(r) && r.body.to_string().contains(SUMMARY_HEADING))
        .nth(1)
        .expect("the resumed round");
    assert!(
        first_after.body.to_string().contains("KEY-1"),
        "the resumed prompt carries the recorded summary"
    );
    let summaries_after = requests.iter().filter(|r| is_summary_request(r)).count();
    let events = keel.json_lines(["runs", "events", &id, "--json"]);
    let recorded = events
        .iter()
        .filter(|e| e["type"] == "runtime.context.compacted" && e.get("summary").is_some())
        .count();
    assert_eq!(
        summaries_after, recorded,
        "one summarizer request per recorded summary: none asked twice"
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "runtime.request.completed"),
        "the resumed run completed"
    );
}
