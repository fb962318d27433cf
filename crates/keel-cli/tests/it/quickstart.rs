//! The quickstart workspace runs offline, calls tools, and its run can be inspected.

use serde_json::Value;

use crate::common::{copy_tree, quickstart_dir, run, stderr, stdout};

#[test]
fn quickstart_runs_offline_and_its_events_can_be_listed() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let ws = dir.path().to_str().unwrap();

    let output = run(&["run", "-w", ws, "What is in this workspace?"]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let answer = stdout(&output);
    assert!(answer.contains("This workspace holds"), "{answer}");
    assert!(
        answer.contains("Ship the quickstart"),
        "the answer quotes the file it read: {answer}"
    );
    let narration = stderr(&output);
    assert!(narration.contains("Running list_dir"), "{narration}");
    assert!(narration.contains("Running read_file"), "{narration}");

    let listed = run(&["runs", "list", "-w", ws, "--json"]);
    assert_eq!(listed.status.code(), Some(0));
    let runs: Vec<Value> = stdout(&listed)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "completed");
    let id = runs[0]["requestId"].as_str().unwrap();

    let events = run(&["runs", "events", "-w", ws, id, "--json"]);
    assert_eq!(events.status.code(), Some(0));
    let events: Vec<Value> = stdout(&events)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.first().unwrap()["type"], "runtime.request.started");
    assert_eq!(events.last().unwrap()["type"], "runtime.request.completed");
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], i as u64 + 1);
    }
    let tools: Vec<&str> = events
        .iter()
        .filter(|e| e["event"]["phase"] == "agent.tool.result")
        .map(|e| e["event"]["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, vec!["list_dir", "read_file"]);

    let table = run(&["runs", "events", "-w", ws, id]);
    let table = stdout(&table);
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

    let shown = run(&["runs", "show", "-w", ws, id]);
    assert!(stdout(&shown).contains("status:    completed"));
}

#[test]
fn quickstart_command_tool_runs_through_python() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let output = run(&[
        "run",
        "-w",
        dir.path().to_str().unwrap(),
        "Count the words in my notes",
    ]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(
        stdout(&output).contains("\"words\":"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn json_mode_prints_one_event_per_line() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let output = run(&[
        "run",
        "-w",
        dir.path().to_str().unwrap(),
        "--json",
        "What is here?",
    ]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
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
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("agents");
    let ws = ws.to_str().unwrap();
    let created = run(&["init", ws]);
    assert_eq!(created.status.code(), Some(0), "{}", stderr(&created));
    let valid = run(&["validate", "-w", ws]);
    assert_eq!(valid.status.code(), Some(0), "{}", stderr(&valid));
    assert!(stdout(&valid).starts_with("ok: 1 agent(s)"));
    let again = run(&["init", ws]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("refusing to overwrite"));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["run"]).status.code(), Some(2));
    assert_eq!(run(&["frobnicate"]).status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let missing = run(&["run", "-w", dir.path().to_str().unwrap(), "hi"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("not a Keel workspace"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn a_failed_run_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    // The contract requires list_dir; the script answers at once for this input.
    std::fs::write(
        dir.path().join("resources/scripts/offline.yaml"),
        "conversations:\n  - steps:\n      - text: \"I answer without looking.\"\n",
    )
    .unwrap();
    let output = run(&["run", "-w", dir.path().to_str().unwrap(), "Hi"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("execution contract violated"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn events_globs_choose_what_goes_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let output = run(&[
        "run",
        "-w",
        dir.path().to_str().unwrap(),
        "--events",
        "runtime.tool.*",
        "--events",
        "runtime.request.completed",
        "What is here?",
    ]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let lines: Vec<Value> = stderr(&output)
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
    assert!(stdout(&output).contains("This workspace holds"));
}

#[test]
fn an_unknown_agent_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let output = run(&[
        "run",
        "-w",
        dir.path().to_str().unwrap(),
        "--agent",
        "nobody",
        "Hi",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("unknown agent `nobody` (agents: assistant)"),
        "{}",
        stderr(&output)
    );
    let ok = run(&[
        "run",
        "-w",
        dir.path().to_str().unwrap(),
        "--agent",
        "assistant",
        "Hi",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
}

#[test]
fn serve_answers_health_and_chat_completions_and_refuses_public_addresses() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    copy_tree(&quickstart_dir(), dir.path());
    let ws = dir.path().to_str().unwrap();

    let public = run(&["serve", "-w", ws, "--listen", "0.0.0.0:0"]);
    assert_eq!(public.status.code(), Some(2));
    assert!(stderr(&public).contains("loopback"), "{}", stderr(&public));

    let mut server = crate::common::keel()
        .args(["serve", "-w", ws, "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap()
        .to_owned();
    let request = |text: String| {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        stream.write_all(text.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let health = request(format!(
        "GET /api/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    ));
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains(r#"{"status":"ok"}"#), "{health}");
    let body = r#"{"model":"assistant","messages":[{"role":"user","content":"What is in this workspace?"}]}"#;
    let completion = request(format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    assert!(completion.starts_with("HTTP/1.1 200"), "{completion}");
    assert!(completion.contains("chat.completion"), "{completion}");
    assert!(completion.contains("This workspace holds"), "{completion}");
    let _ = server.kill();
    let _ = server.wait();
}
