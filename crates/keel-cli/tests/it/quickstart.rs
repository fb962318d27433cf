//! The quickstart workspace runs offline, calls tools, and its run can be inspected.

use serde_json::Value;

use keel_test_support::TempWorkspace;

use crate::common::{keel_at, keel_in, quickstart};

#[test]
fn quickstart_runs_offline_and_its_events_can_be_listed() {
    let ws = quickstart();
    let keel = keel_in(&ws);

    let output = keel.run(["run", "What is in this workspace?"]);
    assert_eq!(output.code, Some(0), "stderr: {}", output.stderr);
    let answer = output.stdout;
    assert!(answer.contains("This workspace holds"), "{answer}");
    assert!(
        answer.contains("Ship the quickstart"),
        "the answer quotes the file it read: {answer}"
    );
    let narration = output.stderr;
    assert!(narration.contains("Running list_dir"), "{narration}");
    assert!(narration.contains("Running read_file"), "{narration}");

    let listed = keel.run(["runs", "list", "--json"]);
    assert_eq!(listed.code, Some(0));
    let runs = listed.json_lines();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "completed");
    let id = runs[0]["requestId"].as_str().unwrap();

    let events = keel.run(["runs", "events", id, "--json"]);
    assert_eq!(events.code, Some(0));
    let events = events.json_lines();
    assert_eq!(events.first().unwrap()["type"], "runtime.request.started");
    assert_eq!(events.last().unwrap()["type"], "runtime.request.completed");
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], i as u64 + 1);
    }
    let tools: Vec<&str> = events
        .iter()
        .filter(|e| e["event"]["phase"] == "agent.tool.result")
        .map(|e| e["event"]["toolId"].as_str().unwrap())
        .collect();
    assert_eq!(tools, vec!["list_dir", "read_file"]);

    let table = keel.run(["runs", "events", id]);
    let table = table.stdout;
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .contains("runtime.request.started")
    );
    assert!(
        table
            .lines()
            .last()
            .unwrap()
            .contains("runtime.request.completed")
    );

    let shown = keel.run(["runs", "show", id]);
    assert!(shown.stdout.contains("status:    completed"));
}

#[test]
fn quickstart_command_tool_runs_through_python() {
    let ws = quickstart();
    let keel = keel_in(&ws);
    let output = keel.run(["run", "Count the words in my notes"]);
    assert_eq!(output.code, Some(0), "stderr: {}", output.stderr);
    assert!(output.stdout.contains("\"words\":"), "{}", output.stdout);
}

#[test]
fn json_mode_prints_one_event_per_line() {
    let ws = quickstart();
    let keel = keel_in(&ws);
    let output = keel.run(["run", "--json", "What is here?"]);
    assert_eq!(output.code, Some(0), "stderr: {}", output.stderr);
    let events = output.json_lines();
    assert_eq!(events.first().unwrap()["type"], "runtime.request.started");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "runtime.progress.narration")
    );
    let facts: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] != "runtime.progress.narration")
        .collect();
    assert_eq!(facts.last().unwrap()["type"], "runtime.request.completed");
    // Narration is derived: it names the event it describes.
    let narration = events
        .iter()
        .find(|e| e["type"] == "runtime.progress.narration")
        .unwrap();
    let source = narration["sourceEventIds"][0].as_str().unwrap();
    assert!(facts.iter().any(|e| e["id"] == source));
}

#[test]
fn init_creates_a_valid_workspace_and_refuses_to_overwrite() {
    let dir = TempWorkspace::new();
    let keel = keel_in(&dir);
    let created = keel.run(["init", "agents"]);
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    let valid = keel_at(&dir.join("agents")).run(["validate"]);
    assert_eq!(valid.code, Some(0), "{}", valid.stderr);
    assert!(
        valid
            .stdout
            .starts_with("ok: 2 agents, 1 model, 1 tool, 1 workflow"),
        "{}",
        valid.stdout
    );
    // The example workflow runs offline: a map over a command tool, a typed verdict, a branch.
    let inside = keel_at(&dir.join("agents"));
    let reviewed = inside.run([
        "workflows",
        "run",
        "notes-review",
        "--input",
        r#"{"files": ["notes/ideas.md"]}"#,
    ]);
    assert_eq!(reviewed.code, Some(0), "{}", reviewed.stderr);
    let output: Value = serde_json::from_str(reviewed.stdout.trim()).unwrap();
    assert_eq!(output["review"]["verdict"], "ready", "{output}");
    let runs = inside.json_lines(["runs", "list", "--json"]);
    let workflow_run = runs
        .iter()
        .find(|r| r["agent"] == "workflow/notes-review")
        .unwrap();
    let id = workflow_run["requestId"].as_str().unwrap();
    let events = inside.json_lines(["runs", "events", id, "--json"]);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "runtime.workflow.node.skipped" && e["node"] == "revise")
    );
    let again = keel.run(["init", "agents"]);
    // The example skill is there, valid, and works once the agent is given it.
    let skills = inside.run(["skills", "validate"]);
    assert_eq!(skills.code, Some(0), "{}", skills.stderr);
    assert!(
        skills.stdout.starts_with("ok: 1 skill(s)"),
        "{}",
        skills.stdout
    );
    let agents = dir.join("agents/config/agents.yaml");
    let config = std::fs::read_to_string(&agents).unwrap();
    std::fs::write(
        &agents,
        config.replace("# skills: [release-notes]", "skills: [release-notes]"),
    )
    .unwrap();
    let ran = inside.run(["run", "What is in this workspace? Use $release-notes."]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let injected: Vec<Value> = inside
        .newest_run_events()
        .into_iter()
        .filter(|e| e["type"] == "runtime.skill.injected")
        .collect();
    assert_eq!(injected.len(), 1, "{injected:?}");
    assert_eq!(injected[0]["skill"], "release-notes");
    assert_eq!(injected[0]["reason"], "mention");
    assert_eq!(again.code, Some(2));
    assert!(again.stderr.contains("refusing to overwrite"));
}

#[test]
fn usage_errors_exit_2() {
    let dir = TempWorkspace::new();
    let keel = keel_in(&dir);
    assert_eq!(keel.run(["run"]).code, Some(2));
    assert_eq!(keel.run(["frobnicate"]).code, Some(2));
    let missing = keel.run(["run", "hi"]);
    assert_eq!(missing.code, Some(2));
    assert!(
        missing.stderr.contains("not a Keel workspace"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_failed_run_exits_1() {
    let ws = quickstart();
    let keel = keel_in(&ws);
    // The contract requires list_dir; the script answers at once for this input.
    std::fs::write(
        ws.path().join("resources/scripts/offline.yaml"),
        "conversations:\n  - steps:\n      - text: \"I answer without looking.\"\n",
    )
    .unwrap();
    let output = keel.run(["run", "Hi"]);
    assert_eq!(output.code, Some(1), "{}", output.stderr);
    assert!(
        output.stderr.contains("execution contract violated"),
        "{}",
        output.stderr
    );
}

#[test]
fn events_globs_choose_what_goes_to_stderr() {
    let ws = quickstart();
    let keel = keel_in(&ws);
    let output = keel.run([
        "run",
        "--events",
        "runtime.tool.*",
        "--events",
        "runtime.request.completed",
        "What is here?",
    ]);
    assert_eq!(output.code, Some(0), "stderr: {}", output.stderr);
    let lines: Vec<Value> = output
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = lines.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        vec![
            "runtime.tool.guard",
            "runtime.tool.guard",
            "runtime.request.completed"
        ]
    );
    // The answer still streams to stdout.
    assert!(output.stdout.contains("This workspace holds"));
}

#[test]
fn an_unknown_agent_is_a_usage_error() {
    let ws = quickstart();
    let keel = keel_in(&ws);
    let output = keel.run(["run", "--agent", "nobody", "Hi"]);
    assert_eq!(output.code, Some(2));
    assert!(
        output
            .stderr
            .contains("unknown agent `nobody` (agents: assistant, reviewer)"),
        "{}",
        output.stderr
    );
    let ok = keel.run(["run", "--agent", "assistant", "Hi"]);
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
}

#[test]
fn serve_answers_health_and_chat_completions_and_refuses_public_addresses() {
    use std::io::{Read, Write};

    let ws = quickstart();
    let keel = keel_in(&ws);

    let public = keel.run(["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(public.code, Some(2));
    assert!(public.stderr.contains("loopback"), "{}", public.stderr);

    let server = keel.serve();
    let addr = server.addr();
    let request = |text: String| {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.write_all(text.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let health = request(format!(
        "GET /api/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    ));
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains(r#""status":"ok""#), "{health}");
    let body = r#"{"model":"assistant","messages":[{"role":"user","content":"What is in this workspace?"}]}"#;
    let completion = request(format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    assert!(completion.starts_with("HTTP/1.1 200"), "{completion}");
    assert!(completion.contains("chat.completion"), "{completion}");
    assert!(completion.contains("This workspace holds"), "{completion}");
}

/// `keel serve` reports the allocator's own counts next to the rest of its metrics: a live
/// heap that is more than nothing, and the pages that hold it.
#[test]
fn serve_reports_the_allocators_memory_in_metrics() {
    use std::io::{Read, Write};

    let ws = quickstart();
    let server = keel_in(&ws).serve();
    let addr = server.addr();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let gauge = |name: &str| -> u64 {
        let value = answer
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {name} in:\n{answer}"));
        value
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name} is not a count ({e}): {value}"))
    };
    let allocated = gauge("keel_memory_allocated_bytes");
    let active = gauge("keel_memory_allocator_active_bytes");
    assert!(
        allocated > 0,
        "an empty heap in a running server:\n{answer}"
    );
    // Whole pages, which hold every live allocation.
    assert!(
        allocated <= active,
        "{allocated} allocated, {active} active"
    );
    assert_eq!(active % 4096, 0, "not whole pages: {active}");
    assert!(
        answer.contains("# HELP keel_memory_allocated_bytes"),
        "the gauge is described:\n{answer}"
    );
}
