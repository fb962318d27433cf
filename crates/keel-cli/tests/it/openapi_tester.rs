//! An independent OpenAPI tester against a live `keel serve`: schemathesis (from PyPI,
//! installed on first use into `target/test-clients/schemathesis`) reads
//! `/api/openapi.json`, generates valid and invalid requests for every operation and checks
//! that the server accepts exactly what the document allows, answers with the statuses it
//! declares and enforces the security it declares — once without API keys (the document
//! then declares none) and once with keys (passing the operator's).
//!
//! Nothing is excluded: the POSTs that start runs run the workspace's scripted model, which
//! answers at once, and the live event stream is only chosen with an `Accept` header the
//! document does not list. The seed is fixed so a run is reproducible.

use std::process::Command;

use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::json;

use crate::common::keel_in;
use keel_test_support::test_clients::schemathesis;

/// Test cases per operation and check: enough to try every parameter's edges, few enough
/// for a loaded 2-core machine.
const EXAMPLES: &str = "20";

/// A workspace on a scripted model whose runtime is `runtime`.
fn workspace(runtime: &str) -> TempWorkspace {
    WorkspaceBuilder::new()
        .runtime(runtime)
        .scripted_model(
            "m",
            &json!({"conversations": [{"steps": [{"text": "Hello there"}]}]}),
        )
        .agent("assistant", "{ model: m, tools: [read_file] }")
        .build()
}

/// Runs schemathesis against `addr` with `headers`; panics with its report unless it found
/// nothing.
fn run_tester(addr: &str, headers: &[&str], scratch: &TempWorkspace) {
    let mut command = Command::new(schemathesis());
    command
        .args(["run", &format!("http://{addr}/api/openapi.json")])
        .args(["--checks", "all", "--max-examples", EXAMPLES, "--seed", "1"])
        // Hypothesis keeps its example database in the working directory.
        .current_dir(scratch.path())
        .env("NO_COLOR", "1");
    for header in headers {
        command.args(["-H", header]);
    }
    let output = command.output().unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(report.contains("generated"), "{report}");
}

#[test]
fn an_independent_openapi_tester_finds_the_document_exact_with_and_without_keys() {
    let open = workspace("{ defaultAgent: assistant }");
    let serving = keel_in(&open).serve();
    run_tester(serving.addr(), &[], &open);
    drop(serving);

    let keyed = workspace(
        "{ defaultAgent: assistant, server: { apiKeys: [ \
         { env: TESTER_OPERATOR_KEY, role: operator }, { env: TESTER_CLIENT_KEY, role: client } ] } }",
    );
    let serving = keel_in(&keyed)
        .env("TESTER_OPERATOR_KEY", "operator-secret")
        .env("TESTER_CLIENT_KEY", "client-secret")
        .serve();
    run_tester(
        serving.addr(),
        &["Authorization: Bearer operator-secret"],
        &keyed,
    );
}
