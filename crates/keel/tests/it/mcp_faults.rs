//! MCP servers failing the way real ones do, against real processes: the fault server of
//! keel-test-support (`fixtures/mcp_fault_server.py`, stdlib Python over stdio) killed
//! mid-call, never answering `initialize`, printing garbage on stdout, crashing, returning
//! 20 MB; and the protocol's moving parts a server drives — tools listed over several pages,
//! `tools/list_changed`, `isError`, images, progress, `notifications/cancelled` when a run is
//! cancelled, and the end of the server's whole process group on shutdown.
//!
//! Runs go through the SDK with a scripted model that makes the calls and then answers with
//! the last tool result, so a run's answer is what the model read. Nothing sleeps for a fixed
//! time: the tests poll a condition (a pid file, the server's log, `Runtime::mcp_servers`)
//! with a generous deadline.

use std::path::Path;
use std::time::{Duration, Instant};

use keel::{AdapterEvent, GuardDecision};
use keel::{
    ArtifactRecord, Event, EventPayload, RequestOptions, RunHandle, RunResponse, RunStatus,
    Runtime, ServerState, ServerStatus,
};
use keel_test_support::process::alive;
use keel_test_support::test_clients::mcp_fault_server;
use keel_test_support::{TempWorkspace, WorkspaceBuilder};
use serde_json::{Value, json};

/// How long a condition may take to come true on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// An `McpServer` spec running the fault server with `flags` (relative file names land in the
/// workspace, the server's working directory), then the YAML lines of `extra`.
fn fault_server(flags: &[&str], extra: &str) -> String {
    let mut command = vec![
        "python3".to_owned(),
        mcp_fault_server().display().to_string(),
    ];
    command.extend(flags.iter().map(|flag| (*flag).to_owned()));
    format!(
        "transport: stdio\ncommand: {}\ncallTimeout: 300s\n{extra}",
        serde_json::to_string(&command).unwrap()
    )
}

/// A scripted model with one conversation per `(input, calls)`: the model makes `calls` in
/// one answer, then answers with the last tool result it read.
pub(crate) fn script(turns: &[(&str, &[(&str, Value)])]) -> Value {
    let conversations: Vec<Value> = turns
        .iter()
        .map(|(input, calls)| {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(name, arguments)| json!({ "name": name, "arguments": arguments }))
                .collect();
            json!({
                "match": format!("^{input}$"),
                "steps": [{ "toolCalls": calls }, { "text": "{{last_tool_result}}" }]
            })
        })
        .collect();
    json!({ "conversations": conversations })
}

/// Agent `assistant` (the default) on `script`, offered `tools`, with every MCP tool allowed
/// by policy, and the `McpServer`s `servers` (name, spec).
fn workspace(servers: &[(&str, String)], tools: &[&str], script: &Value) -> TempWorkspace {
    let mut builder = WorkspaceBuilder::new()
        .runtime("{ defaultAgent: assistant }")
        .scripted_model("scripted", script)
        .agent(
            "assistant",
            &format!("{{ model: scripted, tools: {} }}", json!(tools)),
        )
        .policy("mcp", r#"{ rules: [{ tool: "mcp__*", decision: allow }] }"#);
    for (name, spec) in servers {
        builder = builder.document("McpServer", name, spec);
    }
    builder.build()
}

/// The common case: one fault server `f` with `flags`, all its tools offered.
pub(crate) fn one_server(flags: &[&str], script: &Value) -> (TempWorkspace, Runtime) {
    let ws = workspace(&[("f", fault_server(flags, ""))], &["mcp__f__*"], script);
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    (ws, runtime)
}

pub(crate) async fn start(runtime: &Runtime, input: &str) -> RunHandle {
    runtime
        .request(RequestOptions {
            input: input.into(),
            ..Default::default()
        })
        .await
        .unwrap()
}

/// The run's response and every live event.
pub(crate) async fn finish(mut handle: RunHandle) -> (RunResponse, Vec<Event>) {
    let mut events = Vec::new();
    while let Some(event) = handle.next_event().await {
        events.push(event);
    }
    (handle.wait().await.unwrap(), events)
}

async fn run(runtime: &Runtime, input: &str) -> (RunResponse, Vec<Event>) {
    finish(start(runtime, input).await).await
}

/// `(tool, ok, output)` of each `agent.tool.result`.
pub(crate) fn tool_results(events: &[Event]) -> Vec<(String, bool, String)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolResult {
                        tool, ok, output, ..
                    },
            } => Some((tool.clone(), *ok, output.clone())),
            _ => None,
        })
        .collect()
}

/// The one tool result of a run that made one call.
fn only_result(events: &[Event]) -> (String, bool, String) {
    let mut results = tool_results(events);
    assert_eq!(results.len(), 1, "{results:?}");
    results.remove(0)
}

fn artifacts(events: &[Event]) -> Vec<ArtifactRecord> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ArtifactCreated { artifact, .. } => Some(artifact.clone()),
            _ => None,
        })
        .collect()
}

pub(crate) fn server(runtime: &Runtime, name: &str) -> ServerStatus {
    runtime
        .mcp_servers()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap()
}

/// Polls `probe` until it returns `Ok`; `Err` says what it saw, for the failure message.
pub(crate) async fn eventually<T>(what: &str, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match probe() {
            Ok(value) => return value,
            Err(seen) if Instant::now() >= deadline => {
                panic!("{what}: not within {PATIENCE:?}; last seen: {seen}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// The messages the server logged (`--log`), one JSON object each; a line still being
/// written is left out.
fn server_log(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The pid a file holds once it is completely written (the fault server renames it into
/// place).
pub(crate) async fn pid_in(path: &Path) -> u32 {
    eventually(&format!("a pid in {}", path.display()), || {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .ok_or_else(|| "no pid yet".to_owned())
    })
    .await
}

pub(crate) fn sigkill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -KILL {pid}: {status}");
}

/// `(parent pid, process group)` of a running process, from `/proc/<pid>/stat`.
fn parent_and_group(pid: u32) -> (u32, u32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(") ").unwrap();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    (fields[1].parse().unwrap(), fields[2].parse().unwrap())
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_then_restarts_and_serves_the_next_one() {
    let script = script(&[
        ("slow", &[("mcp__f__slow", json!({ "ms": 600_000 }))]),
        ("echo", &[("mcp__f__echo", json!({ "text": "still here" }))]),
    ]);
    let (ws, runtime) = one_server(&["--pid-file", "server.pid"], &script);

    let handle = start(&runtime, "slow").await;
    // The file appears when the server starts executing `slow`: the call is in flight.
    let pid = pid_in(&ws.join("server.pid")).await;
    sigkill(pid);
    let (response, events) = finish(handle).await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let (tool, ok, output) = only_result(&events);
    assert_eq!(tool, "mcp__f__slow");
    assert!(!ok, "{output}");
    assert!(
        output.contains("MCP server `f`") && output.contains("during the call"),
        "the error says which server went away mid-call: {output}"
    );
    let seen = response.output.unwrap_or_default();
    assert!(seen.contains("during the call"), "the model read: {seen}");

    let status = eventually("server `f` ready again after a restart", || {
        let status = server(&runtime, "f");
        match status.state == ServerState::Ready && status.restarts >= 1 {
            true => Ok(status),
            false => Err(format!("{status:?}")),
        }
    })
    .await;
    let last_error = status.last_error.clone().unwrap_or_default();
    assert!(last_error.contains("signal: 9"), "{last_error}");
    let kinds: Vec<&str> = status.history.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["starting", "ready", "down", "restarting", "ready"],
        "{status:?}"
    );

    let (response, events) = run(&runtime, "echo").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(
        only_result(&events),
        ("mcp__f__echo".to_owned(), true, "still here".to_owned())
    );
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn a_crashing_server_is_restarted_and_its_exit_and_stderr_are_reported() {
    let script = script(&[
        ("crash", &[("mcp__f__crash", json!({}))]),
        ("echo", &[("mcp__f__echo", json!({ "text": "back" }))]),
    ]);
    let (_ws, runtime) = one_server(&[], &script);

    let (_, events) = run(&runtime, "crash").await;
    let (_, ok, output) = only_result(&events);
    assert!(!ok, "{output}");
    assert!(output.contains("MCP server `f`"), "{output}");

    let status = eventually("server `f` ready again after the crash", || {
        let status = server(&runtime, "f");
        match status.state == ServerState::Ready && status.restarts >= 1 {
            true => Ok(status),
            false => Err(format!("{status:?}")),
        }
    })
    .await;
    let last_error = status.last_error.unwrap_or_default();
    assert!(
        last_error.contains("exit status: 3") && last_error.contains("crashing on purpose"),
        "the exit status and the last stderr line explain the crash: {last_error}"
    );
    let (_, events) = run(&runtime, "echo").await;
    assert_eq!(
        only_result(&events),
        ("mcp__f__echo".to_owned(), true, "back".to_owned())
    );
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_times_out_while_the_other_serves() {
    let script = script(&[(
        "both",
        &[
            ("mcp__good__echo", json!({ "text": "from good" })),
            ("mcp__bad__echo", json!({ "text": "from bad" })),
        ],
    )]);
    let ws = workspace(
        &[
            (
                "bad",
                fault_server(&["--never-initialize"], "startupTimeout: 1s\ncwd: bad"),
            ),
            ("good", fault_server(&[], "")),
        ],
        &["mcp__good__*", "mcp__bad__*"],
        &script,
    );
    ws.mkdir("bad");
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();

    let (response, events) = run(&runtime, "both").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(
        tool_results(&events),
        [("mcp__good__echo".to_owned(), true, "from good".to_owned())],
        "the healthy server's tool ran, the other's did not"
    );
    let blocked: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolGuard {
                tool,
                decision: GuardDecision::Blocked,
                issues,
                ..
            } => Some(format!("{tool}: {}", issues[0].message)),
            _ => None,
        })
        .collect();
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert!(
        blocked[0]
            .starts_with("mcp__bad__echo: tool `mcp__bad__echo` is unavailable: MCP server `bad`")
            && blocked[0].contains("startupTimeout"),
        "{blocked:?}"
    );
    let seen = response.output.unwrap_or_default();
    assert!(
        seen.contains("MCP server `bad`") && seen.contains("startupTimeout"),
        "the model read why: {seen}"
    );
    // Headlined as what it is, not as a schema mismatch.
    assert!(
        seen.contains("tool call blocked: the tool is unavailable"),
        "{seen}"
    );

    let bad = server(&runtime, "bad");
    assert_eq!(bad.state, ServerState::Unavailable, "{bad:?}");
    assert!(bad.tools.is_empty(), "{bad:?}");
    assert_eq!(
        bad.last_error.as_deref(),
        Some("no answer to initialize within 1s (startupTimeout)"),
        "{bad:?}"
    );
    let good = server(&runtime, "good");
    assert_eq!(good.state, ServerState::Ready, "{good:?}");

    // Each attempt is a process of its own, killed when its handshake times out: once a
    // retry has timed out too, stopping leaves no process of `bad` (they run in `bad/`).
    // (A second retry has started only once the first one timed out.)
    eventually("a retry of `bad` timed out", || {
        let bad = server(&runtime, "bad");
        match bad.restarts >= 2 {
            true => Ok(()),
            false => Err(format!("{bad:?}")),
        }
    })
    .await;
    // Failing the same way again is not noted again: the history stays readable.
    let bad = server(&runtime, "bad");
    let downs = bad
        .history
        .iter()
        .filter(|e| e.kind.as_str() == "down")
        .count();
    assert_eq!(downs, 1, "{bad:?}");
    let dir = std::fs::canonicalize(ws.join("bad")).unwrap();
    runtime.stop_mcp().await;
    eventually(
        "no process of `bad` left after stop",
        || match processes_in(&dir) {
            left if left.is_empty() => Ok(()),
            left => Err(format!("alive: {left:?}")),
        },
    )
    .await;
}

/// The live processes whose working directory is `dir`.
fn processes_in(dir: &Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir)
                && alive(*pid)
        })
        .collect()
}

#[tokio::test]
async fn garbage_on_stdout_neither_stops_the_listing_nor_the_calls() {
    let script = script(&[(
        "echo",
        &[("mcp__f__echo", json!({ "text": "through the noise" }))],
    )]);
    let (_ws, runtime) = one_server(&["--garbage"], &script);

    runtime.settle_mcp().await;
    let status = server(&runtime, "f");
    assert_eq!(status.state, ServerState::Ready, "{status:?}");
    assert_eq!(status.tools.len(), 8, "{status:?}");

    let (response, events) = run(&runtime, "echo").await;
    assert_eq!(
        only_result(&events),
        (
            "mcp__f__echo".to_owned(),
            true,
            "through the noise".to_owned()
        )
    );
    assert_eq!(response.output.as_deref(), Some("through the noise"));
    let status = server(&runtime, "f");
    assert_eq!(
        (status.state, status.restarts),
        (ServerState::Ready, 0),
        "the noise did not end the session: {status:?}"
    );
    runtime.stop_mcp().await;
}

/// The test process's peak resident set size (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap()
        .to_owned();
    let kb: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kb * 1024
}

#[tokio::test]
async fn a_20_mb_result_becomes_an_artifact_and_the_model_reads_a_preview() {
    const BYTES: u64 = 20_000_000;
    let script = script(&[("big", &[("mcp__f__big", json!({ "bytes": BYTES }))])]);
    let (_ws, runtime) = one_server(&[], &script);
    runtime.settle_mcp().await;

    let before = peak_rss();
    let (response, events) = run(&runtime, "big").await;
    let growth = peak_rss().saturating_sub(before);

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    let (_, ok, output) = only_result(&events);
    assert!(ok);
    assert!(
        output.len() <= 65_536,
        "a preview, not the result: {}",
        output.len()
    );
    assert!(output.starts_with("0123456789abcdefghijklmnopqrstuvwxyz\n"));
    let artifacts = artifacts(&events);
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    let artifact = &artifacts[0];
    assert_eq!(
        (artifact.bytes, artifact.media_type.as_str()),
        (BYTES, "text/plain")
    );
    assert!(
        artifact.uri.starts_with("keel://artifacts/"),
        "{artifact:?}"
    );
    let seen = response.output.unwrap_or_default();
    assert!(
        seen.contains(&artifact.uri) && seen.contains("20000000 bytes in all"),
        "the model read the preview and where the rest is: {}",
        &seen[seen.len().saturating_sub(300)..]
    );
    let (_, content) = runtime
        .runs()
        .artifact(&artifact.uri)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(content.len() as u64, BYTES);
    assert!(content.starts_with(b"0123456789abcdefghijklmnopqrstuvwxyz\n"));

    // The result passes through a few whole copies on its way (the JSON line, the decoded
    // message, the mapped text, the artifact write), so the peak grows by some multiple of
    // 20 MB; a bound of 400 MB catches a client that buffers without bound or copies per
    // block. nextest runs each test in its own process, so the peak is this test's own.
    assert!(
        growth < 400 << 20,
        "peak RSS grew by {} MB for a 20 MB result",
        growth >> 20
    );
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn tools_listed_over_several_pages_are_all_offered_with_their_schemas() {
    let (ws, runtime) = one_server(&["--log", "f.log"], &script(&[]));
    runtime.settle_mcp().await;

    let tools = runtime.tools().specs(None).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "mcp__f__big",
            "mcp__f__change_tools",
            "mcp__f__crash",
            "mcp__f__echo",
            "mcp__f__fail",
            "mcp__f__image",
            "mcp__f__progress",
            "mcp__f__slow",
        ]
    );
    let echo = tools.iter().find(|t| t.name == "mcp__f__echo").unwrap();
    assert_eq!(echo.description, "Returns the text.");
    assert_eq!(echo.parameters["required"], json!(["text"]));
    let pages = server_log(&ws.join("f.log"))
        .iter()
        .filter(|m| m["method"] == "tools/list")
        .count();
    assert_eq!(pages, 4, "eight tools in pages of two");
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn a_tools_list_changed_notification_publishes_the_new_tool() {
    let script = script(&[
        ("change", &[("mcp__f__change_tools", json!({}))]),
        ("added", &[("mcp__f__added", json!({ "text": "new tool" }))]),
    ]);
    let (_ws, runtime) = one_server(&[], &script);

    let (_, events) = run(&runtime, "change").await;
    assert!(only_result(&events).1);
    eventually("tool mcp__f__added offered", || {
        let names: Vec<String> = runtime
            .tools()
            .specs(None)
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        match names.iter().any(|n| n == "mcp__f__added") {
            true => Ok(()),
            false => Err(format!("{names:?}")),
        }
    })
    .await;
    let status = server(&runtime, "f");
    assert!(
        status
            .history
            .iter()
            .any(|e| e.kind.as_str() == "tools_changed"),
        "{status:?}"
    );

    let (_, events) = run(&runtime, "added").await;
    assert_eq!(
        only_result(&events),
        ("mcp__f__added".to_owned(), true, "new tool".to_owned())
    );
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn an_is_error_result_is_a_tool_error_the_model_reads() {
    let script = script(&[("fail", &[("mcp__f__fail", json!({}))])]);
    let (_ws, runtime) = one_server(&[], &script);

    let (response, events) = run(&runtime, "fail").await;
    let (_, ok, output) = only_result(&events);
    assert!(!ok);
    assert!(
        output.contains("the fail tool failed on purpose"),
        "{output}"
    );
    let seen = response.output.unwrap_or_default();
    assert!(seen.contains("the fail tool failed on purpose"), "{seen}");
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn a_call_its_input_schema_refuses_never_reaches_the_server() {
    let script = script(&[("no text", &[("mcp__f__echo", json!({}))])]);
    let (ws, runtime) = one_server(&["--log", "f.log"], &script);

    let (response, events) = run(&runtime, "no text").await;
    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert!(tool_results(&events).is_empty());
    let decisions: Vec<GuardDecision> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolGuard { decision, .. } => Some(*decision),
            _ => None,
        })
        .collect();
    assert_eq!(decisions, [GuardDecision::Blocked]);
    let calls: Vec<Value> = server_log(&ws.join("f.log"))
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert!(calls.is_empty(), "{calls:?}");
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn an_image_result_is_stored_as_a_png_artifact() {
    let script = script(&[("image", &[("mcp__f__image", json!({}))])]);
    let (_ws, runtime) = one_server(&[], &script);

    let (_, events) = run(&runtime, "image").await;
    let (_, ok, output) = only_result(&events);
    assert!(ok, "{output}");
    let artifacts = artifacts(&events);
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    let artifact = &artifacts[0];
    assert_eq!(artifact.media_type, "image/png");
    assert!(
        output.starts_with("a one-pixel image") && output.contains(&artifact.uri),
        "{output}"
    );
    let (_, content) = runtime
        .runs()
        .artifact(&artifact.uri)
        .await
        .unwrap()
        .unwrap();
    assert!(content.starts_with(b"\x89PNG\r\n\x1a\n"), "{content:?}");
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn progress_notifications_become_events_of_the_call() {
    let script = script(&[("progress", &[("mcp__f__progress", json!({}))])]);
    let (ws, runtime) = one_server(&["--log", "f.log"], &script);

    let (_, events) = run(&runtime, "progress").await;
    // The server answers this only when the call carried a progress token.
    assert_eq!(
        only_result(&events),
        (
            "mcp__f__progress".to_owned(),
            true,
            "progress reported three times".to_owned()
        )
    );
    let call = server_log(&ws.join("f.log"))
        .into_iter()
        .find(|m| m["tool"] == "progress")
        .unwrap();
    assert!(!call["progressToken"].is_null(), "{call}");
    // Each notification is recorded as `agent.tool.progress` of the call, before its result.
    let progress: Vec<(f64, Option<f64>)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolProgress {
                        tool,
                        progress,
                        total,
                        ..
                    },
            } if tool == "mcp__f__progress" => Some((*progress, *total)),
            _ => None,
        })
        .collect();
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert!(progress.windows(2).all(|w| w[0].0 < w[1].0), "{progress:?}");
    assert_eq!(server(&runtime, "f").state, ServerState::Ready);
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn cancelling_a_run_sends_notifications_cancelled_for_its_call() {
    let script = script(&[("slow", &[("mcp__f__slow", json!({ "ms": 600_000 }))])]);
    let (ws, runtime) = one_server(&["--pid-file", "server.pid", "--log", "f.log"], &script);

    let handle = start(&runtime, "slow").await;
    pid_in(&ws.join("server.pid")).await;
    assert!(runtime.cancel(handle.request_id()).await.unwrap());
    let (response, _) = finish(handle).await;
    assert_eq!(response.status, RunStatus::Cancelled, "{response:?}");

    let log = ws.join("f.log");
    let call_id = server_log(&log)
        .into_iter()
        .find(|m| m["tool"] == "slow")
        .unwrap()["id"]
        .clone();
    eventually("notifications/cancelled for the slow call", || {
        let log = server_log(&log);
        match log
            .iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["requestId"] == call_id)
        {
            true => Ok(()),
            false => Err(format!("{log:?}")),
        }
    })
    .await;
    let status = server(&runtime, "f");
    assert_eq!(
        (status.state, status.restarts),
        (ServerState::Ready, 0),
        "a cancelled call leaves the server running: {status:?}"
    );
    runtime.stop_mcp().await;
}

#[tokio::test]
async fn stopping_mcp_ends_the_servers_whole_process_group() {
    let (ws, runtime) = one_server(&["--fork-child", "child.pid"], &script(&[]));
    runtime.settle_mcp().await;
    assert_eq!(server(&runtime, "f").state, ServerState::Ready);

    let child = pid_in(&ws.join("child.pid")).await;
    let (server_pid, group) = parent_and_group(child);
    assert_eq!(
        parent_and_group(server_pid).1,
        group,
        "the server and its child share a group"
    );
    assert_ne!(
        group,
        parent_and_group(std::process::id()).1,
        "a group of its own"
    );
    assert!(alive(server_pid) && alive(child));

    runtime.stop_mcp().await;
    eventually("the server and its child gone", || {
        match (alive(server_pid), alive(child)) {
            (false, false) => Ok(()),
            alive => Err(format!("alive (server, child): {alive:?}")),
        }
    })
    .await;
    assert_eq!(server(&runtime, "f").state, ServerState::Stopped);
}

#[tokio::test]
async fn dropping_the_runtime_stops_its_servers() {
    let (ws, runtime) = one_server(&["--fork-child", "child.pid"], &script(&[]));
    runtime.settle_mcp().await;
    let child = pid_in(&ws.join("child.pid")).await;
    let (server_pid, _) = parent_and_group(child);
    assert!(alive(server_pid) && alive(child));

    // No shutdown, no stop: the program just lets go of its runtime.
    drop(runtime);
    eventually("the server and its child gone", || {
        match (alive(server_pid), alive(child)) {
            (false, false) => Ok(()),
            alive => Err(format!("alive (server, child): {alive:?}")),
        }
    })
    .await;
}
