//! Process-backed agents (`backend: {kind: process}`, docs/adapters.md): a program written
//! with another framework runs as a Keel agent, its model rounds and tool calls made by the
//! run — recorded, guarded, governed — and a misbehaving program fails its run clearly and
//! leaves no process behind.

use keel::{AdapterEvent, ErrorCode};
use keel::{EventPayload, GuardDecision, PolicyDecision, RunStatus, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder};

use crate::common;

/// The example program of `framework` (`examples/adapters/<framework>/<program>`).
fn example(framework: &str, program: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/adapters")
        .join(framework)
        .join(program);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Model `mock` at `mock`, tools `add` (a command) and `deploy` (denied by policy), and agent
/// `bot` whose backend is `command` (a YAML flow list).
fn workspace(mock: &MockLlm, command: &str, name: &str, program: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime("{ defaultAgent: bot }")
        .openai_model_at("mock", &mock.base_url())
        .tool(
            "add",
            r#"
            description: Adds two integers.
            schema: { type: object, properties: { a: { type: integer }, b: { type: integer } }, required: [a, b] }
            impl: { kind: command, command: ["python3", "-c", "import json,sys; a=json.load(sys.stdin); print(a['a']+a['b'])"] }
            "#,
        )
        .tool(
            "deploy",
            r#"
            description: Deploys the service.
            schema: { type: object, properties: {} }
            impl: { kind: command, command: ["sh", "-c", "cat > /dev/null; echo deployed >> deployed.txt"] }
            "#,
        )
        .policy(
            "p",
            "{ rules: [{ tool: add, decision: allow }, { tool: deploy, decision: deny }] }",
        )
        .agent(
            "bot",
            &format!(
                "{{ model: mock, instructions: Add numbers., tools: [add, deploy], \
                 backend: {{ kind: process, command: {command}, timeout: 120s }} }}"
            ),
        )
        .file(name, program)
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_agents_sdk_agent_runs_with_its_rounds_and_calls_made_by_the_run() {
    let python = keel_test_support::test_clients::openai_agents();
    a_framework_agent_runs_through_keel(&python, "openai-agents").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_langgraph_agent_runs_with_its_rounds_and_calls_made_by_the_run() {
    let python = keel_test_support::test_clients::langgraph();
    a_framework_agent_runs_through_keel(&python, "langgraph").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deepagents_agent_runs_with_its_rounds_and_calls_made_by_the_run() {
    let python = keel_test_support::test_clients::langgraph();
    a_framework_agent_runs_through_keel(&python, "deepagents").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_agents_js_agent_runs_with_its_rounds_and_calls_made_by_the_run() {
    let packages = keel_test_support::test_clients::openai_agents_js();
    a_framework_agent_runs_through_keel_with(
        std::path::Path::new("node"),
        "openai-agents-js",
        "agent.mjs",
        Some(&packages.join("node_modules")),
    )
    .await;
}

/// [`a_framework_agent_runs_through_keel_with`] a Python example.
async fn a_framework_agent_runs_through_keel(python: &std::path::Path, framework: &str) {
    a_framework_agent_runs_through_keel_with(python, framework, "agent.py", None).await;
}

/// The example agent of `framework` (its `program`), run by `runtime` (with `node_modules`
/// linked into the workspace when given): the model asks for `add` with a string where the
/// schema wants an integer (repaired by the gateway) and for `deploy` (denied by policy,
/// reported to the framework as a tool error), then answers.
async fn a_framework_agent_runs_through_keel_with(
    runtime: &std::path::Path,
    framework: &str,
    program: &str,
    node_modules: Option<&std::path::Path>,
) {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([
        MockToolCall::new("call_add", "add", [r#"{"a": "2", "b": 3}"#]),
        MockToolCall::new("call_deploy", "deploy", ["{}"]),
    ]));
    mock.push(MockResponse::text(["The sum is 5."]));
    let ws = workspace(
        &mock,
        &format!("[\"{}\", {program}]", runtime.display()),
        program,
        &example(framework, program),
    );
    if let Some(modules) = node_modules {
        std::os::unix::fs::symlink(modules, ws.path().join("node_modules")).unwrap();
    }
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "Add 2 and 3.").await;
    let events = common::stored(&runtime, &response).await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}\n{events:#?}",
        response.error
    );
    assert_eq!(response.output.as_deref(), Some("The sum is 5."));

    // Two model rounds, recorded like a native run's, the program's conversation sent.
    let rounds: Vec<_> = events
        .iter()
        .filter(|e| matches!(e.payload, EventPayload::ModelCompleted { .. }))
        .collect();
    assert_eq!(rounds.len(), 2);
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "each round reached the model once");
    let second = requests[1].messages();
    let tool_results: Vec<&str> = second
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(tool_results.len(), 2, "{second:#?}");
    assert!(tool_results[0].contains('5'), "{tool_results:?}");
    assert!(tool_results[1].contains("policy"), "{tool_results:?}");

    // `add` repaired by the gateway and run; `deploy` refused by policy, never run.
    let guard = |tool: &str| {
        events.iter().find_map(|e| match &e.payload {
            EventPayload::ToolGuard {
                tool: t, decision, ..
            } if t == tool => Some(*decision),
            _ => None,
        })
    };
    assert_eq!(guard("add"), Some(GuardDecision::Repaired));
    assert!(events.iter().any(|e| matches!(
        &e.payload,
        EventPayload::PolicyDecided { tool, decision: PolicyDecision::Deny, .. } if tool == "deploy"
    )));
    let results: Vec<(String, String, bool)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolResult {
                        call_id, tool, ok, ..
                    },
            } => Some((call_id.clone(), tool.clone(), *ok)),
            _ => None,
        })
        .collect();
    // The program's call takes the id of the model's call it makes.
    assert_eq!(results, [("call_add".into(), "add".into(), true)]);
    assert!(!ws.path().join("deployed.txt").exists());
    // Its progress line is in the log.
    assert!(events.iter().any(|e| matches!(
        &e.payload,
        EventPayload::Adapter { event: AdapterEvent::Progress { kind, .. } } if kind == "progress"
    )));
}

/// Agent `bot` whose program is the shell `script` (`agent.sh`), with `backend` fields added
/// after its `command` (e.g. `, timeout: 2s`).
fn shell_agent(mock: &MockLlm, script: &str, backend: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime("{ defaultAgent: bot }")
        .openai_model_at("mock", &mock.base_url())
        .agent(
            "bot",
            &format!(
                "{{ model: mock, backend: {{ kind: process, command: [sh, agent.sh]{backend} }} }}"
            ),
        )
        .file("agent.sh", script)
        .build()
}

/// A program that misbehaves in `script` (a shell script) fails its run with a reason that
/// contains `reason`, and leaves no process behind.
async fn fails_with(script: &str, timeout: &str, reason: &str) {
    let mock = MockLlm::start().await;
    let ws = shell_agent(&mock, script, &format!(", timeout: {timeout}"));
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "hello").await;
    assert_eq!(response.status, RunStatus::Failed);
    let error = response.error.expect("a reason");
    assert_eq!(error.code, ErrorCode::ProgramFailed);
    assert!(error.message.contains(reason), "{}", error.message);
    // Every process the program started is gone: each wrote its pid to pids.txt.
    let pids = std::fs::read_to_string(ws.path().join("pids.txt")).unwrap_or_default();
    all_gone(&pids).await;
}

/// Waits (up to 30 s) until every process of `pids` (whitespace-separated) has exited.
async fn all_gone(pids: &str) {
    for pid in pids.split_whitespace() {
        let gone = || !std::path::Path::new(&format!("/proc/{pid}")).exists() || zombie(pid);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !gone() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(gone(), "process {pid} of the program outlived its run");
    }
}

fn zombie(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_exits_1_fails_its_run_with_the_tail_of_its_stderr() {
    fails_with(
        "echo $$ >> pids.txt; echo 'Traceback: boom' >&2; exit 1",
        "60s",
        "exited with exit status: 1; its stderr ends: Traceback: boom",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_writes_garbage_and_no_answer_fails_its_run() {
    fails_with(
        "echo $$ >> pids.txt; echo 'not json at all'; printf '\\000\\377 binary'; echo '{\"type\": \"nonsense\"}'",
        "60s",
        "exited without a final answer",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_never_answers_and_ignores_sigterm_is_stopped_at_its_timeout() {
    fails_with(
        "echo $$ >> pids.txt; trap '' TERM; (trap '' TERM; echo $$ >> pids.txt; exec sleep 600) & sleep 600",
        "2s",
        "did not end within its timeout",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_floods_stderr_keeps_a_bounded_log() {
    let mock = MockLlm::start().await;
    let ws = shell_agent(
        &mock,
        "i=0; while [ $i -lt 5000 ]; do echo \"line $i\" >&2; i=$((i+1)); done; \
         echo '{\"type\": \"final\", \"output\": \"done\"}'",
        "",
    );
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "hello").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    assert_eq!(response.output.as_deref(), Some("done"));
    let events = common::stored(&runtime, &response).await;
    let logs: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Adapter {
                event: AdapterEvent::Log { line, .. },
            } => Some(line.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(logs.len(), 201, "200 lines kept and a count of the rest");
    assert_eq!(logs[0], "line 0");
    assert_eq!(logs[200], "4800 more line(s) not kept");
}

/// A program whose first round sends what `marker.txt` holds, then asks a second round.
const TWO_ROUNDS: &str = r#"
import json, os, sys, urllib.request

run = json.load(sys.stdin)
def ask(content):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(request))["choices"][0]["message"]["content"]

first = ask(open("marker.txt").read())
second = ask("and then?")
print(json.dumps({"type": "final", "output": first + " " + second}))
"#;

/// Runs `agent` (the [`TWO_ROUNDS`] program) until its second round is under way, stops the
/// runtime, changes what round 1 sends, and resumes the run in a new runtime.
async fn resumed_after_a_change(on_divergence: &str) -> keel::RunResponse {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mock = MockLlm::start().await;
    let slow = std::sync::Arc::new(AtomicBool::new(true));
    let slow_flag = slow.clone();
    mock.respond_with(move |request| match request.last_content_of("user") {
        Some("and then?") if slow_flag.load(Ordering::SeqCst) => {
            MockResponse::text(["late"]).chunk_delay(std::time::Duration::from_secs(60))
        }
        Some("and then?") => MockResponse::text(["second"]),
        _ => MockResponse::text(["first"]),
    });
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: bot }")
        .openai_model_at("mock", &mock.base_url())
        .agent(
            "bot",
            &format!(
                "{{ model: mock, backend: {{ kind: process, command: [python3, agent.py], onDivergence: {on_divergence} }} }}"
            ),
        )
        .file("agent.py", TWO_ROUNDS)
        .file("marker.txt", "as first written")
        .build();
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let handle = runtime
        .request(keel::RequestOptions {
            input: "go".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let id = handle.request_id().clone();
    while mock.request_count() < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    runtime
        .shutdown(std::time::Duration::from_millis(100))
        .await;
    let interrupted = handle.wait().await.unwrap();
    assert_eq!(interrupted.status, RunStatus::Interrupted);
    slow.store(false, Ordering::SeqCst);
    std::fs::write(ws.path().join("marker.txt"), "written again").unwrap();
    let again = Runtime::builder().workspace(ws.path()).build().unwrap();
    again.resume(&id).await.unwrap().wait().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_program_that_diverges_from_its_log_fails_saying_where() {
    let response = resumed_after_a_change("fail").await;
    assert_eq!(response.status, RunStatus::Failed);
    let error = response.error.unwrap();
    assert_eq!(error.code, ErrorCode::ProgramFailed);
    assert!(
        error.message.contains("diverged from its log")
            && error.message.contains("where the log holds model round 1"),
        "{}",
        error.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_program_that_diverges_goes_on_live_when_told_to() {
    let response = resumed_after_a_change("continue").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    assert_eq!(response.output.as_deref(), Some("first second"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_run_stops_its_program_even_one_that_ignores_sigterm() {
    let mock = MockLlm::start().await;
    let ws = shell_agent(
        &mock,
        "trap '' TERM; (trap '' TERM; echo $$ >> pids.txt; exec sleep 600) & echo $$ >> pids.txt; wait",
        "",
    );
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let handle = runtime
        .request(keel::RequestOptions {
            input: "hello".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let pids_file = ws.path().join("pids.txt");
    let started = std::time::Instant::now();
    while std::fs::read_to_string(&pids_file).map_or(0, |p| p.lines().count()) < 2 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the program never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    handle.cancel();
    let response = handle.wait().await.unwrap();
    assert_eq!(response.status, RunStatus::Cancelled);
    all_gone(&std::fs::read_to_string(&pids_file).unwrap()).await;
}

/// The official OpenAI Python client against a run's model endpoint, as programs call it:
/// a whole answer with sampling parameters, a stream with usage, and a parameter refused.
const OPENAI_CLIENT_PROGRAM: &str = r#"
import json, os, sys
import openai

run = json.load(sys.stdin)
client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY come from Keel
model = os.environ["KEEL_MODEL"]
messages = [{"role": "user", "content": run["input"]}]
whole = client.chat.completions.create(
    model=model, messages=messages, temperature=0.1, max_completion_tokens=50)
streamed, usage = "", None
for chunk in client.chat.completions.create(
        model=model, messages=messages, stream=True, stream_options={"include_usage": True}):
    if chunk.choices and chunk.choices[0].delta.content:
        streamed += chunk.choices[0].delta.content
    if chunk.usage:
        usage = chunk.usage.total_tokens
try:
    client.chat.completions.create(model=model, messages=messages, n=2)
    refused = None
except openai.BadRequestError as error:
    refused = error.message
report = {"whole": whole.choices[0].message.content, "streamed": streamed,
          "usage": usage, "refused": refused}
print(json.dumps({"type": "final", "output": json.dumps(report)}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_client_speaks_to_a_runs_model_endpoint() {
    let python = keel_test_support::test_clients::openai_agents();
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["first ", "answer"]));
    mock.push(MockResponse::text(["second ", "answer"]));
    let ws = workspace(
        &mock,
        &format!("[\"{}\", agent.py]", python.display()),
        "agent.py",
        OPENAI_CLIENT_PROGRAM,
    );
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let (response, _) = common::run(&runtime, "Say something.").await;
    assert_eq!(
        response.status,
        RunStatus::Completed,
        "{:?}",
        response.error
    );
    let report: serde_json::Value =
        serde_json::from_str(response.output.as_deref().unwrap()).unwrap();
    assert_eq!(report["whole"], "first answer");
    assert_eq!(report["streamed"], "second answer");
    assert!(report["usage"].as_u64().unwrap() > 0, "{report}");
    assert!(
        report["refused"].as_str().unwrap().contains("`n` above 1"),
        "{report}"
    );
    // The sampling parameters reached the model; the refused request never did.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["temperature"], 0.1);
    assert_eq!(requests[0].body["max_tokens"], 50);
}
