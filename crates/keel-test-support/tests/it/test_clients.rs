//! The real counterparts install from the package registries and run. `.ci/run` runs this test
//! on its own before the suite, so the suite's tests find them in place.

use std::io::Write;
use std::process::Command;

use keel_test_support::test_clients::{
    install_all, junitparser_python, langchain_openai, mcp_python, mcp_server_bin, openai_agents,
    openai_node, openai_python, playwright, schemathesis,
};

/// Runs `command` and asserts it succeeded, printing what it said when it did not.
fn runs(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn every_counterpart_installs_and_runs() {
    if let Err(reason) = install_all() {
        // Chromium needs apt-get and root; the browser test skips with the same reason.
        let _ = writeln!(std::io::stderr(), "{reason}");
    }
    runs(Command::new(openai_python()).args(["-c", "import openai"]));
    runs(Command::new(langchain_openai()).args(["-c", "from langchain_openai import ChatOpenAI"]));
    runs(Command::new(openai_agents()).args(["-c", "import agents"]));
    runs(Command::new(mcp_python()).args(["-c", "import mcp.client.session"]));
    runs(Command::new(schemathesis()).arg("--version"));
    runs(Command::new(junitparser_python()).args(["-c", "import junitparser"]));
    for (prefix, package) in [(openai_node(), "openai"), (playwright(), "playwright-core")] {
        runs(
            Command::new("node")
                .arg("-e")
                .arg(format!("require({package:?})"))
                .current_dir(prefix),
        );
    }
    let everything = mcp_server_bin("mcp-server-everything");
    assert!(everything.exists(), "{}", everything.display());
}
