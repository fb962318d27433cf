//! Exec sessions with real programs on real terminals: an interactive `python3 -i`, a program
//! asking y/n, a program printing 10 MB (the buffer stays bounded and says what it dropped),
//! sessions ending with their run (no process left in the process table), and ids that are
//! not running answered clearly.

use std::path::Path;
use std::time::{Duration, Instant};

use keel_test_support::TempWorkspace;
use keel_tools::builtin::{Exec, ExecKind};
use keel_tools::exec::{MAX_BUFFERED, end_run};
use keel_types::Tool;
use serde_json::{Value, json};

use crate::ctx;

async fn call(root: &Path, kind: ExecKind, args: Value) -> Result<Value, String> {
    let out = Exec::new(kind).call(&ctx(root), args).await;
    out.map(|o| serde_json::from_str(&o.content).unwrap())
        .map_err(|e| e.to_string())
}

/// Reads the session until its output (all reads together) contains `wanted`, or it ends.
async fn read_until(root: &Path, id: &str, mut seen: String, wanted: &str) -> (String, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if seen.contains(wanted) {
            return (seen, Value::Null);
        }
        assert!(
            Instant::now() < deadline,
            "never saw {wanted:?} in {seen:?}"
        );
        let read = call(root, ExecKind::Read, json!({"id": id, "waitMs": 2000}))
            .await
            .unwrap();
        seen.push_str(read["output"].as_str().unwrap());
        if read["ended"] == true {
            assert!(seen.contains(wanted), "ended without {wanted:?}: {seen:?}");
            return (seen, read);
        }
    }
}

/// Pids of live processes whose command line contains `marker`.
fn running(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
                && keel_test_support::process::alive(*pid)
        })
        .collect()
}

#[tokio::test]
async fn python_answers_an_expression_typed_into_its_repl() {
    let ws = TempWorkspace::new();
    let started = call(
        ws.path(),
        ExecKind::Start,
        json!({"command": ["python3", "-i", "-q"], "waitMs": 5000}),
    )
    .await
    .unwrap();
    let id = started["id"].as_str().unwrap().to_owned();
    let (_, _) = read_until(
        ws.path(),
        &id,
        started["output"].as_str().unwrap().into(),
        ">>> ",
    )
    .await;
    let answered = call(
        ws.path(),
        ExecKind::Write,
        json!({"id": id, "input": "6 * 7\n", "waitMs": 5000}),
    )
    .await
    .unwrap();
    let (seen, _) = read_until(
        ws.path(),
        &id,
        answered["output"].as_str().unwrap().into(),
        "42",
    )
    .await;
    assert!(
        seen.contains("6 * 7"),
        "the terminal echoes what was typed: {seen:?}"
    );
    let resized = call(
        ws.path(),
        ExecKind::Resize,
        json!({"id": id, "rows": 40, "cols": 120}),
    )
    .await;
    assert!(resized.is_ok(), "{resized:?}");
    let stopped = call(ws.path(), ExecKind::Stop, json!({"id": id}))
        .await
        .unwrap();
    assert_eq!(stopped["ended"], true);
    let again = call(ws.path(), ExecKind::Read, json!({"id": id}))
        .await
        .unwrap_err();
    assert!(again.contains("is not running"), "{again}");
}

#[tokio::test]
async fn a_program_asking_yes_or_no_gets_its_answer_and_exits() {
    let ws = TempWorkspace::new();
    let started = call(
        ws.path(),
        ExecKind::Start,
        json!({"command": "printf 'Proceed? [y/n] '; read answer; echo \"got $answer\"", "waitMs": 5000}),
    )
    .await
    .unwrap();
    let id = started["id"].as_str().unwrap().to_owned();
    read_until(
        ws.path(),
        &id,
        started["output"].as_str().unwrap().into(),
        "Proceed? [y/n]",
    )
    .await;
    let answered = call(
        ws.path(),
        ExecKind::Write,
        json!({"id": id, "input": "y\n"}),
    )
    .await
    .unwrap();
    let (seen, mut end) = read_until(
        ws.path(),
        &id,
        answered["output"].as_str().unwrap().into(),
        "got y",
    )
    .await;
    assert!(seen.contains("got y"), "{seen:?}");
    // Then it exits, and the session says so with the exit code.
    let deadline = Instant::now() + Duration::from_secs(60);
    while end["ended"] != true {
        assert!(Instant::now() < deadline, "the program did not end");
        end = call(ws.path(), ExecKind::Read, json!({"id": id, "waitMs": 2000}))
            .await
            .unwrap();
    }
    assert_eq!(end["exit_code"], 0, "{end}");
}

#[tokio::test]
async fn ten_megabytes_of_output_stay_within_the_buffer_and_say_what_was_dropped() {
    let ws = TempWorkspace::new();
    let started = call(
        ws.path(),
        ExecKind::Start,
        // Writes it all (the session drains the terminal as it comes), then says so in a file.
        json!({"command": ["python3", "-c", "import sys, time; sys.stdout.write('x' * 10_000_000); sys.stdout.flush(); open('written', 'w').close(); time.sleep(600)"], "waitMs": 0}),
    )
    .await
    .unwrap();
    let id = started["id"].as_str().unwrap().to_owned();
    // Nothing is read until the program has written it all: the buffer must have dropped.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ws.exists("written") {
        assert!(
            Instant::now() < deadline,
            "the program did not finish writing"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut total = started["output"].as_str().unwrap().len();
    let mut dropped_said = false;
    while total < 10_000_000 {
        assert!(Instant::now() < deadline, "read {total} bytes");
        let read = call(ws.path(), ExecKind::Read, json!({"id": id, "waitMs": 2000}))
            .await
            .unwrap();
        let text = read["output"].as_str().unwrap();
        assert!(
            text.len() <= MAX_BUFFERED + 200,
            "one read is bounded: {}",
            text.len()
        );
        if let Some(rest) = text.strip_prefix("[… ") {
            dropped_said = true;
            let dropped: usize = rest.split(' ').next().unwrap().parse().unwrap();
            total += dropped;
        }
        total += text.chars().filter(|c| *c == 'x').count();
        if read["ended"] == true {
            break;
        }
    }
    assert_eq!(total, 10_000_000, "every byte is read or said dropped");
    assert!(dropped_said, "the buffer dropped older output and said so");
    call(ws.path(), ExecKind::Stop, json!({"id": id}))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_runs_sessions_end_with_it_and_leave_no_process() {
    let ws = TempWorkspace::new();
    let marker = "1234.875";
    let mut ids = Vec::new();
    for _ in 0..2 {
        let started = call(
            ws.path(),
            ExecKind::Start,
            json!({"command": format!("sleep {marker} & sleep {marker}"), "waitMs": 0}),
        )
        .await
        .unwrap();
        ids.push(started["id"].as_str().unwrap().to_owned());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while running(marker).len() < 4 {
        assert!(Instant::now() < deadline, "the sleepers did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    end_run("run_test");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !running(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left running: {:?}",
            running(marker)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gone = call(
        ws.path(),
        ExecKind::Write,
        json!({"id": ids[0], "input": "x"}),
    )
    .await
    .unwrap_err();
    assert!(gone.contains("never carried over"), "{gone}");
}
