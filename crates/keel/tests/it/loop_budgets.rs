//! Budgets and the execution contract end runs with typed finish reasons.

use std::time::Duration;

use keel::{ErrorCode, FinishReason};
use keel::{RunStatus, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockToolCall};

use crate::common::{self, assert_well_formed, types};

/// A run whose model asks for `list_dir` forever, under the runtime `limits` given.
struct Endless {
    mock: MockLlm,
    runtime: Runtime,
    response: keel::RunResponse,
    _ws: keel_test_support::TempWorkspace,
}

async fn run_forever(limits: &str) -> Endless {
    let mock = MockLlm::start().await;
    mock.respond_with(|_| {
        MockResponse::tool_calls([MockToolCall::new("c", "list_dir", [r#"{"path":"."}"#])])
    });
    let ws = common::workspace(&mock.base_url(), &["list_dir"], limits);
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "Loop forever").await;
    Endless {
        mock,
        runtime,
        response,
        _ws: ws,
    }
}

#[tokio::test]
async fn max_steps_ends_a_run_that_never_answers() {
    let Endless {
        mock,
        runtime,
        response,
        _ws,
    } = run_forever("  limits: { maxSteps: 3 }\n").await;

    assert_eq!(response.status, RunStatus::Failed);
    assert_eq!(response.finish_reason, FinishReason::MaxSteps);
    assert_eq!(response.error.as_ref().unwrap().code, ErrorCode::MaxSteps);
    assert_eq!(response.steps, 3);
    assert_eq!(mock.request_count(), 3);
    assert_well_formed(&common::stored(&runtime, &response).await);
}

#[tokio::test]
async fn run_timeout_ends_a_slow_run() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["too late"]).delay(Duration::from_secs(5)));
    let ws = common::workspace(&mock.base_url(), &[], "  limits: { runTimeout: 200ms }\n");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Hi").await;

    assert_eq!(response.status, RunStatus::Failed);
    assert_eq!(response.finish_reason, FinishReason::Timeout);
    assert_eq!(response.error.as_ref().unwrap().code, ErrorCode::Timeout);
    assert_well_formed(&common::stored(&runtime, &response).await);
}

#[tokio::test]
async fn an_answer_without_the_required_tool_breaks_the_contract() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["I did not look."]));
    let ws = common::workspace(
        &mock.base_url(),
        &["read_file"],
        "  contract: { requiredTools: [read_file] }\n",
    );
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Summarise the README").await;

    assert_eq!(response.status, RunStatus::Failed);
    assert_eq!(response.finish_reason, FinishReason::ContractViolation);
    let events = common::stored(&runtime, &response).await;
    assert_well_formed(&events);
    let names = types(&events);
    assert!(
        names.contains(&"runtime.execution.contract.failed"),
        "{names:?}"
    );
}

#[tokio::test]
async fn a_failed_required_tool_call_does_not_satisfy_the_contract() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c",
        "read_file",
        [r#"{"path":"missing.md"}"#],
    )]));
    mock.push(MockResponse::text(["Read it."]));
    let ws = common::workspace(
        &mock.base_url(),
        &["read_file"],
        "  contract: { requiredTools: [read_file] }\n",
    );
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Read missing.md").await;

    assert_eq!(response.finish_reason, FinishReason::ContractViolation);
}

#[tokio::test]
async fn the_required_tool_called_successfully_completes_the_run() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c",
        "read_file",
        [r#"{"path":"README.md"}"#],
    )]));
    mock.push(MockResponse::text(["It says hello."]));
    let ws = common::workspace(
        &mock.base_url(),
        &["read_file"],
        "  contract: { requiredTools: [read_file] }\n",
    );
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Read the README").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(response.finish_reason, FinishReason::Completed);
}

/// The spec of a tool that marks `{me}.flag`, then waits for `{other}.flag`.
fn rendezvous_tool(me: &str, other: &str, answer: &str) -> String {
    format!(
        r#"
description: Marks {me}.flag, then waits for {other}.flag.
impl:
  kind: command
  command: ["sh", "-c", "touch {me}.flag; while [ ! -e {other}.flag ]; do sleep 0.01; done; echo {answer}"]
  timeout: 10s
policy: allow
"#
    )
}

#[tokio::test]
async fn tool_calls_of_one_answer_run_concurrently() {
    // Each tool waits for the other to start: they can only both succeed if they overlap.
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([
        MockToolCall::new("c1", "ping", ["{}"]),
        MockToolCall::new("c2", "pong", ["{}"]),
    ]));
    mock.push(MockResponse::text(["Both answered."]));
    let ws = common::builder(&mock.base_url(), &["ping", "pong"], "")
        .tool("ping", &rendezvous_tool("a", "b", "ping"))
        .tool("pong", &rendezvous_tool("b", "a", "pong"))
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Ping pong").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let second = &mock.requests()[1];
    let results: Vec<&str> = second
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        results,
        vec!["ping\n", "pong\n"],
        "results come back in call order"
    );
}

#[tokio::test]
async fn a_large_tool_output_becomes_an_artifact_with_a_preview() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "c1",
        "big",
        ["{}"],
    )]));
    mock.push(MockResponse::text(["Seen."]));
    let ws = common::agent_and_model(&mock.base_url(), &["big"], "")
        .runtime("{ limits: { maxToolOutputBytes: 1000 } }")
        .tool(
            "big",
            r#"
            description: Prints a lot.
            impl: { kind: command, command: ["sh", "-c", "seq 1 5000"] }
            policy: allow
            "#,
        )
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Print a lot").await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let events = common::stored(&runtime, &response).await;
    let artifact = events
        .iter()
        .find_map(|e| match &e.payload {
            keel::EventPayload::ArtifactCreated { artifact, call_id } => {
                assert_eq!(call_id.as_deref(), Some("c1"));
                Some(artifact.clone())
            }
            _ => None,
        })
        .expect("an artifact event");
    let full: String = (1..=5000).map(|n| format!("{n}\n")).collect();
    assert_eq!(artifact.bytes, full.len() as u64);
    let (_, content) = runtime
        .runs()
        .artifact(&artifact.uri)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(String::from_utf8(content).unwrap(), full);
    // The model saw a preview within the limit, and the URI.
    let seen = mock.requests()[1]
        .last_content_of("tool")
        .unwrap()
        .to_owned();
    assert!(seen.len() <= 1000, "{} bytes", seen.len());
    assert!(seen.starts_with("1\n2\n3\n"));
    assert!(seen.contains(&artifact.uri));
}

#[tokio::test]
async fn a_spent_token_budget_ends_the_run_before_its_next_tool_calls() {
    // Each answer reports 10 prompt tokens and 1 completion token.
    let Endless {
        mock,
        runtime,
        response,
        _ws,
    } = run_forever("  limits: { maxTokens: 25 }\n").await;

    assert_eq!(response.status, RunStatus::Failed);
    assert_eq!(response.finish_reason, FinishReason::TokenBudget);
    let error = response.error.as_ref().unwrap();
    assert_eq!(error.code, ErrorCode::TokenBudget);
    assert_eq!(
        error.message,
        "the agent used 33 tokens, over its budget of 25"
    );
    assert_eq!((response.steps, response.usage.total_tokens), (3, 33));
    assert_eq!(mock.request_count(), 3);
    let events = common::stored(&runtime, &response).await;
    let results = events
        .iter()
        .filter(|e| {
            matches!(
                &e.payload,
                keel::EventPayload::Adapter {
                    event: keel::AdapterEvent::ToolResult { .. }
                }
            )
        })
        .count();
    assert_eq!(results, 2, "the third answer's call is not made");
    assert_well_formed(&events);
}

#[tokio::test]
async fn a_final_answer_that_passes_the_runtime_token_budget_is_kept() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["Done."]));
    let ws = common::agent_and_model(&mock.base_url(), &[], "")
        .runtime("{ defaultAgent: assistant, limits: { maxTokens: 5 } }")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, _) = common::run(&runtime, "Hi").await;

    assert_eq!(response.status, RunStatus::Completed);
    assert_eq!(response.output.as_deref(), Some("Done."));
    assert_eq!(response.usage.total_tokens, 11);
}

#[tokio::test]
async fn a_money_budget_stops_a_looping_agent_within_a_round_and_the_cost_adds_up() {
    // Each answer reports 10 prompt tokens and 1 completion token: at 1,000 and a hair over
    // 10,000 per million tokens (a string keeps all its digits), a hair over 0.02 a round.
    let mock = MockLlm::start().await;
    mock.respond_with(|_| {
        MockResponse::tool_calls([MockToolCall::new("c", "list_dir", [r#"{"path":"."}"#])])
    });
    let ws = keel_test_support::WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant, limits: { maxCost: 0.05 } }")
        .model(
            "mock",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: m, pricing: {{ inputPerMTok: 1000, outputPerMTok: \"10000.000000000001\" }} }}",
                mock.base_url()
            ),
        )
        .agent("assistant", "{ model: mock, tools: [list_dir] }")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "Loop forever").await;

    assert_eq!(response.finish_reason, FinishReason::BudgetExceeded);
    let error = response.error.as_ref().unwrap();
    assert_eq!(error.code, ErrorCode::BudgetExceeded);
    assert_eq!(
        error.message,
        "the run spent 0.060000000000000003 USD, its budget is 0.05 USD"
    );
    assert_eq!((response.steps, mock.request_count()), (3, 3));
    let cost = response.usage.cost.unwrap();
    assert_eq!(cost.to_string(), "0.060000000000000003 USD");

    let events = common::stored(&runtime, &response).await;
    let rounds: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.payload {
            keel::EventPayload::ModelCompleted { usage, .. } => usage.cost.map(|c| c.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        rounds, ["0.020000000000000001 USD"; 3],
        "each round's cost, exactly"
    );
    let stored = runtime
        .runs()
        .get(&response.request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.usage.cost,
        Some(cost),
        "the run record keeps the total"
    );
    assert_well_formed(&events);
}

#[tokio::test]
async fn a_session_budget_counts_the_sessions_earlier_runs() {
    // 12 prompt and 3 completion tokens at 1,000 and 10,000 per million: 0.042 a run.
    let ws = keel_test_support::WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant, limits: { maxSessionCost: 0.1 } }")
        .priced_scripted_model("m", (12, 3), "{ inputPerMTok: 1000, outputPerMTok: 10000 }")
        .agent("assistant", "{ model: m }")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let session = keel::SessionId::parse("budgeted").unwrap();
    let turn = |input: &str| keel::RequestOptions {
        input: input.into(),
        session_id: Some(session.clone()),
        ..Default::default()
    };
    let mut finishes = Vec::new();
    for n in 0..4 {
        let mut handle = runtime.request(turn(&format!("turn {n}"))).await.unwrap();
        while handle.next_event().await.is_some() {}
        finishes.push(handle.wait().await.unwrap());
    }
    // The third starts under the budget (0.084) and ends over it; the fourth cannot start a
    // round.
    for response in &finishes[..3] {
        assert_eq!(
            response.status,
            RunStatus::Completed,
            "{:?}",
            response.error
        );
    }
    let last = &finishes[3];
    assert_eq!(last.finish_reason, FinishReason::BudgetExceeded);
    assert_eq!(
        last.error.as_ref().unwrap().message,
        "the session's runs spent 0.126 USD, its budget is 0.1 USD"
    );
    assert_eq!(last.steps, 0);
    // Another session is not held back.
    let mut other = runtime
        .request(keel::RequestOptions {
            input: "hi".into(),
            session_id: Some(keel::SessionId::parse("fresh").unwrap()),
            ..Default::default()
        })
        .await
        .unwrap();
    while other.next_event().await.is_some() {}
    assert_eq!(other.wait().await.unwrap().status, RunStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_asks_a_human_who_may_give_as_much_again() {
    // 0.02 a round (10 prompt and 1 completion token at 1,000 and 10,000 per million).
    let mock = MockLlm::start().await;
    mock.respond_with(|_| {
        MockResponse::tool_calls([MockToolCall::new("c", "list_dir", [r#"{"path":"."}"#])])
    });
    let ws = keel_test_support::WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant, limits: { maxCost: 0.05, onBudget: ask } }")
        .model(
            "mock",
            &format!(
                "{{ provider: openai, baseUrl: \"{}\", model: m, pricing: {{ inputPerMTok: 1000, outputPerMTok: 10000 }} }}",
                mock.base_url()
            ),
        )
        .agent("assistant", "{ model: mock, tools: [list_dir] }")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let deciding = runtime.clone();
    let human = tokio::spawn(async move {
        let mut asked = Vec::new();
        for approve in [true, false] {
            let pending = common::wait_for_pending(&deciding).await;
            asked.push((pending.tool.clone(), pending.ask_reason.clone()));
            deciding
                .approvals()
                .decide(
                    &pending.approval_id,
                    approve,
                    keel::ApprovalScope::Once,
                    "finance",
                    None,
                )
                .await
                .unwrap();
        }
        asked
    });
    let (response, _) = common::run(&runtime, "Loop forever").await;
    let asked = human.await.unwrap();

    assert_eq!(response.finish_reason, FinishReason::BudgetExceeded);
    assert_eq!(
        response.error.as_ref().unwrap().message,
        "the run spent 0.1 USD, its budget is 0.1 USD"
    );
    // Three rounds to 0.06, approved; two more to 0.10, denied.
    assert_eq!((response.steps, mock.request_count()), (5, 5));
    assert_eq!(asked[0].0, "keel.budget");
    assert_eq!(
        asked[0].1.as_deref(),
        Some("the run spent 0.06 USD, its budget is 0.05 USD; go on with as much again?")
    );
    assert_eq!(
        asked[1].1.as_deref(),
        Some("the run spent 0.1 USD, its budget is 0.1 USD; go on with as much again?")
    );
    assert_well_formed(&common::stored(&runtime, &response).await);
}
