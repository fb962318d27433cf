//! Long runs: a run whose prompt would grow past its model's context window (the mock
//! enforces one, answering with the provider's context-length error) keeps it within by
//! eliding old tool results and summarizing the oldest rounds; the fact found by its first
//! call reaches the final answer through the summaries; no prompt sent ever parts a call
//! from its result; a summarizer that fails leaves the prompt as it was.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use keel::{EventPayload, RunStatus, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockToolCall, RecordedRequest, WorkspaceBuilder};

use crate::common;

/// What the summarizer is asked to do, as the runtime words it.
const SUMMARIZER: &str = "You compact the working memory";
/// The fact the first file holds.
const CODE: &str = "KEY-ALPHA-7";
const WINDOW: u64 = 4_000;

/// The model asking for `f{n}.txt`, as call `call_{n}`.
fn read_file_call(n: usize) -> MockResponse {
    let args = format!(r#"{{"path":"f{n}.txt"}}"#);
    MockResponse::tool_calls([MockToolCall::new(
        format!("call_{n}"),
        "read_file",
        [args.as_str()],
    )])
}

fn is_summary_request(request: &RecordedRequest) -> bool {
    request.messages().first().is_some_and(|m| {
        m["content"]
            .as_str()
            .is_some_and(|c| c.starts_with(SUMMARIZER))
    })
}

/// A workspace of `files` 1 KB files, `f0.txt` holding [`CODE`], and an agent on a model
/// with a 4k-token window.
fn long_run_workspace(
    mock: &MockLlm,
    files: usize,
    agent: (&str, &str),
) -> keel_test_support::TempWorkspace {
    let mut builder = WorkspaceBuilder::new()
        .runtime(&format!(
            "{{ defaultAgent: {}, limits: {{ maxSteps: 400 }} }}",
            agent.0
        ))
        .model(
            "small",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: m, contextWindow: {WINDOW} }}",
                mock.base_url()
            ),
        )
        .agent(agent.0, agent.1);
    for n in 0..files {
        let mut text = format!("File {n}. ");
        if n == 0 {
            text.push_str(&format!("The code is {CODE}. "));
        }
        while text.len() < 1024 {
            text.push_str("Nothing else of note is written here. ");
        }
        builder = builder.file(&format!("f{n}.txt"), text);
    }
    builder.build()
}

/// Every call of every assistant message in `request` has its result right after it, and
/// every result follows its call.
fn assert_calls_keep_their_results(request: &RecordedRequest) {
    let messages = request.messages();
    let mut open: HashSet<String> = HashSet::new();
    for message in messages {
        match message["role"].as_str() {
            Some("assistant") => {
                assert!(open.is_empty(), "calls left without results: {open:?}");
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    open.insert(call["id"].as_str().unwrap().to_owned());
                }
            }
            Some("tool") => {
                let id = message["tool_call_id"].as_str().unwrap();
                assert!(open.remove(id), "a result without its call: {id}");
            }
            _ => assert!(open.is_empty(), "calls parted from their results: {open:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_calls_fit_a_4k_window_and_the_first_fact_survives() {
    const CALLS: usize = 300;
    let mock = MockLlm::start().await;
    mock.context_window(WINDOW);
    let rounds = Arc::new(AtomicUsize::new(0));
    let counter = rounds.clone();
    mock.respond_with(move |request| {
        if is_summary_request(request) {
            // Keeps the codes it reads, as a good summary does.
            let text = request.messages()[1]["content"]
                .as_str()
                .unwrap_or_default();
            let kept = match text.contains(CODE) {
                true => format!("The first file said: the code is {CODE}."),
                false => "Files were read; nothing of note.".to_owned(),
            };
            return MockResponse::text([format!("{kept} More files were read.")]);
        }
        let n = counter.fetch_add(1, Ordering::SeqCst);
        if n < CALLS {
            return read_file_call(n);
        }
        let body = request.body.to_string();
        match body.contains(CODE) {
            true => MockResponse::text([format!("The first code was {CODE}.")]),
            false => MockResponse::text(["The first code is lost."]),
        }
    });
    let ws = long_run_workspace(
        &mock,
        CALLS,
        (
            "reader",
            "{ model: small, instructions: Read every file in order and report the first code., tools: [read_file] }",
        ),
    );
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "Read f0.txt to f299.txt, one by one.").await;

    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    assert_eq!(
        response.output.as_deref(),
        Some("The first code was KEY-ALPHA-7.")
    );
    assert_eq!(rounds.load(Ordering::SeqCst), CALLS + 1);

    let requests = mock.requests();
    for request in &requests {
        assert!(
            request.estimated_tokens() <= WINDOW,
            "a prompt past the window was sent: {} tokens",
            request.estimated_tokens()
        );
        if !is_summary_request(request) {
            assert_calls_keep_their_results(request);
        }
    }
    let events = common::stored(&runtime, &response).await;
    let compactions: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ContextCompacted {
                tokens_before,
                tokens_after,
                elided,
                summarized,
                ..
            } => Some((*tokens_before, *tokens_after, elided.len(), *summarized)),
            _ => None,
        })
        .collect();
    assert!(compactions.len() > 5, "{compactions:?}");
    assert!(
        compactions.iter().any(|(_, _, elided, _)| *elided > 0),
        "old results were elided first"
    );
    let summaries = compactions.iter().filter(|c| c.3.is_some()).count();
    assert!(summaries > 0, "{compactions:?}");
    assert_eq!(
        requests.iter().filter(|r| is_summary_request(r)).count(),
        summaries,
        "one summarizer request per recorded summary"
    );
    for (before, after, _, _) in &compactions {
        assert!(after < before, "{compactions:?}");
    }

    // A run continued from just after its third summary (a fork rebuilds the prompt as a
    // resume does) sends exactly the prompt the run sent next, and asks for no summary.
    let third = events
        .iter()
        .filter(|e| {
            matches!(
                &e.payload,
                EventPayload::ContextCompacted {
                    summarized: Some(_),
                    ..
                }
            )
        })
        .nth(2)
        .expect("a third summary");
    let rounds_before = events
        .iter()
        .take_while(|e| e.seq < third.seq)
        .filter(|e| matches!(e.payload, EventPayload::ModelStarted { .. }))
        .count();
    let agent_requests: Vec<&RecordedRequest> =
        requests.iter().filter(|r| !is_summary_request(r)).collect();
    let sent_next = agent_requests[rounds_before].messages().to_vec();
    let asked_before = requests.len();
    let mut fork = runtime.fork(&response.request_id, third.seq).await.unwrap();
    while fork.next_event().await.is_some() {}
    let forked = fork.wait().await.unwrap();
    assert_eq!(forked.status, RunStatus::Completed, "{:?}", forked.error);
    let after_fork = mock.requests();
    assert!(
        !after_fork[asked_before..].iter().any(is_summary_request),
        "the recorded summary is used, not asked for again"
    );
    assert_eq!(
        after_fork[asked_before].messages(),
        &sent_next[..],
        "the rebuilt prompt is the one the run had"
    );

    // A replay answers from the log, the summaries included: no model is asked, and its
    // events are the original's.
    let asked_before = mock.requests().len();
    let mut replay = runtime.replay(&response.request_id).await.unwrap();
    while replay.next_event().await.is_some() {}
    let replayed = replay.wait().await.unwrap();
    assert_eq!(
        replayed.status,
        RunStatus::Completed,
        "{:?}",
        replayed.error
    );
    assert_eq!(mock.requests().len(), asked_before, "no model was asked");
    let divergence = runtime
        .runs()
        .divergence(&response.request_id, &replayed.request_id)
        .await
        .unwrap();
    assert_eq!(divergence, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_summarizer_leaves_the_prompt_as_it_was_and_the_turn_goes_on() {
    let mock = MockLlm::start().await;
    let rounds = Arc::new(AtomicUsize::new(0));
    let counter = rounds.clone();
    let summaries = Arc::new(AtomicUsize::new(0));
    let asked = summaries.clone();
    mock.respond_with(move |request| {
        if is_summary_request(request) {
            // A 500, then an empty answer.
            return match asked.fetch_add(1, Ordering::SeqCst) {
                0 => MockResponse::error(
                    500,
                    r#"{"error":{"message":"boom","type":"server_error"}}"#,
                ),
                _ => MockResponse::text([""]),
            };
        }
        let n = counter.fetch_add(1, Ordering::SeqCst);
        match n < 12 {
            true => read_file_call(n),
            false => MockResponse::text(["Done reading."]),
        }
    });
    // No eliding: only a summary could make room, and it fails.
    let ws = long_run_workspace(
        &mock,
        12,
        (
            "summarizing",
            "{ model: small, tools: [read_file], context: { compactAt: 0.5, keepRecent: 2, strategy: [summarize] } }",
        ),
    );
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "Read the twelve files.").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    assert_eq!(response.output.as_deref(), Some("Done reading."));
    let events = common::stored(&runtime, &response).await;
    let failures: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ContextCompacted {
                error: Some(error),
                summarized: None,
                elided,
                ..
            } if elided.is_empty() => Some(error.clone()),
            _ => None,
        })
        .collect();
    assert!(failures.len() >= 2, "{failures:?}");
    assert!(
        failures[0].contains("the summarizer failed"),
        "{failures:?}"
    );
    assert_eq!(failures[1], "the summarizer answered nothing");
    // Every round still had the whole conversation: twelve results in the last request.
    let last = mock
        .requests()
        .into_iter()
        .rev()
        .find(|r| !is_summary_request(r))
        .unwrap();
    assert_eq!(
        last.messages()
            .iter()
            .filter(|m| m["role"] == "tool")
            .count(),
        12
    );
}

/// A model whose real window is smaller than its document says: the threshold never fires,
/// the model refuses the prompt, room is made once (keeping only the last round) and the
/// round asked again; a prompt that still does not fit ends the run with `context_overflow`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_prompt_is_compacted_once_and_asked_again_else_the_run_overflows() {
    let mock = MockLlm::start().await;
    mock.context_window(1_500);
    let counter = Arc::new(AtomicUsize::new(0));
    let rounds = counter.clone();
    mock.respond_with(move |request| {
        if is_summary_request(request) {
            return MockResponse::text(["Eight files were read."]);
        }
        let n = rounds.fetch_add(1, Ordering::SeqCst);
        match n < 8 {
            true => read_file_call(n),
            false => MockResponse::text(["Done."]),
        }
    });
    let ws = long_run_workspace(
        &mock,
        8,
        (
            "reader",
            "{ model: small, tools: [read_file], context: { compactAt: 1.0, keepRecent: 8 } }",
        ),
    );
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "Read the eight files.").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    let events = common::stored(&runtime, &response).await;
    let reasons: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ContextCompacted { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert!(reasons.contains(&"overflow"), "{reasons:?}");
    let refused = mock
        .requests()
        .iter()
        .filter(|r| r.estimated_tokens() > 1_500)
        .count();
    assert!(refused >= 1, "the model refused a prompt");

    // A window too small for even the instructions and the input: nothing to compact.
    let tiny = MockLlm::start().await;
    tiny.context_window(5);
    tiny.respond_with(|_| MockResponse::text(["never"]));
    let ws = long_run_workspace(&tiny, 1, ("reader", "{ model: small, tools: [read_file] }"));
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "Read the file.").await;
    assert_eq!(response.finish_reason, keel::FinishReason::ContextOverflow);
    assert_eq!(
        response.error.as_ref().unwrap().code,
        keel::ErrorCode::ModelContextLength
    );
}

/// The input section's recorded tokens when the agent's model is `model_doc`.
async fn input_tokens(mock: &MockLlm, model_doc: &str, input: &str) -> (u64, u64) {
    mock.push(MockResponse::text(["Noted."]));
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: counter }")
        .model(
            "m",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", {model_doc} }}",
                mock.base_url()
            ),
        )
        .agent(
            "counter",
            "{ model: m, instructions: Count., tools: [read_file] }",
        )
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, events) = common::run(&runtime, input).await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    let sections = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::PromptAssembled { sections, .. } => Some(sections.clone()),
            _ => None,
        })
        .expect("the round's prompt was recorded");
    let tokens = |name: &str| sections.iter().find(|s| s.name == name).unwrap().tokens;
    (tokens("input"), tokens("tools"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_model_with_a_managed_window_counts_with_its_encoding() {
    let mock = MockLlm::start().await;
    // 3,996 bytes: the heuristic's 999 tokens and 4 of framing; in o200k_base and
    // cl100k_base "hello" and " world" are a token each.
    let input = "hello world ".repeat(333);
    let heuristic = input_tokens(&mock, "model: gpt-4o", &input).await;
    assert_eq!(heuristic.0, 1_003, "no window declared: the heuristic");
    let o200k = input_tokens(&mock, "model: gpt-4o, contextWindow: 128000", &input).await;
    assert_eq!(o200k.0, 667 + 4, "o200k_base");
    let cl100k = input_tokens(&mock, "model: gpt-4-turbo, contextWindow: 128000", &input).await;
    assert_eq!(cl100k.0, 667 + 4, "cl100k_base");
    // The tool definitions are counted with the same encoding.
    assert!(o200k.1 < heuristic.1, "{o200k:?} vs {heuristic:?}");
    let chosen = input_tokens(
        &mock,
        "model: gpt-4o, contextWindow: 128000, tokenizer: heuristic",
        &input,
    )
    .await;
    assert_eq!(chosen, heuristic, "a declared tokenizer wins");
    let forced = input_tokens(&mock, "model: local-llama, tokenizer: o200k_base", &input).await;
    assert_eq!(forced, o200k, "any model may name an encoding");
}
