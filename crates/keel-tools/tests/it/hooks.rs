//! The hook runner against real scripts, processes and a loopback HTTP server: the Claude
//! Code protocol (deny, exit 2, updatedInput, additionalContext, continue: false), hook errors
//! and their settling, timeouts that kill the whole process group, http hooks, and how the
//! outcomes of several hooks combine.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{Request, Response, StatusCode, header};
use keel_test_support::TempWorkspace;
use keel_test_support::process::{alive, read_pid, wait_gone};
use keel_tools::hooks::{
    Combined, CompiledHook, HookError, HookInput, HookOutcome, InProcessHook, PermissionDecision,
    Settled, combine, run_hook, settle,
};
use keel_workspace::{Duration, HookEvent, HookHandler, HookOnError, HookSpec};
use serde_json::{Map, Value, json};

use crate::write;

/// Writes an executable script `rel` into `root`.
fn script(root: &Path, rel: &str, body: &str) {
    write(root, rel, body);
    let path = root.join(rel);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn command_hook(event: HookEvent, command: &[&str], timeout: Option<Duration>) -> HookSpec {
    HookSpec {
        sandbox: Default::default(),
        event,
        matcher: None,
        handler: HookHandler::Command {
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            timeout,
        },
        on_error: HookOnError::Warn,
        enabled: true,
    }
}

fn pre_tool_input(root: &Path) -> HookInput {
    HookInput {
        tool_name: Some("shell".to_owned()),
        tool_input: Some(json!({ "command": "rm -rf /" })),
        tool_use_id: Some("call_1".to_owned()),
        session_id: Some("ses_1".to_owned()),
        request_id: Some("run_1".to_owned()),
        agent: Some("tester".to_owned()),
        ..HookInput::new(HookEvent::PreToolUse, root)
    }
}

/// Runs a `sh` hook whose body is `body`, as a PreToolUse hook in a fresh directory.
async fn run_sh(body: &str) -> Result<HookOutcome, HookError> {
    let dir = TempWorkspace::new();
    script(dir.path(), "hook.sh", &format!("#!/bin/sh\n{body}\n"));
    let spec = command_hook(HookEvent::PreToolUse, &["./hook.sh"], None);
    run_hook(
        "h",
        &spec,
        &pre_tool_input(dir.path()),
        dir.path(),
        &BTreeMap::new(),
    )
    .await
}

/// The PreToolUse example of the Claude Code hooks documentation, nearly verbatim: it reads
/// the input from stdin and denies dangerous shell commands.
const CLAUDE_CODE_SCRIPT: &str = r#"#!/usr/bin/env python3
import json
import os
import sys

try:
    input_data = json.load(sys.stdin)
except json.JSONDecodeError as e:
    print(f"Error: Invalid JSON input: {e}", file=sys.stderr)
    sys.exit(1)

tool_name = input_data.get("tool_name", "")
tool_input = input_data.get("tool_input", {})
command = tool_input.get("command", "")

with open("seen.json", "w") as f:
    json.dump({"input": input_data, "env": {
        k: os.environ.get(k) for k in
        ["KEEL_HOOK_EVENT", "KEEL_HOOK_NAME", "CLAUDE_PROJECT_DIR", "EXTRA"]}}, f)

if tool_name == "shell" and "rm -rf" in command:
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": f"{tool_name}: refusing `{command}`",
        }
    }
    print(json.dumps(output))
sys.exit(0)
"#;

#[tokio::test]
async fn a_claude_code_script_denies_with_its_reason() {
    let dir = TempWorkspace::new();
    script(dir.path(), "hooks/guard.py", CLAUDE_CODE_SCRIPT);
    let spec = command_hook(HookEvent::PreToolUse, &["./hooks/guard.py"], None);
    let env = BTreeMap::from([("EXTRA".to_owned(), "extra-value".to_owned())]);
    let outcome = run_hook(
        "guard",
        &spec,
        &pre_tool_input(dir.path()),
        dir.path(),
        &env,
    )
    .await
    .unwrap();
    assert_eq!(outcome.decision, Some(PermissionDecision::Deny));
    assert_eq!(
        outcome.decision_reason.as_deref(),
        Some("shell: refusing `rm -rf /`")
    );

    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("seen.json")).unwrap())
            .unwrap();
    let root = dir.path().to_str().unwrap();
    assert_eq!(
        seen["input"],
        json!({
            "hook_event_name": "PreToolUse",
            "session_id": "ses_1",
            "cwd": root,
            "tool_name": "shell",
            "tool_input": { "command": "rm -rf /" },
            "tool_use_id": "call_1",
            "request_id": "run_1",
            "agent": "tester",
        })
    );
    assert_eq!(
        seen["env"],
        json!({
            "KEEL_HOOK_EVENT": "PreToolUse",
            "KEEL_HOOK_NAME": "guard",
            "CLAUDE_PROJECT_DIR": root,
            "EXTRA": "extra-value",
        })
    );
}

#[tokio::test]
async fn empty_stdout_is_no_opinion() {
    let outcome = run_sh("cat > /dev/null").await.unwrap();
    assert!(outcome.is_empty());
}

#[tokio::test]
async fn exit_2_blocks_with_stderr_as_the_reason() {
    let outcome = run_sh("echo '  not on main  ' >&2; exit 2").await.unwrap();
    assert_eq!(outcome, HookOutcome::blocked("not on main"));
}

#[tokio::test]
async fn exit_1_is_a_hook_error_that_warn_settles_as_a_warning() {
    let result = run_sh("echo oops >&2; exit 1").await;
    assert_eq!(
        result,
        Err(HookError::Exit {
            code: Some(1),
            stderr: "oops".to_owned()
        })
    );
    assert_eq!(
        result.as_ref().unwrap_err().to_string(),
        "the hook exited with status 1: oops"
    );
    let settled = settle(result.clone(), HookOnError::Warn);
    assert!(matches!(settled, Settled::Warn(HookError::Exit { .. })));
    assert!(matches!(
        settle(result.clone(), HookOnError::Skip),
        Settled::Skip(_)
    ));
    assert!(matches!(
        settle(result.clone(), HookOnError::Deny),
        Settled::Deny(_)
    ));
    assert!(matches!(
        settle(result, HookOnError::FailRun),
        Settled::FailRun(_)
    ));
    // A block is an answer, whatever onError says.
    let block = run_sh("echo no >&2; exit 2").await;
    assert_eq!(
        settle(block, HookOnError::FailRun),
        Settled::Outcome(HookOutcome::blocked("no"))
    );
}

#[tokio::test]
async fn invalid_json_on_stdout_is_invalid_output() {
    let result = run_sh("echo 'allow, I guess'").await;
    let Err(HookError::InvalidOutput { excerpt, .. }) = result else {
        panic!("expected invalid output, got {result:?}");
    };
    assert_eq!(excerpt, "allow, I guess");
    let wrong_shape =
        run_sh(r#"echo '{"hookSpecificOutput": {"permissionDecision": "yes"}}'"#).await;
    assert!(matches!(wrong_shape, Err(HookError::InvalidOutput { .. })));
}

#[tokio::test]
async fn updated_input_and_additional_context_are_read() {
    let outcome = run_sh(
        r#"cat <<'EOF'
{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
 "updatedInput": {"command": "ls"}, "additionalContext": "the repo is read-only"}}
EOF"#,
    )
    .await
    .unwrap();
    assert_eq!(outcome.decision, Some(PermissionDecision::Allow));
    assert_eq!(
        outcome.updated_input,
        Some(object(json!({ "command": "ls" })))
    );
    assert_eq!(
        outcome.additional_context.as_deref(),
        Some("the repo is read-only")
    );
}

#[tokio::test]
async fn continue_false_stops_the_run_and_decision_block_blocks() {
    let stop = run_sh(r#"echo '{"continue": false, "stopReason": "budget spent"}'"#)
        .await
        .unwrap();
    assert_eq!(stop.stop.as_deref(), Some("budget spent"));
    let block = run_sh(r#"echo '{"decision": "block", "reason": "say please"}'"#)
        .await
        .unwrap();
    assert_eq!(block, HookOutcome::blocked("say please"));
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let dir = TempWorkspace::new();
    let spec = command_hook(HookEvent::PreToolUse, &["./nope.sh"], None);
    let result = run_hook(
        "h",
        &spec,
        &pre_tool_input(dir.path()),
        dir.path(),
        &BTreeMap::new(),
    )
    .await;
    let Err(HookError::Spawn { program, message }) = result else {
        panic!("expected a spawn error, got {result:?}");
    };
    assert_eq!(
        (program.as_str(), message.as_str()),
        ("./nope.sh", "program not found")
    );
}

#[tokio::test]
async fn a_hanging_hook_is_killed_at_its_timeout() {
    let dir = TempWorkspace::new();
    script(
        dir.path(),
        "hang.sh",
        "#!/bin/sh\necho $$ > pid.tmp && mv pid.tmp pid\nexec sleep 60\n",
    );
    let spec = command_hook(
        HookEvent::PreToolUse,
        &["./hang.sh"],
        Some(Duration::from_millis(500)),
    );
    let result = run_hook(
        "hang",
        &spec,
        &pre_tool_input(dir.path()),
        dir.path(),
        &BTreeMap::new(),
    )
    .await;
    assert_eq!(
        result,
        Err(HookError::Timeout(std::time::Duration::from_millis(500)))
    );
    let pid = read_pid(&dir.path().join("pid")).await;
    assert!(wait_gone(pid).await, "the hook process {pid} survived");
}

#[tokio::test]
async fn a_hook_that_forked_a_grandchild_has_both_killed_at_its_timeout() {
    let dir = TempWorkspace::new();
    script(
        dir.path(),
        "fork.sh",
        "#!/bin/sh\nsleep 60 &\necho $! > child.tmp && mv child.tmp child\n\
         echo $$ > pid.tmp && mv pid.tmp pid\nwait\n",
    );
    let spec = command_hook(
        HookEvent::PostToolUse,
        &["./fork.sh"],
        Some(Duration::from_millis(500)),
    );
    let result = run_hook(
        "fork",
        &spec,
        &HookInput::new(HookEvent::PostToolUse, dir.path()),
        dir.path(),
        &BTreeMap::new(),
    )
    .await;
    assert!(matches!(result, Err(HookError::Timeout(_))), "{result:?}");
    let pid = read_pid(&dir.path().join("pid")).await;
    let grandchild = read_pid(&dir.path().join("child")).await;
    assert!(wait_gone(pid).await, "the hook process {pid} survived");
    assert!(
        wait_gone(grandchild).await,
        "the forked process {grandchild} survived"
    );
    assert!(!alive(grandchild));
}

/// A loopback server for http hooks: `/allow`, `/deny`, `/empty` (200 with no body), `/500`,
/// `/text` (200 with a body that is not JSON), and `/echo`, which answers with the request's
/// body and `x-token` header as `additionalContext`.
struct Server {
    addr: SocketAddr,
    _task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(answer);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { addr, _task: task }
    }

    fn hook(&self, path: &str) -> HookSpec {
        HookSpec {
            sandbox: Default::default(),
            event: HookEvent::PreToolUse,
            matcher: Some("shell".to_owned()),
            handler: HookHandler::Http {
                url: format!("http://{}{path}", self.addr),
                headers: BTreeMap::from([("x-token".to_owned(), "t0k3n".to_owned())]),
                timeout: None,
            },
            on_error: HookOnError::Deny,
            enabled: true,
        }
    }
}

async fn answer(request: Request<Body>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let token = request
        .headers()
        .get("x-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = to_bytes(request.into_body(), 1 << 20).await.unwrap();
    let json_answer = |value: Value| {
        Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(value.to_string()))
            .unwrap()
    };
    let decision = |decision: &str| {
        json!({ "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": format!("{decision} by policy"),
        }})
    };
    match path.as_str() {
        "/allow" => json_answer(decision("allow")),
        "/deny" => json_answer(decision("deny")),
        "/empty" => Response::new(Body::empty()),
        "/text" => Response::new(Body::from("fine")),
        "/echo" => json_answer(json!({ "hookSpecificOutput": {
            "additionalContext": format!("{token} {}", String::from_utf8_lossy(&body)),
        }})),
        _ => Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from("database on fire"))
            .unwrap(),
    }
}

async fn run_http(server: &Server, path: &str) -> Result<HookOutcome, HookError> {
    let dir = TempWorkspace::new();
    let hook = CompiledHook::new("remote", &server.hook(path)).unwrap();
    assert!(hook.matches(Some("shell")));
    assert!(!hook.matches(Some("read_file")));
    hook.run(&pre_tool_input(dir.path()), dir.path(), &BTreeMap::new())
        .await
}

#[tokio::test]
async fn http_hooks_allow_deny_and_fail() {
    let server = Server::start().await;
    let allow = run_http(&server, "/allow").await.unwrap();
    assert_eq!(allow.decision, Some(PermissionDecision::Allow));
    assert_eq!(allow.decision_reason.as_deref(), Some("allow by policy"));
    let deny = run_http(&server, "/deny").await.unwrap();
    assert_eq!(deny.decision, Some(PermissionDecision::Deny));
    assert!(run_http(&server, "/empty").await.unwrap().is_empty());
    assert!(matches!(
        run_http(&server, "/text").await,
        Err(HookError::InvalidOutput { .. })
    ));
    let failed = run_http(&server, "/500").await;
    assert_eq!(
        failed,
        Err(HookError::Http {
            status: 500,
            body: "database on fire".to_owned()
        })
    );
    assert!(matches!(
        settle(failed, HookOnError::Deny),
        Settled::Deny(HookError::Http { status: 500, .. })
    ));
}

#[tokio::test]
async fn http_hooks_get_the_input_as_json_with_their_headers() {
    let server = Server::start().await;
    let outcome = run_http(&server, "/echo").await.unwrap();
    let context = outcome.additional_context.unwrap();
    let (token, body) = context.split_once(' ').unwrap();
    assert_eq!(token, "t0k3n");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["hook_event_name"], "PreToolUse");
    assert_eq!(body["tool_input"], json!({ "command": "rm -rf /" }));
}

#[tokio::test]
async fn an_unreachable_http_hook_is_a_connect_error() {
    // Bind a port, then free it: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let server = Server {
        addr,
        _task: tokio::spawn(async {}),
    };
    let result = run_http(&server, "/allow").await;
    assert!(matches!(result, Err(HookError::Connect(_))), "{result:?}");
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn decided(decision: PermissionDecision, reason: &str) -> HookOutcome {
    HookOutcome {
        decision: Some(decision),
        decision_reason: Some(reason.to_owned()),
        ..HookOutcome::default()
    }
}

/// A decision and its reason.
type Decided = (PermissionDecision, &'static str);

#[test]
fn the_strictest_decision_wins_with_the_first_reason_at_its_level() {
    use PermissionDecision::{Allow, Ask, Deny};
    let cases: &[(&[Decided], Option<Decided>)] = &[
        (&[], None),
        (&[(Allow, "a")], Some((Allow, "a"))),
        (&[(Allow, "a"), (Ask, "b")], Some((Ask, "b"))),
        (&[(Ask, "a"), (Allow, "b")], Some((Ask, "a"))),
        (&[(Allow, "a"), (Deny, "b"), (Ask, "c")], Some((Deny, "b"))),
        (&[(Deny, "a"), (Deny, "b")], Some((Deny, "a"))),
        (&[(Ask, "a"), (Ask, "b"), (Allow, "c")], Some((Ask, "a"))),
    ];
    for (decisions, expected) in cases {
        let combined = combine(decisions.iter().map(|(d, r)| decided(*d, r)));
        let got = combined
            .decision
            .map(|d| (d, combined.decision_reason.clone().unwrap_or_default()));
        let expected = expected.map(|(d, r)| (d, r.to_owned()));
        assert_eq!(got, expected, "{decisions:?}");
    }
}

#[test]
fn the_first_block_and_stop_win_inputs_layer_and_contexts_join() {
    let first = HookOutcome {
        updated_input: Some(object(json!({ "command": "ls", "timeout": 5 }))),
        additional_context: Some("one".to_owned()),
        block: Some("first block".to_owned()),
        ..HookOutcome::default()
    };
    let second = HookOutcome {
        updated_input: Some(object(json!({ "timeout": 10 }))),
        stop: Some("first stop".to_owned()),
        ..HookOutcome::default()
    };
    let third = HookOutcome {
        additional_context: Some("two".to_owned()),
        block: Some("second block".to_owned()),
        stop: Some("second stop".to_owned()),
        ..HookOutcome::default()
    };
    let combined = combine([first, HookOutcome::default(), second, third]);
    assert_eq!(
        combined,
        Combined {
            decision: None,
            decision_reason: None,
            updated_input: Some(object(json!({ "command": "ls", "timeout": 10 }))),
            additional_context: Some("one\ntwo".to_owned()),
            block: Some("first block".to_owned()),
            stop: Some("first stop".to_owned()),
        }
    );
}

#[test]
fn non_blocking_events_drop_everything_ai_facing() {
    let combined = combine([HookOutcome {
        decision: Some(PermissionDecision::Deny),
        decision_reason: Some("no".to_owned()),
        updated_input: Some(object(json!({ "command": "ls" }))),
        additional_context: Some("psst".to_owned()),
        block: Some("blocked".to_owned()),
        stop: Some("enough".to_owned()),
    }]);
    for event in [
        HookEvent::PostToolUse,
        HookEvent::SessionStop,
        HookEvent::RunEnd,
    ] {
        assert_eq!(
            combined.clone().for_event(event),
            Combined {
                stop: Some("enough".to_owned()),
                ..Combined::default()
            },
            "{event:?}"
        );
    }
    for event in [HookEvent::PreToolUse, HookEvent::PromptSubmit] {
        assert_eq!(combined.clone().for_event(event), combined, "{event:?}");
    }
}

/// An SDK hook that adds context to every prompt.
struct Greeter;

#[async_trait::async_trait]
impl InProcessHook for Greeter {
    fn name(&self) -> &str {
        "greeter"
    }

    fn event(&self) -> HookEvent {
        HookEvent::PromptSubmit
    }

    async fn call(&self, input: &HookInput) -> Result<HookOutcome, HookError> {
        Ok(HookOutcome {
            additional_context: Some(format!("re: {}", input.prompt.as_deref().unwrap_or(""))),
            ..HookOutcome::default()
        })
    }
}

#[tokio::test]
async fn in_process_hooks_answer_like_declared_ones() {
    let hook: Box<dyn InProcessHook> = Box::new(Greeter);
    assert!(hook.matches(None));
    let input = HookInput {
        prompt: Some("hello".to_owned()),
        ..HookInput::new(hook.event(), "/ws")
    };
    let outcome = hook.call(&input).await.unwrap();
    assert_eq!(outcome.additional_context.as_deref(), Some("re: hello"));
}
