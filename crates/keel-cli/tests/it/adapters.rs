//! Process-backed agents from the command line (docs/adapters.md): an OpenAI Agents SDK
//! agent's call waits for a person's approval, decided from another `keel` process, and the
//! run reads back like any other (`keel runs show`, `keel runs events`).

use std::process::Stdio;

use keel_test_support::{MockLlm, MockResponse, MockToolCall, WorkspaceBuilder, test_clients};

use crate::common::keel_in;
use crate::governance::wait_for_pending;

#[tokio::test(flavor = "multi_thread")]
async fn a_process_agents_call_waits_for_an_approval_decided_from_another_process() {
    let python = test_clients::openai_agents();
    let mock = MockLlm::start().await;
    mock.push(MockResponse::tool_calls([MockToolCall::new(
        "call_deploy",
        "deploy",
        [r#"{"service": "web"}"#],
    )]));
    mock.push(MockResponse::text(["Deployed web."]));
    let program = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/adapters/openai-agents/agent.py"),
    )
    .unwrap();
    // `deploy` has side effects and no policy rule: each call asks a person.
    let ws = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: bot }")
        .openai_model_at("mock", &mock.base_url())
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } }, required: [service] }
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo deployed"] }
            "#,
        )
        .agent(
            "bot",
            &format!(
                "{{ model: mock, instructions: Deploy what you are asked to., tools: [deploy], \
                 backend: {{ kind: process, command: [\"{}\", agent.py] }} }}",
                python.display()
            ),
        )
        .file("agent.py", program)
        .build();
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
