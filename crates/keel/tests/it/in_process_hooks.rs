//! Hooks written in Rust obey the hook rules as declared hooks do: they run in their place in
//! the declared order (after the workspace's hooks of their event, in registration order),
//! within a timeout, and a failure is settled by their `onError`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel::hooks::HookError;
use keel::hooks::{HookInput, HookOnError, HookOutcome, InProcessHook};
use keel::{ErrorCode, EventPayload, HookEvent};
use keel::{RunResponse, RunStatus, Runtime};
use keel_test_support::TempWorkspace;

use crate::common;

/// What a Rust hook does when called.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Appends its name to order.log and has no opinion.
    Log,
    /// Never answers.
    Hang,
    /// Fails.
    Fail,
}

struct RustHook {
    name: &'static str,
    root: std::path::PathBuf,
    behaviour: Behaviour,
    timeout: Duration,
    on_error: HookOnError,
}

impl RustHook {
    fn new(ws: &TempWorkspace, name: &'static str, behaviour: Behaviour) -> Self {
        Self {
            name,
            root: ws.path().to_path_buf(),
            behaviour,
            timeout: keel::hooks::DEFAULT_TIMEOUT,
            on_error: HookOnError::Warn,
        }
    }
}

#[async_trait]
impl InProcessHook for RustHook {
    fn name(&self) -> &str {
        self.name
    }

    fn event(&self) -> HookEvent {
        HookEvent::PreToolUse
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn on_error(&self) -> HookOnError {
        self.on_error
    }

    async fn call(&self, _input: &HookInput) -> Result<HookOutcome, HookError> {
        match self.behaviour {
            Behaviour::Log => {
                let log = self.root.join("order.log");
                let mut text = std::fs::read_to_string(&log).unwrap_or_default();
                text.push_str(self.name);
                text.push('\n');
                std::fs::write(log, text).unwrap();
                Ok(HookOutcome::default())
            }
            Behaviour::Hang => std::future::pending().await,
            Behaviour::Fail => Err(HookError::Invalid("the rules file is missing".into())),
        }
    }
}

/// Tool `deploy` (appends to deployed.txt), allowed by policy, with a declared `PreToolUse`
/// hook `declared` that appends its name to order.log.
fn workspace() -> TempWorkspace {
    common::agent_and_model("http://127.0.0.1:9/v1", &["deploy"], "")
        .runtime("{ defaultAgent: assistant }")
        .tool(
            "deploy",
            r#"
            description: Deploys a service.
            schema: { type: object, properties: { service: { type: string } } }
            impl: { kind: command, command: ["sh", "-c", "cat >> deployed.txt; echo deployed"] }
            "#,
        )
        .policy("p", "{ rules: [{ tool: deploy, decision: allow }] }")
        .hook(
            "declared",
            r#"
            event: PreToolUse
            handler: { kind: command, command: ["sh", "-c", "cat > /dev/null; echo declared >> order.log"] }
            "#,
        )
        .build()
}

async fn deploy(runtime: &Runtime) -> (RunResponse, Vec<keel::Event>) {
    let handle = runtime
        .tools()
        .call(None, "deploy", r#"{"service":"web"}"#)
        .await
        .unwrap();
    let response = handle.wait().await.unwrap();
    let events = common::stored(runtime, &response).await;
    (response, events)
}

/// The (hook, onError) of every `runtime.hook.failed` event.
fn failures(events: &[keel::Event]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::HookFailed {
                hook,
                error,
                on_error,
                ..
            } => Some((hook.clone(), error.clone(), on_error.to_string())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn rust_hooks_run_after_the_declared_ones_in_registration_order() {
    let ws = workspace();
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .hook(Arc::new(RustHook::new(&ws, "first", Behaviour::Log)))
        .hook(Arc::new(RustHook::new(&ws, "second", Behaviour::Log)))
        .build()
        .unwrap();

    let (response, events) = deploy(&runtime).await;

    assert_eq!(response.status, RunStatus::Completed, "{response:?}");
    assert_eq!(ws.read("order.log"), "declared\nfirst\nsecond\n");
    let recorded: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::HookCompleted { hook, .. } => Some(hook.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(recorded, ["declared", "first", "second"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rust_hook_past_its_timeout_is_settled_by_its_on_error() {
    let ws = workspace();
    let hang = RustHook {
        timeout: Duration::from_millis(200),
        on_error: HookOnError::Deny,
        ..RustHook::new(&ws, "hangs", Behaviour::Hang)
    };
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .hook(Arc::new(hang))
        .build()
        .unwrap();

    let (response, events) = deploy(&runtime).await;

    assert_eq!(response.status, RunStatus::Failed, "{response:?}");
    assert!(!ws.exists("deployed.txt"), "the call was denied");
    let failed = failures(&events);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "hangs");
    assert!(failed[0].1.contains("timed out"), "{failed:?}");
    assert_eq!(failed[0].2, "deny");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_rust_hook_with_fail_run_ends_the_run() {
    let ws = workspace();
    let fail = RustHook {
        on_error: HookOnError::FailRun,
        ..RustHook::new(&ws, "rules", Behaviour::Fail)
    };
    let runtime = Runtime::builder()
        .workspace(ws.path())
        .hook(Arc::new(fail))
        .build()
        .unwrap();

    let (response, events) = deploy(&runtime).await;

    assert_eq!(response.status, RunStatus::Failed, "{response:?}");
    assert!(!ws.exists("deployed.txt"));
    let failed = failures(&events);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].1.contains("the rules file is missing"));
    assert_eq!(failed[0].2, "fail-run");
    assert_eq!(common::failure_code(&events), Some(ErrorCode::HookStopped));
}
