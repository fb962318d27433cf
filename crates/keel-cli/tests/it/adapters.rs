//! Process-backed agents from the command line (docs/adapters.md): an OpenAI Agents SDK
//! agent's call waits for a person's approval, decided from another `keel` process, and the
//! run reads back like any other (`keel runs show`, `keel runs events`); a LangGraph run
//! killed with Keel resumes from its log without repeating a side effect.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keel_test_support::{
    MockLlm, MockResponse, MockToolCall, TempWorkspace, WorkspaceBuilder, test_clients,
};

use crate::common::keel_in;
use crate::governance::{signal, wait_for_pending};

/// Agent `bot` on model `mock`, the example `framework`'s `program` run by `runtime`, with
/// tool `deploy` (it appends `web` to deployed.txt) and `policy` (a Policy spec; none when
/// empty).
fn deploying_agent(
    mock: &MockLlm,
    runtime: &std::path::Path,
    framework: &str,
    program: &str,
    policy: &str,
) -> TempWorkspace {
    let name = program;
    let program = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/adapters")
            .join(framework)
            .join(name),
    )
    .unwrap();
    let mut builder = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: bot }")
        .openai_model_at("mock", &mock.base_url())
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } }, required: [service] }
            impl: { kind: command, command: ["sh", "-c", "cat > /dev/null; echo web >> deployed.txt; echo deployed"] }
            "#,
        )
        .agent(
            "bot",
            &format!(
                "{{ model: mock, instructions: Deploy what you are asked to., tools: [deploy], \
                 backend: {{ kind: process, command: [\"{}\", {name}] }} }}",
                runtime.display()
            ),
        )
        .file(name, program);
    if !policy.is_empty() {
        builder = builder.policy("p", policy);
    }
    builder.build()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_agents_sdk_call_waits_for_an_approval_decided_from_another_process() {
    let python = test_clients::openai_agents();
    approved_from_another_process(&python, "openai-agents", "agent.py", None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_langgraph_call_waits_for_an_approval_decided_from_another_process() {
    let python = test_clients::langgraph();
    approved_from_another_process(&python, "langgraph", "agent.py", None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deepagents_call_waits_for_an_approval_decided_from_another_process() {
    let python = test_clients::langgraph();
    approved_from_another_process(&python, "deepagents", "agent.py", None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_agents_js_call_waits_for_an_approval_decided_from_another_process() {
    let packages = test_clients::openai_agents_js();
    approved_from_another_process(
        std::path::Path::new("node"),
        "openai-agents-js",
        "agent.mjs",
        Some(&packages.join("node_modules")),
    )
    .await;
}

/// The example agent of `framework` (`program`, run by `runtime`) calls `deploy`, which asks
/// a person; another `keel` process approves; the run ends with the answer.
async fn approved_from_another_process(
    runtime: &std::path::Path,
    framework: &str,
    program: &str,
    node_modules: Option<&std::path::Path>,
) {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_deploy",
        "deploy",
        [r#"{"service": "web"}"#],
    )]));
    mock.push(MockResponse::text(["Deployed web."]));
    // `deploy` has side effects and no policy rule: each call asks a person.
    let ws = deploying_agent(&mock, runtime, framework, program, "");
    if let Some(modules) = node_modules {
        std::os::unix::fs::symlink(modules, ws.path().join("node_modules")).unwrap();
    }
    let keel = keel_in(&ws);
    let run = keel
        .command(["run", "deploy web"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let asked = wait_for_pending(&keel).await;
    assert_eq!(asked[0]["tool"], "deploy");
    assert!(
        !ws.exists("deployed.txt"),
        "nothing runs before the decision"
    );
    let id = asked[0]["approvalId"].as_str().unwrap();
    let approved = keel.run(["approvals", "approve", id, "--reason", "go"]);
    assert!(approved.success(), "{}", approved.stderr);

    let output = tokio::task::block_in_place(|| run.wait_with_output().unwrap());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("Deployed web."), "{stdout}");
    assert!(ws.exists("deployed.txt"));

    let record = keel.newest_run();
    assert_eq!(record["status"], "completed");
    assert_eq!(record["agent"], "bot");
    let run_id = keel.newest_run_id();
    let shown = keel.run(["runs", "show", &run_id, "--json"]).json();
    assert_eq!(shown["output"], "Deployed web.");
    let types: Vec<String> = keel
        .newest_run_events()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    for wanted in [
        "runtime.model.completed",
        "runtime.tool.guard",
        "runtime.approval.requested",
        "runtime.approval.resolved",
        "runtime.request.completed",
    ] {
        assert!(types.iter().any(|t| t == wanted), "{wanted} in {types:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_langgraph_run_killed_after_a_side_effect_resumes_without_repeating_it() {
    let python = test_clients::langgraph();
    let mock = MockLlm::start().await;
    let slow = Arc::new(AtomicBool::new(true));
    let slow_flag = slow.clone();
    // Round 1 asks for `deploy`; round 2 is slow until the test has killed Keel.
    mock.respond_with(move |request| match request.last_role() {
        Some("user") => MockResponse::tool_calls([MockToolCall::new(
            "call_deploy",
            "deploy",
            [r#"{"service": "web"}"#],
        )]),
        _ if slow_flag.load(Ordering::SeqCst) => {
            MockResponse::text(["Deployed ", "web."]).chunk_delay(Duration::from_secs(30))
        }
        _ => MockResponse::text(["Deployed web after resume."]),
    });
    let ws = deploying_agent(
        &mock,
        &python,
        "langgraph",
        "agent.py",
        "{ rules: [{ tool: deploy, decision: allow }] }",
    );
    let keel = keel_in(&ws);
    let mut run = keel
        .command(["run", "deploy web"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill Keel once the call's result is stored and round 2 is under way.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let stored = keel
            .json_lines(["runs", "list", "--json"])
            .first()
            .is_some_and(|r| {
                let id = r["requestId"].as_str().unwrap_or_default().to_owned();
                keel.json_lines(["runs", "events", &id, "--json"])
                    .iter()
                    .any(|e| e["event"]["phase"] == "agent.tool.result")
            });
        if stored && mock.request_count() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the run never got to round 2");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    signal(&run, "-KILL");
    let _ = tokio::task::block_in_place(|| run.wait());
    slow.store(false, Ordering::SeqCst);

    let id = keel.newest_run_id();
    assert_eq!(keel.newest_run()["status"], "interrupted");
    let resumed = keel.run(["runs", "resume", &id]);
    assert_eq!(resumed.code, Some(0), "{}", resumed.stderr);
    assert!(
        resumed.stdout.contains("Deployed web after resume."),
        "{}",
        resumed.stdout
    );
    assert_eq!(keel.newest_run()["status"], "completed");
    // The side effect happened once; round 1 reached the model once (answered from the log
    // after the resume).
    let deployed = std::fs::read_to_string(ws.path().join("deployed.txt")).unwrap();
    assert_eq!(deployed, "web\n", "deployed exactly once");
    let first_rounds = mock
        .requests()
        .iter()
        .filter(|r| r.last_role() == Some("user"))
        .count();
    assert_eq!(first_rounds, 1, "round 1 was not asked again");
}

#[test]
fn init_templates_write_framework_agents_that_run_offline() {
    let venvs = [
        ("openai-agents", test_clients::openai_agents()),
        ("langgraph", test_clients::langgraph()),
        ("deepagents", test_clients::langgraph()),
    ];
    let dir = keel_test_support::TempWorkspace::new();
    for (template, python) in venvs {
        let created = keel_in(&dir).run(["init", "--template", template, template]);
        assert_eq!(created.code, Some(0), "{}", created.stderr);
        assert!(
            created.stdout.contains("pip install -r"),
            "{}",
            created.stdout
        );
        let inside = crate::common::keel_at(&dir.join(template));
        let valid = inside.run(["validate"]);
        assert_eq!(valid.code, Some(0), "{template}: {}", valid.stderr);
        // `python3` of the template's command is the venv's, first on PATH.
        let bin = python.parent().unwrap().to_owned();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let output = inside
            .command(["run", "What is here?"])
            .env("PATH", path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{template}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains("This workspace holds:"),
            "{template}: {stdout}"
        );
        assert!(stdout.contains("agent.py"), "{template}: {stdout}");
    }
}
